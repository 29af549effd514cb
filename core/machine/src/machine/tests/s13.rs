//! SPEC §13 in the machine: `resume` (S57), `fate` and its records (S58), crash repair's
//! redelivery as the restorer plans it (S59), and the records' undo on a failed batch (S5).

use std::sync::Arc;

use serde_json::{json, Value};

use crate::fate::{Fate, TurnEndKind};
use crate::input::{CancelCause, PreStepAnswer, StepAnswer, Target, TurnStoppingAnswer};
use crate::message::{Message, MessageId, SharedMessage};
use crate::output::{Event, Output};
use crate::restore::Restorer;
use crate::transition::Transition;
use crate::{Config, LogViolation, Machine, Rejected};

fn user(id: &str) -> SharedMessage {
    Arc::new(Message::user(id, id))
}

fn id(id: &str) -> MessageId {
    MessageId::new(id)
}

/// Persists a transition into `log` and carries its effects out.
fn settle(log: &mut Vec<Event>, transition: Result<Transition<'_>, Rejected>) {
    match transition {
        Ok(transition) => transition.persist_into(log).for_each(drop),
        Err(rejection) => panic!("rejected: {rejection}"),
    }
}

fn kinds(outputs: &[Output]) -> Vec<String> {
    outputs
        .iter()
        .map(|output| match output {
            Output::Event(event) => event.kind().to_owned(),
            Output::Effect(effect) => format!("{effect:?}")
                .split(['(', ' ', '{'])
                .next()
                .unwrap_or_default()
                .to_owned(),
        })
        .collect()
}

fn enter(ids: &[&str]) -> PreStepAnswer {
    PreStepAnswer::Enter(ids.iter().map(|id| user(id)).collect())
}

fn claimed(turn: u64, step: Option<u64>, end: Option<TurnEndKind>) -> Fate {
    Fate::Claimed { turn, step, end }
}

#[test]
fn s57_resume_at_idle_with_waking_work_wakes_exactly_as_a_waking_send() {
    // A parked waking item: restored from a log (S48).
    let mut log = Vec::new();
    let mut live = Machine::new();
    settle(&mut log, live.begin_maintenance());
    settle(&mut log, live.followup(user("a")));
    let mut restored = Machine::restore_events(&log, 0).unwrap_or_default();
    assert!(restored.is_pending(&id("a")));
    let resumed: Vec<Output> = restored.resume().unwrap().into_outputs().collect();
    // What a waking send from idle emits, less its own insertion (splice + inserted).
    let mut fresh = Machine::new();
    let sent: Vec<Output> = fresh.followup(user("a")).unwrap().into_outputs().collect();
    assert_eq!(resumed[..], sent[2..]);
    assert_eq!(
        kinds(&resumed),
        [
            "Notify",
            "turn/start",
            "agent/inbox/spliced",
            "Notify",
            "Request"
        ]
    );
    assert_eq!(restored, fresh);
}

#[test]
fn s57_resume_otherwise_emits_nothing_changes_nothing_and_never_latches() {
    let check = |machine: &mut Machine| {
        let before = machine.clone();
        let transition = machine.resume().unwrap();
        assert!(transition.is_empty());
        drop(transition);
        assert_eq!(*machine, before);
        assert!(!machine.is_wake_latched());
    };
    let mut log = Vec::new();
    // Idle, nothing pending; idle with quiet items only (S19: they never open a turn).
    let mut machine = Machine::new();
    check(&mut machine);
    settle(&mut log, machine.inject(user("q")));
    settle(
        &mut log,
        machine.send(user("t"), Target::NextTurn, false, None),
    );
    check(&mut machine);
    // Running, and running with a cancel requested (a waking send would latch there, S24).
    settle(&mut log, machine.followup(user("a")));
    check(&mut machine);
    settle(&mut log, machine.cancel(CancelCause::User, true));
    check(&mut machine);
    // Maintenance is not idle (S23, S43): nothing, and its end replays no latch.
    let mut parked_log = Vec::new();
    let mut live = Machine::new();
    settle(&mut parked_log, live.begin_maintenance());
    settle(&mut parked_log, live.followup(user("b")));
    let mut maintenance = Machine::restore_events(&parked_log, 0).unwrap_or_default();
    assert!(maintenance.is_pending(&id("b")));
    settle(&mut log, maintenance.begin_maintenance());
    check(&mut maintenance);
    let ended: Vec<Output> = maintenance
        .end_maintenance()
        .unwrap()
        .into_outputs()
        .collect();
    assert_eq!(ended, []);
    assert!(maintenance.is_pending(&id("b")));
    // Disposed: rejected (S45), the only rejection.
    let mut disposed = Machine::new();
    settle(&mut log, disposed.dispose());
    assert_eq!(disposed.resume().err(), Some(Rejected::AfterDisposal));
}

