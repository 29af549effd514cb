//! The agent parity suite's Rust runner (issue 51, part 5): every scenario of
//! `tests/agents/scenarios` (`tests/agents/FORMAT.md`) through the tokio and the threads
//! `Agent`, one test per driver, each reporting every mismatch of every scenario (scenario,
//! driver, step, expected, got). The interpreter is `coxswain_driver_tests::agents`; this file
//! only translates the script to each driver's API and its outcomes and errors to
//! `{"ok": ...}` / `{"error": KIND}` (decision 7's kind names).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use coxswain_core::{CancelCause, Expect, Fate, Input, PreStepAnswer, StepAnswer, Target};
use coxswain_driver_tests::agents::{
    error, ok, run_all, AgentUnderTest, Call, Driver, Fault, HostScript, LogScript, PreStepScript,
    Scenario, StepScript, TurnStoppingScript,
};
use coxswain_log::Entry;
use serde_json::{json, Value};

/// The delivery memory every scenario's agent has (FORMAT.md).
const MEMORY: usize = 256;

fn pending_ids<'a>(items: impl Iterator<Item = &'a coxswain_core::Pending>) -> Value {
    items
        .map(|p| Value::String(p.message().id().as_str().to_owned()))
        .collect()
}

/// Decision 1: the optional hooks the scenario's host writes (the others are missing).
fn declared(host: &HostScript) -> coxswain_session::Hooks {
    let mut hooks = coxswain_session::Hooks::NONE;
    hooks.pre_step = host.writes("pre_step");
    hooks.turn_stopping = host.writes("turn_stopping");
    hooks
}

fn fate(fate: &Fate) -> Value {
    ok(fate.to_json())
}

/// Keeps the scripted failures of tokio hosts (`{"raise": TEXT}` panics with TEXT) out of the
/// test's output; every other panic is reported as usual.
fn quiet_scripted_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let text = info.payload().downcast_ref::<String>().map(String::as_str);
            if text != Some(SCRIPTED_RAISE) {
                report(info);
            }
        }));
    });
}

/// The text every scenario's `{"raise": TEXT}` uses.
const SCRIPTED_RAISE: &str = "boom";

fn check(driver: &str, result: Result<(String, usize), String>) {
    let (report, failed) = match result {
        Ok(done) => done,
        Err(why) => panic!("the scenarios cannot be read: {why}"),
    };
    println!("{report}");
    assert_eq!(
        failed, 0,
        "{failed} scenarios fail on the {driver} driver:\n{report}"
    );
}

#[test]
fn tokio_agent_holds_every_scenario() {
    quiet_scripted_panics();
    check("tokio", run_all::<tokio_impl::Tokio>());
}

#[test]
fn threads_agent_holds_every_scenario() {
    check("threads", run_all::<threads_impl::Threads>());
}

mod tokio_impl {
    use super::*;
    use coxswain_session::Hooks;
    use coxswain_tokio::{
        Agent, AgentError, DurableLog, Host, LogError, MemoryLog, Options, PreStepContext,
        ReadBack, StepContext, TurnStoppingContext,
    };
    use std::ops::ControlFlow;

    pub(super) struct Tokio;

    struct Scripted(HostScript);

    impl Host for Scripted {
        fn hooks(&self) -> Hooks {
            declared(&self.0)
        }

        async fn pre_step(&self, cx: PreStepContext) -> PreStepAnswer {
            if !self.0.writes("pre_step") {
                // Declared missing: never called; answered as the session would if it were.
                return PreStepAnswer::Enter(cx.messages);
            }
            match self.0.pre_step() {
                // A Rust hook cannot return nothing: those scenarios skip tokio.
                PreStepScript::Nothing | PreStepScript::EnterClaimed => {
                    PreStepAnswer::Enter(cx.messages)
                }
                PreStepScript::Enter(items) => PreStepAnswer::Enter(
                    PreStepScript::batch(&items, cx.messages.iter())
                        .into_iter()
                        .collect(),
                ),
                PreStepScript::Reject => PreStepAnswer::Reject,
                // The tokio host has no error answer today: it panics (FORMAT.md).
                PreStepScript::Raise(text) => panic!("{text}"),
            }
        }

