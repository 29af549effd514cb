//! Group commit: every input already waiting is fed in arrival order and appended as one batch;
//! nothing is acknowledged, published or started before that batch is durable (its records
//! first, then its notifications); a failed batch fails every input in it, is rolled back (S5),
//! and the agent goes on.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use coxswain_tokio::coxswain_core::{Rejected, StepAnswer};
use coxswain_tokio::coxswain_log::{Entry, Record};
use coxswain_tokio::{
    Agent, AgentError, DurableLog, LogError, MemoryLog, Options, ReadBack, Update,
};
use tokio::sync::oneshot;

use crate::support::*;

/// A log that records the size of every append, holds its first append until a gate opens, and
/// fails the appends whose indices are in `fails` (writing nothing).
pub(crate) struct GroupLog {
    pub(crate) inner: MemoryLog,
    pub(crate) sizes: Arc<Mutex<Vec<usize>>>,
    gate: Option<oneshot::Receiver<()>>,
    fails: std::ops::Range<usize>,
}

impl GroupLog {
    pub(crate) fn new(inner: MemoryLog) -> Self {
        GroupLog {
            inner,
            sizes: Arc::default(),
            gate: None,
            fails: 0..0,
        }
    }

    fn gated(inner: MemoryLog) -> (Self, oneshot::Sender<()>) {
        let (open, gate) = oneshot::channel();
        let log = GroupLog {
            gate: Some(gate),
            ..GroupLog::new(inner)
        };
        (log, open)
    }
}

impl DurableLog for GroupLog {
    async fn read_back(
        &mut self,
        visit: &mut (dyn FnMut(Record) -> std::ops::ControlFlow<()> + Send),
    ) -> Result<ReadBack, LogError> {
        self.inner.read_back(visit).await
    }

    async fn repair_tail(&mut self) -> Result<(), LogError> {
        self.inner.repair_tail().await
    }

    async fn append(&mut self, batch: &[Entry]) -> Result<u64, LogError> {
        if let Some(gate) = self.gate.take() {
            let _ = gate.await;
        }
        let index = {
            let mut sizes = self.sizes.lock().unwrap();
            sizes.push(batch.len());
            sizes.len() - 1
        };
        if self.fails.contains(&index) {
            return Err(std::io::Error::other("disk full (injected)").into());
        }
        self.inner.append(batch).await
    }

    async fn sync(&mut self) -> Result<(), LogError> {
        self.inner.sync().await
    }
}

/// Opens an agent on a gated log with `max_batch`, sends `a` (its append waits at the gate),
/// then ten injects from ten tasks; returns what each was told, in id order, and the append
/// sizes once the gate opened.
async fn burst(
    max_batch: usize,
    fails: std::ops::Range<usize>,
) -> (
    Vec<(String, Result<(), AgentError>)>,
    Vec<usize>,
    MemoryLog,
    Agent,
) {
    let memory = MemoryLog::new();
    let (mut log, open) = GroupLog::gated(memory.clone());
    log.fails = fails;
    let sizes = Arc::clone(&log.sizes);
    let mut options = Options::default();
    options.max_batch = max_batch;
    let (agent, _) = Agent::open_with(options, FakeHost::new(), log)
        .await
        .unwrap();
    let acknowledged = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..11 {
        let id = if i == 0 {
            "a".to_owned()
        } else {
            format!("b{i:02}")
        };
        let agent = agent.clone();
        let acknowledged = Arc::clone(&acknowledged);
        tasks.push(tokio::spawn(async move {
            let told = agent.inject(user(&id)).await;
            acknowledged.fetch_add(1, Ordering::SeqCst);
            (id, told)
        }));
        if i == 0 {
            sleep(10).await; // `a` is in its append, held at the gate
        }
    }
    sleep(100).await;
    // Nothing was acknowledged while the first append waits; nothing is in the log.
    assert_eq!(acknowledged.load(Ordering::SeqCst), 0);
    assert!(memory.records().unwrap().is_empty());
    open.send(()).unwrap();
    let mut told = Vec::new();
    for task in tasks {
        told.push(task.await.unwrap());
    }
    told.sort_by(|a, b| a.0.cmp(&b.0));
    let sizes = sizes.lock().unwrap().clone();
    (told, sizes, memory, agent)
}

