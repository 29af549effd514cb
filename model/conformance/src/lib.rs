//! # coxswain-conformance
//!
//! Conformance traces (`docs/FORMAT.md`): the contract ports of coxswain are checked
//! against. A trace is JSON lines: an optional `given` log to restore from, then inputs (`in`),
//! each followed by every output it must emit (`out`) or the kind of its rejection (`rejected`).
//!
//! This crate only translates between the trace format and the core: [`replay`] parses a trace,
//! feeds its inputs to the real [`Machine`] and compares every output; [`Recorder`] writes the
//! trace of a run (the model checker prints counterexamples with it). It decides nothing itself.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::fmt;
use std::iter::Peekable;
use std::num::NonZeroUsize;
use std::ops::ControlFlow;
use std::path::Path;

use coxswain_core::{Config, Input, Machine, Output, Rejected};

pub mod generate;
mod subject;
use serde_json::{json, Value};

/// Why a trace did not replay.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// The file could not be read.
    #[error("cannot read trace: {0}")]
    Io(String),
    /// A line is not valid trace syntax.
    #[error("line {line}: malformed trace: {message}")]
    Malformed {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The implementation under test failed while serving a line (a port crashed, went silent
    /// or answered out of protocol, `PORTS.md`).
    #[error("{failure} at line {line}{tail}")]
    Failed {
        /// 1-based line number of the line being served.
        line: usize,
        /// What went wrong (`port exited (exit status: 3)`, …).
        failure: String,
        /// More lines to show after it (e.g. the port's last stderr lines), each starting with
        /// a newline; empty when there are none.
        tail: String,
    },
    /// The machine did something other than the trace expects.
    #[error("line {line}: expected {expected}, actual {actual}")]
    Mismatch {
        /// 1-based line number of the first difference.
        line: usize,
        /// What the trace expects there.
        expected: String,
        /// What the machine did.
        actual: String,
    },
}

/// What a trace that replayed exactly contained.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    /// Inputs applied (including rejected ones).
    pub inputs: usize,
    /// Outputs compared.
    pub outputs: usize,
    /// Inputs that were rejected as expected.
    pub rejections: usize,
}

/// One line of a trace.
#[derive(Clone, Debug, PartialEq)]
pub enum Line {
    /// `{"note": …}`: ignored.
    Note(String),
    /// `{"given": {"log": […], "seedLength": n, "memory": w, "maxPending": p, "repair":
    /// {"redeliver": a}}}`: restore from this log first (after crash repair, with `repair`).
    Given {
        /// The durable log (empty when omitted).
        log: Vec<Value>,
        /// The seed boundary (S46).
        seed_length: usize,
        /// The delivery memory's capacity (S51–S53), 0 when omitted;
        /// [`Config::UNBOUNDED_DELIVERY_MEMORY`] for `"unbounded"` (S58).
        memory: usize,
        /// The admission bound `P ≥ 1` (S55), `None` (unbounded) when omitted.
        max_pending: Option<NonZeroUsize>,
        /// `repair: {redeliver: A}`: run crash repair (S50) with redelivery allowance `A`
        /// (S59) on `log` before restoring; `None` when omitted (the log must restore as it is).
        repair: Option<u64>,
    },
    /// `{"in": …}`: one input.
    In(Input),
    /// `{"out": …}`: the next expected output.
    Out(Value),
    /// `{"rejected": kind}`: the preceding input (or the given log) must be rejected.
    Rejected(String),
    /// `{"fate": {"id": "a", "is": F}}`: the query `fate(id)` (S58) must answer `F` (FORMAT.md's
    /// shape, compared as JSON) here.
    Fate {
        /// The id asked about.
        id: String,
        /// The expected answer.
        is: Value,
    },
}

/// A `given` line's body (FORMAT.md): the log, the seed boundary, the memory, the admission
/// bound and the repair.
fn given(body: &Value) -> Result<Line, String> {
    let log = match body.get("log") {
        None => Vec::new(),
        Some(log) => log
            .as_array()
            .cloned()
            .ok_or_else(|| String::from("`log` is not an array"))?,
    };
    let count = |key: &str| match body.get(key) {
        None => Ok(0),
        Some(n) => n
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| format!("`{key}` is not an integer")),
    };
    // S55: `P ≥ 1`; absent (or `null`) is unbounded.
    let max_pending = match body.get("maxPending") {
        None | Some(Value::Null) => None,
        Some(n) => Some(
            n.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .and_then(NonZeroUsize::new)
                .ok_or_else(|| String::from("`maxPending` is not a positive integer"))?,
        ),
    };
    // S58: the capacity may be `"unbounded"`.
    let memory = match body.get("memory") {
        Some(Value::String(word)) if word == "unbounded" => Config::UNBOUNDED_DELIVERY_MEMORY,
        Some(Value::String(_)) => {
            return Err("`memory` is neither a non-negative integer nor \"unbounded\"".into())
        }
        _ => count("memory")?,
    };
    // S59: `repair: {redeliver: A}`, `A ≥ 0`.
    let repair = match body.get("repair") {
        None => None,
        Some(repair) => Some(
            repair
                .as_object()
                .filter(|repair| repair.len() == 1)
                .and_then(|repair| repair.get("redeliver"))
                .and_then(Value::as_u64)
                .ok_or_else(|| {
                    String::from("`repair` is not {\"redeliver\": A} with an integer A >= 0")
                })?,
        ),
    };
    Ok(Line::Given {
        log,
        seed_length: count("seedLength")?,
        memory,
        max_pending,
        repair,
    })
}

