//! The shared segment log: many sessions in one file, one sync for many sessions' appends,
//! resume and crash repair per session, a failed commit failing every batch in it (each session
//! taking appends again once it was cut back), a session open at most once.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::Duration;

use coxswain_driver_sim::file_faults::FileFaults;
use coxswain_tokio::coxswain_core::StepAnswer;
use coxswain_tokio::coxswain_log::{split_segment, Entry, HostEvent, Record};
use coxswain_tokio::{Agent, DurableLog, LogError, LogFile, SegmentLog, SessionLog};
use serde_json::json;

use crate::support::*;

fn sessions_of(path: &Path) -> BTreeMap<String, Vec<Record>> {
    let bytes = std::fs::read(path).unwrap();
    let parsed = split_segment(&bytes).unwrap();
    assert_eq!(parsed.torn, None);
    assert_eq!(parsed.complete_len, bytes.len());
    for records in parsed.sessions.values() {
        let seqs: Vec<_> = records.iter().map(|r| r.seq).collect();
        let expected: Vec<_> = (1..=records.len() as u64).map(Some).collect();
        assert_eq!(seqs, expected);
        audit(records);
    }
    parsed.sessions
}

fn briefs(records: &[Record]) -> Vec<String> {
    records.iter().map(|r| brief_event(&r.event)).collect()
}

async fn ready<F: LogFile>(log: &mut SessionLog<F>) -> usize {
    let read = log.read_back(&mut |_| ControlFlow::Continue(())).await;
    log.repair_tail().await.unwrap();
    read.unwrap().records
}

fn entry(text: &str) -> Vec<Entry> {
    vec![Entry::Host(
        HostEvent::new("model/output", json!(text)).unwrap(),
    )]
}

