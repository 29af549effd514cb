//! Every shell command the README and `docs/*.md` show runs as written and succeeds, so none of
//! them can rot. The commands are read from the markdown, so the test and the docs cannot drift:
//! a command added there runs here.
//!
//! Every ```` ```sh ```` block is runnable; a block that cannot run in a test (it publishes,
//! installs into the reader's environment, runs for hours, needs a server of the reader's, or
//! serves until stopped) is marked ```` ```sh no-run ```` with its reason in the text, and
//! [`NO_RUN`] pins the exact list of those commands, so adding one is a visible decision.
//!
//! Each command (a line, or lines joined by a trailing `\`) runs through `sh -c` from the
//! repository root, `cargo` being the one running this test, with two kinds of change only:
//! `/tmp/` becomes a fresh temporary directory (so the test neither reads nor clobbers a reader's
//! files, and parallel runs do not share a log), and the commands in [`SMALLER`], which run for
//! minutes as written, get smaller counts. The commands run in order, file by file (README.md,
//! then `docs/*.md` by name), so `verify` and `view` read the log the `run` before them wrote.
//!
//! Output: a command whose comment says `# prints: TEXT` must end its output with the line
//! `TEXT` (after the same `/tmp/` change), and [`check_output`] holds the checks of what the
//! commands print that no single line states.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Commands that run for minutes as written, and what runs instead: the same command with a
/// smaller count. Each must be a runnable command of the docs (else the docs changed and this
/// must too).
const SMALLER: &[(&str, &str)] = &[
    // ~3 min at the deep bound (longer on a loaded machine): the deep bound with shorter paths.
    (
        "cargo run --release -p coxswain -- check --deep",
        "cargo run --release -p coxswain -- check --deep --messages 3 --operations 3",
    ),
    // All 31 mutants take minutes (`.ci/run` runs them all right after the tests): one, by name.
    (
        "cargo run -p coxswain-mutants",
        "cargo run -p coxswain-mutants -- ClaimForgetsStep",
    ),
    // 300 sessions under a 90 s nemesis (97 s and more): 20 sessions under a 5 s one.
    (
        "COXSWAIN_JEPSEN_SESSIONS=300 COXSWAIN_JEPSEN_SECONDS=90 cargo test -p coxswain-postgres-tests --test jepsen -- --nocapture",
        "COXSWAIN_JEPSEN_SESSIONS=20 COXSWAIN_JEPSEN_SECONDS=5 cargo test -p coxswain-postgres-tests --test jepsen -- --nocapture",
    ),
    // 10,000 sessions take a minute and a half to build and run in release: 400, as the suite.
    (
        "COXSWAIN_FAILOVER_SESSIONS=10000 cargo test --release -p coxswain-postgres-tests --test failover -- --nocapture",
        "COXSWAIN_FAILOVER_SESSIONS=400 cargo test -p coxswain-postgres-tests --test failover -- --nocapture",
    ),
];

