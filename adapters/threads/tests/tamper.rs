//! Issue 52: the threads driver on the shared file log gains the tamper and truncation suite the
//! tokio driver has (`adapters/tokio/tests/driver/tamper.rs`, issue 30), each case ported to the
//! threads agent and its exact error (kind, message, path) pinned. A log file changed behind its
//! writer's back (removed or replaced; cut in place as `logrotate`'s `copytruncate` or
//! `: > session.jsonl` do; appended to or overwritten at its end by a writer that ignores the
//! lock) is detected before anything more is acknowledged; a cut-back never extends the file,
//! and one that finds it shorter is `Indeterminate`. An append that failed and was cut back fails
//! only its batch (`Persistence`): the agent goes on and each later append checks the file
//! afresh. Only an `Indeterminate` append stops the agent (and releases the log). Then what the
//! tokio suite has elsewhere: a second writer is `Locked`, a full file system `StorageFull`
//! (cut back, the agent going on), a refused permission `PermissionDenied`; and the sync
//! policies, with the final sync when the agent ends.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use coxswain_core::{Config, Input, Message, StepAnswer};
use coxswain_driver_sim::file_faults::FileFaults;
use coxswain_log::parse;
use coxswain_session::Options;
use coxswain_threads::{
    open_log, open_log_wrapped, Agent, AgentError, Host, LogError, LogOptions, OpenError,
    SyncPolicy,
};

/// A model whose every step completes.
struct Model;

impl Host for Model {
    fn step(&self, _turn: u64, _step: u64, _cancelled: &AtomicBool) -> Result<StepAnswer, String> {
        Ok(StepAnswer::Completed)
    }
}

fn followup(id: &str) -> Input {
    Input::Followup(Message::user(id, id).into())
}

fn inject(id: &str) -> Input {
    Input::Inject(Message::user(id, id).into())
}

// A file's faults: the simulator's `FileFaults` (the tokio suite's own) ----------------------

// Helpers ---------------------------------------------------------------------------------------

fn log_path() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    (dir, path)
}

/// An agent on a faulty file log syncing as `policy` says.
fn agent_on(path: &Path, policy: SyncPolicy) -> (Agent, FileFaults) {
    let faults = FileFaults::new();
    let options = LogOptions::from(Config::new()).with_sync(policy);
    let wrap = |file| faults.wrap(file);
    let (log, plan) = open_log_wrapped(path, options, wrap).unwrap();
    let agent = Agent::start(Model, log, plan.machine, Options::default());
    (agent, faults)
}

/// The tokio suite's steps 1 and 2: an agent that took `followup(a)`, went idle and took
/// `inject(b)`; its file's faults, and the log's length then.
fn agent_with_history(path: &Path) -> (Agent, FileFaults, u64) {
    let (agent, faults) = agent_on(path, SyncPolicy::EveryAppend);
    agent.input(followup("a")).unwrap();
    agent.when_idle().unwrap();
    agent.input(inject("b")).unwrap();
    let len = std::fs::metadata(path).unwrap().len();
    assert_eq!(len, 733, "the history's length");
    (agent, faults, len)
}

/// Cuts the file to `len` through a handle of its own (same inode: no replaced-file check fires).
fn truncate(path: &Path, len: u64) {
    let file = OpenOptions::new().write(true).open(path).unwrap();
    file.set_len(len).unwrap();
}

/// Appends `bytes` through a handle of its own, ignoring the lock (`echo >> file`).
fn append_foreign(path: &Path, bytes: &[u8]) {
    let mut file = OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(bytes).unwrap();
}

/// The agent did not stop: it is idle at once (every input so far was answered).
fn going_on(agent: &Agent) {
    let idle = agent.when_idle();
    assert!(idle.is_ok(), "{idle:?}");
}

/// The agent stopped: `when_idle` says so, and every input is refused `stopped`.
fn stopped(agent: &Agent) {
    assert!(matches!(agent.when_idle(), Err(AgentError::Stopped)));
    let refused = agent.input(inject("z"));
    assert!(matches!(refused, Err(AgentError::Stopped)), "{refused:?}");
}