#[test]
fn s58_fate_names_pending_discarded_and_claimed_with_step_and_end() {
    let mut log = Vec::new();
    let mut m = Machine::with_config(Config::new().with_delivery_memory(16));
    assert_eq!(m.fate(&id("x")), Fate::Unknown);
    for (name, target) in [("nt", Target::NextTurn), ("ns", Target::NextStep)] {
        settle(&mut log, m.send(user(name), target, false, None));
        assert_eq!(m.fate(&id(name)), Fate::Pending { target });
    }
    // Ordinary removals (S12): remove, replace with another id, clear.
    settle(&mut log, m.remove(&id("nt")).map(Option::unwrap));
    settle(
        &mut log,
        m.replace(&id("ns"), user("ns2")).map(Option::unwrap),
    );
    settle(&mut log, m.clear());
    for gone in ["nt", "ns", "ns2"] {
        assert_eq!(m.fate(&id(gone)), Fate::Discarded, "{gone}");
    }
    // Turn 1 claims c (NS) then a (NT); the host enters only a, then a rewritten c in step 2.
    settle(&mut log, m.inject(user("c")));
    settle(&mut log, m.followup(user("a")));
    assert_eq!(m.fate(&id("a")), claimed(1, None, None));
    assert_eq!(m.fate(&id("c")), claimed(1, None, None));
    settle(&mut log, m.answer_pre_step(enter(&["a", "nt"]))); // nt: discarded, unchanged
    assert_eq!(m.fate(&id("a")), claimed(1, Some(1), None));
    assert_eq!(m.fate(&id("nt")), Fate::Discarded);
    settle(&mut log, m.answer_step(StepAnswer::Continue));
    settle(&mut log, m.answer_pre_step(enter(&["c", "a"]))); // a keeps its first step
    assert_eq!(m.fate(&id("a")), claimed(1, Some(1), None));
    assert_eq!(m.fate(&id("c")), claimed(1, Some(2), None));
    settle(&mut log, m.answer_step(StepAnswer::MaxTokens));
    settle(&mut log, m.answer_turn_stopping(TurnStoppingAnswer::Done));
    let end = Some(TurnEndKind::MaxTokens);
    assert_eq!(m.fate(&id("a")), claimed(1, Some(1), end));
    assert_eq!(m.fate(&id("c")), claimed(1, Some(2), end));
    // Turn 2 enters an id turn 1 claimed: no record changes (S58: not claimed by the open turn).
    settle(&mut log, m.followup(user("b")));
    settle(&mut log, m.answer_pre_step(enter(&["a", "b"])));
    assert_eq!(m.fate(&id("a")), claimed(1, Some(1), end));
    settle(&mut log, m.cancel(CancelCause::User, false));
    settle(&mut log, m.answer_step(StepAnswer::Completed));
    assert_eq!(
        m.fate(&id("b")),
        claimed(2, Some(1), Some(TurnEndKind::Aborted))
    );
    // A query, in every phase, also once disposed.
    settle(&mut log, m.dispose());
    assert!(m.is_disposed());
    assert_eq!(m.fate(&id("a")), claimed(1, Some(1), end));
    assert_eq!(m.fate(&id("x")), Fate::Unknown);
    // I15: a machine restored from the log answers every fate as the live one.
    let restored = Machine::restore_with(
        Config::new().with_delivery_memory(16),
        &log.iter()
            .map(|event| serde_json::to_value(event).unwrap_or_default())
            .collect::<Vec<Value>>(),
        0,
    );
    let restored = restored.unwrap_or_default();
    for held in m.delivered() {
        assert_eq!(restored.fate(held), m.fate(held), "{held}");
    }
    assert_eq!((restored.delivered().len(), m.delivered().len()), (6, 6));
}

