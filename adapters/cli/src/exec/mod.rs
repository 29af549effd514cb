//! The runner's end of PORTS.md's line protocol: a port run as a child process (`sh -c CMD`)
//! behind [`coxswain_conformance::Subject`], so traces replay on it exactly as on the core.
//!
//! Each request waits for its one reply line up to the timeout. A port that exits or goes silent
//! fails the trace it was serving and is started afresh (with a new `hello`) for the next one.

mod process;

use std::time::Duration;

use coxswain_conformance::{input_json, Failure, Given, Rejection, Subject};
use coxswain_core::{Fate, Input};
use serde_json::{json, Value};

use process::{Fault, Process};

/// The protocol version this runner speaks.
pub(crate) const PROTOCOL: u64 = 1;

/// How much of a malformed reply a report shows.
const SHOWN: usize = 300;

/// Why a port could not be started.
#[derive(Debug)]
pub(crate) enum StartError {
    /// Its `hello` names another protocol version: the run stops.
    Protocol(Value),
    /// It could not be spawned, or its `hello` failed.
    Failed(Failure),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Protocol(version) => {
                write!(
                    f,
                    "port speaks protocol {version}, runner speaks {PROTOCOL}"
                )
            }
            StartError::Failed(failure) => {
                write!(f, "{} at hello{}", failure.what, failure.tail)
            }
        }
    }
}

/// A port under test: its command, the per-request deadline and the running process.
pub(crate) struct Exec {
    command: String,
    timeout: Duration,
    process: Option<Process>,
    /// The `hello` reply's body (`name`, `version`, `protocol`).
    hello: Value,
    /// The name the next `begin` gives its trace (informational).
    trace: String,
    /// Set when a restarted port named another protocol version: the run must stop.
    mismatch: Option<String>,
    /// The last `ready` reply's body, kept for [`Subject::repaired`] (S50, S59).
    ready: Option<Value>,
}

impl Exec {
    /// Starts the port and says `hello`.
    pub(crate) fn start(command: &str, timeout: Duration) -> Result<Exec, StartError> {
        let mut exec = Exec {
            command: command.to_owned(),
            timeout,
            process: None,
            hello: Value::Null,
            trace: String::new(),
            mismatch: None,
            ready: None,
        };
        exec.restart()?;
        Ok(exec)
    }

    /// The port's name and version from its `hello`.
    pub(crate) fn describe(&self) -> String {
        let text = |key: &str| match &self.hello[key] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        format!("{} {}", text("name"), text("version"))
    }

    /// Closes the session (stdin) and returns the port's exit status.
    pub(crate) fn finish(mut self) -> Option<String> {
        self.process
            .take()
            .map(|process| process.finish(Duration::from_secs(2)))
    }

    fn restart(&mut self) -> Result<(), StartError> {
        self.process = None;
        let process = Process::spawn(&self.command).map_err(|e| {
            StartError::Failed(Failure {
                what: format!("cannot start the port: {e}"),
                tail: String::new(),
            })
        })?;
        self.process = Some(process);
        let (_, hello) = self
            .request(&json!({"hello": {"protocol": PROTOCOL}}), &["hello"])
            .map_err(StartError::Failed)?;
        match hello.get("protocol") {
            Some(version) if version.as_u64() == Some(PROTOCOL) => {
                self.hello = hello;
                Ok(())
            }
            Some(version) => Err(StartError::Protocol(version.clone())),
            None => Err(StartError::Failed(malformed(&json!({ "hello": hello })))),
        }
    }

    /// One request; the key and body of a reply whose key is one of `expect`, or a failure (an
    /// `error` reply, another key, no reply).
    fn request(&mut self, request: &Value, expect: &[&str]) -> Result<(String, Value), Failure> {
        let Some(process) = self.process.as_mut() else {
            return Err(Failure {
                what: "port not running".into(),
                tail: String::new(),
            });
        };
        let reply = match process.request(&request.to_string(), self.timeout) {
            Ok(reply) => reply,
            Err(fault) => {
                let tail: String = process
                    .stderr_tail()
                    .iter()
                    .map(|line| format!("\n  stderr: {line}"))
                    .collect();
                self.process = None;
                let what = match fault {
                    Fault::Exited(status) => format!("port exited ({status})"),
                    Fault::Silent => {
                        format!("port did not answer within {}", seconds(self.timeout))
                    }
                };
                return Err(Failure { what, tail });
            }
        };
        let parsed: Option<Value> = serde_json::from_str(&reply).ok();
        let Some((key, body)) = parsed
            .as_ref()
            .and_then(Value::as_object)
            .filter(|o| o.len() == 1)
            .and_then(|o| o.iter().next())
        else {
            return Err(malformed_text(&reply));
        };
        match key.as_str() {
            key if expect.contains(&key) => Ok((key.to_owned(), body.clone())),
            "error" => Err(Failure {
                what: "port error".into(),
                tail: format!(
                    ": {}",
                    body.as_str().map_or(body.to_string(), str::to_owned)
                ),
            }),
            _ => Err(malformed_text(&reply)),
        }
    }