#[tokio::test(start_paused = true)]
async fn every_waiting_input_is_one_append_in_arrival_order() {
    let (told, sizes, memory, agent) = burst(64, 0..0).await;
    assert!(told.iter().all(|(_, t)| t.is_ok()), "{told:?}");
    assert_eq!(sizes, [1, 10]);
    let expected: Vec<String> = (0..11)
        .map(|i| match i {
            0 => "NS 0 +[a]".to_owned(),
            i => format!("NS {i} +[b{i:02}]"),
        })
        .collect();
    assert_eq!(brief(&memory), expected);
    check_seq(&memory.records().unwrap());
    agent.close().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn max_batch_bounds_a_group_and_1_appends_once_per_input() {
    let (told, sizes, memory, agent) = burst(4, 0..0).await;
    assert!(told.iter().all(|(_, t)| t.is_ok()));
    assert_eq!(sizes, [1, 4, 4, 2]);
    assert_eq!(memory.records().unwrap().len(), 11);
    agent.close().await.unwrap();

    let (told, sizes, memory, agent) = burst(1, 0..0).await;
    assert!(told.iter().all(|(_, t)| t.is_ok()));
    assert_eq!(sizes, [1; 11]);
    assert_eq!(brief(&memory)[10], "NS 10 +[b10]");
    agent.close().await.unwrap();
}

/// The second append (ten injects) fails: each of the ten gets `Persistence`, the machine is
/// rolled back to its state before the batch (S5: none is pending or remembered), and the agent
/// goes on: the next input and the ten sent again are appended.
#[tokio::test(start_paused = true)]
async fn a_failed_group_fails_every_input_in_it_and_the_agent_goes_on() {
    let (told, sizes, memory, agent) = burst(64, 1..2).await;
    assert_eq!(sizes, [1, 10]);
    assert!(told[0].1.is_ok());
    for (id, outcome) in &told[1..] {
        assert!(
            matches!(outcome, Err(AgentError::Persistence(LogError::Io(_)))),
            "{id}: {outcome:?}"
        );
    }
    assert_eq!(brief(&memory), ["NS 0 +[a]"]);
    assert!(agent.ending().is_none());
    assert_eq!(
        pending(&agent).await,
        (vec![], vec![("a".to_owned(), false)])
    );
    agent.inject(user("c")).await.unwrap();
    for i in 1..=10 {
        agent.inject(user(&format!("b{i:02}"))).await.unwrap();
    }
    assert!(agent.ending().is_none());
    let mut expected = vec!["NS 0 +[a]".to_owned(), "NS 1 +[c]".to_owned()];
    expected.extend((1..=10).map(|i| format!("NS {} +[b{i:02}]", i + 1)));
    assert_eq!(brief(&memory), expected);
    agent.close().await.unwrap();
    // Re-opened: exactly what was acknowledged.
    let (agent, _, recovery) = reopen(FakeHost::new(), memory.bytes()).await;
    assert_eq!(recovery.pending_next_step, 12);
    agent.close().await.unwrap();
}

/// A refusal judged against a state holding an earlier member of the same batch (the second
/// `x`: `AlreadyPending` only because the first `x` is staged) stands only if that batch is
/// durable: when the batch fails, it fails with it (`Persistence`), and both may be sent again.
#[tokio::test(start_paused = true)]
async fn a_refusal_against_a_failed_batch_fails_with_the_batch() {
    let memory = MemoryLog::new();
    let (mut log, open) = GroupLog::gated(memory.clone());
    log.fails = 1..2;
    let sizes = Arc::clone(&log.sizes);
    let (agent, _) = Agent::open(FakeHost::new(), log).await.unwrap();
    let first = tokio::spawn({
        let agent = agent.clone();
        async move { agent.inject(user("a")).await }
    });
    sleep(10).await;
    let mut tasks = Vec::new();
    for id in ["x", "x"] {
        let agent = agent.clone();
        tasks.push(tokio::spawn(async move { agent.inject(user(id)).await }));
        sleep(1).await;
    }
    open.send(()).unwrap();
    first.await.unwrap().unwrap();
    let told: Vec<_> = futures_all(tasks).await;
    for outcome in &told {
        assert!(
            matches!(outcome, Err(AgentError::Persistence(LogError::Io(_)))),
            "{outcome:?}"
        );
    }
    assert_eq!(*sizes.lock().unwrap(), [1, 1]);
    assert_eq!(brief(&memory), ["NS 0 +[a]"]);
    assert!(agent.ending().is_none());
    // Sent again, the first is appended and the second refused against the durable state.
    agent.inject(user("x")).await.unwrap();
    assert!(matches!(
        agent.inject(user("x")).await,
        Err(AgentError::Rejected(Rejected::AlreadyPending(id))) if id.as_str() == "x"
    ));
    assert_eq!(brief(&memory), ["NS 0 +[a]", "NS 1 +[x]"]);
    agent.close().await.unwrap();
}

/// A refused member is told its refusal, accepted ones around it are committed; members are fed
/// in arrival order (the second `x` is a duplicate of the first, S13).
#[tokio::test(start_paused = true)]
async fn a_refused_input_inside_a_group_is_told_its_refusal() {
    let memory = MemoryLog::new();
    let (log, open) = GroupLog::gated(memory.clone());
    let sizes = Arc::clone(&log.sizes);
    let (agent, _) = Agent::open(FakeHost::new(), log).await.unwrap();
    let mut updates = agent.subscribe();
    let first = tokio::spawn({
        let agent = agent.clone();
        async move { agent.inject(user("a")).await }
    });
    sleep(10).await;
    let mut tasks = Vec::new();
    for id in ["x", "x", "y"] {
        let agent = agent.clone();
        tasks.push(tokio::spawn(async move { agent.inject(user(id)).await }));
        sleep(1).await;
    }
    // Nothing is published while the group waits for its append.
    assert!(drain_updates(&mut updates).is_empty());
    open.send(()).unwrap();
    first.await.unwrap().unwrap();
    let told: Vec<_> = futures_all(tasks).await;
    assert!(told[0].is_ok());
    assert!(matches!(
        &told[1],
        Err(AgentError::Rejected(Rejected::AlreadyPending(id))) if id.as_str() == "x"
    ));
    assert!(told[2].is_ok());
    assert_eq!(*sizes.lock().unwrap(), [1, 2]);
    assert_eq!(brief(&memory), ["NS 0 +[a]", "NS 1 +[x]", "NS 2 +[y]"]);
    // Each batch's records, then its notifications, in order: `a`'s batch, then `x`, `x`
    // (refused: no record, no notification) and `y`'s.
    let all = drain_updates(&mut updates);
    assert_eq!(notes(&all), ["inserted a", "inserted x", "inserted y"]);
    let seen: Vec<String> = all
        .iter()
        .filter_map(|update| match update {
            Update::Recorded { seq, .. } => Some(format!("record {seq}")),
            Update::Notified(_) => Some("note".to_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(
        seen,
        ["record 1", "note", "record 2", "record 3", "note", "note"]
    );
    agent.close().await.unwrap();
}

/// An input after a dispose in the same group is not fed: it is told the agent was disposed,
/// as when the dispose was settled alone.
#[tokio::test(start_paused = true)]
async fn a_group_ends_at_a_dispose() {
    let memory = MemoryLog::new();
    let (log, open) = GroupLog::gated(memory.clone());
    let sizes = Arc::clone(&log.sizes);
    let (agent, _) = Agent::open(FakeHost::new(), log).await.unwrap();
    let first = tokio::spawn({
        let agent = agent.clone();
        async move { agent.inject(user("a")).await }
    });
    sleep(10).await;
    let x = tokio::spawn({
        let agent = agent.clone();
        async move { agent.inject(user("x")).await }
    });
    sleep(1).await;
    let dispose = tokio::spawn({
        let agent = agent.clone();
        async move { agent.dispose().await }
    });
    sleep(1).await;
    let after = tokio::spawn({
        let agent = agent.clone();
        async move { agent.inject(user("y")).await }
    });
    sleep(1).await;
    open.send(()).unwrap();
    first.await.unwrap().unwrap();
    x.await.unwrap().unwrap();
    dispose.await.unwrap().unwrap();
    assert!(matches!(
        after.await.unwrap(),
        Err(AgentError::Rejected(Rejected::AfterDisposal))
    ));
    // `x` and the dispose's clear were one append; `y` never reached the core.
    assert_eq!(*sizes.lock().unwrap(), [1, 2]);
    assert_eq!(
        brief(&memory),
        ["NS 0 +[a]", "NS 1 +[x]", "NS 0 -2 canceled"]
    );
}

/// Host events recorded inside a step join a group with the inputs around them.
#[tokio::test(start_paused = true)]
async fn host_events_join_a_group_inside_their_step() {
    let host = FakeHost::new().on_step(|cx| async move {
        let agent = cx.agent.clone();
        let steer = tokio::spawn(async move { agent.steer(user("s1")).await });
        cx.record("tool/call", serde_json::json!({"n": 1}))
            .await
            .unwrap();
        steer.await.unwrap().unwrap();
        StepAnswer::Completed
    });
    let memory = MemoryLog::new();
    let log = GroupLog::new(memory.clone());
    let sizes = Arc::clone(&log.sizes);
    let (agent, _) = Agent::open(host, log).await.unwrap();
    agent.followup(user("m1")).await.unwrap();
    agent.when_idle().await.unwrap();
    let records = memory.records().unwrap();
    check_seq(&records);
    audit(&records);
    assert!(sizes.lock().unwrap().contains(&2), "{sizes:?}");
    agent.close().await.unwrap();
}

async fn futures_all<T>(tasks: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for task in tasks {
        out.push(task.await.unwrap());
    }
    out
}
