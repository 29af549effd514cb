//! Unit tests of the monitor: a clean session, I9 parking, and forged outputs per invariant.

use super::{Fact, Invariant, Monitor, Violation};
use coxswain_core::{
    Abort, Batch, Effect, Event, Input, Machine, Output, Rejected, Request, Status,
};
use coxswain_core::{
    CancelCause, Message, Notification, PreStepAnswer, StepAnswer, TurnStoppingAnswer,
};
use std::sync::Arc;

/// Applies `input` to `machine` and shows the monitor what happened.
fn feed(monitor: &mut Monitor, machine: &mut Machine, input: Input) -> Result<(), Violation> {
    let before = machine.clone();
    let (result, outputs) = match machine.handle(input.clone()) {
        Ok(transition) => (Ok(()), transition.into_outputs().collect::<Vec<Output>>()),
        Err(rejected) => (Err(rejected), Vec::new()),
    };
    monitor.observe(&before, &input, &result, &outputs, machine)
}

fn user(id: &str) -> Arc<Message> {
    Arc::new(Message::user(id, id))
}

#[test]
fn a_clean_session_passes_and_shows_its_facts() {
    let (mut monitor, mut machine) = (Monitor::new(), Machine::new());
    let inputs = [
        Input::Followup(user("a")),
        Input::Followup(user("b")),
        Input::PreStep(PreStepAnswer::Reject),
    ];
    for input in inputs {
        feed(&mut monitor, &mut machine, input).unwrap();
    }
    assert!(monitor.saw(Fact::BlockedTurnContinued));
    feed(
        &mut monitor,
        &mut machine,
        Input::Step(StepAnswer::Completed),
    )
    .unwrap();
    assert!(
        !monitor.saw(Fact::BlockedTurnContinued),
        "facts are per transition"
    );
    let batch = monitor.pre_step_batch().cloned().unwrap();
    feed(
        &mut monitor,
        &mut machine,
        Input::PreStep(PreStepAnswer::Enter(batch)),
    )
    .unwrap();
    feed(
        &mut monitor,
        &mut machine,
        Input::Step(StepAnswer::Completed),
    )
    .unwrap();
    feed(
        &mut monitor,
        &mut machine,
        Input::TurnStopping(TurnStoppingAnswer::Done),
    )
    .unwrap();
    assert!(machine.is_quiescent());
    assert!(monitor.waking_work_settled());
    assert_eq!(monitor.violation(), None);
}

#[test]
fn i9_keep_inbox_parking_is_excused_and_a_crash_restores_the_lists() {
    let (mut monitor, mut machine) = (Monitor::new(), Machine::new());
    feed(&mut monitor, &mut machine, Input::Followup(user("a"))).unwrap();
    feed(&mut monitor, &mut machine, Input::Followup(user("b"))).unwrap();
    assert!(!monitor.waking_work_settled(), "b waits for its turn");
    let cancel = Input::Cancel {
        cause: CancelCause::User,
        keep_inbox: true,
    };
    feed(&mut monitor, &mut machine, cancel).unwrap();
    assert!(
        monitor.waking_work_settled(),
        "b is parked by the keepInbox cancel"
    );
    let restored = monitor.crash_and_restore().unwrap();
    assert!(monitor.saw(Fact::RestoredMidTurn));
    let ids: Vec<_> = restored
        .pending(coxswain_core::Target::NextTurn)
        .map(|p| p.message().id().to_string())
        .collect();
    assert_eq!(ids, ["b"]);
    assert_eq!(restored.last_turn(), 1);
}

#[test]
fn forged_outputs_are_caught_by_the_right_invariant() {
    let machine = Machine::new();
    let status = |status| Output::Effect(Effect::Notify(Notification::Status { status }));
    let cases = [
        (vec![status(Status::Idle)], Invariant::I8Status),
        (
            vec![Output::Effect(Effect::Notify(Notification::Discarded {
                message: user("x"),
            }))],
            Invariant::I3Conservation,
        ),
        (
            vec![
                Output::Effect(Effect::Request(Request::PreStep {
                    turn: 1,
                    step: 1,
                    messages: Batch::new(),
                })),
                Output::Effect(Effect::Request(Request::Step { turn: 1, step: 1 })),
            ],
            Invariant::I10OneRequest,
        ),
        (
            vec![Output::Effect(Effect::Abort(Abort {
                cause: CancelCause::User,
            }))],
            Invariant::S39OneAbort,
        ),
        (
            vec![Output::Event(Event::TurnStart { turn: 2 })],
            Invariant::I5TurnEnclosure,
        ),
        (
            vec![
                status(Status::Running),
                Output::Event(Event::TurnStart { turn: 1 }),
            ],
            Invariant::NoSpuriousActivity,
        ),
    ];
    for (outputs, invariant) in cases {
        let mut monitor = Monitor::new();
        // `dispose` on an empty idle machine: outputs beyond `disposed` are forged.
        let violation = monitor
            .observe(&machine, &Input::Dispose {}, &Ok(true), &outputs, &machine)
            .unwrap_err();
        assert_eq!(violation.invariant, invariant, "{outputs:?}: {violation}");
        assert!(monitor.violated(invariant));
    }
    // A rejection must change nothing, emit nothing, and have a reason.
    let mut monitor = Monitor::new();
    let unjustified: Result<bool, Rejected> = Err(Rejected::Busy);
    let violation = monitor
        .observe(&machine, &Input::Clear {}, &unjustified, &[], &machine)
        .unwrap_err();
    assert_eq!(violation.invariant, Invariant::S5Rejection);
}

