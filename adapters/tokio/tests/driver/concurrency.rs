//! 16 tasks deliver, edit and cancel against one agent; afterwards every acknowledged delivery
//! is in the log exactly once, as pending, claimed or discarded (I3), and the log restores to
//! the agent's own pending lists (S49).

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};

use coxswain_tokio::coxswain_core::{CancelCause, Message, PreStepAnswer, StepAnswer, Target};
use coxswain_tokio::coxswain_log::{parse, repair, Record};
use coxswain_tokio::{Agent, MemoryLog, SyncPolicy};
use serde_json::json;

use crate::support::*;

const TASKS: usize = 16;
const OPS: usize = 250;

/// xorshift64*: deterministic choices per task.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Default)]
struct Outcomes {
    acknowledged: Vec<String>,
    removed: Vec<String>,
    rejected: usize,
    cancels: usize,
    operations: usize,
}

fn host(tool_ids: Arc<Mutex<Vec<String>>>) -> FakeHost {
    FakeHost::new()
        .on_pre_step(|cx| async move {
            tokio::task::yield_now().await;
            if cx.turn % 11 == 0 && cx.step == 1 {
                PreStepAnswer::Reject
            } else {
                PreStepAnswer::Enter(cx.messages)
            }
        })
        .on_step(move |cx| {
            let tool_ids = tool_ids.clone();
            async move {
                tokio::task::yield_now().await;
                if cx.turn % 5 == 0 && cx.step == 1 {
                    cx.record("tool/call", json!({"turn": cx.turn})).await.ok();
                    let id = format!("tool-{}", cx.turn);
                    let tool = Message::new(id.as_str(), json!({"kind": "tool"}), json!("out"));
                    if cx.agent.inject(tool).await.is_ok() {
                        tool_ids.lock().unwrap().push(id);
                    }
                }
                tokio::task::yield_now().await;
                match (cx.turn + cx.step) % 4 {
                    _ if cx.step >= 3 => StepAnswer::Completed,
                    0 => StepAnswer::Continue,
                    2 => StepAnswer::MaxTokens,
                    _ => StepAnswer::Completed,
                }
            }
        })
}

