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
//! guess. [`Reader`] is the same reader fed one line at a time, for a log too large to hold in
//! memory.
//!
//! **Depth.** A record line nests at most [`MAX_DEPTH`] arrays and objects, its own object
//! included: the writer ([`encode`]) refuses a deeper record before anything is written
//! ([`EncodeError::TooDeep`]), and the reader rejects one ([`Problem::TooDeep`]), so whatever was
//! written reads back. A message sits 3 levels down in a splice record, so a message may nest
//! [`MAX_MESSAGE_DEPTH`] levels (its own object included, [`check_message`]); a host event's
//! `data` sits 1 level down, so it may nest [`MAX_DATA_DEPTH`] ([`check_data`]).
//!
//! **`seq`.** No record takes `seq` `u64::MAX`: nothing could follow it. The reader rejects such a
//! record ([`Problem::SeqExhausted`]) and a writer must refuse to assign it.

use std::fmt;

use std::io;
use std::ops::ControlFlow;

use coxswain_core::{Event, Message};

use crate::lines::{LineBuffer, LineTooLong, MAX_LINE_BYTES};
use serde::Serialize;
use serde_json::Value;

/// The most arrays and objects a record line may nest, its own object included: the limit of
/// the reader (serde_json's default recursion limit lets exactly this many through).
pub const MAX_DEPTH: usize = 127;

/// The most levels a message may nest, its own object included: a splice record holds it 3
/// levels down (`{data: {inserted: [message]}}`), the deepest place a message is written.
pub const MAX_MESSAGE_DEPTH: usize = MAX_DEPTH - 3;

/// The most levels a host event's `data` may nest: a record holds it 1 level down.
pub const MAX_DATA_DEPTH: usize = MAX_DEPTH - 1;

/// A value nests deeper than a log record can hold ([`MAX_DEPTH`]): the one error, and the one
/// text, of every layer that refuses too-deep data (the writer's [`EncodeError::TooDeep`], the
/// reader's [`Problem::TooDeep`], the session's admission).
///
/// ```
/// use coxswain_log::TooDeep;
///
/// assert_eq!(
///     TooDeep { depth: 128, max: 124 }.to_string(),
///     "the value nests 128 levels deep; at most 124 fit in a log record"
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the value nests {depth} levels deep; at most {max} fit in a log record")]
pub struct TooDeep {
    /// How deep the value nests (arrays and objects, its own included).
    pub depth: usize,
    /// The most it may nest where it is written.
    pub max: usize,
}

/// How many arrays and objects `value` nests, its own included, as serialized to JSON.
pub fn depth_of<T: Serialize + ?Sized>(value: &T) -> usize {
    let mut counter = DepthCounter::default();
    // The counter never fails; a value that cannot be serialized is not written either.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.max
}

/// The size and nesting of a value's JSON encoding, measured in one pass without keeping it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Measure {
    /// Bytes of its JSON encoding.
    pub bytes: usize,
    /// How many arrays and objects it nests, its own included ([`depth_of`]).
    pub depth: usize,
}

/// [`Measure`]s `value` as serialized to JSON. A message is measured without serialising it by
/// [`measure_message`](crate::measure_message) (what admission calls).
pub fn measure<T: Serialize + ?Sized>(value: &T) -> Measure {
    let mut counter = DepthCounter::default();
    // The counter never fails; a value that cannot be serialized is not written either.
    let _ = serde_json::to_writer(&mut counter, value);
    Measure {
        bytes: counter.bytes,
        depth: counter.max,
    }
}

/// Checks that `message` fits in every record it can be written to ([`MAX_MESSAGE_DEPTH`]).
pub fn check_message(message: &Message) -> Result<(), TooDeep> {
    // Its own object, then its fields' values: what `depth_of` measures of its JSON, walked
    // without writing it (this runs for every delivered message).
    let fields = message
        .fields()
        .values()
        .map(value_depth)
        .max()
        .unwrap_or(0);
    check(1 + fields, MAX_MESSAGE_DEPTH)
}

