//! Issue 53 §5's scenarios at ACP v2 (`protocolVersion: 2`), driven by the official Rust crate's
//! CLIENT role (`Client.v2()`) against the real `coxswain-acp --echo` binary on stdio. Each test
//! pins the replies (exact JSON as the agent wrote it), their order, and the session's updates,
//! as `docs/acp.md` specifies them (the mapping table, *Retries*, *Steering*, *Errors*, the echo
//! host's commands; the message id of a step's echo is `a-<turn>-<step>`).
//!
//! Every test waits on what the agent sends, never on a sleep: a `/sleep N` prompt keeps its
//! turn running long enough that a prompt sent once its `running` update was seen arrives
//! during it.

mod support;

use serde_json::{json, Value};
use support::{code_message, tempdir, Acp, Version::V2};

fn message_id(id: &str) -> Value {
    json!({ "result": { "messageId": id } })
}

fn cancelled() -> Value {
    json!({ "code": -32800, "message": "Request cancelled" })
}

/// A prompt during a running turn is held (S2: a follow-up, the next turn claims it) and
/// answered once its `user_message` is written, with its `messageId`; the running turn is
/// untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_prompt_during_a_running_turn_is_held_and_answered_at_insertion() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V2, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep 1000 first", Some("k1"));
    acp.wait_for("user_message k1 /sleep 1000 first").await;
    let p2 = acp.prompt("P2", &s, "second", Some("k2"));
    assert_eq!(p1.answer().await, message_id("k1"));
    assert_eq!(p2.answer().await, message_id("k2"));
    acp.wait_count("idle end_turn", 2).await;
    assert_eq!(
        acp.updates_of(&s),
        [
            "running turn=1",
            "user_message k1 /sleep 1000 first",
            "agent_message_chunk a-1-1 /sleep 1000 first",
            "idle end_turn",
            "running turn=2",
            "user_message k2 second",
            "agent_message_chunk a-2-1 second",
            "idle end_turn",
        ],
        "{}",
        acp.dump()
    );
    // Held: P2 was answered only after turn 1 ended, and after its own insertion began (turn 2).
    assert!(
        acp.reply_position("P2") > acp.position("idle end_turn"),
        "{}",
        acp.dump()
    );
    assert!(
        acp.reply_position("P2") > acp.position("running turn=2"),
        "{}",
        acp.dump()
    );
    assert!(
        acp.reply_position("P1") < acp.position("idle end_turn"),
        "{}",
        acp.dump()
    );
    assert_eq!((acp.reply_count("P1"), acp.reply_count("P2")), (1, 1));
}

/// A second (and third) prompt never aborts the first: each runs as its own turn, in order,
/// each ending `end_turn`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_a_second_prompt_never_aborts_the_first() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V2, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep 800 one", Some("k1"));
    acp.wait_for("running turn=1").await;
    let p2 = acp.prompt("P2", &s, "two", Some("k2"));
    let p3 = acp.prompt("P3", &s, "three", None);
    assert_eq!(p1.answer().await, message_id("k1"));
    assert_eq!(p2.answer().await, message_id("k2"));
    let r3 = p3.answer().await;
    let id3 = r3["result"]["messageId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // Without a key the message id is a fresh `p-<32 hex>`.
    assert!(
        id3.len() == 34 && id3.starts_with("p-") && id3[2..].chars().all(|c| c.is_ascii_hexdigit()),
        "{r3}"
    );
    acp.wait_count("idle end_turn", 3).await;
    assert_eq!(
        acp.updates_of(&s),
        [
            "running turn=1",
            "user_message k1 /sleep 800 one",
            "agent_message_chunk a-1-1 /sleep 800 one",
            "idle end_turn",
            "running turn=2",
            "user_message k2 two",
            "agent_message_chunk a-2-1 two",
            "idle end_turn",
            "running turn=3",
            &format!("user_message {id3} three"),
            "agent_message_chunk a-3-1 three",
            "idle end_turn",
        ],
        "{}",
        acp.dump()
    );
}

/// Every turn's prompt is answered exactly once, also after a steer: the steer is injected into
/// the running turn (S54; entered at its next step), the turn's own prompt keeps its single
/// answer, and a later prompt gets its own turn and its own single answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_every_prompt_is_answered_exactly_once_also_after_a_steer() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V2, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep 1000 a", Some("k1"));
    acp.wait_for("user_message k1 /sleep 1000 a").await;
    let steer = acp.steer(
        "S",
        &s,
        "steer",
        json!({ "turn": 1, "idempotencyKey": "s1" }),
    );
    assert_eq!(
        steer.answer().await,
        json!({ "result": { "outcome": "injected", "messageId": "s1" } })
    );
    let p2 = acp.prompt("P2", &s, "b", Some("k2"));
    assert_eq!(p1.answer().await, message_id("k1"));
    assert_eq!(p2.answer().await, message_id("k2"));
    acp.wait_count("idle end_turn", 2).await;
    assert_eq!(
        acp.updates_of(&s),
        [
            "running turn=1",
            "user_message k1 /sleep 1000 a",
            "agent_message_chunk a-1-1 /sleep 1000 a",
            "user_message s1 steer",
            "agent_message_chunk a-1-2 steer",
            "idle end_turn",
            "running turn=2",
            "user_message k2 b",
            "agent_message_chunk a-2-1 b",
            "idle end_turn",
        ],
        "{}",
        acp.dump()
    );
    for label in ["new", "P1", "S", "P2"] {
        assert_eq!(acp.reply_count(label), 1, "{label}\n{}", acp.dump());
    }
    // No reply to anything the client did not send.
    assert!(
        acp.events().iter().all(|e| !e.starts_with("reply #")),
        "{}",
        acp.dump()
    );
}

