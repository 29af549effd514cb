//! Issue 30: a log file changed behind its writer's back (cut in place as `logrotate`'s
//! `copytruncate` or `: > session.jsonl` do, appended to or overwritten at its end by a writer
//! that ignores the lock) is detected before anything more is acknowledged; a cut-back never
//! extends the file and one that finds it shorter is `Indeterminate`. An append that failed and was
//! cut back fails only its batch (`Persistence`): the agent goes on, and each later append checks
//! the file afresh (a changed file keeps failing them). Only an `Indeterminate` append stops the
//! agent, and its error is returned only once `ending()` and `when_idle()` say `Stopped` (and the
//! log is released).

use std::fs::OpenOptions;
use std::io::Write;
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use coxswain_driver_sim::file_faults::{FaultyFile, FileFaults};
use coxswain_tokio::coxswain_log::{parse, CorruptLine, Entry, HostEvent, Problem};
use coxswain_tokio::{
    Agent, AgentError, DurableLog, Ending, FileLog, LogError, OpenError, SegmentLog, SessionLog,
    SyncPolicy,
};
use serde_json::json;

use crate::support::*;

fn log_path() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    (dir, path)
}

/// The issue's steps 1 and 2: an agent on a `FileLog` that took `followup(a)`, went idle and took
/// `inject(b)`; the switches of its file's faults and the log's length then.
async fn agent_with_history(path: &Path) -> (Agent, FileFaults, u64) {
    let faults = FileFaults::new();
    let log = faults
        .open_file_log(path, SyncPolicy::default())
        .await
        .unwrap();
    let (agent, _) = Agent::open(FakeHost::new(), log).await.unwrap();
    agent.followup(user("a")).await.unwrap();
    agent.when_idle().await.unwrap();
    agent.inject(user("b")).await.unwrap();
    let len = std::fs::metadata(path).unwrap().len();
    assert_eq!(len, 733, "the history's length");
    (agent, faults, len)
}

/// Cuts the file to `len` through a handle of its own (same inode: no replaced-file check fires).
fn truncate(path: &Path, len: u64) {
    OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

/// Appends `bytes` through a handle of its own, ignoring the lock (`echo >> file`).
fn append_foreign(path: &Path, bytes: &[u8]) {
    OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

/// After an append that failed but was cut back: the agent did not stop (`ending()` is `None`) and
/// is idle at once (`when_idle()` answers without waiting).
async fn going_on_at_once(agent: &Agent) {
    assert!(agent.ending().is_none(), "{:?}", agent.ending());
    let idle = tokio::time::timeout(Duration::ZERO, agent.when_idle()).await;
    assert!(matches!(idle, Ok(Ok(()))), "{idle:?}");
}

/// The error that stopped `agent`, which `ending()` says at once, as `when_idle()` does.
async fn stopped_at_once(agent: &Agent) -> LogError {
    let idle = tokio::time::timeout(Duration::ZERO, agent.when_idle()).await;
    assert!(matches!(idle, Ok(Err(AgentError::Stopped))), "{idle:?}");
    match agent.ending() {
        Some(Ending::Stopped(error)) => error,
        other => panic!("ending {other:?}"),
    }
}

/// The `LogError` inside an `Indeterminate`'s cause.
fn cause(error: &std::io::Error) -> Option<&LogError> {
    error.get_ref().and_then(|e| e.downcast_ref::<LogError>())
}

fn truncated(error: &LogError, path: &Path, expected: u64, found: u64) -> bool {
    matches!(error, LogError::Truncated { path: p, expected: e, found: f }
        if p == path && *e == expected && *f == found)
}

fn tampered(error: &LogError, path: &Path, expected: u64, found: u64) -> bool {
    matches!(error, LogError::Tampered { path: p, expected: e, found: f }
        if p == path && *e == expected && *f == found)
}

// The agent on a FileLog ------------------------------------------------------------------------

/// Truncated to 0 bytes through another handle: `inject(c)` is refused before anything is
/// written, the agent goes on but `followup(d)` is refused the same way (the file is checked
/// afresh), and `close()` reports that the log lost what was acknowledged; the file is left as
/// the truncation left it.
#[tokio::test(start_paused = true)]
async fn issue30_a_log_truncated_to_0_acknowledges_nothing_more() {
    let (_dir, path) = log_path();
    let (agent, _, len) = agent_with_history(&path).await;
    truncate(&path, 0);
    let error = agent.inject(user("c")).await.unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(e) if truncated(e, &path, len, 0)),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "the input is not durable: the log file {} was truncated: it holds 0 bytes where \
             this log wrote 733",
            path.display()
        )
    );
    going_on_at_once(&agent).await;
    let error = agent.followup(user("d")).await.unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(e) if truncated(e, &path, len, 0)),
        "{error:?}"
    );
    // S5: neither failed input stayed: `b` is pending alone, no turn opened.
    assert_eq!(
        pending(&agent).await,
        (vec![], vec![("b".to_owned(), false)])
    );
    assert_eq!(agent.last_turn(), 1);
    going_on_at_once(&agent).await;
    let closed = agent.close().await;
    assert!(
        matches!(&closed, Err(AgentError::FinalSync(e)) if truncated(e, &path, len, 0)),
        "{closed:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"");
}

