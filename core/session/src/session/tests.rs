//! The session layer's unit tests.

use super::*;
use crate::batch::Release;
use coxswain_core::{
    CancelCause, Event, Message, Notification, PreStepAnswer, Rejected, Request, TurnEndReason,
};
use serde_json::json;

fn followup(id: &str) -> Input {
    Input::Followup(Message::user(id, "hi").into())
}

fn inject(id: &str) -> Input {
    Input::Inject(Message::user(id, "ctx").into())
}

fn cancel() -> Input {
    Input::Cancel {
        cause: CancelCause::User,
        keep_inbox: false,
    }
}

/// S38: an entered batch too deep for a record is answered `fail` (`host-invalid-answer`).
#[test]
fn an_answer_too_deep_for_the_log_fails_the_step_instead() {
    let mut session = Session::new(Machine::new(), Options::default());
    session.feed(followup("m1")).unwrap();
    sealed_events(&mut session);
    session.persisted(BatchNo(1), Duration::ZERO).unwrap();
    let mut deep = json!(1);
    for _ in 0..200 {
        deep = json!([deep]);
    }
    let batch = [Message::user("m1", deep)].into_iter().collect();
    let request = Outstanding::PreStep { turn: 1, step: 1 };
    let answer = Input::PreStep(PreStepAnswer::Enter(batch));
    session.answer(request, answer).unwrap();
    let codes: Vec<String> = sealed_events(&mut session)
        .into_iter()
        .filter_map(|event| match event {
            Event::TurnEnd {
                reason: TurnEndReason::Error { error },
                ..
            } => Some(error.code.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(codes, ["host-invalid-answer"]);
}

/// S4: the late answer of a call the session gave up on is not taken for the next one's.
#[test]
fn a_stale_answer_is_refused_and_changes_nothing() {
    let mut session = Session::new(Machine::new(), Options::default());
    session.feed(followup("m1")).unwrap();
    persist(&mut session, Duration::ZERO);
    let stale = Outstanding::PreStep { turn: 7, step: 1 };
    let before = session.machine().clone();
    assert_eq!(
        session.answer(stale, Input::PreStep(PreStepAnswer::Reject)),
        Err(Refused::Stale { request: stale })
    );
    assert_eq!(
        session.host_failed(stale, HostFailure::Panicked, ""),
        Err(Refused::Stale { request: stale })
    );
    assert_eq!(session.machine(), &before);
    assert!(!session.has_batch());
}

/// A refusal judged against staged members stands only once they are durable.
#[test]
fn a_refusal_against_staged_members_waits_for_their_batch() {
    let mut session = Session::new(Machine::new(), Options::default());
    let first = session.feed(inject("c")).unwrap();
    // `c` is pending only in the staged batch: the retry's refusal joins it.
    let second = session.feed(inject("c")).unwrap();
    let refused = Refused::Rejected(Rejected::AlreadyPending("c".into()));
    let batch = session.seal().map(|append| append.batch).unwrap();
    let failed = session.failed(batch, Duration::ZERO).unwrap();
    assert_eq!(failed.members, [first, second]);
    // Fed again after the failure, the first is accepted and the second refused at once.
    let first = session.feed(inject("c")).unwrap();
    let batch = session.seal().map(|append| append.batch).unwrap();
    session.persisted(batch, Duration::ZERO).unwrap();
    assert_eq!(session.feed(inject("c")), Err(refused.clone()));
    // Staged behind another member, the refusal is released in its place.
    let other = session.feed(inject("d")).unwrap();
    let again = session.feed(inject("c")).unwrap();
    let batch = session.seal().map(|append| append.batch).unwrap();
    let acks: Vec<Release> = session
        .persisted(batch, Duration::ZERO)
        .unwrap()
        .filter(|release| matches!(release, Release::Ack(..)))
        .collect();
    assert_eq!(
        acks,
        [
            Release::Ack(other, Ack::Input { found: true }),
            Release::Ack(again, Ack::Refused(refused)),
        ]
    );
    assert_eq!(
        first,
        Ticket {
            batch: BatchNo(2),
            index: 0
        }
    );
}

/// Turn 1 running its pre-step, then cancelled (S39): its abort released at 0, so the default
/// 5-second grace runs for `PreStep { turn: 1, step: 1 }`.
fn cancelled_turn() -> Session {
    let mut session = Session::new(Machine::new(), Options::default());
    session.feed(followup("m1")).unwrap();
    persist(&mut session, Duration::ZERO);
    session.feed(cancel()).unwrap();
    persist(&mut session, Duration::ZERO);
    session
}

/// The first step of turn 1, answered or abandoned.
const PRE_STEP: Outstanding = Outstanding::PreStep { turn: 1, step: 1 };

/// Seals the staged batch and returns the machine's events in it.
fn sealed_events(session: &mut Session) -> Vec<Event> {
    session
        .seal()
        .map(|append| {
            append
                .entries
                .iter()
                .filter_map(|entry| match entry {
                    Entry::Machine(event) => Some(event.clone()),
                    Entry::Host(_) => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Seals and persists the staged batch at `now`.
fn persist(session: &mut Session, now: Duration) -> Vec<Release> {
    let Some(append) = session.seal() else {
        return Vec::new();
    };
    let batch = append.batch;
    session.persisted(batch, now).unwrap().collect()
}

/// What a release list says, one word per release: `ack`, or the effect's kind.
fn shape(released: &[Release]) -> Vec<String> {
    released
        .iter()
        .map(|release| match release {
            Release::Ack(ticket, _) => format!("ack{}", ticket.index),
            Release::Effect(Effect::Notify(Notification::Inserted { message })) => {
                format!("inserted:{}", message.id())
            }
            Release::Effect(Effect::Notify(Notification::Claimed { .. })) => "claimed".into(),
            Release::Effect(Effect::Notify(Notification::Status { .. })) => "status".into(),
            Release::Effect(Effect::Begin(_)) => "begin".into(),
            Release::Effect(Effect::Request(Request::PreStep { .. })) => "preStep".into(),
            Release::Effect(Effect::Abort(_)) => "abort".into(),
            Release::Effect(other) => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn a_persisted_batch_releases_each_members_effects_then_its_ack_in_input_order() {
    let mut session = Session::new(Machine::new(), Options::default());
    session.feed(followup("m1")).unwrap();
    session.feed(inject("m2")).unwrap();
    let released = persist(&mut session, Duration::ZERO);
    assert_eq!(
        shape(&released),
        [
            "inserted:m1",
            "status",
            "begin",
            "claimed",
            "preStep",
            "ack0",
            "inserted:m2",
            "ack1"
        ]
    );
    assert!(!session.has_batch() && !session.machine().is_batch_open());
    // The next batch has the next number.
    let ticket = session.feed(inject("m3")).unwrap();
    assert_eq!(
        ticket,
        Ticket {
            batch: BatchNo(2),
            index: 0
        }
    );
}

#[test]
fn s5_a_failed_batch_takes_every_member_back() {
    let mut session = Session::new(Machine::new(), Options::default());
    session.feed(inject("c")).unwrap();
    persist(&mut session, Duration::ZERO);
    let before = session.machine().clone();
    let first = session.feed(followup("m1")).unwrap();
    let second = session.feed(inject("m2")).unwrap();
    assert_eq!(session.machine().last_turn(), 1);
    let batch = session.seal().map(|append| append.batch).unwrap();
    let failed = session.failed(batch, Duration::ZERO).unwrap();
    assert_eq!(failed.members, [first, second]);
    assert!(failed.held.is_empty());
    assert_eq!(session.machine(), &before);
    assert!(!session.machine().is_batch_open());
    // The same inputs are accepted again (the ids are not pending or held), in batch 3.
    assert_eq!(
        session.feed(followup("m1")),
        Ok(Ticket {
            batch: BatchNo(3),
            index: 0
        })
    );
}

#[test]
fn a_sealed_batch_takes_no_member_and_batch_calls_must_name_it() {
    let mut session = Session::new(Machine::new(), Options::default());
    assert_eq!(session.seal().map(|append| append.batch), None);
    assert_eq!(
        session.persisted(BatchNo(1), Duration::ZERO).err(),
        Some(BatchMismatch::NotSealed)
    );
    session.feed(followup("m1")).unwrap();
    let batch = session.seal().map(|append| append.batch).unwrap();
    let before = session.machine().clone();
    assert_eq!(session.feed(inject("m2")), Err(Refused::Sealed));
    assert_eq!(session.record(1, 1, Vec::new()), Err(Refused::Sealed));
    assert_eq!(
        session.failed(BatchNo(9), Duration::ZERO),
        Err(BatchMismatch::Other {
            expected: batch,
            given: BatchNo(9)
        })
    );
    assert_eq!(session.machine(), &before);
    assert!(session.persisted(batch, Duration::ZERO).is_ok());
}

#[test]
fn a_rejected_first_member_leaves_no_batch_open() {
    let mut session = Session::new(Machine::new(), Options::default());
    session.feed(inject("m1")).unwrap();
    persist(&mut session, Duration::ZERO);
    assert_eq!(
        session.feed(inject("m1")),
        Err(Refused::Rejected(Rejected::AlreadyPending("m1".into())))
    );
    assert!(!session.has_batch() && !session.machine().is_batch_open());
    assert_eq!(session.seal().map(|append| append.batch), None);
}

#[test]
fn host_events_join_the_batch_inside_their_step() {
    let mut session = Session::new(Machine::new(), Options::default());
    session.feed(followup("m1")).unwrap();
    persist(&mut session, Duration::ZERO);
    let claimed: coxswain_core::Batch = [Message::user("m1", "hi")].into_iter().collect();
    session
        .feed(Input::PreStep(PreStepAnswer::Enter(claimed)))
        .unwrap();
    let event = HostEvent::new("model/output", json!({"text": "hello"})).unwrap();
    // The step opened in the staged batch: its events may join the same batch.
    let ticket = session.record(1, 1, vec![event]).unwrap();
    assert_eq!(ticket.index, 1);
    let entries: Vec<&str> = session
        .seal()
        .map(|append| append.entries.iter().map(Entry::kind).collect())
        .unwrap_or_default();
    assert_eq!(entries.last(), Some(&"model/output"));
    let released = persist(&mut session, Duration::ZERO);
    assert_eq!(released.last(), Some(&Release::Ack(ticket, Ack::Recorded)));
    assert_eq!(
        session.record(1, 2, Vec::new()),
        Err(Refused::StepClosed { turn: 1, step: 2 })
    );
}

#[test]
fn an_aborted_call_that_outlives_the_grace_is_answered_abandoned() {
    let options = Options {
        abort_grace: Duration::from_secs(5),
        ..Options::default()
    };
    let mut session = Session::new(Machine::new(), options);
    session.feed(followup("m1")).unwrap();
    persist(&mut session, Duration::from_secs(1));
    assert_eq!(session.poll_timeout(), None);
    session.feed(cancel()).unwrap();
    // No deadline before the abort is released: the batch may still fail.
    assert_eq!(session.poll_timeout(), None);
    let released = persist(&mut session, Duration::from_secs(10));
    assert_eq!(shape(&released), ["abort", "ack0"]);
    assert_eq!(session.poll_timeout(), Some(Duration::from_secs(15)));
    assert_eq!(session.handle_timeout(Duration::from_secs(14)), None);
    let request = Outstanding::PreStep { turn: 1, step: 1 };
    let Some(Timeout::Abandoned {
        request: gave_up,
        ticket,
    }) = session.handle_timeout(Duration::from_secs(15))
    else {
        panic!("the grace ran out");
    };
    assert_eq!((gave_up, ticket.index), (request, 0));
    assert_eq!(session.poll_timeout(), None);
    // A failure after a cancel ends the turn aborted (S38).
    assert_eq!(
        sealed_events(&mut session),
        [Event::TurnEnd {
            turn: 1,
            reason: TurnEndReason::Aborted {
                reason: CancelCause::User
            }
        }]
    );
    persist(&mut session, Duration::from_secs(15));
    assert_eq!(session.machine().outstanding(), None);
}

/// A failed batch's host answer is held, not lost: the call that gave it will not answer
/// twice, so the session stages it again once the retry pause is over.
#[test]
fn a_failed_batch_holds_its_host_answer_and_stages_it_again_after_the_pause() {
    let mut session = Session::new(Machine::new(), Options::default());
    session.feed(followup("m1")).unwrap();
    persist(&mut session, Duration::ZERO);
    let claimed: coxswain_core::Batch = [Message::user("m1", "hi")].into_iter().collect();
    let enter = Input::PreStep(PreStepAnswer::Enter(claimed));
    let inject_ticket = session.feed(inject("c")).unwrap();
    session.feed(enter).unwrap();
    let before = session.machine().clone();
    let batch = session.seal().map(|append| append.batch).unwrap();
    let failed = session.failed(batch, Duration::from_secs(3)).unwrap();
    let held = Ticket { batch, index: 1 };
    assert_eq!(
        (failed.members, failed.held),
        (vec![inject_ticket], vec![held])
    );
    // Rolled back: the request is outstanding again and nothing is staged before the pause.
    let request = Outstanding::PreStep { turn: 1, step: 1 };
    assert_eq!(session.machine().outstanding(), Some(request));
    assert!(!session.has_batch());
    assert_ne!(session.machine(), &before);
    let retry = Duration::from_secs(3) + Options::DEFAULT.retry_after;
    assert_eq!(session.poll_timeout(), Some(retry));
    assert_eq!(
        session.handle_timeout(retry - Duration::from_millis(1)),
        None
    );
    let staged = Ticket {
        batch: BatchNo(batch.0 + 1),
        index: 0,
    };
    assert_eq!(
        session.handle_timeout(retry),
        Some(Timeout::Retried {
            answers: vec![(held, Ok(staged))]
        })
    );
    assert_eq!(session.poll_timeout(), None);
    // Staged: the step it entered is the outstanding request now.
    let step = Outstanding::Step { turn: 1, step: 1 };
    assert_eq!(session.machine().outstanding(), Some(step));
    // Failed again, it is held again; persisted, it is released like any answer.
    let batch = session.seal().map(|append| append.batch).unwrap();
    let failed = session.failed(batch, retry).unwrap();
    assert_eq!((failed.members, failed.held), (vec![], vec![staged]));
    let again = retry + Options::DEFAULT.retry_after;
    let third = Ticket {
        batch: BatchNo(batch.0 + 1),
        index: 0,
    };
    assert_eq!(
        session.handle_timeout(again),
        Some(Timeout::Retried {
            answers: vec![(staged, Ok(third))]
        })
    );
    let released = persist(&mut session, again);
    assert_eq!(
        released.last(),
        Some(&Release::Ack(third, Ack::Input { found: true }))
    );
    assert_eq!(session.machine().outstanding(), Some(step));
}

/// S4, S5: a held answer whose request was answered meanwhile is refused when it is retried,
/// and changes nothing; an abort grace waits behind the retry (the held answer may be its).
#[test]
fn a_held_answer_is_retried_before_the_grace_and_refused_once_stale() {
    let mut session = cancelled_turn();
    let grace = session.poll_timeout().unwrap();
    session.feed(Input::PreStep(PreStepAnswer::Reject)).unwrap();
    let batch = session.seal().map(|append| append.batch).unwrap();
    // The pause runs past the grace: the grace waits for the retry.
    let late = grace - Duration::from_millis(50);
    session.failed(batch, late).unwrap();
    assert_eq!(
        session.poll_timeout(),
        Some(late + Options::DEFAULT.retry_after)
    );
    assert_eq!(session.handle_timeout(grace), None);
    // Another answer gets in first (a host that answered twice): the retry is stale.
    let request = Outstanding::PreStep { turn: 1, step: 1 };
    session
        .answer(request, Input::PreStep(PreStepAnswer::Reject))
        .unwrap();
    persist(&mut session, grace);
    let before = session.machine().clone();
    let Some(Timeout::Retried { answers }) =
        session.handle_timeout(late + Options::DEFAULT.retry_after)
    else {
        panic!("the retry is due");
    };
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].1, Err(Refused::Stale { request }));
    assert_eq!(session.machine(), &before);
    assert!(!session.has_batch());
    assert_eq!(session.poll_timeout(), None);
}

#[test]
fn a_failed_batch_holding_the_abandoned_answer_puts_the_grace_back() {
    let mut session = cancelled_turn();
    let deadline = session.poll_timeout().unwrap();
    assert!(session.handle_timeout(deadline).is_some());
    let batch = session.seal().map(|append| append.batch).unwrap();
    // The session's own answer is not handed back: the grace fires again instead.
    assert_eq!(
        session.failed(batch, deadline).map(|failed| failed.held),
        Ok(Vec::new())
    );
    // The answer was taken back: the request is outstanding and the grace fires again, once
    // the retry pause is over (a failing log is not written to again at once).
    let retry = deadline + Options::DEFAULT.retry_after;
    assert_eq!(session.poll_timeout(), Some(retry));
    assert_eq!(
        session.handle_timeout(retry - Duration::from_millis(1)),
        None
    );
    assert_eq!(
        session.handle_timeout(retry),
        Some(Timeout::Abandoned {
            request: PRE_STEP,
            ticket: Ticket {
                batch: BatchNo(batch.0 + 1),
                index: 0
            }
        })
    );
}

#[test]
fn a_call_answered_within_the_grace_is_not_abandoned() {
    let mut session = cancelled_turn();
    let deadline = session.poll_timeout().unwrap();
    session.feed(Input::PreStep(PreStepAnswer::Reject)).unwrap();
    persist(&mut session, Duration::ZERO);
    // Answered: the grace is over at once, so no driver wakes for it.
    assert_eq!(session.poll_timeout(), None);
    assert_eq!(session.handle_timeout(deadline), None);
}

#[test]
fn a_host_failure_is_answered_with_its_code() {
    let mut session = Session::new(Machine::new(), Options::default());
    let request = Outstanding::PreStep { turn: 1, step: 1 };
    assert_eq!(
        session.host_failed(request, HostFailure::Raised, "x"),
        Err(Refused::Stale { request })
    );
    session.feed(followup("m1")).unwrap();
    persist(&mut session, Duration::ZERO);
    session
        .host_failed(request, HostFailure::Panicked, "boom")
        .unwrap();
    let codes: Vec<String> = sealed_events(&mut session)
        .into_iter()
        .filter_map(|event| match event {
            Event::TurnEnd {
                reason: TurnEndReason::Error { error },
                ..
            } => Some(format!("{}: {}", error.code, error.message)),
            _ => None,
        })
        .collect();
    assert_eq!(
        codes,
        ["host-panicked: the host's preStep call panicked: boom"]
    );
}

/// A batch persisted within the retry pause shows the log takes writes again: the pause is
/// over, the held answer due at once; a grace put back by a failed batch waits out the pause.
#[test]
fn a_batch_persisted_within_the_pause_ends_it_and_a_grace_put_back_waits_it_out() {
    let mut session = Session::new(Machine::new(), Options::default());
    session.feed(followup("m1")).unwrap();
    persist(&mut session, Duration::ZERO);
    let claimed: coxswain_core::Batch = [Message::user("m1", "hi")].into_iter().collect();
    session
        .feed(Input::PreStep(PreStepAnswer::Enter(claimed)))
        .unwrap();
    let batch = session.seal().map(|append| append.batch).unwrap();
    session.failed(batch, Duration::ZERO).unwrap();
    assert_eq!(session.poll_timeout(), Some(Options::DEFAULT.retry_after));
    // An input within the pause, written on its own.
    let ten = Duration::from_millis(10);
    session.feed(inject("c")).unwrap();
    persist(&mut session, ten);
    assert_eq!(session.poll_timeout(), Some(ten));
    // Batch 2 failed holding the answer, batch 3 was the inject: the answer joins batch 4.
    assert_eq!(
        session.handle_timeout(ten),
        Some(Timeout::Retried {
            answers: vec![(
                Ticket { batch, index: 0 },
                Ok(Ticket {
                    batch: BatchNo(batch.0 + 2),
                    index: 0
                })
            )]
        })
    );
    // A grace whose deadline falls inside the pause of a failed batch is moved to its end.
    let mut session = cancelled_turn();
    assert_eq!(session.abort_deadline(), Some(Duration::from_secs(5)));
    session.feed(inject("c")).unwrap();
    let batch = session.seal().map(|append| append.batch).unwrap();
    let late = Duration::from_millis(4_950);
    session.failed(batch, late).unwrap();
    let pause_end = late + Options::DEFAULT.retry_after;
    assert_eq!(session.abort_deadline(), Some(pause_end));
    assert_eq!(session.poll_timeout(), Some(pause_end));
    assert_eq!(session.handle_timeout(Duration::from_secs(5)), None);
    assert_eq!(
        session.handle_timeout(pause_end),
        Some(Timeout::Abandoned {
            request: PRE_STEP,
            ticket: Ticket {
                batch: BatchNo(batch.0 + 1),
                index: 0
            }
        })
    );
}

/// No deadline a driver could never get past: none while a batch is being persisted, and
/// none for a grace whose request a staged member answered (a rollback brings it back).
#[test]
fn poll_timeout_names_only_a_deadline_that_can_fire() {
    let mut session = cancelled_turn();
    let grace = Duration::from_secs(5);
    assert_eq!(session.poll_timeout(), Some(grace));
    // Answered past its deadline, in a batch not yet sealed: nothing left to time.
    session.feed(Input::PreStep(PreStepAnswer::Reject)).unwrap();
    assert_eq!(session.poll_timeout(), None);
    assert_eq!(session.abort_deadline(), Some(grace));
    assert_eq!(session.handle_timeout(grace * 2), None);
    // Sealed: nothing until the write is settled; failed: the grace is back, behind no pause
    // (the batch held the answer, so the pause holds it back).
    let batch = session.seal().map(|append| append.batch).unwrap();
    assert_eq!(session.poll_timeout(), None);
    let now = grace * 2;
    let failed = session.failed(batch, now).unwrap();
    assert_eq!(failed.held.len(), 1);
    assert_eq!(
        session.poll_timeout(),
        Some(now + Options::DEFAULT.retry_after)
    );
}

/// An answer refused against a staged member (here: the same call's answer staged twice, as a
/// host that answered twice would) stands only if the batch does; the batch failed, both are
/// held, and the retry stages both again: the first is taken, the second refused again against
/// it, standing once the batch is durable (S4, S5).
#[test]
fn an_answer_refused_against_staged_members_is_held_if_their_batch_fails() {
    let mut session = Session::new(Machine::new(), Options::default());
    session.feed(followup("m1")).unwrap();
    persist(&mut session, Duration::ZERO);
    let first = session.feed(Input::PreStep(PreStepAnswer::Reject)).unwrap();
    let second = session.feed(Input::PreStep(PreStepAnswer::Reject)).unwrap();
    let batch = session.seal().map(|append| append.batch).unwrap();
    let failed = session.failed(batch, Duration::ZERO).unwrap();
    assert_eq!((failed.members, failed.held), (vec![], vec![first, second]));
    let retry = Options::DEFAULT.retry_after;
    let Some(Timeout::Retried { answers }) = session.handle_timeout(retry) else {
        panic!("the held answers are due");
    };
    let again = |index| Ticket {
        batch: BatchNo(batch.0 + 1),
        index,
    };
    assert_eq!(answers, [(first, Ok(again(0))), (second, Ok(again(1)))]);
    let acks: Vec<Release> = persist(&mut session, retry)
        .into_iter()
        .filter(|release| matches!(release, Release::Ack(..)))
        .collect();
    assert!(
        matches!(
            acks.as_slice(),
            [
                Release::Ack(_, Ack::Input { found: true }),
                Release::Ack(_, Ack::Refused(Refused::Rejected(_)))
            ]
        ),
        "{acks:?}"
    );
}
