//! The shared file log on its own, blocking: what every runtime's file log now is. The tamper
//! and truncation suites of the drivers (tokio, threads, Python, Node) run against it through
//! their agents; these pin the log's own calls and its error vocabulary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io;
use std::ops::ControlFlow;
use std::os::unix::fs::PermissionsExt;

use coxswain_core::{Config, Event, Message, TurnEndReason};
use coxswain_driver_sim::file_faults::FileFaults;
use coxswain_file_log::{FileLog, LogError, LogFile, SyncPolicy};
use coxswain_log::{Entry, HostEvent};
use coxswain_session::ResumeOptions;
use serde_json::json;

fn batch() -> Vec<Entry> {
    vec![
        Entry::Machine(Event::TurnStart { turn: 1 }),
        Entry::Host(HostEvent::new("model/output", json!("hi")).unwrap()),
        Entry::Machine(Event::TurnEnd {
            turn: 1,
            reason: TurnEndReason::Completed,
        }),
    ]
}

fn count(log: &mut FileLog<impl LogFile>) -> usize {
    let mut records = 0;
    log.read_back(&mut |_| {
        records += 1;
        ControlFlow::Continue(())
    })
    .unwrap();
    records
}

#[test]
fn appends_number_on_and_a_second_open_reads_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.jsonl");
    let mut log = FileLog::open(&path, SyncPolicy::EveryAppend).unwrap();
    assert!(!log.is_ready());
    assert_eq!(log.append(&batch()).unwrap(), 1);
    assert!(log.is_ready());
    assert_eq!(log.append(&batch()[..1]).unwrap(), 4);
    assert_eq!(log.append(&[]).unwrap(), 5);
    assert_eq!(log.next_seq(), 5);
    drop(log);
    let mut log = FileLog::open(&path, SyncPolicy::Never).unwrap();
    assert_eq!(count(&mut log), 4);
    assert_eq!(log.next_seq(), 5);
}

/// S50, S57: `resume` closes the turn a crash interrupted, cuts the torn tail, and a refused
/// log is left exactly as it was.
#[test]
fn resume_repairs_a_torn_tail_and_appends_the_closers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.jsonl");
    let mut log = FileLog::open(&path, SyncPolicy::EveryAppend).unwrap();
    let mut machine = log
        .resume(ResumeOptions::from(Config::new()))
        .unwrap()
        .machine;
    let events = machine
        .followup(Message::user("m1", "hi"))
        .unwrap()
        .events()
        .to_vec();
    log.append(&events.into_iter().map(Entry::Machine).collect::<Vec<_>>())
        .unwrap();
    drop(log);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(b"{\"seq\":4,\"ty");
    std::fs::write(&path, &bytes).unwrap();
    let mut log = FileLog::open(&path, SyncPolicy::EveryAppend).unwrap();
    let plan = log.resume(ResumeOptions::from(Config::new())).unwrap();
    assert_eq!(plan.torn.map(|torn| (torn.line, torn.bytes)), Some((4, 12)));
    assert_eq!(
        (plan.records, plan.interrupted, plan.next_seq),
        (3, Some(1), 4)
    );
    assert_eq!(log.next_seq(), 5);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 4);
    assert!(
        text.ends_with("\"reason\":{\"kind\":\"interrupted\"}}}\n"),
        "{text}"
    );
}

#[test]
fn a_log_the_core_refuses_is_invalid_names_the_file_and_is_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.jsonl");
    // One splice that inserts the id `a` twice (S13).
    let content = concat!(
        r#"{"seq":1,"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"#,
        r#""inserted":[{"id":"a","source":{"kind":"user"},"content":"a"},"#,
        r#"{"id":"a","source":{"kind":"user"},"content":"a"}]}}"#,
        "\n"
    );
    std::fs::write(&path, content).unwrap();
    let mut log = FileLog::open(&path, SyncPolicy::EveryAppend).unwrap();
    let error = log.resume(ResumeOptions::default()).unwrap_err();
    assert_eq!(error.kind(), "invalid");
    assert!(
        error.to_string().starts_with(&format!(
            "{}: the log cannot be resumed: ",
            log.path().display()
        )),
        "{error}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), content);
}