impl Line {
    /// One trace line from its JSON value (a one-key object), as [`Trace::parse`] reads it; the
    /// ports kit parses `PORTS.md`'s `{"in": INPUT}` and `{"given": G}` with it too.
    pub fn from_value(value: &Value) -> Result<Line, String> {
        let Some(object) = value.as_object().filter(|o| o.len() == 1) else {
            return Err("a line is an object with exactly one key".into());
        };
        let Some((key, body)) = object.iter().next() else {
            return Err("empty object".into());
        };
        let line = match key.as_str() {
            "note" => Line::Note(body.as_str().unwrap_or_default().to_owned()),
            "given" => given(body)?,
            "in" => Line::In(
                serde_json::from_value(body.clone())
                    .map_err(|e| format!("unknown input {body}: {e}"))?,
            ),
            "out" => Line::Out(body.clone()),
            "fate" => {
                let id = body
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| String::from("`fate` lacks a string `id`"))?;
                let is = body
                    .get("is")
                    .ok_or_else(|| String::from("`fate` lacks `is`"))?;
                if body.as_object().is_some_and(|body| body.len() != 2) {
                    return Err("`fate` takes exactly `id` and `is`".into());
                }
                Line::Fate {
                    id: id.to_owned(),
                    is: is.clone(),
                }
            }
            "rejected" => Line::Rejected(
                body.as_str()
                    .ok_or_else(|| String::from("`rejected` takes a string"))?
                    .to_owned(),
            ),
            other => return Err(format!("unknown key `{other}`")),
        };
        Ok(line)
    }
}

/// A parsed trace: its lines with their 1-based line numbers (blank lines dropped).
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// `(line number, line)` in file order.
    pub lines: Vec<(usize, Line)>,
}

impl Trace {
    /// Parses a trace from its text.
    pub fn parse(text: &str) -> Result<Trace, TraceError> {
        let mut lines = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let number = index + 1;
            if raw.trim().is_empty() {
                continue;
            }
            let malformed = |message: String| TraceError::Malformed {
                line: number,
                message,
            };
            let value: Value =
                serde_json::from_str(raw).map_err(|e| malformed(format!("not JSON: {e}")))?;
            let line = Line::from_value(&value).map_err(malformed)?;
            if matches!(line, Line::Given { .. })
                && lines.iter().any(|(_, l)| !matches!(l, Line::Note(_)))
            {
                return Err(malformed(
                    "`given` must be the first line after notes".into(),
                ));
            }
            lines.push((number, line));
        }
        Ok(Trace { lines })
    }
}

/// Reads and replays one trace file.
pub fn replay_file(path: &Path) -> Result<Replayed, TraceError> {
    let text = std::fs::read_to_string(path).map_err(|e| TraceError::Io(e.to_string()))?;
    replay(&Trace::parse(&text)?)
}

/// Replays a trace against a fresh (or restored) [`Machine`] and compares every output.
pub fn replay(trace: &Trace) -> Result<Replayed, TraceError> {
    replay_on(trace, &mut CoreSubject::default())
}

/// Replays a trace on any implementation ([`Subject`]): starts it from the trace's `given` line
/// (or fresh), applies every input and compares each answer with the trace exactly as [`replay`]
/// does for the core. A [`Failure`] of the subject fails the trace at the line it was serving.
pub fn replay_on<S: Subject + ?Sized>(
    trace: &Trace,
    subject: &mut S,
) -> Result<Replayed, TraceError> {
    let mut lines = trace
        .lines
        .iter()
        .filter(|(_, line)| !matches!(line, Line::Note(_)))
        .peekable();
    let mut summary = Replayed::default();
    if begin(subject, &mut lines, &mut summary)?.is_break() {
        return Ok(summary); // an invalid-log rejection ends the trace
    }
    while let Some((number, line)) = lines.next() {
        let input = match line {
            Line::In(input) => input,
            Line::Fate { id, is } => {
                // S58: a query; it emits nothing, so what follows it is the next input.
                let actual = subject.fate(id).map_err(failed(*number))?;
                if actual != *is {
                    return Err(TraceError::Mismatch {
                        line: *number,
                        expected: format!("fate of {id:?} {is}"),
                        actual: format!("fate of {id:?} {actual}"),
                    });
                }
                match lines.peek() {
                    Some((line, other @ (Line::Out(_) | Line::Rejected(_)))) => {
                        return Err(TraceError::Malformed {
                            line: *line,
                            message: format!(
                                "{} after a fate line (a query emits nothing)",
                                describe_line(other)
                            ),
                        })
                    }
                    _ => continue,
                }
            }
            Line::Given { .. } => {
                return Err(TraceError::Malformed {
                    line: *number,
                    message: "`given` must come first".into(),
                })
            }
            other => {
                return Err(TraceError::Malformed {
                    line: *number,
                    message: format!("{} with no input before it", describe_line(other)),
                })
            }
        };
        summary.inputs += 1;
        let actual = match subject.input(input).map_err(failed(*number))? {
            Ok(actual) => actual,
            Err(rejection) => match lines.next() {
                Some((_, Line::Rejected(kind))) if *kind == rejection.kind => {
                    summary.rejections += 1;
                    continue;
                }
                Some((line, expected)) => {
                    return Err(TraceError::Mismatch {
                        line: *line,
                        expected: describe_line(expected),
                        actual: rejection.to_string(),
                    })
                }
                None => {
                    return Err(TraceError::Mismatch {
                        line: *number,
                        expected: "the input to be accepted".into(),
                        actual: rejection.to_string(),
                    })
                }
            },
        };
        match_outputs(actual, *number, &mut lines, &mut summary)?;
    }
    Ok(summary)
}

