//! The Rust client harness of coxswain-acp's client suites: it spawns the binary under test
//! (`coxswain-acp --echo --dir DIR`) on stdio and drives it with the official
//! `agent-client-protocol` crate's CLIENT role (`Client.v1()` / `Client.v2()`), over the crate's
//! `Lines` transport so that every line the agent writes is also recorded, in order, as the
//! test's transcript (the `Wire`): replies are read from it exactly as the agent wrote them.
//!
//! Tests wait on what the agent sends (an update, a reply), never on sleeps; every wait has a
//! deadline and fails with the transcript and the agent's stderr.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::{Agent, Client, Lines, UntypedMessage};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// How long any single wait may take before the test fails.
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// The binary under test.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_coxswain-acp");

/// The lifecycle a client asks for at `initialize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Version {
    /// Stable: `session/prompt` answered at the end of its turn.
    V1,
    /// Unstable: `session/prompt` answered at insertion with a `messageId`.
    V2,
}

/// Everything the agent wrote on stdout, one JSON value per line, in order.
#[derive(Default)]
struct Lines_ {
    lines: Vec<Value>,
    closed: bool,
}

/// The transcript, and a counter that ticks on every line (to wake waiters).
struct Wire {
    state: Mutex<Lines_>,
    tick: watch::Sender<u64>,
    stderr: Mutex<String>,
}

impl Wire {
    fn push(&self, line: &str) {
        let value = serde_json::from_str(line).unwrap_or_else(|_| Value::String(line.to_owned()));
        self.state.lock().unwrap().lines.push(value);
        self.tick.send_modify(|t| *t += 1);
    }

    fn close(&self) {
        self.state.lock().unwrap().closed = true;
        self.tick.send_modify(|t| *t += 1);
    }
}

/// The SDK connection, whichever lifecycle it speaks.
#[derive(Clone)]
enum Conn {
    V1(agent_client_protocol::v1::ConnectionTo<Agent>),
    V2(agent_client_protocol::v2::ConnectionTo<Agent>),
}

/// A request in flight: its JSON-RPC id, its label (for the transcript), and the SDK's future.
pub(crate) struct Pending {
    /// The JSON-RPC id the SDK gave it.
    pub(crate) id: Value,
    /// The test's name for it (`P1`, `steer`, …), shown in `events()`.
    pub(crate) label: String,
    task: JoinHandle<Result<Value, agent_client_protocol::Error>>,
    wire: Arc<Wire>,
}

impl Pending {
    /// Waits for the reply and returns it exactly as the agent wrote it: `{"result": …}` or
    /// `{"error": {code, message, data?}}`. Fails if the SDK failed it locally (no reply on the
    /// wire, e.g. the connection closed).
    pub(crate) async fn answer(self) -> Value {
        let label = self.label.clone();
        let outcome = match tokio::time::timeout(WAIT, self.task).await {
            Ok(joined) => joined.unwrap(),
            Err(_) => panic!("no reply to {label} within {WAIT:?}\n{}", dump(&self.wire)),
        };
        match reply_of(&self.wire, &self.id) {
            Some(reply) => {
                // The SDK's view agrees with the wire.
                assert_eq!(
                    outcome.is_ok(),
                    reply.get("result").is_some(),
                    "{label}: SDK {outcome:?} vs wire {reply}"
                );
                reply
            }
            None => panic!(
                "{label} failed without a reply on the wire: {outcome:?}\n{}",
                dump(&self.wire)
            ),
        }
    }

    /// Drops the SDK's response future (the crate then sends `$/cancel_request` for it, as an
    /// editor does when the user abandons a request) and waits for the agent's reply on the wire.
    pub(crate) async fn abandon(self) -> Value {
        self.task.abort();
        let mut tick = self.wire.tick.subscribe();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(reply) = reply_of(&self.wire, &self.id) {
                return reply;
            }
            if tokio::time::timeout_at(deadline, tick.changed())
                .await
                .is_err()
            {
                panic!("no reply to abandoned {}\n{}", self.label, dump(&self.wire));
            }
        }
    }

    /// Whether the agent has replied to it yet (read from the transcript).
    pub(crate) fn answered(&self) -> bool {
        reply_of(&self.wire, &self.id).is_some()
    }
}

