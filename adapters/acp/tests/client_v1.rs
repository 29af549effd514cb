//! Issue 53 §5's scenarios at ACP v1 (`protocolVersion: 1`, what Zed speaks), driven by the
//! official Rust crate's CLIENT role (`Client.v1()`) against the real `coxswain-acp --echo`
//! binary on stdio. At v1 `session/prompt` is answered when the turn that entered it ends, with
//! its `stopReason`; a `user/message` is a `user_message_chunk` update carrying the message id
//! (`docs/acp.md`, the mapping table).
//!
//! v1 has no `state_update`: the tests wait on the `user_message_chunk` of a prompt to know its
//! turn runs, and on replies, never on sleeps.

mod support;

use serde_json::{json, Value};
use support::{code_message, tempdir, Acp, Version::V1};

fn stop(reason: &str) -> Value {
    json!({ "result": { "stopReason": reason } })
}

/// `initialize` at v1 selects v1 and advertises `loadSession`, and no optional prompt content.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_initialize_advertises_what_is_implemented() {
    let dir = tempdir();
    let (_acp, init) = Acp::start(V1, dir.path(), &[]).await;
    assert_eq!(init["protocolVersion"], json!(1), "{init}");
    assert_eq!(
        init["agentCapabilities"]["loadSession"],
        json!(true),
        "{init}"
    );
    let prompt = &init["agentCapabilities"]["promptCapabilities"];
    for optional in ["image", "audio", "embeddedContext"] {
        assert_ne!(prompt[optional], json!(true), "{init}");
    }
}

/// A prompt during a running turn is held, runs as the next turn, and is answered once, when
/// that turn ends; the first prompt is answered when its own turn ends, not aborted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_prompt_during_a_running_turn_is_held_and_answered_when_its_turn_ends() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V1, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep 1000 first", Some("k1"));
    acp.wait_for("user_message_chunk k1 /sleep 1000 first")
        .await;
    let p2 = acp.prompt("P2", &s, "second", Some("k2"));
    assert_eq!(p1.answer().await, stop("end_turn"));
    assert_eq!(p2.answer().await, stop("end_turn"));
    assert_eq!(
        acp.updates_of(&s),
        [
            "user_message_chunk k1 /sleep 1000 first",
            "agent_message_chunk a-1-1 /sleep 1000 first",
            "user_message_chunk k2 second",
            "agent_message_chunk a-2-1 second",
        ],
        "{}",
        acp.dump()
    );
    // P1 answered at the end of turn 1, after its echo; P2 after its own echo.
    assert!(acp.reply_position("P1") > acp.position("agent_message_chunk a-1-1 /sleep 1000 first"));
    assert!(acp.reply_position("P2") > acp.position("agent_message_chunk a-2-1 second"));
    assert!(acp.reply_position("P1") < acp.reply_position("P2"));
    assert_eq!((acp.reply_count("P1"), acp.reply_count("P2")), (1, 1));
}

/// Every turn's prompt is answered exactly once, also after a steer: the steer (no `turn`: the
/// turn running when it is read) is injected; the turn's prompt gets one `end_turn`; a later
/// prompt gets its own turn and one answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_every_prompt_is_answered_exactly_once_also_after_a_steer() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V1, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep 1000 a", Some("k1"));
    acp.wait_for("user_message_chunk k1 /sleep 1000 a").await;
    assert_eq!(
        acp.steer("S", &s, "steer", json!({ "idempotencyKey": "s1" }))
            .answer()
            .await,
        json!({ "result": { "outcome": "injected", "messageId": "s1" } })
    );
    let p2 = acp.prompt("P2", &s, "b", Some("k2"));
    assert_eq!(p1.answer().await, stop("end_turn"));
    assert_eq!(p2.answer().await, stop("end_turn"));
    assert_eq!(
        acp.updates_of(&s),
        [
            "user_message_chunk k1 /sleep 1000 a",
            "agent_message_chunk a-1-1 /sleep 1000 a",
            "user_message_chunk s1 steer",
            "agent_message_chunk a-1-2 steer",
            "user_message_chunk k2 b",
            "agent_message_chunk a-2-1 b",
        ],
        "{}",
        acp.dump()
    );
    for label in ["new", "P1", "S", "P2"] {
        assert_eq!(acp.reply_count(label), 1, "{label}\n{}", acp.dump());
    }
    assert!(
        acp.events().iter().all(|e| !e.starts_with("reply #")),
        "{}",
        acp.dump()
    );
}