/// A steer racing its turn's end: either `injected` into that turn (entered at its step 2), or
/// the idle answer (`startedNewTurn`: its own turn 2, after turn 1) — never both, never lost,
/// entered exactly once. After the turn's end, the same steer deterministically takes the idle
/// answer, and with `idleBehavior: "promptRequired"` nothing is inserted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_a_steer_racing_its_turns_end_is_injected_or_takes_the_idle_answer() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V2, dir.path(), &[]).await;
    let mut outcomes = Vec::new();
    for (i, ms) in [0, 1, 2, 5, 10, 20, 40].into_iter().enumerate() {
        let s = acp.new_session().await;
        let text = format!("/sleep {ms} r");
        let p = acp.prompt(&format!("P{i}"), &s, &text, Some("k"));
        // Wait for this session's turn to be running, then steer it at once.
        let sess = s.clone();
        acp.wait_until("running", |_| {
            acp_updates_contain(&acp, &sess, "running turn=1")
        })
        .await;
        let steer = acp.steer(
            &format!("S{i}"),
            &s,
            "late",
            json!({ "turn": 1, "idempotencyKey": "s" }),
        );
        let answer = steer.answer().await;
        assert_eq!(p.answer().await, message_id("k"));
        let outcome = answer["result"]["outcome"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let ended = |n: usize| {
            let sess = s.clone();
            let acp = &acp;
            async move {
                acp.wait_until("turn ends", |_| {
                    acp.updates_of(&sess)
                        .iter()
                        .filter(|u| u.starts_with("idle "))
                        .count()
                        >= n
                })
                .await
            }
        };
        let expected: Vec<String> = match outcome.as_str() {
            "injected" => {
                assert_eq!(
                    answer,
                    json!({ "result": { "outcome": "injected", "messageId": "s" } })
                );
                ended(1).await;
                vec![
                    "running turn=1".into(),
                    format!("user_message k {text}"),
                    format!("agent_message_chunk a-1-1 {text}"),
                    "user_message s late".into(),
                    "agent_message_chunk a-1-2 late".into(),
                    "idle end_turn".into(),
                ]
            }
            "startedNewTurn" => {
                assert_eq!(
                    answer,
                    json!({ "result": { "outcome": "startedNewTurn", "messageId": "s" } })
                );
                ended(2).await;
                vec![
                    "running turn=1".into(),
                    format!("user_message k {text}"),
                    format!("agent_message_chunk a-1-1 {text}"),
                    "idle end_turn".into(),
                    "running turn=2".into(),
                    "user_message s late".into(),
                    "agent_message_chunk a-2-1 late".into(),
                    "idle end_turn".into(),
                ]
            }
            _ => panic!("steer {i}: {answer}\n{}", acp.dump()),
        };
        assert_eq!(acp.updates_of(&s), expected, "{}", acp.dump());
        outcomes.push(outcome);
    }
    eprintln!("race outcomes: {outcomes:?}");

    // Lost for sure: the turn has ended.
    let s = acp.new_session().await;
    assert_eq!(
        acp.prompt("Q", &s, "done", Some("k")).answer().await,
        message_id("k")
    );
    let sess = s.clone();
    acp.wait_until("turn 1 ends", |_| {
        acp_updates_contain(&acp, &sess, "idle end_turn")
    })
    .await;
    assert_eq!(
        acp.steer(
            "SR",
            &s,
            "nothing",
            json!({ "turn": 1, "idleBehavior": "promptRequired" })
        )
        .answer()
        .await,
        json!({ "result": { "outcome": "promptRequired" } })
    );
    assert_eq!(
        acp.steer(
            "SN",
            &s,
            "after",
            json!({ "turn": 1, "idempotencyKey": "s" })
        )
        .answer()
        .await,
        json!({ "result": { "outcome": "startedNewTurn", "messageId": "s" } })
    );
    let sess = s.clone();
    acp.wait_until("turn 2 ends", |_| {
        acp.updates_of(&sess)
            .iter()
            .filter(|u| u.as_str() == "idle end_turn")
            .count()
            == 2
    })
    .await;
    assert_eq!(
        acp.updates_of(&s),
        [
            "running turn=1",
            "user_message k done",
            "agent_message_chunk a-1-1 done",
            "idle end_turn",
            "running turn=2",
            "user_message s after",
            "agent_message_chunk a-2-1 after",
            "idle end_turn",
        ],
        "{}",
        acp.dump()
    );
}

