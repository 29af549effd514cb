//! The JSON-lines record format of a durable log: one event per line, with a contiguous `seq`.
//!
//! A line is `{"seq": N, "type": T, "data": D}` followed by `\n`. `seq` starts at 1 in a log this
//! crate writes, so it equals the line number; a reader accepts a log without `seq` (written by
//! another implementation; S46 ignores extra keys) but rejects one whose `seq` is not contiguous,
//! since a gap means a lost or duplicated record. The machine's own events ([`Event`]) and the
//! host's ([`HostEvent`]: model output, tool calls…) interleave in one sequence.
//!
//! Writers put the `\n` last, so a record cut short by a crash is exactly a final segment without
//! its `\n`: a *torn tail*, which [`parse`] reports and leaves out (S50). Anything else that is not
//! a JSON object, before the end, is corruption: [`parse`] names its line and the caller must not
//! guess.

use std::fmt;

use coxswain_core::Event;
use serde::Serialize;
use serde_json::Value;

/// An event the host appends to the log itself (model output, tool calls and results…), written
/// as `{ type, data }` like the machine's. Its `type` is anything but one of the machine's own
/// ([`Event::TYPES`]): the log's turn structure and its splice projection belong to the machine.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostEvent {
    #[serde(rename = "type")]
    kind: String,
    data: Value,
}

/// A host event was given a type of the machine's own vocabulary.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("event type `{0}` is reserved for the machine's own events")]
pub struct ReservedType(pub String);

impl HostEvent {
    /// A host event of type `kind`. Rejected if `kind` is one of [`Event::TYPES`].
    pub fn new(kind: impl Into<String>, data: Value) -> Result<Self, ReservedType> {
        let kind = kind.into();
        if Event::TYPES.contains(&kind.as_str()) {
            return Err(ReservedType(kind));
        }
        Ok(HostEvent { kind, data })
    }

    /// The event's `type`.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The event's `data`.
    pub fn data(&self) -> &Value {
        &self.data
    }
}

/// One record to append: the machine's event or the host's.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Entry {
    /// A durable event the machine emitted.
    Machine(Event),
    /// An event the host wrote inside a step.
    Host(HostEvent),
}

impl Entry {
    /// The record's `type`.
    pub fn kind(&self) -> &str {
        match self {
            Entry::Machine(event) => event.kind(),
            Entry::Host(event) => event.kind(),
        }
    }
}

impl From<Event> for Entry {
    fn from(event: Event) -> Self {
        Entry::Machine(event)
    }
}

impl From<HostEvent> for Entry {
    fn from(event: HostEvent) -> Self {
        Entry::Host(event)
    }
}

#[derive(Serialize)]
struct Line<'a> {
    seq: u64,
    #[serde(flatten)]
    entry: &'a Entry,
}

/// Appends the line of record `seq` (its JSON and the final `\n`) to `out`. On error `out` is
/// left as it was.
pub fn encode(seq: u64, entry: &Entry, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    let start = out.len();
    match serde_json::to_writer(&mut *out, &Line { seq, entry }) {
        Ok(()) => {
            out.push(b'\n');
            Ok(())
        }
        Err(error) => {
            out.truncate(start);
            Err(error)
        }
    }
}

/// One complete record read back from a log.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// 1-based line number in the log.
    pub line: usize,
    /// The record's `seq`, if it has one.
    pub seq: Option<u64>,
    /// The whole record: `{ seq?, type, data }` (readers ignore `seq`, S46).
    pub event: Value,
}

/// A final record cut short (no `\n`): left out of the log (S50).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// Its 1-based line number.
    pub line: usize,
    /// Its length in bytes.
    pub bytes: usize,
}

impl fmt::Display for TornTail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {} is torn ({} bytes)", self.line, self.bytes)
    }
}

/// A log read back: its complete records, and the torn tail left out, if any.
#[derive(Clone, Debug, PartialEq)]
pub struct Parsed {
    /// Every complete record, in order.
    pub records: Vec<Record>,
    /// The length in bytes of the complete records (where the log must be cut to drop the tail).
    pub complete_len: usize,
    /// The final record cut short, if any.
    pub torn: Option<TornTail>,
    /// The `seq` the next appended record gets: one past the last record's (counting on from the
    /// last `seq` seen over lines without one; the line number + 1 in a log without `seq`).
    pub next_seq: u64,
}

