//! Log records from a host's JSON values, and a sealed batch's entries to JSON lines: the same
//! encoder as every Rust log (`coxswain_log::encode`), with typed errors.

use coxswain_core::Event;
use coxswain_log::{encode, EncodeError, Entry, HostEvent, ReservedType};
use serde_json::Value;

/// Why a host's value is not a record to append.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EntryError {
    /// It is not an object with a string `type`.
    #[error("a record is not a `{{type, data}}` object with a string `type`")]
    NoType,
    /// Its `type` is one of the machine's, but its `data` is not that event's.
    #[error("not a valid `{kind}` event of the machine: {why}")]
    NotAnEvent {
        /// The machine's type it named.
        kind: String,
        /// Why its data is not that event's (serde's text).
        why: String,
    },
}

/// One record to append, from its JSON value `{type, data}`: the machine's event when `type` is
/// one of [`Event::TYPES`] (which must then be valid), else the host's (its `data` absent is
/// `null`; other fields are ignored).
///
/// ```
/// use coxswain_binding_kit::records::entry;
/// use serde_json::json;
///
/// let host = entry(json!({"type": "model/output", "data": {"text": "hi"}}))?;
/// assert_eq!(serde_json::to_value(&host)?, json!({"type": "model/output", "data": {"text": "hi"}}));
/// let bad = entry(json!({"type": "turn/start", "data": {}})).unwrap_err();
/// assert!(bad.to_string().starts_with("not a valid `turn/start` event of the machine: "));
/// assert_eq!(entry(json!({"data": 1})).unwrap_err().to_string(),
///            "a record is not a `{type, data}` object with a string `type`");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn entry(value: Value) -> Result<Entry, EntryError> {
    let Value::Object(mut object) = value else {
        return Err(EntryError::NoType);
    };
    let Some(Value::String(kind)) = object.remove("type") else {
        return Err(EntryError::NoType);
    };
    let data = object.remove("data").unwrap_or(Value::Null);
    if Event::TYPES.contains(&kind.as_str()) {
        let event = serde_json::json!({ "type": kind, "data": data });
        return serde_json::from_value::<Event>(event)
            .map(Entry::Machine)
            .map_err(|error| EntryError::NotAnEvent {
                kind,
                why: error.to_string(),
            });
    }
    HostEvent::new(kind, data)
        .map(Entry::Host)
        .map_err(|ReservedType(kind)| EntryError::NotAnEvent {
            kind,
            why: "a type of the machine's own".to_owned(),
        })
}

/// Why a list of records could not be encoded (nothing is: all or none).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// Record `index` (from 0) is not a record ([`entry`]).
    #[error("record {index}: {error}")]
    Entry {
        /// Its place in the list.
        index: usize,
        /// Why.
        error: EntryError,
    },
    /// The record that would take `seq` cannot be encoded (too deep, `seq` exhausted).
    #[error("record {seq}: {error}")]
    Encode {
        /// The `seq` it would have taken.
        seq: u64,
        /// The encoder's refusal.
        error: EncodeError,
    },
}

/// `values` (`{type, data}` each) as log lines numbered from `first_seq`, each ending in `\n`:
/// the bytes to append, or why one is refused (nothing is encoded then).
///
/// ```
/// use coxswain_binding_kit::records::encode_values;
/// use serde_json::json;
///
/// let lines = encode_values(3, [json!({"type": "x/y", "data": 1})])?;
/// assert_eq!(lines, b"{\"seq\":3,\"type\":\"x/y\",\"data\":1}\n");
/// # Ok::<(), coxswain_binding_kit::records::RecordError>(())
/// ```
pub fn encode_values(
    first_seq: u64,
    values: impl IntoIterator<Item = Value>,
) -> Result<Vec<u8>, RecordError> {
    let mut out = Vec::new();
    let mut seq = first_seq;
    for (index, value) in values.into_iter().enumerate() {
        let entry = entry(value).map_err(|error| RecordError::Entry { index, error })?;
        encode(seq, &entry, &mut out).map_err(|error| RecordError::Encode { seq, error })?;
        seq = seq.saturating_add(1);
    }
    Ok(out)
}

/// A sealed batch's `entries` as log lines numbered from `first_seq`, appended to `out` (the
/// binding's own buffer, kept between batches). On an error `out` holds the lines before it:
/// the batch is to be reported failed.
pub fn encode_entries(
    first_seq: u64,
    entries: &[Entry],
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let mut seq = first_seq;
    for entry in entries {
        encode(seq, entry, out)?;
        seq = seq.saturating_add(1);
    }
    Ok(())
}

/// [`encode_entries`] as one string (the lines are JSON: UTF-8), for a host that takes text.
pub fn encode_lines(first_seq: u64, entries: &[Entry]) -> Result<String, EncodeError> {
    let mut out = Vec::with_capacity(128 * entries.len());
    encode_entries(first_seq, entries, &mut out)?;
    String::from_utf8(out).map_err(|error| EncodeError::Json(error.to_string()))
}

