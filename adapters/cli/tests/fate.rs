//! `coxswain fate LOG ID` (S58): the exact line it prints for each id of a fixture log that
//! crashed inside a turn (answered as crash repair would leave it, S50; with `--redelivery 1`
//! as S59's repair would), an unknown id, a forgetful memory, a segment log's session; the log
//! is never written; bad paths, a corrupt log and a refused allowance fail naming what was
//! wrong.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/run.rs"]
mod run;
use run::{run_cli, Ran};

/// Turn 1 ran step 1 with follow-up `m1`; steer `s1` and follow-up `m2` arrived during it; the
/// step answered `continue`, the boundary claimed `s1` for step 2, and the process died while
/// that pre-step request was outstanding (no model call saw `s1`). `m2` waits in NT.
const FIXTURE: &str = "tests/fixtures/fate/crashed-before-step-2.jsonl";

/// Runs the CLI with `args` in the crate's folder; fails if it has not exited within 20 s.
fn cli(args: &[&str]) -> Ran {
    run_cli(args, Some(Path::new(env!("CARGO_MANIFEST_DIR"))), &[])
}

fn answered(line: &str) -> Ran {
    Ran {
        code: Some(0),
        stdout: format!("{line}\n"),
        stderr: String::new(),
    }
}

fn refused(code: i32, stderr: &str) -> Ran {
    Ran {
        code: Some(code),
        stdout: String::new(),
        stderr: format!("{stderr}\n"),
    }
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE)
}

