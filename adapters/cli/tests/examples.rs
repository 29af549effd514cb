//! Every example runs twice and prints the same timeline (timestamps aside), and says what its
//! note says; a resumed run's timeline shows every record the log got.

use std::path::{Path, PathBuf};
use std::process::Command;

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// Runs `coxswain run SCRIPT --log LOG`; returns its stdout with the `NNN ms` column cut off
/// and the log's path written `LOG`.
fn run(script: &Path, log: &Path) -> Vec<String> {
    let output = Command::new(env!("CARGO_BIN_EXE_coxswain"))
        .arg("run")
        .arg(script)
        .arg("--log")
        .arg(log)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{}: {stderr}", script.display());
    let stdout = String::from_utf8(output.stdout).unwrap();
    let log = log.display().to_string();
    stdout
        .lines()
        .map(|line| {
            let line = line.replace(&log, "LOG");
            match line.split_once(" ms  ") {
                Some((ms, rest)) if ms.trim().bytes().all(|b| b.is_ascii_digit()) => {
                    rest.to_owned()
                }
                _ => line,
            }
        })
        .collect()
}

/// The timeline's record lines (`#SEQ …`), by their seq.
fn record_seqs(lines: &[String]) -> Vec<u64> {
    lines
        .iter()
        .filter_map(|line| line.strip_prefix('#'))
        .map(|rest| rest.split(' ').next().unwrap().parse().unwrap())
        .collect()
}

fn log_lines(log: &Path) -> u64 {
    std::fs::read_to_string(log).unwrap().lines().count() as u64
}

/// What each example's note claims, as exact lines that must appear in this order.
fn claims(example: &str) -> &'static [&'static str] {
    match example {
        "quickstart.json" => &[
            "#4      step 1.1 starts",
            "      > followup m2 \"Then summarise the parser in three bullets\"",
            "#7          tool/call {\"args\":\"parse_config\",\"name\":\"grep\"}",
            "      > steer s1 \"Only look under src/\"",
            "#8    inbox next-step @0 + s1 (waking) \"Only look under src/\"",
            "#9          tool/result {\"matches\":1}",
            "        host > inject t1 \"src/config.rs:42: pub fn parse_config(text: &str)\"",
            "        host answers step 1.1: continue (tools ran)",
            "#13     step 1.2 starts",
            "#14       user/message s1 \"Only look under src/\"",
            "#15       user/message t1 \"src/config.rs:42: pub fn parse_config(text: &str)\"",
            "#18   turn 1 ends: completed",
            "      claimed m2 by turn 2",
            "#21     step 2.1 starts",
            "      > steer s2 \"Continue where you stopped\"",
            "        host answers step 2.1: max-tokens",
            "      claimed s2 by turn 2",
            "#27     step 2.2 starts",
            "#28       user/message s2 \"Continue where you stopped\"",
            "#31   turn 2 ends: max-tokens",
            "summary: 2 turns (1 completed, 1 max-tokens), 4 steps, 5 host events; messages: \
             5 delivered, 5 claimed, 0 discarded, 0 pending; actions: 0 rejected, 0 skipped",
            "log: LOG (31 records) verified: ok (31 events, 2 turns)",
        ],
        "retry-after-crash.json" => &[
            "#5        user/message m1 \"Summarise the open issues\"",
            "#9    turn 1 ends: interrupted (crash repair)",
            "      > followup m1 \"Summarise the open issues\": already delivered (S52): the retry is \
             done, nothing runs twice",
            "      > followup m2 \"Then draft the release notes\": still pending (S13): the retry \
             is done, nothing runs twice",
            "#11   turn 2 starts",
            "      claimed s1 by turn 2",
            "      claimed m2 by turn 2",
            "#18   turn 2 ends: completed",
            "summary: 2 turns (1 completed, 1 interrupted), 2 steps, 1 host events; messages: \
             3 delivered, 3 claimed, 0 discarded, 0 pending; actions: 0 rejected, 0 skipped",
            "log: LOG (18 records) verified: ok (18 events, 2 turns)",
        ],
        "cancel-and-resume.json" => &[
            "#7    inbox next-turn @0 + m2 (waking) \"Then update the docs\"",
            "      > cancel (user), keep inbox",
            "      > steer s1 \"Actually, rename it to `syntax` first\"",
            "#8    inbox next-turn @1 + s1 (waking) \"Actually, rename it to `syntax` first\"",
            "        host answers step 1.1: completed (saw the abort)",
            "#10   turn 1 ends: aborted (user)",
            "      claimed m2 by turn 2",
            "#16   turn 2 ends: completed",
            "      claimed s1 by turn 3",
            "      > maintenance job of 300 ms",
            "      > followup m3 \"Run the tests\"",
            "#23   inbox next-turn @0 + m3 (waking) \"Run the tests\"",
            "#24   turn 4 starts",
            "      maintenance job done",
            "#29   inbox next-turn @0 + m4 (waking) \"And commit\"",
            "      > reopen: close the agent, then open it again from its log",
            "      agent closed",
            "      resumed from the log: 29 records, last turn 4; turn 4 closed `interrupted` \
             (2 closers); parked: 1 next-turn, 0 next-step",
            "#30     step 4.1 ends",
            "#31   turn 4 ends: interrupted (crash repair)",
            "      > followup m5 \"Where were we?\"",
            "#33   turn 5 starts",
            "      claimed m4 by turn 5",
            "      claimed m5 by turn 6",
            "#44   turn 6 ends: completed",
            "#45   inbox next-step @0 + c1 \"It is 17:05\"",
            "      > dispose",
            "      discarded c1",
            "      agent disposed",
            "summary: 6 turns (1 aborted, 4 completed, 1 interrupted), 6 steps, 2 host events; \
             messages: 7 delivered, 6 claimed, 1 discarded, 0 pending; actions: 0 rejected, \
             0 skipped",
            "log: LOG (46 records) verified: ok (46 events, 6 turns)",
        ],
        other => panic!("examples/{other} has no claims pinned in tests/examples.rs"),
    }
}

