//! A crash at every append point (S50): a scripted session's log is cut after every line and in
//! the middle of every line; each image is repaired (torn tail dropped, open turn closed) and
//! restored, the invariants hold, no acknowledged message is lost, and the agent goes on.

use coxswain_tokio::coxswain_core::{CancelCause, Message, StepAnswer, Target};
use coxswain_tokio::coxswain_log::{parse, Auditor};
use coxswain_tokio::{Agent, FileLog, MemoryLog, SyncPolicy};
use serde_json::json;

use crate::support::*;

/// A delivery and the number of complete log lines when it was acknowledged: a crash that keeps
/// at least that many lines happened after the acknowledgement.
type Ack = (String, usize);

/// Steps of 30 ms; every third turn's first step runs a tool (host events and a tool-context
/// inject) and continues; the first step of the turn after it hits the output limit.
fn session_host() -> FakeHost {
    FakeHost::new().on_step(|cx| async move {
        if sleep_or_cancel(30, &cx.cancel).await {
            sleep(5).await;
            return StepAnswer::Completed;
        }
        if cx.step == 1 && cx.turn % 3 == 1 {
            cx.record("tool/call", json!({"name": "grep"})).await.ok();
            let tool = Message::new(
                format!("tool-{}", cx.turn).as_str(),
                json!({"kind": "tool"}),
                json!("3 matches"),
            );
            cx.agent.inject(tool).await.ok();
            cx.record("tool/result", json!("ok")).await.ok();
            return StepAnswer::Continue;
        }
        if cx.step == 1 && cx.turn % 3 == 2 {
            return StepAnswer::MaxTokens;
        }
        StepAnswer::Completed
    })
}

/// Runs the scripted session (every delivery kind, edits, cancels with and without keepInbox,
/// latch replay, maintenance) and returns its log and the acknowledgements.
async fn session() -> (Vec<u8>, Vec<Ack>) {
    let (agent, log) = open(session_host()).await;
    let mut acks: Vec<Ack> = Vec::new();
    let lines = |log: &MemoryLog| log.records().unwrap().len();
    macro_rules! ack {
        ($id:expr, $call:expr) => {{
            $call.await.unwrap();
            acks.push(($id.to_owned(), lines(&log)));
        }};
    }
    ack!("c1", agent.inject(user("c1")));
    ack!("a1", agent.followup(user("a1")));
    sleep(10).await;
    ack!("s1", agent.steer(user("s1")));
    sleep(10).await;
    ack!("a2", agent.followup(user("a2")));
    ack!("q1", agent.send(user("q1"), Target::NextTurn, false));
    ack!("p1", agent.prepend(Target::NextStep, user("p1")));
    sleep(20).await;
    assert!(agent.replace("a2", user("a2b")).await.unwrap());
    acks.push(("a2b".to_owned(), lines(&log)));
    assert!(agent.remove("q1").await.unwrap());
    sleep(15).await;
    agent.cancel(CancelCause::User, true).await.unwrap();
    ack!("s2", agent.steer(user("s2")));
    sleep(300).await;
    let job = {
        let agent = agent.clone();
        tokio::spawn(async move {
            agent
                .run_maintenance(|token| async move { sleep_or_cancel(50, &token).await })
                .await
        })
    };
    sleep(10).await;
    ack!("a3", agent.followup(user("a3")));
    job.await.unwrap().unwrap();
    sleep(10).await;
    ack!("a4", agent.followup(user("a4")));
    ack!("a5", agent.followup(user("a5")));
    sleep(5).await;
    agent.cancel(CancelCause::Parent, false).await.unwrap();
    agent.when_idle().await.unwrap();
    ack!("a6", agent.followup(user("a6")));
    agent.when_idle().await.unwrap();
    ack!("c9", agent.inject(user("c9")));
    agent.close().await.unwrap();
    (log.bytes(), acks)
}