fn acp_updates_contain(acp: &Acp, session: &str, update: &str) -> bool {
    acp.updates_of(session).iter().any(|u| u == update)
}

/// A steer meant for turn n is not injected into turn n+1 (S54's guard): sent while turn 2
/// runs but naming turn 1, it takes the idle answer — a follow-up queued after the running
/// turn (`startedNewTurn`, its own turn 3), or nothing with `promptRequired`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_a_steer_meant_for_turn_n_is_not_injected_into_turn_n_plus_1() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V2, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep 100 a", Some("k1"));
    acp.wait_for("running turn=1").await;
    let p2 = acp.prompt("P2", &s, "/sleep 1500 b", Some("k2"));
    acp.wait_for("user_message k2 /sleep 1500 b").await;
    let stale = acp.steer(
        "S1",
        &s,
        "for turn 1",
        json!({ "turn": 1, "idempotencyKey": "s1" }),
    );
    assert_eq!(
        stale.answer().await,
        json!({ "result": { "outcome": "startedNewTurn", "messageId": "s1" } })
    );
    let required = acp.steer(
        "S2",
        &s,
        "again",
        json!({ "turn": 1, "idleBehavior": "promptRequired", "idempotencyKey": "s2" }),
    );
    assert_eq!(
        required.answer().await,
        json!({ "result": { "outcome": "promptRequired" } })
    );
    assert_eq!(p1.answer().await, message_id("k1"));
    assert_eq!(p2.answer().await, message_id("k2"));
    acp.wait_count("idle end_turn", 3).await;
    assert_eq!(
        acp.updates_of(&s),
        [
            "running turn=1",
            "user_message k1 /sleep 100 a",
            "agent_message_chunk a-1-1 /sleep 100 a",
            "idle end_turn",
            "running turn=2",
            "user_message k2 /sleep 1500 b",
            "agent_message_chunk a-2-1 /sleep 1500 b",
            "idle end_turn",
            "running turn=3",
            "user_message s1 for turn 1",
            "agent_message_chunk a-3-1 for turn 1",
            "idle end_turn",
        ],
        "{}",
        acp.dump()
    );
}

/// `session/cancel` with two held prompts and one arriving after the cancel (S39 without
/// `keepInbox`): the running turn ends `cancelled`, both held prompts get `-32800`, the inserted
/// one keeps its `messageId`, and the later one is untouched (its own turn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_cancel_discards_held_prompts_and_leaves_a_later_one() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V2, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep 10000 a", Some("k1"));
    acp.wait_for("user_message k1 /sleep 10000 a").await;
    assert_eq!(p1.answer().await, message_id("k1"));
    let p2 = acp.prompt("P2", &s, "b", Some("k2"));
    let p3 = acp.prompt("P3", &s, "c", Some("k3"));
    acp.cancel(&s);
    let p4 = acp.prompt("P4", &s, "d", Some("k4"));
    assert_eq!(code_message(&p2.answer().await), cancelled());
    assert_eq!(code_message(&p3.answer().await), cancelled());
    assert_eq!(p4.answer().await, message_id("k4"));
    // *Retries*: a discarded key's retry is answered `-32800` at once, and inserts nothing.
    assert_eq!(
        code_message(&acp.prompt("P2retry", &s, "b", Some("k2")).answer().await),
        cancelled()
    );
    acp.wait_for("idle end_turn").await;
    assert_eq!(
        acp.updates_of(&s),
        [
            "running turn=1",
            "user_message k1 /sleep 10000 a",
            "idle cancelled",
            "running turn=2",
            "user_message k4 d",
            "agent_message_chunk a-2-1 d",
            "idle end_turn",
        ],
        "{}",
        acp.dump()
    );
    assert!(acp.reply_position("P2") < acp.reply_position("P4"));
    assert!(acp.reply_position("P3") < acp.reply_position("P4"));
}