/// The `LogError` inside an `Indeterminate`'s cause.
fn cause(error: &io::Error) -> Option<&LogError> {
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

/// The ids pending next turn and next step.
fn pending(agent: &Agent) -> (Vec<String>, Vec<String>) {
    let ids = |list: Vec<coxswain_core::Pending>| {
        let ids = list.iter().map(|item| item.message().id().to_string());
        ids.collect::<Vec<_>>()
    };
    let (nt, ns) = agent.pending().unwrap();
    (ids(nt), ids(ns))
}

fn log_error(error: &AgentError) -> &LogError {
    error.log_error().unwrap_or_else(|| panic!("{error:?}"))
}

// Truncated -------------------------------------------------------------------------------------

/// Truncated to 0 bytes through another handle: `inject(c)` is refused before anything is
/// written, the agent goes on but `followup(d)` is refused the same way (the file is checked
/// afresh), and `close_checked` reports that the log lost what was acknowledged; the file is
/// left as the truncation left it.
#[test]
fn a_log_truncated_to_0_acknowledges_nothing_more() {
    let (_dir, path) = log_path();
    let (agent, _, len) = agent_with_history(&path);
    truncate(&path, 0);
    let error = agent.input(inject("c")).unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(e) if truncated(e, &path, len, 0)),
        "{error:?}"
    );
    assert_eq!(
        (error.kind(), log_error(&error).kind()),
        ("persistence", "truncated")
    );
    assert_eq!(
        error.to_string(),
        format!(
            "the input's batch was not persisted: the log file {} was truncated: it holds 0 \
             bytes where this log wrote 733",
            path.display()
        )
    );
    going_on(&agent);
    let error = agent.input(followup("d")).unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(e) if truncated(e, &path, len, 0)),
        "{error:?}"
    );
    // S5: neither failed input stayed: `b` is pending alone, no turn opened.
    assert_eq!(pending(&agent), (vec![], vec!["b".to_owned()]));
    going_on(&agent);
    let closed = agent.close_checked().unwrap_err();
    assert!(
        matches!(&closed, AgentError::FinalSync(e) if truncated(e, &path, len, 0)),
        "{closed:?}"
    );
    assert_eq!(closed.kind(), "final-sync");
    assert_eq!(std::fs::read(&path).unwrap(), b"");
}

/// Truncated to 300 bytes (inside the third record): each append fails `Truncated`, the agent
/// going on, and the file keeps its 300 bytes; re-opened, the torn third line is dropped (S50),
/// which is all that is left of the history.
#[test]
fn a_log_truncated_to_300_bytes_acknowledges_nothing_more() {
    let (_dir, path) = log_path();
    let (agent, _, len) = agent_with_history(&path);
    let before = std::fs::read(&path).unwrap();
    truncate(&path, 300);
    for input in [inject("c"), followup("d")] {
        let error = agent.input(input).unwrap_err();
        assert!(
            matches!(&error, AgentError::Persistence(e) if truncated(e, &path, len, 300)),
            "{error:?}"
        );
        going_on(&agent);
    }
    let closed = agent.close_checked().unwrap_err();
    assert!(
        matches!(&closed, AgentError::FinalSync(e) if truncated(e, &path, len, 300)),
        "{closed:?}"
    );
    drop(agent);
    assert_eq!(std::fs::read(&path).unwrap(), &before[..300]);
    let (_, plan) = open_log(&path, Config::new()).unwrap();
    let torn = plan.torn.map(|t| (t.line, t.bytes));
    assert_eq!((plan.records, torn), (2, Some((3, 96))));
}

// Tampered --------------------------------------------------------------------------------------

/// A writer that ignores the lock appends a line (`echo hello >> session.jsonl`): `inject(c)` is
/// refused before anything is written (the foreign line is left for the operator to see), and so
/// is every append after it, the agent going on.
#[test]
fn a_log_appended_to_by_another_writer_acknowledges_nothing_more() {
    let (_dir, path) = log_path();
    let (agent, _, len) = agent_with_history(&path);
    append_foreign(&path, b"hello\n");
    let changed = std::fs::read(&path).unwrap();
    let error = agent.input(inject("c")).unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(e) if tampered(e, &path, len, len + 6)),
        "{error:?}"
    );
    assert_eq!(log_error(&error).kind(), "tampered");
    assert_eq!(
        error.to_string(),
        format!(
            "the input's batch was not persisted: the log file {} was written by another \
             writer: it holds 739 bytes where this log wrote 733",
            path.display()
        )
    );
    going_on(&agent);
    let error = agent.input(followup("d")).unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(e) if tampered(e, &path, len, len + 6)),
        "{error:?}"
    );
    going_on(&agent);
    let closed = agent.close_checked().unwrap_err();
    assert!(
        matches!(&closed, AgentError::FinalSync(e) if tampered(e, &path, len, len + 6)),
        "{closed:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), changed);
}