/// A host whose step waits for its cancel (a turn stays open).
fn hanging() -> FakeHost {
    FakeHost::new().on_step(|cx| async move {
        cx.cancel.cancelled().await;
        StepAnswer::Completed
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_sessions_appending_at_once_share_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segment.jsonl");
    let faults = FileFaults::new();
    let segment = faults.open_segment_log(&path).await.unwrap();
    let mut agents = Vec::new();
    for i in 0..20 {
        let log = segment.session(format!("s{i}")).unwrap();
        let (agent, recovery) = Agent::open(FakeHost::new(), log).await.unwrap();
        assert_eq!(recovery.records, 0);
        agents.push(agent);
    }
    let before = faults.syncs();
    // The first batch to come is held in its commit's sync while the first batches of the other
    // sessions gather, then commit together (so the count below is bounded whatever the disk);
    // the rest commit as they come.
    let held = faults.hold_syncs();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, agent) in agents.iter().enumerate() {
        let agent = agent.clone();
        tasks.spawn(async move {
            for m in 0..5 {
                agent.inject(user(&format!("s{i}m{m}"))).await.unwrap();
            }
        });
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(faults.syncs(), before);
    drop(held);
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let syncs = faults.syncs() - before;
    // 100 appends (each an acknowledged inject): the first 20 in at most two commits (the held
    // one and the one they gathered for), so at most 82.
    assert!((1..=82).contains(&syncs), "{syncs} syncs for 100 appends");
    for agent in &agents {
        agent.close().await.unwrap();
    }
    let sessions = sessions_of(&path);
    assert_eq!(sessions.len(), 20);
    for (i, records) in sessions.values().enumerate() {
        assert_eq!(records.len(), 5, "{i}");
        assert_eq!(records[0].seq, Some(1));
    }
    assert_eq!(
        briefs(&sessions["s3"]),
        (0..5)
            .map(|m| format!("NS {m} +[s3m{m}]"))
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn each_session_resumes_exactly_its_own_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segment.jsonl");
    let segment = SegmentLog::open(&path).await.unwrap();
    let (a, _) = Agent::open(FakeHost::new(), segment.session("a").unwrap())
        .await
        .unwrap();
    let (b, _) = Agent::open(FakeHost::new(), segment.session("b").unwrap())
        .await
        .unwrap();
    a.inject(user("a1")).await.unwrap();
    b.inject(user("b1")).await.unwrap();
    a.followup(user("a2")).await.unwrap();
    a.when_idle().await.unwrap();
    b.inject(user("b2")).await.unwrap();
    a.close().await.unwrap();
    b.close().await.unwrap();
    drop(segment);
    let before = sessions_of(&path);
    assert_eq!(before["b"].len(), 2);

    let segment = SegmentLog::open(&path).await.unwrap();
    assert_eq!(segment.sessions(), ["a", "b"]);
    let (b, recovery) = Agent::open(FakeHost::new(), segment.session("b").unwrap())
        .await
        .unwrap();
    assert_eq!((recovery.records, recovery.closers), (2, 0));
    assert_eq!(
        pending(&b).await.1,
        [("b1".to_string(), false), ("b2".to_string(), false)]
    );
    let (a, recovery) = Agent::open(FakeHost::new(), segment.session("a").unwrap())
        .await
        .unwrap();
    assert_eq!(recovery.records, before["a"].len());
    assert_eq!(recovery.last_turn, 1);
    let (fresh, recovery) = Agent::open(FakeHost::new(), segment.session("c").unwrap())
        .await
        .unwrap();
    assert_eq!(recovery.records, 0);
    b.inject(user("b3")).await.unwrap();
    fresh.inject(user("c1")).await.unwrap();
    for agent in [&a, &b, &fresh] {
        agent.close().await.unwrap();
    }
    let after = sessions_of(&path);
    assert_eq!(after["a"], before["a"]);
    assert_eq!(
        briefs(&after["b"]),
        ["NS 0 +[b1]", "NS 1 +[b2]", "NS 2 +[b3]"]
    );
    assert_eq!(after["b"][2].seq, Some(3));
    assert_eq!(briefs(&after["c"]), ["NS 0 +[c1]"]);
}

/// A crash image (the file cut at every line end and inside every line) repairs per session:
/// each session keeps exactly its complete lines of the image, a torn final line is dropped,
/// and only the session with an open turn gets closers.
#[tokio::test]
async fn s50_a_crash_image_repairs_per_session_and_loses_only_the_unacknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segment.jsonl");
    let segment = SegmentLog::open(&path).await.unwrap();
    let (a, _) = Agent::open(hanging(), segment.session("a").unwrap())
        .await
        .unwrap();
    let (b, _) = Agent::open(FakeHost::new(), segment.session("b").unwrap())
        .await
        .unwrap();
    b.inject(user("b1")).await.unwrap();
    a.followup(user("a1")).await.unwrap();
    b.inject(user("b2")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    // What is acknowledged is durable: the image is the file as a crash now leaves it.
    let image = std::fs::read(&path).unwrap();
    a.close().await.unwrap();
    b.close().await.unwrap();
    drop(segment);

    let full = split_segment(&image).unwrap().sessions;
    assert_eq!(briefs(&full["b"]), ["NS 0 +[b1]", "NS 1 +[b2]"]);
    assert!(briefs(&full["a"]).contains(&"turn 1".to_string()));
    let mut cuts: Vec<usize> = vec![0];
    for (i, &byte) in image.iter().enumerate() {
        if byte == b'\n' {
            cuts.push(i + 1); // a line end
            cuts.push(i + 1 + 9); // inside the next line
        }
    }
    cuts.retain(|&cut| cut <= image.len());
    for cut in cuts {
        let crash = dir.path().join(format!("crash-{cut}.jsonl"));
        std::fs::write(&crash, &image[..cut]).unwrap();
        let kept = split_segment(&image[..cut]).unwrap();
        let segment = SegmentLog::open(&crash).await.unwrap();
        // Opening changed nothing.
        assert_eq!(std::fs::read(&crash).unwrap(), &image[..cut]);
        let mut closers = BTreeMap::new();
        for session in ["a", "b"] {
            let before = kept.sessions.get(session).cloned().unwrap_or_default();
            let (agent, recovery) = Agent::open(FakeHost::new(), segment.session(session).unwrap())
                .await
                .unwrap();
            assert_eq!(recovery.records, before.len(), "cut {cut} {session}");
            closers.insert(session, recovery.closers);
            agent.close().await.unwrap();
        }
        drop(segment);
        let after = sessions_of(&crash);
        for session in ["a", "b"] {
            let before = kept.sessions.get(session).cloned().unwrap_or_default();
            let now = after.get(session).cloned().unwrap_or_default();
            assert_eq!(
                briefs(&now[..before.len()]),
                briefs(&before),
                "cut {cut} {session}"
            );
            assert_eq!(now.len() - before.len(), closers[session], "cut {cut}");
        }
        assert_eq!(closers["b"], 0, "cut {cut}");
        let turn_open = kept
            .sessions
            .get("a")
            .is_some_and(|r| briefs(r).contains(&"turn 1".to_string()));
        assert_eq!(closers["a"] > 0, turn_open, "cut {cut}");
        std::fs::remove_file(&crash).unwrap();
    }
}

/// A commit whose write fails is cut back: every batch in it fails (`Io`) and nothing of them is
/// in the file; each session takes appends again (the cut was clean), and so do new ones.
#[tokio::test]
async fn a_failed_shared_write_fails_every_batch_in_the_commit_leaves_nothing_and_appends_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segment.jsonl");
    let faults = FileFaults::new();
    let segment = faults.open_segment_log(&path).await.unwrap();
    let mut s1 = segment.session("s1").unwrap();
    let mut s2 = segment.session("s2").unwrap();
    let mut holder = segment.session("holder").unwrap();
    ready(&mut s1).await;
    ready(&mut s2).await;
    ready(&mut holder).await;
    assert_eq!(s1.append(&entry("kept")).await.unwrap(), 1);
    let durable = std::fs::read(&path).unwrap();

    // A sync (it writes nothing) held in its commit, so that both batches gather for the next.
    let held = faults.hold_syncs();
    let syncing = tokio::spawn(async move {
        let result = holder.sync().await;
        (holder, result)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let one = tokio::spawn(async move {
        let result = s1.append(&entry("one")).await;
        (s1, result)
    });
    let two = tokio::spawn(async move {
        let result = s2.append(&entry("two")).await;
        (s2, result)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let syncs = faults.syncs();
    faults.fail_writes_after(20);
    drop(held);
    let (holder, synced) = syncing.await.unwrap();
    synced.unwrap();
    let (mut s1, first) = one.await.unwrap();
    let (mut s2, second) = two.await.unwrap();
    assert!(matches!(first, Err(LogError::Io(_))), "{first:?}");
    assert!(matches!(second, Err(LogError::Io(_))), "{second:?}");
    // The held sync, then one commit of both batches: the cut-back's sync only (a commit each
    // would have cut back twice).
    assert_eq!(faults.syncs() - syncs, 2);
    assert_eq!(std::fs::read(&path).unwrap(), durable);
    // Both sessions take appends again, at the seq the failed batches would have had; another
    // session commits too.
    faults.fail_writes_after(u64::MAX);
    assert_eq!(s1.append(&entry("again")).await.unwrap(), 2);
    assert_eq!(s2.append(&entry("again")).await.unwrap(), 1);
    let mut s3 = segment.session("s3").unwrap();
    ready(&mut s3).await;
    assert_eq!(s3.append(&entry("three")).await.unwrap(), 1);
    drop((s1, s2, s3, holder, segment));

    let sessions = sessions_of(&path);
    let data = |session: &str| -> Vec<String> {
        sessions[session]
            .iter()
            .map(|r| r.event["data"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(data("s1"), ["kept", "again"]);
    assert_eq!(data("s2"), ["again"]);
    assert_eq!(data("s3"), ["three"]);
    assert_eq!(sessions.len(), 3);
    let segment = SegmentLog::open(&path).await.unwrap();
    let mut s1 = segment.session("s1").unwrap();
    assert_eq!(ready(&mut s1).await, 2);
    assert_eq!(s1.append(&entry("retry")).await.unwrap(), 3);
}

#[tokio::test]
async fn a_failed_cut_back_is_indeterminate_for_every_batch_and_stops_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segment.jsonl");
    let faults = FileFaults::new();
    let segment = faults.open_segment_log(&path).await.unwrap();
    let mut s1 = segment.session("s1").unwrap();
    ready(&mut s1).await;
    faults.fail_writes_after(5);
    faults.fail_truncates(true);
    assert!(matches!(
        s1.append(&entry("x")).await,
        Err(LogError::Indeterminate { .. })
    ));
    let mut s2 = segment.session("s2").unwrap();
    assert!(matches!(
        s2.append(&entry("y")).await,
        Err(LogError::WriterStopped)
    ));
}

#[tokio::test]
async fn a_session_is_open_once_and_the_file_by_one_segment_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segment.jsonl");
    let segment = SegmentLog::open(&path).await.unwrap();
    assert!(matches!(
        SegmentLog::open(&path).await,
        Err(LogError::Locked { path: p }) if p == path
    ));
    let (agent, _) = Agent::open(FakeHost::new(), segment.session("s1").unwrap())
        .await
        .unwrap();
    assert!(matches!(
        segment.session("s1"),
        Err(LogError::SessionOpen { session }) if session == "s1"
    ));
    assert_eq!(
        segment.session("s1").unwrap_err().to_string(),
        "session s1 is already open on this segment log"
    );
    let other = segment.session("s2").unwrap();
    agent.close().await.unwrap();
    drop(segment.session("s1").unwrap());
    drop((other, segment));
    // Every handle dropped: the file is free again.
    drop(SegmentLog::open(&path).await.unwrap());
}

#[tokio::test]
async fn a_corrupt_line_rejects_the_open_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segment.jsonl");
    let content = b"{\"seq\":1,\"session\":\"a\",\"type\":\"x\"}\n{\"seq\":3,\"session\":\"a\",\"type\":\"x\"}\n{\"se";
    std::fs::write(&path, content).unwrap();
    assert!(matches!(
        SegmentLog::open(&path).await,
        Err(LogError::Corrupt(c)) if c.line == 2
    ));
    assert_eq!(std::fs::read(&path).unwrap(), content);
}
