//! # coxswain-log
//!
//! The durable log of a coxswain session, independent of any async runtime:
//!
//! * [`Auditor`]: checks a log event by event against the invariants a log can show (I1, I2, I4,
//!   I5 and the splice rules) — the engine of `coxswain verify`, and the history checker of the
//!   model checker and the property tests.
//! * The JSON-lines record format ([`encode`], [`parse`]): one `{seq, type, data}` object per
//!   line, written by one hand-made encoder that every log and binding calls (byte for byte what
//!   `serde_json` writes; [`measure_message`] sizes a message the same way without writing it), the machine's events ([`Entry::Machine`]) and the host's ([`HostEvent`]) interleaved,
//!   a torn final line detected ([`TornTail`]), corruption named by line ([`CorruptLine`]).
//! * Shared segment logs ([`SegmentReader`], [`split_segment`]): many sessions' records in one
//!   file, each line naming its `session`, split back into per-session streams.
//! * Crash repair ([`repair`], S50): restore what was read back (accepting what
//!   S46 accepts), close an interrupted turn, hand back the machine.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod audit;
mod encode;
mod jsonl;
mod lines;
mod repair;
mod segment;

pub use audit::{AuditError, Auditor, Rule};
pub use encode::{encode_message, measure_message};
pub use jsonl::{
    check_data, check_message, depth_of, encode, encode_in_session, measure, parse, CorruptLine,
    EncodeError, Entry, HostEvent, Measure, Parsed, Problem, Reader, Record, ReservedType, Tail,
    TooDeep, TornTail, MAX_DATA_DEPTH, MAX_DEPTH, MAX_MESSAGE_DEPTH,
};
pub use lines::{read_log, LineBuffer, LineTooLong, NotRegularFile, ReadLogError, MAX_LINE_BYTES};
pub use repair::{repair, repair_redelivering, repair_with, RepairError, Repaired, Repairer};
pub use segment::{
    is_segment, split_segment, SegmentParsed, SegmentReader, SegmentRecord, SegmentTail,
    SESSION_KEY,
};