/// Truncated to 300 bytes (inside the third record): the same (each append fails `Truncated`,
/// the agent going on), and the file keeps its 300 bytes;
/// re-opened, the torn third line is dropped (S50), which is all that is left of the history.
#[tokio::test(start_paused = true)]
async fn issue30_a_log_truncated_to_300_bytes_acknowledges_nothing_more() {
    let (_dir, path) = log_path();
    let (agent, _, len) = agent_with_history(&path).await;
    let before = std::fs::read(&path).unwrap();
    truncate(&path, 300);
    let error = agent.inject(user("c")).await.unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(e) if truncated(e, &path, len, 300)),
        "{error:?}"
    );
    going_on_at_once(&agent).await;
    let error = agent.followup(user("d")).await.unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(e) if truncated(e, &path, len, 300)),
        "{error:?}"
    );
    going_on_at_once(&agent).await;
    let closed = agent.close().await;
    assert!(
        matches!(&closed, Err(AgentError::FinalSync(e)) if truncated(e, &path, len, 300)),
        "{closed:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), &before[..300]);
    let (agent, recovery) = Agent::open(FakeHost::new(), FileLog::open(&path).await.unwrap())
        .await
        .unwrap();
    assert_eq!(
        (
            recovery.records,
            recovery.torn_tail.map(|t| (t.line, t.bytes))
        ),
        (2, Some((3, 96)))
    );
    agent.close().await.unwrap();
}

/// A writer that ignores the lock appends a line (`echo hello >> session.jsonl`): `inject(c)` is
/// refused before anything is written (the foreign line is left for the operator to see), and so
/// is every append after it, the agent going on.
#[tokio::test(start_paused = true)]
async fn issue30_a_log_appended_to_by_another_writer_acknowledges_nothing_more() {
    let (_dir, path) = log_path();
    let (agent, _, len) = agent_with_history(&path).await;
    append_foreign(&path, b"hello\n");
    let changed = std::fs::read(&path).unwrap();
    let error = agent.inject(user("c")).await.unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(e) if tampered(e, &path, len, len + 6)),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "the input is not durable: the log file {} was written by another writer: it holds \
             739 bytes where this log wrote 733",
            path.display()
        )
    );
    going_on_at_once(&agent).await;
    let error = agent.followup(user("d")).await.unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(e) if tampered(e, &path, len, len + 6)),
        "{error:?}"
    );
    going_on_at_once(&agent).await;
    let closed = agent.close().await;
    assert!(
        matches!(&closed, Err(AgentError::FinalSync(e)) if tampered(e, &path, len, len + 6)),
        "{closed:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), changed);
}

/// The last bytes the log wrote are overwritten in place (the same length): found by comparing
/// them, `Tampered` at the same length, for this append and the next (the agent going on).
#[tokio::test(start_paused = true)]
async fn issue30_a_log_overwritten_at_its_end_acknowledges_nothing_more() {
    let (_dir, path) = log_path();
    let (agent, _, len) = agent_with_history(&path).await;
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(b"XX", len - 4).unwrap();
    let error = agent.inject(user("c")).await.unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(e) if tampered(e, &path, len, len)),
        "{error:?}"
    );
    assert!(error
        .to_string()
        .contains("its last bytes are not the ones this log wrote (733 bytes)"));
    going_on_at_once(&agent).await;
    let error = agent.followup(user("d")).await.unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(e) if tampered(e, &path, len, len)),
        "{error:?}"
    );
    going_on_at_once(&agent).await;
    let closed = agent.close().await;
    assert!(
        matches!(&closed, Err(AgentError::FinalSync(e)) if tampered(e, &path, len, len)),
        "{closed:?}"
    );
}

