//! The threads driver over the session layer: a turn runs to its end, inputs waiting together
//! share one append, a failed append fails only its batch and the agent goes on, an aborted
//! host call that ignores its cancellation is abandoned after the grace, and a log that cannot
//! say what it holds stops the agent.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use coxswain_core::{Config, Event, Input, Machine, Message, StepAnswer, TurnEndReason};
use coxswain_log::Entry;
use coxswain_session::Options;
use coxswain_threads::{open_log, Agent, AgentError, Host, Log, LogError};

/// A model that completes every step, or (`hang`) runs on until the test ends.
struct Model {
    hang: bool,
    steps: Arc<AtomicUsize>,
}

impl Host for Model {
    fn step(&self, _turn: u64, _step: u64, _cancelled: &AtomicBool) -> Result<StepAnswer, String> {
        self.steps.fetch_add(1, Ordering::SeqCst);
        if self.hang {
            std::thread::sleep(Duration::from_secs(3)); // ignores its cancellation
        }
        Ok(StepAnswer::Completed)
    }
}

fn model() -> Model {
    Model {
        hang: false,
        steps: Arc::default(),
    }
}

/// An in-memory log whose appends fail as `fail` says (the `n`th append, counting from 1).
#[derive(Clone, Default)]
struct Memory {
    events: Arc<Mutex<Vec<Event>>>,
    appends: Arc<AtomicUsize>,
    fail: Option<(usize, bool)>,
}

impl Log for Memory {
    fn append(&mut self, entries: &[Entry]) -> Result<(), LogError> {
        let n = self.appends.fetch_add(1, Ordering::SeqCst) + 1;
        match self.fail {
            Some((at, false)) if at == n => return Err(std::io::Error::other("disk full").into()),
            Some((at, true)) if at == n => {
                return Err(LogError::Indeterminate {
                    error: Arc::new(std::io::Error::other("eio")),
                    undo: Arc::new(std::io::Error::other("eio again")),
                })
            }
            _ => {}
        }
        let mut events = self.events.lock().unwrap();
        events.extend(entries.iter().filter_map(|entry| match entry {
            Entry::Machine(event) => Some(event.clone()),
            Entry::Host(_) => None,
        }));
        Ok(())
    }
}

fn user(id: &str) -> Input {
    Input::Followup(Message::user(id, "hi").into())
}

fn inject(id: &str) -> Input {
    Input::Inject(Message::user(id, "ctx").into())
}

#[test]
fn a_followup_runs_its_turn_and_a_file_log_resumes_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let (log, plan) = open_log(&path, Config::new()).unwrap();
    let agent = Agent::start(model(), log, plan.machine, Options::default());
    assert!(agent.input(user("m1")).unwrap());
    agent.when_idle().unwrap();
    agent.close();
    let (_, plan) = open_log(&path, Config::new()).unwrap();
    assert_eq!((plan.records, plan.machine.last_turn()), (7, 1));
    assert!(plan.closers.is_empty() && plan.machine.is_quiescent());
}

#[test]
fn a_failed_append_fails_its_batch_and_the_agent_goes_on() {
    let log = Memory {
        fail: Some((2, false)),
        ..Memory::default()
    };
    let agent = Agent::start(model(), log.clone(), Machine::new(), Options::default());
    assert!(agent.input(inject("a")).unwrap());
    assert!(matches!(
        agent.input(inject("b")),
        Err(AgentError::Persistence(_))
    ));
    // The machine was rolled back: `b` is not pending, so it is accepted again.
    assert!(agent.input(inject("b")).unwrap());
    agent.close();
    let events = log.events.lock().unwrap().clone();
    let restored = Machine::restore_events(&events, 0).unwrap();
    let ids: Vec<String> = restored
        .pending(coxswain_core::Target::NextStep)
        .map(|item| item.message().id().to_string())
        .collect();
    assert_eq!(ids, ["a", "b"]);
}