/// The last bytes the log wrote are overwritten in place (the same length): found by comparing
/// them, `Tampered` at the same length, for this append and the next (the agent going on).
#[test]
fn a_log_overwritten_at_its_end_acknowledges_nothing_more() {
    let (_dir, path) = log_path();
    let (agent, _, len) = agent_with_history(&path);
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(b"XX", len - 4).unwrap();
    let error = agent.input(inject("c")).unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(e) if tampered(e, &path, len, len)),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "the input's batch was not persisted: the log file {} was written by another \
             writer: its last bytes are not the ones this log wrote (733 bytes)",
            path.display()
        )
    );
    going_on(&agent);
    let error = agent.input(followup("d")).unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(e) if tampered(e, &path, len, len)),
        "{error:?}"
    );
    let closed = agent.close_checked().unwrap_err();
    assert!(
        matches!(&closed, AgentError::FinalSync(e) if tampered(e, &path, len, len)),
        "{closed:?}"
    );
}

/// What the check does not see (the shared log's docs say so): bytes overwritten in place
/// before the last 32 the log wrote. The append is acknowledged; the next open finds the damage
/// and changes nothing.
#[test]
fn an_overwrite_in_the_middle_is_not_detected_until_the_next_open() {
    let (_dir, path) = log_path();
    let (agent, _, _) = agent_with_history(&path);
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(b"XX", 0).unwrap();
    agent.input(inject("c")).unwrap();
    agent.close_checked().unwrap();
    drop(agent);
    let damaged = std::fs::read(&path).unwrap();
    let error = open_log(&path, Config::new()).unwrap_err();
    assert!(
        matches!(&error, OpenError::Log(e) if e.kind() == "corrupt"),
        "{error:?}"
    );
    // Named by its line. (The shared log's `Corrupt` does not name the file: reported.)
    assert_eq!(
        error.to_string(),
        "corrupt log: line 1: not JSON: expected value at line 1 column 1"
    );
    assert_eq!(std::fs::read(&path).unwrap(), damaged);
}

// A failing append and its cut-back -------------------------------------------------------------

/// Truncated to 0, then an append whose write would fail after 10 bytes: the truncation is
/// found before the write, so nothing is written and nothing is cut back: the file is not
/// extended. The agent goes on; the next append finds the truncation again.
#[test]
fn a_failing_append_after_a_truncation_writes_nothing_and_never_extends_the_file() {
    let (_dir, path) = log_path();
    let (agent, faults, len) = agent_with_history(&path);
    truncate(&path, 0);
    faults.fail_writes_after(10);
    for input in [inject("c"), followup("d")] {
        let error = agent.input(input).unwrap_err();
        assert!(
            matches!(&error, AgentError::Persistence(e) if truncated(e, &path, len, 0)),
            "{error:?}"
        );
        going_on(&agent);
    }
    let closed = agent.close_checked().unwrap_err();
    assert!(
        matches!(&closed, AgentError::FinalSync(e) if truncated(e, &path, len, 0)),
        "{closed:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"");
}

/// A truncation that lands between the log's check and its write, the write then failing after
/// 10 bytes: the cut-back finds the file shorter than the log (10 bytes, written at the
/// truncated end) and does not cut: `Indeterminate`, its `undo` the `Truncated` it found; the
/// agent stopped, and the file keeps its 10 bytes, never extended.
#[test]
fn a_cut_back_after_a_truncation_is_indeterminate_and_never_extends_the_file() {
    let (_dir, path) = log_path();
    let (agent, faults, len) = agent_with_history(&path);
    faults.resize_before_next_write(0);
    faults.fail_writes_after(10);
    let error = agent.input(inject("c")).unwrap_err();
    assert_eq!(
        (error.kind(), log_error(&error).kind()),
        ("indeterminate", "indeterminate")
    );
    let AgentError::Indeterminate(LogError::Indeterminate { error, undo }) = &error else {
        panic!("{error:?}");
    };
    // The shared log names no path in an `Indeterminate`'s own i/o cause (reported).
    assert_eq!(error.to_string(), "write failed (injected)");
    assert!(
        cause(undo).is_some_and(|undo| truncated(undo, &path, len, 10)),
        "{undo:?}"
    );
    stopped(&agent);
    let closed = agent.close_checked().unwrap_err();
    assert!(
        matches!(&closed, AgentError::FinalSync(e) if truncated(e, &path, len, 10)),
        "{closed:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"seq\":9,\"");
}

/// A truncation that lands between the check and a write that succeeds: the check after the
/// sync finds the file shorter than what was written, and the cut-back, finding it shorter than
/// the log, leaves it: `Indeterminate`, both causes `Truncated`. The file holds the batch alone.
#[test]
fn a_truncation_during_an_append_is_found_before_it_is_acknowledged() {
    let (_dir, path) = log_path();
    let (agent, faults, len) = agent_with_history(&path);
    faults.resize_before_next_write(0);
    let error = agent.input(inject("c")).unwrap_err();
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
    stopped(&agent);
    drop(agent);
    let records = parse(&std::fs::read(&path).unwrap()).unwrap().records;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].seq, Some(9));
}

