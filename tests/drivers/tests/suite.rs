//! One driver suite, run against every Rust driver over the session layer (issue 26): the tokio
//! driver (`coxswain-tokio`, through a runtime) and the threads driver (`coxswain-threads`). Each
//! test is written once against [`Driver`] and instantiated per driver by [`suite!`]; both
//! drivers must write the same log and answer the same way. Covered: a follow-up's turn, a
//! failed append survived (S5 extended to failed persistence), a failed append of a host answer
//! written again, an indeterminate append stopping the agent, a host panic (`host-panicked`),
//! and a deaf host abandoned after the abort grace (`host-abandoned`, S38–S40); and SPEC §13 on
//! a file log: crash repair's redelivery allowance at open (S59, I16), `resume` at open (S57),
//! `fate` before and after repair and after dispose (S58), a refused allowance (nothing read or
//! written).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use coxswain_core::{
    Config, Event, Fate, Input, Machine, Message, MessageId, PreStepAnswer, StepAnswer, Target,
    Transition, TurnEndKind, TurnEndReason,
};
use coxswain_log::Entry;
use coxswain_session::{Hooks, Options};

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
    /// The appends written.
    appends: Arc<Mutex<usize>>,
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
            *lock(&self.appends) += 1;
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
    Closed,
    Other(String),
}