#[test]
fn s58_every_end_kind_and_the_capacity_forgets_records() {
    let ends = [
        (PreStepAnswer::Reject, TurnEndKind::Blocked),
        (
            PreStepAnswer::Fail(crate::ErrorInfo::new("x", "y")),
            TurnEndKind::Error,
        ),
        (enter(&[]), TurnEndKind::Completed),
    ];
    for (answer, kind) in ends {
        let mut log = Vec::new();
        let mut m = Machine::with_config(Config::new().with_delivery_memory(1));
        settle(&mut log, m.followup(user("a")));
        settle(&mut log, m.answer_pre_step(answer));
        assert_eq!(m.fate(&id("a")), claimed(1, None, Some(kind)));
        // W = 1: the next id that leaves forgets a, record and all (S51).
        settle(&mut log, m.inject(user("b")));
        settle(&mut log, m.remove(&id("b")).map(Option::unwrap));
        assert_eq!(m.fate(&id("a")), Fate::Unknown);
        assert_eq!(m.fate(&id("b")), Fate::Discarded);
    }
    // W = 0 holds nothing: pending or unknown only.
    let mut log = Vec::new();
    let mut m = Machine::new();
    settle(&mut log, m.followup(user("a")));
    assert_eq!(m.fate(&id("a")), Fate::Unknown);
    // Unbounded never forgets.
    let mut m = Machine::with_config(Config::new().with_unbounded_delivery_memory());
    for n in 0..300 {
        settle(&mut log, m.inject(user(&format!("m{n}"))));
        settle(&mut log, m.clear());
    }
    assert_eq!(m.delivered().len(), 300);
    assert_eq!(m.fate(&id("m0")), Fate::Discarded);
}

#[test]
fn s5_a_rolled_back_batch_restores_every_record_exactly() {
    let mut log = Vec::new();
    let mut m = Machine::with_config(Config::new().with_delivery_memory(2));
    settle(&mut log, m.inject(user("old")));
    settle(&mut log, m.clear()); // old: discarded, held
    settle(&mut log, m.inject(user("c")));
    settle(&mut log, m.followup(user("a"))); // claims c, a (evicts old)
    settle(&mut log, m.answer_pre_step(enter(&["c"])));
    let before = m.clone();
    let fates = |m: &Machine| {
        ["old", "c", "a", "b"]
            .map(|name| m.fate(&id(name)))
            .to_vec()
    };
    let before_fates = fates(&before);
    assert_eq!(
        before_fates,
        [
            Fate::Unknown,
            claimed(1, Some(1), None),
            claimed(1, None, None),
            Fate::Unknown
        ]
    );
    m.begin_batch().unwrap();
    settle(&mut log, m.steer(user("b")));
    settle(&mut log, m.answer_step(StepAnswer::Continue)); // claims b (evicts c)
    settle(&mut log, m.answer_pre_step(enter(&["a", "b"]))); // a and b get step 2
    settle(&mut log, m.answer_step(StepAnswer::Completed));
    settle(&mut log, m.answer_turn_stopping(TurnStoppingAnswer::Done)); // ends: completed
    let done = Some(TurnEndKind::Completed);
    assert_eq!(
        fates(&m),
        [
            Fate::Unknown,
            Fate::Unknown,
            claimed(1, Some(2), done),
            claimed(1, Some(2), done)
        ]
    );
    m.roll_back_batch().unwrap();
    assert_eq!(m, before);
    assert_eq!(fates(&m), before_fates);
    // And the machine goes on as if the batch had never been: the same turn end, the same
    // records.
    let mut again = before.clone();
    for machine in [&mut m, &mut again] {
        let mut log = Vec::new();
        settle(&mut log, machine.answer_step(StepAnswer::Completed));
        settle(
            &mut log,
            machine.answer_turn_stopping(TurnStoppingAnswer::Done),
        );
    }
    assert_eq!(m, again);
    assert_eq!(
        fates(&m),
        [
            Fate::Unknown,
            claimed(1, Some(1), done),
            claimed(1, None, done),
            Fate::Unknown
        ]
    );
}