        async fn step(&self, cx: StepContext) -> StepAnswer {
            let mut script = self.0.step();
            loop {
                return match script {
                    StepScript::Answer(word) => word_answer(&word),
                    StepScript::Nothing => StepAnswer::Completed,
                    StepScript::Raise(text) => panic!("{text}"),
                    StepScript::UntilCancelled => {
                        cx.cancel.cancelled().await;
                        StepAnswer::Completed
                    }
                    StepScript::Deaf => {
                        while !self.0.release.is_set() {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        StepAnswer::Completed
                    }
                    StepScript::Record(events, then) => {
                        for (kind, data) in events {
                            let _ = cx.record(kind, data).await;
                        }
                        script = *then;
                        continue;
                    }
                };
            }
        }

        async fn turn_stopping(
            &self,
            _cx: TurnStoppingContext,
        ) -> coxswain_core::TurnStoppingAnswer {
            if !self.0.writes("turn_stopping") {
                return coxswain_core::TurnStoppingAnswer::Done;
            }
            match self.0.turn_stopping() {
                TurnStoppingScript::Done | TurnStoppingScript::Nothing => {
                    coxswain_core::TurnStoppingAnswer::Done
                }
                TurnStoppingScript::Raise(text) => panic!("{text}"),
            }
        }
    }

    /// A [`MemoryLog`] (its bytes shared with the runner) that fails the scripted appends.
    struct Log(LogScript, MemoryLog);

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
            match self.0.before(batch) {
                None => {
                    let first = self.1.append(batch).await?;
                    self.0.after(batch);
                    Ok(first)
                }
                Some(Fault::Fail) => Err(std::io::Error::other("disk full (injected)").into()),
                Some(Fault::Indeterminate) => Err(LogError::Indeterminate {
                    error: Arc::new(std::io::Error::other("eio (injected)")),
                    undo: Arc::new(std::io::Error::other("eio again (injected)")),
                }),
                Some(Fault::Fenced) => Err(LogError::Fenced {
                    session: "s".to_owned(),
                    epoch: 1,
                }),
            }
        }

        async fn sync(&mut self) -> Result<(), LogError> {
            Ok(())
        }
    }

    /// Decision 7: the error's kind, as the driver names it.
    fn kind(error: &AgentError) -> String {
        error.kind().to_owned()
    }

    struct Running {
        runtime: tokio::runtime::Runtime,
        agent: Agent,
        log: MemoryLog,
    }

    impl Running {
        fn outcome<T>(
            &self,
            within: Duration,
            call: impl std::future::Future<Output = Result<T, AgentError>>,
            value: impl FnOnce(T) -> Value,
        ) -> Value {
            let timed = self
                .runtime
                .block_on(async { tokio::time::timeout(within, call).await });
            match timed {
                Err(_) => error("timeout"),
                Ok(Ok(got)) => ok(value(got)),
                Ok(Err(failed)) => error(&kind(&failed)),
            }
        }
    }

    impl AgentUnderTest for Running {
        fn call(&mut self, call: Call, within: Duration) -> Value {
            let agent = self.agent.clone();
            let null = |()| Value::Null;
            match call {
                Call::Deliver("followup", m) => self.outcome(within, agent.followup(m), null),
                Call::Deliver("steer", m) => self.outcome(within, agent.steer(m), null),
                Call::Deliver(_, m) => self.outcome(within, agent.inject(m), null),
                Call::SteerExpecting(turn, m) => {
                    self.outcome(within, agent.steer_expecting(turn, m), null)
                }
                Call::Remove(id) => self.outcome(within, agent.remove(id.as_str()), Value::Bool),
                Call::Cancel { keep_inbox } => {
                    self.outcome(within, agent.cancel(CancelCause::User, keep_inbox), null)
                }
                Call::Resume => self.outcome(within, agent.resume(), null),
                Call::Pending => self.outcome(within, agent.pending(), |p| {
                    json!({
                        "next-turn": pending_ids(p.next_turn.iter()),
                        "next-step": pending_ids(p.next_step.iter()),
                    })
                }),
                Call::Fate(id) => {
                    let asked = self
                        .runtime
                        .block_on(async { tokio::time::timeout(within, agent.fate(id)).await });
                    asked.map_or_else(|_| error("timeout"), |f| fate(&f))
                }
                Call::WaitIdle => self.outcome(within, agent.when_idle(), null),
                Call::Close => self.outcome(within, agent.close(), null),
                Call::Dispose => self.outcome(within, agent.dispose(), null),
            }
        }

        fn log_bytes(&self) -> Vec<u8> {
            self.log.bytes()
        }

        fn finish(&mut self) {
            let agent = self.agent.clone();
            let _ = self.runtime.block_on(async {
                tokio::time::timeout(Duration::from_secs(10), agent.close()).await
            });
        }
    }

    fn word_answer(word: &str) -> StepAnswer {
        match word {
            "continue" => StepAnswer::Continue,
            "max-tokens" => StepAnswer::MaxTokens,
            _ => StepAnswer::Completed,
        }
    }

    impl Driver for Tokio {
        const NAME: &'static str = "tokio";

        fn open(
            scenario: &Scenario,
            host: HostScript,
            log: LogScript,
        ) -> Result<Box<dyn AgentUnderTest>, String> {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            let mut options = Options::default();
            options.delivery_memory = MEMORY;
            if let Some(grace) = scenario.option_ms("abort_grace_ms") {
                options.abort_grace = grace;
            }
            if let Some(pause) = scenario.option_ms("retry_after_ms") {
                options.retry_after = pause;
            }
            if let Some(max) = scenario.option("max_batch") {
                options.max_batch = max;
            }
            if let Some(max) = scenario.option("max_pending") {
                options.max_pending = max;
            }
            let memory = MemoryLog::from_bytes(scenario.given());
            let durable = Log(log, memory.clone());
            let opened = runtime.block_on(Agent::open_with(options, Scripted(host), durable));
            let (agent, _) = opened.map_err(|e| e.to_string())?;
            Ok(Box::new(Running {
                runtime,
                agent,
                log: memory,
            }))
        }
    }
}