/// What one crash image must restore to, and a check that the agent goes on from it.
async fn check_image(image: Vec<u8>, acks: &[Ack], file: Option<&std::path::Path>) -> usize {
    let parsed = parse(&image).unwrap();
    let complete = parsed.records.len();
    let mut prefix = Auditor::new();
    for record in &parsed.records {
        prefix.push_json(&record.event).unwrap();
    }
    let quick = FakeHost::new().on_step(|_| async { StepAnswer::Completed });
    let (agent, recovery, log) = match file {
        None => {
            let log = MemoryLog::from_bytes(image.clone());
            let (agent, recovery) = Agent::open(quick, log.clone()).await.unwrap();
            (agent, recovery, log)
        }
        Some(path) => {
            std::fs::write(path, &image).unwrap();
            let file_log = FileLog::open_with(path, SyncPolicy::EveryAppend)
                .await
                .unwrap();
            let (agent, recovery) = Agent::open(quick, file_log).await.unwrap();
            // The torn tail is physically gone; the closers follow the complete lines.
            let on_disk = std::fs::read(path).unwrap();
            assert_eq!(
                &on_disk[..parsed.complete_len],
                &image[..parsed.complete_len]
            );
            assert_eq!(parse(&on_disk).unwrap().torn, None);
            (agent, recovery, MemoryLog::from_bytes(on_disk))
        }
    };
    assert_eq!(recovery.records, complete);
    assert_eq!(recovery.torn_tail, parsed.torn);
    assert_eq!(recovery.interrupted_turn, prefix.position().open_turn());
    assert_eq!(recovery.closers, prefix.position().closers().len());

    // The repaired log: every real event kept, closers appended, invariants hold.
    let repaired = log.records().unwrap();
    check_seq(&repaired);
    assert_eq!(repaired.len(), complete + recovery.closers);
    let auditor = audit(&repaired);
    assert_eq!(auditor.position().open_turn(), None);
    let ledger = Ledger::of(&repaired);
    ledger.check_conservation();
    // No acknowledged message is lost: each is pending, claimed or discarded.
    for (id, lines_at_ack) in acks {
        if *lines_at_ack <= complete {
            assert!(ledger.inserted.contains(id), "acknowledged {id} lost");
        }
    }
    if file.is_none() {
        assert_eq!(
            pending(&agent).await,
            (ledger.next_turn.clone(), ledger.next_step.clone())
        );
    }
    // The agent goes on: a new turn with the next number, FIFO behind parked follow-ups.
    agent.followup(user("after-crash")).await.unwrap();
    agent.when_idle().await.unwrap();
    agent.close().await.unwrap();
    let after = match file {
        None => log.records().unwrap(),
        Some(path) => parse(&std::fs::read(path).unwrap()).unwrap().records,
    };
    check_seq(&after);
    let auditor = audit(&after);
    assert_eq!(auditor.position().open_turn(), None);
    let ledger = Ledger::of(&after);
    ledger.check_conservation();
    assert!(ledger.claimed.contains(&"after-crash".to_owned()));
    assert!(auditor.position().last_turn() > prefix.position().last_turn());
    usize::from(recovery.interrupted_turn.is_some())
}

