//! The [`Agent`] handle: a cheap, cloneable front to one driver task.

use std::future::Future;
use std::num::NonZeroUsize;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use coxswain_core::{
    CancelCause, Config, Expect, Input, InvalidLog, MessageId, Notification, Pending, Preset,
    Rejected, Restorer, SharedMessage, Status, Target,
};
use coxswain_log::{
    check_data, check_message, Entry, HostEvent, RepairError, ReservedType, TooDeep, TornTail,
};
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::driver::Driver;
use crate::host::Host;
use crate::limits::Limits;
use crate::log::{DurableLog, LogError};

/// A handle to one running agent: cheap to clone, `Send + Sync`. Every call goes to the agent's
/// driver task, which owns the core and the log; a delivery resolves once its durable splice is
/// persisted (and fails, changing nothing, if the core rejects it).
///
/// The driver task ends when the agent is disposed ([`dispose`](Agent::dispose)), closed
/// ([`close`](Agent::close)), stopped by a persistence failure, or when the embedder drops its
/// last handle. The handles that host calls get ([`StepContext::agent`](crate::StepContext)…)
/// do not count: dropping the embedder's last handle closes the agent at once, tripping the
/// running call's token (its answer is ignored, as after [`close`](Agent::close)). Keep
/// [`finished`](Agent::finished) to learn when the driver has ended and released its log.
#[derive(Clone, Debug)]
pub struct Agent {
    pub(crate) inner: Arc<Inner>,
    /// Held by the embedder's handles only; the last one dropped closes the agent.
    _owner: Option<Arc<Owner>>,
}

/// Closes the agent when the embedder's last handle goes.
#[derive(Debug)]
struct Owner(CancellationToken);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) tx: mpsc::Sender<Command>,
    pub(crate) state: watch::Receiver<State>,
    pub(crate) updates: Arc<Updates>,
    pub(crate) limits: Limits,
}

/// The live-update channel. A tokio broadcast channel allocates all its slots up front, so it is
/// created at the first [`Agent::subscribe`]: an agent nobody watches costs no buffer (100k idle
/// agents would otherwise hold 100k buffers).
#[derive(Debug)]
pub(crate) struct Updates {
    capacity: usize,
    channel: std::sync::Mutex<Channel>,
}

#[derive(Debug)]
enum Channel {
    Unused,
    Open(broadcast::Sender<Update>),
    Ended,
}