async fn worker(agent: Agent, task: usize) -> Outcomes {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((task as u64 + 1) * 0x1000_0001));
    let mut out = Outcomes::default();
    let mut mine: Vec<String> = Vec::new();
    for op in 0..OPS {
        let id = format!("t{task}-{op}");
        let message = user(&id);
        let choice = rng.below(100);
        out.operations += 1;
        let delivered = match choice {
            0..40 => Some(agent.followup(message).await),
            40..55 => Some(agent.steer(message).await),
            55..70 => Some(agent.inject(message).await),
            70..75 => Some(agent.send(message, Target::NextTurn, false).await),
            75..80 => Some(agent.prepend(Target::NextStep, message).await),
            80..86 if !mine.is_empty() => {
                let victim = mine[rng.below(mine.len() as u64) as usize].clone();
                if agent.remove(victim.as_str()).await.unwrap() {
                    out.removed.push(victim);
                }
                None
            }
            86..92 if !mine.is_empty() => {
                let old = mine[rng.below(mine.len() as u64) as usize].clone();
                if agent.replace(old.as_str(), message).await.unwrap() {
                    out.removed.push(old);
                    out.acknowledged.push(id.clone());
                    mine.push(id.clone());
                }
                None
            }
            92..99 => {
                agent.cancel(CancelCause::User, true).await.unwrap();
                out.cancels += 1;
                None
            }
            99 => {
                agent.cancel(CancelCause::Parent, false).await.unwrap();
                out.cancels += 1;
                None
            }
            _ => None,
        };
        match delivered {
            Some(Ok(())) => {
                out.acknowledged.push(id.clone());
                mine.push(id);
            }
            Some(Err(_)) => out.rejected += 1,
            None => {}
        }
        if op % 16 == 0 {
            tokio::task::yield_now().await;
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i3_sixteen_tasks_deliver_and_cancel_and_nothing_is_lost_or_doubled() {
    let log = MemoryLog::new();
    let tool_ids: Arc<Mutex<Vec<String>>> = Arc::default();
    let (agent, _) = Agent::open(host(tool_ids.clone()), log.clone())
        .await
        .unwrap();
    sixteen_tasks(agent, tool_ids, || log.records().unwrap()).await;
}

/// The same on a `FileLog` that syncs every append, with group commit (the default): the 16
/// tasks' inputs share appends, so there are fewer syncs than calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i3_sixteen_tasks_on_a_file_log_share_syncs_and_nothing_is_lost_or_doubled() {
    let dir = match tempfile::tempdir_in("/dev/shm") {
        Ok(dir) => dir,
        Err(_) => tempfile::tempdir().unwrap(),
    };
    let path = dir.path().join("concurrency.jsonl");
    let faults = coxswain_driver_sim::file_faults::FileFaults::new();
    let log = faults
        .open_file_log(&path, SyncPolicy::EveryAppend)
        .await
        .unwrap();
    let tool_ids: Arc<Mutex<Vec<String>>> = Arc::default();
    let (agent, _) = Agent::open(host(tool_ids.clone()), log).await.unwrap();
    let calls = sixteen_tasks(agent, tool_ids, || {
        parse(&std::fs::read(&path).unwrap()).unwrap().records
    })
    .await;
    let syncs = faults.syncs();
    println!("file log: {calls} calls, {syncs} syncs");
    assert!(
        syncs < calls,
        "{syncs} syncs for {calls} calls: no group formed"
    );
}

/// Runs the 16 tasks against `agent`, closes it, checks the log `records` reads, and returns
/// how many calls the tasks made.
async fn sixteen_tasks(
    agent: Agent,
    tool_ids: Arc<Mutex<Vec<String>>>,
    records: impl FnOnce() -> Vec<Record>,
) -> usize {
    let workers: Vec<_> = (0..TASKS)
        .map(|task| tokio::spawn(worker(agent.clone(), task)))
        .collect();
    let mut all = Outcomes::default();
    for handle in workers {
        let out = handle.await.unwrap();
        all.acknowledged.extend(out.acknowledged);
        all.removed.extend(out.removed);
        all.rejected += out.rejected;
        all.cancels += out.cancels;
        all.operations += out.operations;
    }
    agent.when_idle().await.unwrap();
    // Quiet deliveries park (S20): the pending lists are not empty at the end.
    for i in 0..TASKS {
        let id = format!("tail-{i}");
        if i % 2 == 0 {
            agent.inject(user(&id)).await.unwrap();
        } else {
            agent
                .send(user(&id), Target::NextTurn, false)
                .await
                .unwrap();
        }
        all.acknowledged.push(id);
        all.operations += 1;
    }
    agent.when_idle().await.unwrap();
    let (next_turn, next_step) = pending(&agent).await;
    agent.close().await.unwrap();
    all.acknowledged
        .extend(tool_ids.lock().unwrap().iter().cloned());

    let records = records();
    check_seq(&records);
    let auditor = audit(&records);
    assert_eq!(auditor.position().open_turn(), None);
    let ledger = Ledger::of(&records);
    ledger.check_conservation();

    // Every acknowledged delivery is in the log exactly once, and nothing else is.
    let inserted: HashSet<&String> = ledger.inserted.iter().collect();
    assert_eq!(
        inserted.len(),
        ledger.inserted.len(),
        "no id inserted twice"
    );
    let acknowledged: BTreeSet<&String> = all.acknowledged.iter().collect();
    assert_eq!(acknowledged.len(), all.acknowledged.len());
    assert_eq!(
        inserted.iter().copied().collect::<BTreeSet<_>>(),
        acknowledged,
        "the log holds exactly the acknowledged deliveries"
    );
    assert_eq!(all.rejected, 0, "ids are unique, so nothing is rejected");
    // Removed ids were discarded; pending lists match the agent's (S49) and a restore.
    let discarded: HashSet<&String> = ledger.discarded.iter().collect();
    assert!(all.removed.iter().all(|id| discarded.contains(id)));
    assert_eq!(ledger.next_turn, next_turn);
    assert_eq!(ledger.next_step, next_step);
    let restored = repair(&records).unwrap().machine;
    let list = |target| {
        restored
            .pending(target)
            .map(|p| (p.message().id().to_string(), p.is_waking()))
            .collect::<Vec<_>>()
    };
    assert_eq!(list(Target::NextTurn), next_turn);
    assert_eq!(list(Target::NextStep), next_step);
    assert!(ledger.pending() >= TASKS);

    let turns = records
        .iter()
        .filter(|r| r.event["type"] == "turn/start")
        .count();
    let steps = records
        .iter()
        .filter(|r| r.event["type"] == "step/start")
        .count();
    assert_eq!(all.operations, TASKS * OPS + TASKS);
    assert_eq!(
        all.acknowledged.len(),
        ledger.pending() + ledger.claimed.len() + ledger.discarded.len()
    );
    println!(
        "concurrency: {TASKS} tasks, {} operations ({} cancels), {} acknowledged deliveries = \
         {} pending + {} claimed + {} discarded; {turns} turns, {steps} steps, {} log records",
        all.operations,
        all.cancels,
        all.acknowledged.len(),
        ledger.pending(),
        ledger.claimed.len(),
        ledger.discarded.len(),
        records.len()
    );
    all.operations
}
