//! Durability of the FileLog and the driver: each test reproduces one reported defect (items 1–10
//! of DURABILITY_NOTE.md) and pins the fixed outcome.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use coxswain_driver_sim::file_faults::FileFaults;
use coxswain_tokio::coxswain_core::{Fate, Message, Status, StepAnswer};
use coxswain_tokio::coxswain_log::{
    parse, CorruptLine, Problem, TooDeep, MAX_DATA_DEPTH, MAX_MESSAGE_DEPTH,
};
use coxswain_tokio::{
    Agent, AgentError, DurableLog, Ending, FileLog, InvalidOptions, LogError, OpenError, Options,
    SyncPolicy,
};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::support::*;

fn nested(levels: usize) -> Value {
    let mut value = json!(1);
    for _ in 0..levels {
        value = Value::Array(vec![value]);
    }
    value
}

fn log_path() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    (dir, path)
}

/// The records of the file at `path`, in shorthand (every record carries its line as `seq`).
fn brief_file(path: &Path) -> Vec<String> {
    let parsed = parse(&std::fs::read(path).unwrap()).unwrap();
    assert_eq!(parsed.torn, None);
    check_seq(&parsed.records);
    parsed
        .records
        .iter()
        .map(|r| brief_event(&r.event))
        .collect()
}

/// An agent on a FileLog at `path`, and the switches of its file's faults.
async fn open_file(host: FakeHost, path: &Path, policy: SyncPolicy) -> (Agent, FileFaults) {
    let faults = FileFaults::new();
    let log = faults.open_file_log(path, policy).await.unwrap();
    let (agent, _) = Agent::open(host, log).await.unwrap();
    (agent, faults)
}

/// A host whose step records one host event and completes.
fn recording_host() -> FakeHost {
    FakeHost::new().on_step(|cx| async move {
        cx.record("model/output", json!("x")).await.unwrap();
        StepAnswer::Completed
    })
}

// Item 1 ------------------------------------------------------------------------------------

/// Item 1: a value too deep for a log record is refused with a typed error before anything is
/// written (the agent goes on); what fits reads back, so the log always reopens.
#[tokio::test]
async fn item1_a_too_deep_value_is_refused_before_it_is_written_and_the_log_reopens() {
    let (_dir, path) = log_path();
    let (tx, rx) = oneshot::channel();
    let tx = Arc::new(Mutex::new(Some(tx)));
    let host = FakeHost::new().on_step(move |cx| {
        let tx = tx.lock().unwrap().take();
        async move {
            let deepest = cx.record("tool/result", nested(MAX_DATA_DEPTH)).await;
            let too_deep = cx.record("tool/result", nested(MAX_DATA_DEPTH + 1)).await;
            if let Some(tx) = tx {
                let _ = tx.send((deepest, too_deep));
            }
            StepAnswer::Completed
        }
    });
    let (agent, _) = open_file(host, &path, SyncPolicy::EveryAppend).await;
    // The reported case: 125 nested arrays as a message's content.
    let reported = Message::new("r", json!({"kind": "user"}), nested(125));
    assert!(matches!(
        agent.inject(reported).await,
        Err(AgentError::TooDeep(TooDeep {
            depth: 126,
            max: MAX_MESSAGE_DEPTH
        }))
    ));
    let fits = Message::new("f", json!({"kind": "user"}), nested(MAX_MESSAGE_DEPTH - 1));
    agent.inject(fits).await.unwrap();
    agent.followup(user("a")).await.unwrap();
    let (deepest, too_deep) = rx.await.unwrap();
    deepest.unwrap();
    assert!(matches!(
        too_deep,
        Err(AgentError::TooDeep(TooDeep {
            depth,
            max: MAX_DATA_DEPTH
        })) if depth == MAX_DATA_DEPTH + 1
    ));
    agent.when_idle().await.unwrap();
    agent.close().await.unwrap();

    let (agent, recovery) = Agent::open(FakeHost::new(), FileLog::open(&path).await.unwrap())
        .await
        .unwrap();
    assert_eq!(recovery.records, 11);
    assert_eq!(
        brief_file(&path),
        [
            "NS 0 +[f]",
            "NT 0 +[a] wakeup",
            "turn 1",
            "NS 0 -1",
            "NT 0 -1",
            "step 1.1",
            "msg f",
            "msg a",
            "host tool/result",
            "/step 1.1",
            "end 1 completed"
        ]
    );
    agent.close().await.unwrap();
}