/// The commands of the ```` ```sh no-run ```` blocks, by file (each block's text says why).
const NO_RUN: &[(&str, &str)] = &[
    ("README.md", "cargo test --workspace"),
    ("README.md", "cargo bench -p coxswain-benches --bench postgres"),
    (
        "README.md",
        "coxswain load --log postgres://user@host/db --workers 4 --sessions 10000 --senders 1 --seconds 20",
    ),
    (
        "docs/MUTANTS.md",
        "CARGO_TARGET_DIR=$HOME/.cache/coxswain-mutants-target PROPTEST_CASES=32 nice -n 10 cargo mutants -p coxswain-core --profile mutants --test-package coxswain-core --test-package coxswain-tests --baseline=skip --timeout 90 --build-timeout 600 -j 1 --output /tmp/mutants-out -- --lib -- tests:: mutation_gate conformance:: proptests::s5",
    ),
    (
        "docs/node.md",
        "npm --prefix adapters/node ci && npm --prefix adapters/node run build",
    ),
    (
        "docs/node.md",
        "cargo build -p coxswain && npm --prefix adapters/node test",
    ),
    (
        "docs/node.md",
        "coxswain conform --exec \"node adapters/node/port.js\" tests/conformance/*.jsonl",
    ),
    (
        "docs/performance.md",
        "cargo bench -p coxswain-benches && cargo run --release -p coxswain-benches --bin report",
    ),
    (
        "docs/performance.md",
        "cargo bench -p coxswain-benches --bench cycle -- '^cycle/'",
    ),
    (
        "docs/performance.md",
        "cargo bench -p coxswain-benches --bench durable",
    ),
    (
        "docs/performance.md",
        "cargo bench -p coxswain-benches --bench memory",
    ),
    (
        "docs/performance.md",
        "cargo bench -p coxswain-benches --bench hashdos",
    ),
    (
        "docs/performance.md",
        "cargo bench -p coxswain-benches --bench postgres",
    ),
    (
        "docs/performance.md",
        "coxswain load --log postgres://user@host/db --workers 4 --sessions 10000 --senders 1 --seconds 20",
    ),
    (
        "docs/postgres.md",
        "coxswain run examples/quickstart.json --log postgres://user@host/db --session s1",
    ),
    (
        "docs/postgres.md",
        "coxswain verify postgres://user@host/db [--session s1]",
    ),
    ("docs/postgres.md", "coxswain sessions postgres://user@host/db"),
    (
        "docs/postgres.md",
        "coxswain log copy session.jsonl postgres://user@host/db --session s1",
    ),
    ("docs/python.md", "pip install ./adapters/python"),
    ("docs/reliability.md", "cargo install --locked cargo-mutants"),
    (
        "docs/reliability.md",
        "CARGO_TARGET_DIR=$HOME/.cache/coxswain-mutants-target PROPTEST_CASES=32 nice -n 10 cargo mutants -p coxswain-core --profile mutants --test-package coxswain-core --test-package coxswain-tests --baseline=skip --timeout 90 --build-timeout 600 -j 1 --output /tmp/mutants-out -- --lib -- tests:: mutation_gate conformance:: proptests::s5",
    ),
    ("docs/reliability.md", "F=$PWD"),
    (
        "docs/reliability.md",
        "cargo +nightly fuzz run -s none inputs  $F/corpus/inputs -- -runs=10000000 -max_len=3000 -print_final_stats=1",
    ),
    (
        "docs/reliability.md",
        "cargo +nightly fuzz run -s none restore $F/corpus/restore $F/seeds/restore -- -runs=10000000 -dict=$F/json.dict -max_len=8192 -print_final_stats=1",
    ),
    (
        "docs/reliability.md",
        "cargo +nightly fuzz run -s none trace   $F/corpus/trace $F/../tests/conformance -- -runs=10000000 -dict=$F/json.dict -max_len=16384 -print_final_stats=1",
    ),
    (
        "docs/testing.md",
        "cargo install cargo-fuzz; cd fuzz; F=$PWD",
    ),
    (
        "docs/testing.md",
        "cargo +nightly fuzz run -s none inputs  $F/corpus/inputs -- -max_total_time=180 -max_len=3000 -len_control=0",
    ),
    (
        "docs/testing.md",
        "cargo +nightly fuzz run -s none restore $F/corpus/restore $F/seeds/restore -- -max_total_time=180 -dict=$F/json.dict -max_len=8192",
    ),
    (
        "docs/testing.md",
        "cargo +nightly fuzz run -s none trace   $F/corpus/trace $F/../tests/conformance -- -max_total_time=180 -dict=$F/json.dict -max_len=16384",
    ),
    (
        "docs/view.md",
        "cargo run --release -p coxswain -- check --explore localhost:3000",
    ),
];

/// The kinds of output [`check_output`] checks; each must be checked at least once, so a check
/// cannot go quietly dead when the docs drop its command.
const CHECKS: &[&str] = &[
    "run cancel-and-resume",
    "run retry-after-crash",
    "verify",
    "conform",
    "check",
    "load",
    "coxswain-mutants",
    "view",
    "driver-sim",
    "jepsen",
    "failover",
];

