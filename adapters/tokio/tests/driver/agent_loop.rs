//! Issue 51 on the tokio driver, an IO loop over the session layer's agent loop: the hooks a
//! host declares (the session answers the others inside the same batch: a quiet turn in 2
//! appends), the defaults owned by `coxswain_session::Options::DEFAULT`, the retry pause as an
//! option, a refused host answer answered `fail host-invalid-answer`, and one kind name for
//! every error (decision 7).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use coxswain_tokio::coxswain_core::{Expect, Message, PreStepAnswer, Rejected, StepAnswer, Target};
use coxswain_tokio::coxswain_log::{Entry, ReservedType, TooDeep};
use coxswain_tokio::{
    Agent, AgentError, DurableLog, Ending, Hooks, LogError, LogFailure, MemoryLog, Options,
    ReadBack, StepContext,
};
use tokio::time::Instant;

use crate::support::*;

/// A log that counts the appends that carried records.
#[derive(Clone)]
struct Counting {
    inner: MemoryLog,
    appends: Arc<AtomicUsize>,
}

impl Counting {
    fn new() -> Self {
        Counting {
            inner: MemoryLog::new(),
            appends: Arc::default(),
        }
    }

    fn appends(&self) -> usize {
        self.appends.load(Ordering::SeqCst)
    }
}

impl DurableLog for Counting {
    async fn read_back(
        &mut self,
        visit: &mut (dyn FnMut(coxswain_tokio::coxswain_log::Record) -> std::ops::ControlFlow<()>
                  + Send),
    ) -> Result<ReadBack, LogError> {
        self.inner.read_back(visit).await
    }

    async fn repair_tail(&mut self) -> Result<(), LogError> {
        self.inner.repair_tail().await
    }

    async fn append(&mut self, batch: &[Entry]) -> Result<u64, LogError> {
        self.appends.fetch_add(1, Ordering::SeqCst);
        self.inner.append(batch).await
    }

    async fn sync(&mut self) -> Result<(), LogError> {
        self.inner.sync().await
    }
}

/// A host that writes only `step` and says so.
struct StepOnly(Arc<AtomicUsize>);

impl coxswain_tokio::Host for StepOnly {
    fn hooks(&self) -> Hooks {
        Hooks::NONE
    }

    async fn step(&self, _cx: StepContext) -> StepAnswer {
        self.0.fetch_add(1, Ordering::SeqCst);
        StepAnswer::Completed
    }
}

const QUIET_TURN: [&str; 7] = [
    "NT 0 +[a] wakeup",
    "turn 1",
    "NT 0 -1",
    "step 1.1",
    "msg a",
    "/step 1.1",
    "end 1 completed",
];

