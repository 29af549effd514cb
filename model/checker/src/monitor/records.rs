//! SPEC §13 watched from the outputs alone: the monitor's own fate records (S58, I15), the claims
//! a crash would cut off and their redelivery (S59, I16), and `resume` (S57).
//!
//! The records are the monitor's, not the core's nor the spec's: each id the monitor's window
//! holds (I11's window of the last `W` ids that left, `memory.rs`) carries how it left (a
//! `claimed` notification of turn `t`, or a `discarded` one), the first step of that turn whose
//! `user/message` carried it, and the kind of that turn's `turn/end`. A forgotten id has no
//! record (`unknown`), like an id never seen. In every state [`Monitor::check_recovery`] compares
//! them with [`Machine::fate`], then restores the durable log so far repaired with `A = 1`
//! ([`Restorer::repair`]) and checks I16 (what the interrupted turn claimed after its last
//! `step/start` is pending again, at the front, unless spent or pending at the log's end) and
//! I15's replay half (every id's restored fate is the live one, but for what the repair changes).

use coxswain_core::{
    Event, Fate, Machine, MessageId, SharedMessage, Target, TurnEndKind, TurnEndReason,
};

use super::outputs::Tally;
use super::properties::{fail, Check, Fact, Invariant, Violation};
use super::{Monitor, Tracked};

/// The redelivery allowance `A` the model's crash repair uses and every state is checked with
/// (S59; I16 is stated for `A ≥ 1`).
pub const REDELIVERY: u64 = 1;

/// How an id left the lists, as the notifications showed it (S58).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Left {
    /// A `discarded` notification: an ordinary removal (S12).
    Discarded,
    /// A `claimed` notification of this turn (S28).
    Claimed(u64),
}

/// The monitor's fate record of a held id (S58).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Record {
    left: Left,
    /// The first step of the claiming turn whose `user/message` carried the id.
    step: Option<u64>,
    /// The kind of the claiming turn's `turn/end`.
    end: Option<TurnEndKind>,
}

impl Record {
    pub(super) fn new(left: Left) -> Self {
        Record {
            left,
            step: None,
            end: None,
        }
    }

    /// S58: a `user/message` of step `step` of turn `turn` carried this id.
    pub(super) fn entered(&mut self, turn: u64, step: u64) {
        if self.left == Left::Claimed(turn) && self.step.is_none() {
            self.step = Some(step);
        }
    }

    /// S58: turn `turn` ended with `kind`. Returns whether this record got its `end` and
    /// has its step.
    pub(super) fn ended(&mut self, turn: u64, kind: TurnEndKind) -> bool {
        if self.left == Left::Claimed(turn) && self.end.is_none() {
            self.end = Some(kind);
            return self.step.is_some();
        }
        false
    }

    /// Claimed by turn `turn`, and a step of it entered the id.
    pub(super) fn stepped_in(&self, turn: u64) -> bool {
        self.left == Left::Claimed(turn) && self.step.is_some()
    }

    /// The record as S58's fate.
    fn fate(&self) -> Fate {
        match self.left {
            Left::Discarded => Fate::Discarded,
            Left::Claimed(turn) => Fate::Claimed {
                turn,
                step: self.step,
                end: self.end,
            },
        }
    }
}

/// A claim of the open turn since its last `step/start` (or its `turn/start`): what crash repair
/// may redeliver (S59).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Unseen {
    target: Target,
    message: SharedMessage,
    /// Waking when it was claimed (S19).
    waking: bool,
}

impl Monitor {
    /// S59: a claim by the open turn; `tracked` is what the monitor knew of it (its list).
    pub(super) fn note_unseen_claim(&mut self, message: &SharedMessage, tracked: Tracked) {
        self.unseen.push(Unseen {
            target: tracked.target,
            message: message.clone(),
            waking: tracked.waking,
        });
    }

