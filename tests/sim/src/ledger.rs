//! What every client was told: for each message id minted by the simulation, whether its
//! delivery was acknowledged, reported failed, or left unknown (an indeterminate append, or a
//! call cut short by a crash). The checker holds the log to it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use coxswain_tokio::AgentError;

/// What a delivery's caller learned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Sent, no answer yet (at a crash: unknown).
    InFlight,
    /// `Ok`: the message must be in the log after every later restore.
    Acked,
    /// An error that promises nothing was written: the message must never be in the log.
    Failed,
    /// [`AgentError::Indeterminate`]: may or may not be in the log; nothing is checked.
    Unknown,
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    outcomes: BTreeMap<String, Outcome>,
    /// Every answer, in the order it came (the outcome digest reads it).
    trace: Vec<String>,
    /// Failed and unknown deliveries by error variant.
    reasons: BTreeMap<String, u64>,
    /// Deliveries failed by a failed append ([`AgentError::Persistence`]) in this life that no
    /// later delivery of the same life has been acknowledged after yet.
    unsurvived: u64,
    /// Failed appends the agent survived: a later delivery of the same life was acknowledged.
    survived: u64,
}

/// The ledger of one seed, shared by its clients and its host.
#[derive(Clone, Debug, Default)]
pub struct Ledger(Arc<Mutex<State>>);

/// How an answer counts: only `Indeterminate` is unknown; every other error promises the input
/// was not written (refused before the core, refused by it, its append cut back, or never fed
/// because the agent had ended).
pub fn classify<T>(result: &Result<T, AgentError>) -> Outcome {
    match result {
        Ok(_) => Outcome::Acked,
        Err(AgentError::Indeterminate(_)) => Outcome::Unknown,
        Err(_) => Outcome::Failed,
    }
}

impl Ledger {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A fresh id `{prefix}-{n}`, in flight.
    pub fn mint(&self, prefix: &str) -> String {
        let mut state = self.lock();
        state.next += 1;
        let id = format!("{prefix}-{}", state.next);
        state.outcomes.insert(id.clone(), Outcome::InFlight);
        id
    }

    /// Records the answer to the delivery of `id`.
    pub fn settle<T>(&self, id: &str, result: &Result<T, AgentError>) {
        self.set(id, classify(result), result.as_ref().err());
    }

    /// Records the answer to a `replace` whose new message is `id`: `Ok(false)` (nothing to
    /// replace) wrote nothing.
    pub fn settle_replace(&self, id: &str, result: &Result<bool, AgentError>) {
        let outcome = match result {
            Ok(false) => Outcome::Failed,
            other => classify(other),
        };
        self.set(id, outcome, result.as_ref().err());
    }

    fn set(&self, id: &str, outcome: Outcome, error: Option<&AgentError>) {
        let persistence = matches!(error, Some(AgentError::Persistence(_)));
        let error = error.map(|error| (variant(error), error.to_string()));
        self.record(id, outcome, error, persistence);
    }

    /// Records the answer to the delivery of `id` in another driver's words: its outcome, and
    /// for an error its kind (`Persistence`, `Rejected`…) and text.
    pub fn set_outcome(&self, id: &str, outcome: Outcome, error: Option<(String, String)>) {
        let persistence = error
            .as_ref()
            .is_some_and(|(kind, _)| kind == "Persistence");
        self.record(id, outcome, error, persistence);
    }

    fn record(
        &self,
        id: &str,
        outcome: Outcome,
        error: Option<(String, String)>,
        persistence: bool,
    ) {
        let mut state = self.lock();
        if persistence {
            state.unsurvived += 1;
        } else if outcome == Outcome::Acked {
            state.survived += std::mem::take(&mut state.unsurvived);
        }
        if let Some((kind, _)) = &error {
            *state.reasons.entry(kind.clone()).or_default() += 1;
        } else if outcome == Outcome::Failed {
            *state
                .reasons
                .entry("ReplacedNothing".to_owned())
                .or_default() += 1;
        }
        let line = match error {
            Some((_, text)) => format!("{id} {outcome:?} {text}"),
            None => format!("{id} {outcome:?}"),
        };
        state.trace.push(line);
        state.outcomes.insert(id.to_owned(), outcome);
    }

    /// A new life of the agent begins (a failure of the last one was not survived by it).
    pub fn new_life(&self) {
        self.lock().unsurvived = 0;
    }

    /// Failed appends the agent survived: deliveries failed [`AgentError::Persistence`] after
    /// which a later delivery of the same life was acknowledged.
    pub fn survived(&self) -> u64 {
        self.lock().survived
    }

    /// Notes the answer of a call that delivers nothing (for the digest).
    pub fn note(&self, line: String) {
        self.lock().trace.push(line);
    }

    /// Every minted id and its outcome, by id.
    pub fn outcomes(&self) -> BTreeMap<String, Outcome> {
        self.lock().outcomes.clone()
    }

    /// How many ids were minted.
    pub fn len(&self) -> usize {
        self.lock().outcomes.len()
    }

    /// True before the first id is minted.
    pub fn is_empty(&self) -> bool {
        self.lock().outcomes.is_empty()
    }

    /// The minted ids at these indices (in id order; out of range ones left out).
    pub fn ids_at(&self, at: &[usize]) -> Vec<String> {
        let state = self.lock();
        at.iter()
            .filter_map(|&at| state.outcomes.keys().nth(at).cloned())
            .collect()
    }

    /// Failed and unknown deliveries by error variant (`Stopped`, `Full`…).
    pub fn reasons(&self) -> BTreeMap<String, u64> {
        self.lock().reasons.clone()
    }

    /// Every answer, in order.
    pub fn trace(&self) -> Vec<String> {
        self.lock().trace.clone()
    }
}

/// The name of any error's variant: its `Debug` text up to the first `(`, ` ` or `{`.
pub fn kind_of(error: &impl std::fmt::Debug) -> String {
    let debug = format!("{error:?}");
    debug.chars().take_while(|c| c.is_alphanumeric()).collect()
}

/// The name of an error's variant (its `Debug` text up to the first `(`, ` ` or `{`); a
/// rejection also names the core's reason (`Rejected(AfterDisposal)`).
fn variant(error: &AgentError) -> String {
    let name = kind_of(error);
    if let AgentError::Rejected(rejected) = error {
        let inner = format!("{rejected:?}");
        let inner: String = inner.chars().take_while(|c| c.is_alphanumeric()).collect();
        return format!("{name}({inner})");
    }
    name
}