/// One command of a ```` ```sh ```` block.
struct Shown {
    /// The markdown file, relative to the repository root.
    file: String,
    /// The command as written: a line, or lines joined at a trailing `\`.
    line: String,
    /// Whether its block is marked `no-run`.
    no_run: bool,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md, then every `docs/*.md` by name.
fn markdown_files() -> Vec<String> {
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    std::iter::once("README.md".to_owned())
        .chain(docs)
        .collect()
}

/// Where the parser of a markdown text is.
enum Fence {
    Outside,
    /// In a ```` ```sh ```` block; `true` if it is marked `no-run`.
    Sh(bool),
    /// In a block of another language (its lines are not commands).
    Other,
}

/// The commands of a markdown text's ```` ```sh ```` blocks, in order.
fn commands(file: &str, text: &str) -> Vec<Shown> {
    let mut shown = Vec::new();
    let mut fence = Fence::Outside;
    let mut pending = String::new();
    for line in text.lines() {
        let info = line.trim_start().strip_prefix("```");
        fence = match (fence, info) {
            (Fence::Outside, Some(info)) => {
                let mut words = info.split_whitespace();
                match words.next() {
                    Some("sh") => {
                        let marks: Vec<&str> = words.collect();
                        assert!(
                            marks.is_empty() || marks == ["no-run"],
                            "{file}: a ```sh block's only mark is `no-run`: {line}"
                        );
                        Fence::Sh(!marks.is_empty())
                    }
                    Some("bash" | "shell" | "console" | "zsh") => {
                        panic!(
                            "{file}: shell commands go in ```sh blocks (run by this test): {line}"
                        )
                    }
                    _ => Fence::Other,
                }
            }
            (Fence::Sh(_), Some(_)) => {
                assert!(pending.is_empty(), "{file}: a block ends after a `\\`");
                Fence::Outside
            }
            (Fence::Other, Some(_)) => Fence::Outside,
            (Fence::Sh(no_run), None) => {
                let part = line.trim();
                if !part.is_empty() && !part.starts_with('#') {
                    match part.strip_suffix('\\') {
                        Some(start) => {
                            pending.push_str(start.trim_end());
                            pending.push(' ');
                        }
                        None => {
                            pending.push_str(part);
                            shown.push(Shown {
                                file: file.to_owned(),
                                line: std::mem::take(&mut pending),
                                no_run,
                            });
                        }
                    }
                }
                Fence::Sh(no_run)
            }
            (fence, None) => fence,
        };
    }
    assert!(
        matches!(fence, Fence::Outside),
        "{file}: a ``` block is not closed"
    );
    shown
}

/// A line without its trailing `# comment`.
fn command(line: &str) -> &str {
    line.split(" #").next().unwrap_or(line).trim()
}

/// The `TEXT` of a trailing `# prints: TEXT` comment.
fn printed(line: &str) -> Option<&str> {
    line.split_once("# prints: ").map(|(_, text)| text.trim())
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

/// What a command's output must show, beyond exit status 0 and its `# prints:` line; the kind
/// of check it got (one of [`CHECKS`]), if any. (stderr counts only for a harness's `SKIPPED`.)
fn check_output(command: &str, stdout: &str, stderr: &str, tmp: &str) -> Option<&'static str> {
    let lines: Vec<&str> = stdout.lines().collect();
    let package = command
        .split_once(" -p ")
        .map(|(_, rest)| rest.split(' ').next().unwrap_or(rest));
    match package {
        Some("coxswain-driver-sim") => return Some(check_simulation(command, stdout)),
        Some("coxswain-mutants") => return Some(check_mutants(command, stdout)),
        Some("coxswain-postgres-tests") => {
            return Some(check_jepsen(command, &format!("{stdout}{stderr}")))
        }
        Some("coxswain") => {}
        _ => return None,
    }
    match subcommand(command) {
        "run" if command.contains("cancel-and-resume.json") => {
            let last =
                format!("log: {tmp}/session.jsonl (46 records) verified: ok (46 events, 6 turns)");
            assert!(lines.contains(&last.as_str()), "{command}:\n{stdout}");
            Some("run cancel-and-resume")
        }
        "run" if command.contains("retry-after-crash.json") => {
            assert!(
                stdout.contains("already delivered (S52): the retry is done, nothing runs twice"),
                "{command}:\n{stdout}"
            );
            Some("run retry-after-crash")
        }
        "verify" => {
            assert_eq!(stdout, "ok (46 events, 6 turns)\n", "{command}");
            Some("verify")
        }
        "conform" if command.contains("tests/conformance/*.jsonl") => {
            let n = corpus_size();
            assert_eq!(
                lines.last().copied(),
                Some(format!("{n} traces, {n} passed, 0 failed").as_str()),
                "{command}"
            );
            Some("conform")
        }
        "check" => {
            check_model_check(command, &lines);
            Some("check")
        }
        "load" => {
            check_load(command, &lines, tmp);
            Some("load")
        }
        "view" => {
            let wrote = format!("wrote {tmp}/session.html (46 records, ");
            assert!(stdout.starts_with(&wrote), "{command}:\n{stdout}");
            let page = std::fs::read_to_string(format!("{tmp}/session.html")).unwrap();
            assert!(page.starts_with("<!doctype html>"), "{command}");
            Some("view")
        }
        _ => None,
    }
}

/// The states the docs state for a bound: the README's plain CI bound and the delivery memory's
/// in docs/verification.md (both also pinned in tests/src/model_check.rs).
const STATED_STATES: &[(&str, usize)] = &[
    ("cargo run --release -p coxswain -- check", 607_722),
    (
        "cargo run --release -p coxswain -- check --memory 2",
        799_444,
    ),
];

/// `coxswain check`: every property passed, the search was exhaustive, and where the docs state
/// the bound's state count, that count.
fn check_model_check(command: &str, lines: &[&str]) {
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("PASS: every invariant holds")),
        "{command}:\n{lines:#?}"
    );
    let explored = lines
        .iter()
        .find(|line| line.starts_with("  explored: "))
        .unwrap_or_else(|| panic!("{command}: no `explored:` line"));
    assert!(explored.ends_with(", exhaustive"), "{command}: {explored}");
    if let Some((_, states)) = STATED_STATES.iter().find(|(stated, _)| *stated == command) {
        let stated = format!("  explored: {states} unique states (");
        assert!(explored.starts_with(&stated), "{command}: {explored}");
    }
}