    /// The records' side of a durable event (S58, S59): `turn/start`, `step/start` and `turn/end`
    /// end the window of unseen claims; a `user/message` inside a step gives a record claimed by
    /// that turn its first step; a `turn/end` gives the records its turn claimed their `end`.
    /// Called after the auditor read the event, so its position is the log's after it.
    pub(super) fn observe_record_event(&mut self, event: &Event) {
        match event {
            Event::TurnStart { .. } | Event::StepStart { .. } => self.unseen.clear(),
            Event::UserMessage(message) => {
                let position = self.auditor.position();
                if let (Some(turn), Some(step)) = (position.open_turn(), position.open_step()) {
                    self.window.record_step(message.id(), turn, step);
                }
            }
            Event::TurnEnd { turn, reason } => {
                self.unseen.clear();
                if self.window.record_end(*turn, reason.end_kind()) {
                    self.note(Fact::FateSteppedAndEnded);
                }
            }
            _ => {}
        }
    }

    /// How many times crash repair redelivered `id` so far on this path (S59's count).
    fn redeliveries(&self, id: &MessageId) -> u64 {
        self.redelivered
            .iter()
            .find(|(held, _)| held == id)
            .map_or(0, |(_, count)| *count)
    }

    /// The fate the outputs so far give `id` (S58): pending in the list the log leaves it in,
    /// else the record the window holds, else `unknown`.
    pub fn expected_fate(&self, id: &MessageId) -> Fate {
        if self.live.contains_key(id) {
            let restorer = self.auditor.restorer();
            for target in [Target::NextTurn, Target::NextStep] {
                if restorer.pending(target).any(|(m, _)| m.id() == id) {
                    return Fate::Pending { target };
                }
            }
        }
        self.window.record(id).map_or(Fate::Unknown, Record::fate)
    }

    /// What crash repair with allowance `allowance` must re-insert now (S59), per list in order:
    /// the open turn's unseen claims, in claim order, skipping an id pending at the log's end,
    /// one already re-inserted, and one redelivered `allowance` times already. The second value
    /// says whether one was skipped for its spent allowance.
    pub(super) fn expected_redelivery(
        &self,
        allowance: u64,
    ) -> (Vec<(Target, MessageId, bool)>, bool) {
        let mut again: Vec<(Target, MessageId, bool)> = Vec::new();
        let mut spent = false;
        if self.auditor.position().open_turn().is_none() {
            return (again, spent);
        }
        for unseen in &self.unseen {
            let id = unseen.message.id();
            if self.live.contains_key(id) || again.iter().any(|(_, other, _)| other == id) {
                continue;
            }
            if self.redeliveries(id) >= allowance {
                spent = true;
                continue;
            }
            again.push((unseen.target, id.clone(), unseen.waking));
        }
        (again, spent)
    }

    /// I15 and I16 in one state: the machine's fates are the records' (`ids`: every id the
    /// environment uses, besides those the monitor knows), and the log so far, repaired with
    /// `A = 1` and restored, gives the lists and fates S59 and S58 say. Records the first
    /// violation.
    pub fn check_recovery(&mut self, machine: &Machine, ids: &[MessageId]) -> Check {
        if let Some(violation) = &self.violation {
            return Err(violation.clone());
        }
        let checked = self.recovery(machine, ids);
        if let Err(violation) = &checked {
            self.violation = Some(violation.clone());
        }
        checked
    }