/// A complete line that is not a valid record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct CorruptLine {
    /// Its 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub problem: Problem,
}

/// What is wrong with a corrupt line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    /// Not JSON (or not UTF-8).
    #[error("not JSON: {0}")]
    NotJson(String),
    /// JSON, but not an object.
    #[error("not a JSON object")]
    NotAnObject,
    /// `seq` is not a non-negative integer.
    #[error("`seq` is not a non-negative integer")]
    BadSeq,
    /// `seq` does not follow the previous line's.
    #[error("`seq` {found} does not follow {previous}")]
    SeqGap {
        /// The previous line's `seq`.
        previous: u64,
        /// This line's.
        found: u64,
    },
}

/// Reads a JSON-lines log: every complete record, in order, and a torn final record left out.
/// A complete line that is not a JSON object, or whose `seq` breaks the sequence, is corruption.
pub fn parse(bytes: &[u8]) -> Result<Parsed, CorruptLine> {
    let mut parsed = Parsed {
        records: Vec::new(),
        complete_len: 0,
        torn: None,
        next_seq: 1,
    };
    let mut previous_seq: Option<u64> = None;
    let mut offset = 0;
    let mut line = 0;
    while offset < bytes.len() {
        line += 1;
        let rest = &bytes[offset..];
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            parsed.torn = Some(TornTail {
                line,
                bytes: rest.len(),
            });
            break;
        };
        let corrupt = |problem| CorruptLine { line, problem };
        let event: Value = serde_json::from_slice(&rest[..end])
            .map_err(|error| corrupt(Problem::NotJson(error.to_string())))?;
        if !event.is_object() {
            return Err(corrupt(Problem::NotAnObject));
        }
        let seq = match event.get("seq") {
            None => None,
            Some(seq) => Some(seq.as_u64().ok_or_else(|| corrupt(Problem::BadSeq))?),
        };
        if let (Some(previous), Some(found)) = (previous_seq, seq) {
            if previous.checked_add(1) != Some(found) {
                return Err(corrupt(Problem::SeqGap { previous, found }));
            }
        }
        previous_seq = seq.or(previous_seq.and_then(|p| p.checked_add(1)));
        parsed.records.push(Record { line, seq, event });
        offset += end + 1;
        parsed.complete_len = offset;
        parsed.next_seq = match previous_seq {
            Some(seq) => seq.saturating_add(1),
            None => line as u64 + 1,
        };
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::{Message, Splice, Target, TurnEndReason};
    use serde_json::json;
    use std::sync::Arc;

    fn lines(entries: &[Entry]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            encode(i as u64 + 1, entry, &mut out).unwrap();
        }
        out
    }

    fn sample() -> Vec<Entry> {
        let message = Arc::new(Message::user("a", "hi"));
        vec![
            Entry::Machine(Event::Spliced(Splice {
                target: Target::NextTurn,
                start: 0,
                removed_count: 0,
                inserted: [message].into_iter().collect(),
                outcome: None,
                wakeup: true,
            })),
            Entry::Machine(Event::TurnStart { turn: 1 }),
            Entry::Host(HostEvent::new("model/output", json!({"text": "x"})).unwrap()),
            Entry::Machine(Event::TurnEnd {
                turn: 1,
                reason: TurnEndReason::Interrupted,
            }),
        ]
    }

    #[test]
    fn records_are_one_object_per_line_with_seq_first() {
        let bytes = lines(&sample());
        let text = String::from_utf8(bytes).unwrap();
        let mut it = text.lines();
        assert_eq!(
            it.next(),
            Some(
                r#"{"seq":1,"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"inserted":[{"id":"a","content":"hi","source":{"kind":"user"}}],"wakeup":true}}"#
            )
        );
        assert_eq!(
            it.next(),
            Some(r#"{"seq":2,"type":"turn/start","data":{"turn":1}}"#)
        );
        assert_eq!(
            it.next(),
            Some(r#"{"seq":3,"type":"model/output","data":{"text":"x"}}"#)
        );
        assert_eq!(
            it.next(),
            Some(
                r#"{"seq":4,"type":"turn/end","data":{"turn":1,"reason":{"kind":"interrupted"}}}"#
            )
        );
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn parse_reads_back_what_encode_wrote() {
        let bytes = lines(&sample());
        let parsed = parse(&bytes).unwrap();
        assert_eq!(parsed.records.len(), 4);
        assert_eq!(parsed.complete_len, bytes.len());
        assert_eq!(parsed.torn, None);
        assert_eq!(parsed.next_seq, 5);
        assert_eq!(parsed.records[1].line, 2);
        assert_eq!(parsed.records[1].seq, Some(2));
        assert_eq!(
            parsed.records[1].event,
            json!({"seq": 2, "type": "turn/start", "data": {"turn": 1}})
        );
    }

    #[test]
    fn s50_a_final_line_without_newline_is_torn() {
        let bytes = lines(&sample());
        let cut = bytes.len() - 5;
        let parsed = parse(&bytes[..cut]).unwrap();
        assert_eq!(parsed.records.len(), 3);
        let third_end = bytes
            .iter()
            .enumerate()
            .filter(|(_, &b)| b == b'\n')
            .nth(2)
            .unwrap()
            .0
            + 1;
        assert_eq!(parsed.complete_len, third_end);
        assert_eq!(
            parsed.torn,
            Some(TornTail {
                line: 4,
                bytes: cut - third_end
            })
        );
        // Even a complete JSON object without its newline is torn: the newline is written last.
        let whole_but_newline = &bytes[..bytes.len() - 1];
        assert_eq!(parse(whole_but_newline).unwrap().torn.unwrap().line, 4);
    }

    #[test]
    fn corruption_before_the_end_names_its_line() {
        let mut bytes = lines(&sample()[..2]);
        bytes.extend_from_slice(b"{\"seq\":3,\"type\":\"x\"\n");
        bytes.extend_from_slice(&lines(&sample()[..1]));
        let error = parse(&bytes).unwrap_err();
        assert_eq!(error.line, 3);
        assert!(matches!(error.problem, Problem::NotJson(_)), "{error}");

        let error = parse(b"{\"type\":\"a\"}\n[1]\n").unwrap_err();
        assert_eq!(
            error,
            CorruptLine {
                line: 2,
                problem: Problem::NotAnObject
            }
        );
        let error = parse(b"\n").unwrap_err();
        assert_eq!(error.line, 1);
    }

    #[test]
    fn seq_must_be_contiguous_when_present() {
        let error = parse(b"{\"seq\":1,\"type\":\"a\"}\n{\"seq\":3,\"type\":\"a\"}\n").unwrap_err();
        assert_eq!(
            error,
            CorruptLine {
                line: 2,
                problem: Problem::SeqGap {
                    previous: 1,
                    found: 3
                }
            }
        );
        let error = parse(b"{\"seq\":\"1\",\"type\":\"a\"}\n").unwrap_err();
        assert_eq!(error.problem, Problem::BadSeq);
        // A foreign log without seq (or starting elsewhere) reads fine.
        let parsed = parse(b"{\"type\":\"a\"}\n{\"type\":\"b\"}\n").unwrap();
        assert_eq!(parsed.next_seq, 3);
        let parsed = parse(b"{\"seq\":0,\"type\":\"a\"}\n{\"seq\":1,\"type\":\"b\"}\n").unwrap();
        assert_eq!(parsed.next_seq, 2);
    }

    #[test]
    fn host_events_may_not_take_machine_types() {
        for kind in Event::TYPES {
            assert_eq!(
                HostEvent::new(kind, Value::Null),
                Err(ReservedType(kind.to_owned()))
            );
        }
        let event = HostEvent::new("tool/call", json!([1])).unwrap();
        assert_eq!(Entry::from(event).kind(), "tool/call");
        assert_eq!(
            Entry::from(Event::TurnStart { turn: 1 }).kind(),
            "turn/start"
        );
    }
}