#[test]
fn every_example_prints_the_same_timeline_twice_and_what_its_note_says() {
    let mut examples: Vec<PathBuf> = std::fs::read_dir(examples_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    examples.sort();
    let names: Vec<String> = examples
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "cancel-and-resume.json",
            "quickstart.json",
            "retry-after-crash.json"
        ]
    );
    for (example, name) in examples.iter().zip(&names) {
        let dir = tempfile::tempdir().unwrap();
        let first = run(example, &dir.path().join("first.jsonl"));
        let second = run(example, &dir.path().join("second.jsonl"));
        assert_eq!(first, second, "{name}: two runs differ");
        let mut rest = first.iter();
        for claim in claims(name) {
            assert!(
                rest.any(|line| line == claim),
                "{name}: `{claim}` is not in the timeline (in this order):\n{}",
                first.join("\n")
            );
        }
        let seqs = record_seqs(&first);
        let appended = log_lines(&dir.path().join("first.jsonl"));
        assert_eq!(seqs, (1..=appended).collect::<Vec<_>>(), "{name}");
    }
}

/// A resume of a log that ends inside a turn: crash repair's closers are appended while the agent
/// opens, before anyone can subscribe to its updates; the timeline reads them back from the log.
#[test]
fn a_resumed_run_prints_every_record_the_log_got() {
    let dir = tempfile::tempdir().unwrap();
    let quickstart = examples_dir().join("quickstart.json");
    let full = dir.path().join("full.jsonl");
    run(&quickstart, &full);
    // The first 10 records: turn 1 is open, in step 1.1, as after a crash.
    let text = std::fs::read_to_string(&full).unwrap();
    let cut: String = text
        .lines()
        .take(10)
        .map(|line| format!("{line}\n"))
        .collect();
    let log = dir.path().join("resumed.jsonl");
    std::fs::write(&log, cut).unwrap();
    let lines = run(&quickstart, &log);
    let seqs = record_seqs(&lines);
    assert_eq!(seqs, (11..=log_lines(&log)).collect::<Vec<_>>());
    // The run says first that it resumes a log (issue 49: a fixed path is resumed, not replaced).
    let expected = [
        "log: LOG",
        "resuming LOG: 10 records already there (S46)",
        "",
        "      resumed from the log: 10 records, last turn 1; turn 1 closed `interrupted` \
         (2 closers); parked: 1 next-turn, 2 next-step",
        "#11     step 1.1 ends",
        "#12   turn 1 ends: interrupted (crash repair)",
    ];
    assert_eq!(lines[1..7], expected);
    let skipped: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("      > skipped"))
        .collect();
    // The script's first action re-sends m1, which turn 1 had claimed: the delivery memory
    // (S52) refuses the retry, so nothing wakes and the later cues cannot happen.
    assert!(lines.contains(
        &"      > followup m1 \"Find where the config file is parsed\": already delivered (S52): \
          the retry is done, nothing runs twice"
            .to_owned()
    ));
    assert_eq!(
        skipped,
        [
            "      > skipped: `step 1.1 starts` did not happen, and cannot now",
            "      > skipped: `tool/call in step 1.1` did not happen, and cannot now",
            "      > skipped: `step 2.1 starts` did not happen, and cannot now",
        ]
    );
    assert!(lines.contains(
        &"summary: 1 turns (1 interrupted), 0 steps, 0 host events; messages: 0 delivered, \
          0 claimed, 0 discarded, 3 pending; actions: 0 rejected, 3 skipped"
            .to_owned()
    ));
}
