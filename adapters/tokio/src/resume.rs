//! How an agent resumes its log: the session layer's [`Resuming`] plan, carried out on a
//! [`DurableLog`].

use std::ops::ControlFlow;

use coxswain_core::{Config, Machine, Target};
use coxswain_log::{Entry, TornTail};
use coxswain_session::Resuming;

use crate::error::OpenError;
use crate::log::DurableLog;
#[cfg(doc)]
use crate::Agent;

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

/// Reads `log` back record by record into the plan (S46–S48: items park, nothing wakes; S53),
/// and only once all of it was accepted repairs it (drops a torn tail, appends the plan's
/// closers of an interrupted turn, S50): a log that is rejected is left as it was.
pub(crate) async fn resume<L: DurableLog>(
    log: &mut L,
    config: Config,
) -> Result<(Machine, Recovery), OpenError> {
    let mut resuming = Resuming::new(config);
    let (mut invalid, mut next_seq) = (None, 1);
    let read = log
        .read_back(&mut |record| {
            next_seq = record.seq.map_or(next_seq, |seq| seq.saturating_add(1));
            match resuming.push(&record) {
                Ok(()) => ControlFlow::Continue(()),
                Err(error) => {
                    invalid = Some(error);
                    ControlFlow::Break(())
                }
            }
        })
        .await?;
    let plan = match invalid {
        Some(error) => return Err(OpenError::Corrupt(error)),
        None => resuming.finish(next_seq)?,
    };
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
        last_turn: machine.last_turn(),
        pending_next_turn: machine.pending(Target::NextTurn).len(),
        pending_next_step: machine.pending(Target::NextStep).len(),
    };
    Ok((machine, recovery))
}
