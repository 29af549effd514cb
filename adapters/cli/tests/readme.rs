//! Every command of the README's "Other things to try" block runs as written and succeeds, so
//! none of them can rot. The block is read from README.md, so the test and the README cannot
//! drift: a command added there runs here.
//!
//! Each line runs through `sh -c` from the repository root, `cargo` being the one running this
//! test, with two kinds of change only: `/tmp/` becomes a fresh temporary directory (so the test
//! neither reads nor clobbers a reader's files, and parallel runs do not share a log), and the
//! commands in [`SMALLER`], which run for minutes as written, get smaller counts. The Explorer
//! (`check --explore`) serves until stopped and is left out (the browser tests drive it). The
//! commands run in order, so `verify` and `view` read the log the first `run` wrote.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Commands that run for minutes as written, and what runs instead: the same command with a
/// smaller count. Each must be a command of the block (else the README changed and this must too).
const SMALLER: &[(&str, &str)] = &[
    // ~3 min at the deep bound (longer on a loaded machine): the deep bound with shorter paths.
    (
        "cargo run --release -p coxswain -- check --deep",
        "cargo run --release -p coxswain -- check --deep --messages 3 --operations 3",
    ),
    // All 22 mutants take minutes (107 s with a warm build, over 5 min cold; `.ci/run` runs
    // them all right after the tests): one, by name.
    (
        "cargo run -p coxswain-mutants",
        "cargo run -p coxswain-mutants -- ClaimForgetsStep",
    ),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The lines of the ```sh block after "Other things to try:".
fn block(readme: &str) -> Vec<String> {
    let (_, rest) = readme
        .split_once("Other things to try:")
        .expect("README.md has an \"Other things to try:\" paragraph");
    let (_, rest) = rest
        .split_once("```sh\n")
        .expect("a ```sh block follows it");
    let (block, _) = rest.split_once("```").expect("the block ends");
    block
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

/// A line without its trailing `# comment`.
fn command(line: &str) -> &str {
    line.split(" #").next().unwrap_or(line).trim()
}

/// The subcommand a line runs (`run`, `check`, …, or the package for `cargo run -p other`).
fn subcommand(command: &str) -> &str {
    match command.split_once(" -- ") {
        Some((_, args)) => args.split(' ').next().unwrap_or(args),
        None => command.rsplit(' ').next().unwrap_or(command),
    }
}

/// The number of `.jsonl` traces in the conformance corpus.
fn corpus_size() -> usize {
    std::fs::read_dir(root().join("tests/conformance"))
        .unwrap()
        .filter(|entry| {
            entry
                .as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|ext| ext == "jsonl")
        })
        .count()
}

/// What a command's output must show, beyond exit status 0.
fn check_output(command: &str, stdout: &str, tmp: &str) {
    let lines: Vec<&str> = stdout.lines().collect();
    match subcommand(command) {
        "run" if command.contains("cancel-and-resume.json") => {
            let last =
                format!("log: {tmp}/session.jsonl (46 records) verified: ok (46 events, 6 turns)");
            assert!(lines.contains(&last.as_str()), "{command}:\n{stdout}");
        }
        "run" if command.contains("retry-after-crash.json") => {
            assert!(
                stdout.contains("already delivered (S52): the retry is done, nothing runs twice"),
                "{command}:\n{stdout}"
            );
        }
        "verify" => assert_eq!(stdout, "ok (46 events, 6 turns)\n", "{command}"),
        "conform" => {
            let n = corpus_size();
            assert_eq!(
                lines.last().copied(),
                Some(format!("{n} traces, {n} passed, 0 failed").as_str()),
                "{command}"
            );
        }
        "check" => assert!(
            lines
                .iter()
                .any(|line| line.starts_with("PASS: every invariant holds")),
            "{command}:\n{stdout}"
        ),
        "load" => {
            assert_eq!(lines.len(), 4, "{command}:\n{stdout}");
            assert!(
                lines[0].starts_with(
                    "1 agents × 64 senders for 5 s (replace workload, max batch 64, a log file \
                     each): "
                ),
                "{stdout}"
            );
            let log = std::fs::read(format!("{tmp}/load/agent-0.jsonl")).unwrap();
            let deliveries = lines[0]
                .split(": ")
                .nth(1)
                .and_then(|rest| rest.split(' ').next())
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap();
            assert_eq!(log.iter().filter(|&&b| b == b'\n').count(), deliveries);
        }
        "coxswain-mutants" => {
            assert!(stdout.contains("ClaimForgetsStep"), "{command}:\n{stdout}")
        }
        "view" => {
            let wrote = format!("wrote {tmp}/session.html (46 records, ");
            assert!(stdout.starts_with(&wrote), "{command}:\n{stdout}");
            let page = std::fs::read_to_string(format!("{tmp}/session.html")).unwrap();
            assert!(page.starts_with("<!doctype html>"), "{command}");
        }
        _ => {}
    }
}

#[test]
fn every_command_of_other_things_to_try_runs_as_written() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = block(&readme);
    let commands: Vec<&str> = lines.iter().map(|line| command(line)).collect();
    for (original, _) in SMALLER {
        assert!(
            commands.contains(original),
            "`{original}` is no longer in the block: update SMALLER in tests/readme.rs"
        );
    }
    let skipped: Vec<&&str> = commands
        .iter()
        .filter(|c| c.contains("--explore"))
        .collect();
    assert_eq!(skipped.len(), 1, "one Explorer line: {skipped:?}");
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().to_str().unwrap().to_owned();
    // `cargo` is the one running this test.
    let cargo = PathBuf::from(env!("CARGO"));
    let mut path = cargo
        .parent()
        .map(PathBuf::from)
        .into_iter()
        .collect::<Vec<_>>();
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let path = std::env::join_paths(path).unwrap();
    let mut ran = Vec::new();
    for (line, command) in lines.iter().zip(&commands) {
        if command.contains("--explore") {
            continue;
        }
        let script = match SMALLER.iter().find(|(original, _)| original == command) {
            Some((_, smaller)) => smaller.to_string(),
            None => line.clone(),
        };
        let script = script.replace("/tmp/", &format!("{tmp}/"));
        let start = std::time::Instant::now();
        let output = Command::new("sh")
            .arg("-c")
            .arg(&script)
            .current_dir(root())
            .env("PATH", &path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "`{script}` failed ({}):\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        eprintln!("{:7.1} s  {script}", start.elapsed().as_secs_f64());
        check_output(command, &stdout, &tmp);
        ran.push(subcommand(command).to_owned());
    }
    assert_eq!(
        ran,
        [
            "run",
            "run",
            "verify",
            "conform",
            "check",
            "check",
            "check",
            "load",
            "coxswain-mutants",
            "view"
        ],
        "the block's commands changed: check that tests/readme.rs checks what they print"
    );
}