/// Why a host's value is not a host event.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostEventError {
    /// It is not an object.
    #[error("a host event is not a `{{type, data}}` object")]
    NotAnObject,
    /// It has no string `type`.
    #[error("a host event needs a string `type`")]
    NoType,
    /// Its `type` is one of the machine's own.
    #[error(transparent)]
    Reserved(#[from] ReservedType),
}

impl HostEventError {
    /// The refusal's kind: `invalid-input`, or `reserved-type` for a type of the machine's.
    pub fn kind(&self) -> &'static str {
        match self {
            HostEventError::Reserved(_) => "reserved-type",
            _ => "invalid-input",
        }
    }
}

/// Host events from their JSON values `{type, data}` (their `data` absent is `null`), or the
/// first that is none.
///
/// ```
/// use coxswain_binding_kit::records::host_events;
/// use serde_json::json;
///
/// let events = host_events([json!({"type": "tool/call", "data": [1]}), json!({"type": "note"})])?;
/// assert_eq!(events[1].kind(), "note");
/// assert_eq!(events[1].data(), &json!(null));
/// let reserved = host_events([json!({"type": "turn/end"})]).unwrap_err();
/// assert_eq!(reserved.kind(), "reserved-type");
/// # Ok::<(), coxswain_binding_kit::records::HostEventError>(())
/// ```
pub fn host_events(
    values: impl IntoIterator<Item = Value>,
) -> Result<Vec<HostEvent>, HostEventError> {
    values
        .into_iter()
        .map(|value| {
            let Value::Object(mut object) = value else {
                return Err(HostEventError::NotAnObject);
            };
            let Some(Value::String(kind)) = object.remove("type") else {
                return Err(HostEventError::NoType);
            };
            let data = object.remove("data").unwrap_or(Value::Null);
            Ok(HostEvent::new(kind, data)?)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_log::TooDeep;
    use serde_json::json;

    fn nested(depth: usize) -> Value {
        (0..depth).fold(json!(1), |inner, _| json!([inner]))
    }

    #[test]
    fn records_encode_from_a_first_seq_or_not_at_all() {
        let start = json!({"type": "turn/start", "data": {"turn": 1}});
        let lines = encode_values(7, [start, json!({"type": "x/y"})]).unwrap();
        assert_eq!(
            String::from_utf8(lines).unwrap(),
            "{\"seq\":7,\"type\":\"turn/start\",\"data\":{\"turn\":1}}\n\
             {\"seq\":8,\"type\":\"x/y\",\"data\":null}\n"
        );
        let refused = encode_values(1, [json!({"type": "x/y"}), json!("text")]).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "record 1: a record is not a `{type, data}` object with a string `type`"
        );
        let deep = encode_values(1, [json!({"type": "x/y", "data": nested(200)})]).unwrap_err();
        let RecordError::Encode {
            seq: 1,
            error: EncodeError::TooDeep(TooDeep { depth, max }),
        } = deep
        else {
            panic!("{deep:?}");
        };
        assert!(depth > max, "{depth} > {max}");
        let last = encode_values(u64::MAX, [json!({"type": "x/y"})]).unwrap_err();
        assert!(
            matches!(last, RecordError::Encode { seq: u64::MAX, .. }),
            "{last:?}"
        );
    }

    #[test]
    fn a_sealed_batch_encodes_as_lines() {
        let entries = [
            Entry::Machine(Event::TurnStart { turn: 2 }),
            Entry::Host(HostEvent::new("x/y", json!({"a": 1})).unwrap()),
        ];
        let lines = encode_lines(4, &entries).unwrap();
        assert_eq!(
            lines,
            "{\"seq\":4,\"type\":\"turn/start\",\"data\":{\"turn\":2}}\n\
             {\"seq\":5,\"type\":\"x/y\",\"data\":{\"a\":1}}\n"
        );
        let mut out = b"kept".to_vec();
        encode_entries(4, &entries, &mut out).unwrap();
        assert!(out.starts_with(b"kept{\"seq\":4"));
        assert!(encode_lines(u64::MAX, &entries).is_err());
    }

    #[test]
    fn host_events_say_which_shape_is_wrong() {
        let text = |value: Value| host_events([value]).unwrap_err().to_string();
        assert_eq!(
            text(json!([1])),
            "a host event is not a `{type, data}` object"
        );
        assert_eq!(
            text(json!({"type": 1})),
            "a host event needs a string `type`"
        );
        let reserved = host_events([json!({"type": "user/message"})]).unwrap_err();
        assert_eq!(
            reserved,
            HostEventError::Reserved(ReservedType("user/message".into()))
        );
        assert_eq!(
            reserved.to_string(),
            ReservedType("user/message".into()).to_string()
        );
        assert_eq!(HostEventError::NoType.kind(), "invalid-input");
        assert_eq!(host_events(Vec::new()).unwrap().len(), 0);
    }
}
