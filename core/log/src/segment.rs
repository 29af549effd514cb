//! Shared segment logs: the records of many sessions interleaved in one JSON-lines file, each
//! line the ordinary record plus the `session` it belongs to:
//! `{"seq":…,"session":"…","type":…,"data":…}`. `seq` is per session and contiguous within it.
//!
//! [`SegmentReader`] splits such a file line by line into per-session record streams (each
//! checked by its own [`Reader`]); [`split_segment`] does it for a whole file in memory.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::jsonl::json_depth;
use crate::{CorruptLine, Problem, Reader, Record, TornTail, MAX_DEPTH};

/// The key naming a record's session in a segment log.
pub const SESSION_KEY: &str = "session";

/// One record of a segment log.
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentRecord {
    /// The session it belongs to.
    pub session: String,
    /// The record as its session reads it: `line` is the line in the segment file, `event` is
    /// the record without its `session` key.
    pub record: Record,
    /// Where its line starts in the file.
    pub offset: u64,
    /// Its line's length in bytes, the `\n` included (if it has one).
    pub len: u64,
}

/// What the final segment of a segment log (the bytes after its last `\n`) holds.
#[derive(Clone, Debug, PartialEq)]
pub enum SegmentTail {
    /// A record cut short: left out (S50).
    Torn(TornTail),
    /// A whole record that follows its session's sequence but lacks its `\n`: kept; the writer
    /// adds the `\n` before appending.
    Unterminated(SegmentRecord),
}

/// Reads a segment log one line at a time, every session's records checked by their own
/// [`Reader`] (contiguous `seq` per session). Corruption names the line in the file.
#[derive(Clone, Debug, Default)]
pub struct SegmentReader {
    line: usize,
    complete_len: u64,
    sessions: HashMap<String, Reader>,
}

impl SegmentReader {
    /// A reader at the start of a segment log.
    pub fn new() -> Self {
        SegmentReader::default()
    }

    /// The next complete line, without its `\n`: its session and record, or the corruption
    /// that ends the read.
    pub fn line(&mut self, bytes: &[u8]) -> Result<SegmentRecord, CorruptLine> {
        let line = self.line + 1;
        let corrupt = |problem| CorruptLine { line, problem };
        let (session, event) = self.session_of(bytes).map_err(corrupt)?;
        let len = bytes.len() as u64 + 1;
        let reader = self.sessions.entry(session.clone()).or_default();
        let mut record = reader.value(event, len).map_err(|c| corrupt(c.problem))?;
        record.line = line;
        let offset = self.complete_len;
        self.line = line;
        self.complete_len += len;
        Ok(SegmentRecord {
            session,
            record,
            offset,
            len,
        })
    }

    /// The final segment (non-empty, without `\n`): a whole record that follows its session's
    /// sequence is [`SegmentTail::Unterminated`]; anything else is [`SegmentTail::Torn`].
    pub fn last(&mut self, bytes: &[u8]) -> SegmentTail {
        let line = self.line + 1;
        let torn = SegmentTail::Torn(TornTail {
            line,
            bytes: bytes.len(),
        });
        let Ok((session, event)) = self.session_of(bytes) else {
            return torn;
        };
        let len = bytes.len() as u64;
        let reader = self.sessions.entry(session.clone()).or_default();
        let Some(mut record) = reader.last_value(event, len) else {
            return torn;
        };
        record.line = line;
        let offset = self.complete_len;
        self.line = line;
        self.complete_len += len;
        SegmentTail::Unterminated(SegmentRecord {
            session,
            record,
            offset,
            len,
        })
    }

    /// The length in bytes of what was read as records.
    pub fn complete_len(&self) -> u64 {
        self.complete_len
    }

    /// The records read so far (lines of the file).
    pub fn records(&self) -> usize {
        self.line
    }

    /// The `seq` the next record of `session` gets (1 for a session with no record yet).
    pub fn next_seq(&self, session: &str) -> u64 {
        self.sessions.get(session).map_or(1, Reader::next_seq)
    }

    /// The sessions seen so far, with the `seq` each one's next record gets.
    pub fn sessions(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        self.sessions
            .iter()
            .map(|(session, reader)| (session.as_str(), reader.next_seq()))
    }

    /// The line parsed, its `session` taken out; `seq` is required.
    fn session_of(&self, bytes: &[u8]) -> Result<(String, Value), Problem> {
        if bytes.len() > crate::MAX_LINE_BYTES {
            return Err(Problem::TooLong(crate::MAX_LINE_BYTES));
        }
        let depth = json_depth(bytes);
        if depth > MAX_DEPTH {
            return Err(Problem::TooDeep(crate::TooDeep {
                depth,
                max: MAX_DEPTH,
            }));
        }
        let mut event: Value =
            serde_json::from_slice(bytes).map_err(|error| Problem::NotJson(error.to_string()))?;
        let Some(object) = event.as_object_mut() else {
            return Err(Problem::NotAnObject);
        };
        if !object.get("seq").is_some_and(Value::is_u64) {
            return Err(Problem::BadSeq);
        }
        match object.remove(SESSION_KEY) {
            Some(Value::String(session)) => Ok((session, event)),
            _ => Err(Problem::NoSession),
        }
    }
}