impl Updates {
    fn new(capacity: usize) -> Self {
        Updates {
            capacity,
            channel: std::sync::Mutex::new(Channel::Unused),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Channel> {
        self.channel
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn subscribe(&self) -> broadcast::Receiver<Update> {
        let mut channel = self.lock();
        match &*channel {
            Channel::Open(sender) => sender.subscribe(),
            Channel::Unused => {
                let (sender, receiver) = broadcast::channel(self.capacity);
                *channel = Channel::Open(sender);
                receiver
            }
            // The driver ended: a receiver that reports the channel closed.
            Channel::Ended => broadcast::channel(1).1,
        }
    }

    /// Publishes an update to the subscribers, if there are any.
    pub(crate) fn send(&self, update: Update) {
        if let Channel::Open(sender) = &*self.lock() {
            let _ = sender.send(update);
        }
    }

    /// The driver ended: subscribers get what is buffered, then the channel closes.
    pub(crate) fn end(&self) {
        *self.lock() = Channel::Ended;
    }
}

/// What the driver publishes after every input.
#[derive(Clone, Debug)]
pub(crate) struct State {
    pub(crate) status: Status,
    pub(crate) quiescent: bool,
    /// The core's last turn (the running turn's number while running, S27).
    pub(crate) last_turn: u64,
    /// Set once the driver has ended and released its log.
    pub(crate) ended: Option<Ending>,
    /// The final sync's failure, if it failed.
    pub(crate) final_sync: Option<LogError>,
}

pub(crate) type Reply<T> = oneshot::Sender<Result<T, AgentError>>;

/// A maintenance job, as the driver spawns it.
pub(crate) type Job =
    Box<dyn FnOnce(CancellationToken) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

pub(crate) enum Command {
    Input {
        input: Input,
        reply: Reply<bool>,
    },
    Maintenance {
        job: Job,
        reply: Reply<()>,
    },
    Record {
        turn: u64,
        step: u64,
        events: Vec<HostEvent>,
        reply: Reply<()>,
    },
    Pending {
        reply: oneshot::Sender<PendingSnapshot>,
    },
    Close {
        reply: oneshot::Sender<()>,
    },
}

/// Why a call on an [`Agent`] failed.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The core rejected the input; nothing changed (S5). The §12 rejections have variants of
    /// their own ([`Conflict`](AgentError::Conflict), [`TurnMismatch`](AgentError::TurnMismatch),
    /// [`Full`](AgentError::Full)), as [`AlreadyDelivered`](AgentError::AlreadyDelivered) has.
    #[error("rejected: {0}")]
    Rejected(#[from] Rejected),
    /// The delivery memory holds this id: the message was delivered before and has left the
    /// lists (claimed or removed), so this is a retry and it is not delivered again (S52).
    /// Nothing changed. Treat it as success, like `Rejected(AlreadyPending(..))`
    /// ([`was_delivered`](AgentError::was_delivered)).
    #[error("message `{0}` was already delivered")]
    AlreadyDelivered(MessageId),
    /// The id is pending, or held by the delivery memory, for a *different* message (S56): the
    /// caller reused an id. Nothing changed, and the new message was not delivered: this is a
    /// caller bug, never success ([`was_delivered`](AgentError::was_delivered) is false).
    #[error("rejected: message id `{0}` is already used by a different message")]
    Conflict(MessageId),
    /// A guarded send's expected-turn guard does not hold (S54): the turn it named has ended or
    /// was stopped ([`Agent::steer_expecting`]), or a turn started since the caller looked
    /// ([`Agent::followup_if_idle_after`]). Nothing changed.
    #[error("rejected: the send expected {0}, which does not hold")]
    TurnMismatch(Expect),
    /// The list the delivery joins (after S18's retargeting) already holds
    /// [`Options::max_pending`] items (S55); nothing changed.
    #[error("rejected: the {target} list is full ({max} items pending)")]
    Full {
        /// The full list: the one the core resolved the delivery to.
        target: Target,
        /// [`Options::max_pending`].
        max: usize,
    },
    /// Appending this input's durable events failed: the input is not in the log (a retry
    /// delivers it once). The agent stopped: re-open it from its log. By the time this is
    /// returned the agent has ended ([`Agent::ending`] is `Stopped`) and released its log.
    /// After [`LogError::Truncated`] or [`LogError::Tampered`] the log itself lost or gained
    /// records behind the agent's back: look at it before re-opening.
    #[error("the input is not durable: {0}; the agent stopped, re-open it from the log")]
    Persistence(LogError),
    /// Appending this input's durable events failed and undoing the partial write failed too
    /// (or would have had to extend a file found shorter than the log: see
    /// [`LogError::Indeterminate`]): the input may or may not be in the log. The agent stopped
    /// (as for [`Persistence`](AgentError::Persistence), ended by the time this is returned):
    /// re-open it and look (its pending lists) before retrying.
    #[error(
        "the input may or may not be durable: {0}; the agent stopped, re-open it from the log"
    )]
    Indeterminate(LogError),
    /// The final sync failed when the agent ended: records acknowledged without a sync (the
    /// `PerTurn` and `Never` policies) may be lost.
    #[error("the final sync of the log failed: {0}")]
    FinalSync(LogError),
    /// A message or host event nests deeper than a log record can hold; nothing changed.
    #[error("rejected: {0}")]
    TooDeep(#[from] TooDeep),
    /// The agent stopped after a persistence failure: re-open it from its log.
    #[error("the agent stopped after a persistence failure; re-open it from the log")]
    Stopped,
    /// The agent was closed.
    #[error("the agent is closed")]
    Closed,
    /// A host event was recorded after its step was answered.
    #[error("the step is closed: host events go inside their step")]
    StepClosed,
    /// A host event used a type of the machine's own vocabulary.
    #[error(transparent)]
    Reserved(#[from] ReservedType),
    /// The maintenance job panicked (the maintenance ended all the same).
    #[error("the maintenance job panicked")]
    JobPanicked,
    /// The message's JSON encoding is larger than [`Options::max_message_bytes`]; nothing
    /// changed.
    #[error("rejected: message `{id}` is {bytes} bytes encoded, above the limit of {max}")]
    MessageTooLarge {
        /// The message.
        id: MessageId,
        /// Its encoded size.
        bytes: usize,
        /// [`Options::max_message_bytes`].
        max: usize,
    },
    /// A message id is longer than [`Options::max_id_bytes`]; nothing changed.
    #[error("rejected: a message id of {bytes} bytes is above the limit of {max}")]
    IdTooLong {
        /// The id's length in bytes.
        bytes: usize,
        /// [`Options::max_id_bytes`].
        max: usize,
    },
}

impl AgentError {
    /// The error of a core rejection: the §12 kinds and `already-delivered` as their own
    /// variants, every other kind as [`AgentError::Rejected`].
    pub(crate) fn rejected(rejected: Rejected) -> Self {
        match rejected {
            Rejected::AlreadyDelivered(id) => AgentError::AlreadyDelivered(id),
            Rejected::Conflict(id) => AgentError::Conflict(id),
            Rejected::TurnMismatch(expect) => AgentError::TurnMismatch(expect),
            Rejected::Full {
                target,
                max_pending,
            } => AgentError::Full {
                target,
                max: max_pending.get(),
            },
            other => AgentError::Rejected(other),
        }
    }

    /// Whether the error says the message was delivered already: `AlreadyDelivered`, or an id
    /// still pending (`Rejected(AlreadyPending)`) for the same message. A retry that gets either
    /// can stop retrying. A [`Conflict`](AgentError::Conflict) is not: the id belongs to another
    /// message, and this one was never delivered (S56).
    pub fn was_delivered(&self) -> bool {
        matches!(
            self,
            AgentError::AlreadyDelivered(_) | AgentError::Rejected(Rejected::AlreadyPending(_))
        )
    }
}

/// How an agent's driver task ended.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Ending {
    /// The core emitted `disposed` (S45).
    Disposed,
    /// [`Agent::close`] was called, or every handle was dropped.
    Closed,
    /// An append failed: the log holds less than the core did.
    Stopped(LogError),
}

impl Ending {
    fn error(&self) -> AgentError {
        match self {
            Ending::Disposed => AgentError::Rejected(Rejected::AfterDisposal),
            Ending::Closed => AgentError::Closed,
            Ending::Stopped(_) => AgentError::Stopped,
        }
    }
}

/// A live update from an agent ([`Agent::subscribe`]), in the core's output order.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Update {
    /// A record was appended to the durable log (the machine's event or the host's).
    Recorded {
        /// Its `seq` in the log.
        seq: u64,
        /// The record.
        entry: Entry,
    },
    /// A live notification of the core: inserted, discarded, claimed, status, error.
    Notified(Notification),
    /// The driver task ended; no update follows.
    Ended(Ending),
}

/// The pending lists at one moment ([`Agent::pending`]).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct PendingSnapshot {
    /// NT, in order.
    pub next_turn: Vec<Pending>,
    /// NS, in order.
    pub next_step: Vec<Pending>,
}

