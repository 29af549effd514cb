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
    // `0 turns`, not `0 turns ()`.
    let turns = if reasons.is_empty() {
        format!("{turns} turns")
    } else {
        format!("{turns} turns ({})", reasons.join(", "))
    };
    format!(
        "{turns}, {} steps, {} host events; messages: {} delivered, {} claimed, \
         {} discarded, {} pending; actions: {} rejected, {} skipped",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_turns_show_no_empty_parentheses() {
        let mut stats = Stats::default();
        assert_eq!(
            summary(&stats),
            "0 turns, 0 steps, 0 host events; messages: 0 delivered, 0 claimed, 0 discarded, \
             0 pending; actions: 0 rejected, 0 skipped"
        );
        stats.turns.insert("completed", 2);
        stats.turns.insert("aborted", 1);
        assert!(summary(&stats).starts_with("3 turns (1 aborted, 2 completed), 0 steps"));
    }
}