mod threads_impl {
    use super::*;
    use coxswain_core::{Batch, Config, TurnStoppingAnswer};
    use coxswain_session::{Options, ResumePlan};
    use coxswain_threads::{Agent, AgentError, Host, Log, LogError, Recorder};
    use std::num::NonZeroUsize;
    use std::sync::{mpsc, OnceLock};

    pub(super) struct Threads;

    /// The host's script, and the agent's [`Recorder`] once it has started.
    struct Scripted(HostScript, Arc<OnceLock<Recorder>>);

    impl Host for Scripted {
        fn hooks(&self) -> coxswain_session::Hooks {
            declared(&self.0)
        }

        fn pre_step(&self, messages: &Batch, _: &AtomicBool) -> Result<PreStepAnswer, String> {
            if !self.0.writes("pre_step") {
                // Declared missing: never called; answered as the session would if it were.
                return Ok(coxswain_session::pre_step_default(messages.clone()));
            }
            Ok(match self.0.pre_step() {
                PreStepScript::Nothing | PreStepScript::EnterClaimed => {
                    PreStepAnswer::Enter(messages.clone())
                }
                PreStepScript::Enter(items) => PreStepAnswer::Enter(
                    PreStepScript::batch(&items, messages.iter())
                        .into_iter()
                        .collect(),
                ),
                PreStepScript::Reject => PreStepAnswer::Reject,
                PreStepScript::Raise(text) => return Err(text),
            })
        }

        fn step(&self, turn: u64, step: u64, cancelled: &AtomicBool) -> Result<StepAnswer, String> {
            let mut script = self.0.step();
            loop {
                return match script {
                    StepScript::Answer(word) => Ok(match word.as_str() {
                        "continue" => StepAnswer::Continue,
                        "max-tokens" => StepAnswer::MaxTokens,
                        _ => StepAnswer::Completed,
                    }),
                    StepScript::Nothing => Ok(StepAnswer::Completed),
                    StepScript::Raise(text) => Err(text),
                    StepScript::UntilCancelled => {
                        while !cancelled.load(Ordering::SeqCst) {
                            std::thread::sleep(Duration::from_millis(2));
                        }
                        Ok(StepAnswer::Completed)
                    }
                    StepScript::Deaf => {
                        self.0.release.wait();
                        Ok(StepAnswer::Completed)
                    }
                    StepScript::Record(events, then) => {
                        for (kind, data) in events {
                            let event = coxswain_log::HostEvent::new(kind, data);
                            if let (Ok(event), Some(recorder)) = (event, self.1.get()) {
                                let _ = recorder.record(turn, step, vec![event]);
                            }
                        }
                        script = *then;
                        continue;
                    }
                };
            }
        }

        fn turn_stopping(&self, _: &AtomicBool) -> Result<TurnStoppingAnswer, String> {
            if !self.0.writes("turn_stopping") {
                return Ok(coxswain_session::turn_stopping_default());
            }
            match self.0.turn_stopping() {
                TurnStoppingScript::Done | TurnStoppingScript::Nothing => {
                    Ok(TurnStoppingAnswer::Done)
                }
                TurnStoppingScript::Raise(text) => Err(text),
            }
        }
    }

    /// The log's bytes, numbered on from the given log's.
    #[derive(Clone, Default)]
    struct Bytes(Arc<Mutex<(Vec<u8>, u64)>>);

    struct Scripted2(LogScript, Bytes);

    impl Log for Scripted2 {
        fn append(&mut self, entries: &[Entry]) -> Result<(), LogError> {
            match self.0.before(entries) {
                None => {
                    let mut held = self.1 .0.lock().unwrap_or_else(PoisonError::into_inner);
                    let (bytes, seq) = &mut *held;
                    let mut lines = Vec::new();
                    for entry in entries {
                        coxswain_log::encode(*seq, entry, &mut lines)?;
                        *seq += 1;
                    }
                    bytes.extend_from_slice(&lines);
                    drop(held);
                    self.0.after(entries);
                    Ok(())
                }
                Some(Fault::Fail) => Err(std::io::Error::other("disk full (injected)").into()),
                Some(Fault::Fenced) => Err(LogError::Fenced {
                    session: "s".to_owned(),
                    epoch: 1,
                }),
                Some(Fault::Indeterminate) => Err(LogError::Indeterminate {
                    error: Arc::new(std::io::Error::other("eio (injected)")),
                    undo: Arc::new(std::io::Error::other("eio again (injected)")),
                }),
            }
        }
    }