#[tokio::test(start_paused = true)]
async fn s50_a_crash_after_every_line_and_mid_line_recovers() {
    let (bytes, acks) = session().await;
    let records = parse(&bytes).unwrap().records;
    let lines = records.len();
    if std::env::var_os("SHOW_SESSION").is_some() {
        for (i, r) in records.iter().enumerate() {
            println!("{:3} {}", i + 1, brief_event(&r.event));
        }
    }
    assert_eq!(lines, 56, "the scripted session's log length");
    assert_eq!(acks.len(), 13);
    audit(&records);

    let mut ends = vec![0];
    ends.extend(
        bytes
            .iter()
            .enumerate()
            .filter(|(_, &b)| b == b'\n')
            .map(|(i, _)| i + 1),
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.jsonl");
    let (mut boundaries, mut torn, mut interrupted) = (0, 0, 0);
    for (i, &end) in ends.iter().enumerate() {
        interrupted += check_image(bytes[..end].to_vec(), &acks, None).await;
        boundaries += 1;
        if let Some(&next) = ends.get(i + 1) {
            let mid = end + (next - end) / 2;
            interrupted += check_image(bytes[..mid].to_vec(), &acks, Some(&path)).await;
            torn += 1;
        }
    }
    assert_eq!((boundaries, torn), (lines + 1, lines));
    println!(
        "crash: 1 session of {lines} lines ({} acknowledged deliveries); {} crash images \
         ({boundaries} after a line, {torn} mid-line, {interrupted} inside a turn) all repaired, \
         restored and continued",
        acks.len(),
        boundaries + torn
    );
}

/// What one delivery of the fault sweep's script was told.
#[derive(Debug, PartialEq)]
enum Told {
    Written,
    /// `Persistence(Io)`: its batch's append failed and was cut back.
    NotWritten,
}

/// The fault sweep's script: every inserting delivery kind, turns with host events, a tool
/// inject from inside a step. Returns each delivery's id and what its caller was told.
async fn fault_script(agent: &coxswain_tokio::Agent) -> Vec<(String, Told)> {
    use coxswain_tokio::AgentError;
    let mut told = Vec::new();
    macro_rules! deliver {
        ($id:expr, $call:expr) => {{
            let outcome = match $call.await {
                Ok(_) => Told::Written,
                Err(AgentError::Persistence(coxswain_tokio::LogError::Io(_))) => Told::NotWritten,
                Err(other) => panic!("{} was told {other:?}", $id),
            };
            // A failed append never stops the agent (only an indeterminate one would).
            assert!(agent.ending().is_none(), "{} stopped it", $id);
            told.push(($id.to_owned(), outcome));
        }};
    }
    deliver!("c1", agent.inject(user("c1")));
    deliver!("a1", agent.followup(user("a1")));
    sleep(5).await;
    deliver!("s1", agent.steer(user("s1")));
    deliver!("a2", agent.followup(user("a2")));
    deliver!("q1", agent.send(user("q1"), Target::NextTurn, false));
    deliver!("p1", agent.prepend(Target::NextStep, user("p1")));
    sleep(100).await;
    deliver!("a3", agent.followup(user("a3")));
    sleep(100).await;
    agent.when_idle().await.unwrap();
    told
}

fn fault_host() -> FakeHost {
    FakeHost::new().on_step(|cx| async move {
        sleep(10).await;
        if cx.step == 1 {
            let _ = cx.record("tool/call", json!({"name": "grep"})).await;
            let tool = Message::new(
                format!("tool-{}", cx.turn).as_str(),
                json!({"kind": "tool"}),
                json!("3 matches"),
            );
            let _ = cx.agent.inject(tool).await;
            return StepAnswer::Continue;
        }
        let _ = cx.record("model/output", json!({"text": "done"})).await;
        StepAnswer::Completed
    })
}

/// A write that fails at EVERY byte of every batch (the FileLog writes the bytes before the
/// fault, then cuts them back), once: the disk works again after that failed append, and the
/// agent goes on (a failed append fails only its batch, which the session rolls back: S5). After
/// reopening, a delivery told "not written" is never in the log and one told "written" always is,
/// exactly once, before the fault and after it; the file up to the failed append is a prefix of
/// the unfaulted run's log at a batch boundary, the whole file audits clean (I1–I5) with
/// contiguous `seq`, and it reopens without a torn tail, pending exactly what the log says.
#[tokio::test(start_paused = true)]
async fn a_write_failing_at_every_byte_never_acknowledges_what_is_not_in_the_log() {
    use std::sync::{Arc, Mutex};
    let dir = match tempfile::tempdir_in("/dev/shm") {
        Ok(dir) => dir,
        Err(_) => tempfile::tempdir().unwrap(),
    };
    let path = dir.path().join("faults.jsonl");
    // An agent whose log heals its faults once an append failed, noting the file's length then
    // (after the cut-back: what the log had acknowledged).
    let open = |path: std::path::PathBuf| async move {
        let faults = coxswain_driver_sim::file_faults::FileFaults::new();
        let log = faults
            .open_file_log(&path, SyncPolicy::Never)
            .await
            .unwrap();
        let cuts: Arc<Mutex<Vec<(u64, String)>>> = Arc::default();
        let log = crate::support::Watched::new(log, {
            let (faults, cuts, path) = (faults.clone(), Arc::clone(&cuts), path.clone());
            move |error| {
                let len = std::fs::metadata(&path).unwrap().len();
                cuts.lock().unwrap().push((len, error.to_string()));
                faults.fail_writes_after(u64::MAX);
            }
        });
        let (agent, _) = Agent::open(fault_host(), log).await.unwrap();
        (agent, faults, cuts)
    };

    let (agent, _, cuts) = open(path.clone()).await;
    let told = fault_script(&agent).await;
    agent.close().await.unwrap();
    assert!(told.iter().all(|(_, t)| *t == Told::Written), "{told:?}");
    assert!(cuts.lock().unwrap().is_empty());
    let full = std::fs::read(&path).unwrap();
    let lines = parse(&full).unwrap().records.len();
    assert_eq!(lines, 63, "the unfaulted run's log length");

    let (mut not_written, mut written_after) = (0, 0);
    for budget in 0..full.len() as u64 {
        std::fs::remove_file(&path).unwrap();
        let (agent, faults, cuts) = open(path.clone()).await;
        faults.fail_writes_after(budget);
        let told = fault_script(&agent).await;
        agent.close().await.unwrap();
        assert!(
            matches!(agent.ending(), Some(coxswain_tokio::Ending::Closed)),
            "budget {budget}: {:?}",
            agent.ending()
        );

        // Exactly one append failed (the run is the unfaulted one up to it), cut back to a line
        // end at most `budget` bytes in, the unfaulted log's prefix there.
        let cuts = cuts.lock().unwrap().clone();
        assert_eq!(cuts.len(), 1, "budget {budget}: {cuts:?}");
        assert_eq!(cuts[0].1, "log i/o failed: write failed (injected)");
        let cut = cuts[0].0 as usize;
        let on_disk = std::fs::read(&path).unwrap();
        assert!(cut as u64 <= budget, "budget {budget}");
        assert!(on_disk.len() >= cut, "budget {budget}");
        assert!(
            full.starts_with(&on_disk[..cut]),
            "budget {budget}: not a prefix"
        );
        assert!(
            cut == 0 || on_disk[cut - 1] == b'\n',
            "budget {budget}: mid-line"
        );
        let parsed = parse(&on_disk).unwrap();
        assert_eq!(parsed.torn, None, "budget {budget}: cut back to a line end");
        check_seq(&parsed.records);
        audit(&parsed.records);
        let ledger = Ledger::of(&parsed.records);
        ledger.check_conservation();
        // The script awaits each delivery: the failed batch held at most one of them, and the
        // agent took every later one.
        let failed = told.iter().filter(|(_, t)| *t == Told::NotWritten).count();
        assert!(failed <= 1, "budget {budget}: {told:?}");
        let mut after_failure = false;
        for (id, outcome) in &told {
            let copies = ledger.inserted.iter().filter(|i| *i == id).count();
            match outcome {
                Told::Written => {
                    assert_eq!(
                        copies, 1,
                        "budget {budget}: {id} acknowledged, {copies} in the log"
                    );
                    written_after += usize::from(after_failure);
                }
                Told::NotWritten => {
                    not_written += 1;
                    after_failure = true;
                    assert_eq!(copies, 0, "budget {budget}: {id} failed but is in the log")
                }
            }
        }
        // It reopens (repairing an open turn), with nothing torn, pending what the log says.
        let (agent, recovery) = Agent::open(
            FakeHost::new(),
            FileLog::open_with(&path, SyncPolicy::Never).await.unwrap(),
        )
        .await
        .unwrap();
        assert_eq!(recovery.torn_tail, None);
        assert_eq!(recovery.records, parsed.records.len());
        // The script ended on `when_idle`: no turn is left open in the log.
        assert_eq!(
            recovery.interrupted_turn, None,
            "budget {budget}: idle, and then closed, with the turn's end not in the log"
        );
        assert_eq!(
            (recovery.pending_next_turn, recovery.pending_next_step),
            (ledger.next_turn.len(), ledger.next_step.len()),
            "budget {budget}"
        );
        agent.close().await.unwrap();
    }
    assert!(not_written > 0 && written_after > 0);
    println!(
        "fault sweep: a write failing at each of {} bytes, once; {not_written} deliveries told \
         not written (none in the log), {written_after} acknowledged after a failed one (all in \
         the log)",
        full.len()
    );
}

/// Group commit: bursts of concurrent deliveries (follow-ups, steers, injects from six tasks at
/// once, while turns run) are appended in groups; a crash after every line and in the middle of
/// every line of that log (so inside groups too) loses only deliveries that were never
/// acknowledged, and the agent goes on.
#[tokio::test(start_paused = true)]
async fn s50_a_crash_inside_a_group_loses_only_unacknowledged_inputs() {
    use std::sync::{Arc, Mutex};
    let memory = MemoryLog::new();
    let log = crate::group::GroupLog::new(memory.clone());
    let sizes = Arc::clone(&log.sizes);
    let (agent, _) = Agent::open(session_host(), log).await.unwrap();
    let acks: Arc<Mutex<Vec<Ack>>> = Arc::default();
    for burst in 0..4 {
        let mut tasks = Vec::new();
        for i in 0..6 {
            let id = format!("g{burst}-{i}");
            let (agent, memory, acks) = (agent.clone(), memory.clone(), Arc::clone(&acks));
            tasks.push(tokio::spawn(async move {
                let message = user(&id);
                match i % 3 {
                    0 => agent.followup(message).await.unwrap(),
                    1 => agent.steer(message).await.unwrap(),
                    _ => agent.inject(message).await.unwrap(),
                }
                let lines = memory.records().unwrap().len();
                acks.lock().unwrap().push((id, lines));
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        sleep(45).await;
    }
    agent.when_idle().await.unwrap();
    agent.close().await.unwrap();
    let acks = acks.lock().unwrap().clone();
    assert_eq!(acks.len(), 24);
    // Groups formed: some append held the events of several deliveries.
    let sizes = sizes.lock().unwrap().clone();
    assert!(sizes.iter().any(|&size| size >= 6), "{sizes:?}");

    let bytes = memory.bytes();
    let records = parse(&bytes).unwrap().records;
    audit(&records);
    let mut ends = vec![0];
    ends.extend(
        bytes
            .iter()
            .enumerate()
            .filter(|(_, &b)| b == b'\n')
            .map(|(i, _)| i + 1),
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.jsonl");
    let mut images = 0;
    for (i, &end) in ends.iter().enumerate() {
        check_image(bytes[..end].to_vec(), &acks, None).await;
        images += 1;
        if let Some(&next) = ends.get(i + 1) {
            let mid = end + (next - end) / 2;
            check_image(bytes[..mid].to_vec(), &acks, Some(&path)).await;
            images += 1;
        }
    }
    assert_eq!(images, 2 * records.len() + 1);
    println!(
        "crash inside groups: {} lines, {} appends (largest {} records), {images} crash images",
        records.len(),
        sizes.len(),
        sizes.iter().max().unwrap_or(&0)
    );
}
