//! Regressions of the review of issue 53's server (helper H6): each test pins one fix against
//! the real `coxswain-acp --echo` binary, through the official Rust client (and raw bytes on
//! stdin for the line bound). docs/acp.md is the contract; SPEC rules are cited where they
//! apply.

mod support;

use std::process::Stdio;

use serde_json::{json, Value};
use support::{tempdir, Acp, Version::V1, Version::V2, BIN, WAIT};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

fn message_id(id: &str) -> Value {
    json!({ "result": { "messageId": id } })
}

fn cancelled() -> Value {
    json!({ "error": { "code": -32800, "message": "Request cancelled" } })
}

/// A reply without its `jsonrpc`/`id` (as `Pending::answer` returns it), `data` dropped.
fn without_data(mut reply: Value) -> Value {
    if let Some(error) = reply.get_mut("error").and_then(Value::as_object_mut) {
        error.remove("data");
    }
    reply
}

/// Fix 1 (S35, S57): a turn that ends `error` does not continue, so the prompts queued behind it
/// park; the adapter sends `resume` after it, and they run and are answered without another
/// prompt from the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_prompts_queued_behind_a_failed_turn_run() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V2, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep 500 a", Some("k1"));
    acp.wait_for("running turn=1").await;
    let p2 = acp.prompt("P2", &s, "/fail", Some("k2"));
    let p3 = acp.prompt("P3", &s, "after", Some("k3"));
    assert_eq!(p1.answer().await, message_id("k1"));
    assert_eq!(p2.answer().await, message_id("k2"));
    assert_eq!(p3.answer().await, message_id("k3"));
    acp.wait_count("idle end_turn", 2).await;
    assert_eq!(
        acp.updates_of(&s),
        [
            "running turn=1",
            "user_message k1 /sleep 500 a",
            "agent_message_chunk a-1-1 /sleep 500 a",
            "idle end_turn",
            "running turn=2",
            "user_message k2 /fail",
            "agent_message_chunk a-2-1 /fail",
            "idle error",
            "running turn=3",
            "user_message k3 after",
            "agent_message_chunk a-3-1 after",
            "idle end_turn",
        ],
        "{}",
        acp.dump()
    );
}

/// Fix 1 at v1: the prompt after the failed one is answered with its own turn's stop reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_prompts_queued_behind_a_failed_turn_run() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V1, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep 500 a", Some("k1"));
    acp.wait_for("user_message_chunk k1 /sleep 500 a").await;
    let p2 = acp.prompt("P2", &s, "/fail", Some("k2"));
    let p3 = acp.prompt("P3", &s, "after", Some("k3"));
    assert_eq!(
        p1.answer().await,
        json!({ "result": { "stopReason": "end_turn" } })
    );
    assert_eq!(
        p2.answer().await,
        json!({ "error": { "code": -32603, "message": "Internal error",
                           "data": { "message": "echo: /fail", "code": "echo-fail" } } })
    );
    assert_eq!(
        p3.answer().await,
        json!({ "result": { "stopReason": "end_turn" } })
    );
}

/// Fix 2: a prompt claimed by a turn that a cancel stopped before entering it (`/sleep-pre`) is
/// answered as a cancel: v2 `-32800`; the prompt sent after the cancel runs (fix 1, `aborted`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_cancel_of_a_claimed_not_inserted_prompt_is_32800() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V2, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep-pre 5000 a", Some("k1"));
    acp.wait_for("running turn=1").await;
    support::wait_log_contains(dir.path(), &s, "\"removedCount\":1").await;
    acp.cancel(&s);
    let p2 = acp.prompt("P2", &s, "after", Some("k2"));
    assert_eq!(p1.answer().await, cancelled());
    assert_eq!(p2.answer().await, message_id("k2"));
    acp.wait_count("idle end_turn", 1).await;
    assert_eq!(
        acp.updates_of(&s),
        [
            "running turn=1",
            "idle cancelled",
            "running turn=2",
            "user_message k2 after",
            "agent_message_chunk a-2-1 after",
            "idle end_turn",
        ],
        "{}",
        acp.dump()
    );
}

/// Fix 2 at v1: `{stopReason: "cancelled"}` (the v1 schema's MUST for a cancel).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_cancel_of_a_claimed_not_inserted_prompt_is_cancelled() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V1, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep-pre 5000 a", Some("k1"));
    support::wait_log_contains(dir.path(), &s, "\"removedCount\":1").await;
    acp.cancel(&s);
    assert_eq!(
        p1.answer().await,
        json!({ "result": { "stopReason": "cancelled" } })
    );
}

