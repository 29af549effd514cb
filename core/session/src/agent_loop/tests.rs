//! The agent loop's unit tests: each decision the loop owns, pinned on exact outputs.

use super::*;
use crate::hooks::Hooks;
use coxswain_core::{CancelCause, Message, PreStepAnswer, StepAnswer};

const T0: Duration = Duration::ZERO;

fn followup(id: &str) -> Command {
    Command::Input(Input::Followup(Message::user(id, "hi").into()))
}

fn steer(id: &str) -> Command {
    Command::Input(Input::Steer(Message::user(id, "look").into()))
}

fn cancel() -> Command {
    Command::Input(Input::Cancel {
        cause: CancelCause::User,
        keep_inbox: false,
    })
}

fn agent(hooks: Hooks) -> AgentLoop<&'static str> {
    AgentLoop::new(
        Machine::new(),
        Options {
            hooks,
            ..Options::DEFAULT
        },
    )
}

/// One write that succeeds: its records' types.
fn write(agent: &mut AgentLoop<&'static str>) -> Vec<String> {
    write_with(agent, Ok(()), T0)
}

fn write_with(
    agent: &mut AgentLoop<&'static str>,
    result: Result<(), LogFailure>,
    now: Duration,
) -> Vec<String> {
    let Some(append) = agent.poll_append(now) else {
        return Vec::new();
    };
    let batch = append.batch;
    let kinds = append.entries.iter().map(|e| e.kind().to_owned()).collect();
    agent.appended(batch, result, now).unwrap();
    kinds
}

/// Every output so far, spelled short: `reply W kind`, `request KIND`, `effect`, ...
fn outputs(agent: &mut AgentLoop<&'static str>) -> Vec<String> {
    std::iter::from_fn(|| agent.poll_output())
        .map(|output| match output {
            Output::Reply(w, Ok(Reply::Delivered { found })) => format!("{w}: delivered {found}"),
            Output::Reply(
                w,
                Ok(Reply::Pending {
                    next_turn,
                    next_step,
                }),
            ) => {
                format!("{w}: pending {} {}", next_turn.len(), next_step.len())
            }
            Output::Reply(w, Ok(Reply::Fate(fate))) => format!("{w}: fate {}", fate.to_json()),
            Output::Reply(w, Ok(reply)) => format!("{w}: {reply:?}"),
            Output::Reply(w, Err(failure)) => format!("{w}: error {}", failure.kind()),
            Output::Effect(Effect::Request(request)) => {
                format!("request {}", request.outstanding().kind())
            }
            Output::Effect(Effect::Notify(_)) => "notify".to_owned(),
            Output::Effect(effect) => format!("{effect:?}"),
            Output::StartJob(w) => format!("start job {w}"),
            Output::Abandon(request) => format!("abandon {}", request.kind()),
            Output::Ended(ending) => format!("ended {}", ending.kind()),
        })
        .filter(|line| line != "notify")
        .collect()
}

fn running(agent: &AgentLoop<&'static str>) -> Outstanding {
    agent.running_call().map(Request::outstanding).unwrap()
}

/// Issue 51: with neither hook written, a quiet turn is two appends: the session answers the
/// pre-step and the turn-stopping requests inside the batches that made them (S29, S33).
#[test]
fn a_quiet_turn_without_hooks_is_two_appends() {
    let mut agent = agent(Hooks::NONE);
    agent.submit(followup("m1"), "a");
    assert_eq!(
        write(&mut agent),
        [
            "agent/inbox/spliced",
            "turn/start",
            "agent/inbox/spliced",
            "step/start",
            "user/message"
        ]
    );
    assert_eq!(
        outputs(&mut agent),
        ["Begin(Turn(1))", "request step", "a: delivered true"]
    );
    agent.host_answered(
        running(&agent),
        HostReply::Answer(Input::Step(StepAnswer::Completed)),
    );
    assert_eq!(write(&mut agent), ["step/end", "turn/end"]);
    assert_eq!(outputs(&mut agent), Vec::<String>::new());
    assert!(agent.machine().is_quiescent());
}