/// Another writer's bytes landing between the check and the write (5 NUL bytes): the check
/// after the sync finds the file longer than what the log wrote; the cut-back takes it back to
/// the acknowledged length and finds it ending in the log's last bytes, so the batch is not in
/// the log (`Persistence(Tampered)`). The file is as acknowledged again: the agent goes on, the
/// retry of `c` is appended once, and the log re-opens with `b` and `c` pending.
#[test]
fn another_writer_racing_an_append_is_cut_back_with_it() {
    let (_dir, path) = log_path();
    let (agent, faults, len) = agent_with_history(&path);
    let before = std::fs::read(&path).unwrap();
    faults.resize_before_next_write(len + 5);
    let error = agent.input(inject("c")).unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(e) if tampered(e, &path, len + 142, len + 147)),
        "{error:?}"
    );
    going_on(&agent);
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(pending(&agent), (vec![], vec!["b".to_owned()]));
    agent.input(inject("c")).unwrap();
    agent.close_checked().unwrap();
    drop(agent);
    let after = std::fs::read(&path).unwrap();
    assert!(after.starts_with(&before));
    assert_eq!(parse(&after).unwrap().records.len(), 9);
    let (_, plan) = open_log(&path, Config::new()).unwrap();
    let ns = plan.machine.pending(coxswain_core::Target::NextStep);
    let ids: Vec<String> = ns.map(|item| item.message().id().to_string()).collect();
    assert_eq!(
        (plan.records, ids),
        (9, vec!["b".to_owned(), "c".to_owned()])
    );
}

