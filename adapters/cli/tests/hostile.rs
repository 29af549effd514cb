//! Hostile input to the CLI (issue 49): a FIFO, a directory or a socket where a log (or a trace)
//! should be is refused at once, naming the path and what it is; a line longer than any record a
//! session writes is refused naming the path and the line; a rejected 1 MiB id is shown elided;
//! a refusal says `rejected:` once; zero turns print no `()`; a run without `--log` leaves no
//! temp dir behind; a resumed log says so; the hints name `cargo run -p coxswain --`.

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use coxswain_log::MAX_LINE_BYTES;

#[path = "support/run.rs"]
mod run;
use run::{run_cli, Ran};

/// Runs the CLI with `args` (and `envs`); fails if it has not exited within 20 s.
fn cli_with(args: &[&Path], envs: &[(&str, &Path)]) -> Ran {
    run_cli(args, None, envs)
}

fn cli(args: &[&Path]) -> Ran {
    cli_with(args, &[])
}

fn p(arg: &str) -> &Path {
    Path::new(arg)
}

/// Failed with exit code 1, saying `stderr` and nothing on stdout.
fn refused(stderr: String) -> Ran {
    Ran {
        code: Some(1),
        stdout: String::new(),
        stderr: format!("{stderr}\n"),
    }
}

/// A FIFO, a directory and a socket in `dir`, with what each is.
fn not_files(dir: &Path) -> Vec<(PathBuf, &'static str)> {
    let fifo = dir.join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
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

const RECORD: &str = "{\"seq\":1,\"type\":\"model/output\",\"data\":\"x\"}\n";

fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_fifo_a_directory_and_a_socket_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.jsonl");
    std::fs::write(&good, RECORD).unwrap();
    let empty = script(dir.path(), "empty.json", r#"{"actions": []}"#);
    let out = dir.path().join("out");
    for (path, kind) in not_files(dir.path()) {
        let says = format!("{}: not a regular file ({kind})", path.display());
        assert_eq!(cli(&[p("verify"), &path]), refused(says.clone()));
        assert_eq!(
            cli(&[p("verify"), &path, p("--session"), p("a")]),
            refused(says.clone())
        );
        assert_eq!(
            cli(&[p("view"), &path, p("-o"), &out]),
            refused(format!("coxswain view: {says}"))
        );
        assert_eq!(
            cli(&[p("log"), p("copy"), &path, &out]),
            refused(says.clone())
        );
        assert_eq!(
            cli(&[p("log"), p("copy"), &good, &path]),
            refused(says.clone())
        );
        let run = cli(&[p("run"), &empty, p("--log"), &path]);
        assert_eq!((run.code, run.stderr), (Some(1), format!("{says}\n")));
        assert_eq!(
            cli(&[p("conform"), &path]),
            Ran {
                code: Some(1),
                stdout: format!(
                    "FAIL {}: cannot read trace: {says}\n1 traces, 0 passed, 1 failed\n",
                    path.display()
                ),
                stderr: String::new(),
            }
        );
        assert!(!out.exists());
    }
}

#[test]
fn a_line_past_the_limit_is_refused_naming_the_path_and_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let long = dir.path().join("long.jsonl");
    let mut bytes = format!("{RECORD}{}", RECORD.replace("\"seq\":1", "\"seq\":2")).into_bytes();
    bytes.resize(bytes.len() + MAX_LINE_BYTES + 1, b'a');
    std::fs::write(&long, &bytes).unwrap();
    let says = format!(
        "{}: line 3 is longer than 2097152 bytes (the longest record a session writes)",
        long.display()
    );
    let out = dir.path().join("out");
    let empty = script(dir.path(), "empty.json", r#"{"actions": []}"#);
    assert_eq!(cli(&[p("verify"), &long]), refused(says.clone()));
    assert_eq!(
        cli(&[p("view"), &long, p("-o"), &out]),
        refused(format!("coxswain view: {says}"))
    );
    assert_eq!(
        cli(&[p("log"), p("copy"), &long, &out]),
        refused(says.clone())
    );
    let run = cli(&[p("run"), &empty, p("--log"), &long]);
    assert_eq!((run.code, run.stderr), (Some(1), format!("{says}\n")));
    assert!(std::fs::read(&long).unwrap() == bytes, "left as it was");
    // A line of exactly the limit is read (and judged: it is not JSON).
    bytes.truncate(bytes.len() - 1);
    bytes.push(b'\n');
    std::fs::write(&long, &bytes).unwrap();
    let verify = cli(&[p("verify"), &long]);
    assert_eq!(verify.code, Some(1));
    assert!(
        verify
            .stdout
            .starts_with("line 3: not a record: not JSON: "),
        "{verify:?}"
    );
}

/// The timeline's lines without the `NNN ms` column.
fn timeline(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .map(|line| match line.split_once(" ms  ") {
            Some((ms, rest)) if ms.trim().bytes().all(|b| b.is_ascii_digit()) => {
                rest.trim_start().to_owned()
            }
            _ => line.to_owned(),
        })
        .collect()
}

#[test]
fn a_refused_long_id_is_shown_elided_and_rejected_once() {
    let dir = tempfile::tempdir().unwrap();
    let long_id = "a".repeat(1 << 20);
    let text = format!(
        r#"{{"stepMs": 1, "actions": [
            {{"inject": {{"id": "{long_id}", "content": "x"}}}},
            {{"inject": {{"id": "b", "content": "x"}}}},
            {{"inject": {{"id": "b", "content": "y"}}}}
        ]}}"#
    );
    let script = script(dir.path(), "long-id.json", &text);
    let log = dir.path().join("session.jsonl");
    let run = cli(&[p("run"), &script, p("--log"), &log]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.stdout.len() < 4096, "{} bytes", run.stdout.len());
    let shown = format!("{}… (1048576 bytes)", "a".repeat(64));
    let lines = timeline(&run.stdout);
    for expected in [
        format!("> inject {shown} \"x\""),
        format!(
            "> inject {shown} \"x\": rejected: a message id of 1048576 bytes is above the limit \
             of 256"
        ),
        "> inject b \"y\": rejected: message id `b` is already used by a different message"
            .to_owned(),
        "summary: 0 turns, 0 steps, 0 host events; messages: 1 delivered, 0 claimed, 0 \
         discarded, 1 pending; actions: 2 rejected, 0 skipped"
            .to_owned(),
        format!(
            "     check it again with: cargo run -p coxswain -- verify {}",
            log.display()
        ),
    ] {
        assert!(lines.contains(&expected), "{expected}\nnot in {lines:#?}");
    }
    assert!(!run.stdout.contains("rejected: rejected"));
}

