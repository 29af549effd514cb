//! The one record encoder: every log record's JSON, and a message's size, written by hand
//! straight into a `Vec<u8>` (or counted without writing), byte for byte what `serde_json`
//! writes for the same record.
//!
//! Every log (the file logs, the segment log, PostgreSQL) and both bindings write their lines
//! through [`encode`](crate::encode) / [`encode_in_session`](crate::encode_in_session), which
//! call [`record`] here; admission sizes a message with [`measure_message`], the same walk
//! counting instead of writing (no second serialisation, no allocation).
//!
//! What `serde_json` does, and so what this does (pinned by `tests/encode_pin.rs` on every
//! record type, the conformance corpus and generated messages):
//!
//! * strings: `"` and `\` escaped with a backslash; `\b \t \n \f \r` in their short forms; every
//!   other byte below 0x20 as `\u00xx` (lowercase hex); nothing else (not `/`, not 0x7f, not
//!   non-ASCII);
//! * integers in decimal; a [`Value`] number as `serde_json::Number`'s `Display` writes it (which
//!   is how `serde_json` serializes it);
//! * keys in the order of the `Serialize` impls: `seq`, `session`, `type`, `data`; a splice's
//!   `target, start, removedCount, inserted, outcome, wakeup, redelivery` (the optional ones
//!   omitted when absent); a message's `id`, then its fields in map order; an error's
//!   `message, code`, then its details.

use std::fmt;
use std::io::Write as _;

use coxswain_core::{CancelCause, ErrorInfo, Event, Message, Splice, SpliceOutcome, TurnEndReason};
use serde_json::{Number, Value};

use crate::jsonl::{Entry, Measure};

/// Where the encoder's bytes go: a buffer, or a count of them.
pub(crate) trait Sink {
    /// Bytes that need no escaping.
    fn raw(&mut self, bytes: &[u8]);
    /// A string, quoted and escaped.
    fn str(&mut self, text: &str);
    /// A JSON number.
    fn number(&mut self, number: &Number);
}

/// How `serde_json` escapes each byte of a string: 0 not at all, `u` as `\u00xx`, anything
/// else as a backslash and that byte.
const ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = b'u';
        byte += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `00` to `99`, two bytes each: integers are written two digits at a time.
const PAIRS: [u8; 200] = {
    let mut pairs = [0u8; 200];
    let mut n = 0;
    while n < 100 {
        pairs[2 * n] = b'0' + (n / 10) as u8;
        pairs[2 * n + 1] = b'0' + (n % 10) as u8;
        n += 1;
    }
    pairs
};

/// Writes into a buffer.
pub(crate) struct Out<'a>(pub(crate) &'a mut Vec<u8>);

impl Sink for Out<'_> {
    #[inline]
    fn raw(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    #[inline]
    fn str(&mut self, text: &str) {
        let out = &mut *self.0;
        let bytes = text.as_bytes();
        out.reserve(bytes.len() + 2);
        out.push(b'"');
        let mut run = 0;
        for (at, &byte) in bytes.iter().enumerate() {
            let escape = ESCAPE[byte as usize];
            if escape == 0 {
                continue;
            }
            out.extend_from_slice(&bytes[run..at]);
            run = at + 1;
            if escape == b'u' {
                out.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[(byte >> 4) as usize],
                    HEX[(byte & 0xf) as usize],
                ]);
            } else {
                out.extend_from_slice(&[b'\\', escape]);
            }
        }
        out.extend_from_slice(&bytes[run..]);
        out.push(b'"');
    }

    fn number(&mut self, number: &Number) {
        // `Number`'s `Display` is `serde_json`'s own serialization of it (integers, floats, and
        // the text itself under `arbitrary_precision`). Writing to a `Vec` cannot fail.
        let _ = write!(self.0, "{number}");
    }
}

/// Counts the bytes it would write.
#[derive(Default)]
pub(crate) struct Count(pub(crate) usize);

impl Sink for Count {
    #[inline]
    fn raw(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }

    #[inline]
    fn str(&mut self, text: &str) {
        let mut bytes = 2 + text.len();
        for &byte in text.as_bytes() {
            bytes += match ESCAPE[byte as usize] {
                0 => 0,
                b'u' => 5,
                _ => 1,
            };
        }
        self.0 += bytes;
    }

    fn number(&mut self, number: &Number) {
        struct Counter(usize);
        impl fmt::Write for Counter {
            fn write_str(&mut self, text: &str) -> fmt::Result {
                self.0 += text.len();
                Ok(())
            }
        }
        let mut counter = Counter(0);
        let _ = fmt::write(&mut counter, format_args!("{number}"));
        self.0 += counter.0;
    }
}