/// The simulator's totals: nothing lost, nothing phantom, no other violation; for the CI's 5,000
/// seeds, the deliveries docs/reliability.md states.
fn check_simulation(command: &str, stdout: &str) -> &'static str {
    for total in [
        "acknowledged inputs lost: 0",
        "failed inputs found in the log: 0",
        "other violations: 0",
    ] {
        assert!(
            stdout.lines().any(|line| line == total),
            "{command}:\n{stdout}"
        );
    }
    if command.ends_with("--seeds 0-4999") {
        let deliveries = "deliveries: 94175 acknowledged, 42407 failed, 2339 unknown";
        assert!(
            stdout.lines().any(|line| line == deliveries),
            "{command}:\n{stdout}"
        );
    }
    "driver-sim"
}

/// The Jepsen-style test's report: the sessions asked for, no violation. Without the PostgreSQL
/// server binaries the harness prints one `SKIPPED` line instead, which only counts outside CI
/// (with `CI=true` the harness fails, as `.ci/run` installs them).
fn check_jepsen(command: &str, stdout: &str) -> &'static str {
    // The two process tests' reports: their size variable, its default, and how each begins.
    let (name, variable, default, shape) = if command.contains("--test failover") {
        (
            "failover",
            "COXSWAIN_FAILOVER_SESSIONS=",
            "400",
            " sessions on 4 worker processes",
        )
    } else {
        ("jepsen", "COXSWAIN_JEPSEN_SESSIONS=", "100", " sessions, ")
    };
    match stdout
        .lines()
        .find(|line| line.starts_with(&format!("{name}: ")))
    {
        Some(report) => {
            let sessions = command
                .split_once(variable)
                .and_then(|(_, rest)| rest.split(' ').next())
                .unwrap_or(default);
            assert!(
                report.starts_with(&format!("{name}: {sessions}{shape}")),
                "{command}: {report}"
            );
            assert!(report.ends_with("; 0 violations"), "{command}: {report}");
        }
        None => assert!(
            stdout.contains("SKIPPED") && std::env::var("CI").as_deref() != Ok("true"),
            "{command}: no report:\n{stdout}"
        ),
    }
    name
}

/// The mutant runner's verdicts: a named mutant killed, an unchanged core a survivor.
fn check_mutants(command: &str, stdout: &str) -> &'static str {
    if command.ends_with("--self-test") {
        assert!(stdout.contains("Unchanged"), "{command}:\n{stdout}");
        assert!(stdout.contains("SURVIVED"), "{command}:\n{stdout}");
    } else {
        assert!(stdout.contains("ClaimForgetsStep"), "{command}:\n{stdout}");
        assert!(stdout.contains("KILLED"), "{command}:\n{stdout}");
    }
    "coxswain-mutants"
}