#[test]
fn a_run_without_log_leaves_no_temp_dir_and_a_resumed_log_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let script = script(
        dir.path(),
        "one.json",
        r#"{"stepMs": 1, "actions": [{"followup": {"id": "m1", "content": "hi"}}, {"waitIdle": {}}]}"#,
    );
    let run = cli_with(&[p("run"), &script], &[("TMPDIR", &tmp)]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let lines = timeline(&run.stdout);
    assert_eq!(
        lines.last().map(String::as_str),
        Some("     removed with its temp dir (pass --log PATH to keep it)")
    );
    assert!(lines[0].starts_with(&format!("log: {}/coxswain-run-", tmp.display())));
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    // With --log the log is kept; run again on it, the run says it resumes it.
    let log = dir.path().join("session.jsonl");
    let first = cli(&[p("run"), &script, p("--log"), &log]);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert!(!first.stdout.contains("resuming"));
    let records = std::fs::read_to_string(&log).unwrap().lines().count();
    let second = cli(&[p("run"), &script, p("--log"), &log]);
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    let lines = timeline(&second.stdout);
    assert_eq!(
        lines[..2],
        [
            format!("log: {}", log.display()),
            format!(
                "resuming {}: {records} records already there (S46)",
                log.display()
            )
        ]
    );
    assert!(log.exists());
}