/// Retries and the same key with different content (S56, *Retries*): a retry of an inserted
/// prompt is answered at once with its `messageId`; a retry of a held one is held and both get
/// the same answer; other content under a used key is `-32010` with `{kind, messageId}`, and
/// nothing is inserted; the connection stays up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_retries_and_a_conflicting_key() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V2, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep 1500 a", Some("k1"));
    acp.wait_for("user_message k1 /sleep 1500 a").await;
    assert_eq!(p1.answer().await, message_id("k1"));
    // Inserted: answered at once, while its turn still runs.
    assert_eq!(
        acp.prompt("P1again", &s, "/sleep 1500 a", Some("k1"))
            .answer()
            .await,
        message_id("k1")
    );
    assert_eq!(
        acp.prompt("P1other", &s, "other", Some("k1"))
            .answer()
            .await,
        json!({ "error": { "code": -32010, "message": "conflict",
                           "data": { "kind": "conflict", "messageId": "k1" } } })
    );
    // Held (pending): the retry is held too; both get the same answer; a conflict is refused.
    let p2 = acp.prompt("P2", &s, "b", Some("k2"));
    let p2again = acp.prompt("P2again", &s, "b", Some("k2"));
    assert_eq!(
        acp.prompt("P2other", &s, "B", Some("k2")).answer().await,
        json!({ "error": { "code": -32010, "message": "conflict",
                           "data": { "kind": "conflict", "messageId": "k2" } } })
    );
    assert!(!p2.answered() && !p2again.answered(), "{}", acp.dump());
    assert_eq!(p2.answer().await, message_id("k2"));
    assert_eq!(p2again.answer().await, message_id("k2"));
    acp.wait_count("idle end_turn", 2).await;
    // The connection is still up.
    assert_eq!(
        acp.prompt("P3", &s, "c", Some("k3")).answer().await,
        message_id("k3")
    );
    acp.wait_count("idle end_turn", 3).await;
    assert_eq!(
        acp.updates_of(&s),
        [
            "running turn=1",
            "user_message k1 /sleep 1500 a",
            "agent_message_chunk a-1-1 /sleep 1500 a",
            "idle end_turn",
            "running turn=2",
            "user_message k2 b",
            "agent_message_chunk a-2-1 b",
            "idle end_turn",
            "running turn=3",
            "user_message k3 c",
            "agent_message_chunk a-3-1 c",
            "idle end_turn",
        ],
        "{}",
        acp.dump()
    );
}

/// kill -9 while a pre-step is outstanding (the prompt claimed, not inserted), restart on the
/// same directory, `session/resume` with `replayFrom: {type: "start"}`, and a retry with the same
/// key (S57, S58, S59 with the default allowance 1): the same `messageId`, one `user_message` for
/// it in the whole stream (both processes), the echo ran once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_kill_9_during_a_pre_step_then_resume_and_retry() {
    let dir = tempdir();
    let text = "/sleep-pre 1500 x";
    let (mut first, _) = Acp::start(V2, dir.path(), &[]).await;
    let s = first.new_session().await;
    let p = first.prompt("P1", &s, text, Some("k1"));
    first.wait_for("running turn=1").await;
    // The claim is durable (the log's splice removing it from the next-turn list) and the
    // pre-step is outstanding: `/sleep-pre 1500` holds it.
    support::wait_log_contains(dir.path(), &s, "\"removedCount\":1").await;
    first.kill9().await;
    drop(p);
    assert_eq!(first.updates_of(&s), ["running turn=1"], "{}", first.dump());

    let (second, _) = Acp::start(V2, dir.path(), &[]).await;
    let cwd = std::env::current_dir().unwrap();
    let resumed = second
        .call(
            "resume",
            "session/resume",
            json!({ "sessionId": s, "cwd": cwd, "mcpServers": [], "replayFrom": { "type": "start" } }),
        )
        .await;
    assert_eq!(resumed, json!({ "result": {} }), "{}", second.dump());
    let retry = second.prompt("P1retry", &s, text, Some("k1"));
    assert_eq!(retry.answer().await, message_id("k1"));
    second.wait_for("idle end_turn").await;
    let updates = second.updates_of(&s);
    // The replay: turn 1 as crash repair closed it (interrupted: the agent's own stop, not the
    // client's, so `error` and not `cancelled`, as the schema's `StopReason::Cancelled` says),
    // the state snapshot (idle, no stop reason) before the resume's `{}`, then the redelivered
    // prompt's turn 2.
    assert_eq!(
        updates,
        [
            "running turn=1".to_owned(),
            "idle error".to_owned(),
            "idle (no stopReason)".to_owned(),
            "running turn=2".to_owned(),
            format!("user_message k1 {text}"),
            format!("agent_message_chunk a-2-1 {text}"),
            "idle end_turn".to_owned(),
        ],
        "{}",
        second.dump()
    );
    assert!(second.reply_position("resume") < second.position("running turn=2"));
    assert!(second.reply_position("resume") > second.position("idle (no stopReason)"));
    let interrupted: Vec<Value> = second
        .raw_updates()
        .into_iter()
        .map(|p| p["update"].clone())
        .filter(|u| u["stopReason"] == json!("error"))
        .collect();
    assert_eq!(
        (
            interrupted.len(),
            &interrupted[0]["error"]["code"],
            &interrupted[0]["error"]["data"]["kind"],
            &interrupted[0]["error"]["data"]["turn"],
        ),
        (1, &json!(-32603), &json!("interrupted"), &json!(1)),
        "{interrupted:?}"
    );
    let all: Vec<String> = first
        .updates_of(&s)
        .into_iter()
        .chain(updates.iter().cloned())
        .collect();
    let count = |prefix: &str| all.iter().filter(|u| u.starts_with(prefix)).count();
    assert_eq!(count("user_message "), 1, "{all:?}");
    assert_eq!(count("agent_message_chunk "), 1, "{all:?}");
    assert_eq!(second.reply_count("P1retry"), 1);
}