/// `coxswain load`'s report, and its log: one record per delivery.
fn check_load(command: &str, lines: &[&str], tmp: &str) {
    assert_eq!(lines.len(), 4, "{command}:\n{lines:?}");
    assert!(
        lines[0].starts_with(
            "1 agents × 64 senders for 5 s (replace workload, max batch 64, a log file each): "
        ),
        "{lines:?}"
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

/// `PATH` with the directory of the `cargo` running this test first.
fn path_with_this_cargo() -> std::ffi::OsString {
    let cargo = PathBuf::from(env!("CARGO"));
    let mut path = cargo
        .parent()
        .map(PathBuf::from)
        .into_iter()
        .collect::<Vec<_>>();
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(path).unwrap()
}

/// Runs one command as written (or its [`SMALLER`] stand-in) from the repository root; its
/// stdout, its stderr, and what ran.
fn run(shown: &Shown, tmp: &str, path: &std::ffi::OsStr) -> (String, String, String) {
    let script = match SMALLER
        .iter()
        .find(|(original, _)| *original == command(&shown.line))
    {
        Some((_, smaller)) => smaller.to_string(),
        None => shown.line.clone(),
    };
    let script = script.replace("/tmp/", &format!("{tmp}/"));
    let start = std::time::Instant::now();
    let output = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(root())
        .env("PATH", path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{}: `{script}` failed ({}):\n{stdout}\n{}",
        shown.file,
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("{:7.1} s  {script}", start.elapsed().as_secs_f64());
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (stdout, stderr, script)
}

#[test]
fn every_shell_command_of_the_readme_and_the_docs_runs_as_written() {
    let shown: Vec<Shown> = markdown_files()
        .iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(root().join(file)).unwrap();
            commands(file, &text)
        })
        .collect();
    let runnable: Vec<&str> = shown
        .iter()
        .filter(|shown| !shown.no_run)
        .map(|shown| command(&shown.line))
        .collect();
    for (original, _) in SMALLER {
        assert!(
            runnable.contains(original),
            "`{original}` is no longer a runnable command of the docs: update SMALLER in tests/readme.rs"
        );
    }
    let no_run: Vec<(&str, &str)> = shown
        .iter()
        .filter(|shown| shown.no_run)
        .map(|shown| (shown.file.as_str(), command(&shown.line)))
        .collect();
    assert_eq!(
        no_run, NO_RUN,
        "the no-run commands changed: a command the test cannot run is a decision (update NO_RUN)"
    );
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().to_str().unwrap().to_owned();
    let path = path_with_this_cargo();
    let mut checked = Vec::new();
    let mut ran: Vec<(String, String)> = Vec::new();
    let total = std::time::Instant::now();
    for shown in shown.iter().filter(|shown| !shown.no_run) {
        let (stdout, stderr, script) = run(shown, &tmp, &path);
        if let Some(text) = printed(&shown.line) {
            let text = text.replace("/tmp/", &format!("{tmp}/"));
            assert_eq!(
                stdout.lines().last(),
                Some(text.as_str()),
                "{}: `{script}` must end by printing `{text}`:\n{stdout}",
                shown.file
            );
        }
        checked.extend(check_output(command(&script), &stdout, &stderr, &tmp));
        ran.push((shown.file.clone(), script.replace(&tmp, "/tmp")));
    }
    for check in CHECKS {
        assert!(
            checked.contains(check),
            "no command of the docs got the `{check}` check: a command it checked is gone"
        );
    }
    let mut file = "";
    println!(
        "ran {} commands in {:.0} s:",
        ran.len(),
        total.elapsed().as_secs_f64()
    );
    for (in_file, script) in &ran {
        if in_file != file {
            println!("{in_file}:");
            file = in_file;
        }
        println!("  {script}");
    }
}

#[test]
fn the_block_reader_joins_continuations_and_keeps_the_no_run_mark() {
    let text = "prose `cargo x`\n\n```sh\n# a comment line\ncargo a \\\n  --flag   # prints: done\n\ncargo b\n```\n\n```rust\nlet x = 1;\n```\n\n```sh no-run\ncargo c\n```\n";
    let shown = commands("docs/x.md", text);
    let read: Vec<(&str, bool)> = shown
        .iter()
        .map(|shown| (shown.line.as_str(), shown.no_run))
        .collect();
    assert_eq!(
        read,
        [
            ("cargo a --flag   # prints: done", false),
            ("cargo b", false),
            ("cargo c", true)
        ]
    );
    assert_eq!(command(&shown[0].line), "cargo a --flag");
    assert_eq!(printed(&shown[0].line), Some("done"));
    assert_eq!(printed(&shown[1].line), None);
}

#[test]
#[should_panic(expected = "a ```sh block's only mark is `no-run`")]
fn an_unknown_mark_on_a_sh_block_is_refused() {
    commands("docs/x.md", "```sh skip\ncargo a\n```\n");
}