/// With both hooks written the host is asked each time: four appends.
#[test]
fn a_quiet_turn_with_both_hooks_is_four_appends() {
    let mut agent = agent(Hooks::ALL);
    agent.submit(followup("m1"), "a");
    assert_eq!(
        write(&mut agent),
        ["agent/inbox/spliced", "turn/start", "agent/inbox/spliced"]
    );
    assert_eq!(
        outputs(&mut agent),
        ["Begin(Turn(1))", "request preStep", "a: delivered true"]
    );
    agent.host_answered(running(&agent), HostReply::Nothing); // enters the claimed batch
    assert_eq!(write(&mut agent), ["step/start", "user/message"]);
    assert_eq!(outputs(&mut agent), ["request step"]);
    agent.host_answered(
        running(&agent),
        HostReply::Answer(Input::Step(StepAnswer::Completed)),
    );
    assert_eq!(write(&mut agent), ["step/end"]);
    assert_eq!(outputs(&mut agent), ["request turnStopping"]);
    agent.host_answered(running(&agent), HostReply::Nothing); // done
    assert_eq!(write(&mut agent), ["turn/end"]);
    assert!(agent.machine().is_quiescent());
}

fn turn_end_code(agent: &mut AgentLoop<&'static str>) -> Option<String> {
    let append = agent.poll_append(T0)?;
    let batch = append.batch;
    let code = append.entries.iter().find_map(|entry| match entry {
        coxswain_log::Entry::Machine(coxswain_core::Event::TurnEnd {
            reason: coxswain_core::TurnEndReason::Error { error },
            ..
        }) => Some(error.code.to_string()),
        _ => None,
    });
    agent.appended(batch, Ok(()), T0).unwrap();
    code
}

/// Issue 51: a step that returns nothing gave no answer: `fail host-invalid-answer` (S38).
#[test]
fn a_step_returning_nothing_fails_the_turn_as_an_invalid_answer() {
    let mut agent = agent(Hooks::NONE);
    agent.submit(followup("m1"), "a");
    write(&mut agent);
    agent.host_answered(running(&agent), HostReply::Nothing);
    assert_eq!(
        turn_end_code(&mut agent).as_deref(),
        Some("host-invalid-answer")
    );
}

/// Issue 51: an answer the session refuses (here a step's answer to the pre-step request) is
/// an invalid answer, so the turn ends instead of waiting forever; nothing is dropped silently.
#[test]
fn a_refused_host_answer_fails_the_call_instead_of_stalling() {
    let mut agent = agent(Hooks::ALL);
    agent.submit(followup("m1"), "a");
    write(&mut agent);
    outputs(&mut agent);
    let pre_step = running(&agent);
    agent.host_answered(
        pre_step,
        HostReply::Answer(Input::Step(StepAnswer::Completed)),
    );
    assert_eq!(
        turn_end_code(&mut agent).as_deref(),
        Some("host-invalid-answer")
    );
    assert_eq!(outputs(&mut agent), Vec::<String>::new());
    assert!(agent.machine().is_quiescent());
}

/// The same refusal against staged members (a steer staged before the answer) is no member:
/// the answer's place goes to the session's `fail`.
#[test]
fn a_refused_answer_behind_staged_members_is_failed_too() {
    let mut agent = agent(Hooks::ALL);
    agent.submit(followup("m1"), "a");
    write(&mut agent);
    outputs(&mut agent);
    let pre_step = running(&agent);
    agent.submit(steer("s1"), "b");
    agent.host_answered(
        pre_step,
        HostReply::Answer(Input::Step(StepAnswer::Continue)),
    );
    // The steer joined turn 1's NS; the pre-step's failure ends turn 1 with the invalid
    // answer's code (S38), and the steer, still pending, opens turn 2.
    assert_eq!(
        turn_end_code(&mut agent).as_deref(),
        Some("host-invalid-answer")
    );
    assert_eq!(outputs(&mut agent)[..1], ["b: delivered true".to_owned()]);
}

/// S4: an answer for a call that is not the running one is dropped: no member, no write.
#[test]
fn a_stale_host_answer_is_dropped() {
    let mut agent = agent(Hooks::NONE);
    agent.submit(followup("m1"), "a");
    write(&mut agent);
    outputs(&mut agent);
    let stale = Outstanding::Step { turn: 9, step: 1 };
    agent.host_answered(stale, HostReply::Answer(Input::Step(StepAnswer::Completed)));
    assert!(agent.poll_append(T0).is_none());
    assert_eq!(outputs(&mut agent), Vec::<String>::new());
    assert_eq!(
        agent.machine().outstanding(),
        Some(Outstanding::Step { turn: 1, step: 1 })
    );
}