/// A subject's failure at `line`, as the trace error naming it.
fn failed(line: usize) -> impl Fn(Failure) -> TraceError {
    move |failure: Failure| TraceError::Failed {
        line,
        failure: failure.what,
        tail: failure.tail,
    }
}

/// Begins the subject: restored from the trace's `given` (which must restore, or be rejected as
/// the next line says: then the trace ends, `Break`), or fresh.
fn begin<'t, S: Subject + ?Sized>(
    subject: &mut S,
    lines: &mut Peekable<impl Iterator<Item = &'t (usize, Line)>>,
    summary: &mut Replayed,
) -> Result<ControlFlow<()>, TraceError> {
    let Some((
        number,
        Line::Given {
            log,
            seed_length,
            memory,
            max_pending,
            repair,
        },
    )) = lines.peek()
    else {
        let first = lines.peek().map_or(1, |(line, _)| *line);
        if let Err(rejection) = subject.begin(None).map_err(failed(first))? {
            return Err(TraceError::Mismatch {
                line: first,
                expected: "a fresh machine".into(),
                actual: rejection.to_string(),
            });
        }
        return Ok(ControlFlow::Continue(()));
    };
    let number = *number;
    let given = Given {
        log,
        seed_length: *seed_length,
        memory: *memory,
        max_pending: *max_pending,
        repair: *repair,
    };
    let restored = subject.begin(Some(&given)).map_err(failed(number))?;
    lines.next();
    match (restored, lines.peek()) {
        (Err(rejection), Some((_, Line::Rejected(kind)))) if *kind == rejection.kind => {
            summary.rejections += 1;
            match lines.nth(1) {
                None => Ok(ControlFlow::Break(())),
                Some((line, _)) => Err(TraceError::Malformed {
                    line: *line,
                    message: "a trace ends after an invalid-log rejection".into(),
                }),
            }
        }
        (Err(rejection), next) => Err(TraceError::Mismatch {
            line: next.map_or(number, |(line, _)| *line),
            expected: "the log to restore".into(),
            actual: rejection.to_string(),
        }),
        (Ok(()), Some((line, Line::Rejected(kind)))) => Err(TraceError::Mismatch {
            line: *line,
            expected: format!("rejected {kind}"),
            actual: "the log restored".into(),
        }),
        (Ok(()), _) => {
            // S50, S59: the `out` lines right after `given` are the events repair appended.
            if given.repair.is_some() {
                let appended = subject.repaired().map_err(failed(number))?;
                match_outputs(appended, number, lines, summary)?;
            }
            Ok(ControlFlow::Continue(()))
        }
    }
}

/// Holds what the input at line `number` emitted to the trace's `out` lines after it, one by
/// one: the same values, as many.
fn match_outputs<'t>(
    actual: Vec<Value>,
    number: usize,
    lines: &mut Peekable<impl Iterator<Item = &'t (usize, Line)>>,
    summary: &mut Replayed,
) -> Result<(), TraceError> {
    let mut emitted = actual.into_iter();
    loop {
        let expected = match lines.peek() {
            Some((line, Line::Out(value))) => Some((*line, value)),
            Some((line, Line::Rejected(kind))) => {
                return Err(TraceError::Mismatch {
                    line: *line,
                    expected: format!("rejected {kind}"),
                    actual: "the input was accepted".into(),
                })
            }
            _ => None,
        };
        match (expected, emitted.next()) {
            (Some((line, expected)), Some(actual)) => {
                if *expected != actual {
                    return Err(TraceError::Mismatch {
                        line,
                        expected: format!("out {expected}"),
                        actual: format!("out {actual}"),
                    });
                }
                summary.outputs += 1;
                lines.next();
            }
            (Some((line, expected)), None) => {
                return Err(TraceError::Mismatch {
                    line,
                    expected: format!("out {expected}"),
                    actual: format!("no further output of the input at line {number}"),
                })
            }
            (None, Some(actual)) => {
                let line = lines.peek().map_or(number + 1, |(line, _)| *line);
                return Err(TraceError::Mismatch {
                    line,
                    expected: format!("no further output of the input at line {number}"),
                    actual: format!("out {actual}"),
                });
            }
            (None, None) => return Ok(()),
        }
    }
}

fn describe_line(line: &Line) -> String {
    match line {
        Line::Note(_) => "a note".into(),
        Line::Given { .. } => "given".into(),
        Line::In(input) => format!("in {}", input_json(input)),
        Line::Out(value) => format!("out {value}"),
        Line::Rejected(kind) => format!("rejected {kind}"),
        Line::Fate { id, is } => format!("fate of {id:?} {is}"),
    }
}

pub use subject::{CoreSubject, Failure, Given, Rejection, Subject};

