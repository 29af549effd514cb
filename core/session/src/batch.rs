//! What a batch is made of, as the driver sees it: its number, its members' tickets, what a
//! persisted batch releases and a failed one hands back, and what a timeout did.

use coxswain_core::{Effect, Outstanding};
use coxswain_log::Entry;

use crate::admission::Refused;
#[cfg(doc)]
use crate::{HostFailure, Session};

/// The number of a batch, counting from 1 over the session's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BatchNo(pub u64);

/// A staged input or host-event group: its batch and its place in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ticket {
    /// The batch it joined.
    pub batch: BatchNo,
    /// Its place in the batch, from 0, in the order it was staged.
    pub index: usize,
}

/// What one staged member turned into once its batch was persisted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ack {
    /// An input; `found` is `false` only for a `remove` or `replace` of an id that was not
    /// pending ([`Machine::remove`](coxswain_core::Machine::remove) returned `None`).
    Input {
        /// Whether the edit found its id.
        found: bool,
    },
    /// Host events, now durable inside their step.
    Recorded,
    /// Refused, changing nothing (S5), against a state that held the batch's earlier members:
    /// the refusal stands only once they are durable (if the batch fails, so does this member,
    /// and it may be sent again).
    Refused(Refused),
}

/// What a persisted batch releases, in input order: each member's effects, then its
/// acknowledgement.
#[derive(Clone, Debug, PartialEq)]
pub enum Release {
    /// Carry this effect out.
    Effect(Effect),
    /// The member is durable: answer its caller.
    Ack(Ticket, Ack),
}

/// What [`Session::persisted`] releases, in input order: each member's effects, then its
/// acknowledgement. It takes them out of the session's staging buffers, which stay allocated
/// for the next batch: releasing a batch allocates nothing. Releases left unread when it is
/// dropped are dropped with it.
#[derive(Debug)]
pub struct Released<'s> {
    batch: BatchNo,
    effects: std::vec::Drain<'s, Effect>,
    members: std::iter::Enumerate<std::vec::Drain<'s, Member>>,
    /// The member whose effects are being released: its place and acknowledgement.
    current: Option<(usize, Ack)>,
    /// How many of the current member's effects are left.
    left: usize,
    /// Where the current member's effects end in the batch's effects.
    end: usize,
}

impl<'s> Released<'s> {
    pub(crate) fn new(
        batch: BatchNo,
        effects: std::vec::Drain<'s, Effect>,
        members: std::vec::Drain<'s, Member>,
    ) -> Self {
        Released {
            batch,
            effects,
            members: members.enumerate(),
            current: None,
            left: 0,
            end: 0,
        }
    }
}

impl Iterator for Released<'_> {
    type Item = Release;

    #[inline]
    fn next(&mut self) -> Option<Release> {
        loop {
            if self.current.is_some() {
                if self.left > 0 {
                    self.left -= 1;
                    if let Some(effect) = self.effects.next() {
                        return Some(Release::Effect(effect));
                    }
                }
                let (index, ack) = self.current.take()?;
                let batch = self.batch;
                return Some(Release::Ack(Ticket { batch, index }, ack));
            }
            let (index, member) = self.members.next()?;
            self.left = member.effects_end.saturating_sub(self.end);
            self.end = member.effects_end;
            self.current = Some((index, member.ack));
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        // Every effect left belongs to a member whose acknowledgement is left too.
        let len = self.effects.len() + self.members.len() + usize::from(self.current.is_some());
        (len, Some(len))
    }
}

impl ExactSizeIterator for Released<'_> {}

/// A staged member: its acknowledgement once durable, and where its effects end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    pub(crate) ack: Ack,
    /// One past this member's last effect in the batch's effects.
    pub(crate) effects_end: usize,
}

/// The entries of a sealed batch: append them as one write, then call
/// [`persisted`](Session::persisted) or [`failed`](Session::failed) with its number.
#[derive(Debug)]
pub struct Append<'s> {
    /// The batch.
    pub batch: BatchNo,
    /// Its records, in order (empty when its inputs emitted no event: nothing to write).
    pub entries: &'s [Entry],
}

/// A batch call that does not fit the session's state. It changed nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchMismatch {
    /// No batch is sealed (nothing is being persisted).
    #[error("no batch is being persisted")]
    NotSealed,
    /// Another batch is being persisted.
    #[error("batch {expected:?} is being persisted, not {given:?}")]
    Other {
        /// The sealed batch.
        expected: BatchNo,
        /// The batch the call named.
        given: BatchNo,
    },
}

impl BatchMismatch {
    /// The mismatch's kind: `not-sealed` or `other-batch`.
    pub fn kind(&self) -> &'static str {
        match self {
            BatchMismatch::NotSealed => "not-sealed",
            BatchMismatch::Other { .. } => "other-batch",
        }
    }
}

/// What a failed batch hands back ([`Session::failed`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failed {
    /// The members that failed, in order: answer each with the persistence failure (it may be
    /// sent again).
    pub members: Vec<Ticket>,
    /// The members that held an answer (a host call's, or a maintenance job's end), in order.
    /// The call or job that gave it will not answer twice, so the session keeps the answer and
    /// stages it again once [`Options::retry_after`](crate::Options::retry_after) has passed
    /// ([`Timeout::Retried`]): whoever waits for such a member waits for that. (An answer the
    /// session gave on an abandoned call's behalf is not among them: its grace fires again.)
    pub held: Vec<Ticket>,
}

/// What [`handle_timeout`](Session::handle_timeout) did: seal and append what it staged (a
/// [`Timeout::Retried`] whose answers were all refused stages nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Timeout {
    /// The aborted call did not answer within the grace: the session staged its `fail` answer
    /// ([`HostFailure::Abandoned`]) as `ticket`. Drop the host's call; a late answer is rejected.
    Abandoned {
        /// The request given up on.
        request: Outstanding,
        /// The staged answer.
        ticket: Ticket,
    },
    /// The answers failed batches held ([`Failed::held`]) are staged again, in order: each
    /// held member's ticket with its new one, or why it was refused now (S5: it changed
    /// nothing; its waiter is told so).
    Retried {
        /// `(held, staged again)` per held member.
        answers: Vec<(Ticket, Result<Ticket, Refused>)>,
    },
}
