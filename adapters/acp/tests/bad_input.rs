//! Issue 53's *Bad input*, through the official Rust crate's CLIENT role (and, for malformed
//! JSON, which no SDK can send, raw bytes on the binary's stdin): each case gets the typed error
//! `docs/acp.md` (*Errors*) gives it, the connection stays up, and nothing is inserted. The
//! conflict and the backpressure cases are in `client_v2.rs` (`v2_retries_and_a_conflicting_key`,
//! `v2_the_admission_bound_is_a_typed_backpressure_error`), each followed by an accepted prompt.

mod support;

use std::process::Stdio;

use serde_json::{json, Value};
use support::{code_message, tempdir, Acp, Version, BIN, WAIT};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Malformed JSON gets `-32700 Parse error` (id `null`), and the next line, a valid `initialize`,
/// is answered normally: the connection stays up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_is_a_parse_error_and_the_connection_stays_up() {
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
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\n")
        .await
        .unwrap();
    stdin
        .write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1,\"clientCapabilities\":{}}}\n",
        )
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    let mut next = async || -> Value {
        let line = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .expect("no answer in time")
            .unwrap()
            .expect("stdout closed");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    };
    let first = next().await;
    assert_eq!(
        json!({ "id": first["id"], "code": first["error"]["code"], "message": first["error"]["message"] }),
        json!({ "id": null, "code": -32700, "message": "Parse error" }),
        "{first}"
    );
    let second = next().await;
    assert_eq!(second["id"], json!(2), "{second}");
    assert_eq!(second["result"]["protocolVersion"], json!(1), "{second}");
    drop(stdin);
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
}

/// Every bad request on one v2 connection, each answered with its typed error; then a valid
/// prompt is accepted, and it is the only message the session ever entered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_typed_errors_and_nothing_is_inserted() {
    let dir = tempdir();
    let (acp, _) = Acp::start(Version::V2, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let invalid = json!({ "code": -32602, "message": "Invalid params" });

    // An unknown method.
    assert_eq!(
        code_message(
            &acp.call("unknown", "session/frobnicate", json!({ "sessionId": s }))
                .await
        ),
        json!({ "code": -32601, "message": "Method not found" })
    );
    assert_eq!(
        code_message(&acp.call("unknown_", "_coxswain/nope", json!({})).await),
        json!({ "code": -32601, "message": "Method not found" })
    );

    // An unknown session.
    let ghost = "s-00000000000000000000000000000000";
    assert_eq!(
        acp.prompt("ghost", ghost, "hi", Some("g")).answer().await,
        json!({ "error": { "code": -32002, "message": "Resource not found",
                           "data": { "sessionId": ghost } } })
    );

    // A content block type not advertised.
    let image = acp
        .call(
            "image",
            "session/prompt",
            json!({ "sessionId": s, "idempotencyKey": "img", "prompt": [
                { "type": "text", "text": "look" },
                { "type": "image", "mimeType": "image/png", "data": "aGk=" }
            ] }),
        )
        .await;
    assert_eq!(code_message(&image), invalid, "{image}");
    assert_eq!(
        image["error"]["data"],
        json!({ "reason": "content block type not advertised", "type": "image", "index": 1 }),
        "{image}"
    );

    // An empty prompt.
    let empty = acp
        .call(
            "empty",
            "session/prompt",
            json!({ "sessionId": s, "prompt": [] }),
        )
        .await;
    assert_eq!(code_message(&empty), invalid, "{empty}");

    // An empty key, and one over 255 characters; `data` says which.
    let empty_key = acp.prompt("emptyKey", &s, "x", Some("")).answer().await;
    assert_eq!(code_message(&empty_key), invalid, "{empty_key}");
    let long = "k".repeat(256);
    let long_key = acp.prompt("longKey", &s, "y", Some(&long)).answer().await;
    assert_eq!(code_message(&long_key), invalid, "{long_key}");
    assert!(
        !empty_key["error"]["data"].is_null()
            && !long_key["error"]["data"].is_null()
            && empty_key["error"]["data"] != long_key["error"]["data"],
        "{empty_key} / {long_key}"
    );

    // Still up, and nothing above was inserted: the first message entered is this one. A key of
    // exactly 255 characters is accepted.
    let ok = "o".repeat(255);
    assert_eq!(
        acp.prompt("ok", &s, "fine", Some(&ok)).answer().await,
        json!({ "result": { "messageId": ok } })
    );
    acp.wait_for("idle end_turn").await;
    assert_eq!(
        acp.updates_of(&s),
        [
            "running turn=1".to_owned(),
            format!("user_message {ok} fine"),
            "agent_message_chunk a-1-1 fine".to_owned(),
            "idle end_turn".to_owned(),
        ],
        "{}",
        acp.dump()
    );

    // A closed session is unknown too.
    assert_eq!(
        acp.call("close", "session/close", json!({ "sessionId": s }))
            .await,
        json!({ "result": {} })
    );
    assert_eq!(
        acp.prompt("closed", &s, "late", Some("late"))
            .answer()
            .await,
        json!({ "error": { "code": -32002, "message": "Resource not found",
                           "data": { "sessionId": s } } })
    );
    // And the connection still serves a new session.
    let again = acp.new_session().await;
    assert_eq!(
        acp.prompt("again", &again, "hi", Some("h")).answer().await,
        json!({ "result": { "messageId": "h" } })
    );
}

