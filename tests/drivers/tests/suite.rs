//! One driver suite, run against every Rust driver over the session layer (issue 26): the tokio
//! driver (`coxswain-tokio`, through a runtime) and the threads driver (`coxswain-threads`). Each
//! test is written once against [`Driver`] and instantiated per driver by [`suite!`]; both
//! drivers must write the same log and answer the same way. Covered: a follow-up's turn, a
//! failed append survived (S5 extended to failed persistence), a failed append of a host answer
//! written again, an indeterminate append stopping the agent, a host panic (`host-panicked`),
//! and a deaf host abandoned after the abort grace (`host-abandoned`, S38–S40).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use coxswain_core::{Event, Input, Machine, Message, StepAnswer, TurnEndReason};
use coxswain_log::Entry;
use coxswain_session::Options;

/// How long an aborted call may run on in these tests.
const GRACE: Duration = Duration::from_millis(200);
/// How long a deaf host's step runs, ignoring its cancellation.
const DEAF: Duration = Duration::from_secs(10);

/// What the host does at every step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Script {
    Complete,
    Panic,
    /// Runs for [`DEAF`], ignoring its cancellation, then completes.
    Deaf,
}

/// How the next append fails, if it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Cut back cleanly: the batch is not in the log.
    Clean,
    /// The cut-back failed too: the batch may or may not be in the log.
    Indeterminate,
}

/// The log both drivers write to: the machine's events, and the faults of the next appends
/// (`faults[0]` is for the next one; `None` succeeds).
#[derive(Clone, Debug, Default)]
struct Shared {
    events: Arc<Mutex<Vec<Event>>>,
    faults: Arc<Mutex<Vec<Option<Fault>>>>,
}

impl Shared {
    fn with_faults(faults: &[Option<Fault>]) -> Self {
        let shared = Shared::default();
        *lock(&shared.faults) = faults.to_vec();
        shared
    }

    /// The next append's fault, or `None` (it is written).
    fn append(&self, entries: &[Entry]) -> Option<Fault> {
        let mut faults = lock(&self.faults);
        let fault = if faults.is_empty() {
            None
        } else {
            faults.remove(0)
        };
        if fault.is_none() {
            lock(&self.events).extend(entries.iter().filter_map(|entry| match entry {
                Entry::Machine(event) => Some(event.clone()),
                Entry::Host(_) => None,
            }));
        }
        fault
    }

    fn types(&self) -> Vec<&'static str> {
        lock(&self.events).iter().map(Event::kind).collect()
    }

    fn turn_ends(&self) -> Vec<TurnEndReason> {
        lock(&self.events)
            .iter()
            .filter_map(|event| match event {
                Event::TurnEnd { reason, .. } => Some(reason.clone()),
                _ => None,
            })
            .collect()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How a call failed, in both drivers' words.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Failure {
    Persistence,
    Indeterminate,
    Stopped,
    Other(String),
}

/// One Rust driver, driven by blocking calls.
trait Driver: Sized {
    fn open(script: Script, log: Shared) -> Self;
    fn followup(&self, id: &str) -> Result<(), Failure>;
    fn cancel(&self) -> Result<(), Failure>;
    fn when_idle(&self);
    fn close(self);
}

/// The records of one follow-up's turn (S22, S28, S31, S34).
const TURN: [&str; 7] = [
    "agent/inbox/spliced",
    "turn/start",
    "agent/inbox/spliced",
    "step/start",
    "user/message",
    "step/end",
    "turn/end",
];

fn a_followup_runs_its_turn<D: Driver>() {
    let log = Shared::default();
    let agent = D::open(Script::Complete, log.clone());
    assert_eq!(agent.followup("m1"), Ok(()));
    agent.when_idle();
    agent.close();
    assert_eq!(log.types(), TURN);
    assert_eq!(log.turn_ends(), [TurnEndReason::Completed]);
}

/// S5 extended to a failed persistence: the batch is taken back, the caller told, the agent
/// goes on and the same input is delivered once.
fn a_failed_append_fails_its_batch_and_the_agent_goes_on<D: Driver>() {
    let log = Shared::with_faults(&[Some(Fault::Clean)]);
    let agent = D::open(Script::Complete, log.clone());
    assert_eq!(agent.followup("m1"), Err(Failure::Persistence));
    assert_eq!(log.types(), Vec::<&str>::new());
    assert_eq!(agent.followup("m1"), Ok(()));
    agent.when_idle();
    agent.close();
    assert_eq!(log.types(), TURN);
}