/// Bench 6's budget (a held id at most 24 bytes over what it was): the record packs into one
/// word next to the fingerprint, so the index slot grows by 8 bytes, at most 16 per held id at
/// hashbrown's lowest load.
#[test]
fn s58_a_held_record_costs_8_bytes_over_the_fingerprint() {
    use crate::fingerprint::Fingerprint;
    use crate::memory::Entry;
    use std::mem::size_of;
    assert_eq!(size_of::<Fingerprint>(), 16);
    assert_eq!(size_of::<Entry>(), 24);
    assert_eq!(size_of::<(MessageId, Fingerprint)>(), 32); // the index slot before §13
    assert_eq!(size_of::<(MessageId, Entry)>(), 40); // and now: 8 more
}

fn m(id: &str) -> Value {
    json!({"id": id, "source": {"kind": "user"}, "content": id})
}

fn spliced(data: Value) -> Value {
    json!({"type": "agent/inbox/spliced", "data": data})
}

/// The restorer fed `log`; panics on an invalid log.
fn restorer(config: Config, log: &[Value], seed: usize) -> Restorer {
    let mut restorer = Restorer::with_config(config, seed);
    for event in log {
        if let Err(error) = restorer.push_json(event) {
            panic!("{error}");
        }
    }
    restorer
}

fn json_of(events: &[Event]) -> Vec<Value> {
    events
        .iter()
        .map(|event| serde_json::to_value(event).unwrap_or_default())
        .collect()
}

/// A turn that claimed NS `s1`, `s2` and NT `a` (waking) at its boundary, then entered them in
/// step 1, then (tool step) claimed steered `s3` and is waiting on step 2's pre-step.
fn crashed_log() -> Vec<Value> {
    vec![
        spliced(json!({"target": "next-step", "start": 0, "inserted": [m("s1")]})),
        spliced(json!({"target": "next-step", "start": 1, "inserted": [m("s2")]})),
        spliced(json!({"target": "next-turn", "start": 0, "inserted": [m("a")], "wakeup": true})),
        json!({"type": "turn/start", "data": {"turn": 4}}),
        spliced(json!({"target": "next-step", "start": 0, "removedCount": 2, "inserted": []})),
        spliced(json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []})),
        json!({"type": "step/start", "data": {"turn": 4, "step": 1}}),
        json!({"type": "user/message", "data": m("a")}),
        json!({"type": "step/end", "data": {"turn": 4, "step": 1}}),
        spliced(json!({"target": "next-step", "start": 0, "inserted": [m("s3")], "wakeup": true})),
        spliced(json!({"target": "next-turn", "start": 0, "inserted": [m("q")]})),
        spliced(json!({"target": "next-step", "start": 0, "removedCount": 1, "inserted": []})),
    ]
}

#[test]
fn s59_repair_redelivers_what_the_turn_claimed_after_its_last_step_start() {
    let log = crashed_log();
    let config = Config::new().with_delivery_memory(8);
    let r = restorer(config, &log, 0);
    // A = 0: S50 unchanged, the closers alone.
    assert_eq!(
        json_of(&r.repair(0)),
        [json!({"type": "turn/end", "data": {"turn": 4, "reason": {"kind": "interrupted"}}})]
    );
    // A = 1: s3 (claimed after step 1's start) comes back first in NS, waking; the claims of
    // the boundary were seen by step 1 and stay gone.
    let repair = r.repair(1);
    assert_eq!(
        json_of(&repair),
        [
            json!({"type": "turn/end", "data": {"turn": 4, "reason": {"kind": "interrupted"}}}),
            spliced(
                json!({"target": "next-step", "start": 0, "inserted": [m("s3")],
                           "wakeup": true, "redelivery": 1})
            ),
        ]
    );
    let mut r = r;
    for event in &repair {
        r.push_event(event).unwrap();
    }
    let machine = r.finish().unwrap();
    assert_eq!(
        machine.fate(&id("s3")),
        Fate::Pending {
            target: Target::NextStep
        }
    );
    assert_eq!(
        machine.fate(&id("a")),
        claimed(4, Some(1), Some(TurnEndKind::Interrupted))
    );
    assert_eq!(
        machine.fate(&id("s1")),
        claimed(4, None, Some(TurnEndKind::Interrupted))
    );
    // Without a step/start, every claim of the turn, NS items then the NT item, each list
    // counted from 0; a quiet item goes back quiet.
    let boundary: Vec<Value> = log[..6].to_vec();
    let r = restorer(config, &boundary, 0);
    assert_eq!(
        json_of(&r.repair(5))[1..],
        [
            spliced(
                json!({"target": "next-step", "start": 0, "inserted": [m("s1")], "redelivery": 1})
            ),
            spliced(
                json!({"target": "next-step", "start": 1, "inserted": [m("s2")], "redelivery": 1})
            ),
            spliced(
                json!({"target": "next-turn", "start": 0, "inserted": [m("a")], "wakeup": true, "redelivery": 1})
            ),
        ]
    );
    // A balanced log needs nothing, whatever the allowance.
    let mut closed = log.clone();
    closed.push(json!({"type": "turn/end", "data": {"turn": 4, "reason": {"kind": "completed"}}}));
    assert_eq!(restorer(config, &closed, 0).repair(3), []);
}

