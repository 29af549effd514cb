//! Splitting a log read in chunks into its lines: the one place that carries a line cut by a
//! chunk's end over to the next chunk (the file log, the segment log's scan), and the one limit
//! on a line's length every reader holds ([`MAX_LINE_BYTES`]).

use std::io;
use std::ops::ControlFlow;
use std::path::PathBuf;

/// The longest line (without its `\n`) a reader takes, and a writer writes: 2 MiB.
///
/// Derived from what the agent itself admits: the session refuses a message whose JSON
/// encoding is larger than 1 MiB (`coxswain_session::Limits::DEFAULT.max_message_bytes`) or
/// whose id is longer than 256 bytes, and the widest record holding one message (a splice of a
/// shared segment log: `seq`, `session`, `type`, `target`, `start`, `removedCount`, `wakeup`
/// around `inserted: [message]`) adds well under 1 KiB of envelope to it. Twice the message
/// limit leaves the envelope (and a session id) ample room, and keeps a reader's memory per line
/// bounded: a longer line is refused as soon as it passes the limit ([`LineTooLong`]), without
/// buffering more of it. The writer refuses to write a longer line
/// ([`EncodeError::TooLong`](crate::EncodeError::TooLong)), so whatever was written reads back.
/// `tests/src/bad_input.rs` pins that the largest admissible record fits.
pub const MAX_LINE_BYTES: usize = 2 << 20;

/// A line of a log is longer than [`MAX_LINE_BYTES`]: no record a session writes is, so the
/// read stops there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line} is longer than {max} bytes (the longest record a session writes)")]
pub struct LineTooLong {
    /// Its 1-based line number.
    pub line: usize,
    /// The limit ([`MAX_LINE_BYTES`]).
    pub max: usize,
}

/// A log's path names something that is not a regular file (a FIFO, a directory, a socket, a
/// device): refused before anything is read from it (a FIFO would block the reader for ever).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: not a regular file ({kind})", path.display())]
pub struct NotRegularFile {
    /// The path.
    pub path: PathBuf,
    /// What it is instead: `a FIFO`, `a directory`, `a socket`, `a character device`,
    /// `a block device` (or `not a file`).
    pub kind: &'static str,
}

impl NotRegularFile {
    /// Checks the type of what `path` names (from its metadata, or the open file's `fstat`):
    /// `Ok` for a regular file, else the error naming the path and what it is.
    pub fn check(path: impl Into<PathBuf>, file_type: std::fs::FileType) -> Result<(), Self> {
        if file_type.is_file() {
            return Ok(());
        }
        Err(NotRegularFile {
            path: path.into(),
            kind: kind_of(file_type),
        })
    }
}

#[cfg(unix)]
fn kind_of(file_type: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else {
        "not a file"
    }
}

#[cfg(not(unix))]
fn kind_of(file_type: std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// The lines of a log fed chunk by chunk, each at most [`MAX_LINE_BYTES`] long: the buffer
/// never holds more than that.
#[derive(Clone, Debug)]
pub struct LineBuffer {
    /// The bytes after the last `\n` seen: a line still being read, or the final segment.
    pending: Vec<u8>,
    /// The complete lines handed out so far.
    lines: usize,
    /// The longest line taken.
    max: usize,
}

impl Default for LineBuffer {
    fn default() -> Self {
        LineBuffer::new()
    }
}

impl LineBuffer {
    /// No line read yet; lines up to [`MAX_LINE_BYTES`].
    pub fn new() -> Self {
        LineBuffer::with_limit(MAX_LINE_BYTES)
    }

    /// No line read yet; lines up to `max` bytes (without their `\n`).
    pub fn with_limit(max: usize) -> Self {
        LineBuffer {
            pending: Vec::new(),
            lines: 0,
            max,
        }
    }

    /// Hands each complete line of what was fed so far plus `chunk` to `line`, without its
    /// `\n`, in order; keeps what follows the last `\n` for the next chunk. Stops at the first
    /// `Break` or error `line` returns, or at the first line longer than the limit
    /// ([`LineTooLong`], before buffering more than the limit of it; the buffer is then spent).
    pub fn feed<E: From<LineTooLong>>(
        &mut self,
        chunk: &[u8],
        mut line: impl FnMut(&[u8]) -> Result<ControlFlow<()>, E>,
    ) -> Result<ControlFlow<()>, E> {
        let mut rest = chunk;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            self.check(end)?;
            self.lines += 1;
            let flow = if self.pending.is_empty() {
                line(&rest[..end])?
            } else {
                self.pending.extend_from_slice(&rest[..end]);
                let flow = line(&self.pending);
                self.pending.clear();
                flow?
            };
            rest = &rest[end + 1..];
            if flow.is_break() {
                return Ok(ControlFlow::Break(()));
            }
        }
        self.check(rest.len())?;
        if self.pending.capacity() < self.pending.len() + rest.len() {
            // Grow by doubling, but never past the limit: the buffer's memory stays bounded.
            let wanted = (self.pending.len() + rest.len())
                .max(2 * self.pending.capacity())
                .min(self.max);
            self.pending.reserve_exact(wanted - self.pending.len());
        }
        self.pending.extend_from_slice(rest);
        Ok(ControlFlow::Continue(()))
    }

    /// The line being read would be `more` bytes longer than what is pending: refused past the
    /// limit.
    fn check(&self, more: usize) -> Result<(), LineTooLong> {
        if self.pending.len().saturating_add(more) > self.max {
            return Err(LineTooLong {
                line: self.lines + 1,
                max: self.max,
            });
        }
        Ok(())
    }

    /// What follows the last `\n` fed: once every chunk was fed, the final segment (empty when
    /// the log ends with a complete line).
    pub fn rest(&self) -> &[u8] {
        &self.pending
    }

    /// The bytes the buffer holds room for (never more than the limit, by construction).
    pub fn capacity(&self) -> usize {
        self.pending.capacity()
    }
}

