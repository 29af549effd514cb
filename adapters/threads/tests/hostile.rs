//! Hostile files at the blocking log's path (issue 49): a FIFO, a directory and a socket are
//! refused at open with one typed error naming the path and what it is (the open returns at
//! once); a line longer than any record a session writes stops the read at that line, and the
//! file is left as it was.

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use coxswain_core::Config;
use coxswain_log::MAX_LINE_BYTES;
use coxswain_threads::{open_log, LogError, OpenError};

/// Opens `path` on another thread: its error text, or a failure if it did not return within
/// 10 s (a FIFO blocks an open for reading until a writer comes).
fn open_error(path: &Path) -> (String, LogError) {
    let (tx, rx) = mpsc::channel();
    let owned = path.to_owned();
    std::thread::spawn(move || {
        let _ = tx.send(open_log(&owned, Config::new()).err());
    });
    let error = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the open returned at once")
        .expect("the open failed");
    let OpenError::Log(error) = error else {
        panic!("{error:?}");
    };
    (error.to_string(), error)
}

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
    drop(UnixListener::bind(&socket).unwrap());
    vec![
        (fifo, "a FIFO"),
        (directory, "a directory"),
        (socket, "a socket"),
    ]
}

#[test]
fn a_fifo_a_directory_and_a_socket_are_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    for (path, kind) in not_files(dir.path()) {
        let (text, error) = open_error(&path);
        assert!(matches!(error, LogError::NotRegular(_)), "{error:?}");
        assert_eq!(error.kind(), "not-regular");
        assert_eq!(
            text,
            format!("{}: not a regular file ({kind})", path.display())
        );
    }
}

#[test]
fn a_line_longer_than_any_record_stops_the_read_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.jsonl");
    let mut content = b"{\"seq\":1,\"type\":\"model/output\",\"data\":\"x\"}\n".to_vec();
    content.resize(content.len() + MAX_LINE_BYTES + 1, b'a');
    std::fs::write(&path, &content).unwrap();
    let (text, error) = open_error(&path);
    assert!(
        matches!(&error, LogError::LineTooLong { line: 2, path: p, .. } if *p == path),
        "{error:?}"
    );
    assert_eq!(
        text,
        format!(
            "{}: line 2 is longer than 2097152 bytes (the longest record a session writes)",
            path.display()
        )
    );
    // Not cut as a torn tail: the file is as it was.
    assert!(std::fs::read(&path).unwrap() == content);
    // A final line of exactly the limit is a torn tail (not JSON), repaired as one.
    content.truncate(content.len() - 1);
    std::fs::write(&path, &content).unwrap();
    let opened = open_log(&path, Config::new());
    assert!(opened.is_ok(), "{:?}", opened.err());
}