/// `session/cancel` with two held prompts and one after it: the running prompt is answered
/// `cancelled`, the held ones `-32800`, the later one runs (`end_turn`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_cancel_with_held_prompts() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V1, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep 10000 a", Some("k1"));
    acp.wait_for("user_message_chunk k1 /sleep 10000 a").await;
    let p2 = acp.prompt("P2", &s, "b", Some("k2"));
    let p3 = acp.prompt("P3", &s, "c", Some("k3"));
    acp.cancel(&s);
    let p4 = acp.prompt("P4", &s, "d", Some("k4"));
    assert_eq!(p1.answer().await, stop("cancelled"));
    let cancelled = json!({ "code": -32800, "message": "Request cancelled" });
    assert_eq!(code_message(&p2.answer().await), cancelled);
    assert_eq!(code_message(&p3.answer().await), cancelled);
    assert_eq!(p4.answer().await, stop("end_turn"));
    assert_eq!(
        acp.updates_of(&s),
        [
            "user_message_chunk k1 /sleep 10000 a",
            "user_message_chunk k4 d",
            "agent_message_chunk a-2-1 d",
        ],
        "{}",
        acp.dump()
    );
    assert!(acp.reply_position("P2") < acp.reply_position("P4"));
    assert!(acp.reply_position("P3") < acp.reply_position("P4"));
}

/// kill -9 while a pre-step is outstanding, restart, `session/load`, retry with the same key:
/// the retry is answered when the redelivered prompt's turn ends (`end_turn`), the prompt is
/// entered once in the whole stream and the echo ran once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_kill_9_during_a_pre_step_then_load_and_retry() {
    let dir = tempdir();
    let text = "/sleep-pre 1500 x";
    let (mut first, _) = Acp::start(V1, dir.path(), &[]).await;
    let s = first.new_session().await;
    let p = first.prompt("P1", &s, text, Some("k1"));
    // v1 has no `running` update: wait until the claim is durable (the log's splice removing it
    // from the next-turn list); `/sleep-pre 1500` holds the pre-step that follows.
    support::wait_log_contains(dir.path(), &s, "\"removedCount\":1").await;
    first.kill9().await;
    drop(p);
    assert_eq!(
        first.updates_of(&s),
        Vec::<String>::new(),
        "{}",
        first.dump()
    );

    let (second, _) = Acp::start(V1, dir.path(), &[]).await;
    let cwd = std::env::current_dir().unwrap();
    let loaded = second
        .call(
            "load",
            "session/load",
            json!({ "sessionId": s, "cwd": cwd, "mcpServers": [] }),
        )
        .await;
    assert_eq!(loaded, json!({ "result": {} }), "{}", second.dump());
    let retry = second.prompt("P1retry", &s, text, Some("k1"));
    assert_eq!(retry.answer().await, stop("end_turn"));
    let updates = second.updates_of(&s);
    assert_eq!(
        updates,
        [
            format!("user_message_chunk k1 {text}"),
            format!("agent_message_chunk a-2-1 {text}"),
        ],
        "{}",
        second.dump()
    );
    assert_eq!(second.reply_count("P1retry"), 1);
}

/// The echo's commands at v1: `/max-tokens` answers `max_tokens`; `/fail` answers `-32603` with
/// the host's error as `data`; `/tools 1` announces a `tool_call` and completes it with a
/// `tool_call_update`, then ends `end_turn`; `/refuse` (never inserted) answers `-32012`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_echo_commands_and_stop_reasons() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V1, dir.path(), &[]).await;
    let s = acp.new_session().await;
    assert_eq!(
        acp.prompt("max", &s, "/max-tokens", Some("m"))
            .answer()
            .await,
        stop("max_tokens")
    );
    let failed = acp.prompt("fail", &s, "/fail", Some("f")).answer().await;
    assert_eq!(
        failed,
        json!({ "error": { "code": -32603, "message": "Internal error",
                           "data": { "message": "echo: /fail", "code": "echo-fail" } } }),
        "{}",
        acp.dump()
    );
    assert_eq!(
        acp.prompt("tools", &s, "/tools 1", Some("t"))
            .answer()
            .await,
        stop("end_turn")
    );
    let refused = acp
        .prompt("refuse", &s, "/refuse", Some("r"))
        .answer()
        .await;
    // Never inserted (its pre-step refused the batch): not a `refusal` stop reason but -32012.
    assert_eq!(
        refused,
        json!({ "error": { "code": -32012, "message": "not inserted",
                           "data": { "kind": "not-inserted", "turn": 4, "end": "blocked" } } })
    );
    assert_eq!(
        acp.updates_of(&s),
        [
            "user_message_chunk m /max-tokens",
            "agent_message_chunk a-1-1 /max-tokens",
            "user_message_chunk f /fail",
            "agent_message_chunk a-2-1 /fail",
            "user_message_chunk t /tools 1",
            "agent_message_chunk a-3-1 /tools 1",
            "tool_call t-3-1 in_progress",
            "tool_call_update t-3-1 completed",
            "agent_message_chunk a-3-2 echo 1",
        ],
        "{}",
        acp.dump()
    );
}