/// What the check does not see, as docs/tokio.md says: bytes overwritten in place before the last
/// 32 the log wrote (the same length, the same end). The append is acknowledged; the next open
/// finds the damage.
#[tokio::test(start_paused = true)]
async fn issue30_an_overwrite_in_the_middle_is_not_detected_until_the_next_open() {
    let (_dir, path) = log_path();
    let (agent, _, _) = agent_with_history(&path).await;
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(b"XX", 0).unwrap();
    agent.inject(user("c")).await.unwrap();
    agent.close().await.unwrap();
    let opened = Agent::open(FakeHost::new(), FileLog::open(&path).await.unwrap()).await;
    assert!(
        matches!(
            &opened,
            Err(OpenError::Log(LogError::Corrupt(CorruptLine {
                line: 1,
                problem: Problem::NotJson(_)
            })))
        ),
        "{:?}",
        opened.err()
    );
}

/// The issue's step 5 as reported: truncated to 0, then an append whose write would fail after
/// 10 bytes. The truncation is found before the write, so nothing is written and nothing is cut
/// back: the file is not extended (it was extended to 733 bytes, 723 of them NUL, before). The
/// agent goes on; the next append finds the truncation again and writes nothing either.
#[tokio::test(start_paused = true)]
async fn issue30_a_failing_append_after_a_truncation_writes_nothing_and_never_extends_the_file() {
    let (_dir, path) = log_path();
    let (agent, faults, len) = agent_with_history(&path).await;
    truncate(&path, 0);
    faults.fail_writes_after(10);
    let error = agent.inject(user("c")).await.unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(e) if truncated(e, &path, len, 0)),
        "{error:?}"
    );
    going_on_at_once(&agent).await;
    let error = agent.followup(user("d")).await.unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(e) if truncated(e, &path, len, 0)),
        "{error:?}"
    );
    let closed = agent.close().await;
    assert!(
        matches!(&closed, Err(AgentError::FinalSync(e)) if truncated(e, &path, len, 0)),
        "{closed:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"");
}

/// A truncation that lands between the log's check and its write (injected), the write then
/// failing after 10 bytes: the cut-back finds the file shorter than the log (10 bytes, written at
/// the truncated end) and does not cut: `Indeterminate`, its `undo` the `Truncated` it found, and
/// the file keeps its 10 bytes, never extended.
#[tokio::test(start_paused = true)]
async fn issue30_a_cut_back_after_a_truncation_is_indeterminate_and_never_extends_the_file() {
    let (_dir, path) = log_path();
    let (agent, faults, len) = agent_with_history(&path).await;
    faults.resize_before_next_write(0);
    faults.fail_writes_after(10);
    let error = agent.inject(user("c")).await.unwrap_err();
    let AgentError::Indeterminate(LogError::Indeterminate { error, undo }) = &error else {
        panic!("{error:?}");
    };
    assert_eq!(error.to_string(), "write failed (injected)");
    assert!(
        cause(undo).is_some_and(|undo| truncated(undo, &path, len, 10)),
        "{undo:?}"
    );
    assert!(stopped_at_once(&agent).await.is_indeterminate());
    let closed = agent.close().await;
    assert!(
        matches!(&closed, Err(AgentError::FinalSync(e)) if truncated(e, &path, len, 10)),
        "{closed:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"seq\":9,\"");
}

/// A truncation that lands between the check and a write that succeeds: the check after the
/// sync finds the file shorter than what was written, and the cut-back, finding it shorter than
/// the log, leaves it: `Indeterminate`, both causes `Truncated`. The file holds the batch alone.
#[tokio::test(start_paused = true)]
async fn issue30_a_truncation_during_an_append_is_found_before_it_is_acknowledged() {
    let (_dir, path) = log_path();
    let (agent, faults, len) = agent_with_history(&path).await;
    faults.resize_before_next_write(0);
    let error = agent.inject(user("c")).await.unwrap_err();
    let written = std::fs::metadata(&path).unwrap().len();
    assert_eq!(written, 142);
    let AgentError::Indeterminate(LogError::Indeterminate { error, undo }) = &error else {
        panic!("{error:?}");
    };
    assert!(
        cause(error).is_some_and(|e| truncated(e, &path, len + written, written)),
        "{error:?}"
    );
    assert!(
        cause(undo).is_some_and(|e| truncated(e, &path, len, written)),
        "{undo:?}"
    );
    stopped_at_once(&agent).await;
    agent.close().await.unwrap_err();
    let records = parse(&std::fs::read(&path).unwrap()).unwrap().records;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].seq, Some(9));
}