/// Issue 51: `pending` ends the batch before it and sees exactly the durable state of what was
/// sent before it; what comes after it is the next batch.
#[test]
fn pending_ends_the_batch_and_answers_the_durable_state() {
    let mut agent = agent(Hooks::NONE);
    agent.submit(followup("m1"), "a");
    agent.submit(followup("m2"), "b");
    agent.submit(Command::Pending, "p");
    agent.submit(followup("m3"), "c");
    assert_eq!(write(&mut agent).len(), 6); // m1 (splice, start, claim, step/start, entered), m2
    assert_eq!(
        outputs(&mut agent),
        [
            "Begin(Turn(1))",
            "request step",
            "a: delivered true",
            "b: delivered true"
        ]
    );
    assert_eq!(write(&mut agent), ["agent/inbox/spliced"]); // m3, after the pending was answered
    assert_eq!(outputs(&mut agent), ["p: pending 1 0", "c: delivered true"]);
}

/// The stop policy: a failed append fails its callers and the agent goes on.
#[test]
fn a_failed_append_fails_its_members_and_the_agent_goes_on() {
    let mut agent = agent(Hooks::NONE);
    agent.submit(followup("m1"), "a");
    write_with(&mut agent, Err(LogFailure::Failed), T0);
    assert_eq!(outputs(&mut agent), ["a: error persistence"]);
    assert_eq!(agent.machine(), &Machine::new());
    agent.submit(followup("m1"), "a");
    write(&mut agent);
    assert_eq!(
        outputs(&mut agent),
        ["Begin(Turn(1))", "request step", "a: delivered true"]
    );
}

/// A held answer survives its batch's failure: the job's caller waits for the retry's outcome,
/// not for the failed batch's.
#[test]
fn a_held_job_end_keeps_its_waiter_through_the_retry() {
    let mut agent = agent(Hooks::NONE);
    agent.submit(Command::Maintenance, "job");
    write(&mut agent);
    assert_eq!(outputs(&mut agent), ["Begin(Maintenance)", "start job job"]);
    agent.job_ended("job");
    write_with(&mut agent, Err(LogFailure::Failed), T0);
    assert_eq!(outputs(&mut agent), Vec::<String>::new()); // held, not failed
    let retry = agent.poll_timeout().unwrap();
    assert_eq!(retry, Options::DEFAULT.retry_after);
    agent.handle_timeout(retry);
    write_with(&mut agent, Ok(()), retry);
    assert_eq!(outputs(&mut agent), ["job: JobDone"]);
}

/// The stop policy: an indeterminate append ends the agent; its callers learn it once the
/// ending is published, later ones are told the agent stopped, and `fate` still answers (S58).
#[test]
fn an_indeterminate_append_stops_the_agent() {
    let mut agent = agent(Hooks::NONE);
    agent.submit(followup("m1"), "a");
    write_with(&mut agent, Err(LogFailure::Indeterminate), T0);
    agent.submit(followup("m2"), "b");
    assert_eq!(outputs(&mut agent), ["ended stopped"]);
    assert!(agent.poll_append(T0).is_none());
    agent.finish();
    agent.submit(Command::Fate(MessageId::from("m1")), "f");
    assert_eq!(
        outputs(&mut agent),
        [
            "a: error indeterminate",
            "b: error stopped",
            "f: fate \"unknown\""
        ]
    );
}

/// A fenced append stops the agent; its members were not written (`persistence`).
#[test]
fn a_fenced_append_stops_the_agent_and_fails_its_members() {
    let mut agent = agent(Hooks::NONE);
    agent.submit(followup("m1"), "a");
    write_with(&mut agent, Err(LogFailure::Fenced), T0);
    agent.finish();
    assert_eq!(
        outputs(&mut agent),
        ["a: error persistence", "ended stopped"]
    );
}

/// `close` is answered once what was sent before it is durable and the agent has ended.
#[test]
fn close_ends_after_the_batch_before_it() {
    let mut agent = agent(Hooks::NONE);
    agent.submit(followup("m1"), "a");
    agent.submit(Command::Close, "close");
    agent.submit(followup("m2"), "b");
    write(&mut agent);
    assert!(agent.poll_append(T0).is_none());
    assert_eq!(
        outputs(&mut agent),
        [
            "Begin(Turn(1))",
            "request step",
            "a: delivered true",
            "ended closed"
        ]
    );
    agent.finish();
    agent.submit(Command::Close, "again");
    assert_eq!(
        outputs(&mut agent),
        [
            "close: Closed(Closed)",
            "b: error closed",
            "again: Closed(Closed)"
        ]
    );
}