/// Why [`read_log`] stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadLogError {
    /// Reading failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A line is longer than the limit: the read stopped there.
    #[error(transparent)]
    TooLong(#[from] LineTooLong),
}

/// Reads a whole log from `source` (a file the caller opened and checked is a regular file),
/// refusing it at its first line longer than `max` bytes ([`MAX_LINE_BYTES`] for a session's
/// log) as soon as the read passes the limit: what it holds is the lines read so far (each within
/// the limit) and one chunk, never a whole over-long line.
pub fn read_log(mut source: impl io::Read, max: usize) -> Result<Vec<u8>, ReadLogError> {
    let mut out = Vec::new();
    let mut chunk = vec![0; 64 << 10];
    // The length of the line being read, and how many lines were complete before it.
    let (mut current, mut lines) = (0usize, 0usize);
    loop {
        let n = match source.read(&mut chunk) {
            Ok(0) => return Ok(out),
            Ok(n) => n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error.into()),
        };
        let mut rest = &chunk[..n];
        loop {
            let (piece, newline) = match rest.iter().position(|&b| b == b'\n') {
                Some(end) => (end, true),
                None => (rest.len(), false),
            };
            current = current.saturating_add(piece);
            if current > max {
                return Err(LineTooLong {
                    line: lines + 1,
                    max,
                }
                .into());
            }
            if !newline {
                break;
            }
            lines += 1;
            current = 0;
            rest = &rest[piece + 1..];
        }
        out.extend_from_slice(&chunk[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(chunks: &[&[u8]]) -> (Vec<String>, String) {
        let mut buffer = LineBuffer::new();
        let mut lines = Vec::new();
        for chunk in chunks {
            let flow = buffer.feed(chunk, |line| {
                lines.push(String::from_utf8_lossy(line).into_owned());
                Ok::<_, LineTooLong>(ControlFlow::Continue(()))
            });
            assert_eq!(flow, Ok(ControlFlow::Continue(())));
        }
        (lines, String::from_utf8_lossy(buffer.rest()).into_owned())
    }

    #[test]
    fn a_line_cut_by_a_chunk_end_is_joined_and_the_tail_is_kept() {
        assert_eq!(
            lines_of(&[b"ab\ncd", b"e\n\nf", b"g"]),
            (vec!["ab".into(), "cde".into(), String::new()], "fg".into())
        );
        assert_eq!(lines_of(&[b"x\n"]), (vec!["x".into()], String::new()));
    }

    #[test]
    fn a_break_stops_at_its_line() {
        let mut buffer = LineBuffer::new();
        let mut seen = Vec::new();
        let flow = buffer.feed(b"1\n2\n3\n", |line| {
            seen.push(line.to_vec());
            Ok::<_, LineTooLong>(if line == b"2" {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        });
        assert_eq!(
            (flow, seen),
            (
                Ok(ControlFlow::Break(())),
                vec![b"1".to_vec(), b"2".to_vec()]
            )
        );
    }

    #[test]
    fn a_line_past_the_limit_is_refused_without_buffering_it() {
        // A line of exactly the limit is taken, whole or cut by chunks.
        let mut buffer = LineBuffer::with_limit(8);
        let mut seen = Vec::new();
        for chunk in [&b"1234"[..], b"5678\nab", b"\n"] {
            let flow = buffer.feed(chunk, |line| {
                seen.push(line.to_vec());
                Ok::<_, LineTooLong>(ControlFlow::Continue(()))
            });
            assert_eq!(flow, Ok(ControlFlow::Continue(())));
        }
        assert_eq!(seen, vec![b"12345678".to_vec(), b"ab".to_vec()]);
        // Line 3 is 9 bytes: refused when its 9th byte arrives, whether its `\n` came or not,
        // and the buffer never held more than the limit.
        for chunks in [&[&b"x\ny\n123456"[..], b"789"][..], &[b"x\ny\n123456789\n"]] {
            let mut buffer = LineBuffer::with_limit(8);
            let mut result = Ok(ControlFlow::Continue(()));
            for chunk in chunks {
                result = buffer.feed(chunk, |_| Ok(ControlFlow::Continue(())));
                assert!(buffer.capacity() <= 8, "{}", buffer.capacity());
                if result.is_err() {
                    break;
                }
            }
            assert_eq!(result, Err(LineTooLong { line: 3, max: 8 }));
        }
        assert_eq!(
            LineTooLong {
                line: 3,
                max: MAX_LINE_BYTES
            }
            .to_string(),
            "line 3 is longer than 2097152 bytes (the longest record a session writes)"
        );
    }

    #[test]
    fn the_default_buffer_holds_at_most_the_limit() {
        let mut buffer = LineBuffer::new();
        let line = vec![b'a'; MAX_LINE_BYTES];
        // Chunks of 48,000 bytes: doubling the buffer's room would overshoot 2 MiB.
        for piece in line.chunks(48_000) {
            assert!(buffer.capacity() <= MAX_LINE_BYTES);
            let flow = buffer.feed(piece, |_| Ok::<_, LineTooLong>(ControlFlow::Continue(())));
            assert_eq!(flow, Ok(ControlFlow::Continue(())));
        }
        assert_eq!(buffer.rest().len(), MAX_LINE_BYTES);
        assert_eq!(buffer.capacity(), MAX_LINE_BYTES);
        assert_eq!(
            buffer.feed(b"b", |_| Ok(ControlFlow::Continue(()))),
            Err(LineTooLong {
                line: 1,
                max: MAX_LINE_BYTES
            })
        );
        assert_eq!(buffer.capacity(), MAX_LINE_BYTES);
    }

    /// A source that counts the bytes pulled from it.
    struct Counted<R> {
        inner: R,
        pulled: usize,
    }

    impl<R: io::Read> io::Read for Counted<R> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.pulled += n;
            Ok(n)
        }
    }

    #[test]
    fn read_log_stops_at_the_first_long_line() {
        let ok = read_log(&b"ab\ncdef\ng"[..], 4);
        assert_eq!(ok.ok(), Some(b"ab\ncdef\ng".to_vec()));
        let long = read_log(&b"ab\ncdefg\n"[..], 4);
        assert!(matches!(
            long,
            Err(ReadLogError::TooLong(LineTooLong { line: 2, max: 4 }))
        ));
        let torn_long = read_log(&b"ab\ncd\nefghi"[..], 4);
        assert!(matches!(
            torn_long,
            Err(ReadLogError::TooLong(LineTooLong { line: 3, max: 4 }))
        ));
        // An endless line: the read stops one chunk past the limit, not at the end of the source.
        let mut endless = Counted {
            inner: io::repeat(b'a'),
            pulled: 0,
        };
        let error = read_log(&mut endless, MAX_LINE_BYTES).err();
        assert!(matches!(
            error,
            Some(ReadLogError::TooLong(LineTooLong {
                line: 1,
                max: MAX_LINE_BYTES
            }))
        ));
        assert!(
            endless.pulled <= MAX_LINE_BYTES + (64 << 10),
            "{}",
            endless.pulled
        );
    }
}