/// Decision 1: a host that declares `Hooks::NONE` is called for the step only; the session
/// enters the claimed batch and answers turn-stopping `done` inside the batches that asked, so
/// the quiet turn is the same log in 2 appends.
#[tokio::test(start_paused = true)]
async fn a_host_without_hooks_runs_a_quiet_turn_in_two_appends() {
    let steps = Arc::new(AtomicUsize::new(0));
    let log = Counting::new();
    let (agent, _) = Agent::open(StepOnly(steps.clone()), log.clone())
        .await
        .unwrap();
    agent.followup(user("a")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(brief(&log.inner), QUIET_TURN);
    assert_eq!(log.appends(), 2);
    assert_eq!(steps.load(Ordering::SeqCst), 1);
    agent.close().await.unwrap();
}

/// The default, `Hooks::ALL`: every hook is called; the same turn takes 4 appends.
#[tokio::test(start_paused = true)]
async fn a_host_with_every_hook_is_called_for_each_in_four_appends() {
    let host = FakeHost::new();
    let log = Counting::new();
    let (agent, _) = Agent::open(host.clone(), log.clone()).await.unwrap();
    agent.followup(user("a")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(brief(&log.inner), QUIET_TURN);
    assert_eq!(log.appends(), 4);
    assert_eq!(
        host.calls(),
        ["pre_step 1.1 [a]", "step 1.1", "turn_stopping 1"]
    );
    agent.close().await.unwrap();
}

/// Decision 6: every default is the session layer's.
#[test]
fn the_defaults_are_the_session_layers() {
    let options = Options::default();
    assert_eq!(options.abort_grace, Duration::from_secs(5));
    assert_eq!(options.retry_after, Duration::from_millis(100));
    assert_eq!(options.max_batch, 64);
    assert_eq!(Options::DEFAULT_ABORT_GRACE, Duration::from_secs(5));
    assert_eq!(Options::DEFAULT_RETRY_AFTER, Duration::from_millis(100));
    assert_eq!(Options::DEFAULT_MAX_BATCH, 64);
}

/// Decision 6: the retry pause is an option. The pre-step answer's append fails; the session
/// writes it again `retry_after` later (2 s here), then the 100 ms step runs.
#[tokio::test(start_paused = true)]
async fn the_retry_pause_is_the_options() {
    let memory = open_memory();
    let mut options = Options::default();
    options.retry_after = Duration::from_secs(2);
    let log = FailingLog::failing(memory.clone(), 1..2);
    let (agent, _) = Agent::open_with(options, FakeHost::new(), log)
        .await
        .unwrap();
    let start = Instant::now();
    agent.followup(user("a")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(2_100));
    assert_eq!(brief(&memory), QUIET_TURN);
    agent.close().await.unwrap();
}

/// Decision 3: a host answer the session refuses (it enters a message nesting deeper than a log
/// record holds) is an invalid answer: the session answers `fail host-invalid-answer` with the
/// refusal's text, the turn ends with that error, and the agent goes on.
#[tokio::test(start_paused = true)]
async fn a_refused_host_answer_fails_the_turn_host_invalid_answer() {
    let host = FakeHost::new().on_pre_step(|cx| async move {
        let mut deep = serde_json::json!([]);
        for _ in 1..130 {
            deep = serde_json::json!([deep]);
        }
        let messages = cx.messages.iter().cloned();
        let deep = Message::user("x1", deep).into();
        PreStepAnswer::Enter(messages.chain([deep]).collect())
    });
    let (agent, log) = open(host).await;
    agent.followup(user("a")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(
        brief(&log),
        [
            "NT 0 +[a] wakeup",
            "turn 1",
            "NT 0 -1",
            "end 1 error host-invalid-answer"
        ]
    );
    let records = log.records().unwrap();
    assert_eq!(
        records[3].event["data"]["reason"]["error"]["message"],
        "the host's preStep call gave an invalid answer: the value nests 131 levels deep; at \
         most 124 fit in a log record"
    );
    assert!(agent.ending().is_none());
    agent.close().await.unwrap();
}

fn io() -> LogError {
    std::io::Error::other("disk full").into()
}

fn fenced() -> LogError {
    LogError::Fenced {
        session: "s".to_owned(),
        epoch: 1,
    }
}

fn indeterminate() -> LogError {
    LogError::Indeterminate {
        error: Arc::new(std::io::Error::other("eio")),
        undo: Arc::new(std::io::Error::other("eio again")),
    }
}

/// Decision 4: a log error maps to the loop's failure; the loop owns which stop the agent.
#[test]
fn a_log_error_maps_to_the_loops_failure() {
    assert_eq!(io().failure(), LogFailure::Failed);
    assert_eq!(LogError::Failed.failure(), LogFailure::Failed);
    assert_eq!(indeterminate().failure(), LogFailure::Indeterminate);
    assert_eq!(fenced().failure(), LogFailure::Fenced);
    assert!(!io().stops_the_agent());
    assert!(indeterminate().stops_the_agent());
    assert!(fenced().stops_the_agent());
}

/// Decision 7: every error's kind, pinned.
#[test]
fn every_error_has_its_kind() {
    let id = || "m1".into();
    let kinds = [
        (
            AgentError::Rejected(Rejected::AlreadyPending(id())),
            "already-pending",
        ),
        (AgentError::Rejected(Rejected::Busy), "busy"),
        (AgentError::Rejected(Rejected::AfterDisposal), "disposed"),
        (AgentError::AlreadyDelivered(id()), "already-delivered"),
        (AgentError::Conflict(id()), "conflict"),
        (AgentError::TurnMismatch(Expect::Turn(1)), "turn-mismatch"),
        (
            AgentError::Full {
                target: Target::NextTurn,
                max: 1,
            },
            "full",
        ),
        (AgentError::Persistence(io()), "persistence"),
        (AgentError::Indeterminate(indeterminate()), "indeterminate"),
        (AgentError::FinalSync(io()), "final-sync"),
        (
            AgentError::TooDeep(TooDeep { depth: 70, max: 64 }),
            "too-deep",
        ),
        (AgentError::Stopped, "stopped"),
        (AgentError::Closed, "closed"),
        (AgentError::StepClosed, "step-closed"),
        (
            AgentError::Reserved(ReservedType("turn/start".into())),
            "reserved",
        ),
        (AgentError::JobPanicked, "job-panicked"),
        (
            AgentError::MessageTooLarge {
                id: id(),
                bytes: 2,
                max: 1,
            },
            "message-too-large",
        ),
        (AgentError::IdTooLong { bytes: 2, max: 1 }, "id-too-long"),
    ];
    for (error, kind) in kinds {
        assert_eq!(error.kind(), kind, "{error:?}");
    }
    assert_eq!(Ending::Closed.kind(), "closed");
    assert_eq!(Ending::Disposed.kind(), "disposed");
    assert_eq!(Ending::Stopped(fenced()).kind(), "stopped");
}

/// Decision 7 end to end: the kinds a caller sees after a refusal, a dispose, and a close.
#[tokio::test(start_paused = true)]
async fn callers_see_the_kinds() {
    let mut options = Options::default();
    options.max_pending = 1;
    let (agent, _) = Agent::open_with(options, FakeHost::new(), MemoryLog::new())
        .await
        .unwrap();
    agent.inject(user("i1")).await.unwrap();
    let kind = |r: Result<(), AgentError>| r.err().map(|e| e.kind());
    assert_eq!(kind(agent.inject(user("i2")).await), Some("full"));
    assert_eq!(
        kind(agent.inject(user("i1")).await),
        Some("already-pending")
    );
    let other = Message::user("i1", "other");
    assert_eq!(kind(agent.inject(other).await), Some("conflict"));
    let guard = agent.followup_if_idle_after(7, user("g")).await;
    assert_eq!(kind(guard), Some("turn-mismatch"));
    let long = Message::user("x".repeat(300), "hi");
    assert_eq!(kind(agent.inject(long).await), Some("id-too-long"));
    agent.dispose().await.unwrap();
    assert_eq!(kind(agent.inject(user("i3")).await), Some("disposed"));
    assert_eq!(kind(agent.resume().await), Some("disposed"));

    let (agent, _) = open(FakeHost::new()).await;
    agent.close().await.unwrap();
    assert_eq!(kind(agent.followup(user("a")).await), Some("closed"));
    assert_eq!(agent.ending().map(|e| e.kind()), Some("closed"));
}