/// Another writer's bytes landing between the check and the write (5 NUL bytes, injected): the
/// check after the sync finds the file longer than what the log wrote; the cut-back takes it back
/// to the acknowledged length and finds it ending in the log's last bytes, so the batch is not in
/// the log (`Persistence(Tampered)`). The file is as acknowledged again: the agent goes on and the
/// retry of `c` is appended, once; the log re-opens as it was acknowledged.
#[tokio::test(start_paused = true)]
async fn issue30_another_writer_racing_an_append_is_cut_back_with_it() {
    let (_dir, path) = log_path();
    let (agent, faults, len) = agent_with_history(&path).await;
    let before = std::fs::read(&path).unwrap();
    faults.resize_before_next_write(len + 5);
    let error = agent.inject(user("c")).await.unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(e) if tampered(e, &path, len + 142, len + 147)),
        "{error:?}"
    );
    going_on_at_once(&agent).await;
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(
        pending(&agent).await,
        (vec![], vec![("b".to_owned(), false)])
    );
    agent.inject(user("c")).await.unwrap();
    agent.close().await.unwrap();
    let after = std::fs::read(&path).unwrap();
    assert!(after.starts_with(&before));
    let records = parse(&after).unwrap().records;
    check_seq(&records);
    assert_eq!(
        records
            .iter()
            .map(|r| brief_event(&r.event))
            .skip(7)
            .collect::<Vec<_>>(),
        ["NS 0 +[b]", "NS 1 +[c]"]
    );
    let (agent, recovery) = Agent::open(FakeHost::new(), FileLog::open(&path).await.unwrap())
        .await
        .unwrap();
    assert_eq!(
        (recovery.records, recovery.pending_next_step),
        (9, 2),
        "b and c pending, c once"
    );
    agent.close().await.unwrap();
}

/// Right after an ordinary `Persistence` error (a write failing part-way, cut back): `ending()`
/// says `None` and `when_idle()` succeeds at once (the agent goes on), the log is still held
/// (`Locked`), and the next input is appended. Right after an `Indeterminate` one (the cut-back
/// fails too), `ending()` says `Stopped` and `when_idle()` fails at once, and the log is
/// released, so it re-opens at once.
#[tokio::test]
async fn issue30_ending_and_when_idle_say_whether_the_agent_stopped_as_soon_as_the_error_is_returned(
) {
    let (_dir, path) = log_path();
    let (agent, faults, _) = agent_with_history(&path).await;
    let before = std::fs::read(&path).unwrap();
    faults.fail_writes_after(10);
    let error = agent.inject(user("c")).await.unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(LogError::Io(e)) if e.to_string() == "write failed (injected)"),
        "{error:?}"
    );
    going_on_at_once(&agent).await;
    assert!(matches!(
        FileLog::open(&path).await,
        Err(LogError::Locked { .. })
    ));
    assert_eq!(std::fs::read(&path).unwrap(), before);
    faults.fail_writes_after(u64::MAX);
    agent.inject(user("c")).await.unwrap();
    assert!(agent.ending().is_none());

    faults.fail_writes_after(10);
    faults.fail_truncates(true);
    let error = agent.inject(user("d")).await.unwrap_err();
    assert!(
        matches!(
            &error,
            AgentError::Indeterminate(LogError::Indeterminate { .. })
        ),
        "{error:?}"
    );
    assert!(stopped_at_once(&agent).await.is_indeterminate());
    let log = FileLog::open(&path).await.unwrap();
    drop(log);
    assert!(matches!(
        agent.inject(user("e")).await,
        Err(AgentError::Stopped)
    ));
    agent.close().await.unwrap();
}