    fn recovery(&mut self, machine: &Machine, ids: &[MessageId]) -> Check {
        let ids = self.known_ids(ids);
        // I15: the live fates.
        for id in &ids {
            let (fate, expected) = (machine.fate(id), self.expected_fate(id));
            if fate != expected {
                return fail(
                    Invariant::I15Fate,
                    format!(
                        "fate({id}) is {} but the outputs give {}",
                        json(fate),
                        json(expected)
                    ),
                );
            }
        }
        // I16 and I15's replay half: the log so far, repaired with A = 1 and restored.
        let mut restorer = self.auditor.restorer().clone();
        let repair = restorer.repair(REDELIVERY);
        for event in &repair {
            if let Err(error) = restorer.push_event(event) {
                return fail(
                    Invariant::I16NothingUnseenLost,
                    format!("the repaired log does not restore: {error}"),
                );
            }
        }
        let restored = match restorer.finish() {
            Ok(restored) => restored,
            Err(error) => {
                return fail(
                    Invariant::I16NothingUnseenLost,
                    format!("the repaired log does not restore: {error}"),
                )
            }
        };
        let (again, _) = self.expected_redelivery(REDELIVERY);
        check_redelivered_lists(machine, &restored, &again)?;
        // S53 (I11): the restored memory holds the window, but for what the repair made pending.
        let window = self
            .window
            .ids()
            .filter(|id| !again.iter().any(|(_, other, _)| other == *id));
        if !restored.delivered().eq(window) {
            let held: Vec<&MessageId> = restored.delivered().collect();
            let window: Vec<&MessageId> = self.window.ids().collect();
            return fail(
                Invariant::I11Once,
                format!(
                    "restored from the log repaired with A = {REDELIVERY}, the delivery memory \
                     holds {held:?}, the last ids that left are {window:?}"
                ),
            );
        }
        let open = self.auditor.position().open_turn();
        for id in &ids {
            let expected = match again.iter().find(|(_, other, _)| other == id) {
                Some((target, _, _)) => Fate::Pending { target: *target },
                None => interrupted(self.expected_fate(id), open),
            };
            let fate = restored.fate(id);
            if fate != expected {
                return fail(
                    Invariant::I15Fate,
                    format!(
                        "restored from the log repaired with A = {REDELIVERY}, fate({id}) is {} \
                         but should be {}",
                        json(fate),
                        json(expected)
                    ),
                );
            }
        }
        Ok(())
    }

    /// `ids`, then every id the monitor knows (pending, held, unseen) not among them.
    fn known_ids(&self, ids: &[MessageId]) -> Vec<MessageId> {
        let mut all: Vec<MessageId> = ids.to_vec();
        let known = self
            .live
            .keys()
            .chain(self.window.ids())
            .chain(self.unseen.iter().map(|u| u.message.id()));
        for id in known {
            if !all.contains(id) {
                all.push(id.clone());
            }
        }
        all
    }

    /// Crash repair with redelivery (S50, S59) as the monitor follows it: the repair's events
    /// (already read by the auditor) moved these ids back into the lists. Each is parked (S48),
    /// leaves the window with its record (S51, S58) and counts one more redelivery (S59).
    pub(super) fn note_repair(&mut self, repair: &[Event]) {
        for event in repair {
            let Event::Spliced(splice) = event else {
                continue;
            };
            if splice.redelivery.is_none() {
                continue;
            }
            self.note(Fact::Redelivered);
            for message in &splice.inserted {
                let id = message.id().clone();
                self.window.release(&id);
                self.live.insert(
                    id.clone(),
                    Tracked {
                        waking: splice.wakeup,
                        excused: true,
                        during_step: false,
                        target: splice.target,
                    },
                );
                match self.redelivered.iter_mut().find(|(held, _)| *held == id) {
                    Some((_, count)) => *count += 1,
                    None => self.redelivered.push((id, 1)),
                }
            }
        }
    }

    /// S57: a `resume` while idle with waking work wakes exactly as a waking send from idle:
    /// `status running`, `turn/start`, the claim, the pre-step request.
    pub(super) fn check_resume_wakes(&mut self, tally: &Tally) -> Check {
        if tally.statuses != [coxswain_core::Status::Running]
            || tally.turn_starts != 1
            || tally.pre_steps != 1
        {
            return fail(
                Invariant::S57Resume,
                format!(
                    "resume while idle with waking work did not wake (statuses {:?}, {} \
                     turn/start, {} pre-step)",
                    tally.statuses, tally.turn_starts, tally.pre_steps
                ),
            );
        }
        self.note(Fact::ResumeWoke);
        Ok(())
    }