/// The reply with this id on the wire, without `jsonrpc` and `id`.
fn reply_of(wire: &Wire, id: &Value) -> Option<Value> {
    let state = wire.state.lock().unwrap();
    state.lines.iter().find_map(|line| {
        if line.get("method").is_none() && line.get("id") == Some(id) {
            let mut reply = line.clone();
            let object = reply.as_object_mut()?;
            object.remove("jsonrpc");
            object.remove("id");
            Some(reply)
        } else {
            None
        }
    })
}

fn dump(wire: &Wire) -> String {
    let state = wire.state.lock().unwrap();
    let mut out = String::from("--- transcript (agent → client) ---\n");
    for line in &state.lines {
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out.push_str(&format!(
        "--- closed: {} ---\n--- stderr ---\n{}",
        state.closed,
        wire.stderr.lock().unwrap()
    ));
    out
}

/// One spawned `coxswain-acp` and the official client connected to it.
pub(crate) struct Acp {
    /// The lifecycle this client negotiated.
    pub(crate) version: Version,
    /// The sessions directory (`--dir`).
    pub(crate) dir: PathBuf,
    child: Child,
    conn: Conn,
    wire: Arc<Wire>,
    labels: Mutex<HashMap<String, String>>,
    _stop: oneshot::Sender<()>,
    _client: JoinHandle<()>,
}

impl Acp {
    /// Spawns `coxswain-acp --echo --dir DIR EXTRA…` and connects the official client (not yet
    /// initialized).
    pub(crate) async fn spawn(version: Version, dir: &Path, extra: &[&str]) -> Acp {
        let mut child = Command::new(BIN)
            .arg("--echo")
            .arg("--dir")
            .arg(dir)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (tick, _) = watch::channel(0u64);
        let wire = Arc::new(Wire {
            state: Mutex::new(Lines_::default()),
            tick,
            stderr: Mutex::new(String::new()),
        });

        let (in_tx, in_rx) = futures::channel::mpsc::unbounded::<std::io::Result<String>>();
        let reader_wire = wire.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                reader_wire.push(&line);
                // Keep recording after the SDK side is gone.
                let _ = in_tx.unbounded_send(Ok(line));
            }
            reader_wire.close();
        });
        let err_wire = wire.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                err_wire
                    .stderr
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let (out_tx, mut out_rx) = futures::channel::mpsc::unbounded::<String>();
        tokio::spawn(async move {
            while let Some(line) = out_rx.next().await {
                let mut bytes = line.trim_end().as_bytes().to_vec();
                bytes.push(b'\n');
                if stdin.write_all(&bytes).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
        });
        let transport = Lines::new(out_tx.sink_map_err(std::io::Error::other), in_rx);

        let (conn_tx, conn_rx) = oneshot::channel::<Conn>();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let client = tokio::spawn(async move {
            let _ = match version {
                Version::V1 => {
                    Client
                        .v1()
                        .name("coxswain-acp-rust-client-test")
                        .connect_with(transport, async move |cx| {
                            let _ = conn_tx.send(Conn::V1(cx));
                            let _ = stop_rx.await;
                            Ok(())
                        })
                        .await
                }
                Version::V2 => {
                    Client
                        .v2()
                        .name("coxswain-acp-rust-client-test")
                        .connect_with(transport, async move |cx| {
                            let _ = conn_tx.send(Conn::V2(cx));
                            let _ = stop_rx.await;
                            Ok(())
                        })
                        .await
                }
            };
        });
        let conn = conn_rx.await.unwrap();
        Acp {
            version,
            dir: dir.to_owned(),
            child,
            conn,
            wire,
            labels: Mutex::new(HashMap::new()),
            _stop: stop_tx,
            _client: client,
        }
    }

    /// Spawns and initializes (the SDK's typed `initialize` for the version); returns the
    /// `initialize` result as the agent wrote it.
    pub(crate) async fn start(version: Version, dir: &Path, extra: &[&str]) -> (Acp, Value) {
        let acp = Acp::spawn(version, dir, extra).await;
        let init = acp.initialize().await;
        (acp, init)
    }

    /// `initialize` through the SDK's typed request; the raw result from the wire.
    pub(crate) async fn initialize(&self) -> Value {
        let (id, outcome) = match &self.conn {
            Conn::V1(cx) => {
                let sent = cx.send_request(
                    agent_client_protocol::v1::schema::InitializeRequest::new(ProtocolVersion::V1),
                );
                let id = serde_json::to_value(sent.raw_id()).unwrap();
                let outcome = tokio::time::timeout(WAIT, sent.block_task()).await;
                (id, outcome.map(|r| r.map(|_| ())))
            }
            Conn::V2(cx) => {
                let sent =
                    cx.send_initialize(agent_client_protocol::v2::schema::InitializeRequest::new(
                        ProtocolVersion::V2,
                        agent_client_protocol::v2::schema::Implementation::new(
                            "coxswain-acp-rust-client-test",
                            "0",
                        ),
                    ));
                let id = serde_json::to_value(sent.raw_id()).unwrap();
                let outcome = tokio::time::timeout(WAIT, sent.block_task()).await;
                let outcome = outcome.map(|r| {
                    r.and_then(|o| match o {
                        agent_client_protocol::v2::InitializeOutcome::Initialized(_) => Ok(()),
                        other => Err(agent_client_protocol::Error::internal_error()
                            .data(format!("v2 initialize did not select v2: {other:?}"))),
                    })
                });
                (id, outcome)
            }
        };
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("initialize failed: {e:?}\n{}", dump(&self.wire)),
            Err(_) => panic!("initialize: no reply within {WAIT:?}\n{}", dump(&self.wire)),
        }
        self.labels
            .lock()
            .unwrap()
            .insert(id.to_string(), "initialize".into());
        let reply = reply_of(&self.wire, &id).unwrap();
        reply["result"].clone()
    }

    /// Sends a request (untyped, so extra fields such as `idempotencyKey` go through) and
    /// returns at once; the request is on its way to the agent, in call order.
    pub(crate) fn send(&self, label: &str, method: &str, params: Value) -> Pending {
        let message = UntypedMessage::new(method, params).unwrap();
        let (id, future): (Value, futures::future::BoxFuture<'static, _>) = match &self.conn {
            Conn::V1(cx) => {
                let sent = cx.send_request(message);
                (
                    serde_json::to_value(sent.raw_id()).unwrap(),
                    Box::pin(sent.block_task()),
                )
            }
            Conn::V2(cx) => {
                let sent = cx.send_request(message);
                (
                    serde_json::to_value(sent.raw_id()).unwrap(),
                    Box::pin(sent.block_task()),
                )
            }
        };
        self.labels
            .lock()
            .unwrap()
            .insert(id.to_string(), label.to_owned());
        Pending {
            id,
            label: label.to_owned(),
            task: tokio::spawn(future),
            wire: self.wire.clone(),
        }
    }

    /// Sends a request and waits for its reply (see `Pending::answer`).
    pub(crate) async fn call(&self, label: &str, method: &str, params: Value) -> Value {
        self.send(label, method, params).answer().await
    }

    /// Sends a notification (e.g. `session/cancel`).
    pub(crate) fn notify(&self, method: &str, params: Value) {
        let message = UntypedMessage::new(method, params).unwrap();
        match &self.conn {
            Conn::V1(cx) => cx.send_notification(message).unwrap(),
            Conn::V2(cx) => cx.send_notification(message).unwrap(),
        }
    }

    /// `session/new` in the current directory; the new `sessionId`.
    pub(crate) async fn new_session(&self) -> String {
        let cwd = std::env::current_dir().unwrap();
        let reply = self
            .call(
                "new",
                "session/new",
                json!({ "cwd": cwd, "mcpServers": [] }),
            )
            .await;
        match reply["result"]["sessionId"].as_str() {
            Some(id) => id.to_owned(),
            None => panic!("session/new: {reply}\n{}", dump(&self.wire)),
        }
    }

    /// Sends `session/prompt` with one text block and, if given, an `idempotencyKey`.
    pub(crate) fn prompt(
        &self,
        label: &str,
        session: &str,
        text: &str,
        key: Option<&str>,
    ) -> Pending {
        let mut params =
            json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] });
        if let Some(key) = key {
            params["idempotencyKey"] = json!(key);
        }
        self.send(label, "session/prompt", params)
    }

    /// Sends `_session/steering` with one text block and extra fields (`turn`,
    /// `idleBehavior`, `idempotencyKey`).
    pub(crate) fn steer(&self, label: &str, session: &str, text: &str, extra: Value) -> Pending {
        let mut params =
            json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] });
        if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                params.insert(k.clone(), v.clone());
            }
        }
        self.send(label, "_session/steering", params)
    }

    /// `session/cancel` for the session.
    pub(crate) fn cancel(&self, session: &str) {
        self.notify("session/cancel", json!({ "sessionId": session }));
    }

    /// The transcript rendered as compact strings, in wire order: every `session/update` (see
    /// `render_update`) and every reply (`reply LABEL result {…}` / `reply LABEL error CODE
    /// MESSAGE`).
    pub(crate) fn events(&self) -> Vec<String> {
        let labels = self.labels.lock().unwrap().clone();
        let state = self.wire.state.lock().unwrap();
        render(&state.lines, &labels)
    }

    /// Only the `session/update`s, rendered (see `render_update`).
    pub(crate) fn updates(&self) -> Vec<String> {
        self.events()
            .into_iter()
            .filter(|e| !e.starts_with("reply "))
            .collect()
    }

    /// Only the `session/update`s of one session, rendered (see `render_update`).
    pub(crate) fn updates_of(&self, session: &str) -> Vec<String> {
        self.raw_updates()
            .iter()
            .filter(|params| params["sessionId"].as_str() == Some(session))
            .map(|params| render_update(&params["update"]))
            .collect()
    }

    /// The raw `session/update` params, in order.
    pub(crate) fn raw_updates(&self) -> Vec<Value> {
        let state = self.wire.state.lock().unwrap();
        state
            .lines
            .iter()
            .filter(|l| l.get("method").and_then(Value::as_str) == Some("session/update"))
            .map(|l| l["params"].clone())
            .collect()
    }

    /// Every line the agent wrote, raw.
    pub(crate) fn lines(&self) -> Vec<Value> {
        self.wire.state.lock().unwrap().lines.clone()
    }

    /// Waits until `done(events)` holds; fails after `WAIT` with the transcript.
    pub(crate) async fn wait_until(&self, what: &str, done: impl Fn(&[String]) -> bool) {
        let mut tick = self.wire.tick.subscribe();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if done(&self.events()) {
                return;
            }
            if self.wire.state.lock().unwrap().closed {
                panic!(
                    "agent closed stdout while waiting for {what}\n{}",
                    self.dump()
                );
            }
            if tokio::time::timeout_at(deadline, tick.changed())
                .await
                .is_err()
            {
                panic!("timed out waiting for {what}\n{}", self.dump());
            }
        }
    }

    /// Waits until the event `event` (exact rendered string) has been seen `n` times.
    pub(crate) async fn wait_count(&self, event: &str, n: usize) {
        self.wait_until(&format!("{n} × `{event}`"), |events| {
            events.iter().filter(|e| e.as_str() == event).count() >= n
        })
        .await;
    }

    /// Waits until the event `event` (exact rendered string) has been seen.
    pub(crate) async fn wait_for(&self, event: &str) {
        self.wait_count(event, 1).await;
    }

    /// The position of the first event equal to `event` in `events()`; fails if absent.
    pub(crate) fn position(&self, event: &str) -> usize {
        let events = self.events();
        match events.iter().position(|e| e == event) {
            Some(i) => i,
            None => panic!("no event `{event}`\n{}", self.dump()),
        }
    }

    /// The position of the reply to `label` in `events()`; fails if absent.
    pub(crate) fn reply_position(&self, label: &str) -> usize {
        let prefix = format!("reply {label} ");
        let events = self.events();
        match events.iter().position(|e| e.starts_with(&prefix)) {
            Some(i) => i,
            None => panic!("no reply to {label}\n{}", self.dump()),
        }
    }

    /// How many replies the agent wrote to the request labelled `label`.
    pub(crate) fn reply_count(&self, label: &str) -> usize {
        let prefix = format!("reply {label} ");
        self.events()
            .iter()
            .filter(|e| e.starts_with(&prefix))
            .count()
    }

    /// What the agent wrote on stderr so far.
    pub(crate) fn stderr(&self) -> String {
        self.wire.stderr.lock().unwrap().clone()
    }

    /// The agent's process id (to read its memory from `/proc`).
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// The transcript and stderr, for failure messages.
    pub(crate) fn dump(&self) -> String {
        let mut out = self.events().join("\n");
        out.push('\n');
        out.push_str(&dump(&self.wire));
        out
    }

    /// SIGKILLs the agent process (kill -9) and waits for it to be gone.
    pub(crate) async fn kill9(&mut self) {
        self.child.start_kill().unwrap();
        let _ = tokio::time::timeout(WAIT, self.child.wait()).await.unwrap();
    }

    /// Closes the agent's stdin (by dropping the client) and waits for it to exit; its status.
    pub(crate) async fn shutdown(mut self) -> std::process::ExitStatus {
        drop(self._stop);
        drop(self.conn);
        self._client.abort();
        match tokio::time::timeout(WAIT, self.child.wait()).await {
            Ok(status) => status.unwrap(),
            Err(_) => {
                let _ = self.child.start_kill();
                panic!("agent did not exit after its stdin closed");
            }
        }
    }
}