/// A maintenance job running when a delivery made meanwhile fails to append indeterminately: the
/// agent stops, and the job's caller learns of the stop once `ending()` says it.
#[tokio::test]
async fn issue30_a_maintenance_running_when_the_agent_stops_returns_once_it_stopped() {
    let (_dir, path) = log_path();
    let (agent, faults, _) = agent_with_history(&path).await;
    let job = {
        let agent = agent.clone();
        move |cancel: tokio_util::sync::CancellationToken| async move {
            faults.fail_writes_after(0);
            faults.fail_truncates(true);
            let delivered = agent.followup(user("x")).await;
            cancel.cancelled().await;
            delivered
        }
    };
    let error = agent.run_maintenance(job).await.unwrap_err();
    assert!(matches!(&error, AgentError::Stopped), "{error:?}");
    assert!(matches!(
        stopped_at_once(&agent).await,
        LogError::Indeterminate { error, .. } if error.to_string() == "write failed (injected)"
    ));
    agent.close().await.unwrap();
}

/// A delivery made during a maintenance job that fails to append (cut back) fails alone: the job
/// goes on and returns what it was told. The job's end (which replays the latch `y` set, S25,
/// opening turn 1) fails to append too: the session holds it and stages it again after its
/// retry pause (100 ms), once the disk works again, and only then does the job's caller get its
/// value. The agent goes on.
#[tokio::test(start_paused = true)]
async fn issue30_a_delivery_failing_during_a_maintenance_fails_alone_and_the_end_is_committed_again(
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let (_dir, path) = log_path();
    let faults = FileFaults::new();
    let log = faults
        .open_file_log(&path, SyncPolicy::default())
        .await
        .unwrap();
    let heal = faults.clone();
    let failures = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&failures);
    // The disk recovers once the second append (the end's) failed.
    let log = Watched::new(log, move |error| {
        if matches!(error, LogError::Io(_)) && counted.fetch_add(1, Ordering::SeqCst) == 1 {
            heal.fail_writes_after(u64::MAX);
        }
    });
    let (agent, _) = Agent::open(FakeHost::new(), log).await.unwrap();
    agent.inject(user("b")).await.unwrap();
    let job = {
        let agent = agent.clone();
        move |_cancel: tokio_util::sync::CancellationToken| async move {
            agent.followup(user("y")).await.unwrap();
            faults.fail_writes_after(0);
            let delivered = agent.followup(user("x")).await;
            (delivered, agent.ending().is_none(), agent.last_turn())
        }
    };
    let start = tokio::time::Instant::now();
    let (delivered, going_on, last_turn) = agent.run_maintenance(job).await.unwrap();
    assert!(
        matches!(&delivered, Err(AgentError::Persistence(LogError::Io(_)))),
        "{delivered:?}"
    );
    assert!(going_on);
    assert_eq!(last_turn, 0);
    assert_eq!(failures.load(Ordering::SeqCst), 2);
    assert_eq!(start.elapsed(), Duration::from_millis(100));
    assert!(agent.ending().is_none());
    agent.when_idle().await.unwrap();
    // `x` is not in the log; the agent takes it now.
    agent.followup(user("x")).await.unwrap();
    agent.when_idle().await.unwrap();
    agent.close().await.unwrap();
    let records = parse(&std::fs::read(&path).unwrap()).unwrap().records;
    check_seq(&records);
    audit(&records);
    assert_eq!(
        records
            .iter()
            .map(|r| brief_event(&r.event))
            .collect::<Vec<_>>(),
        [
            "NS 0 +[b]",
            "NT 0 +[y] wakeup",
            "turn 1",
            "NS 0 -1",
            "NT 0 -1",
            "step 1.1",
            "msg b",
            "msg y",
            "/step 1.1",
            "end 1 completed",
            "NT 0 +[x] wakeup",
            "turn 2",
            "NT 0 -1",
            "step 2.1",
            "msg x",
            "/step 2.1",
            "end 2 completed"
        ]
    );
}

// The segment log -------------------------------------------------------------------------------

fn entry(text: &str) -> Vec<Entry> {
    vec![Entry::Host(
        HostEvent::new("model/output", json!(text)).unwrap(),
    )]
}