// Item 2 ------------------------------------------------------------------------------------

/// Item 2: a second writer on the same file is refused (`Locked`) while the first lives, in the
/// same process too; the lock goes when the agent's driver has finished (`close` awaits it).
#[tokio::test]
async fn item2_a_second_writer_is_locked_out_until_the_first_has_finished() {
    let (_dir, path) = log_path();
    let first = FileLog::open(&path).await.unwrap();
    assert!(matches!(
        FileLog::open(&path).await,
        Err(LogError::Locked { path: locked }) if locked == path
    ));
    let (agent, _) = Agent::open(FakeHost::new(), first).await.unwrap();
    agent.inject(user("a")).await.unwrap();
    assert!(matches!(
        FileLog::open(&path).await,
        Err(LogError::Locked { .. })
    ));
    agent.close().await.unwrap();
    let (agent, recovery) = Agent::open(FakeHost::new(), FileLog::open(&path).await.unwrap())
        .await
        .unwrap();
    assert_eq!(recovery.pending_next_step, 1);
    agent.inject(user("b")).await.unwrap();
    agent.close().await.unwrap();
    assert_eq!(brief_file(&path), ["NS 0 +[a]", "NS 1 +[b]"]);
}

// Item 3 ------------------------------------------------------------------------------------

/// Item 3: a write that fails part-way is cut back before the error is returned: the failed
/// input is not in the log, the agent goes on as if it had never been sent (S5), and the retry
/// delivers it exactly once, in the same agent and after reopening.
#[tokio::test(start_paused = true)]
async fn item3_a_write_failing_mid_batch_leaves_nothing_and_the_retry_delivers_once() {
    let (_dir, path) = log_path();
    let (agent, faults) = open_file(recording_host(), &path, SyncPolicy::EveryAppend).await;
    agent.inject(user("c")).await.unwrap();
    let before = std::fs::read(&path).unwrap();
    faults.fail_writes_after(10);
    assert!(matches!(
        agent.followup(user("a")).await,
        Err(AgentError::Persistence(LogError::Io(_)))
    ));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "cut back to the acknowledged length"
    );
    // Not stopped, and rolled back: no turn opened, `c` still pending alone.
    assert!(agent.ending().is_none());
    agent.when_idle().await.unwrap();
    assert_eq!(agent.last_turn(), 0);
    assert_eq!(
        pending(&agent).await,
        (vec![], vec![("c".to_owned(), false)])
    );
    // The disk works again: the retry is delivered, once.
    faults.fail_writes_after(u64::MAX);
    agent.followup(user("a")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert!(agent.ending().is_none());
    agent.close().await.unwrap();

    let (agent, recovery) = Agent::open(recording_host(), FileLog::open(&path).await.unwrap())
        .await
        .unwrap();
    assert_eq!(
        (
            recovery.pending_next_turn,
            recovery.pending_next_step,
            recovery.last_turn
        ),
        (0, 0, 1)
    );
    agent.close().await.unwrap();
    let log = brief_file(&path);
    assert_eq!(log.iter().filter(|r| r.as_str() == "msg a").count(), 1);
    assert_eq!(log.iter().filter(|r| r.starts_with("turn ")).count(), 1);
    assert_eq!(
        log,
        [
            "NS 0 +[c]",
            "NT 0 +[a] wakeup",
            "turn 1",
            "NS 0 -1",
            "NT 0 -1",
            "step 1.1",
            "msg c",
            "msg a",
            "host model/output",
            "/step 1.1",
            "end 1 completed"
        ]
    );
}

/// Item 3: the same after a failed sync: the batch is cut back and the cut synced, so the input
/// is definitely not in the log; if the cut's own sync fails too, the outcome is unknown and the
/// error says so (`Indeterminate`).
#[tokio::test(start_paused = true)]
async fn item3_a_failed_sync_is_cut_back_too() {
    let (_dir, path) = log_path();
    let (agent, faults) = open_file(recording_host(), &path, SyncPolicy::EveryAppend).await;
    agent.inject(user("c")).await.unwrap();
    let before = std::fs::read(&path).unwrap();
    faults.fail_syncs(1);
    assert!(matches!(
        agent.followup(user("a")).await,
        Err(AgentError::Persistence(LogError::Io(_)))
    ));
    agent.close().await.unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), before);

    let (agent, faults) = open_file(recording_host(), &path, SyncPolicy::EveryAppend).await;
    faults.fail_syncs(2);
    assert!(matches!(
        agent.followup(user("b")).await,
        Err(AgentError::Indeterminate(LogError::Indeterminate { .. }))
    ));
    agent.close().await.unwrap();
    // (The cut itself worked here; only its sync failed.)
    assert_eq!(brief_file(&path), ["NS 0 +[c]"]);
}

