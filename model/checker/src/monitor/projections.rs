//! The machine's public projections against the monitor's history (I1, I2, I3, I8, I10, S49).

use coxswain_core::{Machine, MessageId, Outstanding, Status, Target};

use super::properties::{fail, Check, Invariant, Violation};
use super::{Awaited, Monitor};

/// Both pending lists, NT first.
const LISTS: [Target; 2] = [Target::NextTurn, Target::NextStep];

impl Monitor {
    /// The machine's projections against the history (I1, I2, I3, I8, I10, S49).
    pub fn check_state(&self, machine: &Machine) -> Result<(), Violation> {
        check_splice_projection(self, machine)?;
        check_pending_ids(self, machine)?;
        check_status(self, machine)?;
        check_outstanding(self, machine)?;
        check_replay_when_idle(self, machine)?;
        super::memory::check_memory(self, machine)
    }
}

/// I1: the durable splices so far reproduce both live lists, with their waking flags.
fn check_splice_projection(monitor: &Monitor, machine: &Machine) -> Check {
    let restorer = monitor.auditor.restorer();
    for target in LISTS {
        let live = machine
            .pending(target)
            .map(|p| (p.message(), p.is_waking()));
        if !live.eq(restorer.pending(target)) {
            return fail(
                Invariant::I1SpliceProjection,
                format!("the durable splices do not reproduce {}", target.as_str()),
            );
        }
    }
    Ok(())
}

/// I2: no id is pending twice; I3: the pending ids are the ones the notifications left pending.
fn check_pending_ids(monitor: &Monitor, machine: &Machine) -> Check {
    let mut ids: Vec<&MessageId> = LISTS
        .into_iter()
        .flat_map(|t| machine.pending(t).map(|p| p.message().id()))
        .collect();
    let count = ids.len();
    ids.sort();
    ids.dedup();
    if ids.len() != count {
        return fail(Invariant::I2Identity, "an id is pending twice");
    }
    if !ids.iter().copied().eq(monitor.live.keys()) {
        return fail(
            Invariant::I3Conservation,
            format!(
                "pending {ids:?} but the notifications leave {:?} pending",
                monitor.live.keys().collect::<Vec<_>>()
            ),
        );
    }
    Ok(())
}

/// I8: `status()` is the last status notification (idle before the first).
fn check_status(monitor: &Monitor, machine: &Machine) -> Check {
    if machine.status() != monitor.status.unwrap_or(Status::Idle) {
        return fail(
            Invariant::I8Status,
            format!(
                "status() is {:?}, the last notification {:?}",
                machine.status(),
                monitor.status
            ),
        );
    }
    Ok(())
}

/// I10: `outstanding()` is the request the outputs left unanswered.
fn check_outstanding(monitor: &Monitor, machine: &Machine) -> Check {
    let outstanding = match machine.outstanding() {
        None => None,
        Some(Outstanding::PreStep { .. }) => Some("preStep"),
        Some(Outstanding::Step { .. }) => Some("step"),
        Some(Outstanding::TurnStopping { .. }) => Some("turnStopping"),
    };
    let awaited = monitor.awaited.as_ref().map(|a| match a {
        Awaited::PreStep(_) => "preStep",
        Awaited::Step => "step",
        Awaited::TurnStopping => "turnStopping",
    });
    if outstanding != awaited {
        return fail(
            Invariant::I10OneRequest,
            format!("outstanding() is {outstanding:?}, the requests say {awaited:?}"),
        );
    }
    Ok(())
}

/// S49: a quiescent, undisposed machine is outside any turn, and its `lastTurn` is the one the
/// log restores.
fn check_replay_when_idle(monitor: &Monitor, machine: &Machine) -> Check {
    if !machine.is_quiescent() || machine.is_disposed() {
        return Ok(());
    }
    if monitor.auditor.position().open_turn().is_some() {
        return fail(Invariant::S49ReplayEquivalence, "idle inside an open turn");
    }
    let restored = monitor.auditor.position().last_turn();
    if machine.last_turn() != restored {
        return fail(
            Invariant::S49ReplayEquivalence,
            format!(
                "lastTurn {} but the log restores {restored}",
                machine.last_turn()
            ),
        );
    }
    Ok(())
}
