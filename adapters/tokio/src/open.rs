//! How an agent opens: its log resumed through the session layer's [`Resuming`] plan (carried
//! out on the [`DurableLog`]), then its driver task wired to a new handle and spawned.

use std::sync::{Arc, OnceLock};

use coxswain_core::{Input, Machine, Target};
use coxswain_log::{Entry, TornTail};
use coxswain_session::{ResumeOptions, Resuming};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::agent::Agent;
use crate::channel::Inner;
use crate::driver::{Driver, Links};
use crate::error::OpenError;
use crate::host::Host;
use crate::log::DurableLog;
use crate::options::Options;
use crate::updates::{State, Updates};

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
    /// Records crash repair appended: the closers (`step/end`, `turn/end`, S50), then the
    /// redelivery splices (S59), the last [`redelivered`](Recovery::redelivered) of them.
    pub closers: usize,
    /// How many of the `closers` are redelivery splices (S59): messages the interrupted turn
    /// had claimed that no model call saw, pending again (parked, S48). 0 with the default
    /// [`Options::redelivery`].
    pub redelivered: usize,
    /// The last turn number; the next turn is this + 1.
    pub last_turn: u64,
    /// Items parked in NT.
    pub pending_next_turn: usize,
    /// Items parked in NS.
    pub pending_next_step: usize,
}

/// Reads `log` back record by record into the plan (S46–S48: items park, nothing wakes; S53),
/// and only once all of it was accepted repairs it (drops a torn tail, appends the plan's
/// closers of an interrupted turn, S50, and the redelivery splices of `options`' allowance, S59):
/// a log that is rejected is left as it was.
async fn resume<L: DurableLog>(
    log: &mut L,
    options: ResumeOptions,
) -> Result<(Machine, Recovery), OpenError> {
    let mut resuming = Resuming::with_options(options);
    let read = log.read_back(&mut |record| resuming.offer(&record)).await?;
    let plan = resuming.finish_read()?;
    // Accepted: only now is anything written.
    log.repair_tail().await?;
    if !plan.closers.is_empty() {
        let closers: Vec<Entry> = plan.closers.iter().cloned().map(Entry::Machine).collect();
        log.append(&closers).await?;
    }
    if read.torn.is_some() || read.unterminated || !plan.closers.is_empty() {
        log.sync().await?;
    }
    let machine = plan.machine;
    let recovery = Recovery {
        records: read.records,
        torn_tail: read.torn,
        interrupted_turn: plan.interrupted,
        closers: plan.closers.len(),
        redelivered: plan.redelivered,
        last_turn: machine.last_turn(),
        pending_next_turn: machine.pending(Target::NextTurn).len(),
        pending_next_step: machine.pending(Target::NextStep).len(),
    };
    Ok((machine, recovery))
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
    /// reads it back into the session layer's [`Resuming`](coxswain_session::Resuming) plan
    /// (S46–S48, S53), and only once all of it was accepted repairs it (a torn tail dropped,
    /// an interrupted turn closed, S50; what it claimed unseen redelivered, S59, with
    /// [`Options::redelivery`]): a log that is rejected is left as it was. Then spawns the
    /// driver task on the current tokio runtime (many agents share one) and, with
    /// [`Options::resume_on_open`], sends `resume` (S57) first and waits until it is durable.
    /// Fails with [`OpenError::Options`] for options out of bounds (before the log is read:
    /// nothing read or written), and with [`OpenError::Resume`] if that `resume` was not
    /// persisted (the repair stays: it is what any open does).
    pub async fn open_with<H: Host, L: DurableLog>(
        options: Options,
        host: H,
        mut log: L,
    ) -> Result<(Agent, Recovery), OpenError> {
        options.validate()?;
        let resume_options = options.resume_options()?;
        let span = tracing::info_span!("agent", name = %options.name);
        let (machine, recovery) = resume(&mut log, resume_options)
            .instrument(span.clone())
            .await?;
        tracing::info!(parent: &span, ?recovery, "opened");
        let (tx, rx) = mpsc::channel(options.channel_capacity);
        let (state, state_rx) = watch::channel(State::of(&machine));
        let updates = Arc::new(Updates::new(options.update_capacity));
        let owners_gone = CancellationToken::new();
        let last = Arc::new(OnceLock::new());
        let inner = Arc::new(Inner {
            tx,
            state: state_rx,
            updates: Arc::clone(&updates),
            last: Arc::clone(&last),
        });
        let handle = Arc::downgrade(&inner);
        let links = Links {
            rx,
            handle,
            owners_gone: owners_gone.clone(),
            state,
            updates,
            last,
        };
        let driver = Driver::new(machine, &options, log, host, links);
        tokio::spawn(driver.run().instrument(span));
        let agent = Agent::owned(inner, owners_gone);
        if options.resume_on_open {
            // The first command the driver takes: its events are durable before any other
            // call runs (S57; S48 otherwise unchanged).
            if let Err(error) = agent.input(Input::Resume {}).await {
                let _ = agent.close().await; // the log released before the caller hears
                return Err(OpenError::Resume(error));
            }
        }
        Ok((agent, recovery))
    }
}