/// Item 3: when the cut-back itself fails, the error is distinct (`Indeterminate`): the input may
/// or may not be in the log.
#[tokio::test]
async fn item3_a_failed_cut_back_is_reported_indeterminate() {
    let (_dir, path) = log_path();
    let (agent, faults) = open_file(FakeHost::new(), &path, SyncPolicy::EveryAppend).await;
    faults.fail_writes_after(5);
    faults.fail_truncates(true);
    let result = agent.inject(user("a")).await;
    assert!(
        matches!(
            &result,
            Err(AgentError::Indeterminate(LogError::Indeterminate { .. }))
        ),
        "{result:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"seq");
    agent.close().await.unwrap();
}

// Item 4 ------------------------------------------------------------------------------------

/// Item 4: once the file is removed, nothing more is acknowledged: the delivery fails
/// `Replaced`, and close reports that the final sync could not make the log durable.
#[tokio::test]
async fn item4_a_removed_file_acknowledges_nothing_more() {
    let (_dir, path) = log_path();
    let (agent, _) = open_file(FakeHost::new(), &path, SyncPolicy::EveryAppend).await;
    agent.inject(user("a")).await.unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(
        agent.inject(user("b")).await,
        Err(AgentError::Persistence(LogError::Replaced { path: p })) if p == path
    ));
    assert!(matches!(
        agent.close().await,
        Err(AgentError::FinalSync(LogError::Replaced { .. }))
    ));
    assert!(!path.exists());
}

/// Item 4: a file renamed over the log is detected the same way, under every policy; the agent
/// goes on (only an indeterminate append stops it), and every append after it checks the file
/// afresh and fails the same way, the dispose's too.
#[tokio::test]
async fn item4_a_replaced_file_acknowledges_nothing_more() {
    for policy in [
        SyncPolicy::EveryAppend,
        SyncPolicy::PerTurn,
        SyncPolicy::Never,
    ] {
        let (dir, path) = log_path();
        let (agent, _) = open_file(FakeHost::new(), &path, policy).await;
        agent.inject(user("a")).await.unwrap();
        let other = dir.path().join("other.jsonl");
        std::fs::write(&other, b"").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert!(matches!(
            agent.followup(user("b")).await,
            Err(AgentError::Persistence(LogError::Replaced { path: p })) if p == path
        ));
        assert!(agent.ending().is_none());
        assert!(matches!(
            agent.inject(user("c")).await,
            Err(AgentError::Persistence(LogError::Replaced { .. }))
        ));
        // S5: nothing of the failed inputs stayed.
        assert_eq!(
            pending(&agent).await,
            (vec![], vec![("a".to_owned(), false)])
        );
        assert_eq!(agent.last_turn(), 0);
        assert!(matches!(
            agent.dispose().await,
            Err(AgentError::Persistence(LogError::Replaced { .. }))
        ));
        assert!(agent.ending().is_none());
        assert!(matches!(
            agent.close().await,
            Err(AgentError::FinalSync(LogError::Replaced { .. }))
        ));
        assert_eq!(std::fs::read(&path).unwrap(), b"");
    }
}

// Item 5 ------------------------------------------------------------------------------------

/// Item 5: a second read-back reads through the log's own handle and refuses a path that names
/// another file; neither file is cut.
#[tokio::test]
async fn item5_a_second_read_back_neither_reads_nor_cuts_another_file() {
    let (dir, path) = log_path();
    let mut log = FileLog::open(&path).await.unwrap();
    log.read_back(&mut |_| std::ops::ControlFlow::Continue(()))
        .await
        .unwrap();
    log.repair_tail().await.unwrap();
    let entry = coxswain_tokio::coxswain_log::Entry::Machine(
        coxswain_tokio::coxswain_core::Event::TurnStart { turn: 1 },
    );
    log.append(&[entry.clone(), entry]).await.unwrap();
    let real = std::fs::read(&path).unwrap();
    let moved = dir.path().join("moved.jsonl");
    std::fs::rename(&path, &moved).unwrap();
    std::fs::write(&path, b"{\"seq\":1,\"ty").unwrap();
    let mut seen = 0;
    let read = log
        .read_back(&mut |_| {
            seen += 1;
            std::ops::ControlFlow::Continue(())
        })
        .await;
    assert!(matches!(read, Err(LogError::Replaced { .. })), "{read:?}");
    assert_eq!(seen, 0);
    // Nothing to repair (the tail was repaired at open); an append is refused.
    log.repair_tail().await.unwrap();
    let entry = coxswain_tokio::coxswain_log::Entry::Machine(
        coxswain_tokio::coxswain_core::Event::TurnStart { turn: 2 },
    );
    assert!(matches!(
        log.append(&[entry]).await,
        Err(LogError::Replaced { .. })
    ));
    assert_eq!(std::fs::read(&moved).unwrap(), real);
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"seq\":1,\"ty");
}