#[test]
fn a_corrupt_line_is_named_by_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.jsonl");
    std::fs::write(&path, b"not json\n").unwrap();
    let mut log = FileLog::open(&path, SyncPolicy::EveryAppend).unwrap();
    let error = log
        .read_back(&mut |_| ControlFlow::Continue(()))
        .unwrap_err();
    assert_eq!(error.kind(), "corrupt");
    assert!(
        error.to_string().starts_with("corrupt log: line 1: "),
        "{error}"
    );
}

/// Issue 52: a FIFO, a directory and a socket are refused at open, before anything is opened
/// (a FIFO opened for writing would block until a reader comes: never).
#[test]
fn only_a_regular_file_is_a_log() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let socket = dir.path().join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    for (path, what) in [
        (fifo, "a FIFO"),
        (dir.path().to_owned(), "a directory"),
        (socket, "a socket"),
    ] {
        let error = FileLog::open(&path, SyncPolicy::EveryAppend).unwrap_err();
        assert_eq!(error.kind(), "not-regular");
        assert_eq!(
            error.to_string(),
            format!("{}: not a regular file ({what})", path.display())
        );
    }
}

#[test]
fn a_second_writer_is_locked_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.jsonl");
    let _first = FileLog::open(&path, SyncPolicy::EveryAppend).unwrap();
    let error = FileLog::open(&path, SyncPolicy::EveryAppend).unwrap_err();
    assert_eq!(error.kind(), "locked");
    assert_eq!(
        error.to_string(),
        format!("the log {} is locked by another writer", path.display())
    );
}

#[test]
fn a_file_the_process_may_not_open_is_permission_denied() {
    if rustix::process::geteuid().is_root() {
        // root opens a mode-000 file all the same: nothing to refuse.
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.jsonl");
    std::fs::write(&path, b"").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
    let error = FileLog::open(&path, SyncPolicy::EveryAppend).unwrap_err();
    assert_eq!(error.kind(), "permission-denied");
    assert!(
        error.to_string().starts_with(&format!(
            "the log file {}: permission denied",
            path.display()
        )),
        "{error}"
    );
}

#[test]
fn a_full_disk_is_storage_full_the_append_is_cut_back_and_the_log_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.jsonl");
    let faults = FileFaults::new();
    let wrap = faults.clone();
    let mut log =
        FileLog::open_wrapped(&path, SyncPolicy::EveryAppend, move |file| wrap.wrap(file)).unwrap();
    log.append(&batch()).unwrap();
    let before = std::fs::read(&path).unwrap();
    // 10 bytes of it land before the disk fills: the log cuts them back.
    faults.fail_writes_after(10);
    faults.fail_writes_with(Some(rustix::io::Errno::NOSPC.raw_os_error()));
    let error = log.append(&batch()).unwrap_err();
    assert_eq!(error.kind(), "storage-full");
    assert_eq!(
        error.to_string(),
        format!(
            "the log file {} cannot grow: no space left on its file system",
            log.path().display()
        )
    );
    assert!(!error.stops_the_agent());
    assert_eq!(std::fs::read(&path).unwrap(), before, "cut back");
    faults.fail_writes_after(u64::MAX);
    assert_eq!(log.append(&batch()).unwrap(), 4);
}

#[test]
fn an_io_error_keeps_its_os_error() {
    let path = std::path::Path::new("/logs/a.jsonl");
    let error = LogError::at_path(path, io::Error::from_raw_os_error(5));
    assert_eq!(error.kind(), "io");
    let LogError::Io(io) = &error else {
        panic!("{error:?}")
    };
    assert_eq!(io.raw_os_error(), Some(5));
    assert!(
        error
            .to_string()
            .starts_with("log i/o failed: Input/output error"),
        "{error}"
    );
}