#[test]
fn s59_the_count_is_per_id_from_the_seed_boundary_and_skips_what_is_pending() {
    let base = crashed_log();
    let turn_end =
        json!({"type": "turn/end", "data": {"turn": 4, "reason": {"kind": "interrupted"}}});
    // s3 was redelivered twice before (one with a malformed count: it carries the key, S46
    // reads it as an extra key), then claimed again by turn 5, which crashed before a step.
    let mut log = base.clone();
    log.push(turn_end.clone());
    log.push(spliced(
        json!({"target": "next-step", "start": 0, "inserted": [m("s3")], "redelivery": "x"}),
    ));
    log.push(spliced(json!({"target": "next-step", "start": 0, "removedCount": 1, "inserted": [], "outcome": "canceled"})));
    log.push(spliced(
        json!({"target": "next-step", "start": 0, "inserted": [m("s3")], "redelivery": 7}),
    ));
    log.push(json!({"type": "turn/start", "data": {"turn": 5}}));
    log.push(spliced(
        json!({"target": "next-step", "start": 0, "removedCount": 1, "inserted": []}),
    ));
    let config = Config::new();
    let r = restorer(config, &log, 0);
    assert_eq!(r.repair(2).len(), 1, "r = 3 > A = 2: skipped");
    assert_eq!(
        json_of(&r.repair(3))[1],
        spliced(json!({"target": "next-step", "start": 0, "inserted": [m("s3")], "redelivery": 3}))
    );
    // From a seed boundary past the first redelivery, only the second counts.
    let seed = base.len() + 3;
    let r = restorer(config, &log, seed);
    assert_eq!(
        json_of(&r.repair(2))[1],
        spliced(json!({"target": "next-step", "start": 0, "inserted": [m("s3")], "redelivery": 2}))
    );
    // An id pending at the end of the log (a later send reused it) is skipped: repair never
    // makes an id pending twice (S13).
    let mut reused = base.clone();
    reused.push(spliced(
        json!({"target": "next-turn", "start": 1, "inserted": [m("s3")]}),
    ));
    let r = restorer(config, &reused, 0);
    assert_eq!(r.repair(9).len(), 1);
}

#[test]
fn s59_repair_never_writes_an_id_twice_and_restore_rejects_what_s46_rejects() {
    // A log that is not the machine's: the open turn claims s1, a host splice re-inserts it,
    // the turn claims it again. Repair re-inserts it once.
    let mut log = vec![
        spliced(json!({"target": "next-step", "start": 0, "inserted": [m("s1")], "wakeup": true})),
        json!({"type": "turn/start", "data": {"turn": 1}}),
        spliced(json!({"target": "next-step", "start": 0, "removedCount": 1, "inserted": []})),
        spliced(json!({"target": "next-step", "start": 0, "inserted": [m("s1")]})),
        spliced(json!({"target": "next-step", "start": 0, "removedCount": 1, "inserted": []})),
    ];
    let r = restorer(Config::new(), &log, 0);
    let repair = r.repair(5);
    assert_eq!(repair.len(), 2);
    // Appended and restored, the id is pending once; repairing the repaired log adds nothing.
    let mut r = r;
    for event in &repair {
        r.push_event(event).unwrap();
    }
    assert_eq!(r.repair(5), []);
    let machine = r.finish().unwrap();
    assert_eq!(machine.pending(Target::NextStep).len(), 1);
    // A redelivery splice (as a host or another port might write one) that inserts an id
    // already pending is what S46 rejects (S13): the log does not restore, naming it.
    log.extend(json_of(&repair));
    log.push(spliced(
        json!({"target": "next-step", "start": 1, "inserted": [m("s1")], "redelivery": 2}),
    ));
    let error = Machine::restore(&log, 0).unwrap_err();
    assert_eq!(
        (error.index, error.violation),
        (7, LogViolation::AlreadyPending(id("s1")))
    );
    // A non-integer count is an extra key (S46): accepted as written.
    log.pop();
    log.push(spliced(
        json!({"target": "next-turn", "start": 0, "inserted": [m("z")], "redelivery": -1.5}),
    ));
    assert!(Machine::restore(&log, 0).is_ok());
}