/// A segment log with session s1 read back, repaired, and one record appended; the switches of
/// its file's faults, and the file's length.
async fn segment_with_history(
    path: &Path,
) -> (
    SegmentLog<FaultyFile>,
    SessionLog<FaultyFile>,
    FileFaults,
    u64,
) {
    let faults = FileFaults::new();
    let segment = faults.open_segment_log(path).await.unwrap();
    let mut s1 = segment.session("s1").unwrap();
    s1.read_back(&mut |_| ControlFlow::Continue(()))
        .await
        .unwrap();
    s1.repair_tail().await.unwrap();
    assert_eq!(s1.append(&entry("kept")).await.unwrap(), 1);
    let len = std::fs::metadata(path).unwrap().len();
    assert_eq!(len, 61);
    (segment, s1, faults, len)
}

/// Truncated in place: the commit is refused before anything is written and the writer stops.
#[tokio::test]
async fn issue30_a_segment_log_truncated_commits_nothing_more() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segment.jsonl");
    let (segment, mut s1, _, len) = segment_with_history(&path).await;
    truncate(&path, 0);
    let error = s1.append(&entry("lost")).await.unwrap_err();
    assert!(truncated(&error, &path, len, 0), "{error:?}");
    let mut s2 = segment.session("s2").unwrap();
    assert!(matches!(
        s2.append(&entry("y")).await,
        Err(LogError::WriterStopped)
    ));
    assert_eq!(std::fs::read(&path).unwrap(), b"");
}

/// Appended to by another writer: the same, `Tampered`, the foreign line left as it is.
#[tokio::test]
async fn issue30_a_segment_log_appended_to_by_another_writer_commits_nothing_more() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segment.jsonl");
    let (segment, mut s1, _, len) = segment_with_history(&path).await;
    append_foreign(&path, b"hello\n");
    let changed = std::fs::read(&path).unwrap();
    let error = s1.append(&entry("lost")).await.unwrap_err();
    assert!(tampered(&error, &path, len, len + 6), "{error:?}");
    let mut s2 = segment.session("s2").unwrap();
    assert!(matches!(
        s2.append(&entry("y")).await,
        Err(LogError::WriterStopped)
    ));
    assert_eq!(std::fs::read(&path).unwrap(), changed);
}

/// A truncation racing a commit whose write fails: the cut-back does not extend the file
/// (`Indeterminate`, its `undo` the `Truncated` it found).
#[tokio::test]
async fn issue30_a_segment_cut_back_after_a_truncation_is_indeterminate_and_never_extends_the_file()
{
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segment.jsonl");
    let (_segment, mut s1, faults, len) = segment_with_history(&path).await;
    faults.resize_before_next_write(0);
    faults.fail_writes_after(10);
    let error = s1.append(&entry("lost")).await.unwrap_err();
    let LogError::Indeterminate { error, undo } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(error.to_string(), "write failed (injected)");
    assert!(
        cause(undo).is_some_and(|undo| truncated(undo, &path, len, 10)),
        "{undo:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"seq\":2,\"");
}

/// An agent on a session: the truncation fails the append (`Truncated`) and stops the segment's
/// writer (not the agent, which goes on): the next append gets `WriterStopped`, and the session
/// log takes no more (`Failed`); nothing more is acknowledged.
#[tokio::test]
async fn issue30_an_agent_on_a_truncated_segment_log_acknowledges_nothing_more() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segment.jsonl");
    let segment = SegmentLog::open(&path).await.unwrap();
    let (agent, _) = Agent::open(FakeHost::new(), segment.session("s1").unwrap())
        .await
        .unwrap();
    agent.inject(user("a")).await.unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    truncate(&path, 0);
    let error = agent.inject(user("b")).await.unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(e) if truncated(e, &path, len, 0)),
        "{error:?}"
    );
    going_on_at_once(&agent).await;
    assert!(matches!(
        agent.inject(user("c")).await,
        Err(AgentError::Persistence(LogError::WriterStopped))
    ));
    assert!(matches!(
        agent.followup(user("d")).await,
        Err(AgentError::Persistence(LogError::Failed))
    ));
    going_on_at_once(&agent).await;
    assert_eq!(
        pending(&agent).await,
        (vec![], vec![("a".to_owned(), false)])
    );
    assert!(matches!(
        agent.close().await,
        Err(AgentError::FinalSync(LogError::WriterStopped))
    ));
    assert_eq!(std::fs::read(&path).unwrap(), b"");
}
