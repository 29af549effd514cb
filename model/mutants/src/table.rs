//! The named mutants: each a deliberately wrong variant of one SPEC rule, written as an exact
//! text substitution in today's core source, and the checker that must catch it.
//!
//! A `from` snippet must occur exactly once in its file (the runner refuses otherwise, and the
//! crate's unit tests check it on every `cargo test`), so a change to the core that moves a
//! snippet fails loudly instead of leaving a mutant that no longer mutates anything.

use coxswain_checker::{AgentProperty, Invariant, SessionProperty, EQUIVALENCE, LIVENESS};

mod agent;

/// A model-checker property: an `always` invariant of the monitor, the `always` equivalence to
/// the executable spec, or the I9 liveness property.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Property {
    /// `always`: the monitor's invariant holds in every state.
    Always(Invariant),
    /// `always`: the core and the spec agree on every action ([`EQUIVALENCE`]).
    Equivalence,
    /// `eventually`: I9 liveness ([`LIVENESS`]).
    Liveness,
    /// `always`: a property of the session layer's model ([`coxswain_checker::check_session`]).
    Session(SessionProperty),
    /// `always`: a property of the agent loop's model ([`coxswain_checker::check_agent`]).
    Agent(AgentProperty),
}

impl Property {
    /// The property's name as [`coxswain_checker::check`] reports it.
    pub fn name(self) -> &'static str {
        match self {
            Property::Always(invariant) => invariant.name(),
            Property::Equivalence => EQUIVALENCE,
            Property::Liveness => LIVENESS,
            Property::Session(property) => property.name(),
            Property::Agent(property) => property.name(),
        }
    }
}

/// One source mutant of the core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mutant {
    /// Its name (the old `SeededBug` variant's).
    pub name: &'static str,
    /// The SPEC rule it breaks.
    pub rule: &'static str,
    /// What the wrong variant does.
    pub wrong: &'static str,
    /// The file it changes, relative to the workspace root (always under `core/machine/src/`).
    pub file: &'static str,
    /// Today's text; must occur exactly once in `file`.
    pub from: &'static str,
    /// The deliberately wrong replacement.
    pub to: &'static str,
    /// The model-checker property that must fail at the CI bound.
    pub killer: Property,
    /// Whether the mutant changes what the machine emits, so that the counterexample's trace
    /// must not replay on the real, unmutated machine (`false` for a change only to the state
    /// behind a rejection, which a trace cannot show).
    pub shows_in_outputs: bool,
    /// For the property tests: the invariant the monitor alone must report; the differential
    /// comparison against the reference model alone must catch the mutant as well.
    pub proptest: Option<Invariant>,
    /// The delivery memory's capacity the model check runs with (S51; 0 for the rules of
    /// S1–S50).
    pub memory: u8,
    /// The admission bound `P` the model check runs with (S55; 0 for unbounded).
    pub max_pending: u8,
}

/// Every mutant: the core's and the session's, in the order of the old seeded bugs, then the
/// agent loop's (`table/agent.rs`).
pub const MUTANTS: [Mutant; 48] = join(CORE, agent::AGENT);

/// Two lists of mutants as one.
const fn join<const A: usize, const B: usize, const N: usize>(
    first: [Mutant; A],
    then: [Mutant; B],
) -> [Mutant; N] {
    assert!(A + B == N, "the mutant lists' lengths do not add up");
    let mut all = [UNCHANGED; N];
    let mut i = 0;
    while i < A {
        all[i] = first[i];
        i += 1;
    }
    while i < N {
        all[i] = then[i - A];
        i += 1;
    }
    all
}