/// Encoded lines are taken only as the records they claim to be, numbered from the log's next
/// `seq`: a caller that counted wrong, or encoded before another append landed, writes nothing.
#[test]
fn encoded_lines_must_be_the_next_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.jsonl");
    let mut log = FileLog::open(&path, SyncPolicy::Never).unwrap();
    let mut lines = Vec::new();
    for (seq, entry) in (1..).zip(&batch()) {
        coxswain_log::encode(seq, entry, &mut lines).unwrap();
    }
    let refused = |error: LogError| (error.kind(), error.to_string());
    assert_eq!(
        refused(log.append_encoded(2, &lines, 3, true).unwrap_err()),
        (
            "encode",
            "cannot encode a record: the lines are numbered from seq 2, but the log's next record is seq 1: nothing written".into()
        )
    );
    let len = lines.len();
    assert_eq!(
        refused(log.append_encoded(1, &lines, 1, true).unwrap_err()),
        (
            "encode",
            format!("cannot encode a record: {len} bytes of lines holding 3 complete lines are not 1 records: nothing written")
        )
    );
    assert_eq!(
        refused(
            log.append_encoded(1, &lines[..len - 1], 2, true)
                .unwrap_err()
        )
        .0,
        "encode"
    );
    assert_eq!(
        log.append_encoded(1, &lines, 0, true).unwrap_err().kind(),
        "encode"
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"", "nothing written");
    assert_eq!(log.append_encoded(1, &lines, 3, true).unwrap(), 1);
    assert_eq!(log.next_seq(), 4);
}

/// A write the OS refuses (`EACCES`, `EPERM`, a read-only file system) is `permission-denied`,
/// naming the file, and cut back; reached through the `LogFile` seam, so it runs as root too.
#[test]
fn a_refused_write_is_permission_denied_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.jsonl");
    let faults = FileFaults::new();
    faults.fail_writes_after(0);
    faults.fail_writes_with(Some(rustix::io::Errno::ROFS.raw_os_error()));
    let wrap = faults.clone();
    let mut log =
        FileLog::open_wrapped(&path, SyncPolicy::EveryAppend, move |file| wrap.wrap(file)).unwrap();
    let error = log.append(&batch()).unwrap_err();
    assert_eq!(error.kind(), "permission-denied");
    assert_eq!(
        error.to_string(),
        format!(
            "the log file {}: permission denied (Read-only file system (os error 30))",
            log.path().display()
        )
    );
    for errno in [rustix::io::Errno::ACCESS, rustix::io::Errno::PERM] {
        let error = LogError::at_path(&path, io::Error::from_raw_os_error(errno.raw_os_error()));
        assert_eq!(error.kind(), "permission-denied");
    }
    assert_eq!(std::fs::read(&path).unwrap(), b"");
}

/// A file renamed away is found before the write: nothing lands in it, not even for a moment
/// (issue 52, as the Python and Node logs always did): the file's writes are counted.
#[test]
fn a_replaced_file_gets_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.jsonl");
    let faults = FileFaults::new();
    let wrap = faults.clone();
    let mut log =
        FileLog::open_wrapped(&path, SyncPolicy::EveryAppend, move |file| wrap.wrap(file)).unwrap();
    log.append(&batch()).unwrap();
    assert_eq!(faults.writes(), 1);
    let moved = dir.path().join("moved.jsonl");
    std::fs::rename(&path, &moved).unwrap();
    let before = std::fs::read(&moved).unwrap();
    let error = log.append(&batch()).unwrap_err();
    assert_eq!(error.kind(), "replaced");
    assert_eq!(faults.writes(), 1, "found before the write");
    assert_eq!(std::fs::read(&moved).unwrap(), before);
    assert!(!path.exists());
}