// Item 7 ------------------------------------------------------------------------------------

/// Item 7: `close` and `dispose` report a failed final sync.
#[tokio::test(start_paused = true)]
async fn item7_close_and_dispose_report_a_failed_final_sync() {
    let (_dir, path) = log_path();
    let (agent, faults) = open_file(FakeHost::new(), &path, SyncPolicy::Never).await;
    agent.inject(user("a")).await.unwrap();
    faults.fail_syncs(usize::MAX);
    assert!(matches!(
        agent.dispose().await,
        Err(AgentError::FinalSync(LogError::Io(_)))
    ));
    assert!(matches!(agent.ending(), Some(Ending::Disposed)));

    let (_dir, path) = log_path();
    let (agent, faults) = open_file(FakeHost::new(), &path, SyncPolicy::PerTurn).await;
    agent.inject(user("a")).await.unwrap();
    faults.fail_syncs(usize::MAX);
    assert!(matches!(
        agent.close().await,
        Err(AgentError::FinalSync(LogError::Io(_)))
    ));
    // Asked again, the answer is the same.
    assert!(matches!(agent.close().await, Err(AgentError::FinalSync(_))));
}

/// Item 7: after a failed append the agent goes on and the final sync still runs when it ends,
/// so what was acknowledged under a lazy policy (before the failure and after it) is made durable.
#[tokio::test(start_paused = true)]
async fn item7_the_final_sync_runs_after_a_failed_append() {
    let (_dir, path) = log_path();
    let (agent, faults) = open_file(FakeHost::new(), &path, SyncPolicy::Never).await;
    agent.inject(user("a")).await.unwrap();
    let syncs = faults.syncs();
    faults.fail_writes_after(3);
    assert!(matches!(
        agent.inject(user("b")).await,
        Err(AgentError::Persistence(LogError::Io(_)))
    ));
    assert!(agent.ending().is_none());
    // One sync for the cut-back.
    assert_eq!(faults.syncs(), syncs + 1);
    faults.fail_writes_after(u64::MAX);
    agent.inject(user("c")).await.unwrap();
    assert_eq!(
        faults.syncs(),
        syncs + 1,
        "the policy syncs nothing on append"
    );
    agent.close().await.unwrap();
    // And one final sync.
    assert_eq!(faults.syncs(), syncs + 2);
    assert!(matches!(agent.ending(), Some(Ending::Closed)));
    assert_eq!(brief_file(&path), ["NS 0 +[a]", "NS 1 +[c]"]);
}

// Item 8 ------------------------------------------------------------------------------------

/// Item 8: dropping the embedder's last handle trips the running call's token (the call's own
/// handle does not keep the agent open), the driver ends and releases the log (`finished`
/// says when), and a late record from the old call writes nothing.
#[tokio::test(start_paused = true)]
async fn item8_dropping_the_last_handle_cancels_the_call_and_releases_the_log() {
    let (_dir, path) = log_path();
    let (tx, rx) = oneshot::channel();
    let tx = Arc::new(Mutex::new(Some(tx)));
    let host = FakeHost::new().on_step(move |cx| {
        let tx = tx.lock().unwrap().take();
        async move {
            let cancelled = sleep_or_cancel(60_000, &cx.cancel).await;
            let late = cx.record("tool/cleanup", json!(null)).await;
            if let Some(tx) = tx {
                let _ = tx.send((cancelled, late));
            }
            StepAnswer::Completed
        }
    });
    let (agent, _) = open_file(host, &path, SyncPolicy::EveryAppend).await;
    agent.followup(user("a")).await.unwrap();
    sleep(10).await;
    let finished = agent.finished();
    drop(agent);
    assert!(matches!(finished.await, Ending::Closed));
    let (cancelled, late) = rx.await.unwrap();
    assert!(cancelled, "the token tripped");
    assert!(matches!(late, Err(AgentError::Closed)), "{late:?}");
    // Released: the same file opens again, and the old call wrote nothing after the drop.
    let before = brief_file(&path);
    let (agent, recovery) = Agent::open(FakeHost::new(), FileLog::open(&path).await.unwrap())
        .await
        .unwrap();
    assert_eq!(recovery.interrupted_turn, Some(1));
    agent.close().await.unwrap();
    assert_eq!(
        before,
        ["NT 0 +[a] wakeup", "turn 1", "NT 0 -1", "step 1.1", "msg a"]
    );
}