/// S58 on a log that ends inside turn 1, read as repair leaves it (S50: the turn closed
/// `interrupted`): `m1` was carried by step 1, `s1` claimed by no step, `m2` pending; an id
/// the log never saw is `"unknown"` (exit 0). The JSON is `Fate::to_json`'s. Nothing written.
#[test]
fn s58_fate_prints_each_ids_fate_as_repair_leaves_the_log() {
    let before = std::fs::read(fixture()).unwrap();
    let m1 = r#"{"claimed":{"end":"interrupted","step":1,"turn":1}}"#;
    assert_eq!(cli(&["fate", FIXTURE, "m1"]), answered(m1));
    let s1 = r#"{"claimed":{"end":"interrupted","turn":1}}"#;
    assert_eq!(cli(&["fate", FIXTURE, "s1"]), answered(s1));
    let m2 = r#"{"pending":"next-turn"}"#;
    assert_eq!(cli(&["fate", FIXTURE, "m2"]), answered(m2));
    assert_eq!(
        cli(&["fate", FIXTURE, "never-sent"]),
        answered(r#""unknown""#)
    );
    // S59: with repair's allowance 1, the claimed-unseen steer is pending again; the seen
    // follow-up is not redelivered.
    let redelivered = cli(&["fate", FIXTURE, "s1", "--redelivery", "1"]);
    assert_eq!(redelivered, answered(r#"{"pending":"next-step"}"#));
    assert_eq!(
        cli(&["fate", FIXTURE, "m1", "--redelivery", "1"]),
        answered(m1)
    );
    // A memory of 0 mirrors an agent that holds no id (S51): what left the lists is unknown.
    let forgetful = cli(&["fate", FIXTURE, "m1", "--memory", "0"]);
    assert_eq!(forgetful, answered(r#""unknown""#));
    assert_eq!(
        std::fs::read(fixture()).unwrap(),
        before,
        "the log was written"
    );
}

/// A shared segment log: one session's records, named with `--session`.
#[test]
fn a_segment_log_is_answered_per_session() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segment.jsonl");
    let text = std::fs::read_to_string(fixture()).unwrap();
    let segment: String = text
        .lines()
        .map(|line| line.replacen(r#""type""#, r#""session":"a","type""#, 1) + "\n")
        .collect();
    std::fs::write(&path, segment).unwrap();
    let shown = path.display().to_string();
    let m2 = r#"{"pending":"next-turn"}"#;
    let args = ["fate", shown.as_str(), "m2", "--session", "a"];
    assert_eq!(cli(&args), answered(m2));
    let missing = cli(&["fate", shown.as_str(), "m2", "--session", "b"]);
    let message = format!("{shown}: no session `b` in this segment log");
    assert_eq!(missing, refused(1, &message));
    let unnamed = cli(&["fate", shown.as_str(), "m2"]);
    let message = format!("{shown}: a shared segment log: name the session with --session ID");
    assert_eq!(unnamed, refused(1, &message));
    let plain = cli(&["fate", FIXTURE, "m2", "--session", "a"]);
    let message =
        format!("{FIXTURE}: not a segment log, so it holds no session `a`: drop --session");
    assert_eq!(plain, refused(1, &message));
}

/// Bad input fails naming the path (the CLI's `logfile` errors), never hangs on a FIFO, and a
/// corrupt log names its line; an allowance above 1000 is refused before any log is read.
#[test]
fn bad_input_is_refused_naming_what_was_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.jsonl");
    let shown = missing.display().to_string();
    let message = format!("cannot read {shown}: No such file or directory (os error 2)");
    assert_eq!(cli(&["fate", shown.as_str(), "m1"]), refused(1, &message));
    let folder = dir.path().display().to_string();
    let message = format!("{folder}: not a regular file (a directory)");
    assert_eq!(cli(&["fate", folder.as_str(), "m1"]), refused(1, &message));
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let shown = fifo.display().to_string();
    let message = format!("{shown}: not a regular file (a FIFO)");
    assert_eq!(cli(&["fate", shown.as_str(), "m1"]), refused(1, &message));
    let corrupt = dir.path().join("corrupt.jsonl");
    std::fs::write(&corrupt, "not json\n").unwrap();
    let shown = corrupt.display().to_string();
    let message = format!(
        "{shown}: cannot restore the log: line 1: not JSON: expected ident at line 1 column 2"
    );
    assert_eq!(cli(&["fate", shown.as_str(), "m1"]), refused(1, &message));
    // S59's bound, the session layer's text, before the (missing) log is looked at.
    let too_large = cli(&["fate", "missing.jsonl", "m1", "--redelivery", "1001"]);
    assert_eq!(too_large.code, Some(2));
    assert!(
        too_large.stderr.starts_with(
            "error: invalid value '1001' for '--redelivery <N>': the redelivery allowance \
             1001 is above 1000 (S59)\n"
        ),
        "{}",
        too_large.stderr
    );
    let negative = cli(&["fate", "missing.jsonl", "m1", "--redelivery=-1"]);
    assert_eq!(negative.code, Some(2));
    assert!(
        negative.stderr.starts_with(
            "error: invalid value '-1' for '--redelivery <N>': `-1` is not a whole number \
             from 0 to 1000\n"
        ),
        "{}",
        negative.stderr
    );
}

/// `coxswain run --redelivery 1 --resume-on-open` on the crashed fixture: repair puts the
/// claimed-unseen steer back (S59), the run says so, and `resume` (S57) runs it (with the parked
/// follow-up) as turn 2 without any send; `fate` then reads that from the log. Without the flags
/// S50 and S48 are unchanged: the steer stays claimed by the interrupted turn, nothing runs.
#[test]
fn run_redelivers_and_resumes_on_open_with_its_flags() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, r#"{"stepMs": 1, "actions": []}"#).unwrap();
    let script = script.display().to_string();
    let (with, without) = (
        dir.path().join("with.jsonl"),
        dir.path().join("without.jsonl"),
    );
    std::fs::copy(fixture(), &with).unwrap();
    std::fs::copy(fixture(), &without).unwrap();
    let (with, without) = (with.display().to_string(), without.display().to_string());
    let args = ["run", script.as_str(), "--log", with.as_str()];
    let ran = cli(&[&args[..], &["--redelivery", "1", "--resume-on-open"]].concat());
    assert_eq!(
        (ran.code, ran.stderr.as_str()),
        (Some(0), ""),
        "{}",
        ran.stdout
    );
    let said = "resumed from the log: 9 records, last turn 1; turn 1 closed `interrupted` (1 \
                closers); 1 claimed unseen, redelivered (S59); parked: 1 next-turn, 1 next-step";
    assert!(ran.stdout.contains(said), "{}", ran.stdout);
    assert!(ran.stdout.contains("> resume (S57): start the parked work"));
    let verified = format!("log: {with} (19 records) verified: ok (19 events, 2 turns)");
    assert!(ran.stdout.contains(&verified), "{}", ran.stdout);
    let completed = r#"{"claimed":{"end":"completed","step":1,"turn":2}}"#;
    assert_eq!(cli(&["fate", with.as_str(), "s1"]), answered(completed));
    assert_eq!(cli(&["fate", with.as_str(), "m2"]), answered(completed));

    let ran = cli(&["run", script.as_str(), "--log", without.as_str()]);
    assert_eq!(ran.code, Some(0), "{}", ran.stdout);
    let said = "resumed from the log: 9 records, last turn 1; turn 1 closed `interrupted` (1 \
                closers); parked: 1 next-turn, 0 next-step";
    assert!(ran.stdout.contains(said), "{}", ran.stdout);
    assert!(!ran.stdout.contains("> resume"), "{}", ran.stdout);
    let interrupted = r#"{"claimed":{"end":"interrupted","turn":1}}"#;
    assert_eq!(
        cli(&["fate", without.as_str(), "s1"]),
        answered(interrupted)
    );
    let pending = r#"{"pending":"next-turn"}"#;
    assert_eq!(cli(&["fate", without.as_str(), "m2"]), answered(pending));

    // S59's bound, refused before the log is opened: the log is unchanged.
    let before = std::fs::read(fixture()).unwrap();
    std::fs::write(&without, &before).unwrap();
    let refused = cli(&[
        &args[..2],
        &["--log", without.as_str(), "--redelivery", "1001"],
    ]
    .concat());
    assert_eq!(refused.code, Some(2));
    assert!(refused
        .stderr
        .contains("the redelivery allowance 1001 is above 1000 (S59)"));
    assert_eq!(std::fs::read(&without).unwrap(), before);
}