/// Renders the transcript (see `Acp::events`).
fn render(lines: &[Value], labels: &HashMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for line in lines {
        match line.get("method").and_then(Value::as_str) {
            Some("session/update") => out.push(render_update(&line["params"]["update"])),
            Some(method) => out.push(format!("notification {method} {}", line["params"])),
            None => {
                let id = line.get("id").cloned().unwrap_or(Value::Null);
                let label = labels
                    .get(&id.to_string())
                    .cloned()
                    .unwrap_or_else(|| format!("#{id}"));
                if let Some(result) = line.get("result") {
                    out.push(format!("reply {label} result {result}"));
                } else if let Some(error) = line.get("error") {
                    out.push(format!(
                        "reply {label} error {} {}",
                        error["code"],
                        error["message"].as_str().unwrap_or("")
                    ));
                } else {
                    out.push(format!("unrecognised {line}"));
                }
            }
        }
    }
    out
}

/// Text of a content block or a list of them.
fn text_of(content: &Value) -> String {
    match content {
        Value::Array(blocks) => blocks.iter().map(text_of).collect::<Vec<_>>().join(""),
        Value::Object(_) => match content["type"].as_str() {
            Some("text") => content["text"].as_str().unwrap_or("").to_owned(),
            Some(other) => format!("[{other}]"),
            None => content.to_string(),
        },
        other => other.to_string(),
    }
}

