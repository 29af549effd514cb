//! Fakes and log readers shared by the driver tests.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use coxswain_tokio::coxswain_core::{
    Message, PreStepAnswer, StepAnswer, Target, TurnStoppingAnswer,
};
use coxswain_tokio::coxswain_log::{Auditor, Entry, Record};
use coxswain_tokio::{
    Agent, DurableLog, Host, LogError, MemoryLog, PreStepContext, ReadBack, Recovery, StepContext,
    TurnStoppingContext, Update,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type Handler<C, A> = Arc<dyn Fn(C) -> BoxFuture<A> + Send + Sync>;

/// A host whose calls are closures (defaults: enter the batch; a 100 ms step that completes, or
/// returns early when cancelled; turn-stopping done). Every call is noted in `calls`.
#[derive(Clone, Default)]
pub(crate) struct FakeHost {
    pub(crate) calls: Arc<Mutex<Vec<String>>>,
    pre_step: Option<Handler<PreStepContext, PreStepAnswer>>,
    step: Option<Handler<StepContext, StepAnswer>>,
    turn_stopping: Option<Handler<TurnStoppingContext, TurnStoppingAnswer>>,
}

impl FakeHost {
    pub(crate) fn new() -> Self {
        FakeHost::default()
    }

    pub(crate) fn on_pre_step<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(PreStepContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = PreStepAnswer> + Send + 'static,
    {
        self.pre_step = Some(Arc::new(move |cx| Box::pin(f(cx))));
        self
    }

    pub(crate) fn on_step<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(StepContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = StepAnswer> + Send + 'static,
    {
        self.step = Some(Arc::new(move |cx| Box::pin(f(cx))));
        self
    }

    pub(crate) fn on_turn_stopping<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(TurnStoppingContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = TurnStoppingAnswer> + Send + 'static,
    {
        self.turn_stopping = Some(Arc::new(move |cx| Box::pin(f(cx))));
        self
    }

    pub(crate) fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    fn note(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }
}

impl Host for FakeHost {
    async fn pre_step(&self, cx: PreStepContext) -> PreStepAnswer {
        let ids: Vec<&str> = cx.messages.iter().map(|m| m.id().as_str()).collect();
        let cancelled = if cx.cancel.is_cancelled() {
            " cancelled"
        } else {
            ""
        };
        self.note(format!(
            "pre_step {}.{} [{}]{cancelled}",
            cx.turn,
            cx.step,
            ids.join(",")
        ));
        match &self.pre_step {
            Some(f) => f(cx).await,
            None => PreStepAnswer::Enter(cx.messages),
        }
    }

    async fn step(&self, cx: StepContext) -> StepAnswer {
        self.note(format!("step {}.{}", cx.turn, cx.step));
        match &self.step {
            Some(f) => f(cx).await,
            None => {
                if sleep_or_cancel(100, &cx.cancel).await {
                    // Cooperative cancellation: a little cleanup before answering (S40).
                    sleep(5).await;
                }
                StepAnswer::Completed
            }
        }
    }

    async fn turn_stopping(&self, cx: TurnStoppingContext) -> TurnStoppingAnswer {
        self.note(format!("turn_stopping {}", cx.turn));
        match &self.turn_stopping {
            Some(f) => f(cx).await,
            None => TurnStoppingAnswer::Done,
        }
    }
}

/// Sleeps `ms` (paused clock in most tests) unless the token trips first; true if it did.
pub(crate) async fn sleep_or_cancel(ms: u64, token: &CancellationToken) -> bool {
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(ms)) => false,
        () = token.cancelled() => true,
    }
}

pub(crate) async fn sleep(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

pub(crate) fn user(id: &str) -> Message {
    Message::user(id, id)
}

/// An agent on a fresh in-memory log, and a view of the log.
pub(crate) async fn open(host: FakeHost) -> (Agent, MemoryLog) {
    let log = MemoryLog::new();
    let (agent, recovery) = Agent::open(host, log.clone()).await.unwrap();
    assert_eq!(recovery.records, 0);
    (agent, log)
}

/// An agent on a log holding `bytes`.
pub(crate) async fn reopen(host: FakeHost, bytes: Vec<u8>) -> (Agent, MemoryLog, Recovery) {
    let log = MemoryLog::from_bytes(bytes);
    let (agent, recovery) = Agent::open(host, log.clone()).await.unwrap();
    (agent, log, recovery)
}

/// The log in shorthand, one string per record:
/// `NT 0 +[a] wakeup` (a splice: target, start, -removed, +[inserted], outcome, wakeup),
/// `turn 1`, `step 1.2`, `msg a`, `/step 1.2`, `end 1 completed`, `host tool/call`.
pub(crate) fn brief(log: &MemoryLog) -> Vec<String> {
    let records = log.records().unwrap();
    check_seq(&records);
    records.iter().map(|r| brief_event(&r.event)).collect()
}

pub(crate) fn brief_event(event: &Value) -> String {
    let kind = event["type"].as_str().unwrap_or("?");
    let data = &event["data"];
    let n = |key: &str| data[key].as_u64().unwrap_or(0);
    match kind {
        "agent/inbox/spliced" => {
            let target = if data["target"] == "next-turn" {
                "NT"
            } else {
                "NS"
            };
            let mut s = format!("{target} {}", n("start"));
            if n("removedCount") > 0 {
                s += &format!(" -{}", n("removedCount"));
            }
            let ids: Vec<&str> = data["inserted"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["id"].as_str().unwrap())
                .collect();
            if !ids.is_empty() {
                s += &format!(" +[{}]", ids.join(","));
            }
            if let Some(outcome) = data["outcome"].as_str() {
                s += &format!(" {outcome}");
            }
            if data["wakeup"] == true {
                s += " wakeup";
            }
            s
        }
        "turn/start" => format!("turn {}", n("turn")),
        "step/start" => format!("step {}.{}", n("turn"), n("step")),
        "user/message" => format!("msg {}", data["id"].as_str().unwrap()),
        "step/end" => format!("/step {}.{}", n("turn"), n("step")),
        "turn/end" => {
            let reason = &data["reason"];
            let mut s = format!("end {} {}", n("turn"), reason["kind"].as_str().unwrap());
            if let Some(cause) = reason["reason"]["kind"].as_str() {
                s += &format!(" {cause}");
            }
            if let Some(code) = reason["error"]["code"].as_str() {
                s += &format!(" {code}");
            }
            s
        }
        other => format!("host {other}"),
    }
}

/// Every record carries `seq` = its line number.
pub(crate) fn check_seq(records: &[Record]) {
    for record in records {
        assert_eq!(record.seq, Some(record.line as u64), "{:?}", record.event);
    }
}

/// The log audits clean (I1, I2, I4, I5, splice rules) and returns the auditor.
pub(crate) fn audit(records: &[Record]) -> Auditor {
    let mut auditor = Auditor::new();
    for record in records {
        auditor
            .push_json(&record.event)
            .unwrap_or_else(|v| panic!("line {}: {v}", record.line));
    }
    auditor
}

/// Where every inserted message went, by replaying the splices (I3): each inserted instance
/// ends in exactly one of the lists.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    pub(crate) inserted: Vec<String>,
    pub(crate) claimed: Vec<String>,
    pub(crate) discarded: Vec<String>,
    pub(crate) next_turn: Vec<(String, bool)>,
    pub(crate) next_step: Vec<(String, bool)>,
}

impl Ledger {
    pub(crate) fn of(records: &[Record]) -> Ledger {
        let mut ledger = Ledger::default();
        for record in records {
            if record.event["type"] != "agent/inbox/spliced" {
                continue;
            }
            let data = &record.event["data"];
            let start = data["start"].as_u64().unwrap() as usize;
            let removed = data["removedCount"].as_u64().unwrap_or(0) as usize;
            let wakeup = data["wakeup"] == true;
            let canceled = data["outcome"] == "canceled";
            let list = if data["target"] == "next-turn" {
                &mut ledger.next_turn
            } else {
                &mut ledger.next_step
            };
            let gone: Vec<String> = list
                .drain(start..start + removed)
                .map(|(id, _)| id)
                .collect();
            let ids: Vec<String> = data["inserted"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["id"].as_str().unwrap().to_owned())
                .collect();
            for (offset, id) in ids.iter().enumerate() {
                list.insert(start + offset, (id.clone(), wakeup));
            }
            ledger.inserted.extend(ids);
            if canceled {
                ledger.discarded.extend(gone);
            } else {
                ledger.claimed.extend(gone);
            }
        }
        ledger
    }

    pub(crate) fn pending(&self) -> usize {
        self.next_turn.len() + self.next_step.len()
    }

    /// I3: inserted = pending + claimed + discarded, as multisets.
    pub(crate) fn check_conservation(&self) {
        let mut fates: Vec<&String> = self
            .claimed
            .iter()
            .chain(&self.discarded)
            .chain(self.next_turn.iter().map(|(id, _)| id))
            .chain(self.next_step.iter().map(|(id, _)| id))
            .collect();
        let mut inserted: Vec<&String> = self.inserted.iter().collect();
        fates.sort();
        inserted.sort();
        assert_eq!(
            fates, inserted,
            "every inserted message has exactly one fate"
        );
    }
}

/// The pending lists of an agent as (id, waking) pairs.
pub(crate) async fn pending(agent: &Agent) -> (Vec<(String, bool)>, Vec<(String, bool)>) {
    let snapshot = agent.pending().await.unwrap();
    let list = |items: &[coxswain_tokio::coxswain_core::Pending]| {
        items
            .iter()
            .map(|p| (p.message().id().to_string(), p.is_waking()))
            .collect::<Vec<_>>()
    };
    (list(&snapshot.next_turn), list(&snapshot.next_step))
}

/// Collects updates until the channel ends or `Ended` comes.
pub(crate) fn drain_updates(rx: &mut tokio::sync::broadcast::Receiver<Update>) -> Vec<Update> {
    let mut updates = Vec::new();
    while let Ok(update) = rx.try_recv() {
        updates.push(update);
    }
    updates
}

/// The notifications among updates, in shorthand: `inserted a`, `claimed a 1`, `status running`…
pub(crate) fn notes(updates: &[Update]) -> Vec<String> {
    use coxswain_tokio::coxswain_core::{Notification, Status};
    updates
        .iter()
        .filter_map(|u| match u {
            Update::Notified(n) => Some(match n {
                Notification::Inserted { message } => format!("inserted {}", message.id()),
                Notification::Discarded { message } => format!("discarded {}", message.id()),
                Notification::Claimed { message, turn } => {
                    format!("claimed {} {turn}", message.id())
                }
                Notification::Status { status } => format!(
                    "status {}",
                    if *status == Status::Running {
                        "running"
                    } else {
                        "idle"
                    }
                ),
                Notification::Error { turn, step, error } => {
                    format!("error {turn}.{step} {}", error.code)
                }
            }),
            _ => None,
        })
        .collect()
}

/// A log that fails the appends with these 0-based indices (counting appends after open):
/// `fail_at` and every one after it ([`new`](FailingLog::new)), or a range of them, after which
/// the log takes appends again ([`failing`](FailingLog::failing)), as a disk that filled up and
/// was freed. A failed append writes nothing: a clean cut-back (`LogError::Io`), or, made
/// [`indeterminate`](FailingLog::indeterminate), one whose cut-back failed
/// (`LogError::Indeterminate`).
pub(crate) struct FailingLog {
    pub(crate) inner: MemoryLog,
    fails: std::ops::Range<usize>,
    indeterminate: bool,
    appends: usize,
}

impl FailingLog {
    pub(crate) fn new(inner: MemoryLog, fail_at: usize) -> Self {
        FailingLog::failing(inner, fail_at..usize::MAX)
    }

    pub(crate) fn failing(inner: MemoryLog, fails: std::ops::Range<usize>) -> Self {
        FailingLog {
            inner,
            fails,
            indeterminate: false,
            appends: 0,
        }
    }

    /// Its failures are `LogError::Indeterminate`: the batch may or may not be in the log.
    pub(crate) fn indeterminate(mut self) -> Self {
        self.indeterminate = true;
        self
    }
}

impl DurableLog for FailingLog {
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
        let index = self.appends;
        self.appends += 1;
        if self.fails.contains(&index) {
            let error = std::io::Error::other("disk full (injected)");
            return Err(match self.indeterminate {
                false => error.into(),
                true => LogError::Indeterminate {
                    error: Arc::new(error),
                    undo: Arc::new(std::io::Error::other("truncate failed (injected)")),
                },
            });
        }
        self.inner.append(batch).await
    }

    async fn sync(&mut self) -> Result<(), LogError> {
        self.inner.sync().await
    }
}

/// A log that hands every failed append to `on_failure` before returning the error (to end an
/// injected fault once it fired, as a disk that recovers, and to note where the log stood).
pub(crate) struct Watched<L> {
    inner: L,
    on_failure: Box<dyn FnMut(&LogError) + Send>,
}

impl<L: DurableLog> Watched<L> {
    pub(crate) fn new(inner: L, on_failure: impl FnMut(&LogError) + Send + 'static) -> Self {
        Watched {
            inner,
            on_failure: Box::new(on_failure),
        }
    }
}

impl<L: DurableLog> DurableLog for Watched<L> {
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
        let appended = self.inner.append(batch).await;
        if let Err(error) = &appended {
            (self.on_failure)(error);
        }
        appended
    }

    async fn sync(&mut self) -> Result<(), LogError> {
        self.inner.sync().await
    }
}

pub(crate) fn nt(ids: &[&str]) -> Vec<(String, bool)> {
    ids.iter().map(|id| (id.to_string(), true)).collect()
}

pub(crate) const NT: Target = Target::NextTurn;

pub(crate) fn open_memory() -> MemoryLog {
    MemoryLog::new()
}