/// One Rust driver, driven by blocking calls.
trait Driver: Sized {
    /// How the driver's open refuses the allowance 1001 (S59): the session layer's text, in
    /// the driver's error.
    const REFUSED_1001: &'static str;
    /// How an input after dispose is rejected (S45, S57).
    const DISPOSED: &'static str;
    fn open(script: Script, log: Shared) -> Self {
        Self::open_with_hooks(script, log, Hooks::ALL)
    }
    /// Opens an agent whose host declares `hooks` (issue 51, decision 1).
    fn open_with_hooks(script: Script, log: Shared, hooks: Hooks) -> Self;
    /// Opens the JSON-lines file log at `path` with a delivery memory of 256, crash repair's
    /// redelivery allowance `redelivery` (S59) and, if `resume_on_open`, a `resume` (S57)
    /// before anything else; returns the agent and how many messages repair redelivered.
    fn open_file(
        path: &Path,
        redelivery: u64,
        resume_on_open: bool,
    ) -> Result<(Self, usize), String>;
    fn followup(&self, id: &str) -> Result<(), Failure>;
    fn cancel(&self) -> Result<(), Failure>;
    fn resume(&self) -> Result<(), Failure>;
    fn dispose(&self) -> Result<(), Failure>;
    fn fate(&self, id: &str) -> Fate;
    fn when_idle(&self);
    /// Closes the agent; the handle stays (later calls fail `closed`, `fate` is answered).
    fn close_now(&self);
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

/// Decision 1: a host that declares no hooks is called for its step only; the session answers
/// pre-step and turn-stopping inside the batches that asked: the same log in 2 appends, where a
/// host with every hook takes 4.
fn a_host_without_hooks_runs_a_quiet_turn_in_two_appends<D: Driver>() {
    for (hooks, appends) in [(Hooks::NONE, 2), (Hooks::ALL, 4)] {
        let log = Shared::default();
        let agent = D::open_with_hooks(Script::Complete, log.clone(), hooks);
        assert_eq!(agent.followup("m1"), Ok(()));
        agent.when_idle();
        agent.close();
        assert_eq!(log.types(), TURN);
        assert_eq!(*lock(&log.appends), appends, "{hooks:?}");
    }
}

/// Decision 7: once closed, an input fails `closed` and `fate` is still answered (S58).
fn after_close_an_input_fails_closed_and_fate_is_answered<D: Driver>() {
    let log = Shared::default();
    let agent = D::open(Script::Complete, log.clone());
    assert_eq!(agent.followup("m1"), Ok(()));
    agent.when_idle();
    agent.close_now();
    assert_eq!(agent.followup("m2"), Err(Failure::Closed));
    let completed = Some(TurnEndKind::Completed);
    assert_eq!(agent.fate("m1"), claimed(1, Some(1), completed));
    assert_eq!(agent.fate("m2"), Fate::Unknown);
    agent.close();
    assert_eq!(log.types(), TURN);
}

/// The delivery memory every §13 test uses: the tokio driver's default.
const MEMORY: usize = 256;

/// Feeds one transition's events to the log's bytes, numbered on from `seq`.
fn write(transition: Transition<'_>, bytes: &mut Vec<u8>, seq: &mut u64) {
    for event in transition.events().to_vec() {
        coxswain_log::encode(*seq, &Entry::Machine(event), bytes).unwrap();
        *seq += 1;
    }
    transition.persisted().for_each(drop);
}

/// A session that crashed inside turn 1 with claimed-unseen work (S59): follow-up `m1` ran
/// step 1 (its `user/message` is in the log: seen), steer `s1` and follow-up `m2` arrived during
/// it, the step answered `continue`, and the boundary claimed `s1` (NS) for step 2; the process
/// died while that pre-step request was outstanding, so no model call saw `s1`. `m2` waits in
/// NT. Returns the log's bytes and the live machine at the crash.
fn crashed_log() -> (Vec<u8>, Machine) {
    let mut machine = Machine::with_config(Config::new().with_delivery_memory(MEMORY));
    let (mut bytes, mut seq) = (Vec::new(), 1);
    write(
        machine.followup(followup("m1")).unwrap(),
        &mut bytes,
        &mut seq,
    );
    let entered = [followup("m1")].into_iter().collect();
    let answer = PreStepAnswer::Enter(entered);
    write(
        machine.answer_pre_step(answer).unwrap(),
        &mut bytes,
        &mut seq,
    );
    write(machine.steer(followup("s1")).unwrap(), &mut bytes, &mut seq);
    write(
        machine.followup(followup("m2")).unwrap(),
        &mut bytes,
        &mut seq,
    );
    let answer = StepAnswer::Continue;
    write(machine.answer_step(answer).unwrap(), &mut bytes, &mut seq);
    (bytes, machine)
}

/// The records of [`crashed_log`], as the log holds them (the fixture is what it says).
const CRASHED: [&str; 9] = [
    "agent/inbox/spliced",
    "turn/start",
    "agent/inbox/spliced",
    "step/start",
    "user/message",
    "agent/inbox/spliced",
    "agent/inbox/spliced",
    "step/end",
    "agent/inbox/spliced",
];

/// A new file under the system temp dir holding `bytes` (removed by [`Temp`]'s drop).
struct Temp(PathBuf);

impl Temp {
    fn new(name: &str, bytes: &[u8]) -> Temp {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!(
            "coxswain-driver-suite-{}-{n}-{name}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("session.jsonl");
        std::fs::write(&path, bytes).unwrap();
        Temp(path)
    }

    fn bytes(&self) -> Vec<u8> {
        std::fs::read(&self.0).unwrap()
    }

    /// The lines appended after the first `from` bytes.
    fn appended(&self, from: usize) -> Vec<String> {
        let bytes = self.bytes();
        let text = String::from_utf8(bytes[from..].to_vec()).unwrap();
        text.lines().map(str::to_owned).collect()
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn types_of(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|line| {
            // `{"seq":N,"type":"T",...}`: the encoder's fixed key order.
            let (_, rest) = line.split_once(r#""type":""#).unwrap();
            rest.split_once('"').unwrap().0.to_owned()
        })
        .collect()
}

fn claimed(turn: u64, step: Option<u64>, end: Option<TurnEndKind>) -> Fate {
    Fate::Claimed { turn, step, end }
}

/// The closer of the crashed turn (S50), record 10.
const TURN_END_INTERRUPTED: &str =
    r#"{"seq":10,"type":"turn/end","data":{"turn":1,"reason":{"kind":"interrupted"}}}"#;

/// S59, I16: opened with `redelivery: 1`, repair appends the closer, then one splice that puts
/// `s1` (claimed after the last `step/start`, seen by no model call) back at the front of NS,
/// waking as it was, `redelivery: 1`. `m1` (seen in step 1) is not redelivered. S48: it parks;
/// nothing runs until a wake. S58: the fates before (the live machine at the crash) and after.
fn s59_redelivery_one_reinserts_the_claimed_unseen_steer<D: Driver>() {
    let (bytes, live) = crashed_log();
    assert_eq!(types_of(&lines(&bytes)), CRASHED);
    assert_eq!(live.fate(&"m1".into()), claimed(1, Some(1), None));
    assert_eq!(live.fate(&"s1".into()), claimed(1, None, None));
    let nt = Fate::Pending {
        target: Target::NextTurn,
    };
    assert_eq!(live.fate(&"m2".into()), nt);
    let log = Temp::new("redeliver", &bytes);
    let (agent, redelivered) = D::open_file(&log.0, 1, false).unwrap();
    assert_eq!(redelivered, 1);
    assert_eq!(
        log.appended(bytes.len()),
        [
            TURN_END_INTERRUPTED,
            r#"{"seq":11,"type":"agent/inbox/spliced","data":{"target":"next-step","start":0,"inserted":[{"id":"s1","content":"hi","source":{"kind":"user"}}],"wakeup":true,"redelivery":1}}"#,
        ]
    );
    let interrupted = Some(TurnEndKind::Interrupted);
    assert_eq!(agent.fate("m1"), claimed(1, Some(1), interrupted));
    let ns = Fate::Pending {
        target: Target::NextStep,
    };
    assert_eq!(agent.fate("s1"), ns);
    assert_eq!(agent.fate("m2"), nt);
    assert_eq!(agent.fate("never-sent"), Fate::Unknown);
    // S48: parked, nothing ran.
    agent.when_idle();
    agent.close();
    assert_eq!(log.appended(bytes.len()).len(), 2);
}

/// S50 unchanged by default (`redelivery: 0`): only the closer; `s1` keeps its claim, now
/// `end: interrupted`, and nothing runs.
fn s50_default_options_redeliver_nothing<D: Driver>() {
    let (bytes, _) = crashed_log();
    let log = Temp::new("default", &bytes);
    let (agent, redelivered) = D::open_file(&log.0, 0, false).unwrap();
    assert_eq!(redelivered, 0);
    assert_eq!(log.appended(bytes.len()), [TURN_END_INTERRUPTED]);
    let interrupted = Some(TurnEndKind::Interrupted);
    assert_eq!(agent.fate("s1"), claimed(1, None, interrupted));
    assert_eq!(agent.fate("m1"), claimed(1, Some(1), interrupted));
    agent.when_idle();
    agent.close();
    assert_eq!(log.appended(bytes.len()), [TURN_END_INTERRUPTED]);
}

/// S57 at open: with `resume_on_open` the redelivered steer (and the parked follow-up) run
/// turn 2 without any send: the wake claims NS then the NT item (S28), the host enters both,
/// the step completes. Their fates name turn 2, its step 1, `completed`; `m1`'s stays turn 1's.
fn s57_resume_on_open_runs_the_redelivered_work<D: Driver>() {
    let (bytes, _) = crashed_log();
    let log = Temp::new("resume", &bytes);
    let (agent, _) = D::open_file(&log.0, 1, true).unwrap();
    agent.when_idle();
    let completed = Some(TurnEndKind::Completed);
    assert_eq!(agent.fate("s1"), claimed(2, Some(1), completed));
    assert_eq!(agent.fate("m2"), claimed(2, Some(1), completed));
    let interrupted = Some(TurnEndKind::Interrupted);
    assert_eq!(agent.fate("m1"), claimed(1, Some(1), interrupted));
    agent.close();
    let appended = log.appended(bytes.len());
    assert_eq!(
        types_of(&appended),
        [
            "turn/end",
            "agent/inbox/spliced",
            "turn/start",
            "agent/inbox/spliced",
            "agent/inbox/spliced",
            "step/start",
            "user/message",
            "user/message",
            "step/end",
            "turn/end",
        ]
    );
    assert_eq!(
        appended[2],
        r#"{"seq":12,"type":"turn/start","data":{"turn":2}}"#
    );
}

/// S58: `fate` is answered after dispose (S45's discards make the pending ids `discarded`).
fn s58_fate_is_answered_after_dispose<D: Driver>() {
    let (bytes, _) = crashed_log();
    let log = Temp::new("dispose", &bytes);
    let (agent, _) = D::open_file(&log.0, 1, false).unwrap();
    assert_eq!(agent.dispose(), Ok(()));
    assert_eq!(agent.fate("s1"), Fate::Discarded);
    assert_eq!(agent.fate("m2"), Fate::Discarded);
    let interrupted = Some(TurnEndKind::Interrupted);
    assert_eq!(agent.fate("m1"), claimed(1, Some(1), interrupted));
    assert_eq!(agent.fate("never-sent"), Fate::Unknown);
    // S57: resume is rejected once disposed, and changes nothing.
    let disposed = Failure::Other(D::DISPOSED.to_owned());
    assert_eq!(agent.resume(), Err(disposed));
    agent.close();
}

/// S59: an allowance above 1000 is refused at open with the session layer's text, before the
/// log is read or written: its bytes are unchanged (the crashed turn stays open).
fn s59_an_allowance_above_1000_is_refused_at_open<D: Driver>() {
    let (bytes, _) = crashed_log();
    let log = Temp::new("refused", &bytes);
    let refused = D::open_file(&log.0, 1001, true).err();
    assert_eq!(refused.as_deref(), Some(D::REFUSED_1001));
    assert_eq!(log.bytes(), bytes);
    // 1000 is the bound itself: accepted.
    let (agent, redelivered) = D::open_file(&log.0, 1000, false).unwrap();
    assert_eq!(redelivered, 1);
    agent.close();
}

fn lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(str::to_owned)
        .collect()
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
                a_deaf_host_is_abandoned_after_the_grace,
                a_host_without_hooks_runs_a_quiet_turn_in_two_appends,
                after_close_an_input_fails_closed_and_fate_is_answered,
                s59_redelivery_one_reinserts_the_claimed_unseen_steer,
                s50_default_options_redeliver_nothing,
                s57_resume_on_open_runs_the_redelivered_work,
                s58_fate_is_answered_after_dispose,
                s59_an_allowance_above_1000_is_refused_at_open);
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
        Agent, AgentError, DurableLog, FileLog, Host, LogError, MemoryLog, ReadBack, StepContext,
    };
    use std::ops::ControlFlow;