#[test]
fn a_failed_append_of_a_host_answer_is_fed_again_and_the_turn_ends() {
    // Append 1: the followup; 2: the pre-step answer (fails, fed again); then the rest.
    let log = Memory {
        fail: Some((2, false)),
        ..Memory::default()
    };
    let agent = Agent::start(model(), log.clone(), Machine::new(), Options::default());
    agent.input(user("m1")).unwrap();
    agent.when_idle().unwrap();
    agent.close();
    let events = log.events.lock().unwrap().clone();
    assert_eq!(
        events.last(),
        Some(&Event::TurnEnd {
            turn: 1,
            reason: TurnEndReason::Completed
        })
    );
}

#[test]
fn an_aborted_call_that_ignores_its_cancellation_is_abandoned_after_the_grace() {
    let steps = Arc::new(AtomicUsize::new(0));
    let host = Model {
        hang: true,
        steps: steps.clone(),
    };
    let log = Memory::default();
    let options = Options {
        abort_grace: Duration::from_millis(50),
        ..Options::default()
    };
    let agent = Agent::start(host, log.clone(), Machine::new(), options);
    agent.input(user("m1")).unwrap();
    while steps.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    agent.cancel().unwrap();
    agent.when_idle().unwrap(); // well before the hung step would return
    agent.close();
    let events = log.events.lock().unwrap().clone();
    assert!(events.contains(&Event::TurnEnd {
        turn: 1,
        reason: TurnEndReason::Aborted {
            reason: coxswain_core::CancelCause::User
        }
    }));
}

#[test]
fn a_log_that_cannot_say_what_it_holds_stops_the_agent() {
    let log = Memory {
        fail: Some((1, true)),
        ..Memory::default()
    };
    let agent = Agent::start(model(), log, Machine::new(), Options::default());
    assert!(matches!(
        agent.input(inject("a")),
        Err(AgentError::Indeterminate(_))
    ));
    assert!(matches!(agent.input(inject("b")), Err(AgentError::Stopped)));
    agent.close();
}

/// S58: `fate` is answered once the driver thread has stopped, from the machine it left: the
/// batch the indeterminate append failed was taken back (`a` is unknown), what was durable
/// before it is still answered (`b` pending).
#[test]
fn fate_is_answered_after_the_driver_stopped() {
    let log = Memory {
        fail: Some((2, true)),
        ..Memory::default()
    };
    let config = Config::new().with_delivery_memory(8);
    let agent = Agent::start(
        model(),
        log,
        Machine::with_config(config),
        Options::default(),
    );
    assert!(agent.input(inject("b")).unwrap());
    assert!(matches!(
        agent.input(inject("a")),
        Err(AgentError::Indeterminate(_))
    ));
    assert!(matches!(agent.resume(), Err(AgentError::Stopped)));
    let pending = coxswain_core::Fate::Pending {
        target: coxswain_core::Target::NextStep,
    };
    assert_eq!(agent.fate("b"), pending);
    assert_eq!(agent.fate("a"), coxswain_core::Fate::Unknown);
    agent.close();
}

/// Every file log detects a removed or replaced file (issue 26): nothing more is written, each
/// append fails, and the agent goes on.
#[test]
fn a_removed_or_replaced_file_log_writes_nothing_more() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let (log, plan) = open_log(&path, Config::new()).unwrap();
    let agent = Agent::start(model(), log, plan.machine, Options::default());
    assert!(agent.input(inject("a")).unwrap());
    let written = std::fs::read(&path).unwrap();
    std::fs::rename(&path, dir.path().join("moved.jsonl")).unwrap();
    std::fs::write(&path, b"").unwrap(); // another file under the name
    let refused = agent.input(inject("b"));
    let replaced = |e: &LogError| matches!(e, LogError::Replaced { path: p } if *p == path);
    assert!(
        matches!(&refused, Err(AgentError::Persistence(e)) if replaced(e)),
        "{refused:?}"
    );
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(
        agent.input(inject("c")),
        Err(AgentError::Persistence(_))
    ));
    agent.close();
    assert_eq!(
        std::fs::read(dir.path().join("moved.jsonl")).unwrap(),
        written
    );
}