    /// Decision 7: the error's kind, as the driver names it.
    fn kind(error: &AgentError) -> String {
        error.kind().to_owned()
    }

    struct Running {
        agent: Option<Arc<Agent>>,
        bytes: Bytes,
    }

    /// Runs `f` on a thread of its own, giving up on it past `within`.
    fn bounded(within: Duration, f: impl FnOnce() -> Value + Send + 'static) -> Value {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(within).unwrap_or_else(|_| error("timeout"))
    }

    fn outcome<T>(result: Result<T, AgentError>, value: impl FnOnce(T) -> Value) -> Value {
        match result {
            Ok(got) => ok(value(got)),
            Err(failed) => error(&kind(&failed)),
        }
    }

    impl AgentUnderTest for Running {
        fn call(&mut self, call: Call, within: Duration) -> Value {
            let Some(agent) = self.agent.clone() else {
                return error("unreachable: the agent is gone");
            };
            bounded(within, move || {
                let input = |input: Input| outcome(agent.input(input), |_| Value::Null);
                match call {
                    Call::Deliver("followup", m) => input(Input::Followup(m.into())),
                    Call::Deliver("steer", m) => input(Input::Steer(m.into())),
                    Call::Deliver(_, m) => input(Input::Inject(m.into())),
                    Call::SteerExpecting(turn, m) => input(Input::Send {
                        message: m.into(),
                        target: Target::NextStep,
                        wakeup: true,
                        expect: Some(Expect::Turn(turn)),
                    }),
                    Call::Remove(id) => {
                        outcome(agent.input(Input::Remove(id.as_str().into())), Value::Bool)
                    }
                    Call::Cancel { keep_inbox } => input(Input::Cancel {
                        cause: CancelCause::User,
                        keep_inbox,
                    }),
                    Call::Resume => outcome(agent.resume(), |()| Value::Null),
                    Call::Pending => outcome(agent.pending(), |(nt, ns)| {
                        serde_json::json!({
                            "next-turn": pending_ids(nt.iter()),
                            "next-step": pending_ids(ns.iter()),
                        })
                    }),
                    Call::Fate(id) => fate(&agent.fate(id.as_str())),
                    Call::WaitIdle => outcome(agent.when_idle(), |()| Value::Null),
                    Call::Dispose => outcome(agent.dispose(), |()| Value::Null),
                    Call::Close => {
                        agent.close();
                        ok(Value::Null)
                    }
                }
            })
        }

        fn log_bytes(&self) -> Vec<u8> {
            let held = self.bytes.0.lock().unwrap_or_else(PoisonError::into_inner);
            held.0.clone()
        }

        fn finish(&mut self) {
            if let Some(agent) = self.agent.take().and_then(|a| Arc::try_unwrap(a).ok()) {
                let _ = bounded(Duration::from_secs(10), move || {
                    agent.close();
                    Value::Null
                });
            }
        }
    }

    impl Driver for Threads {
        const NAME: &'static str = "threads";

        fn open(
            scenario: &Scenario,
            host: HostScript,
            log: LogScript,
        ) -> Result<Box<dyn AgentUnderTest>, String> {
            let mut config = Config::new().with_delivery_memory(MEMORY);
            if let Some(max) = scenario.option("max_pending").and_then(NonZeroUsize::new) {
                config = config.with_max_pending(max);
            }
            let given = scenario.given();
            let plan = ResumePlan::from_bytes(&given, config).map_err(|e| e.to_string())?;
            // Decision 1: the hooks the host wrote are the session's `Options::hooks`.
            let mut options = Options {
                hooks: declared(&host),
                ..Options::default()
            };
            if let Some(grace) = scenario.option_ms("abort_grace_ms") {
                options.abort_grace = grace;
            }
            if let Some(pause) = scenario.option_ms("retry_after_ms") {
                options.retry_after = pause;
            }
            if let Some(max) = scenario.option("max_batch") {
                options.max_batch = max;
            }
            let bytes = Bytes(Arc::new(Mutex::new((given, plan.next_seq))));
            let recorder = Arc::new(OnceLock::new());
            let agent = Agent::start(
                Scripted(host, recorder.clone()),
                Scripted2(log, bytes.clone()),
                plan.machine,
                options,
            );
            let _ = recorder.set(agent.recorder());
            Ok(Box::new(Running {
                agent: Some(Arc::new(agent)),
                bytes,
            }))
        }
    }
}
