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
//! repository root with a `PATH` of the directory of the `cargo` running this test and the
//! system's `/usr/local/bin:/usr/bin:/bin` only, on which no `coxswain` may be found: the docs
//! run the CLI as `cargo run -p coxswain -- …`, and a bare `coxswain …` (which a reader has only
//! after `cargo install`) fails here, in a runnable block, and in any block at all through
//! [`no_command_of_the_docs_starts_with_a_bare_coxswain`]. Two kinds of change only:
//! `/tmp/` becomes a fresh temporary directory (so the test neither reads nor clobbers a reader's
//! files, and parallel runs do not share a log), and the commands in [`SMALLER`], which run for
//! minutes as written, get smaller counts. The commands run in order, file by file (README.md,
//! then `docs/*.md` by name), so `verify` and `view` read the log the `run` before them wrote;
//! the self-contained [`cpu_bound`] ones (model checks, mutants, the simulator) run in order in a
//! test of their own, at the same time as the others.
//! The ignored test [`exhaustive_the_docs_long_commands_run_as_written`] runs each command of
//! [`SMALLER`] but the [`LONG`] ones as written instead, with the full checks (`cargo test
//! --workspace --tests -- --ignored exhaustive`, which `.ci/run` runs, runs it).
//!
//! Output: a command whose comment says `# prints: TEXT` must end its output with the line
//! `TEXT` (after the same `/tmp/` change), and [`check_output`] holds the checks of what the
//! commands print that no single line states.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Commands that run for minutes as written, or build in release (a cold release build of the
/// CLI is minutes on 2 cores), and what runs instead: the same command on the dev profile (the
/// core, the checker and the spec are optimised there too), with a smaller count where it runs
/// long. Each must be a runnable command of the docs (else the docs changed and this must too).
/// The ignored [`exhaustive_the_docs_long_commands_run_as_written`] runs them as written, but for
/// the [`LONG`] ones, which no test runs as written (CI never did: they take minutes each).
const SMALLER: &[(&str, &str)] = &[
    // The CI bound (829,886 states) takes minutes: the same checker on 3 ids and 4 operations
    // (92,419 states, every property holds and every situation is reached, exhaustive; the
    // stated count is the ignored test's). At 2 operations some situations are never reached.
    (
        "cargo run --release -p coxswain -- check",
        "cargo run -p coxswain -- check --messages 3 --operations 4",
    ),
    // 5 s of load and 5 s of its floor: the same on the dev profile (the output's shape is what
    // the test checks; the figures are the release build's, docs/performance.md).
    (
        "cargo run --release -p coxswain -- load --log /tmp/load --agents 1 --senders 64",
        "cargo run -p coxswain -- load --log /tmp/load --agents 1 --senders 64",
    ),
    // The CI bound with a delivery memory (1,001,734 states): 3 ids and 4 operations (93,391
    // states; with 2 ids no id is forgotten, with 3 operations none comes back).
    (
        "cargo run --release -p coxswain -- check --memory 2",
        "cargo run -p coxswain -- check --memory 2 --messages 3 --operations 4",
    ),
    // ~21 min at the deep bound (longer on a loaded machine): the deep bound with one id and 4
    // operations (27,117 states; at 3 operations no path crashes twice, so S59's spent allowance
    // is never reached; 3 ids and 4 operations would repeat the CI bound's stand-in above).
    (
        "cargo run --release -p coxswain -- check --deep",
        "cargo run -p coxswain -- check --deep --messages 1 --operations 4",
    ),
    // All 48 mutants take minutes (`.ci/run` runs them all right after the tests): one, by name.
    (
        "cargo run -p coxswain-mutants",
        "cargo run -p coxswain-mutants -- ClaimForgetsStep",
    ),
    // The CI's 5,000 and 1,000 seeds (`.ci/run` runs them too): 300 and 200, as the sim's own
    // tests; one seed on the dev profile.
    (
        "cargo run --release -p coxswain-driver-sim -- --seeds 0-4999",
        "cargo run -p coxswain-driver-sim -- --seeds 0-299",
    ),
    (
        "cargo run --release -p coxswain-driver-sim -- --seeds 1234 --verbose",
        "cargo run -p coxswain-driver-sim -- --seeds 1234 --verbose",
    ),
    (
        "cargo run --release -p coxswain-driver-sim -- --threads --seeds 0-999",
        "cargo run -p coxswain-driver-sim -- --threads --seeds 0-199",
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

/// The commands of [`SMALLER`] that run as their stand-in in the exhaustive test too: the deep
/// bound (~21 min), all 48 mutants (`.ci/run` runs them right after the tests), the Jepsen-style
/// test's 300 sessions under a 90 s nemesis, and the fail-over of 10,000 sessions in release.
const LONG: &[&str] = &[
    "cargo run --release -p coxswain -- check --deep",
    "cargo run -p coxswain-mutants",
    "COXSWAIN_JEPSEN_SESSIONS=300 COXSWAIN_JEPSEN_SECONDS=90 cargo test -p coxswain-postgres-tests --test jepsen -- --nocapture",
    "COXSWAIN_FAILOVER_SESSIONS=10000 cargo test --release -p coxswain-postgres-tests --test failover -- --nocapture",
];

/// The commands of the ```` ```sh no-run ```` blocks, by file (each block's text says why).
const NO_RUN: &[(&str, &str)] = &[
    ("README.md", "cargo test --workspace"),
    ("README.md", "cargo install --path adapters/cli --locked"),
    ("README.md", "cargo bench -p coxswain-benches --bench postgres"),
    (
        "README.md",
        "cargo run --release -p coxswain -- load --log postgres://user@host/db --workers 4 --sessions 10000 --senders 1 --seconds 20",
    ),
    (
        "README.md",
        "cargo run --release -p coxswain -- load --log postgres://user@host/db --failover --workers 4 --sessions 10000",
    ),
    (
        "docs/MUTANTS.md",
        "CARGO_TARGET_DIR=$HOME/.cache/coxswain-mutants-target PROPTEST_CASES=32 nice -n 10 cargo mutants -p coxswain-core --profile mutants --test-package coxswain-core --test-package coxswain-tests --baseline=skip --timeout 90 --build-timeout 600 -j 1 --output /tmp/mutants-out -- --lib -- tests:: mutation_gate conformance:: proptests::s5",
    ),
    (
        "docs/acp.md",
        "cargo run --manifest-path adapters/acp/Cargo.toml -- --echo --dir sessions/",
    ),
    (
        "docs/acp.md",
        "cargo run --manifest-path adapters/acp/Cargo.toml -- --echo --store postgres://user@localhost/db",
    ),
    (
        "docs/node.md",
        "npm --prefix adapters/node ci && npm --prefix adapters/node run build:test",
    ),
    (
        "docs/node.md",
        "cargo build -p coxswain && npm --prefix adapters/node test",
    ),
    (
        "docs/node.md",
        "cargo run -p coxswain -- conform --exec \"node adapters/node/port.js\" tests/conformance/*.jsonl",
    ),
    (
        "docs/node.md",
        "node adapters/node/node_modules/typescript/bin/tsc -p adapters/node/examples",
    ),
    (
        "docs/node.md",
        "LOG=/tmp/session-ts.jsonl node adapters/node/examples/out/hello.mjs",
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
        "cargo bench -p coxswain-benches --bench encode",
    ),
    (
        "docs/performance.md",
        "cargo bench -p coxswain-benches --bench agents",
    ),
    (
        "docs/performance.md",
        "cargo run --release -p coxswain -- load --log postgres://user@host/db --workers 4 --sessions 10000 --senders 1 --seconds 20",
    ),
    (
        "docs/performance.md",
        "cargo run --release -p coxswain -- load --log postgres://user@host/db --failover --workers 4 --sessions 10000",
    ),
    (
        "docs/performance.md",
        "cargo build --release -p coxswain-benches --bin coxswain-cycle-count",
    ),
    (
        "docs/performance.md",
        "valgrind --tool=callgrind target/release/coxswain-cycle-count session 11000",
    ),
    (
        "docs/performance.md",
        "target/release/coxswain-cycle-count sizes",
    ),
    (
        "docs/postgres.md",
        "cargo run -p coxswain -- run examples/quickstart.json --log postgres://user@host/db --session s1",
    ),
    (
        "docs/postgres.md",
        "cargo run -p coxswain -- verify postgres://user@host/db [--session s1]",
    ),
    ("docs/postgres.md", "cargo run -p coxswain -- sessions postgres://user@host/db"),
    (
        "docs/postgres.md",
        "cargo run -p coxswain -- log copy session.jsonl postgres://user@host/db --session s1",
    ),
    ("docs/python.md", "python3 -m venv .venv"),
    ("docs/python.md", ".venv/bin/pip install ./adapters/python"),
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
    ("docs/testing.md", "cargo test --workspace"),
    (
        "docs/testing.md",
        "cargo test --workspace --tests -- --ignored exhaustive",
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
/// cannot go quietly dead when the docs drop its command. These are the checks of the commands
/// that run in order (every command but the [`cpu_bound`] ones); [`CPU_BOUND_CHECKS`] are the
/// others'.
const CHECKS: &[&str] = &[
    "run cancel-and-resume",
    "run resumes an existing log",
    "run retry-after-crash",
    "verify",
    "conform",
    "load",
    "view",
    "jepsen",
    "failover",
];

/// The checks of the [`cpu_bound`] commands, each got at least once (as [`CHECKS`]).
const CPU_BOUND_CHECKS: &[&str] = &["check", "coxswain-mutants", "driver-sim"];

/// The commands (as written) that keep both cores busy for most of the README's test command's
/// docs test: the model checks (`check`, two checker threads), the mutant runner (a build of the
/// mutated core) and the simulator. Each is self-contained (it reads nothing another command
/// wrote, and the mutant runs share their work directory only with each other), so they run in
/// their own test, [`every_model_check_mutant_and_simulation_command_of_the_docs_runs_as_written`],
/// in order among themselves, beside the others, which mostly wait (`load`'s and the
/// Jepsen-style test's fixed seconds, cargo starting up): libtest runs the two tests at once.
fn cpu_bound(command: &str) -> bool {
    let package = command
        .split_once(" -p ")
        .map(|(_, rest)| rest.split(' ').next().unwrap_or(rest));
    match package {
        Some("coxswain-mutants" | "coxswain-driver-sim") => true,
        Some("coxswain") => subcommand(command) == "check",
        _ => false,
    }
}

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
/// of check it got (one of [`CHECKS`]), if any. (stderr counts only for the test harness's `ignored:` line.)
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

/// The log file a `coxswain run --log FILE` writes (not a PostgreSQL URL), if the script is one.
fn run_log(script: &str) -> Option<&str> {
    if subcommand(command(script)) != "run" {
        return None;
    }
    let (_, rest) = command(script).split_once(" --log ")?;
    let log = rest.split_whitespace().next()?;
    (!log.contains("://")).then_some(log)
}

/// `run --log FILE` on a file that exists resumes that session and says so first (S46); on a new
/// file it says nothing of the kind. The check it got when it resumed.
fn check_resumed(script: &str, stdout: &str, log: &str, existed: bool) -> Option<&'static str> {
    let line = format!("resuming {log}: ");
    let said = stdout
        .lines()
        .find(|said| said.starts_with(&line) && said.ends_with(" records already there (S46)"));
    assert_eq!(
        said.is_some(),
        existed,
        "`{script}`: {log} existed: {existed}, but the output says:\n{stdout}"
    );
    existed.then_some("run resumes an existing log")
}

/// The states the docs state for a bound: the README's plain CI bound and, in
/// docs/verification.md, the delivery memory's and the deep bound's (the first two also pinned
/// in tests/src/model_check.rs). Only the commands as written state them: the ignored test's.
const STATED_STATES: &[(&str, usize)] = &[
    ("cargo run --release -p coxswain -- check", 829_886),
    (
        "cargo run --release -p coxswain -- check --memory 2",
        1_001_734,
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
        let deliveries = "deliveries: 93749 acknowledged, 41820 failed, 2352 unknown";
        assert!(
            stdout.lines().any(|line| line == deliveries),
            "{command}:\n{stdout}"
        );
    }
    "driver-sim"
}

/// The Jepsen-style test's report: the sessions asked for, no violation. Without the PostgreSQL
/// server binaries the harness (`tests/harness`) reports the test ignored, with one `ignored:` line
/// naming what is missing, which only counts outside CI
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
            stdout.contains("ignored: these tests need PostgreSQL's server binaries")
                && std::env::var("CI").as_deref() != Ok("true"),
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

/// The system's own directories of programs, after the directory of the `cargo` running this
/// test: what a reader who has not run `cargo install` has.
const SYSTEM_PATH: &[&str] = &["/usr/local/bin", "/usr/bin", "/bin"];

/// The `PATH` the commands run with: the directory of the `cargo` running this test, then
/// [`SYSTEM_PATH`] (nothing else of the caller's `PATH`, so a `coxswain` installed there
/// cannot make a bare `coxswain` command pass).
fn docs_path() -> std::ffi::OsString {
    let cargo = PathBuf::from(env!("CARGO"));
    let dirs = cargo
        .parent()
        .map(PathBuf::from)
        .into_iter()
        .chain(SYSTEM_PATH.iter().map(PathBuf::from));
    std::env::join_paths(dirs).unwrap()
}

/// The first file called `name` in a directory of `path`, as a shell's lookup would find it.
fn found_on(name: &str, path: &std::ffi::OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Whether a command runs a bare `coxswain` (the installed binary, not `cargo run -p coxswain
/// -- …`) anywhere a command word stands: at its start, after `VAR=value` assignments, or after
/// `&&`, `||`, `;` or `|`.
fn runs_bare_coxswain(command: &str) -> bool {
    command.split([';', '&', '|']).any(|part| {
        part.split_whitespace()
            // The first word that is not a `VAR=value` assignment.
            .find(|word| !word.contains('=') || word.starts_with('='))
            == Some("coxswain")
    })
}

/// Every ```` ```sh ```` command of README.md and `docs/*.md`, in order.
fn shown_commands() -> Vec<Shown> {
    markdown_files()
        .iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(root().join(file))
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            commands(file, &text)
        })
        .collect()
}

/// The script that runs for a command: its [`SMALLER`] stand-in if `smaller` (or it is one of
/// the [`LONG`] ones) and it has one, else the command as written; `/tmp/` becomes `tmp`.
fn script(shown: &Shown, smaller: bool, tmp: &str) -> String {
    let original = command(&shown.line);
    let stand_in = SMALLER
        .iter()
        .find(|(long, _)| *long == original && (smaller || LONG.contains(&original)));
    let script = match stand_in {
        Some((_, stand_in)) => stand_in.to_string(),
        None => shown.line.clone(),
    };
    script.replace("/tmp/", &format!("{tmp}/"))
}

/// Runs a script from the repository root on `path`; its stdout and stderr.
fn run(file: &str, script: &str, path: &std::ffi::OsStr) -> (String, String) {
    let start = std::time::Instant::now();
    let output = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(root())
        .env("PATH", path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{file}: `{script}` failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("{:7.1} s  {script}", start.elapsed().as_secs_f64());
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (stdout, stderr)
}

/// Runs the runnable commands `which` picks (with their [`SMALLER`] stand-ins if `smaller`), in
/// order, each checked: exit status 0, its `# prints:` line, [`check_output`]. The checks they
/// got, and what ran, by file.
fn run_commands(
    which: impl Fn(&str) -> bool,
    smaller: bool,
) -> (Vec<&'static str>, Vec<(String, String)>) {
    let path = docs_path();
    if let Some(found) = found_on("coxswain", &path) {
        panic!(
            "{} is on the commands' PATH ({}): a bare `coxswain` command of the docs would pass",
            found.display(),
            path.to_string_lossy()
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().to_str().unwrap().to_owned();
    let mut checked = Vec::new();
    let mut ran: Vec<(String, String)> = Vec::new();
    let shown = shown_commands();
    for shown in shown
        .iter()
        .filter(|shown| !shown.no_run && which(command(&shown.line)))
    {
        let script = script(shown, smaller, &tmp);
        let log = run_log(&script).map(str::to_owned);
        let existed = log.as_deref().is_some_and(|log| Path::new(log).exists());
        let (stdout, stderr) = run(&shown.file, &script, &path);
        if let Some(log) = log {
            checked.extend(check_resumed(&script, &stdout, &log, existed));
        }
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
    (checked, ran)
}

/// Prints what ran, by file.
fn report(ran: &[(String, String)], total: std::time::Instant) {
    let mut file = "";
    println!(
        "ran {} commands in {:.0} s:",
        ran.len(),
        total.elapsed().as_secs_f64()
    );
    for (in_file, script) in ran {
        if in_file != file {
            println!("{in_file}:");
            file = in_file;
        }
        println!("  {script}");
    }
}

/// Every runnable command of the docs but the [`cpu_bound`] ones (which
/// [`every_model_check_mutant_and_simulation_command_of_the_docs_runs_as_written`] runs at the
/// same time), in order.
#[test]
fn every_shell_command_of_the_readme_and_the_docs_runs_as_written() {
    let total = std::time::Instant::now();
    let (checked, ran) = run_commands(|command| !cpu_bound(command), true);
    for check in CHECKS {
        assert!(
            checked.contains(check),
            "no command of the docs got the `{check}` check: a command it checked is gone"
        );
    }
    report(&ran, total);
}

/// The [`cpu_bound`] commands of the docs (the model checks, the mutant runner, the
/// simulator), in order, with their [`SMALLER`] stand-ins.
#[test]
fn every_model_check_mutant_and_simulation_command_of_the_docs_runs_as_written() {
    let total = std::time::Instant::now();
    let (checked, ran) = run_commands(cpu_bound, true);
    for check in CPU_BOUND_CHECKS {
        assert!(
            checked.contains(check),
            "no command of the docs got the `{check}` check: a command it checked is gone"
        );
    }
    report(&ran, total);
}

/// The split of the two tests above: the model checks, the mutant runner and the simulator are
/// [`cpu_bound`], nothing else is, and no check is in both lists.
#[test]
fn the_cpu_bound_commands_are_the_checks_apart() {
    let shown = shown_commands();
    let runnable: Vec<&str> = shown
        .iter()
        .filter(|shown| !shown.no_run)
        .map(|shown| command(&shown.line))
        .collect();
    let cpu_bound_ones: Vec<&&str> = runnable.iter().filter(|c| cpu_bound(c)).collect();
    assert!(
        cpu_bound_ones.len() >= CPU_BOUND_CHECKS.len() && cpu_bound_ones.len() < runnable.len(),
        "{cpu_bound_ones:?}"
    );
    for check in CPU_BOUND_CHECKS {
        assert!(!CHECKS.contains(check), "`{check}` is in both lists");
    }
    for (command, expected) in [
        ("cargo run --release -p coxswain -- check", true),
        ("cargo run --release -p coxswain -- check --memory 2", true),
        ("cargo run -p coxswain-mutants -- --self-test", true),
        (
            "cargo run --release -p coxswain-driver-sim -- --seeds 0-4999",
            true,
        ),
        (
            "cargo run --release -p coxswain -- load --log /tmp/load --agents 1 --senders 64",
            false,
        ),
        ("cargo run -p coxswain -- verify /tmp/session.jsonl", false),
        ("cargo run -p coxswain-core --example by_hand", false),
    ] {
        assert_eq!(cpu_bound(command), expected, "{command}");
    }
}

/// The commands that [`SMALLER`] stands in for in the README's test command, as written (the
/// [`LONG`] ones as their stand-ins still): the CI bound and the memory's with their stated
/// state counts, `load` and the simulator's seeds in release. Each is self-contained; one the
/// docs show twice runs once.
#[test]
#[ignore = "exhaustive: the docs' long commands as written; .ci/run runs it with --ignored"]
fn exhaustive_the_docs_long_commands_run_as_written() {
    let total = std::time::Instant::now();
    let seen = std::cell::RefCell::new(Vec::<String>::new());
    let (checked, ran) = run_commands(
        |command| {
            let long = SMALLER.iter().any(|(original, _)| *original == command)
                && !LONG.contains(&command);
            let first = !seen.borrow().iter().any(|done| done == command);
            if long && first {
                seen.borrow_mut().push(command.to_owned());
            }
            long && first
        },
        false,
    );
    assert_eq!(
        ran.len(),
        SMALLER.len() - LONG.len(),
        "every command of SMALLER but the LONG ones runs as written once"
    );
    for check in ["check", "load", "driver-sim"] {
        assert!(checked.contains(&check), "no `{check}` check ran");
    }
    let stated = ran
        .iter()
        .filter(|(_, script)| {
            STATED_STATES
                .iter()
                .any(|(stated, _)| *stated == command(script))
        })
        .count();
    assert_eq!(
        stated,
        STATED_STATES.len(),
        "every stated state count was checked"
    );
    report(&ran, total);
}

/// The parts of the commands test that need no command to run: every [`SMALLER`] command is
/// one of the docs, the no-run list is [`NO_RUN`], and no command of any block runs a bare
/// `coxswain`.
#[test]
fn the_no_run_list_and_the_stand_ins_are_the_docs() {
    let shown = shown_commands();
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
    for long in LONG {
        assert!(
            SMALLER.iter().any(|(original, _)| original == long),
            "`{long}` has no stand-in in SMALLER"
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
}

#[test]
fn no_command_of_the_docs_starts_with_a_bare_coxswain() {
    let bare: Vec<String> = shown_commands()
        .iter()
        .filter(|shown| runs_bare_coxswain(command(&shown.line)))
        .map(|shown| format!("{}: {}", shown.file, shown.line))
        .collect();
    assert!(
        bare.is_empty(),
        "a bare `coxswain` is not on a reader's PATH (`cargo run -p coxswain -- …`, or `--release` where speed matters):\n{}",
        bare.join("\n")
    );
}

#[test]
fn a_bare_coxswain_is_found_wherever_a_command_starts() {
    for bare in [
        "coxswain verify /tmp/session.jsonl",
        "  coxswain run x.json",
        "RUST_LOG=debug coxswain check",
        "cargo build -p coxswain && coxswain conform x.jsonl",
        "cargo build; coxswain port",
        "false || coxswain sessions URL",
        "echo x | coxswain port",
    ] {
        assert!(runs_bare_coxswain(bare), "{bare}");
    }
    for fine in [
        "cargo run -p coxswain -- verify /tmp/session.jsonl",
        "cargo run --release -p coxswain -- load --log postgres://user@host/db",
        "COXSWAIN_FAILOVER_SESSIONS=400 cargo test -p coxswain-postgres-tests --test failover",
        "cargo install --path adapters/cli --locked",
        "target/release/coxswain check",
        "cargo run -q -p coxswain -- conform --exec \"cargo run -q -p coxswain -- port\" x.jsonl",
    ] {
        assert!(!runs_bare_coxswain(fine), "{fine}");
    }
}

#[test]
fn the_log_of_a_run_is_its_file_not_a_url() {
    assert_eq!(
        run_log("cargo run -p coxswain -- run examples/x.json --log /t/s.jsonl  # a comment"),
        Some("/t/s.jsonl")
    );
    assert_eq!(
        run_log("cargo run -p coxswain -- run x.json --log postgres://u@h/db --session s1"),
        None
    );
    assert_eq!(
        run_log("cargo run -p coxswain -- view /t/s.jsonl -o /t/s.html"),
        None
    );
    assert_eq!(
        run_log("cargo run -p coxswain -- run examples/x.json"),
        None
    );
}

#[test]
fn a_run_says_it_resumes_a_log_exactly_when_the_log_existed() {
    let said = "log: /t/s.jsonl\nresuming /t/s.jsonl: 46 records already there (S46)\n";
    assert_eq!(
        check_resumed("run", said, "/t/s.jsonl", true),
        Some("run resumes an existing log")
    );
    assert_eq!(
        check_resumed("run", "log: /t/s.jsonl\n", "/t/s.jsonl", false),
        None
    );
    for (stdout, existed) in [(said, false), ("log: /t/s.jsonl\n", true)] {
        let caught =
            std::panic::catch_unwind(|| check_resumed("run", stdout, "/t/s.jsonl", existed));
        assert!(caught.is_err(), "{existed}: {stdout}");
    }
}

#[test]
fn the_commands_path_holds_no_coxswain_and_a_coxswain_on_a_path_is_found() {
    let path = docs_path();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    assert_eq!(dirs.len(), 1 + SYSTEM_PATH.len(), "{dirs:?}");
    assert_eq!(
        dirs[1..],
        SYSTEM_PATH.iter().map(PathBuf::from).collect::<Vec<_>>()
    );
    assert_eq!(found_on("coxswain", &path), None);
    assert!(found_on("sh", &path).is_some(), "no sh on {path:?}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("coxswain"), "#!/bin/sh\n").unwrap();
    let with = std::env::join_paths(dirs.iter().chain([&dir.path().to_path_buf()])).unwrap();
    assert_eq!(
        found_on("coxswain", &with),
        Some(dir.path().join("coxswain"))
    );
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
