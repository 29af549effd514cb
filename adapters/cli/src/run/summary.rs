//! The counts a run ends with, and the summary line made of them.

use std::collections::BTreeMap;

/// Counts for the summary, from the updates (and the records the open itself appended).
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Turns by how they ended (`completed`, `max-tokens`, `interrupted`…).
    pub(crate) turns: BTreeMap<&'static str, usize>,
    pub(crate) steps: usize,
    pub(crate) host_events: usize,
    pub(crate) delivered: usize,
    pub(crate) claimed: usize,
    pub(crate) discarded: usize,
    pub(crate) pending: usize,
    /// Actions the agent refused.
    pub(crate) rejected: usize,
    /// Actions whose EVENT could no longer happen.
    pub(crate) skipped: usize,
}

/// The summary line.
pub(crate) fn summary(stats: &Stats) -> String {
    let turns: usize = stats.turns.values().sum();
    let reasons: Vec<String> = stats
        .turns
        .iter()
        .map(|(kind, n)| format!("{n} {kind}"))
        .collect();
    format!(
        "{turns} turns ({}), {} steps, {} host events; messages: {} delivered, {} claimed, \
         {} discarded, {} pending; actions: {} rejected, {} skipped",
        reasons.join(", "),
        stats.steps,
        stats.host_events,
        stats.delivered,
        stats.claimed,
        stats.discarded,
        stats.pending,
        stats.rejected,
        stats.skipped
    )
}