/// A segment log read back in memory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SegmentParsed {
    /// Every session's complete records, in order (`line`: the line in the file; `event`:
    /// without `session`).
    pub sessions: BTreeMap<String, Vec<Record>>,
    /// The length in bytes of the complete records.
    pub complete_len: usize,
    /// The final record cut short, if any (which session it belonged to is unknowable).
    pub torn: Option<TornTail>,
    /// The final record is whole but lacks its `\n`.
    pub unterminated: bool,
}

/// Splits a segment log into its sessions' record streams, with the rules of
/// [`SegmentReader`].
pub fn split_segment(bytes: &[u8]) -> Result<SegmentParsed, CorruptLine> {
    let mut reader = SegmentReader::new();
    let mut parsed = SegmentParsed::default();
    let mut rest = bytes;
    while !rest.is_empty() {
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            match reader.last(rest) {
                SegmentTail::Torn(tail) => parsed.torn = Some(tail),
                SegmentTail::Unterminated(record) => {
                    parsed
                        .sessions
                        .entry(record.session)
                        .or_default()
                        .push(record.record);
                    parsed.unterminated = true;
                }
            }
            break;
        };
        let record = reader.line(&rest[..end])?;
        parsed
            .sessions
            .entry(record.session)
            .or_default()
            .push(record.record);
        rest = &rest[end + 1..];
    }
    parsed.complete_len = reader.complete_len() as usize;
    Ok(parsed)
}

/// True when `bytes` read as a segment log: its first line is a JSON object with a `session`
/// string.
pub fn is_segment(bytes: &[u8]) -> bool {
    let first = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    serde_json::from_slice::<Value>(first)
        .ok()
        .and_then(|value| value.get(SESSION_KEY).map(Value::is_string))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{encode_in_session, Entry, HostEvent};
    use serde_json::json;

    fn entry(text: &str) -> Entry {
        Entry::Host(HostEvent::new("model/output", json!(text)).unwrap())
    }

    fn sample() -> Vec<u8> {
        let mut out = Vec::new();
        encode_in_session("a", 1, &entry("a1"), &mut out).unwrap();
        encode_in_session("b", 1, &entry("b1"), &mut out).unwrap();
        encode_in_session("a", 2, &entry("a2"), &mut out).unwrap();
        encode_in_session("b", 2, &entry("b2"), &mut out).unwrap();
        out
    }

    #[test]
    fn a_line_names_its_session_after_seq() {
        let mut out = Vec::new();
        encode_in_session("s1", 7, &entry("x"), &mut out).unwrap();
        assert_eq!(
            out,
            b"{\"seq\":7,\"session\":\"s1\",\"type\":\"model/output\",\"data\":\"x\"}\n"
        );
    }

    #[test]
    fn split_gives_each_session_its_own_records() {
        let bytes = sample();
        assert!(is_segment(&bytes));
        let parsed = split_segment(&bytes).unwrap();
        assert_eq!(parsed.complete_len, bytes.len());
        let a = &parsed.sessions["a"];
        assert_eq!(
            a.iter().map(|r| (r.line, r.seq)).collect::<Vec<_>>(),
            vec![(1, Some(1)), (3, Some(2))]
        );
        assert_eq!(
            a[1].event,
            json!({"seq": 2, "type": "model/output", "data": "a2"})
        );
        assert_eq!(parsed.sessions["b"].len(), 2);
        assert_eq!(parsed.torn, None);
    }

    #[test]
    fn a_gap_within_a_session_is_corrupt_at_its_file_line() {
        let mut bytes = sample();
        encode_in_session("a", 4, &entry("a4"), &mut bytes).unwrap();
        assert_eq!(
            split_segment(&bytes).unwrap_err(),
            CorruptLine {
                line: 5,
                problem: Problem::SeqGap {
                    previous: 2,
                    found: 4
                }
            }
        );
        let no_session = b"{\"seq\":1,\"type\":\"x\"}\n";
        assert_eq!(
            split_segment(no_session).unwrap_err().problem,
            Problem::NoSession
        );
        assert!(!is_segment(no_session));
    }

    #[test]
    fn a_torn_tail_is_left_out_and_an_unterminated_one_kept() {
        let bytes = sample();
        let parsed = split_segment(&bytes[..bytes.len() - 5]).unwrap();
        assert_eq!(parsed.torn.map(|t| t.line), Some(4));
        assert_eq!(parsed.sessions["b"].len(), 1);
        let parsed = split_segment(&bytes[..bytes.len() - 1]).unwrap();
        assert!(parsed.unterminated);
        assert_eq!(parsed.sessions["b"].len(), 2);
        assert_eq!(parsed.complete_len, bytes.len() - 1);
    }

    #[test]
    fn the_reader_knows_each_sessions_next_seq() {
        let bytes = sample();
        let mut reader = SegmentReader::new();
        for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            reader.line(line).unwrap();
        }
        assert_eq!(reader.next_seq("a"), 3);
        assert_eq!(reader.next_seq("zzz"), 1);
        assert_eq!(reader.records(), 4);
    }
}