/// Two agent processes on one session: the second is refused with `-32013` (`kind: locked`),
/// its connection stays up, and the first keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_a_second_process_on_one_session_gets_32013() {
    let dir = tempdir();
    let (first, _) = Acp::start(V2, dir.path(), &[]).await;
    let s = first.new_session().await;
    assert_eq!(
        first.prompt("P1", &s, "hello", Some("k1")).answer().await,
        message_id("k1")
    );
    first.wait_for("idle end_turn").await;

    let (second, _) = Acp::start(V2, dir.path(), &[]).await;
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(
        second
            .call(
                "resume",
                "session/resume",
                json!({ "sessionId": s, "cwd": cwd, "mcpServers": [] }),
            )
            .await,
        json!({ "error": { "code": -32013, "message": "session locked",
                           "data": { "kind": "locked", "message": format!(
                               "the log {}/{s}.jsonl is locked by another writer",
                               dir.path().display()) } } }),
        "{}",
        second.dump()
    );
    // Still up: a session of its own works.
    let other = second.new_session().await;
    assert_eq!(
        second.prompt("Q", &other, "mine", Some("q")).answer().await,
        message_id("q")
    );
    // The first process still owns its session.
    assert_eq!(
        first.prompt("P2", &s, "again", Some("k2")).answer().await,
        message_id("k2")
    );
    first.wait_count("idle end_turn", 2).await;
    assert_eq!(
        first.updates_of(&s),
        [
            "running turn=1",
            "user_message k1 hello",
            "agent_message_chunk a-1-1 hello",
            "idle end_turn",
            "running turn=2",
            "user_message k2 again",
            "agent_message_chunk a-2-1 again",
            "idle end_turn",
        ]
    );
}

/// `session/close` with held prompts: each gets `-32800` before the close's `{}`; nothing held
/// is inserted; afterwards the session is unknown (`-32002` with its `sessionId`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_close_with_held_prompts() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V2, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep 10000 a", Some("k1"));
    acp.wait_for("user_message k1 /sleep 10000 a").await;
    assert_eq!(p1.answer().await, message_id("k1"));
    let p2 = acp.prompt("P2", &s, "b", Some("k2"));
    let p3 = acp.prompt("P3", &s, "c", Some("k3"));
    let close = acp.send("close", "session/close", json!({ "sessionId": s }));
    assert_eq!(code_message(&p2.answer().await), cancelled());
    assert_eq!(code_message(&p3.answer().await), cancelled());
    assert_eq!(close.answer().await, json!({ "result": {} }));
    assert!(acp.reply_position("P2") < acp.reply_position("close"));
    assert!(acp.reply_position("P3") < acp.reply_position("close"));
    assert_eq!(
        acp.prompt("late", &s, "d", Some("k4")).answer().await,
        json!({ "error": { "code": -32002, "message": "Resource not found",
                           "data": { "sessionId": s } } })
    );
    let updates = acp.updates_of(&s);
    assert!(
        updates.iter().all(|u| !u.starts_with("user_message k2")
            && !u.starts_with("user_message k3")
            && !u.starts_with("user_message k4")),
        "{updates:?}"
    );
    assert_eq!(
        updates[..2],
        ["running turn=1", "user_message k1 /sleep 10000 a"]
    );
}

/// The admission bound (S55, `--max-pending 2`): with two prompts held, a third is refused with
/// the typed backpressure error (and a third steer, `outcome: failed` with the same error);
/// below the bound nothing is dropped (both held prompts and both steers run, in order); the
/// connection stays up and a later prompt is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_the_admission_bound_is_a_typed_backpressure_error() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V2, dir.path(), &["--max-pending", "2"]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep 1500 a", Some("k1"));
    acp.wait_for("user_message k1 /sleep 1500 a").await;
    let p2 = acp.prompt("P2", &s, "b", Some("k2"));
    let p3 = acp.prompt("P3", &s, "c", Some("k3"));
    assert_eq!(
        acp.prompt("P4", &s, "d", Some("k4")).answer().await,
        json!({ "error": { "code": -32011, "message": "backpressure",
                           "data": { "kind": "full", "limit": 2 } } })
    );
    // The steer list has the same bound: two steers are injected, the third fails with the
    // same typed error (*Steering*: a refusal of the core → `outcome: failed`).
    for (label, text) in [("S1", "x"), ("S2", "y")] {
        assert_eq!(
            acp.steer(
                label,
                &s,
                text,
                json!({ "turn": 1, "idempotencyKey": label })
            )
            .answer()
            .await,
            json!({ "result": { "outcome": "injected", "messageId": label } })
        );
    }
    assert_eq!(
        acp.steer("S3", &s, "z", json!({ "turn": 1, "idempotencyKey": "S3" }))
            .answer()
            .await,
        json!({ "result": { "outcome": "failed", "error": { "code": -32011,
                "message": "backpressure", "data": { "kind": "full", "limit": 2 } } } })
    );
    assert_eq!(p1.answer().await, message_id("k1"));
    assert_eq!(p2.answer().await, message_id("k2"));
    assert_eq!(p3.answer().await, message_id("k3"));
    acp.wait_count("idle end_turn", 3).await;
    assert_eq!(
        acp.prompt("P5", &s, "e", Some("k5")).answer().await,
        message_id("k5")
    );
    acp.wait_count("idle end_turn", 4).await;
    assert_eq!(
        acp.updates_of(&s),
        [
            "running turn=1",
            "user_message k1 /sleep 1500 a",
            "agent_message_chunk a-1-1 /sleep 1500 a",
            "user_message S1 x",
            "user_message S2 y",
            "agent_message_chunk a-1-2 x",
            "agent_message_chunk a-1-2 y",
            "idle end_turn",
            "running turn=2",
            "user_message k2 b",
            "agent_message_chunk a-2-1 b",
            "idle end_turn",
            "running turn=3",
            "user_message k3 c",
            "agent_message_chunk a-3-1 c",
            "idle end_turn",
            "running turn=4",
            "user_message k5 e",
            "agent_message_chunk a-4-1 e",
            "idle end_turn",
        ],
        "{}",
        acp.dump()
    );
}