/// The ids the §13 tests ask `fate` about.
fn ids(names: &[&str]) -> Vec<coxswain_core::MessageId> {
    names
        .iter()
        .map(|name| coxswain_core::MessageId::from(*name))
        .collect()
}

#[test]
fn s57_a_resume_with_nothing_to_wake_that_latches_is_caught() {
    let (mut monitor, mut machine) = (Monitor::new(), Machine::new());
    let begin = Input::Maintenance(coxswain_core::MaintenanceInput::Begin);
    feed(&mut monitor, &mut machine, begin).unwrap();
    // A real resume during maintenance changes nothing: no violation.
    feed(&mut monitor, &mut machine, Input::Resume {}).unwrap();
    assert!(!machine.is_wake_latched());
    // Forged: the machine after the resume has its wake latch set (S57 forbids it).
    let mut latched = machine.clone();
    latched
        .handle(Input::Followup(user("a")))
        .unwrap()
        .into_outputs()
        .for_each(drop);
    assert!(latched.is_wake_latched());
    let violation = monitor
        .observe(&machine, &Input::Resume {}, &Ok(()), &[], &latched)
        .unwrap_err();
    assert_eq!(violation.invariant, Invariant::S57Resume);
    assert_eq!(
        violation.detail,
        "resume with nothing to wake emitted 0 outputs or changed the machine (wake latch \
         false -> true)"
    );
}

#[test]
fn i15_i16_a_crash_redelivers_the_unseen_claim_once_and_the_fates_follow() {
    let config = coxswain_core::Config::new().with_delivery_memory(2);
    let (mut monitor, mut machine) = (Monitor::with_config(config), Machine::with_config(config));
    let ids = ids(&["a", "b"]);
    feed(&mut monitor, &mut machine, Input::Followup(user("a"))).unwrap();
    // Turn 1 claimed `a`; its pre-step request is outstanding: no model call saw it.
    monitor.check_recovery(&machine, &ids).unwrap();
    let (mut machine, repair) = monitor.crash_and_restore_redelivering(1).unwrap();
    let kinds: Vec<&str> = repair.iter().map(Event::kind).collect();
    assert_eq!(kinds, ["turn/end", "agent/inbox/spliced"]);
    assert!(monitor.saw(Fact::Redelivered) && !monitor.saw(Fact::AllowanceSpent));
    monitor.check_recovery(&machine, &ids).unwrap();
    assert_eq!(
        machine.fate(&ids[0]).to_json(),
        serde_json::json!({"pending": "next-turn"})
    );
    // S57: the parked message runs on `resume`; turn 2 claims it, unseen again.
    feed(&mut monitor, &mut machine, Input::Resume {}).unwrap();
    assert!(monitor.saw(Fact::ResumeWoke));
    monitor.check_recovery(&machine, &ids).unwrap();
    // The allowance (1) is spent: the second crash does not redeliver it.
    let (machine, _) = monitor.crash_and_restore_redelivering(1).unwrap();
    assert!(monitor.saw(Fact::AllowanceSpent) && !monitor.saw(Fact::Redelivered));
    monitor.check_recovery(&machine, &ids).unwrap();
    assert_eq!(
        machine.fate(&ids[0]).to_json(),
        serde_json::json!({"claimed": {"turn": 2, "end": "interrupted"}})
    );
    // I15: a machine whose fates are not the outputs' is caught, naming the id.
    let violation = monitor.check_recovery(&Machine::new(), &ids).unwrap_err();
    assert_eq!(violation.invariant, Invariant::I15Fate);
    assert_eq!(
        violation.detail,
        r#"fate(a) is "unknown" but the outputs give {"claimed":{"end":"interrupted","turn":2}}"#
    );
}
