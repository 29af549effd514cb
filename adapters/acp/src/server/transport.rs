//! The newline-delimited JSON transport, with bounded memory (the crate's `Stdio` reads a line
//! of any length and echoes bad input whole in its errors).
//!
//! * A line is read up to [`MAX_LINE_BYTES`]; the rest of a longer line is read and discarded
//!   (never held), and the line is answered `-32700 Parse error` with `data: { bytes, limit }`
//!   (`id: null`, as for any line that is not JSON). The connection goes on with the next line.
//! * A line that is not UTF-8 is answered `-32700` with `data: { error }` (nothing of it is
//!   guessed: a lossy decoding could turn it into another message).
//! * Every error the crate answers that echoes input (`-32700`'s `data.line`, a deserialization
//!   failure's `data.json`, a serde reason's `data.error`) is cut to [`MAX_ECHO_BYTES`]: the
//!   field becomes the first bytes of its text (a string), and `data.truncated: true` and
//!   `data.<field>Bytes` (the field's full length in bytes, e.g. `jsonBytes`) are added.

use std::io;
use std::sync::Arc;

use agent_client_protocol::{self as acp, ConnectTo};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// The longest line read (4 MiB); a longer one is answered `-32700` and discarded.
pub(crate) const MAX_LINE_BYTES: usize = 4 << 20;

/// The most bytes of the client's input an error echoes back (1 KiB).
pub(crate) const MAX_ECHO_BYTES: usize = 1024;

/// The fields of an error's `data` that echo the client's input.
const ECHOED: [&str; 3] = ["line", "json", "error"];

/// The transport over `read` and `write`, lines bounded at `limit` bytes.
pub(crate) fn lines<R, W>(read: R, write: W, limit: usize) -> impl ConnectTo<acp::Agent> + 'static
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let writer = Arc::new(Mutex::new(write));
    let sink = futures::sink::unfold(writer.clone(), |writer, line: String| async move {
        write_line(&writer, &bound_echo(line)).await?;
        Ok::<_, io::Error>(writer)
    });
    let reader = LineReader {
        read: BufReader::new(read),
        writer,
        limit,
    };
    let incoming = futures::stream::unfold(reader, |mut reader| async move {
        reader.next_line().await.map(|line| (line, reader))
    });
    acp::Lines::new(Box::pin(sink), Box::pin(incoming))
}

/// Writes one line (under the lock: the reader's own answers never interleave with the
/// connection's).
async fn write_line<W: AsyncWrite + Unpin>(writer: &Mutex<W>, line: &str) -> io::Result<()> {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    let mut writer = writer.lock().await;
    writer.write_all(&bytes).await?;
    writer.flush().await
}

/// A parse error the reader answers itself (the line never reaches the crate).
fn parse_error(data: Value) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": -32700, "message": "Parse error", "data": data },
    })
    .to_string()
}

struct LineReader<R, W> {
    read: BufReader<R>,
    writer: Arc<Mutex<W>>,
    limit: usize,
}

impl<R, W> LineReader<R, W>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    /// The next line that fits and is UTF-8 (without its `\n` or `\r\n`); `None` at the end of
    /// the input. Lines that do not fit or are not UTF-8 are answered here and skipped.
    async fn next_line(&mut self) -> Option<io::Result<String>> {
        loop {
            let mut line = Vec::new();
            let mut bytes = 0usize;
            let mut eof = false;
            loop {
                let buffer = match self.read.fill_buf().await {
                    Ok(buffer) => buffer,
                    Err(error) => return Some(Err(error)),
                };
                if buffer.is_empty() {
                    eof = true;
                    break;
                }
                let newline = buffer.iter().position(|b| *b == b'\n');
                let chunk = &buffer[..newline.unwrap_or(buffer.len())];
                bytes = bytes.saturating_add(chunk.len());
                if bytes <= self.limit {
                    line.extend_from_slice(chunk);
                } else if !line.is_empty() {
                    // Over the bound: nothing more of this line is kept.
                    line = Vec::new();
                }
                let used = chunk.len() + usize::from(newline.is_some());
                self.read.consume(used);
                if newline.is_some() {
                    break;
                }
            }
            if eof && bytes == 0 {
                return None;
            }
            let refused = if bytes > self.limit {
                Some(json!({ "bytes": bytes, "limit": self.limit }))
            } else {
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                match String::from_utf8(line) {
                    Ok(line) => return Some(Ok(line)),
                    Err(error) => Some(json!({
                        "error": format!("the line is not UTF-8: {}", error.utf8_error())
                    })),
                }
            };
            if let Some(data) = refused {
                if let Err(error) = write_line(&self.writer, &parse_error(data)).await {
                    return Some(Err(error));
                }
            }
            if eof {
                return None;
            }
        }
    }
}

/// Cuts what an outgoing error echoes of the client's input to [`MAX_ECHO_BYTES`] (only long
/// lines that carry an error are looked at).
fn bound_echo(line: String) -> String {
    if line.len() <= 2 * MAX_ECHO_BYTES || !line.contains("\"error\"") {
        return line;
    }
    let Ok(mut message) = serde_json::from_str::<Value>(&line) else {
        return line;
    };
    let Some(data) = message
        .get_mut("error")
        .and_then(|error| error.get_mut("data"))
        .and_then(Value::as_object_mut)
    else {
        return line;
    };
    let mut cut = false;
    for field in ECHOED {
        let Some(value) = data.get_mut(field) else {
            continue;
        };
        let cut_text = match &*value {
            Value::String(text) if text.len() > MAX_ECHO_BYTES => {
                Some((text.len(), prefix(text, MAX_ECHO_BYTES).to_owned()))
            }
            Value::String(_) => None,
            other => {
                let text = other.to_string();
                (text.len() > MAX_ECHO_BYTES)
                    .then(|| (text.len(), prefix(&text, MAX_ECHO_BYTES).to_owned()))
            }
        };
        let Some((bytes, kept)) = cut_text else {
            continue;
        };
        *value = Value::String(kept);
        data.insert(format!("{field}Bytes"), json!(bytes));
        cut = true;
    }
    if !cut {
        return line;
    }
    data.insert("truncated".into(), Value::Bool(true));
    message.to_string()
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
fn prefix(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_echo_is_cut_to_one_kib() {
        let long = "x".repeat(5000);
        let line = json!({
            "jsonrpc": "2.0", "id": 3,
            "error": { "code": -32602, "message": "Invalid params",
                       "data": { "json": { "prompt": long }, "phase": "deserialization" } },
        })
        .to_string();
        let cut: Value = serde_json::from_str(&bound_echo(line)).unwrap_or(Value::Null);
        let data = &cut["error"]["data"];
        assert_eq!(data["truncated"], json!(true));
        assert_eq!(data["jsonBytes"], json!(5000 + "{\"prompt\":\"\"}".len()));
        assert_eq!(data["json"].as_str().map(str::len), Some(MAX_ECHO_BYTES));
        assert_eq!(data["phase"], json!("deserialization"));
        assert_eq!(cut["id"], json!(3));
    }

    #[test]
    fn short_errors_and_results_are_left_alone() {
        let short = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"data":{"line":"x"}}}"#;
        assert_eq!(bound_echo(short.to_owned()), short);
        let result = json!({ "jsonrpc": "2.0", "id": 1, "result": { "text": "y".repeat(5000) } })
            .to_string();
        assert_eq!(bound_echo(result.clone()), result);
    }

    #[test]
    fn a_prefix_ends_on_a_character() {
        assert_eq!(prefix("aé", 2), "a");
        assert_eq!(prefix("abc", 10), "abc");
    }
}
