//! `coxswain load` as the README runs it: its exact flags (read from the README's "Other things
//! to try" block) with a shorter `--seconds`, and runs far past a list's `max_pending`, which a
//! load of injects alone failed at (`the next-step list is full (10000 items pending)`).

use std::path::Path;
use std::process::{Command, Output};

fn coxswain(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_coxswain"))
        .args(args)
        .output()
        .unwrap()
}

/// The arguments after `--` of the README's `coxswain load` line.
fn readme_load_args() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let (_, block) = readme.split_once("Other things to try:").unwrap();
    let line = block
        .lines()
        .find(|line| line.contains(" -- load "))
        .expect("a load line in the block");
    let command = line.split(" #").next().unwrap();
    let (cargo, args) = command.split_once(" -- ").unwrap();
    assert_eq!(cargo, "cargo run --release -p coxswain");
    args.split_whitespace().map(str::to_owned).collect()
}

/// `N` of the first line's `…: N deliveries in T s`.
fn deliveries(first: &str) -> u64 {
    let (_, rest) = first.rsplit_once("): ").unwrap();
    rest.split(' ').next().unwrap().parse().unwrap()
}

fn verify(log: &Path) -> String {
    let output = coxswain(&["verify", log.to_str().unwrap()]);
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn the_readme_load_command_runs_with_its_flags_and_defaults() {
    let args = readme_load_args();
    assert_eq!(
        args,
        [
            "load",
            "--log",
            "/tmp/load",
            "--agents",
            "1",
            "--senders",
            "64"
        ],
        "the README's load command changed: keep this test's expectations in step"
    );
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("load");
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args[2] = log.to_str().unwrap();
    // The same flags and defaults, for 1 s instead of the default 5.
    args.extend(["--seconds", "1"]);
    let output = coxswain(&args);
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // No terminal: no progress bar.
    assert_eq!(String::from_utf8(output.stderr).unwrap(), "");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert!(
        lines[0].starts_with(
            "1 agents × 64 senders for 1 s (replace workload, max batch 64, a log file each): "
        ),
        "{stdout}"
    );
    assert!(lines[1].starts_with("  ") && lines[1].contains(" deliveries/s; acknowledged in p50 "));
    assert!(lines[2].contains(" syncs (") && lines[2].contains(" deliveries per sync), "));
    assert!(lines[3]
        .starts_with("  floor (the same record size, one write + fdatasync per 64 records, "));
    let n = deliveries(lines[0]);
    assert!(n >= 64, "{stdout}");
    // One record per delivery, no turn; the floor's file is gone.
    assert_eq!(
        verify(&log.join("agent-0.jsonl")),
        format!("ok ({n} events, 0 turns)\n")
    );
    assert!(!log.join("floor.bin").exists());
}

#[test]
fn a_load_far_past_max_pending_runs() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().to_str().unwrap();
    // 64 × 200 = 12,800 deliveries to one agent, above the 10,000 a list holds.
    let output = coxswain(&[
        "load",
        "--log",
        log,
        "--senders",
        "64",
        "--messages",
        "200",
        "--json",
    ]);
    assert!(output.status.success(), "{output:?}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["deliveries"], 12_800);
    assert_eq!(report["messages"], 200);
    assert_eq!(report["seconds"], serde_json::Value::Null);
    assert_eq!(report["workload"], "replace");
    assert_eq!(
        verify(&dir.path().join("agent-0.jsonl")),
        "ok (12800 events, 0 turns)\n"
    );
}

#[test]
fn bad_lengths_and_too_many_senders_are_refused_with_exit_2() {
    for (args, message) in [
        (
            &["--senders", "10001"][..],
            "coxswain load: --senders must be within 1..=10000 (each sender keeps one message \
             pending)\n",
        ),
        (
            &["--seconds", "0"][..],
            "coxswain load: --seconds must be above 0 and at most 86400\n",
        ),
        (
            &["--messages", "0"][..],
            "coxswain load: --agents, --senders and --messages must be at least 1\n",
        ),
    ] {
        let mut all = vec!["load", "--log", "/nonexistent/never-made"];
        all.extend_from_slice(args);
        let output = coxswain(&all);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert_eq!(String::from_utf8(output.stderr).unwrap(), message);
        assert!(output.stdout.is_empty());
    }
}