#[test]
fn s58_restore_claims_without_a_turn_are_turn_0_and_a_reinsertion_drops_the_record() {
    let log = vec![
        spliced(json!({"target": "next-turn", "start": 0, "inserted": [m("a"), m("b")]})),
        spliced(json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []})),
        spliced(
            json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": [], "outcome": "whatever"}),
        ),
        json!({"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "later"}}}),
    ];
    let config = Config::new().with_delivery_memory(4);
    let machine = Machine::restore_with(config, &log, 0).unwrap();
    // An unknown kind sets no `end` (FORMAT.md's F names six kinds).
    assert_eq!(machine.fate(&id("a")), claimed(0, None, None));
    assert_eq!(machine.fate(&id("b")), Fate::Discarded);
    let mut again = log.clone();
    again.push(spliced(
        json!({"target": "next-step", "start": 0, "inserted": [m("a")]}),
    ));
    again.push(spliced(json!({"target": "next-step", "start": 0, "removedCount": 1, "inserted": [], "outcome": "canceled"})));
    let machine = Machine::restore_with(config, &again, 0).unwrap();
    assert_eq!(machine.fate(&id("a")), Fate::Discarded);
}

/// S58 over numbers too wide for the packed record (a restored log's turn at 2^45, a step at
/// 2^20): the record is exact, survives a capacity eviction's neighbours, and is dropped with its
/// id; a live machine restored from it then answers like one that never saw wide numbers.
#[test]
fn s58_records_with_wide_turn_and_step_numbers_are_exact() {
    let turn = 1u64 << 45;
    let step = 1u64 << 20;
    let log = vec![
        spliced(json!({"target": "next-turn", "start": 0, "inserted": [m("a"), m("b")]})),
        json!({"type": "turn/start", "data": {"turn": turn}}),
        spliced(json!({"target": "next-turn", "start": 0, "removedCount": 2, "inserted": []})),
        json!({"type": "step/start", "data": {"turn": turn, "step": step}}),
        json!({"type": "user/message", "data": m("b")}),
        json!({"type": "step/end", "data": {"turn": turn, "step": step}}),
        json!({"type": "turn/end", "data": {"turn": turn, "reason": {"kind": "max-tokens"}}}),
        spliced(json!({"target": "next-turn", "start": 0, "inserted": [m("c")]})),
        spliced(
            json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": [], "outcome": "canceled"}),
        ),
    ];
    let kind = Some(TurnEndKind::MaxTokens);
    let machine = Machine::restore_with(Config::new().with_delivery_memory(3), &log, 0).unwrap();
    assert_eq!(machine.fate(&id("a")), claimed(turn, None, kind));
    assert_eq!(machine.fate(&id("b")), claimed(turn, Some(step), kind));
    assert_eq!(machine.fate(&id("c")), Fate::Discarded);
    // Capacity 2: `a` (wide) is forgotten, `b` (wide) and `c` stay.
    let machine = Machine::restore_with(Config::new().with_delivery_memory(2), &log, 0).unwrap();
    assert_eq!(machine.fate(&id("a")), Fate::Unknown);
    assert_eq!(machine.fate(&id("b")), claimed(turn, Some(step), kind));
    // `b` sent again (S53 on restore): its wide record goes with it.
    let mut again = log.clone();
    again.push(spliced(
        json!({"target": "next-step", "start": 0, "inserted": [m("b")]}),
    ));
    let machine = Machine::restore_with(Config::new().with_delivery_memory(3), &again, 0).unwrap();
    assert_eq!(
        machine.fate(&id("b")),
        Fate::Pending {
            target: Target::NextStep
        }
    );
    assert_eq!(machine.fate(&id("a")), claimed(turn, None, kind));
}