/// Right after an ordinary `Persistence` error (a write failing part-way, cut back) the agent
/// goes on, still holds the log (a second open is `Locked`) and appends the next input. Right
/// after an `Indeterminate` one (the cut-back fails too) the agent stopped and released the log,
/// which re-opens at once.
#[test]
fn a_cut_back_append_keeps_the_log_and_an_indeterminate_one_releases_it() {
    let (_dir, path) = log_path();
    let (agent, faults, _) = agent_with_history(&path);
    let before = std::fs::read(&path).unwrap();
    faults.fail_writes_after(10);
    let error = agent.input(inject("c")).unwrap_err();
    let injected = |e: &io::Error| e.to_string() == "write failed (injected)";
    assert!(
        matches!(&error, AgentError::Persistence(LogError::Io(e)) if injected(e)),
        "{error:?}"
    );
    assert_eq!(log_error(&error).kind(), "io");
    going_on(&agent);
    let locked = open_log(&path, Config::new()).unwrap_err();
    assert!(
        matches!(&locked, OpenError::Log(LogError::Locked { path: p }) if *p == path),
        "{locked:?}"
    );
    assert_eq!(
        locked.to_string(),
        format!("the log {} is locked by another writer", path.display())
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    faults.fail_writes_after(u64::MAX);
    agent.input(inject("c")).unwrap();

    faults.fail_writes_after(10);
    faults.fail_truncates(true);
    let error = agent.input(inject("d")).unwrap_err();
    assert!(
        matches!(
            &error,
            AgentError::Indeterminate(LogError::Indeterminate { .. })
        ),
        "{error:?}"
    );
    stopped(&agent);
    let reopened = open_log(&path, Config::new());
    assert!(reopened.is_ok(), "{:?}", reopened.err());
}

// Removed or replaced ---------------------------------------------------------------------------

/// The file removed (`rm`): every append fails `Replaced`, naming the path, writes nothing, and
/// the agent goes on; closing reports it too.
#[test]
fn a_removed_log_acknowledges_nothing_more() {
    let (_dir, path) = log_path();
    let (agent, _, _) = agent_with_history(&path);
    std::fs::remove_file(&path).unwrap();
    for input in [inject("c"), followup("d")] {
        let error = agent.input(input).unwrap_err();
        assert!(
            matches!(&error, AgentError::Persistence(LogError::Replaced { path: p }) if *p == path),
            "{error:?}"
        );
        assert_eq!(log_error(&error).kind(), "replaced");
        assert_eq!(
            error.to_string(),
            format!(
                "the input's batch was not persisted: the log file {} was removed or replaced",
                path.display()
            )
        );
        going_on(&agent);
    }
    let closed = agent.close_checked().unwrap_err();
    assert!(
        matches!(&closed, AgentError::FinalSync(LogError::Replaced { .. })),
        "{closed:?}"
    );
    assert!(!path.exists());
}

/// The file renamed and another put in its place (`logrotate` without `copytruncate`): every
/// append fails `Replaced`; neither file gets a byte more.
#[test]
fn a_replaced_log_acknowledges_nothing_more() {
    let (dir, path) = log_path();
    let (agent, _, _) = agent_with_history(&path);
    let written = std::fs::read(&path).unwrap();
    let moved = dir.path().join("session.jsonl.1");
    std::fs::rename(&path, &moved).unwrap();
    std::fs::write(&path, b"").unwrap();
    let error = agent.input(inject("c")).unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(LogError::Replaced { path: p }) if *p == path),
        "{error:?}"
    );
    going_on(&agent);
    drop(agent);
    assert_eq!(std::fs::read(&moved).unwrap(), written);
    assert_eq!(std::fs::read(&path).unwrap(), b"");
}

// Locked, storage full, permission denied -------------------------------------------------------

/// A second writer is refused while the agent holds the log, in this process as in any other
/// (the lock is `flock`); once the agent is closed (dropped: its thread joined) it opens.
#[test]
fn a_second_writer_is_locked_out_until_the_agent_is_closed() {
    let (_dir, path) = log_path();
    let (agent, _) = agent_on(&path, SyncPolicy::EveryAppend);
    agent.input(inject("a")).unwrap();
    let error = open_log(&path, Config::new()).unwrap_err();
    assert!(
        matches!(&error, OpenError::Log(e) if e.kind() == "locked"),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!("the log {} is locked by another writer", path.display())
    );
    agent.close();
    let (_, plan) = open_log(&path, Config::new()).unwrap();
    assert_eq!(plan.records, 1);
}

/// The file system fills up part-way through a write (`ENOSPC`): the partial write is cut back,
/// the input fails `StorageFull` naming the file, the agent goes on, and once there is space
/// the input sent again is appended once.
#[test]
fn a_full_file_system_fails_the_batch_alone_and_the_retry_goes_in_once() {
    let (_dir, path) = log_path();
    let (agent, faults, len) = agent_with_history(&path);
    let before = std::fs::read(&path).unwrap();
    faults.fail_writes_with(Some(rustix::io::Errno::NOSPC.raw_os_error()));
    faults.fail_writes_after(10);
    let error = agent.input(inject("c")).unwrap_err();
    assert!(
        matches!(&error, AgentError::Persistence(LogError::StorageFull { path: p }) if *p == path),
        "{error:?}"
    );
    assert_eq!(log_error(&error).kind(), "storage-full");
    assert_eq!(
        error.to_string(),
        format!(
            "the input's batch was not persisted: the log file {} cannot grow: no space left \
             on its file system",
            path.display()
        )
    );
    going_on(&agent);
    assert_eq!(std::fs::read(&path).unwrap(), before, "cut back to {len}");
    faults.fail_writes_after(u64::MAX);
    agent.input(inject("c")).unwrap();
    agent.close_checked().unwrap();
    drop(agent);
    let (_, plan) = open_log(&path, Config::new()).unwrap();
    assert_eq!(plan.records, 9);
}