/// A sink and the nesting of what went into it (arrays and objects, as [`json_depth`] counts
/// them in the text).
///
/// [`json_depth`]: crate::jsonl::json_depth
pub(crate) struct Encoder<S> {
    pub(crate) sink: S,
    depth: usize,
    pub(crate) max_depth: usize,
}

impl<S: Sink> Encoder<S> {
    pub(crate) fn new(sink: S) -> Self {
        Encoder {
            sink,
            depth: 0,
            max_depth: 0,
        }
    }

    #[inline]
    fn open(&mut self, bracket: &[u8]) {
        self.depth += 1;
        self.max_depth = self.max_depth.max(self.depth);
        self.sink.raw(bracket);
    }

    #[inline]
    fn close(&mut self, bracket: &[u8]) {
        self.depth -= 1;
        self.sink.raw(bracket);
    }

    /// An unsigned integer in decimal.
    #[inline]
    fn uint(&mut self, value: u64) {
        // Most numbers in a record (a turn, a step, a start) are one digit.
        if value < 10 {
            self.sink.raw(&[b'0' + value as u8]);
            return;
        }
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut rest = value;
        while rest >= 100 {
            let pair = (rest % 100) as usize * 2;
            rest /= 100;
            at -= 2;
            digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
        }
        if rest >= 10 {
            let pair = rest as usize * 2;
            at -= 2;
            digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
        } else {
            at -= 1;
            digits[at] = b'0' + rest as u8;
        }
        self.sink.raw(&digits[at..]);
    }

    /// One record: `{"seq":…[,"session":…],"type":…,"data":…}` (no `\n`).
    pub(crate) fn record(&mut self, seq: u64, session: Option<&str>, entry: &Entry) {
        self.open(b"{\"seq\":");
        self.uint(seq);
        if let Some(session) = session {
            self.sink.raw(b",\"session\":");
            self.sink.str(session);
        }
        self.sink.raw(b",\"type\":");
        match entry {
            Entry::Machine(event) => {
                // The machine's types are plain ASCII without anything to escape.
                self.sink.raw(b"\"");
                self.sink.raw(event.kind().as_bytes());
                self.sink.raw(b"\",\"data\":");
                self.event_data(event);
            }
            Entry::Host(event) => {
                self.sink.str(event.kind());
                self.sink.raw(b",\"data\":");
                self.value(event.data());
            }
        }
        self.close(b"}");
    }

    fn event_data(&mut self, event: &Event) {
        match event {
            Event::Spliced(splice) => self.splice(splice),
            Event::TurnStart { turn } => {
                self.open(b"{\"turn\":");
                self.uint(*turn);
                self.close(b"}");
            }
            Event::StepStart { turn, step } | Event::StepEnd { turn, step } => {
                self.open(b"{\"turn\":");
                self.uint(*turn);
                self.sink.raw(b",\"step\":");
                self.uint(*step);
                self.close(b"}");
            }
            Event::UserMessage(message) => self.message(message),
            Event::TurnEnd { turn, reason } => {
                self.open(b"{\"turn\":");
                self.uint(*turn);
                self.sink.raw(b",\"reason\":");
                self.turn_end_reason(reason);
                self.close(b"}");
            }
        }
    }

    fn splice(&mut self, splice: &Splice) {
        self.open(b"{\"target\":\"");
        self.sink.raw(splice.target.as_str().as_bytes());
        self.sink.raw(b"\",\"start\":");
        self.uint(splice.start as u64);
        if splice.removed_count != 0 {
            self.sink.raw(b",\"removedCount\":");
            self.uint(splice.removed_count as u64);
        }
        self.sink.raw(b",\"inserted\":");
        self.open(b"[");
        for (index, message) in splice.inserted.iter().enumerate() {
            if index > 0 {
                self.sink.raw(b",");
            }
            self.message(message);
        }
        self.close(b"]");
        if let Some(outcome) = splice.outcome {
            self.sink.raw(match outcome {
                SpliceOutcome::Canceled => b",\"outcome\":\"canceled\"",
            });
        }
        if splice.wakeup {
            self.sink.raw(b",\"wakeup\":true");
        }
        if let Some(redelivery) = splice.redelivery {
            self.sink.raw(b",\"redelivery\":");
            self.uint(redelivery);
        }
        self.close(b"}");
    }

    /// A message: `{"id":…` then its fields in map order.
    pub(crate) fn message(&mut self, message: &Message) {
        self.open(b"{\"id\":");
        self.sink.str(message.id().as_str());
        for (key, value) in message.fields() {
            self.sink.raw(b",");
            self.sink.str(key);
            self.sink.raw(b":");
            self.value(value);
        }
        self.close(b"}");
    }