    /// Sends `end`; the trace passed only if the port answers `ended`.
    pub(crate) fn end(&mut self) -> Result<(), Failure> {
        self.request(&json!({"end": {}}), &["ended"]).map(|_| ())
    }

    /// Names the trace the next `begin` starts (sent as `begin`'s informational `trace`).
    pub(crate) fn name_next(&mut self, trace: &str) {
        trace.clone_into(&mut self.trace);
    }

    /// The protocol mismatch of a restarted port, which stops the run.
    pub(crate) fn mismatch(&self) -> Option<&str> {
        self.mismatch.as_deref()
    }
}

impl Subject for Exec {
    fn begin(&mut self, given: Option<&Given<'_>>) -> Result<Result<(), Rejection>, Failure> {
        if self.process.is_none() {
            self.restart().map_err(|error| match error {
                StartError::Failed(failure) => failure,
                protocol @ StartError::Protocol(_) => {
                    self.mismatch = Some(protocol.to_string());
                    Failure {
                        what: protocol.to_string(),
                        tail: String::new(),
                    }
                }
            })?;
        }
        self.ready = None;
        let given = given.map_or(Value::Null, Given::to_json);
        let begin = json!({"begin": {"trace": self.trace, "given": given}});
        let reply = self.request(&begin, &["ready", "rejected"])?;
        rejection_or(reply, |ready| {
            // S50, S59: a `repaired` that is not a list of `{"event": …}` outputs is malformed
            // whether or not it was asked for; its absence is judged by `repaired()`, which
            // is asked only when the trace's `given` has `repair`.
            match ready.get("repaired") {
                Some(Value::Array(events)) if events.iter().all(is_event) => {}
                None => {}
                Some(_) => return Err(malformed(&json!({ "ready": ready }))),
            }
            self.ready = Some(ready);
            Ok(())
        })
    }

    fn fate(&mut self, id: &str) -> Result<Value, Failure> {
        // S58: the reply's `F` must be FORMAT.md's spelling (what `Fate::from_json` reads);
        // anything else is malformed, not a wrong fate.
        let (_, fate) = self.request(&json!({"fate": {"id": id}}), &["fate"])?;
        match Fate::from_json(&fate) {
            Some(_) => Ok(fate),
            None => Err(malformed(&json!({ "fate": fate }))),
        }
    }

    fn repaired(&mut self) -> Result<Vec<Value>, Failure> {
        // PORTS.md: with `given.repair` the reply is `{"ready": {"repaired": [OUTPUT...]}}`,
        // `[]` when repair appended nothing; without the list the events cannot be compared.
        let ready = self.ready.take().unwrap_or(Value::Null);
        match ready.get("repaired") {
            Some(Value::Array(events)) => Ok(events.clone()),
            _ => Err(Failure {
                what: "malformed reply".into(),
                tail: format!(
                    ": {} (no `repaired`: `given.repair` asks for the events crash repair \
                     appended, S50, S59)",
                    json!({ "ready": ready })
                ),
            }),
        }
    }

    fn input(&mut self, input: &Input) -> Result<Result<Vec<Value>, Rejection>, Failure> {
        let reply = self.request(
            &json!({ "in": input_json(input) }),
            &["outputs", "rejected"],
        )?;
        rejection_or(reply, |outputs| match outputs {
            Value::Array(outputs) => Ok(outputs),
            other => Err(malformed(&json!({ "outputs": other }))),
        })
    }
}

/// An `"out"` value that is a durable event (`{"event": …}`), what crash repair appends.
fn is_event(output: &Value) -> bool {
    output
        .as_object()
        .is_some_and(|o| o.len() == 1 && o.get("event").is_some_and(Value::is_object))
}

/// A `rejected` reply as a rejection (its body must be a kind), any other through `accept`.
fn rejection_or<T>(
    (key, body): (String, Value),
    accept: impl FnOnce(Value) -> Result<T, Failure>,
) -> Result<Result<T, Rejection>, Failure> {
    match (key.as_str(), body) {
        ("rejected", Value::String(kind)) => Ok(Err(Rejection { kind, detail: None })),
        ("rejected", other) => Err(malformed(&json!({ "rejected": other }))),
        (_, body) => accept(body).map(Ok),
    }
}

fn malformed(reply: &Value) -> Failure {
    malformed_text(&reply.to_string())
}

fn malformed_text(reply: &str) -> Failure {
    let shown: String = reply.chars().take(SHOWN).collect();
    let more = if shown.len() < reply.len() { "…" } else { "" };
    Failure {
        what: "malformed reply".into(),
        tail: format!(": {shown}{more}"),
    }
}

/// `10s`, `1.5s`, `250ms`.
pub(crate) fn seconds(duration: Duration) -> String {
    if duration.subsec_nanos() == 0 {
        format!("{}s", duration.as_secs())
    } else if duration < Duration::from_secs(1) {
        format!("{}ms", duration.as_millis())
    } else {
        format!("{}s", duration.as_secs_f64())
    }
}