/// Fix 2 at close: the claimed, not inserted prompt gets `-32800`, then the close `{}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_close_of_a_claimed_not_inserted_prompt_is_32800() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V2, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep-pre 5000 a", Some("k1"));
    support::wait_log_contains(dir.path(), &s, "\"removedCount\":1").await;
    let close = acp.send("close", "session/close", json!({ "sessionId": s }));
    assert_eq!(p1.answer().await, cancelled());
    assert_eq!(close.answer().await, json!({ "result": {} }));
    assert!(
        acp.reply_position("P1") < acp.reply_position("close"),
        "{}",
        acp.dump()
    );
}

/// Fix 3 (S58): a retried `_session/queue` / `_session/steering` is answered from the key's fate,
/// as `session/prompt` is: once the cancel discarded it, `-32800` (steering: `outcome: failed`
/// with that error), not the `messageId` of an accepted message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_queue_and_steering_retries_answer_from_fate() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V2, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep 5000 a", Some("k1"));
    acp.wait_for("running turn=1").await;
    let queue = json!({ "sessionId": s, "prompt": [{ "type": "text", "text": "b" }],
                        "idempotencyKey": "q" });
    assert_eq!(
        acp.call("Q1", "_session/queue", queue.clone()).await,
        message_id("q")
    );
    // Pending: a retry is accepted again.
    assert_eq!(
        acp.call("Q2", "_session/queue", queue.clone()).await,
        message_id("q")
    );
    acp.cancel(&s);
    assert_eq!(p1.answer().await, message_id("k1"));
    acp.wait_for("idle cancelled").await;
    assert_eq!(
        without_data(acp.call("Q3", "_session/queue", queue.clone()).await),
        cancelled()
    );
    assert_eq!(
        acp.steer("S", &s, "b", json!({ "idempotencyKey": "q" }))
            .answer()
            .await,
        json!({ "result": { "outcome": "failed",
                            "error": { "code": -32800, "message": "Request cancelled" } } })
    );
    assert_eq!(
        acp.prompt("P", &s, "b", Some("q")).answer().await,
        cancelled()
    );
}

/// Fix 3 for a steer: a retry of an injected steer is `injected` again (the turn it was meant
/// for claimed it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_a_steering_retry_keeps_its_outcome() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V2, dir.path(), &[]).await;
    let s = acp.new_session().await;
    // The turn sleeps in its step, so the steer meets it running however loaded the machine
    // is (a turn of instant tool steps could end before the steer arrives).
    let p1 = acp.prompt("P1", &s, "/sleep 1000", Some("k1"));
    acp.wait_for("running turn=1").await;
    let injected = json!({ "result": { "outcome": "injected", "messageId": "st" } });
    let extra = json!({ "idempotencyKey": "st", "turn": 1 });
    assert_eq!(
        acp.steer("S1", &s, "steer", extra.clone()).answer().await,
        injected
    );
    assert_eq!(acp.steer("S2", &s, "steer", extra).answer().await, injected);
    assert_eq!(p1.answer().await, message_id("k1"));
}

/// Reads one line of the binary's stdout as JSON, within `WAIT`.
async fn next_json(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) -> Value {
    let line = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .expect("no answer in time")
        .unwrap()
        .expect("stdout closed");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Fix 4: a line is bounded at 4 MiB. A 5 MiB line is answered `-32700` with
/// `data: { bytes, limit }` (nothing of it echoed, never held whole), the connection goes on
/// with the next line, and the process's memory stays far below the line's size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_line_is_a_parse_error_and_the_connection_goes_on() {
    let dir = tempdir();
    let mut child = tokio::process::Command::new(BIN)
        .arg("--echo")
        .arg("--dir")
        .arg(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let size = 5 << 20;
    let mut big =
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"x\":\"".to_vec();
    big.resize(size, b'x');
    big.push(b'\n');
    // 4 rounds: 20 MiB through a process whose line buffer never grows past 4 MiB.
    for _ in 0..4 {
        stdin.write_all(&big).await.unwrap();
    }
    stdin
        .write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1,\"clientCapabilities\":{}}}\n",
        )
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    for _ in 0..4 {
        assert_eq!(
            next_json(&mut lines).await,
            json!({ "jsonrpc": "2.0", "id": null,
                    "error": { "code": -32700, "message": "Parse error",
                               "data": { "bytes": size, "limit": 4 << 20 } } })
        );
    }
    let init = next_json(&mut lines).await;
    assert_eq!(init["id"], json!(2), "{init}");
    assert_eq!(init["result"]["protocolVersion"], json!(1), "{init}");
    let rss = rss_kib(pid);
    assert!(rss < 48 * 1024, "RSS {rss} KiB after four 5 MiB lines");
    drop(stdin);
    let _ = tokio::time::timeout(WAIT, child.wait()).await;
}

