//! An agent's settings.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::num::NonZeroUsize;
use std::time::Duration;

#[cfg(doc)]
use crate::{Agent, AgentError};
use coxswain_core::Config;
use coxswain_session::{Hooks, Limits, RedeliveryTooLarge, ResumeOptions};

/// An [`Options`] value out of its bounds.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidOptions {
    /// `channel_capacity` is not within `1..=`[`Options::MAX_CAPACITY`].
    #[error("channel_capacity {0} is not within 1..={max}", max = Options::MAX_CAPACITY)]
    ChannelCapacity(usize),
    /// `update_capacity` is not within `1..=`[`Options::MAX_CAPACITY`].
    #[error("update_capacity {0} is not within 1..={max}", max = Options::MAX_CAPACITY)]
    UpdateCapacity(usize),
    /// `delivery_memory` is above [`Options::MAX_CAPACITY`] and not
    /// [`Options::UNBOUNDED_DELIVERY_MEMORY`].
    #[error("delivery_memory {0} is above {max} (and not UNBOUNDED_DELIVERY_MEMORY)", max = Options::MAX_CAPACITY)]
    DeliveryMemory(usize),
    /// `max_batch` is not within `1..=`[`Options::MAX_CAPACITY`].
    #[error("max_batch {0} is not within 1..={max}", max = Options::MAX_CAPACITY)]
    MaxBatch(usize),
    /// A limit (`max_pending`, `max_id_bytes`, `max_message_bytes`) is 0.
    #[error("{0} is 0: nothing could be delivered")]
    Limit(&'static str),
    /// `redelivery` is above [`MAX_REDELIVERY`](coxswain_session::MAX_REDELIVERY) (S59): the
    /// session layer's own check and text.
    #[error(transparent)]
    Redelivery(#[from] RedeliveryTooLarge),
}

/// Settings of an agent.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// The agent's name in `tracing` spans.
    pub name: String,
    /// How many calls may wait for the driver before callers wait to send:
    /// `1..=`[`Options::MAX_CAPACITY`].
    pub channel_capacity: usize,
    /// How many updates a subscriber may fall behind before it lags:
    /// `1..=`[`Options::MAX_CAPACITY`]. The buffer is allocated at the first
    /// [`Agent::subscribe`], so an agent nobody watches does not pay for it.
    pub update_capacity: usize,
    /// The capacity `W` of the core's delivery memory (S51): a retried delivery of one of the
    /// last `W` messages that left the lists fails [`AgentError::AlreadyDelivered`] instead of
    /// running twice. `0..=`[`Options::MAX_CAPACITY`], or
    /// [`Options::UNBOUNDED_DELIVERY_MEMORY`] (S58's `unbounded`: no id is ever forgotten, for a
    /// host that promises idempotency for a session's whole life; the memory grows by one
    /// record per message that left a list); 0 is plain S9. Pass the same value every time the
    /// log is opened (it is not written to the log, S51).
    pub delivery_memory: usize,
    /// Group commit: the most inputs (and host events) one append takes. The driver takes every
    /// call already waiting, up to this many, feeds them to the core in arrival order and
    /// appends all their events as one batch (one write, one sync), acknowledging each only
    /// once that batch is durable. 1 appends (and syncs) once per input.
    /// `1..=`[`Options::MAX_CAPACITY`]; default [`Options::DEFAULT_MAX_BATCH`].
    pub max_batch: usize,
    /// The pause after a failed append before the session stages anything on its own again
    /// (the host answers the failed batch held, written again; an abandoned call's `fail`): a
    /// failing log is not written to again at once. A batch persisted meanwhile ends the pause.
    /// Default [`Options::DEFAULT_RETRY_AFTER`].
    pub retry_after: Duration,
    /// How long a host call may run on after its activity was aborted (a `cancel`, or the
    /// cancel that [`dispose`](Agent::dispose) makes) before the driver drops it and answers
    /// `fail` (code [`ABANDONED`](Options::ABANDONED)) on its behalf. A failure after a cancel
    /// ends the turn `aborted` without `agent/error` (S38), so a cancel always ends the turn,
    /// even when the host ignores its cancellation token. Default
    /// [`Options::DEFAULT_ABORT_GRACE`]; `Duration::MAX` waits forever (the old behaviour).
    pub abort_grace: Duration,
    /// The largest message a delivery may carry, in bytes of its JSON encoding
    /// (`send`/`replace`/`prepend`): a larger one fails [`AgentError::MessageTooLarge`] before
    /// anything is persisted. Default [`Options::DEFAULT_MAX_MESSAGE_BYTES`].
    pub max_message_bytes: usize,
    /// The longest message id, in bytes (any call naming an id): a longer one fails
    /// [`AgentError::IdTooLong`] before anything is persisted. Default
    /// [`Options::DEFAULT_MAX_ID_BYTES`].
    pub max_id_bytes: usize,
    /// The core's admission bound `P` (S55), the most items one pending list (NT or NS) may
    /// hold: a `send` whose resolved list (after S18: a waking send after a cancel joins NT)
    /// already holds `max_pending` items, or a `prepend` into such a list, fails
    /// [`AgentError::Full`], changing and writing nothing. The core decides, after the identity
    /// checks and a guarded send's guard. A `replace` is never refused (it keeps the length). A
    /// log restored with longer lists keeps them; only new insertions wait. Like
    /// `delivery_memory` it is not written to the log: pass it at every open. At least 1;
    /// default [`Options::DEFAULT_MAX_PENDING`].
    pub max_pending: usize,
    /// Crash repair's redelivery allowance `A` (S59): when the log ends inside a turn, repair
    /// re-inserts, after its closers, each message that turn claimed after its last
    /// `step/start` (no model call saw it), unless its id was already redelivered `A` times or
    /// is pending again. The re-inserted items park (S48) until a wake or a `resume` (S57,
    /// [`resume_on_open`](Options::resume_on_open)). 0 (the default) is S50 unchanged:
    /// at-most-once. `0..=`[`MAX_REDELIVERY`](coxswain_session::MAX_REDELIVERY); a larger value
    /// fails the open with [`InvalidOptions::Redelivery`] before the log is read. Like
    /// `delivery_memory` it is not written to the log: pass it at every open. Applies to every
    /// [`DurableLog`](crate::DurableLog) (file, segment, database).
    pub redelivery: u64,
    /// Once the log is read back and repaired, send `resume` (S57) before any other call: work
    /// the log left parked (S48; a redelivered message, S59) starts a turn without waiting for
    /// a new waking send. Its events are durable before [`Agent::open_with`] returns. Default
    /// false: restored work parks until a waking send or [`Agent::resume`] (S48 unchanged).
    pub resume_on_open: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            name: "agent".to_owned(),
            channel_capacity: 64,
            update_capacity: 1024,
            delivery_memory: Options::DEFAULT_DELIVERY_MEMORY,
            max_batch: Options::DEFAULT_MAX_BATCH,
            retry_after: Options::DEFAULT_RETRY_AFTER,
            abort_grace: Options::DEFAULT_ABORT_GRACE,
            max_message_bytes: Options::DEFAULT_MAX_MESSAGE_BYTES,
            max_id_bytes: Options::DEFAULT_MAX_ID_BYTES,
            max_pending: Options::DEFAULT_MAX_PENDING,
            redelivery: 0,
            resume_on_open: false,
        }
    }
}