    pub(super) struct Tokio {
        runtime: tokio::runtime::Runtime,
        agent: Agent,
    }

    struct Scripted(Script, Hooks);

    impl Host for Scripted {
        fn hooks(&self) -> Hooks {
            self.1
        }

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
            AgentError::Closed => Failure::Closed,
            other => Failure::Other(other.to_string()),
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    }

    impl Driver for Tokio {
        const REFUSED_1001: &'static str =
            "invalid options: the redelivery allowance 1001 is above 1000 (S59)";
        const DISPOSED: &'static str = "rejected: the machine is disposed and accepts no input";

        fn open_file(
            path: &Path,
            redelivery: u64,
            resume_on_open: bool,
        ) -> Result<(Self, usize), String> {
            let runtime = runtime();
            let mut options = coxswain_tokio::Options::default();
            options.abort_grace = GRACE;
            options.delivery_memory = MEMORY;
            options.redelivery = redelivery;
            options.resume_on_open = resume_on_open;
            let opened = runtime.block_on(async {
                let log = FileLog::open(path).await.map_err(|e| e.to_string())?;
                Agent::open_with(options, Scripted(Script::Complete, Hooks::ALL), log)
                    .await
                    .map_err(|e| e.to_string())
            });
            let (agent, recovery) = opened?;
            Ok((Tokio { runtime, agent }, recovery.redelivered))
        }