/// Whether this process is root, whom file permissions do not stop.
fn root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A log file the process may not open (`chmod 000`), or may not create (a read-only
/// directory): refused at open with `PermissionDenied`, naming the file; nothing is changed.
/// Skipped as root (permissions do not stop root: the open would succeed).
#[test]
fn a_log_the_process_may_not_open_or_create_is_permission_denied() {
    if root() {
        eprintln!("skipped: running as root, whom permissions do not stop");
        return;
    }
    let (dir, path) = log_path();
    std::fs::write(&path, b"").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
    let error = open_log(&path, Config::new()).unwrap_err();
    assert!(
        matches!(&error, OpenError::Log(LogError::PermissionDenied { path: p, .. }) if *p == path),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "the log file {}: permission denied (Permission denied (os error 13))",
            path.display()
        )
    );
    let readonly = dir.path().join("readonly");
    std::fs::create_dir(&readonly).unwrap();
    std::fs::set_permissions(&readonly, std::fs::Permissions::from_mode(0o555)).unwrap();
    let inside = readonly.join("session.jsonl");
    let error = open_log(&inside, Config::new()).unwrap_err();
    assert!(
        matches!(&error, OpenError::Log(e) if e.kind() == "permission-denied"),
        "{error:?}"
    );
    assert!(error.to_string().contains(&inside.display().to_string()));
    assert!(!inside.exists());
}

// Sync policies ---------------------------------------------------------------------------------

/// The sync policies on the agent (the shared log's `SyncPolicy`): `every-append` syncs each of
/// a turn's 4 appends, `per-turn` only the one that ends the turn, `never` none; every policy
/// syncs once more when the agent ends (the final sync), and the log re-opens whole.
#[test]
fn each_sync_policy_syncs_as_it_says_and_once_more_at_the_end() {
    for (policy, during, at_end) in [
        (SyncPolicy::EveryAppend, 4, 5),
        (SyncPolicy::PerTurn, 1, 2),
        (SyncPolicy::Never, 0, 1),
    ] {
        let (_dir, path) = log_path();
        let (agent, faults) = agent_on(&path, policy);
        agent.input(followup("a")).unwrap();
        agent.when_idle().unwrap();
        assert_eq!(faults.syncs(), during, "{policy:?}");
        agent.close_checked().unwrap();
        assert_eq!(faults.syncs(), at_end, "{policy:?}");
        drop(agent);
        let (_, plan) = open_log(&path, Config::new()).unwrap();
        assert_eq!(plan.records, 7, "{policy:?}");
    }
}

/// `dispose` returns once the agent ended with its log synced: with `never`, that final sync is
/// the only one.
#[test]
fn dispose_syncs_the_log_once_more() {
    let (_dir, path) = log_path();
    let (agent, faults) = agent_on(&path, SyncPolicy::Never);
    agent.input(inject("a")).unwrap();
    agent.dispose().unwrap();
    assert_eq!(faults.syncs(), 1);
}

/// A final sync that fails fails `dispose` (`final-sync`) once the agent has ended (later inputs
/// are refused `disposed`): what `never` acknowledged may be lost.
#[test]
fn dispose_reports_a_failed_final_sync() {
    let (_dir, path) = log_path();
    let (agent, faults) = agent_on(&path, SyncPolicy::Never);
    agent.input(inject("a")).unwrap();
    faults.fail_syncs(usize::MAX);
    let error = agent.dispose().unwrap_err();
    assert!(
        matches!(&error, AgentError::FinalSync(LogError::Io(_))),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        // The shared log's `Io` does not name the file (reported).
        "the final sync of the log failed: log i/o failed: sync failed (injected)"
    );
    assert_eq!(faults.syncs(), 1);
    let refused = agent.input(inject("b")).unwrap_err();
    assert_eq!(refused.kind(), "disposed");
    drop(agent);
    // What dispose wrote (its cancel of the pending `a`) is in the file, not known durable.
    let (_, plan) = open_log(&path, Config::new()).unwrap();
    assert_eq!(plan.records, 2);
}