/// The echo host's commands and the stop-reason mapping: `/max-tokens` → `max_tokens`, `/fail`
/// → `error` (the prompt was inserted, so it keeps its `messageId`), `/refuse` → `refusal` with
/// the prompt never inserted: its `session/prompt` gets `-32012` *not inserted*; `/tools 2` runs
/// two echo tool calls (one step each, the result injected) and completes. The echo streams the
/// entered text in every step, including the ones that end `max_tokens` or `error`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_echo_commands_and_stop_reasons() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V2, dir.path(), &[]).await;
    let s = acp.new_session().await;

    assert_eq!(
        acp.prompt("max", &s, "/max-tokens", Some("m"))
            .answer()
            .await,
        message_id("m")
    );
    acp.wait_for("idle max_tokens").await;
    assert_eq!(
        acp.prompt("fail", &s, "/fail", Some("f")).answer().await,
        message_id("f")
    );
    acp.wait_for("idle error").await;
    let refused = acp
        .prompt("refuse", &s, "/refuse", Some("r"))
        .answer()
        .await;
    assert_eq!(
        refused,
        json!({ "error": { "code": -32012, "message": "not inserted",
                           "data": { "kind": "not-inserted", "turn": 3, "end": "blocked" } } }),
        "{}",
        acp.dump()
    );
    acp.wait_for("idle refusal").await;
    assert_eq!(
        acp.updates_of(&s)[..],
        [
            "running turn=1",
            "user_message m /max-tokens",
            "agent_message_chunk a-1-1 /max-tokens",
            "idle max_tokens",
            "running turn=2",
            "user_message f /fail",
            "agent_message_chunk a-2-1 /fail",
            "idle error",
            "running turn=3",
            "idle refusal",
        ],
        "{}",
        acp.dump()
    );

    // The failed turn's idle update carries the host's error (v2 has no prompt response to
    // carry it, unlike v1's `-32603`).
    let failed: Vec<Value> = acp
        .raw_updates()
        .into_iter()
        .map(|p| p["update"].clone())
        .filter(|u| u["stopReason"] == json!("error"))
        .collect();
    assert_eq!(
        failed,
        [
            json!({ "sessionUpdate": "state_update", "state": "idle", "stopReason": "error",
                 "error": { "code": -32603, "message": "echo: /fail",
                            "data": { "message": "echo: /fail", "code": "echo-fail" } },
                 "_meta": { "coxswain": { "turn": 2 } } })
        ]
    );

    let t = acp.new_session().await;
    assert_eq!(
        acp.prompt("tools", &t, "/tools 2", Some("t"))
            .answer()
            .await,
        message_id("t")
    );
    let sess = t.clone();
    acp.wait_until("the tools turn ends", |_| {
        acp_updates_contain(&acp, &sess, "idle end_turn")
    })
    .await;
    // v2's schema has no `tool_call` update: a call is announced by a `tool_call_update`
    // `in_progress` and finished by one `completed`; the echo's tool call id is `t-<turn>-<step>`
    // and its injected result (`echo K`) is entered and echoed at the next step.
    assert_eq!(
        acp.updates_of(&t),
        [
            "running turn=1",
            "user_message t /tools 2",
            "agent_message_chunk a-1-1 /tools 2",
            "tool_call_update t-1-1 in_progress",
            "tool_call_update t-1-1 completed",
            "agent_message_chunk a-1-2 echo 1",
            "tool_call_update t-1-2 in_progress",
            "tool_call_update t-1-2 completed",
            "agent_message_chunk a-1-3 echo 2",
            "idle end_turn",
        ],
        "{}",
        acp.dump()
    );
}

