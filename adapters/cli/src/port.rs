//! `coxswain port`: the Rust core's own end of PORTS.md's line protocol, on stdin/stdout.
//!
//! It translates and decides nothing: a `begin` restores or creates the real
//! [`Machine`](coxswain_core::Machine) (through [`CoreSubject`]), every `in` goes to it, and its
//! outputs or rejection come back as one line. Requests are parsed exactly as trace lines are
//! ([`Line::from_value`]). It has no switch to break it: the runner's own tests break it from
//! outside (`tests/fixtures/ports/misbehaving.py`, a line filter around it).

use std::io::{self, BufRead, Write};
use std::process::ExitCode;

use coxswain_conformance::{CoreSubject, Given, Line, Subject};
use serde_json::{json, Value};

use crate::exec::PROTOCOL;

/// Where the port is in a session.
enum Phase {
    /// No `begin` yet.
    Idle,
    /// A machine is running.
    Running(Box<CoreSubject>),
    /// The current trace ended.
    Ended,
}

/// Serves the protocol until stdin closes (exit 0), or stdout cannot be written (exit 1).
pub(crate) fn run() -> ExitCode {
    let stdin = io::stdin();
    let mut stdout = io::stdout().lock();
    let mut phase = Phase::Idle;
    for line in stdin.lock().split(b'\n') {
        let Ok(line) = line else {
            return ExitCode::FAILURE;
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let reply = match String::from_utf8(line) {
            Ok(text) => serve(&mut phase, &text),
            Err(_) => json!({"error": "the request is not UTF-8"}).to_string(),
        };
        if writeln!(stdout, "{reply}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

fn serve(phase: &mut Phase, text: &str) -> String {
    let error = |message: String| json!({ "error": message }).to_string();
    let request: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => return error(format!("the request is not JSON: {e}")),
    };
    let Some((key, body)) = request
        .as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.iter().next())
    else {
        return error("a request is an object with exactly one key".into());
    };
    let reply = match key.as_str() {
        "hello" => {
            json!({"hello": {
                "protocol": PROTOCOL,
                "name": "coxswain",
                "version": env!("CARGO_PKG_VERSION"),
            }})
        }
        "begin" => match begin(body.get("given")) {
            Ok((mut subject, started, repair)) => {
                // S50, S59: with `given.repair`, `ready` lists the events repair appended.
                let reply = match (started, repair) {
                    (Err(kind), _) => json!({ "rejected": kind }),
                    (Ok(()), false) => json!({"ready": {}}),
                    (Ok(()), true) => match subject.repaired() {
                        Ok(events) => json!({"ready": {"repaired": events}}),
                        Err(failure) => return error(failure.what),
                    },
                };
                *phase = Phase::Running(Box::new(subject));
                reply
            }
            Err(message) => return error(message),
        },
        "fate" => {
            // S58: a query; it changes nothing and is answered in every phase of the machine
            // (also once disposed), but only inside a trace.
            let Phase::Running(subject) = phase else {
                return error("a fate query outside a trace (send `begin` first)".into());
            };
            let Some(id) = body
                .as_object()
                .filter(|o| o.len() == 1)
                .and_then(|o| o.get("id"))
                .and_then(Value::as_str)
            else {
                return error("`fate` is {\"id\": \"…\"} with a string id".into());
            };
            match subject.fate(id) {
                Ok(fate) => json!({ "fate": fate }),
                Err(failure) => return error(failure.what),
            }
        }
        "in" => {
            let Phase::Running(subject) = phase else {
                return error("an input outside a trace (send `begin` first)".into());
            };
            let input = match Line::from_value(&request) {
                Ok(Line::In(input)) => input,
                Ok(_) => return error("not an input".into()),
                Err(message) => return error(message),
            };
            match subject.input(&input) {
                Ok(Ok(outputs)) => json!({ "outputs": outputs }),
                Ok(Err(rejection)) => json!({ "rejected": rejection.kind }),
                Err(failure) => return error(failure.what),
            }
        }
        "end" => {
            *phase = Phase::Ended;
            json!({"ended": {}})
        }
        other => return error(format!("unknown request `{other}`")),
    };
    reply.to_string()
}

/// What `begin` made: the machine, the restore's rejection kind if it failed, and whether
/// `given` asked for crash repair.
type Begun = (CoreSubject, Result<(), String>, bool);

/// A machine for `begin`: fresh for a missing or `null` `given`, else restored from it (parsed as
/// a trace's `given` line, crash repair included: S50, S59).
fn begin(given: Option<&Value>) -> Result<Begun, String> {
    let mut subject = CoreSubject::default();
    let mut repairs = false;
    let started = match given {
        None | Some(Value::Null) => subject.begin(None),
        Some(given) => {
            let Line::Given {
                log,
                seed_length,
                memory,
                max_pending,
                repair,
            } = Line::from_value(&json!({ "given": given }))?
            else {
                return Err("`given` is not a given line".into());
            };
            repairs = repair.is_some();
            subject.begin(Some(&Given {
                log: &log,
                seed_length,
                memory,
                max_pending,
                repair,
            }))
        }
    };
    match started {
        Ok(result) => Ok((subject, result.map_err(|rejection| rejection.kind), repairs)),
        Err(failure) => Err(failure.what),
    }
}