/// S38, S39: an aborted call that outlives the grace is abandoned and answered `fail`; its late
/// answer is dropped.
#[test]
fn a_deaf_call_is_abandoned_after_the_grace() {
    let mut agent = agent(Hooks::NONE);
    agent.submit(followup("m1"), "a");
    write(&mut agent);
    outputs(&mut agent);
    let step = running(&agent);
    agent.submit(cancel(), "c");
    write(&mut agent);
    assert_eq!(
        outputs(&mut agent),
        ["Abort(Abort { cause: User })", "c: delivered true"]
    );
    let deadline = agent.poll_timeout().unwrap();
    assert_eq!(deadline, Options::DEFAULT.abort_grace);
    agent.handle_timeout(deadline);
    assert_eq!(turn_end_code(&mut agent), None); // a cancelled turn ends `cancelled`
    assert_eq!(outputs(&mut agent), ["abandon step"]);
    agent.host_answered(step, HostReply::Answer(Input::Step(StepAnswer::Completed)));
    assert!(agent.poll_append(deadline).is_none());
    assert!(agent.machine().is_quiescent());
}

/// A refusal against the durable state is the caller's at once, with its kind (decision 7).
#[test]
fn a_refused_command_is_answered_at_once_with_its_kind() {
    let mut agent = agent(Hooks::NONE);
    agent.submit(followup("m1"), "a");
    write(&mut agent);
    outputs(&mut agent);
    agent.submit(followup("m2"), "b");
    write(&mut agent);
    agent.submit(followup("m2"), "again");
    assert!(agent.poll_append(T0).is_none());
    assert_eq!(
        outputs(&mut agent),
        ["b: delivered true", "again: error already-pending"]
    );
}

/// A dispose ends the batch it joined and the agent; `fate` is still answered (S58).
#[test]
fn dispose_ends_the_agent() {
    let mut agent = agent(Hooks::NONE);
    agent.submit(Command::Input(Input::Dispose {}), "d");
    agent.submit(followup("m1"), "late");
    write(&mut agent);
    assert_eq!(outputs(&mut agent), ["d: delivered true", "ended disposed"]);
    agent.finish();
    assert_eq!(outputs(&mut agent), ["late: error disposed"]);
}

/// Issue 51: one vocabulary of kind names for every language.
#[test]
fn kind_names() {
    let kinds: Vec<&str> = [
        Failure::Persistence,
        Failure::Indeterminate,
        Failure::Ended(Ending::Closed),
        Failure::Ended(Ending::Disposed),
        Failure::Ended(Ending::Stopped(LogFailure::Fenced)),
        Failure::Refused(Refused::Sealed),
    ]
    .iter()
    .map(Failure::kind)
    .collect();
    assert_eq!(
        kinds,
        [
            "persistence",
            "indeterminate",
            "closed",
            "disposed",
            "stopped",
            Refused::Sealed.kind()
        ]
    );
    assert!(!LogFailure::Failed.stops_the_agent());
    assert!(LogFailure::Indeterminate.stops_the_agent() && LogFailure::Fenced.stops_the_agent());
}

#[test]
fn the_defaults_are_owned_here() {
    let defaults = Options::DEFAULT;
    assert_eq!(defaults.abort_grace, Duration::from_secs(5));
    assert_eq!(defaults.retry_after, Duration::from_millis(100));
    assert_eq!(defaults.max_batch, 64);
    assert_eq!(defaults.hooks, Hooks::ALL);
    let _ = PreStepAnswer::Reject;
}

/// A grace that fires again after the batch holding the abandoned call's `fail` failed stages the
/// `fail` again, but the call was dropped once: one `Abandon` per call.
#[test]
fn a_call_is_abandoned_once_even_when_its_fail_is_staged_twice() {
    let mut agent = agent(Hooks::NONE);
    agent.submit(followup("m1"), "a");
    write(&mut agent);
    agent.submit(cancel(), "c");
    write(&mut agent);
    outputs(&mut agent);
    let deadline = agent.poll_timeout().unwrap();
    agent.handle_timeout(deadline);
    write_with(&mut agent, Err(LogFailure::Failed), deadline);
    assert_eq!(outputs(&mut agent), ["abandon step"]);
    let again = agent.poll_timeout().unwrap();
    assert_eq!(again, deadline + Options::DEFAULT.retry_after);
    agent.handle_timeout(again);
    write_with(&mut agent, Ok(()), again);
    assert_eq!(outputs(&mut agent), Vec::<String>::new());
    assert!(agent.machine().is_quiescent());
}