/// `session/load` after a clean restart replays the history (`user_message_chunk` and the
/// echo, with their ids) before its `{}`; a retry of an inserted key is answered at once with
/// the stop reason of the turn that entered it, and nothing is inserted again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_load_replays_history_and_a_retry_is_answered_across_restarts() {
    let dir = tempdir();
    let cwd = std::env::current_dir().unwrap();
    let (first, _) = Acp::start(V1, dir.path(), &[]).await;
    let s = first.new_session().await;
    assert_eq!(
        first
            .prompt("P1", &s, "/max-tokens hi", Some("k1"))
            .answer()
            .await,
        stop("max_tokens")
    );
    assert!(first.shutdown().await.success());

    let (second, _) = Acp::start(V1, dir.path(), &[]).await;
    assert_eq!(
        second
            .call(
                "load",
                "session/load",
                json!({ "sessionId": s, "cwd": cwd, "mcpServers": [] }),
            )
            .await,
        json!({ "result": {} })
    );
    assert!(
        second.reply_position("load") > second.position("agent_message_chunk a-1-1 /max-tokens hi")
    );
    assert_eq!(
        second
            .prompt("retry", &s, "/max-tokens hi", Some("k1"))
            .answer()
            .await,
        stop("max_tokens")
    );
    assert_eq!(
        second.updates_of(&s),
        [
            "user_message_chunk k1 /max-tokens hi",
            "agent_message_chunk a-1-1 /max-tokens hi",
        ],
        "{}",
        second.dump()
    );
}

/// At v1: a retry of an inserted prompt is answered with its turn's stop reason once the turn
/// ends; other content under the key is `-32010`; the bound (`--max-pending 1`) is `-32011`;
/// a second process on the session gets `-32013` at `session/load`; nothing of it is inserted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_retry_conflict_backpressure_and_a_second_process() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V1, dir.path(), &["--max-pending", "1"]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep 1000 a", Some("k1"));
    acp.wait_for("user_message_chunk k1 /sleep 1000 a").await;
    let retry = acp.prompt("P1again", &s, "/sleep 1000 a", Some("k1"));
    assert_eq!(
        acp.prompt("P1other", &s, "other", Some("k1"))
            .answer()
            .await,
        json!({ "error": { "code": -32010, "message": "conflict",
                           "data": { "kind": "conflict", "messageId": "k1" } } })
    );
    let p2 = acp.prompt("P2", &s, "b", Some("k2"));
    assert_eq!(
        acp.prompt("P3", &s, "c", Some("k3")).answer().await,
        json!({ "error": { "code": -32011, "message": "backpressure",
                           "data": { "kind": "full", "limit": 1 } } })
    );

    let (second, _) = Acp::start(V1, dir.path(), &[]).await;
    let cwd = std::env::current_dir().unwrap();
    let locked = second
        .call(
            "load",
            "session/load",
            json!({ "sessionId": s, "cwd": cwd, "mcpServers": [] }),
        )
        .await;
    assert_eq!(
        json!({ "code": locked["error"]["code"], "message": locked["error"]["message"],
                "kind": locked["error"]["data"]["kind"] }),
        json!({ "code": -32013, "message": "session locked", "kind": "locked" }),
        "{locked}"
    );

    assert_eq!(p1.answer().await, stop("end_turn"));
    assert_eq!(retry.answer().await, stop("end_turn"));
    assert_eq!(p2.answer().await, stop("end_turn"));
    assert_eq!(
        acp.updates_of(&s),
        [
            "user_message_chunk k1 /sleep 1000 a",
            "agent_message_chunk a-1-1 /sleep 1000 a",
            "user_message_chunk k2 b",
            "agent_message_chunk a-2-1 b",
        ],
        "{}",
        acp.dump()
    );
    assert!(second.updates_of(&s).is_empty(), "{}", second.dump());
}

/// kill -9 while a step runs (the prompt entered): after the restart and `session/load`, a
/// retry with the same key is answered with the turn's end: crash repair closed it
/// `interrupted`, which v1 (no `error` stop reason) answers `-32603` with
/// `data.kind: "interrupted"`; nothing runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_kill_9_during_a_step_then_a_retry_gets_the_interrupted_error() {
    let dir = tempdir();
    let text = "/sleep 10000 a";
    let (mut first, _) = Acp::start(V1, dir.path(), &[]).await;
    let s = first.new_session().await;
    let p = first.prompt("P1", &s, text, Some("k1"));
    first
        .wait_for(&format!("user_message_chunk k1 {text}"))
        .await;
    first.kill9().await;
    drop(p);

    let (second, _) = Acp::start(V1, dir.path(), &[]).await;
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(
        second
            .call(
                "load",
                "session/load",
                json!({ "sessionId": s, "cwd": cwd, "mcpServers": [] }),
            )
            .await,
        json!({ "result": {} })
    );
    let retry = second.prompt("retry", &s, text, Some("k1")).answer().await;
    assert_eq!(
        json!({ "code": retry["error"]["code"], "message": retry["error"]["message"],
                "kind": retry["error"]["data"]["kind"], "turn": retry["error"]["data"]["turn"] }),
        json!({ "code": -32603, "message": "Internal error", "kind": "interrupted", "turn": 1 }),
        "{retry}"
    );
    assert_eq!(
        second.prompt("P2", &s, "b", Some("k2")).answer().await,
        stop("end_turn")
    );
    assert_eq!(
        second.updates_of(&s),
        [
            format!("user_message_chunk k1 {text}"),
            "user_message_chunk k2 b".to_owned(),
            "agent_message_chunk a-2-1 b".to_owned(),
        ],
        "{}",
        second.dump()
    );
}
