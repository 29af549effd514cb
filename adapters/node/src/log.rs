//! The JSON-lines record format of `coxswain-log`, for the file log written from JavaScript: the
//! same encoder and reader as the tokio adapter's `FileLog` and `coxswain verify`.

use std::str::FromStr;

use coxswain_binding_kit::records::{encode_values, RecordError};
use coxswain_binding_kit::request::request;
use coxswain_log::{parse, EncodeError};
use coxswain_session::HostFailure;
use napi::bindgen_prelude::Buffer;
use napi_derive::napi;
use serde_json::{json, Value};

use crate::wire;

/// Encodes `entries` (JSON text: an array of `{type, data}`) as log lines numbered from
/// `first_seq`, each ending in `\n`: the bytes to append. An entry whose `type` is one of the
/// machine's own must be a valid machine event; any other is a host event. Fails, encoding
/// nothing, for an entry that is not `{type: string, data}`, a record deeper than a log line may
/// nest (the message `too-deep:DEPTH:MAX:TEXT`, `TEXT` the `TooDeep`'s), or a `seq` that would
/// reach `u64::MAX`.
#[napi]
pub fn encode_records(first_seq: i64, entries: String) -> napi::Result<String> {
    let fail = |message: String| napi::Error::new(napi::Status::InvalidArg, message);
    let first = u64::try_from(first_seq).map_err(|_| fail(format!("seq {first_seq} < 0")))?;
    let entries: Vec<Value> =
        crate::wire::from_text(&entries).map_err(|e| fail(format!("entries: {e}")))?;
    // The kit's one reading and encoding of records (as the Python binding's).
    let lines = encode_values(first, entries).map_err(|error| match error {
        // `log.js` throws `TooDeepError` with the Rust `TooDeep`'s own text.
        RecordError::Encode {
            error: EncodeError::TooDeep(deep),
            ..
        } => fail(format!("too-deep:{}:{}:{deep}", deep.depth, deep.max)),
        other => fail(other.to_string()),
    })?;
    String::from_utf8(lines).map_err(|e| fail(e.to_string()))
}

/// The longest log line (without its `\n`) a reader takes and a writer writes
/// (`coxswain_log::MAX_LINE_BYTES`): `log.js` stops a longer line as it reads, as the Rust logs do.
#[napi]
pub fn max_line_bytes() -> u32 {
    u32::try_from(coxswain_log::MAX_LINE_BYTES).unwrap_or(u32::MAX)
}

/// Reads a JSON-lines log's bytes with `coxswain-log`'s reader. Returns JSON text:
/// `{"records": [RECORD…], "completeLen": n, "torn": {line, bytes} | null, "unterminated": bool,
/// "nextSeq": n}` (each record `{seq?, type, data}` as written), or `{"corrupt": {line,
/// message}}` for a complete line that is not a valid record.
#[napi]
pub fn parse_log(bytes: Buffer) -> String {
    let reply = match parse(&bytes) {
        Ok(parsed) => {
            let records: Vec<Value> = parsed.records.into_iter().map(|r| r.event).collect();
            json!({
                "records": records,
                "completeLen": parsed.complete_len,
                "torn": parsed.torn.map(|t| json!({ "line": t.line, "bytes": t.bytes })),
                "unterminated": parsed.unterminated,
                "nextSeq": parsed.next_seq,
            })
        }
        Err(corrupt) => {
            json!({ "corrupt": { "line": corrupt.line, "message": corrupt.to_string() } })
        }
    };
    wire::text(&reply)
}

/// The session layer's host-failure answer (`coxswain_session::HostFailure`): `{message, code}`
/// of the `fail` for a host call that `failure`d (`panicked`, `raised`, `cancelled`,
/// `abandoned`, `invalid-answer`); `call` is `preStep`, `step` or `turnStopping`. `{"error":
/// "why"}` for another name.
#[napi]
pub fn host_failure(failure: String, call: String, detail: String) -> String {
    let named = match HostFailure::from_str(&failure) {
        Ok(named) => named,
        Err(unknown) => return wire::text(&json!({ "error": unknown.to_string() })),
    };
    // Only the call's kind shows in the message; the numbers do not.
    let request = match request(&call, 0, 0) {
        Ok(request) => request,
        Err(unknown) => return wire::text(&json!({ "error": unknown.to_string() })),
    };
    wire::to_text(&named.error(request, &detail))
}