/// The `session/inject` RFD's operations as extension methods: `_session/queue` is a follow-up
/// answered at acceptance; `_session/revoke` removes a pending prompt (S12: its held
/// `session/prompt` gets `-32800`) and is `false` once it is not pending; `_session/replace`
/// swaps a pending prompt's content (S14): the held `session/prompt` keeps waiting and the new
/// content is what is entered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_queue_revoke_and_replace() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V2, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep 1500 a", Some("k1"));
    acp.wait_for("user_message k1 /sleep 1500 a").await;
    let p2 = acp.prompt("P2", &s, "b", Some("k2"));
    let p3 = acp.prompt("P3", &s, "c", Some("k3"));
    // Queued: answered at acceptance, while turn 1 still runs.
    assert_eq!(
        acp.call(
            "Q",
            "_session/queue",
            json!({ "sessionId": s, "idempotencyKey": "q1",
                    "prompt": [{ "type": "text", "text": "queued" }] }),
        )
        .await,
        message_id("q1")
    );
    assert_eq!(
        acp.call(
            "revoke",
            "_session/revoke",
            json!({ "sessionId": s, "messageId": "k2" })
        )
        .await,
        json!({ "result": { "revoked": true } })
    );
    assert_eq!(code_message(&p2.answer().await), cancelled());
    assert_eq!(
        acp.call(
            "revoke2",
            "_session/revoke",
            json!({ "sessionId": s, "messageId": "k2" })
        )
        .await,
        json!({ "result": { "revoked": false } })
    );
    assert_eq!(
        acp.call(
            "replace",
            "_session/replace",
            json!({ "sessionId": s, "messageId": "k3",
                    "prompt": [{ "type": "text", "text": "C" }] }),
        )
        .await,
        json!({ "result": { "replaced": true } })
    );
    assert!(!p3.answered(), "{}", acp.dump());
    assert_eq!(
        acp.call(
            "replace1",
            "_session/replace",
            json!({ "sessionId": s, "messageId": "k1",
                    "prompt": [{ "type": "text", "text": "A" }] }),
        )
        .await,
        json!({ "result": { "replaced": false } })
    );
    assert_eq!(p1.answer().await, message_id("k1"));
    assert_eq!(p3.answer().await, message_id("k3"));
    acp.wait_count("idle end_turn", 3).await;
    assert_eq!(
        acp.updates_of(&s),
        [
            "running turn=1",
            "user_message k1 /sleep 1500 a",
            "agent_message_chunk a-1-1 /sleep 1500 a",
            "idle end_turn",
            "running turn=2",
            "user_message k3 C",
            "agent_message_chunk a-2-1 C",
            "idle end_turn",
            "running turn=3",
            "user_message q1 queued",
            "agent_message_chunk a-3-1 queued",
            "idle end_turn",
        ],
        "{}",
        acp.dump()
    );
}

/// `initialize` at v2 selects v2, advertises the session capability (resume, close), and lists
/// the extension methods under a `_meta.coxswain.methods`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_initialize_advertises_what_is_implemented() {
    let dir = tempdir();
    let (_acp, init) = Acp::start(V2, dir.path(), &[]).await;
    assert_eq!(init["protocolVersion"], json!(2), "{init}");
    // Schema 1.17's v2 `SessionCapabilities` has no `resume` / `close` flags (both are v2
    // baseline); no optional prompt content is advertised (`session.prompt` absent or all off).
    let caps = &init["capabilities"];
    assert!(caps["session"].is_object(), "{init}");
    for optional in ["image", "audio", "embeddedContext"] {
        assert_ne!(caps["session"]["prompt"][optional], json!(true), "{init}");
    }
    fn methods(v: &Value) -> Option<Value> {
        match v {
            Value::Object(map) => map
                .get("_meta")
                .and_then(|m| m.get("coxswain"))
                .and_then(|c| c.get("methods"))
                .cloned()
                .or_else(|| map.values().find_map(methods)),
            _ => None,
        }
    }
    let listed = methods(&init).unwrap_or_else(|| panic!("no _meta.coxswain.methods: {init}"));
    for method in [
        "_session/steering",
        "_session/queue",
        "_session/revoke",
        "_session/replace",
    ] {
        assert!(listed.to_string().contains(method), "{method}: {init}");
    }
}