impl Options {
    /// The largest `channel_capacity`, `update_capacity` and `delivery_memory` (2^20).
    pub const MAX_CAPACITY: usize = 1 << 20;

    /// The default `delivery_memory`: the last 256 messages that left the lists. A retry comes
    /// within seconds of its first attempt, while fewer than that many messages of one session
    /// leave; a full memory costs an agent about 32 KB (126 B per held id, the bench table of
    /// docs/performance.md).
    pub const DEFAULT_DELIVERY_MEMORY: usize = 256;

    /// The `delivery_memory` that never forgets an id (S58's `unbounded`): the core's
    /// [`Config::UNBOUNDED_DELIVERY_MEMORY`].
    pub const UNBOUNDED_DELIVERY_MEMORY: usize = Config::UNBOUNDED_DELIVERY_MEMORY;

    /// The default `max_batch`: the session layer's
    /// ([`coxswain_session::Options::DEFAULT`]), 64 inputs per append, the default
    /// `channel_capacity` (a group takes what waits in the channel). On the bench disk 64
    /// records per `fdatasync` reach most of what larger groups do, and a group's
    /// acknowledgements wait for its whole append.
    pub const DEFAULT_MAX_BATCH: usize = coxswain_session::Options::DEFAULT.max_batch;

    /// The default `abort_grace`: the session layer's, 5 s, as in every driver and binding
    /// ([`coxswain_session::Options::DEFAULT`]). A model call that honours its token stops
    /// within milliseconds; past 5 s the user who pressed stop has waited long enough, and the
    /// dropped call's late answer is ignored anyway. A host whose calls need longer to wind
    /// down sets it.
    pub const DEFAULT_ABORT_GRACE: Duration = coxswain_session::Options::DEFAULT.abort_grace;

