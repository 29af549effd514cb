//! Splitting a log read in chunks into its lines: the one place that carries a line cut by a
//! chunk's end over to the next chunk (the file log, the segment log's scan).

use std::ops::ControlFlow;

/// The lines of a log fed chunk by chunk.
#[derive(Clone, Debug, Default)]
pub struct LineBuffer {
    /// The bytes after the last `\n` seen: a line still being read, or the final segment.
    pending: Vec<u8>,
}

impl LineBuffer {
    /// No line read yet.
    pub fn new() -> Self {
        LineBuffer::default()
    }

    /// Hands each complete line of what was fed so far plus `chunk` to `line`, without its
    /// `\n`, in order; keeps what follows the last `\n` for the next chunk. Stops at the first
    /// `Break` or error `line` returns.
    pub fn feed<E>(
        &mut self,
        chunk: &[u8],
        mut line: impl FnMut(&[u8]) -> Result<ControlFlow<()>, E>,
    ) -> Result<ControlFlow<()>, E> {
        let mut rest = chunk;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
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
        self.pending.extend_from_slice(rest);
        Ok(ControlFlow::Continue(()))
    }

    /// What follows the last `\n` fed: once every chunk was fed, the final segment (empty when
    /// the log ends with a complete line).
    pub fn rest(&self) -> &[u8] {
        &self.pending
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
                Ok::<_, ()>(ControlFlow::Continue(()))
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
            Ok::<_, ()>(if line == b"2" {
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
}