/// An output as the value of an `"out"` line.
pub fn output_json(output: &Output) -> Value {
    serde_json::to_value(output).unwrap_or_else(|e| json!({ "unserializable": e.to_string() }))
}

/// An input as the value of an `"in"` line.
pub fn input_json(input: &Input) -> Value {
    serde_json::to_value(input).unwrap_or_else(|e| json!({ "unserializable": e.to_string() }))
}

/// Writes the trace of a run: apply inputs to a real machine and record each with its outputs.
#[derive(Debug)]
pub struct Recorder {
    machine: Machine,
    text: String,
    /// The durable log so far: the given log, then every event emitted.
    log: Vec<Value>,
}

impl Recorder {
    /// A trace of a fresh machine, starting with a note.
    pub fn new(note: &str) -> Self {
        Recorder::with_config(note, Config::new())
    }

    /// A trace of a fresh machine with `config` (a delivery memory and an admission bound are
    /// recorded as the `given` line `{"memory": w, "maxPending": p}`, each only when set).
    pub fn with_config(note: &str, config: Config) -> Self {
        let mut recorder = Recorder::from_machine(note, Machine::with_config(config));
        let mut given = serde_json::Map::new();
        if config.delivery_memory > 0 {
            given.insert(
                "memory".into(),
                if config.is_delivery_memory_unbounded() {
                    json!("unbounded")
                } else {
                    json!(config.delivery_memory)
                },
            );
        }
        if let Some(limit) = config.max_pending {
            given.insert("maxPending".into(), json!(limit.get()));
        }
        if !given.is_empty() {
            recorder.push_line(&json!({ "given": given }));
        }
        recorder
    }

    /// A trace of a machine restored from `log` with `config` (recorded as its `given` line).
    pub fn restored(
        note: &str,
        config: Config,
        log: &[Value],
        seed_length: usize,
    ) -> Result<Self, coxswain_core::InvalidLog> {
        let machine = Machine::restore_with(config, log, seed_length)?;
        let mut recorder = Recorder::from_machine(note, machine);
        let given = Given {
            log,
            seed_length,
            memory: config.delivery_memory,
            max_pending: config.max_pending,
            repair: None,
        };
        recorder.push_line(&json!({ "given": given.to_json() }));
        recorder.log = log.to_vec();
        Ok(recorder)
    }

    /// A trace of a given machine.
    pub fn from_machine(note: &str, machine: Machine) -> Self {
        let mut recorder = Recorder {
            machine,
            text: String::new(),
            log: Vec::new(),
        };
        recorder.push_line(&json!({ "note": note }));
        recorder
    }

    /// Applies an input and records it with its outputs or its rejection; returns the outputs,
    /// or the rejection.
    pub fn input(&mut self, input: Input) -> Result<Vec<Output>, Rejected> {
        self.push_line(&json!({ "in": input_json(&input) }));
        let outputs: Vec<Output> = match self.machine.handle(input) {
            Ok(transition) => transition.into_outputs().collect(),
            Err(rejection) => {
                self.push_line(&json!({ "rejected": rejection.kind() }));
                return Err(rejection);
            }
        };
        for output in &outputs {
            let value = output_json(output);
            if let Some(event) = value.get("event") {
                self.log.push(event.clone());
            }
            self.push_line(&json!({ "out": value }));
        }
        Ok(outputs)
    }

    /// Asks the machine `fate(id)` (S58) and records it as a `fate` line; returns the answer
    /// (FORMAT.md's `F`, [`coxswain_core::Fate::to_json`]). A query changes nothing.
    pub fn fate(&mut self, id: &str) -> Value {
        let fate = self
            .machine
            .fate(&coxswain_core::MessageId::new(id))
            .to_json();
        self.push_line(&json!({ "fate": { "id": id, "is": fate } }));
        fate
    }

    /// The machine, as the recorded inputs left it.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// The durable log so far: the given log, then every event the recorded inputs emitted.
    pub fn log(&self) -> &[Value] {
        &self.log
    }

    /// The trace text (JSON lines, newline-terminated).
    pub fn finish(self) -> String {
        self.text
    }

    fn push_line(&mut self, value: &Value) {
        self.text.push_str(&value.to_string());
        self.text.push('\n');
    }
}