        fn resume(&self) -> Result<(), Failure> {
            self.runtime.block_on(self.agent.resume()).map_err(failure)
        }

        fn dispose(&self) -> Result<(), Failure> {
            self.runtime.block_on(self.agent.dispose()).map_err(failure)
        }

        fn fate(&self, id: &str) -> Fate {
            self.runtime.block_on(self.agent.fate(MessageId::new(id)))
        }

        fn open_with_hooks(script: Script, log: Shared, hooks: Hooks) -> Self {
            let runtime = runtime();
            let mut options = coxswain_tokio::Options::default();
            options.abort_grace = GRACE;
            let host = Scripted(script, hooks);
            let opened = Agent::open_with(options, host, Log(log, MemoryLog::new()));
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

        fn close_now(&self) {
            let _ = self.runtime.block_on(self.agent.close());
        }

        fn close(self) {
            let _ = self.runtime.block_on(self.agent.close());
        }
    }
}

mod threads_impl {
    use super::*;
    use coxswain_session::ResumeOptions;
    use coxswain_threads::{open_log, Agent, AgentError, Host, Log, LogError};

    pub(super) struct Threads(Agent);

    struct Scripted(Script, Hooks);

    impl Host for Scripted {
        fn hooks(&self) -> Hooks {
            self.1
        }

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

    pub(super) fn host(script: Script, hooks: Hooks) -> impl Host {
        Scripted(script, hooks)
    }

    pub(super) fn blocking(log: Shared) -> impl Log {
        Blocking(log)
    }

    impl Log for Blocking {
        fn append(&mut self, entries: &[Entry]) -> Result<(), LogError> {
            match self.0.append(entries) {
                None => Ok(()),
                Some(Fault::Clean) => Err(std::io::Error::other("disk full").into()),
                Some(Fault::Indeterminate) => Err(LogError::Indeterminate {
                    error: Arc::new(std::io::Error::other("eio")),
                    undo: Arc::new(std::io::Error::other("eio again")),
                }),
            }
        }
    }