/// The same bad requests at v1 get the same errors (an unknown method, an unknown session, an
/// `image` block, an empty key); then a valid prompt runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_bad_requests_get_typed_errors() {
    let dir = tempdir();
    let (acp, _) = Acp::start(Version::V1, dir.path(), &[]).await;
    let s = acp.new_session().await;
    let invalid = json!({ "code": -32602, "message": "Invalid params" });
    assert_eq!(
        code_message(
            &acp.call("unknown", "session/frobnicate", json!({ "sessionId": s }))
                .await
        ),
        json!({ "code": -32601, "message": "Method not found" })
    );
    let ghost = "s-11111111111111111111111111111111";
    assert_eq!(
        acp.prompt("ghost", ghost, "hi", None).answer().await,
        json!({ "error": { "code": -32002, "message": "Resource not found",
                           "data": { "sessionId": ghost } } })
    );
    let image = acp
        .call(
            "image",
            "session/prompt",
            json!({ "sessionId": s, "prompt": [{ "type": "image", "mimeType": "image/png", "data": "aGk=" }] }),
        )
        .await;
    assert_eq!(code_message(&image), invalid, "{image}");
    assert_eq!(
        code_message(&acp.prompt("emptyKey", &s, "x", Some("")).answer().await),
        invalid
    );
    assert_eq!(
        acp.prompt("ok", &s, "fine", Some("k")).answer().await,
        json!({ "result": { "stopReason": "end_turn" } })
    );
    assert_eq!(
        acp.updates_of(&s),
        [
            "user_message_chunk k fine",
            "agent_message_chunk a-1-1 fine"
        ],
        "{}",
        acp.dump()
    );
}

/// A bad option, or a `--dir` that is not a usable directory, exits with status 2 and one line
/// on stderr naming what was wrong; nothing is written to stdout (docs/acp.md, *Running it*).
#[test]
fn bad_options_exit_2_with_one_line_on_stderr() {
    let dir = tempdir();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let file_arg = file.to_string_lossy().into_owned();
    let dir_arg = dir.path().to_string_lossy().into_owned();
    for (args, names) in [
        (vec!["--echo", "--frobnicate"], "--frobnicate"),
        (vec!["--echo"], "--dir"),
        (vec!["--echo", "--dir", &file_arg], file_arg.as_str()),
        (
            vec!["--echo", "--dir", &dir_arg, "--max-pending", "lots"],
            "lots",
        ),
        (
            vec!["--echo", "--dir", &dir_arg, "--sync", "sometimes"],
            "sometimes",
        ),
    ] {
        let out = std::process::Command::new(BIN)
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: stdout {:?}", out.stdout);
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(names), "{args:?}: {stderr}");
    }
}