/// What [`Agent::open`] found in the log and did to it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Recovery {
    /// Complete records read back.
    pub records: usize,
    /// A torn final record the log dropped (S50).
    pub torn_tail: Option<TornTail>,
    /// The turn the log ended inside, now closed `interrupted` (S50).
    pub interrupted_turn: Option<u64>,
    /// Closers appended (`step/end`, `turn/end`).
    pub closers: usize,
    /// The last turn number; the next turn is this + 1.
    pub last_turn: u64,
    /// Items parked in NT.
    pub pending_next_turn: usize,
    /// Items parked in NS.
    pub pending_next_step: usize,
}

/// An agent could not be opened on its log.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// Reading or repairing the log failed (or a line is not a record).
    #[error(transparent)]
    Log(#[from] LogError),
    /// The log breaks a rule before its end; it names the line.
    #[error("the log cannot be repaired: {0}")]
    Corrupt(#[from] RepairError),
    /// The [`Options`] are out of bounds.
    #[error("invalid options: {0}")]
    Options(#[from] InvalidOptions),
}

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
    /// `delivery_memory` is above [`Options::MAX_CAPACITY`].
    #[error("delivery_memory {0} is above {max}", max = Options::MAX_CAPACITY)]
    DeliveryMemory(usize),
    /// `max_batch` is not within `1..=`[`Options::MAX_CAPACITY`].
    #[error("max_batch {0} is not within 1..={max}", max = Options::MAX_CAPACITY)]
    MaxBatch(usize),
    /// A limit (`max_pending`, `max_id_bytes`, `max_message_bytes`) is 0.
    #[error("{0} is 0: nothing could be delivered")]
    Limit(&'static str),
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
    /// running twice. `0..=`[`Options::MAX_CAPACITY`]; 0 is plain S9. Pass the same value every
    /// time the log is opened (it is not written to the log, S51).
    pub delivery_memory: usize,
    /// Group commit: the most inputs (and host events) one append takes. The driver takes every
    /// call already waiting, up to this many, feeds them to the core in arrival order and
    /// appends all their events as one batch (one write, one sync), acknowledging each only
    /// once that batch is durable. 1 appends (and syncs) once per input.
    /// `1..=`[`Options::MAX_CAPACITY`]; default [`Options::DEFAULT_MAX_BATCH`].
    pub max_batch: usize,
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
}

impl Default for Options {
    fn default() -> Self {
        Options {
            name: "agent".to_owned(),
            channel_capacity: 64,
            update_capacity: 1024,
            delivery_memory: Options::DEFAULT_DELIVERY_MEMORY,
            max_batch: Options::DEFAULT_MAX_BATCH,
            abort_grace: Options::DEFAULT_ABORT_GRACE,
            max_message_bytes: Options::DEFAULT_MAX_MESSAGE_BYTES,
            max_id_bytes: Options::DEFAULT_MAX_ID_BYTES,
            max_pending: Options::DEFAULT_MAX_PENDING,
        }
    }
}

impl Options {
    /// The largest `channel_capacity`, `update_capacity` and `delivery_memory` (2^20).
    pub const MAX_CAPACITY: usize = 1 << 20;

    /// The default `delivery_memory`: the last 256 messages that left the lists. A retry comes
    /// within seconds of its first attempt, while fewer than that many messages of one session
    /// leave; a full memory costs an agent about 20 KB (76 B per held id, the README's bench
    /// table).
    pub const DEFAULT_DELIVERY_MEMORY: usize = 256;

    /// The default `max_batch`: 64 inputs per append, the default `channel_capacity` (a group
    /// takes what waits in the channel). On the bench disk 64 records per `fdatasync` reach
    /// most of what larger groups do, and a group's acknowledgements wait for its whole append.
    pub const DEFAULT_MAX_BATCH: usize = 64;

    /// The default `abort_grace`: 30 s. A model call that honours its token stops within
    /// milliseconds; a streaming HTTP call that does not still ends within its own read timeout,
    /// commonly 30–60 s. Past 30 s the user who pressed stop has waited long enough, and the
    /// dropped call's late answer is ignored anyway.
    pub const DEFAULT_ABORT_GRACE: Duration = Duration::from_secs(30);

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

    /// Checks the bounds: every capacity within `1..=`[`Options::MAX_CAPACITY`].
    pub fn validate(&self) -> Result<(), InvalidOptions> {
        let within = |n: usize| (1..=Options::MAX_CAPACITY).contains(&n);
        if !within(self.channel_capacity) {
            return Err(InvalidOptions::ChannelCapacity(self.channel_capacity));
        }
        if !within(self.update_capacity) {
            return Err(InvalidOptions::UpdateCapacity(self.update_capacity));
        }
        if self.delivery_memory > Options::MAX_CAPACITY {
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
        Ok(())
    }

    /// The default options with this name.
    pub fn named(name: impl Into<String>) -> Self {
        Options {
            name: name.into(),
            ..Options::default()
        }
    }
}

impl Agent {
    /// Opens an agent on `log` with default [`Options`]. See [`open_with`](Agent::open_with).
    pub async fn open<H: Host, L: DurableLog>(
        host: H,
        log: L,
    ) -> Result<(Agent, Recovery), OpenError> {
        Agent::open_with(Options::default(), host, log).await
    }

    /// Opens an agent on `log`, which may be empty (a new session) or hold a session to resume:
    /// reads it back record by record, audits and restores it (S46–S48: items park, nothing
    /// wakes), and only once all that succeeded repairs it (drops a torn tail, closes an
    /// interrupted turn, S50): a log that is rejected is left as it was. Then spawns the driver
    /// task on the current tokio runtime. Many agents share one runtime. Fails with
    /// [`OpenError::Options`] for options out of bounds.
    pub async fn open_with<H: Host, L: DurableLog>(
        options: Options,
        host: H,
        mut log: L,
    ) -> Result<(Agent, Recovery), OpenError> {
        options.validate()?;
        let span = tracing::info_span!("agent", name = %options.name);
        // Ids come from callers: key the core's id indexes with a random seed per agent (HashDoS).
        let seed =
            std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), 0u8);
        let config = Config::new()
            .with_delivery_memory(options.delivery_memory)
            .with_hash_seed(seed);
        // S55: the bound is the core's; `validate` refused 0.
        let config = match NonZeroUsize::new(options.max_pending) {
            Some(limit) => config.with_max_pending(limit),
            None => config,
        };
        let mut restorer = Restorer::with_config(config, 0);
        let mut invalid: Option<InvalidLog> = None;
        let read = log
            .read_back(&mut |record| match restorer.push_json(&record.event) {
                Ok(()) => ControlFlow::Continue(()),
                Err(error) => {
                    invalid = Some(error);
                    ControlFlow::Break(())
                }
            })
            .instrument(span.clone())
            .await?;
        // Records are numbered from line 1 with no gaps, so the event at `index` is on line
        // `index + 1` (a closer's index is one past the last record).
        let corrupt = |error: InvalidLog| RepairError {
            line: error.index + 1,
            error,
        };
        if let Some(error) = invalid {
            return Err(corrupt(error).into());
        }
        let interrupted = restorer.position().open_turn();
        let closers = restorer.position().closers();
        for closer in &closers {
            restorer.push_event(closer).map_err(corrupt)?;
        }
        let machine = restorer.finish().map_err(corrupt)?;
        // Accepted: only now is anything written.
        log.repair_tail().await?;
        if !closers.is_empty() {
            let closers: Vec<Entry> = closers.iter().cloned().map(Entry::Machine).collect();
            log.append(&closers).await?;
        }
        if read.torn.is_some() || read.unterminated || !closers.is_empty() {
            log.sync().await?;
        }
        let recovery = Recovery {
            records: read.records,
            torn_tail: read.torn,
            interrupted_turn: interrupted,
            closers: closers.len(),
            last_turn: machine.last_turn(),
            pending_next_turn: machine.pending(Target::NextTurn).len(),
            pending_next_step: machine.pending(Target::NextStep).len(),
        };
        tracing::info!(parent: &span, ?recovery, "opened");
        let (tx, rx) = mpsc::channel(options.channel_capacity);
        let (state_tx, state_rx) = watch::channel(State {
            status: machine.status(),
            quiescent: machine.is_quiescent(),
            last_turn: machine.last_turn(),
            ended: None,
            final_sync: None,
        });
        let updates = Arc::new(Updates::new(options.update_capacity));
        let owners_gone = CancellationToken::new();
        let agent = Agent {
            inner: Arc::new(Inner {
                tx,
                state: state_rx,
                updates: Arc::clone(&updates),
                limits: Limits::new(&options),
            }),
            _owner: Some(Arc::new(Owner(owners_gone.clone()))),
        };
        let driver = Driver::new(
            machine,
            log,
            Arc::new(host),
            rx,
            Arc::downgrade(&agent.inner),
            owners_gone,
            state_tx,
            updates,
            span.clone(),
            &options,
        );
        tokio::spawn(driver.run().instrument(span));
        Ok((agent, recovery))
    }

    /// A handle for a host call: it does not keep the agent open.
    pub(crate) fn for_host(inner: Arc<Inner>) -> Agent {
        Agent {
            inner,
            _owner: None,
        }
    }

    /// `send(message, target, wakeup)` (S16).
    pub async fn send(
        &self,
        message: impl Into<SharedMessage>,
        target: Target,
        wakeup: bool,
    ) -> Result<(), AgentError> {
        self.guarded_send(message.into(), target, wakeup, None)
            .await
    }

    /// `send(message, target, wakeup, expect)` (S54): accepted only while the guard holds —
    /// [`Expect::Turn`]`(n)` while turn `n` runs and was not stopped, [`Expect::IdleAfter`]`(n)`
    /// while idle with no turn since `n` — else it fails [`AgentError::TurnMismatch`] and
    /// changes nothing. The guard is checked after the identity checks, so the retry of a
    /// guarded send that was accepted fails `AlreadyPending`/[`AlreadyDelivered`]
    /// ([`was_delivered`](AgentError::was_delivered)), never `TurnMismatch`.
    ///
    /// [`AlreadyDelivered`]: AgentError::AlreadyDelivered
    pub async fn send_expecting(
        &self,
        message: impl Into<SharedMessage>,
        target: Target,
        wakeup: bool,
        expect: Expect,
    ) -> Result<(), AgentError> {
        self.guarded_send(message.into(), target, wakeup, Some(expect))
            .await
    }

    /// A steer meant for turn `turn` (S54): `send(message, next-step, true, expect: {turn})`.
    /// It joins that turn at its next step boundary, or fails [`AgentError::TurnMismatch`] once
    /// turn `turn` has ended or was stopped, instead of joining the next turn (or becoming a
    /// turn of its own after a stop, S18). Name the turn the caller saw
    /// ([`last_turn`](Agent::last_turn) while [`status`](Agent::status) is running, or the
    /// `turn` of a host context or of an `agent/inbox/claimed` update).
    pub async fn steer_expecting(
        &self,
        turn: u64,
        message: impl Into<SharedMessage>,
    ) -> Result<(), AgentError> {
        self.send_expecting(message, Target::NextStep, true, Expect::Turn(turn))
            .await
    }

    /// A follow-up sent only if no turn started since turn `turn` (S54): `send(message,
    /// next-turn, true, expect: {idleAfter: turn})`. It opens turn `turn + 1`, or fails
    /// [`AgentError::TurnMismatch`] if the agent is not idle (running, or in maintenance) or a
    /// turn started since (`turn` is not [`last_turn`](Agent::last_turn) any more).
    pub async fn followup_if_idle_after(
        &self,
        turn: u64,
        message: impl Into<SharedMessage>,
    ) -> Result<(), AgentError> {
        self.send_expecting(message, Target::NextTurn, true, Expect::IdleAfter(turn))
            .await
    }

    /// Every send: the handle's checks, then the core decides.
    async fn guarded_send(
        &self,
        message: SharedMessage,
        target: Target,
        wakeup: bool,
        expect: Option<Expect>,
    ) -> Result<(), AgentError> {
        check_message(&message)?;
        self.inner.limits.check_message(&message)?;
        self.input(Input::Send {
            message,
            target,
            wakeup,
            expect,
        })
        .await
        .map(drop)
    }

    /// A [`Preset`] delivery: `send(message, preset.target(), preset.wakeup())`.
    pub async fn deliver(
        &self,
        preset: Preset,
        message: impl Into<SharedMessage>,
    ) -> Result<(), AgentError> {
        self.send(message, preset.target(), preset.wakeup()).await
    }

    /// A follow-up: a turn of its own (S22).
    pub async fn followup(&self, message: impl Into<SharedMessage>) -> Result<(), AgentError> {
        self.deliver(Preset::Followup, message).await
    }

    /// Steering: joins the running turn at its next step boundary.
    pub async fn steer(&self, message: impl Into<SharedMessage>) -> Result<(), AgentError> {
        self.deliver(Preset::Steer, message).await
    }

    /// Context that rides along with the next step; never wakes (S20).
    pub async fn inject(&self, message: impl Into<SharedMessage>) -> Result<(), AgentError> {
        self.deliver(Preset::Inject, message).await
    }

    /// Removes a pending message (S15); `false` if it was not pending.
    pub async fn remove(&self, id: impl Into<MessageId>) -> Result<bool, AgentError> {
        let id = id.into();
        self.inner.limits.check_id(&id)?;
        self.input(Input::Remove(id)).await
    }

    /// Replaces a pending message in place (S15); `false` if `id` was not pending.
    pub async fn replace(
        &self,
        id: impl Into<MessageId>,
        message: impl Into<SharedMessage>,
    ) -> Result<bool, AgentError> {
        let id = id.into();
        let message = message.into();
        check_message(&message)?;
        self.inner.limits.check_id(&id)?;
        self.inner.limits.check_message(&message)?;
        self.input(Input::Replace { id, message }).await
    }

    /// Puts a quiet message first in `target` (S15).
    pub async fn prepend(
        &self,
        target: Target,
        message: impl Into<SharedMessage>,
    ) -> Result<(), AgentError> {
        let message = message.into();
        check_message(&message)?;
        self.inner.limits.check_message(&message)?;
        self.input(Input::Prepend { target, message })
            .await
            .map(drop)
    }

    /// Discards everything pending (S15).
    pub async fn clear(&self) -> Result<(), AgentError> {
        self.input(Input::Clear {}).await.map(drop)
    }

    /// `cancel(cause, { keepInbox })` (S39). Resolves once the cancel is durable; the running
    /// activity's token is tripped by then, and the turn ends when the host's call returns.
    pub async fn cancel(&self, cause: CancelCause, keep_inbox: bool) -> Result<(), AgentError> {
        self.input(Input::Cancel { cause, keep_inbox })
            .await
            .map(drop)
    }

    /// Runs a maintenance job (S43): only while idle (else [`Rejected::Busy`]). The job runs in
    /// a task of its own with a fresh cancellation token (a `cancel` trips it); when it returns
    /// the maintenance ends and a wake latched meanwhile replays (S25). Resolves with the job's
    /// value once the end is durable. Dropping this future does not stop the job.
    pub async fn run_maintenance<F, Fut, T>(&self, job: F) -> Result<T, AgentError>
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let (value_tx, value_rx) = oneshot::channel();
        let job: Job = Box::new(move |token| {
            Box::pin(async move {
                let _ = value_tx.send(job(token).await);
            })
        });
        self.request(|reply| Command::Maintenance { job, reply })
            .await??;
        value_rx.await.map_err(|_| AgentError::JobPanicked)
    }

    /// Resolves once the agent is quiescent (S44): no turn and no maintenance running. Fails if
    /// the agent stopped or was closed first; succeeds if it was disposed. Once a call has
    /// returned the error that stopped the agent ([`AgentError::Persistence`],
    /// [`AgentError::Indeterminate`]) this fails with [`AgentError::Stopped`] at once. Never
    /// await it inside a host call or a maintenance job: the activity it waits for includes
    /// that call.
    pub async fn when_idle(&self) -> Result<(), AgentError> {
        let mut state = self.inner.state.clone();
        let ended = match state.wait_for(|s| s.quiescent || s.ended.is_some()).await {
            Ok(s) => s.ended.clone(),
            Err(_) => Some(Ending::Closed),
        };
        match ended {
            None | Some(Ending::Disposed) => Ok(()),
            Some(ending) => Err(ending.error()),
        }
    }

    /// Live updates from now on: every durable record as it is appended and every notification,
    /// in the core's order, then [`Update::Ended`]. A subscriber that falls more than
    /// [`Options::update_capacity`] behind lags (it skips).
    pub fn subscribe(&self) -> broadcast::Receiver<Update> {
        self.inner.updates.subscribe()
    }

    /// Disposes the agent (S45): cancels everything, waits for the running host call to return,
    /// and resolves once `disposed` was emitted, the log synced and released, and the driver
    /// ended. Fails with [`AgentError::FinalSync`] if that last sync failed. Never await it
    /// inside a host call (it waits for that call to return); cancel from there instead.
    pub async fn dispose(&self) -> Result<(), AgentError> {
        self.input(Input::Dispose {}).await?;
        let (ending, final_sync) = self.wait_ended().await;
        match (ending, final_sync) {
            (Ending::Disposed, None) => Ok(()),
            (Ending::Disposed, Some(error)) => Err(AgentError::FinalSync(error)),
            (ending, _) => Err(ending.error()),
        }
    }

    /// Stops the driver now, without disposing: the running host call's token is tripped and
    /// its answer ignored, the log is synced and released (its lock too), and the driver ends.
    /// A turn left open is closed `interrupted` when the log is opened again, as after a crash.
    /// Resolves once the driver has ended; fails with [`AgentError::FinalSync`] if the final sync
    /// failed (also when the driver had ended before, for another reason).
    pub async fn close(&self) -> Result<(), AgentError> {
        let (reply, done) = oneshot::channel();
        if self.inner.tx.send(Command::Close { reply }).await.is_ok() {
            let _ = done.await;
        }
        match self.wait_ended().await {
            (_, Some(error)) => Err(AgentError::FinalSync(error)),
            (_, None) => Ok(()),
        }
    }

    /// Resolves with how the driver ended, once it has ended and released its log (the lock of a
    /// [`FileLog`](crate::FileLog) included), so the same log can be opened again. Holds no
    /// handle: get it, drop every [`Agent`], and await it.
    pub fn finished(&self) -> impl Future<Output = Ending> + Send + 'static {
        let mut state = self.inner.state.clone();
        async move {
            match state.wait_for(|s| s.ended.is_some()).await {
                Ok(s) => s.ended.clone().unwrap_or(Ending::Closed),
                Err(_) => Ending::Closed,
            }
        }
    }

    /// The public status (S23). `Idle` once the driver has ended: nothing runs any more.
    pub fn status(&self) -> Status {
        self.inner.state.borrow().status
    }

    /// The number of the last turn opened (0 before the first, S27): the running turn while
    /// [`status`](Agent::status) is running, as of the last input made durable. It is what a
    /// guarded send names ([`steer_expecting`](Agent::steer_expecting),
    /// [`followup_if_idle_after`](Agent::followup_if_idle_after)); the core checks the guard
    /// against its own state when the send arrives, so a turn that moved on meanwhile is
    /// refused, not guessed (S54).
    pub fn last_turn(&self) -> u64 {
        self.inner.state.borrow().last_turn
    }

    /// How the driver ended, if it did. `Some(Stopped(..))` as soon as a call has returned the
    /// error that stopped the agent: the driver ends (and releases its log) before it tells the
    /// calls of a failed append.
    pub fn ending(&self) -> Option<Ending> {
        self.inner.state.borrow().ended.clone()
    }

    /// A snapshot of both pending lists.
    pub async fn pending(&self) -> Result<PendingSnapshot, AgentError> {
        let (reply, snapshot) = oneshot::channel();
        if self
            .inner
            .tx
            .send(Command::Pending { reply })
            .await
            .is_err()
        {
            return Err(self.ended_error());
        }
        snapshot.await.map_err(|_| self.ended_error())
    }

    pub(crate) async fn record(
        &self,
        turn: u64,
        step: u64,
        events: Vec<HostEvent>,
    ) -> Result<(), AgentError> {
        for event in &events {
            check_data(event.data())?;
        }
        self.request(|reply| Command::Record {
            turn,
            step,
            events,
            reply,
        })
        .await?
    }

    /// A caller's input; the host's answers never come through here (the driver feeds them).
    async fn input(&self, input: Input) -> Result<bool, AgentError> {
        self.request(|reply| Command::Input { input, reply })
            .await?
    }

    /// Sends a command and waits for its reply; a driver that is gone answers with how it ended.
    async fn request<T>(
        &self,
        command: impl FnOnce(Reply<T>) -> Command,
    ) -> Result<Result<T, AgentError>, AgentError> {
        let (reply, answer) = oneshot::channel();
        if self.inner.tx.send(command(reply)).await.is_err() {
            return Err(self.ended_error());
        }
        answer.await.map_err(|_| self.ended_error())
    }

    fn ended_error(&self) -> AgentError {
        match &self.inner.state.borrow().ended {
            Some(ending) => ending.error(),
            None => AgentError::Closed,
        }
    }

    async fn wait_ended(&self) -> (Ending, Option<LogError>) {
        let mut state = self.inner.state.clone();
        let ended = match state.wait_for(|s| s.ended.is_some()).await {
            Ok(s) => (
                s.ended.clone().unwrap_or(Ending::Closed),
                s.final_sync.clone(),
            ),
            Err(_) => (Ending::Closed, None),
        };
        ended
    }
}

pub(crate) fn ending_error(ending: &Ending) -> AgentError {
    ending.error()
}
