//! Hostile files at a log's path (issue 49): a FIFO, a directory and a socket are refused at
//! open with one typed error that names the path and what it is, without blocking; a line longer
//! than any record a session writes stops the read at that line (naming the path and the line)
//! and changes nothing; the largest message the session admits fits in a line.

use std::ops::ControlFlow;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use coxswain_tokio::coxswain_core::{Message, Target};
use coxswain_tokio::coxswain_log::{measure, MAX_LINE_BYTES};
use coxswain_tokio::{Agent, DurableLog, FileLog, LogError, OpenError, Options, SegmentLog};

use crate::support::*;

/// A FIFO, a directory and a socket in `dir`, with what each is.
fn not_files(dir: &Path) -> Vec<(PathBuf, &'static str)> {
    let fifo = dir.join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let directory = dir.join("directory");
    std::fs::create_dir(&directory).unwrap();
    let socket = dir.join("socket");
    drop(UnixListener::bind(&socket).unwrap()); // the socket file stays
    vec![
        (fifo, "a FIFO"),
        (directory, "a directory"),
        (socket, "a socket"),
    ]
}

/// Fails (instead of hanging) if `future` takes more than 10 s.
async fn quickly<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), future)
        .await
        .expect("the open returned at once")
}

#[tokio::test]
async fn a_fifo_a_directory_and_a_socket_are_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    for (path, kind) in not_files(dir.path()) {
        let expected = format!("{}: not a regular file ({kind})", path.display());
        let error = quickly(FileLog::open(&path)).await.unwrap_err();
        assert!(matches!(error, LogError::NotRegular(_)), "{error:?}");
        assert_eq!(error.to_string(), expected);
        let error = quickly(SegmentLog::open(&path)).await.err();
        assert!(matches!(error, Some(LogError::NotRegular(_))), "{error:?}");
        assert_eq!(error.map(|e| e.to_string()), Some(expected));
    }
}

/// Two records, then a line of `MAX_LINE_BYTES + 1` bytes (with its `\n` or without).
fn with_long_line(session: Option<&str>, newline: bool) -> Vec<u8> {
    let session = session.map_or_else(String::new, |s| format!(r#""session":"{s}","#));
    let mut bytes = format!(
        "{{\"seq\":1,{session}\"type\":\"model/output\",\"data\":\"x\"}}\n\
         {{\"seq\":2,{session}\"type\":\"model/output\",\"data\":\"y\"}}\n"
    )
    .into_bytes();
    bytes.resize(bytes.len() + MAX_LINE_BYTES + 1, b'a');
    if newline {
        bytes.push(b'\n');
    }
    bytes
}

#[tokio::test]
async fn a_line_longer_than_any_record_stops_the_read_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    for newline in [true, false] {
        let path = dir.path().join(format!("long-{newline}.jsonl"));
        let content = with_long_line(None, newline);
        std::fs::write(&path, &content).unwrap();
        let expected = format!(
            "{}: line 3 is longer than 2097152 bytes (the longest record a session writes)",
            path.display()
        );
        let mut log = FileLog::open(&path).await.unwrap();
        let mut seen = 0;
        let error = log
            .read_back(&mut |_| {
                seen += 1;
                ControlFlow::Continue(())
            })
            .await
            .unwrap_err();
        assert!(
            matches!(&error, LogError::LineTooLong { line: 3, max, .. } if *max == MAX_LINE_BYTES),
            "{error:?}"
        );
        assert_eq!((error.to_string(), seen), (expected.clone(), 2));
        drop(log);
        // An agent does not open on it, and the file is left as it was (not cut as a torn tail).
        let log = FileLog::open(&path).await.unwrap();
        let host = FakeHost::new();
        let error = Agent::open_with(Options::default(), host, log).await.err();
        assert!(
            matches!(&error, Some(OpenError::Log(LogError::LineTooLong { .. }))),
            "{error:?}"
        );
        assert_eq!(error.map(|e| e.to_string()), Some(expected));
        assert!(std::fs::read(&path).unwrap() == content);
    }
    let path = dir.path().join("segment.jsonl");
    std::fs::write(&path, with_long_line(Some("s"), true)).unwrap();
    let error = SegmentLog::open(&path).await.err().map(|e| e.to_string());
    assert_eq!(
        error,
        Some(format!(
            "{}: line 3 is longer than 2097152 bytes (the longest record a session writes)",
            path.display()
        ))
    );
}

#[tokio::test]
async fn the_largest_message_the_session_admits_fits_in_a_line() {
    // The session's own limits (coxswain_session::Limits::DEFAULT, the agent's defaults).
    let limits = coxswain_session::Limits::DEFAULT;
    let options = Options::default();
    assert_eq!(
        (options.max_message_bytes, options.max_id_bytes),
        (limits.max_message_bytes, limits.max_id_bytes)
    );
    let id = "i".repeat(limits.max_id_bytes);
    let sized = |content: usize| Message::user(id.as_str(), "\u{7}".repeat(content));
    // A control character takes 6 bytes as JSON (`\u0007`): the widest encoding of a string.
    let base = measure(&sized(0)).bytes;
    let largest = sized((limits.max_message_bytes - base) / 6);
    let bytes = measure(&largest).bytes;
    assert!(bytes <= limits.max_message_bytes && bytes + 6 > limits.max_message_bytes);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let log = FileLog::open(&path).await.unwrap();
    let host = FakeHost::new().on_pre_step(|_cx| std::future::pending());
    let (agent, _) = Agent::open_with(options, host, log).await.unwrap();
    // Its widest records: a quiet send (a splice inserting it), then a replace (a splice that
    // removes one and inserts it again).
    agent
        .send(largest.clone(), Target::NextTurn, false)
        .await
        .unwrap();
    agent.replace(id.as_str(), largest).await.unwrap();
    agent.close().await.unwrap();
    let longest = std::fs::read(&path)
        .unwrap()
        .split(|&b| b == b'\n')
        .map(<[u8]>::len)
        .max();
    assert!(
        longest.is_some_and(|n| n > limits.max_message_bytes && n <= MAX_LINE_BYTES),
        "{longest:?}"
    );
    // And it reads back.
    let mut log = FileLog::open(&path).await.unwrap();
    let read = log
        .read_back(&mut |_| ControlFlow::Continue(()))
        .await
        .unwrap();
    assert_eq!(read.records, 2);
}