/// A host answer in a failed batch is handed back and written again: its call will not answer
/// twice, and the turn still ends (once).
fn a_failed_append_of_a_host_answer_is_written_again<D: Driver>() {
    // Append 1: the follow-up and its claim; 2: the pre-step answer (fails); then the rest.
    let log = Shared::with_faults(&[None, Some(Fault::Clean)]);
    let agent = D::open(Script::Complete, log.clone());
    assert_eq!(agent.followup("m1"), Ok(()));
    agent.when_idle();
    agent.close();
    assert_eq!(log.types(), TURN);
}

/// Only an append that may or may not be in the log stops the agent.
fn an_indeterminate_append_stops_the_agent<D: Driver>() {
    let log = Shared::with_faults(&[Some(Fault::Indeterminate)]);
    let agent = D::open(Script::Complete, log.clone());
    assert_eq!(agent.followup("m1"), Err(Failure::Indeterminate));
    assert_eq!(agent.followup("m2"), Err(Failure::Stopped));
    agent.close();
    assert_eq!(log.types(), Vec::<&str>::new());
}

/// S38: a host call that panicked answers `fail` with the session's code.
fn a_host_panic_ends_the_turn_host_panicked<D: Driver>() {
    let log = Shared::default();
    let agent = D::open(Script::Panic, log.clone());
    assert_eq!(agent.followup("m1"), Ok(()));
    agent.when_idle();
    agent.close();
    let codes: Vec<String> = log
        .turn_ends()
        .into_iter()
        .map(|reason| match reason {
            TurnEndReason::Error { error } => error.code.to_string(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(codes, ["host-panicked"]);
}

/// S38–S40: an aborted call that ignores its cancellation is abandoned after the grace, so the
/// cancel ends the turn long before the call would have returned.
fn a_deaf_host_is_abandoned_after_the_grace<D: Driver>() {
    let log = Shared::default();
    let agent = D::open(Script::Deaf, log.clone());
    assert_eq!(agent.followup("m1"), Ok(()));
    while !log.types().contains(&"step/start") {
        std::thread::sleep(Duration::from_millis(5));
    }
    let cancelled = Instant::now();
    assert_eq!(agent.cancel(), Ok(()));
    agent.when_idle();
    assert!(cancelled.elapsed() < DEAF, "the grace never fired");
    agent.close();
    let user = coxswain_core::CancelCause::User;
    assert_eq!(log.turn_ends(), [TurnEndReason::Aborted { reason: user }]);
}

/// Instantiates every test of the suite for one driver.
macro_rules! suite {
    ($module:ident, $driver:ty) => {
        mod $module {
            suite!(@tests $driver;
                a_followup_runs_its_turn,
                a_failed_append_fails_its_batch_and_the_agent_goes_on,
                a_failed_append_of_a_host_answer_is_written_again,
                an_indeterminate_append_stops_the_agent,
                a_host_panic_ends_the_turn_host_panicked,
                a_deaf_host_is_abandoned_after_the_grace);
        }
    };
    (@tests $driver:ty; $($test:ident),*) => {
        $(
            #[test]
            fn $test() {
                super::$test::<$driver>();
            }
        )*
    };
}

suite!(tokio_driver, super::tokio_impl::Tokio);
suite!(threads_driver, super::threads_impl::Threads);

fn followup(id: &str) -> Message {
    Message::user(id, "hi")
}

mod tokio_impl {
    use super::*;
    use coxswain_tokio::{
        Agent, AgentError, DurableLog, Host, LogError, MemoryLog, ReadBack, StepContext,
    };
    use std::ops::ControlFlow;

    pub(super) struct Tokio {
        runtime: tokio::runtime::Runtime,
        agent: Agent,
    }

    struct Scripted(Script);

    impl Host for Scripted {
        async fn step(&self, _cx: StepContext) -> StepAnswer {
            match self.0 {
                Script::Complete => {}
                Script::Panic => panic!("the host's step panicked"),
                Script::Deaf => tokio::time::sleep(DEAF).await,
            }
            StepAnswer::Completed
        }
    }

    /// The shared log behind the tokio adapter's [`DurableLog`].
    struct Log(Shared, MemoryLog);

    impl DurableLog for Log {
        async fn read_back(
            &mut self,
            visit: &mut (dyn FnMut(coxswain_log::Record) -> ControlFlow<()> + Send),
        ) -> Result<ReadBack, LogError> {
            self.1.read_back(visit).await
        }

        async fn repair_tail(&mut self) -> Result<(), LogError> {
            self.1.repair_tail().await
        }

        async fn append(&mut self, batch: &[Entry]) -> Result<u64, LogError> {
            match self.0.append(batch) {
                None => self.1.append(batch).await,
                Some(Fault::Clean) => Err(std::io::Error::other("disk full").into()),
                Some(Fault::Indeterminate) => Err(LogError::Indeterminate {
                    error: Arc::new(std::io::Error::other("eio")),
                    undo: Arc::new(std::io::Error::other("eio again")),
                }),
            }
        }

        async fn sync(&mut self) -> Result<(), LogError> {
            Ok(())
        }
    }

    fn failure(error: AgentError) -> Failure {
        match error {
            AgentError::Persistence(_) => Failure::Persistence,
            AgentError::Indeterminate(_) => Failure::Indeterminate,
            AgentError::Stopped => Failure::Stopped,
            other => Failure::Other(other.to_string()),
        }
    }

    impl Driver for Tokio {
        fn open(script: Script, log: Shared) -> Self {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            let mut options = coxswain_tokio::Options::default();
            options.abort_grace = GRACE;
            let opened = Agent::open_with(options, Scripted(script), Log(log, MemoryLog::new()));
            let (agent, _) = runtime.block_on(opened).unwrap();
            Tokio { runtime, agent }
        }

        fn followup(&self, id: &str) -> Result<(), Failure> {
            let sent = self.agent.followup(super::followup(id));
            self.runtime.block_on(sent).map_err(failure)
        }

        fn cancel(&self) -> Result<(), Failure> {
            let cancel = self.agent.cancel(coxswain_core::CancelCause::User, false);
            self.runtime.block_on(cancel).map_err(failure)
        }

        fn when_idle(&self) {
            let _ = self.runtime.block_on(self.agent.when_idle());
        }

        fn close(self) {
            let _ = self.runtime.block_on(self.agent.close());
        }
    }
}

mod threads_impl {
    use super::*;
    use coxswain_threads::{Agent, AgentError, Host, Log, LogError};

    pub(super) struct Threads(Agent);

    struct Scripted(Script);

    impl Host for Scripted {
        fn step(&self, _: u64, _: u64, _cancelled: &AtomicBool) -> Result<StepAnswer, String> {
            match self.0 {
                Script::Complete => {}
                Script::Panic => panic!("the host's step panicked"),
                Script::Deaf => std::thread::sleep(DEAF),
            }
            Ok(StepAnswer::Completed)
        }
    }

    struct Blocking(Shared);

    impl Log for Blocking {
        fn append(&mut self, entries: &[Entry]) -> Result<(), LogError> {
            match self.0.append(entries) {
                None => Ok(()),
                Some(Fault::Clean) => Err(std::io::Error::other("disk full").into()),
                Some(Fault::Indeterminate) => Err(LogError::Indeterminate {
                    error: std::io::Error::other("eio"),
                    undo: std::io::Error::other("eio again"),
                }),
            }
        }
    }

    fn failure(error: AgentError) -> Failure {
        match error {
            AgentError::Persistence(_) => Failure::Persistence,
            AgentError::Indeterminate(_) => Failure::Indeterminate,
            AgentError::Stopped => Failure::Stopped,
            other => Failure::Other(other.to_string()),
        }
    }

    impl Driver for Threads {
        fn open(script: Script, log: Shared) -> Self {
            let options = Options {
                abort_grace: GRACE,
                ..Options::default()
            };
            Threads(Agent::start(
                Scripted(script),
                Blocking(log),
                Machine::new(),
                options,
            ))
        }

        fn followup(&self, id: &str) -> Result<(), Failure> {
            let input = Input::Followup(super::followup(id).into());
            self.0.input(input).map(drop).map_err(failure)
        }

        fn cancel(&self) -> Result<(), Failure> {
            self.0.cancel().map(drop).map_err(failure)
        }

        fn when_idle(&self) {
            self.0.when_idle();
        }

        fn close(self) {
            self.0.close();
        }
    }
}

#[test]
fn the_suite_holds_both_drivers_to_one_log() {
    // A guard that the suite is not vacuous: both drivers' logs of one follow-up are the same
    // records, in the same order.
    let (tokio, threads) = (Shared::default(), Shared::default());
    let a = <tokio_impl::Tokio as Driver>::open(Script::Complete, tokio.clone());
    let b = <threads_impl::Threads as Driver>::open(Script::Complete, threads.clone());
    assert_eq!(a.followup("m1"), Ok(()));
    assert_eq!(b.followup("m1"), Ok(()));
    a.when_idle();
    b.when_idle();
    a.close();
    b.close();
    assert_eq!(*lock(&tokio.events), *lock(&threads.events));
}