/// How many arrays and objects `value` nests, its own included: [`depth_of`] of its JSON.
fn value_depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(value_depth).max().unwrap_or(0),
        Value::Object(fields) => 1 + fields.values().map(value_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Checks that a host event's `data` fits in its record ([`MAX_DATA_DEPTH`]).
pub fn check_data(data: &Value) -> Result<(), TooDeep> {
    check(value_depth(data), MAX_DATA_DEPTH)
}

fn check(depth: usize, max: usize) -> Result<(), TooDeep> {
    if depth > max {
        Err(TooDeep { depth, max })
    } else {
        Ok(())
    }
}

/// The nesting depth of one JSON text (arrays and objects; brackets inside strings do not
/// count). Linear, no recursion: the writer and the reader measure a line the same way.
pub(crate) fn json_depth(bytes: &[u8]) -> usize {
    let mut counter = DepthCounter::default();
    counter.scan(bytes);
    counter.max
}

#[derive(Default)]
struct DepthCounter {
    depth: usize,
    max: usize,
    in_string: bool,
    escaped: bool,
    /// Every byte seen.
    bytes: usize,
}

impl DepthCounter {
    fn scan(&mut self, bytes: &[u8]) {
        self.bytes += bytes.len();
        for &byte in bytes {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if byte == b'\\' {
                    self.escaped = true;
                } else if byte == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match byte {
                b'"' => self.in_string = true,
                b'[' | b'{' => {
                    self.depth += 1;
                    self.max = self.max.max(self.depth);
                }
                b']' | b'}' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
        }
    }
}

impl io::Write for DepthCounter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.scan(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

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
    /// Whether a batch of records ends a turn (holds a `turn/end`): the batch a log that syncs
    /// per turn syncs on. The one owner of that test, for every log and binding.
    ///
    /// ```
    /// use coxswain_core::{Event, TurnEndReason};
    /// use coxswain_log::Entry;
    ///
    /// let start = Entry::Machine(Event::TurnStart { turn: 1 });
    /// let end = Entry::Machine(Event::TurnEnd { turn: 1, reason: TurnEndReason::Completed });
    /// assert!(!Entry::ends_turn(&[start.clone()]));
    /// assert!(Entry::ends_turn(&[start, end]));
    /// ```
    pub fn ends_turn(batch: &[Entry]) -> bool {
        batch
            .iter()
            .any(|entry| matches!(entry, Entry::Machine(Event::TurnEnd { .. })))
    }

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

/// A record that cannot be written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// It does not serialize to JSON.
    #[error("cannot encode a record: {0}")]
    Json(String),
    /// It nests deeper than [`MAX_DEPTH`]: the reader would reject it.
    #[error("cannot encode a record: {0}")]
    TooDeep(TooDeep),
    /// `seq` `u64::MAX` leaves no `seq` for a next record.
    #[error("cannot encode a record: `seq` {0} leaves no room for a next record")]
    SeqExhausted(u64),
    /// Its line is longer than [`MAX_LINE_BYTES`]: the reader would refuse it.
    #[error("cannot encode a record: its line is {bytes} bytes; at most {max} are read back")]
    TooLong {
        /// The line's length, without its `\n`.
        bytes: usize,
        /// The limit ([`MAX_LINE_BYTES`]).
        max: usize,
    },
}

/// Appends the line of record `seq` (its JSON and the final `\n`) to `out`. A record deeper than
/// [`MAX_DEPTH`], longer than [`MAX_LINE_BYTES`] or numbered `u64::MAX` is refused. On error `out` is left as it was.
pub fn encode(seq: u64, entry: &Entry, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    encode_line(seq, None, entry, out)
}

/// Appends the line of record `seq` of `session` in a shared segment log:
/// `{"seq":…,"session":"…","type":…,"data":…}` and the final `\n` (see [`SegmentReader`](crate::SegmentReader)).
/// Refused as [`encode`] refuses. On error `out` is left as it was.
pub fn encode_in_session(
    session: &str,
    seq: u64,
    entry: &Entry,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    encode_line(seq, Some(session), entry, out)
}

fn encode_line(
    seq: u64,
    session: Option<&str>,
    entry: &Entry,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    if seq == u64::MAX {
        return Err(EncodeError::SeqExhausted(seq));
    }
    let start = out.len();
    // The one encoder (crate::encode): serde_json's bytes, and the nesting counted as it writes.
    let depth = crate::encode::record(seq, session, entry, out);
    check_line(out, start, depth)
}

/// The checks every written line passes (its `\n` not yet added): no longer than
/// [`MAX_LINE_BYTES`], no deeper than [`MAX_DEPTH`]. A refused line is cut off `out`.
fn check_line(out: &mut Vec<u8>, start: usize, depth: usize) -> Result<(), EncodeError> {
    let line = &out[start..];
    if line.len() > MAX_LINE_BYTES {
        let bytes = line.len();
        out.truncate(start);
        return Err(EncodeError::TooLong {
            bytes,
            max: MAX_LINE_BYTES,
        });
    }
    if depth > MAX_DEPTH {
        out.truncate(start);
        return Err(EncodeError::TooDeep(TooDeep {
            depth,
            max: MAX_DEPTH,
        }));
    }
    out.push(b'\n');
    Ok(())
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
    /// The final record is whole but lacks its `\n` (kept; a writer adds the `\n` first).
    pub unterminated: bool,
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

impl From<LineTooLong> for CorruptLine {
    fn from(long: LineTooLong) -> Self {
        CorruptLine {
            line: long.line,
            problem: Problem::TooLong(long.max),
        }
    }
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
    /// `seq` is `u64::MAX` (or follows a line at `u64::MAX`): no record could follow it.
    #[error("`seq` reaches u64::MAX: no record could follow it")]
    SeqExhausted,
    /// The line nests deeper than [`MAX_DEPTH`].
    #[error(transparent)]
    TooDeep(TooDeep),
    /// The line is longer than [`MAX_LINE_BYTES`] (the limit is in the variant).
    #[error("the line is longer than {0} bytes (the longest record a session writes)")]
    TooLong(usize),
    /// A line of a shared segment log lacks the `session` string naming its session.
    #[error("no `session` string naming the record's session")]
    NoSession,
}

/// Reads a log one line at a time: the streaming form of [`parse`], for a log too large to hold
/// in memory. Feed it every complete line (without its `\n`) in order, then the final segment
/// without a `\n`, if any, to [`Reader::last`].
#[derive(Clone, Debug)]
pub struct Reader {
    line: usize,
    previous_seq: Option<u64>,
    complete_len: u64,
    next_seq: u64,
}

impl Default for Reader {
    fn default() -> Self {
        Reader::new()
    }
}

/// What the final segment of a log (the bytes after its last `\n`) holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Tail {
    /// A record cut short: left out (S50).
    Torn(TornTail),
    /// A whole record that follows the sequence but lacks its `\n` (a log written by another
    /// implementation may end so): kept; the writer must add the `\n` before appending.
    Unterminated(Record),
}

impl Reader {
    /// A reader at the start of a log.
    pub fn new() -> Self {
        Reader {
            line: 0,
            previous_seq: None,
            complete_len: 0,
            next_seq: 1,
        }
    }

    /// The next complete line, without its `\n`: its record, or the corruption that ends the
    /// read (the caller must not guess past it).
    pub fn line(&mut self, bytes: &[u8]) -> Result<Record, CorruptLine> {
        let record = self.record(bytes)?;
        self.commit(&record, bytes.len() as u64 + 1);
        Ok(record)
    }

    /// The final segment (non-empty, without `\n`): a whole record that follows the sequence is
    /// [`Tail::Unterminated`]; anything else is [`Tail::Torn`].
    pub fn last(&mut self, bytes: &[u8]) -> Tail {
        let torn = TornTail {
            line: self.line + 1,
            bytes: bytes.len(),
        };
        match self.record(bytes) {
            Ok(record) => {
                self.commit(&record, bytes.len() as u64);
                Tail::Unterminated(record)
            }
            Err(_) => Tail::Torn(torn),
        }
    }

    /// The length in bytes of what was read as records.
    pub fn complete_len(&self) -> u64 {
        self.complete_len
    }

    /// The `seq` the next appended record gets: one past the last record's (counting on from
    /// the last `seq` seen over lines without one; the line number + 1 in a log without `seq`).
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The records read so far.
    pub fn records(&self) -> usize {
        self.line
    }

    fn record(&self, bytes: &[u8]) -> Result<Record, CorruptLine> {
        let line = self.line + 1;
        let corrupt = |problem| CorruptLine { line, problem };
        if bytes.len() > MAX_LINE_BYTES {
            return Err(corrupt(Problem::TooLong(MAX_LINE_BYTES)));
        }
        let depth = json_depth(bytes);
        if depth > MAX_DEPTH {
            return Err(corrupt(Problem::TooDeep(TooDeep {
                depth,
                max: MAX_DEPTH,
            })));
        }
        let event: Value = serde_json::from_slice(bytes)
            .map_err(|error| corrupt(Problem::NotJson(error.to_string())))?;
        self.checked(event)
    }

    /// The next complete line, already parsed (its depth checked): its record with this
    /// reader's line number, or the corruption; `len` counts the line's bytes and its `\n`.
    pub(crate) fn value(&mut self, event: Value, len: u64) -> Result<Record, CorruptLine> {
        let record = self.checked(event)?;
        self.commit(&record, len);
        Ok(record)
    }

    /// Like [`Reader::value`] for a final segment without `\n`: not committed on error.
    pub(crate) fn last_value(&mut self, event: Value, len: u64) -> Option<Record> {
        let record = self.checked(event).ok()?;
        self.commit(&record, len);
        Some(record)
    }

    fn checked(&self, event: Value) -> Result<Record, CorruptLine> {
        let line = self.line + 1;
        let corrupt = |problem| CorruptLine { line, problem };
        if !event.is_object() {
            return Err(corrupt(Problem::NotAnObject));
        }
        let seq = match event.get("seq") {
            None => None,
            Some(seq) => Some(seq.as_u64().ok_or_else(|| corrupt(Problem::BadSeq))?),
        };
        if let (Some(previous), Some(found)) = (self.previous_seq, seq) {
            if previous.checked_add(1) != Some(found) {
                return Err(corrupt(Problem::SeqGap { previous, found }));
            }
        }
        let this_seq = match (seq, self.previous_seq) {
            (Some(seq), _) => Some(seq),
            (None, Some(previous)) => Some(
                previous
                    .checked_add(1)
                    .ok_or_else(|| corrupt(Problem::SeqExhausted))?,
            ),
            (None, None) => None,
        };
        if this_seq == Some(u64::MAX) {
            return Err(corrupt(Problem::SeqExhausted));
        }
        Ok(Record { line, seq, event })
    }

    fn commit(&mut self, record: &Record, len: u64) {
        self.line = record.line;
        self.previous_seq = record
            .seq
            .or(self.previous_seq.and_then(|p| p.checked_add(1)));
        self.complete_len += len;
        // `record` refused u64::MAX, so the next seq exists.
        self.next_seq = match self.previous_seq {
            Some(seq) => seq.saturating_add(1),
            None => self.line as u64 + 1,
        };
    }
}

/// Reads a JSON-lines log with the same rules as [`Reader`] (one owner of the format): every
/// complete record, in order; a final segment without `\n` kept when it is a whole record that
/// follows the sequence ([`Parsed::unterminated`]), else left out as a torn tail. A complete line
/// that is not a JSON object, or whose `seq` breaks the sequence, is corruption.
pub fn parse(bytes: &[u8]) -> Result<Parsed, CorruptLine> {
    let mut reader = Reader::new();
    let mut records = Vec::new();
    let mut torn = None;
    let mut unterminated = false;
    let mut lines = LineBuffer::new();
    let _: ControlFlow<()> = lines.feed(bytes, |line| {
        records.push(reader.line(line)?);
        Ok::<_, CorruptLine>(ControlFlow::Continue(()))
    })?;
    if !lines.rest().is_empty() {
        match reader.last(lines.rest()) {
            Tail::Torn(tail) => torn = Some(tail),
            Tail::Unterminated(record) => {
                records.push(record);
                unterminated = true;
            }
        }
    }
    Ok(Parsed {
        records,
        complete_len: reader.complete_len() as usize,
        torn,
        unterminated,
        next_seq: reader.next_seq(),
    })
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
                redelivery: None,
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
    fn s50_a_cut_final_line_is_torn_and_a_whole_one_is_kept() {
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
        // A whole record without its newline (a foreign writer's last line) is kept, as the
        // streaming reader keeps it: one rule for the format.
        let whole_but_newline = &bytes[..bytes.len() - 1];
        let parsed = parse(whole_but_newline).unwrap();
        assert_eq!(
            (parsed.records.len(), parsed.torn, parsed.unterminated),
            (4, None, true)
        );
        assert_eq!(parsed.complete_len, whole_but_newline.len());
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

    fn nested(levels: usize) -> Value {
        let mut value = json!(1);
        for _ in 0..levels {
            value = Value::Array(vec![value]);
        }
        value
    }

    fn splice_of(message: Message) -> Entry {
        Entry::Machine(Event::Spliced(Splice {
            target: Target::NextStep,
            start: 0,
            removed_count: 0,
            inserted: [Arc::new(message)].into_iter().collect(),
            outcome: None,
            wakeup: false,
            redelivery: None,
        }))
    }

    /// The checks walk values; they measure what `depth_of` measures of the JSON text.
    #[test]
    fn the_checks_measure_what_the_text_nests() {
        let values = [
            json!(null),
            json!("[[{{"),
            json!([]),
            json!({}),
            json!([[], [[{"a": [1, {"b": []}]}]], 3]),
            json!({"x": {"y": ["[", {"z": {}}]}, "w": [[[[]]]]}),
            nested(40),
        ];
        for value in values {
            assert_eq!(value_depth(&value), depth_of(&value), "{value}");
            let message = Message::new("m", json!({"kind": "user"}), value.clone());
            let walked = 1 + message
                .fields()
                .values()
                .map(value_depth)
                .max()
                .unwrap_or(0);
            assert_eq!(walked, depth_of(&message), "{value}");
        }
    }

    /// Item 1: the depth rule. What `check_message`/`check_data` accept encodes and reads back in
    /// every record it goes into; one level more is refused by the checks, by `encode` (before
    /// anything is written) and by the reader, with typed errors.
    #[test]
    fn the_depth_rule_is_the_same_for_writer_and_reader() {
        // A message's own object, `content`'s object, then arrays: MAX_MESSAGE_DEPTH in all.
        let deepest = Message::new("d", json!({"kind": "user"}), nested(MAX_MESSAGE_DEPTH - 1));
        assert_eq!(depth_of(&deepest), MAX_MESSAGE_DEPTH);
        assert_eq!(check_message(&deepest), Ok(()));
        let mut out = Vec::new();
        encode(1, &splice_of(deepest.clone()), &mut out).unwrap();
        encode(
            2,
            &Entry::Machine(Event::UserMessage(Arc::new(deepest))),
            &mut out,
        )
        .unwrap();
        let data = nested(MAX_DATA_DEPTH);
        assert_eq!(check_data(&data), Ok(()));
        encode(
            3,
            &Entry::Host(HostEvent::new("x", data).unwrap()),
            &mut out,
        )
        .unwrap();
        let parsed = parse(&out).unwrap();
        assert_eq!(parsed.records.len(), 3);
        assert_eq!(
            json_depth(&out[..out.iter().position(|&b| b == b'\n').unwrap()]),
            MAX_DEPTH
        );

        let too_deep = Message::new("d", json!({"kind": "user"}), nested(MAX_MESSAGE_DEPTH));
        assert_eq!(
            check_message(&too_deep),
            Err(TooDeep {
                depth: MAX_MESSAGE_DEPTH + 1,
                max: MAX_MESSAGE_DEPTH
            })
        );
        let before = out.clone();
        assert_eq!(
            encode(4, &splice_of(too_deep), &mut out),
            Err(EncodeError::TooDeep(TooDeep {
                depth: MAX_DEPTH + 1,
                max: MAX_DEPTH
            }))
        );
        assert_eq!(out, before, "nothing was written");
        let data = nested(MAX_DATA_DEPTH + 1);
        assert_eq!(
            check_data(&data),
            Err(TooDeep {
                depth: MAX_DATA_DEPTH + 1,
                max: MAX_DATA_DEPTH
            })
        );
        // Strings do not count, escaped quotes included.
        assert_eq!(depth_of(&json!(["[[[\\\"[[", {"a": "{{"}])), 2);
        // The reader names a line deeper than MAX_DEPTH with a typed problem.
        let line = format!("{{\"type\":\"x\",\"data\":{}}}\n", nested(MAX_DEPTH));
        assert_eq!(
            parse(line.as_bytes()).unwrap_err(),
            CorruptLine {
                line: 1,
                problem: Problem::TooDeep(TooDeep {
                    depth: MAX_DEPTH + 1,
                    max: MAX_DEPTH
                })
            }
        );
    }

    /// Item 10: `seq` u64::MAX cannot be followed: the reader rejects it, the writer refuses it.
    #[test]
    fn the_line_limit_is_the_same_for_writer_and_reader() {
        // The longest line the writer takes reads back; one byte more is refused by both.
        let envelope = r#"{"seq":1,"type":"model/output","data":""}"#.len();
        let fits = HostEvent::new("model/output", json!("a".repeat(MAX_LINE_BYTES - envelope)));
        let mut out = Vec::new();
        assert_eq!(encode(1, &Entry::Host(fits.unwrap()), &mut out), Ok(()));
        assert_eq!(out.len(), MAX_LINE_BYTES + 1);
        assert_eq!(parse(&out).map(|parsed| parsed.records.len()), Ok(1));
        let long = HostEvent::new(
            "model/output",
            json!("a".repeat(MAX_LINE_BYTES + 1 - envelope)),
        );
        let mut out = b"kept".to_vec();
        let error = encode(1, &Entry::Host(long.unwrap()), &mut out);
        assert_eq!(
            error,
            Err(EncodeError::TooLong {
                bytes: MAX_LINE_BYTES + 1,
                max: MAX_LINE_BYTES
            })
        );
        assert_eq!(out, b"kept");
        assert_eq!(
            error.err().map(|e| e.to_string()),
            Some(
                "cannot encode a record: its line is 2097153 bytes; at most 2097152 are read back"
                    .into()
            )
        );
        let mut line = br#"{"seq":1,"type":"model/output","data":""#.to_vec();
        line.resize(MAX_LINE_BYTES - 2, b'a');
        line.extend_from_slice(b"\"}");
        assert_eq!(line.len(), MAX_LINE_BYTES);
        assert!(Reader::new().line(&line).is_ok());
        line.insert(line.len() - 2, b'a');
        let corrupt = CorruptLine {
            line: 1,
            problem: Problem::TooLong(MAX_LINE_BYTES),
        };
        assert_eq!(Reader::new().line(&line), Err(corrupt.clone()));
        line.push(b'\n');
        assert_eq!(parse(&line), Err(corrupt.clone()));
        assert_eq!(
            corrupt.to_string(),
            "line 1: the line is longer than 2097152 bytes (the longest record a session writes)"
        );
    }

    #[test]
    fn seq_u64_max_is_rejected_by_reader_and_writer() {
        let line = format!("{{\"seq\":{},\"type\":\"x\"}}\n", u64::MAX);
        assert_eq!(
            parse(line.as_bytes()).unwrap_err(),
            CorruptLine {
                line: 1,
                problem: Problem::SeqExhausted
            }
        );
        let line = format!(
            "{{\"seq\":{},\"type\":\"x\"}}\n{{\"type\":\"y\"}}\n",
            u64::MAX - 1
        );
        assert_eq!(
            parse(line.as_bytes()).unwrap_err(),
            CorruptLine {
                line: 2,
                problem: Problem::SeqExhausted
            }
        );
        let line = format!("{{\"seq\":{},\"type\":\"x\"}}\n", u64::MAX - 1);
        assert_eq!(parse(line.as_bytes()).unwrap().next_seq, u64::MAX);
        let entry = Entry::Machine(Event::TurnStart { turn: 1 });
        let mut out = Vec::new();
        assert_eq!(
            encode(u64::MAX, &entry, &mut out),
            Err(EncodeError::SeqExhausted(u64::MAX))
        );
        assert!(out.is_empty());
    }

    /// Item 9: the streaming reader keeps a whole final record that lacks its newline (a foreign
    /// log), and reports anything else after the last newline as torn.
    #[test]
    fn the_reader_keeps_an_unterminated_whole_record_and_drops_a_torn_one() {
        let bytes = lines(&sample());
        let mut reader = Reader::new();
        let mut rest = &bytes[..bytes.len() - 1];
        let mut records = Vec::new();
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            records.push(reader.line(&rest[..end]).unwrap());
            rest = &rest[end + 1..];
        }
        assert_eq!(records.len(), 3);
        match reader.last(rest) {
            Tail::Unterminated(record) => {
                assert_eq!(record.line, 4);
                assert_eq!(record.seq, Some(4));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(reader.complete_len(), bytes.len() as u64 - 1);
        assert_eq!(reader.next_seq(), 5);
        let mut reader = Reader::new();
        assert_eq!(
            reader.last(b"{\"seq\":1,\"ty"),
            Tail::Torn(TornTail { line: 1, bytes: 12 })
        );
        assert_eq!(reader.complete_len(), 0);
        // A whole object that breaks the sequence is not kept either.
        let mut reader = Reader::new();
        reader.line(b"{\"seq\":1,\"type\":\"a\"}").unwrap();
        assert!(matches!(
            reader.last(b"{\"seq\":3,\"type\":\"a\"}"),
            Tail::Torn(_)
        ));
    }
}