    /// The default `retry_after`: the session layer's, 100 ms
    /// ([`coxswain_session::Options::DEFAULT`]).
    pub const DEFAULT_RETRY_AFTER: Duration = coxswain_session::Options::DEFAULT.retry_after;

    /// The default `max_message_bytes`: 1 MiB of encoded JSON, far above a prompt or a tool's
    /// context item, and small enough that 64 queued calls stay well under 100 MB.
    pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1 << 20;

    /// The default `max_id_bytes`: 256 bytes (a UUID is 36, a ULID 26; room for a prefix).
    pub const DEFAULT_MAX_ID_BYTES: usize = 256;

    /// The default `max_pending`: 10,000 items per list. A human queues a handful; a plugin
    /// flooding an agent that does not run is stopped long before memory matters.
    pub const DEFAULT_MAX_PENDING: usize = 10_000;

    /// The error code of the `fail` answer the driver gives for a host call dropped after
    /// [`abort_grace`](Options::abort_grace): the session layer's `host-abandoned`
    /// ([`HostFailure::Abandoned`](coxswain_session::HostFailure::Abandoned)).
    pub const ABANDONED: &'static str = coxswain_session::HostFailure::Abandoned.code();

    /// Checks the bounds: every capacity within `1..=`[`Options::MAX_CAPACITY`], every limit
    /// above 0, and `redelivery` at most [`MAX_REDELIVERY`](coxswain_session::MAX_REDELIVERY)
    /// (checked by the session layer, the one owner of that bound).
    pub fn validate(&self) -> Result<(), InvalidOptions> {
        let within = |n: usize| (1..=Options::MAX_CAPACITY).contains(&n);
        if !within(self.channel_capacity) {
            return Err(InvalidOptions::ChannelCapacity(self.channel_capacity));
        }
        if !within(self.update_capacity) {
            return Err(InvalidOptions::UpdateCapacity(self.update_capacity));
        }
        if self.delivery_memory > Options::MAX_CAPACITY
            && self.delivery_memory != Options::UNBOUNDED_DELIVERY_MEMORY
        {
            return Err(InvalidOptions::DeliveryMemory(self.delivery_memory));
        }
        if !within(self.max_batch) {
            return Err(InvalidOptions::MaxBatch(self.max_batch));
        }
        if self.max_pending == 0 {
            return Err(InvalidOptions::Limit("max_pending"));
        }
        if self.max_id_bytes == 0 {
            return Err(InvalidOptions::Limit("max_id_bytes"));
        }
        if self.max_message_bytes == 0 {
            return Err(InvalidOptions::Limit("max_message_bytes"));
        }
        self.resume_options()?;
        Ok(())
    }

    /// The default options with this name.
    pub fn named(name: impl Into<String>) -> Self {
        Options {
            name: name.into(),
            ..Options::default()
        }
    }

    /// The session layer's options: the abort grace, the retry pause, the size limits, the
    /// batch bound, and the `hooks` the host wrote ([`Host::hooks`](crate::Host::hooks)).
    pub(crate) fn session(&self, hooks: Hooks) -> coxswain_session::Options {
        coxswain_session::Options {
            abort_grace: self.abort_grace,
            retry_after: self.retry_after,
            limits: Limits {
                max_id_bytes: self.max_id_bytes,
                max_message_bytes: self.max_message_bytes,
            },
            hooks,
            max_batch: self.max_batch,
        }
    }

    /// What the resume takes besides the log (S59): the core's configuration and the
    /// redelivery allowance, checked by [`ResumeOptions::try_with_redelivery`].
    pub(crate) fn resume_options(&self) -> Result<ResumeOptions, InvalidOptions> {
        Ok(ResumeOptions::from(self.config()).try_with_redelivery(self.redelivery)?)
    }

    /// The core's configuration: the delivery memory, the admission bound (S55) and a random
    /// seed for the id hasher, drawn per agent (ids come from callers: HashDoS).
    pub(crate) fn config(&self) -> Config {
        let seed = BuildHasher::hash_one(&RandomState::new(), 0u8);
        let config = Config::new()
            .with_delivery_memory(self.delivery_memory)
            .with_hash_seed(seed);
        match NonZeroUsize::new(self.max_pending) {
            Some(limit) => config.with_max_pending(limit),
            None => config, // `validate` refused 0
        }
    }
}