/// Across a clean restart (stdin closed: the agent exits 0): `session/resume` without
/// `replayFrom` replays nothing (only the state snapshot: idle); with `replayFrom: {type:
/// "start"}` it replays the history as updates (each turn's `running` / `idle` state updates,
/// the `user_message` and the echo, with their ids), then the snapshot, all before the
/// resume's `{}`; a retry of an
/// inserted key is answered from its fate at once with the same `messageId`, and nothing is
/// inserted again (S58's unbounded memory, for the session's life).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_resume_replays_history_and_a_retry_is_answered_across_restarts() {
    let dir = tempdir();
    let cwd = std::env::current_dir().unwrap();
    let (first, _) = Acp::start(V2, dir.path(), &[]).await;
    let s = first.new_session().await;
    assert_eq!(
        first.prompt("P1", &s, "hello", Some("k1")).answer().await,
        message_id("k1")
    );
    first.wait_for("idle end_turn").await;
    assert!(first.shutdown().await.success());

    let (second, _) = Acp::start(V2, dir.path(), &[]).await;
    assert_eq!(
        second
            .call(
                "resume",
                "session/resume",
                json!({ "sessionId": s, "cwd": cwd })
            )
            .await,
        json!({ "result": {} })
    );
    // No replay asked: only the state snapshot (idle, the last turn) before the `{}`.
    assert_eq!(second.updates_of(&s), ["idle (no stopReason)"]);
    assert_eq!(
        second.raw_updates()[0]["update"],
        json!({ "sessionUpdate": "state_update", "state": "idle",
                "_meta": { "coxswain": { "turn": 1 } } })
    );
    assert_eq!(
        second
            .prompt("retry", &s, "hello", Some("k1"))
            .answer()
            .await,
        message_id("k1")
    );
    assert_eq!(
        second
            .prompt("conflict", &s, "bye", Some("k1"))
            .answer()
            .await["error"]["code"],
        json!(-32010)
    );
    assert_eq!(
        second.prompt("P2", &s, "two", Some("k2")).answer().await,
        message_id("k2")
    );
    second.wait_for("idle end_turn").await;
    assert_eq!(
        second.updates_of(&s),
        [
            "idle (no stopReason)",
            "running turn=2",
            "user_message k2 two",
            "agent_message_chunk a-2-1 two",
            "idle end_turn",
        ],
        "{}",
        second.dump()
    );
    assert!(second.shutdown().await.success());

    let (third, _) = Acp::start(V2, dir.path(), &[]).await;
    assert_eq!(
        third
            .call(
                "resume",
                "session/resume",
                json!({ "sessionId": s, "cwd": cwd, "replayFrom": { "type": "start" } }),
            )
            .await,
        json!({ "result": {} })
    );
    assert_eq!(
        third.updates_of(&s),
        [
            "running turn=1",
            "user_message k1 hello",
            "agent_message_chunk a-1-1 hello",
            "idle end_turn",
            "running turn=2",
            "user_message k2 two",
            "agent_message_chunk a-2-1 two",
            "idle end_turn",
            "idle (no stopReason)",
        ],
        "{}",
        third.dump()
    );
    // The history was sent before the resume's answer.
    assert!(third.reply_position("resume") > third.position("agent_message_chunk a-2-1 two"));
}

/// `$/cancel_request` of a held `session/prompt` (the crate sends it when the client drops the
/// request's future): the prompt is removed while still pending (S12) and answered `-32800`;
/// nothing is inserted; a prompt already inserted keeps its answer. (docs/acp.md is silent; H1's
/// decision, in the findings file.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_cancel_request_of_a_held_prompt_removes_it() {
    let dir = tempdir();
    let (acp, _) = Acp::start(V2, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let p1 = acp.prompt("P1", &s, "/sleep 1500 a", Some("k1"));
    acp.wait_for("user_message k1 /sleep 1500 a").await;
    assert_eq!(p1.answer().await, message_id("k1"));
    let p2 = acp.prompt("P2", &s, "b", Some("k2"));
    let p3 = acp.prompt("P3", &s, "c", Some("k3"));
    assert_eq!(code_message(&p2.abandon().await), cancelled());
    assert_eq!(p3.answer().await, message_id("k3"));
    acp.wait_count("idle end_turn", 2).await;
    assert_eq!(
        acp.updates_of(&s),
        [
            "running turn=1",
            "user_message k1 /sleep 1500 a",
            "agent_message_chunk a-1-1 /sleep 1500 a",
            "idle end_turn",
            "running turn=2",
            "user_message k3 c",
            "agent_message_chunk a-2-1 c",
            "idle end_turn",
        ],
        "{}",
        acp.dump()
    );
    // The key is discarded: a retry is answered -32800 at once.
    assert_eq!(
        code_message(&acp.prompt("P2retry", &s, "b", Some("k2")).answer().await),
        cancelled()
    );
}

/// kill -9 while a step runs (the prompt inserted): after the restart, a retry with the same
/// key is answered at once with the same `messageId` (*Retries*: claimed with a step), and the
/// prompt is neither entered nor run again (S59 redelivers only what no step saw).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_kill_9_during_a_step_then_a_retry_is_answered_and_nothing_runs_twice() {
    let dir = tempdir();
    let text = "/sleep 10000 a";
    let (mut first, _) = Acp::start(V2, dir.path(), &[]).await;
    let s = first.new_session().await;
    assert_eq!(
        first.prompt("P1", &s, text, Some("k1")).answer().await,
        message_id("k1")
    );
    first.kill9().await;
    assert_eq!(
        first.updates_of(&s),
        [
            "running turn=1".to_owned(),
            format!("user_message k1 {text}")
        ]
    );

    let (second, _) = Acp::start(V2, dir.path(), &[]).await;
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(
        second
            .call(
                "resume",
                "session/resume",
                json!({ "sessionId": s, "cwd": cwd })
            )
            .await,
        json!({ "result": {} })
    );
    assert_eq!(
        second.prompt("retry", &s, text, Some("k1")).answer().await,
        message_id("k1")
    );
    assert_eq!(
        second.prompt("P2", &s, "b", Some("k2")).answer().await,
        message_id("k2")
    );
    second.wait_for("idle end_turn").await;
    assert_eq!(
        second.updates_of(&s),
        [
            "idle (no stopReason)",
            "running turn=2",
            "user_message k2 b",
            "agent_message_chunk a-2-1 b",
            "idle end_turn",
        ],
        "{}",
        second.dump()
    );
}