/// Fix 4: what an error echoes of the input is cut to 1 KiB: a malformed 10 KB line's
/// `data.line`, and a request whose params do not deserialize, its `data.json`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echo_of_bad_input_is_cut_to_one_kib() {
    let dir = tempdir();
    let mut child = tokio::process::Command::new(BIN)
        .arg("--echo")
        .arg("--dir")
        .arg(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let junk = format!("{{not json {}\n", "y".repeat(10_000));
    stdin.write_all(junk.as_bytes()).await.unwrap();
    stdin.flush().await.unwrap();
    let parse = next_json(&mut lines).await;
    assert_eq!(parse["error"]["code"], json!(-32700), "{parse}");
    let data = &parse["error"]["data"];
    assert_eq!(data["truncated"], json!(true), "{parse}");
    assert_eq!(data["lineBytes"], json!(junk.len() - 1), "{parse}");
    assert_eq!(data["line"], json!(&junk[..1024]), "{parse}");
    // A v2 session/new whose cwd is 10 KB of the wrong type.
    stdin
        .write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1,\"clientCapabilities\":{}}}\n",
        )
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    assert_eq!(next_json(&mut lines).await["id"], json!(1));
    let bad = json!({ "jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                      "params": { "sessionId": "s", "prompt": "z".repeat(10_000) } });
    stdin
        .write_all(format!("{bad}\n").as_bytes())
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    let invalid = next_json(&mut lines).await;
    assert_eq!(invalid["id"], json!(2), "{invalid}");
    assert_eq!(invalid["error"]["code"], json!(-32602), "{invalid}");
    let data = &invalid["error"]["data"];
    assert_eq!(data["truncated"], json!(true), "{invalid}");
    assert_eq!(data["json"].as_str().map(str::len), Some(1024), "{invalid}");
    assert!(
        invalid.to_string().len() < 4096,
        "the error is {} bytes",
        invalid.to_string().len()
    );
    drop(stdin);
    let _ = tokio::time::timeout(WAIT, child.wait()).await;
}

/// Fix 5: the sessions open on one connection are bounded (`--max-sessions`, default 64): one
/// more is `-32011 backpressure, data: { kind: "sessions", limit }`; a close makes room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sessions_of_a_connection_are_bounded() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V2, dir.path(), &["--max-sessions", "2"]).await;
    let s1 = acp.new_session().await;
    let _s2 = acp.new_session().await;
    let cwd = std::env::current_dir().unwrap();
    let params = json!({ "cwd": cwd, "mcpServers": [] });
    assert_eq!(
        acp.call("third", "session/new", params.clone()).await,
        json!({ "error": { "code": -32011, "message": "backpressure",
                           "data": { "kind": "sessions", "limit": 2 } } })
    );
    assert_eq!(
        acp.call("close", "session/close", json!({ "sessionId": s1 }))
            .await,
        json!({ "result": {} })
    );
    // A resume counts too: s1 again fills the room a close made.
    let resume = acp
        .call(
            "resume",
            "session/resume",
            json!({ "sessionId": s1, "cwd": cwd }),
        )
        .await;
    assert_eq!(resume, json!({ "result": {} }));
    assert_eq!(
        acp.call("fourth", "session/new", params).await["error"]["data"],
        json!({ "kind": "sessions", "limit": 2 })
    );
}

/// Fix 5: the dispatcher's update buffer is bounded (1024 by default); one that falls behind
/// reads what it missed back from the log. With a buffer of 2 (`--update-capacity 2`) a turn of
/// 3000 updates (`/tools 1000`, `--sync never`) leaves it behind; the client still sees every
/// update of the turn, once, in order, and the prompt's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_dispatcher_reads_what_it_missed_back_from_the_log() {
    let dir = tempdir();
    let (acp, _) = Acp::start(
        V2,
        dir.path(),
        &["--sync", "never", "--update-capacity", "2"],
    )
    .await;
    let s = acp.new_session().await;
    let k = 1000;
    let p1 = acp.prompt("P1", &s, &format!("/tools {k}"), Some("k1"));
    assert_eq!(p1.answer().await, message_id("k1"));
    acp.wait_for("idle end_turn").await;
    let updates = acp.updates_of(&s);
    let mut expected = vec![
        "running turn=1".to_owned(),
        format!("user_message k1 /tools {k}"),
    ];
    for step in 1..=k {
        let echoed = if step == 1 {
            format!("/tools {k}")
        } else {
            format!("echo {}", step - 1)
        };
        expected.push(format!("agent_message_chunk a-1-{step} {echoed}"));
        expected.push(format!("tool_call_update t-1-{step} in_progress"));
        expected.push(format!("tool_call_update t-1-{step} completed"));
    }
    expected.push(format!("agent_message_chunk a-1-{} echo {k}", k + 1));
    expected.push("idle end_turn".to_owned());
    assert_eq!(updates.len(), expected.len(), "{}", acp.stderr());
    assert_eq!(updates, expected, "{}", acp.stderr());
    assert!(
        acp.stderr()
            .contains("were read back from the log and sent"),
        "the dispatcher never lagged: {}",
        acp.stderr()
    );
}