impl fmt::Display for Replayed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} inputs, {} outputs, {} rejections",
            self.inputs, self.outputs, self.rejections
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FORMAT.md's example ("Example: an idle follow-up, one text step"), read from the
    /// document itself (the first fenced block after its heading) behind a note line, so the
    /// line numbers below count from the note.
    fn example() -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/FORMAT.md");
        let text = std::fs::read_to_string(path).unwrap();
        let (_, section) = text
            .split_once("## Example: an idle follow-up, one text step")
            .unwrap();
        let block = section.split("```").nth(1).unwrap();
        format!(
            "{}\n{}",
            r#"{"note":"FORMAT.md example: an idle follow-up, one text step"}"#,
            block.trim_start_matches('\n')
        )
    }

    #[test]
    fn format_md_example_replays() {
        let trace = Trace::parse(&example()).unwrap();
        assert_eq!(
            replay(&trace),
            Ok(Replayed {
                inputs: 4,
                outputs: 14,
                rejections: 0
            })
        );
    }

    #[test]
    fn a_changed_output_is_reported_at_its_line() {
        let text = example().replace(r#""status":"idle""#, r#""status":"running""#);
        let Err(TraceError::Mismatch { line, .. }) = replay(&Trace::parse(&text).unwrap()) else {
            panic!("expected a mismatch");
        };
        assert_eq!(line, 19);
    }

    #[test]
    fn a_missing_output_is_reported_at_the_next_input() {
        let text: String = example()
            .lines()
            .filter(|l| !l.contains("agent/inbox/claimed"))
            .map(|l| format!("{l}\n"))
            .collect();
        let Err(TraceError::Mismatch { line, actual, .. }) = replay(&Trace::parse(&text).unwrap())
        else {
            panic!("expected a mismatch");
        };
        assert_eq!(line, 8);
        assert!(actual.contains("agent/inbox/claimed"), "{actual}");
    }

    #[test]
    fn an_extra_expected_output_is_reported() {
        let text = format!("{}{}\n", example(), r#"{"out":{"disposed":{}}}"#);
        let Err(TraceError::Mismatch { line, .. }) = replay(&Trace::parse(&text).unwrap()) else {
            panic!("expected a mismatch");
        };
        assert_eq!(line, 20);
    }

    #[test]
    fn rejections_are_checked_by_kind() {
        let ok = "{\"in\":{\"step\":\"completed\"}}\n{\"rejected\":\"unexpected-completion\"}\n";
        assert_eq!(
            replay(&Trace::parse(ok).unwrap()).map(|r| r.rejections),
            Ok(1)
        );
        let wrong = "{\"in\":{\"step\":\"completed\"}}\n{\"rejected\":\"busy\"}\n";
        assert!(matches!(
            replay(&Trace::parse(wrong).unwrap()),
            Err(TraceError::Mismatch { line: 2, .. })
        ));
        let unexpected = "{\"in\":{\"step\":\"completed\"}}\n";
        assert!(matches!(
            replay(&Trace::parse(unexpected).unwrap()),
            Err(TraceError::Mismatch { line: 1, .. })
        ));
    }

    #[test]
    fn invalid_log_after_given() {
        let text = "{\"given\":{\"log\":[{\"data\":{}}]}}\n{\"rejected\":\"invalid-log\"}\n";
        assert_eq!(
            replay(&Trace::parse(text).unwrap()).map(|r| r.rejections),
            Ok(1)
        );
        let valid = "{\"given\":{\"log\":[]}}\n{\"rejected\":\"invalid-log\"}\n";
        assert!(matches!(
            replay(&Trace::parse(valid).unwrap()),
            Err(TraceError::Mismatch { line: 2, .. })
        ));
    }

    #[test]
    fn malformed_lines_are_reported() {
        for (text, line) in [
            ("{\"in\":{\"bogus\":1}}", 1),
            ("\n{\"out\":1,\"in\":2}", 2),
            ("not json", 1),
            ("{\"in\":{\"clear\":{}}}\n{\"given\":{\"log\":[]}}", 2),
            ("{\"rejected\":\"busy\"}", 1),
        ] {
            let result = Trace::parse(text).and_then(|t| replay(&t));
            assert!(
                matches!(result, Err(TraceError::Malformed { line: l, .. }) if l == line),
                "{text}: {result:?}"
            );
        }
    }

    /// A subject that answers like the core until its `n`th input, where it fails (PORTS.md: a
    /// crashed port fails the trace at the line it was serving).
    struct FailsAt {
        core: CoreSubject,
        left: usize,
    }

    impl Subject for FailsAt {
        fn begin(&mut self, given: Option<&Given<'_>>) -> Result<Result<(), Rejection>, Failure> {
            self.core.begin(given)
        }

        fn input(&mut self, input: &Input) -> Result<Result<Vec<Value>, Rejection>, Failure> {
            if self.left == 0 {
                return Err(Failure {
                    what: "port exited (exit status: 3)".into(),
                    tail: "\n  stderr: boom".into(),
                });
            }
            self.left -= 1;
            self.core.input(input)
        }
    }

    #[test]
    fn a_subject_failure_fails_the_trace_at_the_line_served() {
        let trace = Trace::parse(&example()).unwrap();
        let mut subject = FailsAt {
            core: CoreSubject::default(),
            left: 1,
        };
        let error = replay_on(&trace, &mut subject).unwrap_err();
        assert_eq!(
            error.to_string(),
            "port exited (exit status: 3) at line 10\n  stderr: boom"
        );
        let mut subject = FailsAt {
            core: CoreSubject::default(),
            left: 4,
        };
        assert_eq!(replay_on(&trace, &mut subject).map(|r| r.outputs), Ok(14));
    }

    /// S55: `given.maxPending` bounds the machine the trace replays on; it is a positive
    /// integer (FORMAT.md), `null` or absent is unbounded.
    #[test]
    fn s55_given_max_pending_bounds_the_replayed_machine() {
        let inject = |id: &str| {
            format!(
                r#"{{"in":{{"inject":{{"id":"{id}","source":{{"kind":"user"}},"content":"x"}}}}}}"#
            )
        };
        let splice = |id: &str, start: u8| {
            format!(
                r#"{{"out":{{"event":{{"type":"agent/inbox/spliced","data":{{"target":"next-step","start":{start},"inserted":[{{"id":"{id}","source":{{"kind":"user"}},"content":"x"}}]}}}}}}}}
{{"out":{{"notify":{{"type":"agent/inbox/inserted","message":{{"id":"{id}","source":{{"kind":"user"}},"content":"x"}}}}}}}}"#
            )
        };
        let bounded = format!(
            "{{\"given\":{{\"maxPending\":1}}}}\n{}\n{}\n{}\n{{\"rejected\":\"full\"}}\n",
            inject("a"),
            splice("a", 0),
            inject("b")
        );
        let trace = Trace::parse(&bounded).unwrap();
        assert!(matches!(
            &trace.lines[0].1,
            Line::Given { max_pending: Some(p), memory: 0, .. } if p.get() == 1
        ));
        assert_eq!(
            replay(&trace),
            Ok(Replayed {
                inputs: 2,
                outputs: 2,
                rejections: 1
            })
        );
        // Unbounded (absent or null), the second inject is accepted.
        for given in ["", "{\"given\":{\"maxPending\":null}}\n"] {
            let text = format!(
                "{given}{}\n{}\n{}\n{}\n",
                inject("a"),
                splice("a", 0),
                inject("b"),
                splice("b", 1)
            );
            assert_eq!(
                replay(&Trace::parse(&text).unwrap()).map(|r| r.outputs),
                Ok(4)
            );
        }
        for bad in ["0", "-1", "1.5", "\"2\"", "true"] {
            let text = format!("{{\"given\":{{\"maxPending\":{bad}}}}}");
            assert_eq!(
                Trace::parse(&text),
                Err(TraceError::Malformed {
                    line: 1,
                    message: "`maxPending` is not a positive integer".into()
                }),
                "{bad}"
            );
        }
    }

    /// The recorder writes a bound into the `given` line (only when set, S55), and a guarded
    /// send with its `expect` (S54); the trace replays.
    #[test]
    fn s54_s55_a_bounded_guarded_recording_replays() {
        let one = NonZeroUsize::MIN;
        let config = Config::new().with_max_pending(one);
        let mut recorder = Recorder::with_config("bounded", config);
        let m = |id: &str| std::sync::Arc::new(coxswain_core::Message::user(id, "hi"));
        let guarded = |id: &str, expect| Input::Send {
            message: m(id),
            target: coxswain_core::Target::NextStep,
            wakeup: true,
            expect: Some(expect),
        };
        recorder.input(Input::Followup(m("a"))).unwrap();
        assert_eq!(
            recorder
                .input(guarded("s2", coxswain_core::Expect::Turn(2)))
                .map_err(|r| r.kind()),
            Err("turn-mismatch")
        );
        recorder
            .input(guarded("s1", coxswain_core::Expect::Turn(1)))
            .unwrap();
        assert_eq!(
            recorder.input(Input::Inject(m("s3"))).map_err(|r| r.kind()),
            Err("full")
        );
        let text = recorder.finish();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], r#"{"given":{"maxPending":1}}"#);
        let guarded_line = r#"{"in":{"send":{"expect":{"turn":2},"message":{"content":"hi","id":"s2","source":{"kind":"user"}},"target":"next-step","wakeup":true}}}"#;
        let at = lines.iter().position(|l| *l == guarded_line);
        assert!(at.is_some(), "{text}");
        assert_eq!(
            at.and_then(|at| lines.get(at + 1)).copied(),
            Some(r#"{"rejected":"turn-mismatch"}"#)
        );
        assert_eq!(
            replay(&Trace::parse(&text).unwrap()).map(|r| (r.inputs, r.rejections)),
            Ok((4, 2))
        );
        // Without a bound or a memory there is no `given` line.
        let plain = Recorder::with_config("plain", Config::new()).finish();
        assert_eq!(plain, "{\"note\":\"plain\"}\n");
    }

    /// PORTS.md's `G`: `log`, `seedLength` and `memory` spelled out, `maxPending` only when set.
    #[test]
    fn given_to_json_spells_out_the_bound_only_when_there_is_one() {
        let mut given = Given {
            log: &[],
            seed_length: 0,
            memory: 2,
            max_pending: None,
            repair: None,
        };
        assert_eq!(
            given.to_json(),
            json!({"log": [], "seedLength": 0, "memory": 2})
        );
        given.max_pending = NonZeroUsize::new(3);
        assert_eq!(
            given.to_json(),
            json!({"log": [], "seedLength": 0, "memory": 2, "maxPending": 3})
        );
        assert_eq!(given.config().max_pending, NonZeroUsize::new(3));
        assert_eq!(given.config().delivery_memory, 2);
    }

    /// S58: a recorded `fate` line holds the core's answer where it stands, and replays.
    #[test]
    fn s58_the_recorder_writes_fate_lines_that_replay() {
        let mut recorder =
            Recorder::with_config("fates", Config::new().with_unbounded_delivery_memory());
        assert_eq!(recorder.fate("a"), json!("unknown"));
        recorder
            .input(Input::Inject(
                coxswain_core::Message::user("a", "hi").into(),
            ))
            .unwrap();
        assert_eq!(recorder.fate("a"), json!({"pending": "next-step"}));
        recorder
            .input(Input::Remove(coxswain_core::MessageId::new("a")))
            .unwrap();
        assert_eq!(recorder.fate("a"), json!("discarded"));
        let text = recorder.finish();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            (lines[1], lines[2], lines[lines.len() - 1]),
            (
                r#"{"given":{"memory":"unbounded"}}"#,
                r#"{"fate":{"id":"a","is":"unknown"}}"#,
                r#"{"fate":{"id":"a","is":"discarded"}}"#
            )
        );
        let replayed = replay(&Trace::parse(&text).unwrap()).unwrap();
        assert_eq!((replayed.inputs, replayed.outputs), (2, 4));
    }

    #[test]
    fn recorder_output_replays() {
        let mut recorder = Recorder::new("recorded");
        let m = coxswain_core::Message::user("a", "hi");
        let b = coxswain_core::Message::user("b", "more");
        recorder.input(Input::Followup(m.into())).unwrap();
        recorder.input(Input::Steer(b.clone().into())).unwrap();
        assert!(recorder.input(Input::Steer(b.into())).is_err());
        recorder
            .input(Input::Cancel {
                cause: coxswain_core::CancelCause::User,
                keep_inbox: false,
            })
            .unwrap();
        let text = recorder.finish();
        let replayed = replay(&Trace::parse(&text).unwrap()).unwrap();
        assert_eq!(replayed.inputs, 4);
        assert_eq!(replayed.rejections, 1);
    }

    /// §13 in the kit: `{"resume": {}}`, the `fate` line (S58), `memory: "unbounded"` and
    /// `given.repair` (S50, S59), each checked exactly.
    mod s13 {
        use super::*;

        const A: &str = r#"{"id":"a","source":{"kind":"user"},"content":"a"}"#;

        fn run(text: &str) -> Result<Replayed, TraceError> {
            replay(&Trace::parse(text)?)
        }

        /// Turn 1 claimed `a` (waking, NT) and crashed before a step: the stored log.
        fn crashed() -> String {
            format!(
                r#"[{{"type":"agent/inbox/spliced","data":{{"target":"next-turn","start":0,"inserted":[{A}],"wakeup":true}}}},{{"type":"turn/start","data":{{"turn":1}}}},{{"type":"agent/inbox/spliced","data":{{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}}}}]"#
            )
        }

        fn turn_end() -> String {
            r#"{"out":{"event":{"type":"turn/end","data":{"turn":1,"reason":{"kind":"interrupted"}}}}}"#.into()
        }

        fn redelivered() -> String {
            format!(
                r#"{{"out":{{"event":{{"type":"agent/inbox/spliced","data":{{"target":"next-turn","start":0,"inserted":[{A}],"wakeup":true,"redelivery":1}}}}}}}}"#
            )
        }

        #[test]
        fn s58_a_fate_line_is_compared_where_it_stands() {
            let given = r#"{"given":{"memory":"unbounded"}}"#;
            let send = format!(
                r#"{{"in":{{"send":{{"message":{A},"target":"next-turn","wakeup":false}}}}}}"#
            );
            let pending = r#"{"fate":{"id":"a","is":{"pending":"next-turn"}}}"#;
            let removed = r#"{"in":{"remove":"a"}}"#;
            let ok = format!("{given}\n{send}\n{pending}\n{removed}\n{{\"fate\":{{\"id\":\"a\",\"is\":\"discarded\"}}}}\n");
            // The fate line ends the send's outputs: the trace lists none, so none may come.
            assert!(matches!(
                run(&ok),
                Err(TraceError::Mismatch { line: 3, ref expected, .. })
                    if expected == "no further output of the input at line 2"
            ));
            let mut recorder =
                Recorder::with_config("S58", Config::new().with_unbounded_delivery_memory());
            let sent = recorder
                .input(
                    serde_json::from_str(&format!(
                        r#"{{"send":{{"message":{A},"target":"next-turn","wakeup":false}}}}"#
                    ))
                    .unwrap(),
                )
                .unwrap();
            assert_eq!(sent.len(), 2);
            let recorded = recorder.finish();
            assert!(recorded.lines().nth(1) == Some(given), "{recorded}");
            let with_fates = format!(
                "{recorded}{pending}\n{removed}\n{}\n{}\n{{\"fate\":{{\"id\":\"a\",\"is\":\"discarded\"}}}}\n{{\"fate\":{{\"id\":\"b\",\"is\":\"unknown\"}}}}\n",
                r#"{"out":{"event":{"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[],"outcome":"canceled"}}}}"#,
                format_args!(r#"{{"out":{{"notify":{{"type":"agent/inbox/discarded","message":{A}}}}}}}"#),
            );
            assert_eq!(
                run(&with_fates),
                Ok(Replayed {
                    inputs: 2,
                    outputs: 4,
                    rejections: 0
                })
            );
            let wrong = with_fates.replace(r#""is":"discarded""#, r#""is":"unknown""#);
            assert_eq!(
                run(&wrong),
                Err(TraceError::Mismatch {
                    line: 10,
                    expected: "fate of \"a\" \"unknown\"".into(),
                    actual: "fate of \"a\" \"discarded\"".into(),
                })
            );
            // A query emits nothing: an `out` line after it is malformed.
            let out_after = format!("{pending}\n{}\n", r#"{"out":{"disposed":{}}}"#);
            assert_eq!(
                run(&format!("{recorded}{out_after}")),
                Err(TraceError::Malformed {
                    line: 7,
                    message: "out {\"disposed\":{}} after a fate line (a query emits nothing)"
                        .into(),
                })
            );
            for (bad, message) in [
                (r#"{"fate":{"is":"unknown"}}"#, "`fate` lacks a string `id`"),
                (r#"{"fate":{"id":"a"}}"#, "`fate` lacks `is`"),
                (
                    r#"{"fate":{"id":"a","is":"unknown","at":1}}"#,
                    "`fate` takes exactly `id` and `is`",
                ),
            ] {
                assert_eq!(
                    Trace::parse(bad),
                    Err(TraceError::Malformed {
                        line: 1,
                        message: message.into()
                    }),
                    "{bad}"
                );
            }
        }

        #[test]
        fn s59_the_out_lines_after_a_repair_given_are_what_repair_appended() {
            let given = |a: u64| {
                format!(
                    r#"{{"given":{{"log":{},"memory":1,"repair":{{"redeliver":{a}}}}}}}"#,
                    crashed()
                )
            };
            let resume = r#"{"in":{"resume":{}}}"#;
            let a1 = format!(
                "{}\n{}\n{}\n{{\"fate\":{{\"id\":\"a\",\"is\":{{\"pending\":\"next-turn\"}}}}}}\n",
                given(1),
                turn_end(),
                redelivered()
            );
            assert_eq!(
                run(&a1),
                Ok(Replayed {
                    inputs: 0,
                    outputs: 2,
                    rejections: 0
                })
            );
            // A = 0: the closer alone; the claim keeps `end: interrupted` (S58).
            let a0 = format!(
                "{}\n{}\n{}\n{resume}\n",
                given(0),
                turn_end(),
                r#"{"fate":{"id":"a","is":{"claimed":{"turn":1,"end":"interrupted"}}}}"#
            );
            assert_eq!(
                run(&a0),
                Ok(Replayed {
                    inputs: 1,
                    outputs: 1,
                    rejections: 0
                })
            );
            // A missing appended event fails at the line after the given's outs.
            let missing = format!("{}\n{}\n{resume}\n", given(1), turn_end());
            assert!(matches!(
                run(&missing),
                Err(TraceError::Mismatch { line: 3, ref actual, .. }) if actual.contains("redelivery")
            ));
            // Without `repair`, the open turn does not restore (S46).
            let plain = format!(r#"{{"given":{{"log":{}}}}}"#, crashed());
            assert_eq!(
                run(&format!("{plain}\n{{\"rejected\":\"invalid-log\"}}\n")).map(|r| r.rejections),
                Ok(1)
            );
            for (bad, message) in [
                (
                    r#"{"given":{"repair":{"redeliver":-1}}}"#,
                    "`repair` is not {\"redeliver\": A} with an integer A >= 0",
                ),
                (
                    r#"{"given":{"repair":{}}}"#,
                    "`repair` is not {\"redeliver\": A} with an integer A >= 0",
                ),
                (
                    r#"{"given":{"memory":"all"}}"#,
                    "`memory` is neither a non-negative integer nor \"unbounded\"",
                ),
            ] {
                assert_eq!(
                    Trace::parse(bad),
                    Err(TraceError::Malformed {
                        line: 1,
                        message: message.into()
                    }),
                    "{bad}"
                );
            }
        }

        #[test]
        fn s58_s59_the_given_line_round_trips_unbounded_and_repair() {
            let log = [json!({"type": "x"})];
            let given = Given {
                log: &log,
                seed_length: 1,
                memory: Config::UNBOUNDED_DELIVERY_MEMORY,
                max_pending: None,
                repair: Some(2),
            };
            let value = given.to_json();
            assert_eq!(
                value,
                json!({"log": [{"type": "x"}], "seedLength": 1, "memory": "unbounded", "repair": {"redeliver": 2}})
            );
            assert_eq!(
                Line::from_value(&json!({ "given": value })),
                Ok(Line::Given {
                    log: log.to_vec(),
                    seed_length: 1,
                    memory: Config::UNBOUNDED_DELIVERY_MEMORY,
                    max_pending: None,
                    repair: Some(2),
                })
            );
        }

        /// A subject that cannot be asked (a port without the query) fails the trace at the
        /// fate line, and one that cannot repair fails it at the given line.
        #[test]
        fn a_subject_without_fate_or_repair_fails_the_trace_there() {
            struct Plain(CoreSubject);
            impl Subject for Plain {
                fn begin(
                    &mut self,
                    given: Option<&Given<'_>>,
                ) -> Result<Result<(), Rejection>, Failure> {
                    self.0.begin(given)
                }
                fn input(
                    &mut self,
                    input: &Input,
                ) -> Result<Result<Vec<Value>, Rejection>, Failure> {
                    self.0.input(input)
                }
            }
            let fate = "{\"note\":\"S58\"}\n{\"fate\":{\"id\":\"a\",\"is\":\"unknown\"}}\n";
            assert_eq!(
                replay_on(
                    &Trace::parse(fate).unwrap(),
                    &mut Plain(CoreSubject::default())
                ),
                Err(TraceError::Failed {
                    line: 2,
                    failure: "this subject cannot answer the query fate(\"a\") (S58)".into(),
                    tail: String::new(),
                })
            );
            let repair = format!(
                r#"{{"given":{{"log":{},"repair":{{"redeliver":0}}}}}}"#,
                crashed()
            );
            assert!(matches!(
                replay_on(
                    &Trace::parse(&repair).unwrap(),
                    &mut Plain(CoreSubject::default())
                ),
                Err(TraceError::Failed { line: 1, .. })
            ));
        }
    }
}