/// Item 8: with a host that ignores its token, dropping the last handle still ends the driver
/// and releases the log at once.
#[tokio::test(start_paused = true)]
async fn item8_a_host_ignoring_its_token_does_not_keep_the_log() {
    let (_dir, path) = log_path();
    let host = FakeHost::new().on_step(|cx| async move {
        sleep(3_600_000).await;
        drop(cx);
        StepAnswer::Completed
    });
    let (agent, _) = open_file(host, &path, SyncPolicy::EveryAppend).await;
    agent.followup(user("a")).await.unwrap();
    sleep(10).await;
    let finished = agent.finished();
    drop(agent);
    assert!(matches!(finished.await, Ending::Closed));
    FileLog::open(&path).await.unwrap();
}

// Item 9 ------------------------------------------------------------------------------------

/// Item 9: an open that fails (a log restore rejects) changes nothing on disk, torn tail
/// included.
#[tokio::test]
async fn item9_a_failed_open_leaves_the_file_untouched() {
    let (_dir, path) = log_path();
    let content: &[u8] = b"{\"seq\":1,\"type\":\"agent/inbox/spliced\",\"data\":{\"target\":\"next-step\",\"start\":0,\"inserted\":[{\"id\":\"a\"}]}}\n{\"seq\":2,\"type\":\"agent/inbox/spliced\",\"data\":{\"target\":\"next-step\",\"start\":1,\"inserted\":[{\"id\":\"a\"}]}}\n{\"seq\":3,\"ty";
    std::fs::write(&path, content).unwrap();
    let opened = Agent::open(FakeHost::new(), FileLog::open(&path).await.unwrap()).await;
    assert!(
        matches!(&opened, Err(OpenError::Corrupt(error)) if error.line == 2),
        "{:?}",
        opened.err()
    );
    assert_eq!(std::fs::read(&path).unwrap(), content);
}

/// Item 9: a foreign log whose whole last record lacks its `\n` keeps that record; the `\n` is
/// added, and appends follow it.
#[tokio::test]
async fn item9_a_whole_last_record_without_newline_is_kept() {
    let (_dir, path) = log_path();
    let content: &[u8] = b"{\"type\":\"agent/inbox/spliced\",\"data\":{\"target\":\"next-step\",\"start\":0,\"inserted\":[{\"id\":\"a\"}]}}";
    std::fs::write(&path, content).unwrap();
    let (agent, recovery) = Agent::open(FakeHost::new(), FileLog::open(&path).await.unwrap())
        .await
        .unwrap();
    assert_eq!(
        (
            recovery.records,
            recovery.torn_tail,
            recovery.pending_next_step
        ),
        (1, None, 1)
    );
    agent.inject(user("b")).await.unwrap();
    agent.close().await.unwrap();
    let text = String::from_utf8(std::fs::read(&path).unwrap()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0].as_bytes(), content);
    assert!(lines[1].starts_with("{\"seq\":2,"), "{}", lines[1]);
    assert!(text.ends_with('\n'));
}

// Item 10 -----------------------------------------------------------------------------------

/// Item 10: once an agent stopped mid-turn, its status is `Idle`: nothing runs any more. Only an
/// indeterminate append stops it (the batch may or may not be in the log): here the pre-step
/// answer's.
#[tokio::test(start_paused = true)]
async fn item10_status_is_idle_once_the_agent_stopped_mid_turn() {
    let memory = open_memory();
    let log = FailingLog::new(memory.clone(), 1).indeterminate();
    let (agent, _) = Agent::open(FakeHost::new(), log).await.unwrap();
    agent.followup(user("a")).await.unwrap();
    assert!(matches!(agent.when_idle().await, Err(AgentError::Stopped)));
    assert!(matches!(
        agent.ending(),
        Some(Ending::Stopped(LogError::Indeterminate { .. }))
    ));
    // The log ends inside turn 1: the core was mid-turn when the append failed.
    assert_eq!(brief(&memory), ["NT 0 +[a] wakeup", "turn 1", "NT 0 -1"]);
    assert_eq!(agent.status(), Status::Idle);
    assert!(matches!(
        agent.followup(user("b")).await,
        Err(AgentError::Stopped)
    ));
}

