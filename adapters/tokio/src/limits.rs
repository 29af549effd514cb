//! The size limits of an agent ([`Options::max_message_bytes`](crate::Options),
//! `max_id_bytes`): checked on the handle before a call reaches the core, so a refused call
//! changes nothing and writes nothing. They bound what a caller can make an agent hold; they
//! are not delivery rules. The pending lists' bound (`max_pending`) is the core's admission
//! bound (S55), decided by the core on the list a delivery resolves to.

use std::io;

use coxswain_core::{Message, MessageId};

use crate::agent::{AgentError, Options};

/// The size limits, copied out of the [`Options`] (the handle checks them).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    max_message_bytes: usize,
    max_id_bytes: usize,
}

impl Limits {
    pub(crate) fn new(options: &Options) -> Self {
        Limits {
            max_message_bytes: options.max_message_bytes,
            max_id_bytes: options.max_id_bytes,
        }
    }

    /// An id no longer than `max_id_bytes`.
    pub(crate) fn check_id(&self, id: &MessageId) -> Result<(), AgentError> {
        let bytes = id.as_str().len();
        if bytes > self.max_id_bytes {
            return Err(AgentError::IdTooLong {
                bytes,
                max: self.max_id_bytes,
            });
        }
        Ok(())
    }

    /// A message whose id and JSON encoding are within the limits. The encoding is counted,
    /// not built (no allocation).
    pub(crate) fn check_message(&self, message: &Message) -> Result<(), AgentError> {
        self.check_id(message.id())?;
        let mut counter = Counter(0);
        // Counting cannot fail, and a `Message` always encodes (its fields are JSON values).
        let _ = serde_json::to_writer(&mut counter, message);
        let bytes = counter.0;
        if bytes > self.max_message_bytes {
            return Err(AgentError::MessageTooLarge {
                id: message.id().clone(),
                bytes,
                max: self.max_message_bytes,
            });
        }
        Ok(())
    }
}

/// Counts the bytes of an encoding.
struct Counter(usize);

impl io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