    /// S57: any other `resume` emits nothing and changes nothing: no latch, no list change, no
    /// turn for quiet items alone.
    pub(super) fn check_resume_changes_nothing(
        &self,
        before: &Machine,
        after: &Machine,
        outputs_len: usize,
    ) -> Check {
        if outputs_len != 0 || before.behaviour() != after.behaviour() {
            return fail(
                Invariant::S57Resume,
                format!(
                    "resume with nothing to wake emitted {outputs_len} outputs or changed the \
                     machine (wake latch {} -> {})",
                    before.is_wake_latched(),
                    after.is_wake_latched()
                ),
            );
        }
        Ok(())
    }
}

/// S58, S50: what the repair's closers do to a fate: a record claimed by the interrupted turn
/// `open` that has no `end` gets `interrupted`.
fn interrupted(fate: Fate, open: Option<u64>) -> Fate {
    match fate {
        Fate::Claimed {
            turn,
            step,
            end: None,
        } if Some(turn) == open => Fate::Claimed {
            turn,
            step,
            end: Some(TurnEndReason::Interrupted.end_kind()),
        },
        other => other,
    }
}

/// I16: each restored list is the redelivered items of that list (front, claim order, waking as
/// claimed) followed by the live list, item by item with its waking flag.
fn check_redelivered_lists(
    live: &Machine,
    restored: &Machine,
    again: &[(Target, MessageId, bool)],
) -> Result<(), Violation> {
    for target in [Target::NextTurn, Target::NextStep] {
        let expected: Vec<(MessageId, bool)> = again
            .iter()
            .filter(|(t, _, _)| *t == target)
            .map(|(_, id, waking)| (id.clone(), *waking))
            .chain(
                live.pending(target)
                    .map(|p| (p.message().id().clone(), p.is_waking())),
            )
            .collect();
        let got: Vec<(MessageId, bool)> = restored
            .pending(target)
            .map(|p| (p.message().id().clone(), p.is_waking()))
            .collect();
        if got != expected {
            return fail(
                Invariant::I16NothingUnseenLost,
                format!(
                    "repaired with A = {REDELIVERY} and restored, {} is {} but should be {}",
                    target.as_str(),
                    pairs(&got),
                    pairs(&expected)
                ),
            );
        }
    }
    Ok(())
}

fn pairs(items: &[(MessageId, bool)]) -> String {
    let items: Vec<String> = items
        .iter()
        .map(|(id, waking)| format!("{id}{}", if *waking { "*" } else { "" }))
        .collect();
    format!("[{}]", items.join(", "))
}

fn json(fate: Fate) -> String {
    fate.to_json().to_string()
}

impl Monitor {
    /// The messages the open turn claimed that an earlier step of it entered (their records
    /// have a `step`), oldest first: what a host entering them again would resend (S29).
    pub fn entered_claims(&self) -> Vec<SharedMessage> {
        let Some(turn) = self.auditor.position().open_turn() else {
            return Vec::new();
        };
        self.window.stepped_claims(turn)
    }

    /// Reports a violation the model found outside the monitor's own walk (a restore of a log
    /// the model did not write, I15); the first one is kept.
    pub(crate) fn report(&mut self, invariant: Invariant, detail: String) {
        if self.violation.is_none() {
            self.violation = Some(Violation { invariant, detail });
        }
    }
}

impl Monitor {
    /// The ids crash repair redelivered on this path, in the order of their first redelivery
    /// (symmetry reduction's canonical walk ends with them).
    pub fn redelivered_ids(&self) -> impl Iterator<Item = &MessageId> + '_ {
        self.redelivered.iter().map(|(id, _)| id)
    }
}