    fn turn_end_reason(&mut self, reason: &TurnEndReason) {
        match reason {
            TurnEndReason::Completed => self.tag_only(b"{\"kind\":\"completed\"}"),
            TurnEndReason::MaxTokens => self.tag_only(b"{\"kind\":\"max-tokens\"}"),
            TurnEndReason::Blocked => self.tag_only(b"{\"kind\":\"blocked\"}"),
            TurnEndReason::Interrupted => self.tag_only(b"{\"kind\":\"interrupted\"}"),
            TurnEndReason::Aborted { reason } => {
                self.open(b"{\"kind\":\"aborted\",\"reason\":");
                self.cancel_cause(reason);
                self.close(b"}");
            }
            TurnEndReason::Error { error } => {
                self.open(b"{\"kind\":\"error\",\"error\":");
                self.error(error);
                self.close(b"}");
            }
        }
    }

    fn cancel_cause(&mut self, cause: &CancelCause) {
        match cause {
            CancelCause::User => self.tag_only(b"{\"kind\":\"user\"}"),
            CancelCause::Parent => self.tag_only(b"{\"kind\":\"parent\"}"),
            CancelCause::Disposed => self.tag_only(b"{\"kind\":\"disposed\"}"),
            CancelCause::Hook { reason } => {
                self.open(b"{\"kind\":\"hook\",\"reason\":");
                self.sink.str(reason);
                self.close(b"}");
            }
        }
    }

    fn error(&mut self, error: &ErrorInfo) {
        self.open(b"{\"message\":");
        self.sink.str(&error.message);
        self.sink.raw(b",\"code\":");
        self.sink.str(&error.code);
        for (key, value) in error.details.iter() {
            self.sink.raw(b",");
            self.sink.str(key);
            self.sink.raw(b":");
            self.value(value);
        }
        self.close(b"}");
    }

    /// An object of one constant tag: one level of nesting.
    fn tag_only(&mut self, object: &[u8]) {
        self.open(object);
        self.depth -= 1;
    }

    /// Any JSON value, as `serde_json` writes a [`Value`].
    pub(crate) fn value(&mut self, value: &Value) {
        match value {
            Value::Null => self.sink.raw(b"null"),
            Value::Bool(true) => self.sink.raw(b"true"),
            Value::Bool(false) => self.sink.raw(b"false"),
            Value::Number(number) => self.sink.number(number),
            Value::String(text) => self.sink.str(text),
            Value::Array(items) => {
                self.open(b"[");
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        self.sink.raw(b",");
                    }
                    self.value(item);
                }
                self.close(b"]");
            }
            Value::Object(fields) => {
                self.open(b"{");
                for (index, (key, value)) in fields.iter().enumerate() {
                    if index > 0 {
                        self.sink.raw(b",");
                    }
                    self.sink.str(key);
                    self.sink.raw(b":");
                    self.value(value);
                }
                self.close(b"}");
            }
        }
    }
}

/// Writes record `seq` (of `session`, in a segment log) to `out`, without its `\n`: the bytes
/// `serde_json` writes for it. Returns how deep the record nests, its own object included.
pub(crate) fn record(seq: u64, session: Option<&str>, entry: &Entry, out: &mut Vec<u8>) -> usize {
    let mut encoder = Encoder::new(Out(out));
    encoder.record(seq, session, entry);
    encoder.max_depth
}

/// The size and nesting of `message`'s JSON, counted without writing it: what
/// [`measure`](crate::measure) gives for a message, with no serialisation and no allocation.
///
/// ```
/// use coxswain_core::Message;
/// use coxswain_log::{measure, measure_message, Measure};
///
/// let message = Message::user("m1", "a \"quoted\"\nline");
/// assert_eq!(
///     measure_message(&message),
///     Measure { bytes: 67, depth: 2 }
/// );
/// assert_eq!(measure_message(&message), measure(&message));
/// ```
pub fn measure_message(message: &Message) -> Measure {
    let mut encoder = Encoder::new(Count::default());
    encoder.message(message);
    Measure {
        bytes: encoder.sink.0,
        depth: encoder.max_depth,
    }
}

/// Writes `message`'s JSON to `out`: the bytes `serde_json` writes for it (the encoder's message
/// writer, for a binding that hands a message on as text).
///
/// ```
/// use coxswain_core::Message;
/// use coxswain_log::encode_message;
///
/// let mut out = Vec::new();
/// encode_message(&Message::user("m1", "hi"), &mut out);
/// assert_eq!(out, br#"{"id":"m1","content":"hi","source":{"kind":"user"}}"#);
/// ```
pub fn encode_message(message: &Message, out: &mut Vec<u8>) {
    Encoder::new(Out(out)).message(message);
}