    fn failure(error: AgentError) -> Failure {
        match error {
            AgentError::Persistence(_) => Failure::Persistence,
            AgentError::Indeterminate(_) => Failure::Indeterminate,
            AgentError::Stopped => Failure::Stopped,
            AgentError::Closed => Failure::Closed,
            other => Failure::Other(other.to_string()),
        }
    }

    impl Driver for Threads {
        const REFUSED_1001: &'static str = "the redelivery allowance 1001 is above 1000 (S59)";
        const DISPOSED: &'static str = "the machine is disposed and accepts no input";

        fn open_file(
            path: &Path,
            redelivery: u64,
            resume_on_open: bool,
        ) -> Result<(Self, usize), String> {
            let config = Config::new().with_delivery_memory(MEMORY);
            // Unchecked here on purpose: the open is the check (S59).
            let resume = ResumeOptions::from(config).with_redelivery(redelivery);
            let (log, plan) = open_log(path, resume).map_err(|e| e.to_string())?;
            let options = Options {
                abort_grace: GRACE,
                ..Options::default()
            };
            let (host, machine) = (Scripted(Script::Complete, Hooks::ALL), plan.machine);
            let agent = match resume_on_open {
                true => {
                    Agent::start_resuming(host, log, machine, options).map_err(|e| e.to_string())?
                }
                false => Agent::start(host, log, machine, options),
            };
            Ok((Threads(agent), plan.redelivered))
        }

        fn resume(&self) -> Result<(), Failure> {
            self.0.resume().map_err(failure)
        }

        fn dispose(&self) -> Result<(), Failure> {
            self.0.dispose().map_err(failure)
        }

        fn fate(&self, id: &str) -> Fate {
            self.0.fate(MessageId::new(id))
        }

        fn open_with_hooks(script: Script, log: Shared, hooks: Hooks) -> Self {
            let options = Options {
                abort_grace: GRACE,
                ..Options::default()
            };
            Threads(Agent::start(
                Scripted(script, hooks),
                Blocking(log),
                Machine::with_config(Config::new().with_delivery_memory(MEMORY)),
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
            let _ = self.0.when_idle();
        }

        fn close_now(&self) {
            self.0.close();
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

/// Decision 7 on the threads driver: every error's kind, pinned (tokio's are pinned in
/// `adapters/tokio/tests/driver/agent_loop.rs`).
#[test]
fn every_threads_error_has_its_kind() {
    use coxswain_core::Rejected;
    use coxswain_session::Refused;
    use coxswain_threads::{AgentError, LogError};
    let kinds = [
        (
            AgentError::Rejected(Rejected::AfterDisposal.into()),
            "disposed",
        ),
        (AgentError::Rejected(Rejected::Busy.into()), "busy"),
        (
            AgentError::Rejected(Refused::IdTooLong { bytes: 2, max: 1 }),
            "id-too-long",
        ),
        (AgentError::Persistence(LogError::Failed), "persistence"),
        (AgentError::Indeterminate(LogError::Failed), "indeterminate"),
        (AgentError::FinalSync(LogError::Failed), "final-sync"),
        (AgentError::Stopped, "stopped"),
        (AgentError::Closed, "closed"),
    ];
    for (error, kind) in kinds {
        assert_eq!(error.kind(), kind, "{error:?}");
    }
}

/// Decision 6 on the threads driver: the retry pause is the options' (here 1 s): the pre-step
/// answer's failed append is written again that long after, and the turn ends once.
#[test]
fn the_threads_retry_pause_is_the_options() {
    use coxswain_threads::Agent;
    let log = Shared::with_faults(&[None, Some(Fault::Clean)]);
    let options = Options {
        retry_after: Duration::from_secs(1),
        ..Options::default()
    };
    let host = threads_impl::host(Script::Complete, Hooks::ALL);
    let agent = Agent::start(
        host,
        threads_impl::blocking(log.clone()),
        Machine::new(),
        options,
    );
    let start = Instant::now();
    agent.input(Input::Followup(followup("m1").into())).unwrap();
    agent.when_idle().unwrap();
    let took = start.elapsed();
    assert!(took >= Duration::from_secs(1), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    agent.close();
    assert_eq!(log.types(), TURN);
}