/// The mutants of the core and of the session layer.
const CORE: [Mutant; 39] = [
    Mutant {
        name: "ClaimForgetsStep",
        rule: "S28",
        wrong: "a claim of two or more NS items leaves the last one out of the batch",
        file: "core/machine/src/inbox.rs",
        from: "            for item in items.drain(..) {
                let forgotten = self.left(&item, Left::Claimed(turn));
                match &mut journal {",
        to: "            for (i, item) in items.drain(..).enumerate() {
                let forgotten = self.left(&item, Left::Claimed(turn));
                if ns >= 2 && i + 1 == ns {
                    continue;
                }
                match &mut journal {",
        killer: Property::Always(Invariant::I3Conservation),
        shows_in_outputs: true,
        proptest: Some(Invariant::I3Conservation),
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "ClaimTakesTwoTurnItems",
        rule: "S28",
        wrong: "a claim at a turn boundary takes the first two NT items",
        file: "core/machine/src/inbox.rs",
        from: "if turn_boundary {
            if let Some(item) = self.next_turn.items.pop_front() {",
        to: "for _ in 0..2 * usize::from(turn_boundary) {
            if let Some(item) = self.next_turn.items.pop_front() {",
        killer: Property::Always(Invariant::I4ClaimShape),
        shows_in_outputs: true,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "KeepInboxDropsSteps",
        rule: "S39",
        wrong: "a cancel with keepInbox still discards NS",
        file: "core/machine/src/machine.rs",
        from: "                activity.clear_wake();
            }
        }",
        to: "                activity.clear_wake();
            }
        } else {
            self.inbox.clear_list(Target::NextStep, &mut self.queue);
        }",
        killer: Property::Always(Invariant::I6Cancel),
        shows_in_outputs: true,
        proptest: Some(Invariant::I6Cancel),
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "InjectWakes",
        rule: "S20",
        wrong: "a non-waking send to an idle machine wakes it",
        file: "core/machine/src/machine.rs",
        from: "if wakeup {
            self.wake();",
        to: "if wakeup || matches!(self.phase, Phase::Idle) {
            self.wake();",
        killer: Property::Always(Invariant::I7IdleInjection),
        shows_in_outputs: true,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "StatusTwice",
        rule: "S23",
        wrong: "waking from idle emits `status running` twice",
        file: "core/machine/src/machine.rs",
        from: "self.push_status(Status::Running);",
        to: "self.push_status(Status::Running);
        self.push_status(Status::Running);",
        killer: Property::Always(Invariant::I8Status),
        shows_in_outputs: true,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "MaxTokensStopsToolStep",
        rule: "S34",
        wrong: "the sticky max-tokens also decides the stop: a later tool step ends the turn",
        file: "core/machine/src/machine.rs",
        from: "if terminal && self.inbox.len(Target::NextStep) == 0 {",
        to: "if (terminal && self.inbox.len(Target::NextStep) == 0)
            || (!terminal && self.running().is_some_and(|run| run.max_tokens))
        {",
        killer: Property::Always(Invariant::S33ToolStepContinues),
        shows_in_outputs: true,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "SteerJoinsAbortedTurn",
        rule: "S18",
        wrong: "a waking send after a cancel keeps its target instead of queueing as its own turn",
        file: "core/machine/src/machine.rs",
        from: "let target = if wakeup && self.is_cancel_requested() {
            Target::NextTurn",
        to: "let target = if wakeup && self.is_cancel_requested() {
            target",
        killer: Property::Always(Invariant::S18Retarget),
        shows_in_outputs: true,
        proptest: Some(Invariant::S18Retarget),
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "SpliceStartOffByOne",
        rule: "S11",
        wrong: "the splice of an append reports `start = len + 1`",
        file: "core/machine/src/inbox.rs",
        from: "let start = self.len(target);",
        to: "let start = self.len(target) + 1;",
        killer: Property::Always(Invariant::I1SpliceProjection),
        shows_in_outputs: true,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "DuplicateInNextStep",
        rule: "S13",
        wrong: "the duplicate check ignores ids pending in NS",
        file: "core/machine/src/machine.rs",
        from: "let known = match self.inbox.pending_fingerprint(id) {",
        to: "let known = match self
            .inbox
            .pending_fingerprint(id)
            .filter(|_| matches!(self.inbox.locate(id), Some((Target::NextTurn, _))))
        {",
        killer: Property::Always(Invariant::I2Identity),
        shows_in_outputs: true,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "FailedStepNeverEnds",
        rule: "S32",
        wrong: "a failed step emits no `step/end`",
        file: "core/machine/src/machine.rs",
        from: "self.queue.event(Event::StepEnd { turn, step });",
        to: "if !matches!(answer, StepAnswer::Fail(_)) {
            self.queue.event(Event::StepEnd { turn, step });
        }",
        killer: Property::Always(Invariant::I5TurnEnclosure),
        shows_in_outputs: true,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "MaintenanceForgetsWake",
        rule: "S24",
        wrong: "a waking send during maintenance does not set the latch",
        file: "core/machine/src/machine.rs",
        from: "Phase::Maintenance(activity) => activity.latch(),",
        to: "Phase::Maintenance(_) => {}",
        killer: Property::Liveness,
        shows_in_outputs: true,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "RejectedReplaceRemoves",
        rule: "S5",
        wrong: "a replace rejected `already-pending` still removes the old message",
        file: "core/machine/src/machine.rs",
        from: "if message.id() != id {
            self.check_new_message(&message)?;
        }",
        to: "if message.id() != id && self.inbox.contains(message.id()) {
            self.inbox.remove_at(target, position, &mut Queue::default());
        }
        if message.id() != id {
            self.check_new_message(&message)?;
        }",
        killer: Property::Always(Invariant::S5Rejection),
        // The state behind the rejection changes, but nothing is emitted: its trace replays.
        shows_in_outputs: false,
        proptest: Some(Invariant::S5Rejection),
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "MemoryNeverForgets",
        rule: "S51",
        wrong: "the delivery memory keeps twice its capacity: evicted ids stay refused",
        file: "core/machine/src/memory.rs",
        from: "while held.ring.len() > held.capacity {",
        to: "while held.ring.len() > 2 * held.capacity {",
        killer: Property::Always(Invariant::I11Once),
        // The monitor sees the memory hold too much before any retry is refused: the
        // counterexample's outputs are right, only the state behind them is not.
        shows_in_outputs: false,
        proptest: None,
        memory: 2,
        max_pending: 0,
    },
    Mutant {
        name: "PrependIgnoresMemory",
        rule: "S52",
        wrong: "`prepend` checks only that the id is not pending, not the delivery memory",
        file: "core/machine/src/machine/inputs.rs",
        from: "machine.check_new_message(&message)?;
            machine.check_room(target)?;
            machine.inbox.prepend(",
        to: "if machine.inbox.contains(message.id()) {
                return Err(Rejected::AlreadyPending(message.id().clone()));
            }
            machine.check_room(target)?;
            machine.inbox.prepend(",
        killer: Property::Always(Invariant::I11Once),
        shows_in_outputs: true,
        proptest: None,
        memory: 2,
        max_pending: 0,
    },
    Mutant {
        name: "RestoreForgetsMemory",
        rule: "S53",
        wrong: "restore rebuilds the lists but not the delivery memory",
        file: "core/machine/src/inbox.rs",
        from: "self.memory.left(&gone.message, how);",
        to: "let _ = (&gone.message, how);",
        killer: Property::Always(Invariant::I11Once),
        shows_in_outputs: false,
        proptest: None,
        memory: 2,
        max_pending: 0,
    },
    // The seven one-line changes the invariants alone let pass: each must fail the property
    // that guards its rule — the equivalence to the spec, or (S25) no turn without waking work.
    Mutant {
        name: "BlockedTurnStalls",
        rule: "S35",
        wrong: "a turn that ends `blocked` no longer continues to the waking work queued behind it",
        file: "core/machine/src/machine.rs",
        from: "TurnEndReason::Completed | TurnEndReason::MaxTokens | TurnEndReason::Blocked",
        to: "TurnEndReason::Completed | TurnEndReason::MaxTokens",
        killer: Property::Equivalence,
        shows_in_outputs: true,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "KeepInboxClearsLatch",
        rule: "S26",
        wrong: "a `keepInbox` cancel also clears the wake latch",
        file: "core/machine/src/machine.rs",
        from: "self.inbox.clear(&mut self.queue);
            if let Some(activity) = self.activity_mut() {
                activity.clear_wake();
            }
        }",
        to: "self.inbox.clear(&mut self.queue);
        }
        if let Some(activity) = self.activity_mut() {
            activity.clear_wake();
        }",
        killer: Property::Equivalence,
        // The latch is state: the outputs differ only later, if at all within the path.
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "EmptyEnterAfterTerminalStep",
        rule: "S30",
        wrong: "`enter([])` after a terminal step enters an empty step instead of ending the turn",
        file: "core/machine/src/machine.rs",
        from: "if messages.is_empty() && (run.step == 0 || after_terminal) {",
        to: "if messages.is_empty() && run.step == 0 {",
        killer: Property::Equivalence,
        shows_in_outputs: true,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "LatchReplaysWithoutWork",
        rule: "S25",
        wrong: "the wake latch replays at an activity's end even with no waking work pending",
        file: "core/machine/src/machine.rs",
        from: "} else if activity.wake_requested() && self.inbox.has_waking_work() {",
        to: "} else if activity.wake_requested() {",
        killer: Property::Always(Invariant::NoSpuriousActivity),
        shows_in_outputs: true,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "DisposedCauseLatches",
        rule: "S24",
        wrong: "a cancel with cause `disposed` still lets waking sends latch",
        file: "core/machine/src/machine.rs",
        from: ".is_some_and(|c| c.disposing || c.cause == CancelCause::Disposed);",
        to: ".is_some_and(|c| c.disposing);",
        killer: Property::Equivalence,
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "TurnStoppingIgnoresSteers",
        rule: "S33",
        wrong: "`turnStopping` done ends the turn although hooks steered into NS",
        file: "core/machine/src/machine.rs",
        from: "TurnStoppingAnswer::Done if self.inbox.len(Target::NextStep) == 0 => {",
        to: "TurnStoppingAnswer::Done if self.inbox.len(Target::NextStep) < usize::MAX => {",
        killer: Property::Equivalence,
        shows_in_outputs: true,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "MaxTokensNotSticky",
        rule: "S34",
        wrong: "a `completed` step after a `max-tokens` one forgets it: the turn ends `completed`",
        file: "core/machine/src/machine.rs",
        from: "StepAnswer::Completed => true,",
        to: "StepAnswer::Completed => {
                if let Some(run) = self.running_mut() {
                    run.max_tokens = false;
                }
                true
            }",
        killer: Property::Equivalence,
        shows_in_outputs: true,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "GuardBeforeIdentity",
        rule: "S54",
        wrong: "the expected-turn guard is checked before the identity checks, so the retry of an \
                accepted guarded steer after its turn ended is answered turn-mismatch",
        file: "core/machine/src/machine.rs",
        from: "        self.check_new_message(&message)?;
        if let Some(expect) = expect {
            self.check_guard(expect)?;
        }",
        to: "        if let Some(expect) = expect {
            self.check_guard(expect)?;
        }
        self.check_new_message(&message)?;",
        killer: Property::Equivalence,
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "GuardIgnoresCancel",
        rule: "S54",
        wrong: "a steer guarded by turn n is accepted after turn n's cancellation was requested",
        file: "core/machine/src/machine.rs",
        from: "turn == self.last_turn && run.activity.cancel().is_none()",
        to: "turn == self.last_turn",
        killer: Property::Always(Invariant::I12Guard),
        shows_in_outputs: true,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "BoundBeforeRetarget",
        rule: "S55",
        wrong: "the admission bound counts the requested list, before S18 retargets a steer after \
                a cancel to NT",
        file: "core/machine/src/machine.rs",
        from: "        // S18: a steer sent after a stop cannot join the aborted turn.
        let target = if wakeup && self.is_cancel_requested() {
            Target::NextTurn
        } else {
            target
        };
        self.check_room(target)?;",
        to: "        self.check_room(target)?;
        let target = if wakeup && self.is_cancel_requested() {
            Target::NextTurn
        } else {
            target
        };",
        killer: Property::Always(Invariant::I13Bound),
        // When both lists are full the mutant and the core both answer `full`, for different
        // lists: a trace records only the kind, so the counterexample may replay on the core.
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 1,
    },
    Mutant {
        name: "ConflictAnsweredDelivered",
        rule: "S56",
        wrong: "a different message under a held id is answered already-delivered (which callers \
                treat as success: the new message is silently dropped)",
        file: "core/machine/src/machine.rs",
        from: "Known::Pending(known) | Known::Held(known) if known != message.fingerprint() => {",
        to: "Known::Pending(known) if known != message.fingerprint() => {",
        killer: Property::Always(Invariant::I14NoSilentLoss),
        shows_in_outputs: false,
        proptest: None,
        memory: 1,
        max_pending: 0,
    },
    Mutant {
        name: "EffectReleasedEarly",
        rule: "session: group commit",
        wrong: "an input staged while its batch is being written joins it: its effects are \
                released though its events were not in the write",
        file: "core/session/src/session.rs",
        from: "        self.check_open()?;
        admit(&input, self.options.limits)?;",
        to: "        admit(&input, self.options.limits)?;",
        killer: Property::Session(SessionProperty::DurableBeforeRelease),
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "RollbackForgetsMemory",
        rule: "session: rollback (S5, S51)",
        wrong: "a failed batch's rollback leaves the ids its claims put in the delivery memory",
        file: "core/machine/src/memory.rs",
        from: "    pub(crate) fn undo(&mut self, id: &MessageId, forgotten: Forgotten) {
        let Some(held) = self.0.as_mut() else {",
        to: "    pub(crate) fn undo(&mut self, id: &MessageId, forgotten: Forgotten) {
        if !id.as_str().is_empty() {
            return;
        }
        let Some(held) = self.0.as_mut() else {",
        killer: Property::Session(SessionProperty::RolledBack),
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "DeadlineNeverFires",
        rule: "session: abort grace (S38, S39)",
        wrong: "a released abort starts no grace: a host call that ignores it hangs the turn",
        file: "core/session/src/session.rs",
        from: "        if aborted {
            self.start_grace(now);
        }",
        to: "        if aborted && now == Duration::MAX {
            self.start_grace(now);
        }",
        killer: Property::Session(SessionProperty::AbortEndsByDeadline),
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "HeldAnswerNeverRetried",
        rule: "session: rollback, retry (S5, S38)",
        wrong: "the answers a failed batch held are never staged again: the host gave them once, \
                so its call never ends",
        file: "core/session/src/session.rs",
        from: "            let answers = std::mem::take(&mut self.held)",
        to: "            let answers = std::mem::take(&mut Vec::<Held>::new())",
        killer: Property::Session(SessionProperty::AnswersRetried),
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "AcksReordered",
        rule: "session: group commit",
        wrong: "a persisted batch swaps each pair of its members' acknowledgements",
        file: "core/session/src/batch.rs",
        from: "return Some(Release::Ack(Ticket { batch, index }, ack));",
        to: "return Some(Release::Ack(Ticket { batch, index: index ^ 1 }, ack));",
        killer: Property::Session(SessionProperty::ReleaseOrder),
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "ResumeLatches",
        rule: "S57",
        wrong: "a `resume` that does not wake from idle acts as a waking send: it sets the wake \
                latch while running after a cancel or during maintenance",
        file: "core/machine/src/machine.rs",
        from: "        if matches!(self.phase, Phase::Idle) && self.inbox.has_waking_work() {
            self.start_driver();
        }
    }",
        to: "        if matches!(self.phase, Phase::Idle) && self.inbox.has_waking_work() {
            self.start_driver();
        } else if !matches!(self.phase, Phase::Idle) {
            self.wake();
        }
    }",
        killer: Property::Always(Invariant::S57Resume),
        // The latch shows only at the activity's end; the resume itself emits nothing.
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "ResumeWakesQuietWork",
        rule: "S57",
        wrong: "`resume` opens a turn for quiet items alone",
        file: "core/machine/src/machine.rs",
        from: "        if matches!(self.phase, Phase::Idle) && self.inbox.has_waking_work() {
            self.start_driver();
        }
    }",
        to: "        if matches!(self.phase, Phase::Idle)
            && self.inbox.len(Target::NextTurn) + self.inbox.len(Target::NextStep) > 0
        {
            self.start_driver();
        }
    }",
        killer: Property::Always(Invariant::S57Resume),
        shows_in_outputs: true,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "StepRecordsLast",
        rule: "S58",
        wrong: "a fate record's `step` is the last step of its turn that entered the id, not \
                the first",
        file: "core/machine/src/memory.rs",
        from: "let first = record.claimed && record.turn == turn && !record.stepped;",
        to: "let first = record.claimed && record.turn == turn;",
        killer: Property::Always(Invariant::I15Fate),
        // `fate` is a query: a trace of inputs and outputs does not show it.
        shows_in_outputs: false,
        proptest: None,
        memory: 2,
        max_pending: 0,
    },
    Mutant {
        name: "FateNeverEnds",
        rule: "S58",
        wrong: "a `turn/end` leaves the `end` of its turn's claims unset",
        file: "core/machine/src/memory.rs",
        from: "record.end = Some(kind);",
        to: "record.end = None;",
        killer: Property::Always(Invariant::I15Fate),
        shows_in_outputs: false,
        proptest: None,
        memory: 2,
        max_pending: 0,
    },
    Mutant {
        name: "RedeliverEntered",
        rule: "S59",
        wrong: "crash repair redelivers every claim of the interrupted turn, also those a \
                `step/start` (a model call) saw",
        file: "core/machine/src/restore.rs",
        from: "        if self.position.open().is_some() {
            self.unseen.clear();
        }",
        to: "        if self.position.open().is_some() {
            self.unseen.shrink_to_fit();
        }",
        killer: Property::Always(Invariant::I16NothingUnseenLost),
        // Caught in the state before any crash, by the repair every state is checked with:
        // the live outputs are the real core's.
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "RedeliverToTheBack",
        rule: "S59",
        wrong: "crash repair re-inserts a redelivered message at the back of its list, not the \
                front",
        file: "core/machine/src/restore.rs",
        from: "start: *k,",
        to: "start: *k + self.inbox.len(*target),",
        killer: Property::Always(Invariant::I16NothingUnseenLost),
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "AllowanceIgnored",
        rule: "S59",
        wrong: "crash repair ignores the redelivery allowance: a message is redelivered \
                however often it was already",
        file: "core/machine/src/restore.rs",
        from: "            if r > allowance {
                continue;
            }",
        to: "",
        killer: Property::Always(Invariant::I16NothingUnseenLost),
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "RedeliveryLosesWakeup",
        rule: "S59",
        wrong: "a redelivered message comes back quiet even when it was claimed waking",
        file: "core/machine/src/restore.rs",
        from: "wakeup: *waking,",
        to: "wakeup: false,",
        killer: Property::Always(Invariant::I16NothingUnseenLost),
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
];

/// The runner's own check: a "mutant" that changes nothing must survive every killer, so a
/// runner that reported it killed could not be trusted to report a real survivor.
pub const UNCHANGED: Mutant = Mutant {
    name: "Unchanged",
    rule: "-",
    wrong: "nothing: `to` equals `from`, so every killer must let it survive",
    file: "core/machine/src/inbox.rs",
    from: "let start = self.len(target);",
    to: "let start = self.len(target);",
    killer: Property::Always(Invariant::I1SpliceProjection),
    shows_in_outputs: true,
    proptest: Some(Invariant::I1SpliceProjection),
    memory: 0,
    max_pending: 0,
};

/// A mutant by name (the table's, or [`UNCHANGED`]); case-insensitive.
pub fn find(name: &str) -> Option<Mutant> {
    MUTANTS
        .iter()
        .chain(std::iter::once(&UNCHANGED))
        .find(|mutant| mutant.name.eq_ignore_ascii_case(name))
        .copied()
}