/// Item 10: capacities out of bounds are a typed error, not a tokio panic.
#[tokio::test]
async fn item10_options_out_of_bounds_are_rejected() {
    let with = |channel: usize, update: usize| {
        let mut options = Options::default();
        options.channel_capacity = channel;
        options.update_capacity = update;
        options
    };
    for (options, expected) in [
        (
            with(usize::MAX, 8),
            InvalidOptions::ChannelCapacity(usize::MAX),
        ),
        (with(0, 8), InvalidOptions::ChannelCapacity(0)),
        (
            with(8, usize::MAX),
            InvalidOptions::UpdateCapacity(usize::MAX),
        ),
        (with(8, 0), InvalidOptions::UpdateCapacity(0)),
        (
            with(8, Options::MAX_CAPACITY + 1),
            InvalidOptions::UpdateCapacity(Options::MAX_CAPACITY + 1),
        ),
    ] {
        let opened = Agent::open_with(options, FakeHost::new(), open_memory()).await;
        assert!(
            matches!(&opened, Err(OpenError::Options(found)) if *found == expected),
            "{:?}",
            opened.err()
        );
    }
    let (agent, _) = Agent::open_with(
        with(Options::MAX_CAPACITY, Options::MAX_CAPACITY),
        FakeHost::new(),
        open_memory(),
    )
    .await
    .unwrap();
    agent.close().await.unwrap();
}

/// S58: the delivery memory may be unbounded (`Options::UNBOUNDED_DELIVERY_MEMORY`), and only
/// that value above `MAX_CAPACITY`; an unbounded agent remembers every id that left its lists.
#[tokio::test]
async fn s58_an_unbounded_delivery_memory_is_accepted_and_a_capacity_above_the_bound_is_not() {
    let mut options = Options::default();
    options.delivery_memory = Options::MAX_CAPACITY + 1;
    let opened = Agent::open_with(options.clone(), FakeHost::new(), open_memory()).await;
    let error = opened.err().unwrap();
    assert!(
        matches!(&error, OpenError::Options(InvalidOptions::DeliveryMemory(n)) if *n == Options::MAX_CAPACITY + 1),
        "{error:?}"
    );
    assert_eq!(
        InvalidOptions::DeliveryMemory(Options::MAX_CAPACITY + 1).to_string(),
        "delivery_memory 1048577 is above 1048576 (and not UNBOUNDED_DELIVERY_MEMORY)"
    );
    options.delivery_memory = Options::UNBOUNDED_DELIVERY_MEMORY;
    let (agent, _) = Agent::open_with(options, FakeHost::new(), open_memory())
        .await
        .unwrap();
    for i in 0..300 {
        agent
            .followup(Message::user(format!("m{i}"), "hi"))
            .await
            .unwrap();
        agent.remove(format!("m{i}")).await.unwrap();
    }
    // 300 > the default memory of 256: the first id (claimed by turn 1 at once: the agent was
    // idle) is still held (S58).
    let fate = agent.fate("m0").await;
    assert!(matches!(fate, Fate::Claimed { turn: 1, .. }), "{fate:?}");
    let again = agent.followup(Message::user("m0", "hi")).await.unwrap_err();
    assert_eq!(again.kind(), "already-delivered");
    agent.close().await.unwrap();
}

/// Item 10: a foreign log at `seq` u64::MAX is refused with a typed error, not duplicated.
#[tokio::test]
async fn item10_a_log_at_seq_u64_max_is_refused() {
    let (_dir, path) = log_path();
    let content = format!("{{\"seq\":{},\"type\":\"x\"}}\n", u64::MAX);
    std::fs::write(&path, &content).unwrap();
    let opened = Agent::open(FakeHost::new(), FileLog::open(&path).await.unwrap()).await;
    assert!(
        matches!(
            &opened,
            Err(OpenError::Log(LogError::Corrupt(CorruptLine {
                line: 1,
                problem: Problem::SeqExhausted
            })))
        ),
        "{:?}",
        opened.err()
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), content);
}
