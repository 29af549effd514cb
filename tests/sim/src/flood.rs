//! The flood: `n` deliveries against one agent from many concurrent callers, on a log that
//! keeps nothing, with a host that answers at once. What it shows: an agent's memory is bounded
//! whatever the callers do. Callers wait on the bounded channel (`channel_capacity`), the lists
//! stop at `max_pending` (further sends fail `Full`: the core's admission bound, S55), and the
//! delivery memory at `delivery_memory`; so the peak live memory of 1M sends is that of 100k.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use coxswain_core::{Message, StepAnswer};
use coxswain_log::{Entry, Record};
use coxswain_tokio::{
    Agent, AgentError, DurableLog, Host, LogError, Options, ReadBack, StepContext,
};

/// A log that counts records and keeps none (so the log is not what grows).
#[derive(Debug, Default)]
pub struct NullLog {
    next: u64,
}

impl DurableLog for NullLog {
    async fn read_back(
        &mut self,
        _visit: &mut (dyn FnMut(Record) -> ControlFlow<()> + Send),
    ) -> Result<ReadBack, LogError> {
        Ok(ReadBack::default())
    }

    async fn repair_tail(&mut self) -> Result<(), LogError> {
        Ok(())
    }

    async fn append(&mut self, batch: &[Entry]) -> Result<u64, LogError> {
        let first = self.next + 1;
        self.next += batch.len() as u64;
        Ok(first)
    }

    async fn sync(&mut self) -> Result<(), LogError> {
        Ok(())
    }
}

/// A host whose steps complete at once.
#[derive(Debug)]
pub struct Instant;

impl Host for Instant {
    async fn step(&self, _cx: StepContext) -> StepAnswer {
        StepAnswer::Completed
    }
}

/// What a flood did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Flooded {
    /// Sends acknowledged.
    pub acked: u64,
    /// Sends refused `Full` (S55).
    pub full: u64,
    /// Sends that failed otherwise.
    pub other: u64,
}

/// Floods one agent with `n` follow-ups from `callers` concurrent tasks (message ids are
/// unique), calling `sample` every 1,024 answers (to watch memory); disposes it at the end.
pub async fn flood(n: u64, callers: u64, mut sample: impl FnMut() + Send + 'static) -> Flooded {
    let Ok((agent, _)) =
        Agent::open_with(Options::named("flood"), Instant, NullLog::default()).await
    else {
        return Flooded::default();
    };
    let next = Arc::new(AtomicU64::new(0));
    let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
    let (tick_tx, mut tick_rx) = tokio::sync::mpsc::channel::<()>(1);
    let tasks: Vec<_> = (0..callers.max(1))
        .map(|_| {
            let agent = agent.clone();
            let next = Arc::clone(&next);
            let counts = Arc::clone(&counts);
            let tick = tick_tx.clone();
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let message = Message::user(format!("f{i}"), "flood");
                    let slot = match agent.followup(message).await {
                        Ok(()) => 0,
                        Err(AgentError::Full { .. }) => 1,
                        Err(_) => 2,
                    };
                    counts[slot].fetch_add(1, Ordering::Relaxed);
                    if i.is_multiple_of(1024) {
                        let _ = tick.try_send(());
                    }
                }
            })
        })
        .collect();
    drop(tick_tx);
    while tick_rx.recv().await.is_some() {
        sample();
    }
    for task in tasks {
        let _ = task.await;
    }
    sample();
    let _ = agent.dispose().await;
    Flooded {
        acked: counts[0].load(Ordering::Relaxed),
        full: counts[1].load(Ordering::Relaxed),
        other: counts[2].load(Ordering::Relaxed),
    }
}