/// One update as a compact string:
/// - `user_message ID TEXT`, `user_message_chunk ID TEXT`, `agent_message_chunk ID TEXT`;
/// - `running turn=N` (`_meta.coxswain.turn`), `idle STOP_REASON`;
/// - `tool_call ID STATUS`, `tool_call_update ID STATUS`;
/// - anything else: `KIND {json}`.
pub(crate) fn render_update(update: &Value) -> String {
    let kind = update["sessionUpdate"].as_str().unwrap_or("?");
    let id = update["messageId"].as_str().unwrap_or("-");
    match kind {
        "user_message" | "user_message_chunk" | "agent_message_chunk" | "agent_message" => {
            format!("{kind} {id} {}", text_of(&update["content"]))
        }
        "state_update" => match update["state"].as_str() {
            Some("running") => format!("running turn={}", update["_meta"]["coxswain"]["turn"]),
            Some("idle") => format!(
                "idle {}",
                update["stopReason"].as_str().unwrap_or("(no stopReason)")
            ),
            other => format!("state {other:?}"),
        },
        "tool_call" | "tool_call_update" => format!(
            "{kind} {} {}",
            update["toolCallId"].as_str().unwrap_or("-"),
            update["status"].as_str().unwrap_or("-")
        ),
        _ => format!("{kind} {update}"),
    }
}

/// A reply's error `{code, message}` without `data`, for errors whose `data` the contract leaves
/// open.
pub(crate) fn code_message(reply: &Value) -> Value {
    json!({ "code": reply["error"]["code"], "message": reply["error"]["message"] })
}

/// A temporary sessions directory.
pub(crate) fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Waits until the session's file log (`DIR/<sessionId>.jsonl`, docs/acp.md) contains `needle`
/// (e.g. `"preStep"`: the turn's pre-step request is outstanding, docs/FORMAT.md). Polls the
/// file every 10 ms; fails after `WAIT` with what the file held.
pub(crate) async fn wait_log_contains(dir: &Path, session: &str, needle: &str) {
    let log = dir.join(format!("{session}.jsonl"));
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let written = std::fs::read_to_string(&log).unwrap_or_default();
        if written.contains(needle) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no `{needle}` in {} within {WAIT:?}:\n{written}",
            log.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
