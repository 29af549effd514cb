//! # coxswain-mutants
//!
//! Proof that the checkers bite, without hooks in the shipped core: a hand-written, named list of
//! **source mutants** of `core/machine/src/` and `core/session/src/` ([`MUTANTS`]), each a deliberately wrong variant of one SPEC
//! rule written as an exact text substitution, and a runner that, for each mutant,
//!
//! 1. copies the crates the killers need (`core/` with its nested crates, `model/`, `tests/`, the
//!    lock file and a workspace manifest listing only those) into one stable directory, applying
//!    the substitution (a `from` snippet that does not occur exactly once is an error, so the
//!    table cannot rot silently; it is compared as code, not text, so formatting the core does
//!    not break it: [`mutate`]) and rewriting only files whose text changed;
//! 2. builds there, in a target directory shared by all mutants (only the core and its dependents
//!    rebuild), just the model-check probe (`mutant-probe`) and, for mutants with a
//!    [`Mutant::proptest`] killer, the tests crate;
//! 3. runs the killers: the model check at the CI bound restricted to the expected property,
//!    whose counterexample trace must *not* replay on the real core (this binary links the real
//!    one); and the property tests' oracles, the monitor alone (which must name the expected
//!    invariant) and the differential comparison alone.
//!
//! A mutant must be **killed** by every killer; a survivor, a kill by the wrong property or a
//! trace the real core replays is a failure. [`UNCHANGED`] (`to == from`) must survive: the
//! runner's own check (`--self-test`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Output};
use std::time::{Duration, Instant};

use coxswain_conformance::{replay, Trace};
use serde_json::Value;

mod table;

pub use table::{find, Mutant, Property, MUTANTS, UNCHANGED};

/// The crates a mutant's workspace holds (and the paths copied for them).
const MEMBERS: [&str; 8] = [
    "core/machine",
    "core/log",
    "core/session",
    "model/checker",
    "model/conformance",
    "model/mutants",
    "model/spec",
    "tests",
];

/// What is copied from the real workspace, besides the generated manifest.
const COPIED: [&str; 4] = ["Cargo.lock", "core", "model", "tests"];

/// The name of the ignored test in `tests/src/proptests.rs` that runs the proptest oracles
/// against the core it was built with, for the invariant named by [`ORACLE_ENV`].
pub const ORACLE_TEST: &str = "proptests::mutant_oracles";

/// The environment variable naming the invariant [`ORACLE_TEST`] expects from the monitor.
pub const ORACLE_ENV: &str = "COXSWAIN_MUTANT_INVARIANT";

/// Applies a mutant to the text of its file. `from` must occur exactly once, compared as code
/// rather than as text: whitespace is ignored except between two word characters (where any run
/// is one space), and a comma before a closing bracket is ignored, so reformatting the core
/// (`cargo fmt`, a wrapped line, a trailing comma) does not break the table. The matched span is
/// replaced by `to` as written.
pub fn mutate(source: &str, mutant: &Mutant) -> Result<String, String> {
    let (code, places) = as_code(source);
    let (from, _) = as_code(mutant.from);
    let found: Vec<usize> = code
        .match_indices(from.as_str())
        .map(|(at, _)| at)
        .collect();
    match found.as_slice() {
        [at] if !from.is_empty() => {
            let start = places[*at];
            let last = places[at + from.len() - 1];
            let end = last + source[last..].chars().next().map_or(0, char::len_utf8);
            Ok(format!(
                "{}{}{}",
                &source[..start],
                mutant.to,
                &source[end..]
            ))
        }
        found => Err(format!(
            "{}: its `from` snippet occurs {} times in {} (must be exactly once): {:?}",
            mutant.name,
            found.len(),
            mutant.file,
            mutant.from
        )),
    }
}

/// `text` as code for [`mutate`]'s comparison, with the byte offset in `text` of each byte
/// kept.
fn as_code(text: &str) -> (String, Vec<usize>) {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let (mut code, mut places) = (String::with_capacity(text.len()), Vec::new());
    let mut spaced = false;
    for (at, c) in text.char_indices() {
        if c.is_whitespace() {
            spaced = true;
            continue;
        }
        if spaced && word(c) && code.chars().next_back().is_some_and(word) {
            code.push(' ');
            places.push(at);
        }
        spaced = false;
        if matches!(c, ')' | ']' | '}') && code.ends_with(',') {
            code.pop(); // a trailing comma
            places.pop();
        }
        code.push(c);
        places.extend(std::iter::repeat_n(at, c.len_utf8()));
    }
    (code, places)
}

/// What one killer found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The expected property failed (and, for the model check, the counterexample's trace does
    /// not replay on the real core).
    Killed,
    /// Nothing failed.
    Survived,
    /// Something failed, but not the expected property.
    WrongProperty(String),
    /// The expected property failed, but the real core replays the counterexample's trace: the
    /// property flagged something the real machine does too.
    TraceReplays,
    /// The mutant could not be applied, built or run.
    Broken(String),
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Killed => f.write_str("KILLED"),
            Verdict::Survived => f.write_str("SURVIVED"),
            Verdict::WrongProperty(by) => write!(f, "WRONG PROPERTY ({by})"),
            Verdict::TraceReplays => f.write_str("TRACE REPLAYS ON THE REAL CORE"),
            Verdict::Broken(why) => write!(f, "BROKEN ({why})"),
        }
    }
}

/// One killer's run.
#[derive(Clone, Debug)]
pub struct Kill {
    /// `model check: <property>` or `proptest: <invariant> + differential`.
    pub killer: String,
    /// What it found.
    pub verdict: Verdict,
    /// How long it ran (its build not included).
    pub time: Duration,
}

/// One mutant's run.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The mutant.
    pub mutant: Mutant,
    /// Copying and building.
    pub build: Duration,
    /// Each killer's result (empty if the mutant could not be built).
    pub kills: Vec<Kill>,
}

impl Outcome {
    /// Every killer killed it.
    pub fn killed(&self) -> bool {
        !self.kills.is_empty() && self.kills.iter().all(|k| k.verdict == Verdict::Killed)
    }

    /// Every killer ran and let it survive.
    pub fn survived(&self) -> bool {
        !self.kills.is_empty() && self.kills.iter().all(|k| k.verdict == Verdict::Survived)
    }

    /// The whole time.
    pub fn time(&self) -> Duration {
        self.build + self.kills.iter().map(|k| k.time).sum::<Duration>()
    }
}

/// Runs mutants in a work directory.
#[derive(Clone, Debug)]
pub struct Runner {
    /// The real workspace (the mutants' source).
    pub source: PathBuf,
    /// `<work>/ws` is the mutated copy, `<work>/target` its target directory.
    pub work: PathBuf,
    /// The model-check bound (messages, operations, tool steps); `None` is the CI bound.
    pub bound: Option<[u8; 3]>,
    /// Print each cargo command and the killers' output.
    pub verbose: bool,
}

impl Runner {
    /// The workspace this binary was built from, and the default work directory:
    /// `$CARGO_TARGET_DIR/mutants`, else `~/.cache/coxswain-mutants`.
    pub fn new() -> Runner {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let source = source.canonicalize().unwrap_or(source);
        let work = match std::env::var_os("CARGO_TARGET_DIR") {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("mutants"),
            _ => std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".cache"))
                .unwrap_or_else(std::env::temp_dir)
                .join("coxswain-mutants"),
        };
        Runner {
            source,
            work,
            bound: None,
            verbose: false,
        }
    }

    fn workspace(&self) -> PathBuf {
        self.work.join("ws")
    }

    fn target(&self) -> PathBuf {
        self.work.join("target")
    }

    /// Copies the workspace into `<work>/ws` with `mutant` applied, writing only changed files
    /// (so cargo rebuilds only what a mutant touches) and removing files no longer in the source.
    pub fn prepare(&self, mutant: &Mutant) -> Result<(), String> {
        let ws = self.workspace();
        let mut wanted: BTreeMap<PathBuf, Vec<u8>> = BTreeMap::new();
        for root in COPIED {
            collect(&self.source, Path::new(root), &mut wanted)?;
        }
        let manifest = std::fs::read_to_string(self.source.join("Cargo.toml"))
            .map_err(|e| format!("Cargo.toml: {e}"))?;
        wanted.insert("Cargo.toml".into(), members_only(&manifest)?.into_bytes());
        let file = wanted
            .get_mut(Path::new(mutant.file))
            .ok_or_else(|| format!("{}: no file {}", mutant.name, mutant.file))?;
        let text = String::from_utf8(std::mem::take(file))
            .map_err(|_| format!("{} is not UTF-8", mutant.file))?;
        *file = mutate(&text, mutant)?.into_bytes();
        for (path, bytes) in &wanted {
            let to = ws.join(path);
            if std::fs::read(&to).ok().as_deref() == Some(bytes.as_slice()) {
                continue;
            }
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(|e| format!("{parent:?}: {e}"))?;
            }
            std::fs::write(&to, bytes).map_err(|e| format!("{to:?}: {e}"))?;
        }
        let mut present = BTreeMap::new();
        for root in COPIED.iter().filter(|root| ws.join(root).is_dir()) {
            collect(&ws, Path::new(root), &mut present)?;
        }
        for stale in present.keys().filter(|path| !wanted.contains_key(*path)) {
            std::fs::remove_file(ws.join(stale)).map_err(|e| format!("{stale:?}: {e}"))?;
        }
        Ok(())
    }

    fn cargo(&self, args: &[&str]) -> Command {
        let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        command
            .args(args)
            .current_dir(self.workspace())
            .env("CARGO_TARGET_DIR", self.target())
            .env("CARGO_TERM_COLOR", "never");
        if self.verbose {
            eprintln!("  $ cargo {}", args.join(" "));
        }
        command
    }

    fn build(&self, mutant: &Mutant) -> Result<(), String> {
        let mut builds = vec![vec![
            "build",
            "-q",
            "-p",
            "coxswain-mutants",
            "--bin",
            "mutant-probe",
        ]];
        if mutant.proptest.is_some() {
            builds.push(vec![
                "test",
                "-q",
                "-p",
                "coxswain-tests",
                "--lib",
                "--no-run",
            ]);
        }
        for args in builds {
            let output = self
                .cargo(&args)
                .output()
                .map_err(|e| format!("cargo: {e}"))?;
            if !output.status.success() {
                return Err(format!(
                    "`cargo {}` failed:\n{}",
                    args.join(" "),
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
        }
        Ok(())
    }

    /// Applies, builds and runs every killer of one mutant.
    pub fn run(&self, mutant: &Mutant) -> Outcome {
        let start = Instant::now();
        let built = self.prepare(mutant).and_then(|()| self.build(mutant));
        let build = start.elapsed();
        let mut kills = Vec::new();
        if let Err(why) = built {
            kills.push(Kill {
                killer: "build".into(),
                verdict: Verdict::Broken(why),
                time: Duration::ZERO,
            });
            return Outcome {
                mutant: *mutant,
                build,
                kills,
            };
        }
        kills.push(self.model_check(mutant));
        if let Some(invariant) = mutant.proptest {
            kills.push(self.proptest(invariant.name()));
        }
        Outcome {
            mutant: *mutant,
            build,
            kills,
        }
    }

    /// The model check at the CI bound, stopping at the first counterexample to the killer.
    fn model_check(&self, mutant: &Mutant) -> Kill {
        let property = mutant.killer.name();
        let start = Instant::now();
        let probe = self
            .target()
            .join("debug")
            .join(format!("mutant-probe{}", std::env::consts::EXE_SUFFIX));
        let mut command = Command::new(&probe);
        command.arg(property);
        if let Some(bound) = self.bound {
            command.args(bound.map(|n| n.to_string()));
        }
        if mutant.memory > 0 {
            command.args(["--memory".to_owned(), mutant.memory.to_string()]);
        }
        if mutant.max_pending > 0 {
            command.args(["--max-pending".to_owned(), mutant.max_pending.to_string()]);
        }
        let output = command.output();
        let verdict = match output {
            Err(e) => Verdict::Broken(format!("{probe:?}: {e}")),
            Ok(output) => self.judge_model_check(mutant, &output),
        };
        let mut settings: Vec<String> = Vec::new();
        if let Some([m, o, t]) = self.bound {
            settings.push(format!("bound {m},{o},{t}"));
        }
        if mutant.memory > 0 {
            settings.push(format!("W={}", mutant.memory));
        }
        if mutant.max_pending > 0 {
            settings.push(format!("P={}", mutant.max_pending));
        }
        let bound = if settings.is_empty() {
            String::new()
        } else {
            format!(" ({})", settings.join(", "))
        };
        Kill {
            killer: format!("model check{bound}: {property}"),
            verdict,
            time: start.elapsed(),
        }
    }

    fn judge_model_check(&self, mutant: &Mutant, output: &Output) -> Verdict {
        if !output.status.success() {
            return Verdict::Broken(format!(
                "mutant-probe failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let report: Value = match serde_json::from_slice(&output.stdout) {
            Ok(report) => report,
            Err(e) => return Verdict::Broken(format!("mutant-probe's report: {e}")),
        };
        if self.verbose {
            eprintln!(
                "  probe: {} states, failing {}, {}",
                report["unique_states"], report["failing"], report["detail"]
            );
        }
        judge_report(mutant, &report)
    }

    /// The property tests' oracles, each alone: the monitor must name `invariant`, and the
    /// differential comparison must fail too.
    fn proptest(&self, invariant: &str) -> Kill {
        let start = Instant::now();
        let output = self
            .cargo(&[
                "test",
                "-q",
                "-p",
                "coxswain-tests",
                "--lib",
                "--",
                ORACLE_TEST,
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .env(ORACLE_ENV, invariant)
            .output();
        let verdict = match output {
            Err(e) => Verdict::Broken(format!("cargo: {e}")),
            Ok(output) => {
                let stdout = String::from_utf8_lossy(&output.stdout);
                if self.verbose {
                    eprintln!("{stdout}");
                }
                judge_oracles(invariant, &stdout)
            }
        };
        Kill {
            killer: format!("proptest: monitor ({invariant}) + differential"),
            verdict,
            time: start.elapsed(),
        }
    }
}

impl Default for Runner {
    fn default() -> Self {
        Runner::new()
    }
}

/// Judges the probe's report: the expected property must fail, and its counterexample must not
/// replay on the real core.
fn judge_report(mutant: &Mutant, report: &Value) -> Verdict {
    let property = mutant.killer.name();
    let failing: Vec<&str> = report["failing"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !failing.contains(&property) {
        return if report["exhaustive"] != Value::Bool(true) {
            Verdict::Broken("the model check stopped short of the whole bound".into())
        } else if failing.is_empty() {
            Verdict::Survived
        } else {
            Verdict::WrongProperty(failing.join(", "))
        };
    }
    // The counterexample is what the mutant did: the real core must not replay it (unless
    // the mutant only changes state a trace cannot show, or the path crashes and restores,
    // which a trace restarts from).
    if !mutant.shows_in_outputs || report["crash_restore"] == Value::Bool(true) {
        return Verdict::Killed;
    }
    let Some(text) = report["trace"].as_str() else {
        return Verdict::Broken("no counterexample trace".into());
    };
    match Trace::parse(text) {
        Err(e) => Verdict::Broken(format!("the counterexample trace does not parse: {e}")),
        Ok(trace) if replay(&trace).is_ok() => Verdict::TraceReplays,
        Ok(_) => Verdict::Killed,
    }
}

/// Reads the `mutant-oracle <oracle>: <finding>` lines [`ORACLE_TEST`] prints.
fn judge_oracles(invariant: &str, stdout: &str) -> Verdict {
    let finding = |oracle: &str| {
        let prefix = format!("mutant-oracle {oracle}: ");
        stdout
            .lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .map(str::trim)
    };
    match (finding("monitor"), finding("differential")) {
        (Some(monitor), Some(differential)) => {
            let monitor_ok = monitor == invariant;
            let differential_ok = differential == "caught";
            match (monitor, differential) {
                _ if monitor_ok && differential_ok => Verdict::Killed,
                ("survived", "survived") => Verdict::Survived,
                _ => Verdict::WrongProperty(format!(
                    "monitor: {monitor}; differential: {differential}"
                )),
            }
        }
        _ => Verdict::Broken(format!("{ORACLE_TEST} printed no findings:\n{stdout}")),
    }
}

/// Reads every file under `root` (relative to `base`) into `into`, skipping hidden entries and
/// `target` directories.
fn collect(base: &Path, root: &Path, into: &mut BTreeMap<PathBuf, Vec<u8>>) -> Result<(), String> {
    let path = base.join(root);
    let meta = std::fs::metadata(&path).map_err(|e| format!("{path:?}: {e}"))?;
    if meta.is_file() {
        let bytes = std::fs::read(&path).map_err(|e| format!("{path:?}: {e}"))?;
        into.insert(root.to_path_buf(), bytes);
        return Ok(());
    }
    let entries = std::fs::read_dir(&path).map_err(|e| format!("{path:?}: {e}"))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("{path:?}: {e}"))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        collect(base, &root.join(&*name), into)?;
    }
    Ok(())
}

/// The workspace manifest with its `members` list cut down to [`MEMBERS`].
fn members_only(manifest: &str) -> Result<String, String> {
    let start = manifest
        .find("members = [")
        .ok_or("Cargo.toml has no `members = [` list")?;
    let end = manifest[start..]
        .find(']')
        .map(|i| start + i + 1)
        .ok_or("Cargo.toml's `members` list is not closed")?;
    let members: Vec<String> = MEMBERS.iter().map(|m| format!("{m:?}")).collect();
    Ok(format!(
        "{}members = [{}]{}",
        &manifest[..start],
        members.join(", "),
        &manifest[end..]
    ))
}

/// Prints the table of outcomes: mutant, rule, killer, verdict, time.
pub fn print_table(outcomes: &[Outcome]) {
    let mut rows = vec![[
        "mutant".to_string(),
        "rule".into(),
        "killer".into(),
        "verdict".into(),
        "build".into(),
        "check".into(),
    ]];
    for outcome in outcomes {
        for (i, kill) in outcome.kills.iter().enumerate() {
            let first = i == 0;
            rows.push([
                if first { outcome.mutant.name } else { "" }.to_string(),
                if first { outcome.mutant.rule } else { "" }.to_string(),
                kill.killer.clone(),
                match &kill.verdict {
                    Verdict::Broken(why) => {
                        format!("BROKEN ({})", why.lines().next().unwrap_or(""))
                    }
                    verdict => verdict.to_string(),
                },
                if first {
                    secs(outcome.build)
                } else {
                    String::new()
                },
                secs(kill.time),
            ]);
        }
    }
    let widths: Vec<usize> = (0..6)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        println!("{}", cells.join("  ").trim_end());
        if i == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            println!("{}", rule.join("  "));
        }
    }
}

fn secs(duration: Duration) -> String {
    format!("{:.1}s", duration.as_secs_f64())
}

const USAGE: &str = "\
usage: coxswain-mutants [NAME ...] [--list] [--self-test] [--bound M,O,T] [--work-dir DIR] [-v]

Runs the named source mutants of the core (all if none are named) and checks that each is
killed by its checker(s). Exit status 0 iff every mutant was killed.

  --list          print the mutant table and exit
  --self-test     run the `Unchanged` mutant (to == from): succeeds iff it SURVIVES every
                  killer (at the bound 2,3,1 unless --bound is given: a survivor is only
                  known once the whole bound was explored)
  --bound M,O,T   model-check bound: message ids, operations, tool steps [default: the CI
                  bound, 3,5,2]
  --work-dir DIR  where the mutated workspace (DIR/ws) and its build (DIR/target) live
                  [default: $CARGO_TARGET_DIR/mutants, else ~/.cache/coxswain-mutants]
  --verbose       show cargo commands and the killers' findings";

/// The command line of the runner (`coxswain-mutants …`, and `coxswain mutants …`).
pub fn main_with_args(args: impl IntoIterator<Item = String>) -> ExitCode {
    let mut runner = Runner::new();
    let mut names = Vec::new();
    let (mut list, mut self_test) = (false, false);
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--list" => list = true,
            "--self-test" => self_test = true,
            "--verbose" | "-v" => runner.verbose = true,
            "--bound" => match args.next().as_deref().and_then(parse_bound) {
                Some(bound) => runner.bound = Some(bound),
                None => return usage_error("--bound needs M,O,T (three small numbers)"),
            },
            "--work-dir" => match args.next() {
                Some(dir) => runner.work = dir.into(),
                None => return usage_error("--work-dir needs a directory"),
            },
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            flag if flag.starts_with('-') => return usage_error(&format!("unknown flag {flag}")),
            name => names.push(name.to_string()),
        }
    }
    if list {
        print_list();
        return ExitCode::SUCCESS;
    }
    if self_test {
        runner.bound = runner.bound.or(Some(SELF_TEST_BOUND));
        return run_self_test(&runner);
    }
    let mut chosen = Vec::new();
    for name in &names {
        match find(name) {
            Some(mutant) => chosen.push(mutant),
            None => return usage_error(&format!("no mutant {name} (see --list)")),
        }
    }
    if chosen.is_empty() {
        chosen = MUTANTS.to_vec();
    }
    run_chosen(&runner, &chosen)
}

/// `--list`: the table, one mutant a line.
fn print_list() {
    for m in MUTANTS {
        let proptest = m.proptest.map(|i| format!(" + proptest ({i})"));
        println!(
            "{:<24} {:<4} {} -> {}{}",
            m.name,
            m.rule,
            m.file,
            m.killer.name(),
            proptest.unwrap_or_default()
        );
    }
}

/// Runs `chosen`, prints each verdict and the table; success iff every one was killed.
fn run_chosen(runner: &Runner, chosen: &[Mutant]) -> ExitCode {
    let unique: BTreeSet<&str> = chosen.iter().map(|m| m.name).collect();
    println!(
        "coxswain-mutants: {} mutant(s) of {} in {}",
        unique.len(),
        runner.source.display(),
        runner.work.display()
    );
    let start = Instant::now();
    let mut outcomes = Vec::new();
    for mutant in chosen {
        let outcome = runner.run(mutant);
        eprintln!(
            "  {:<24} {} ({})",
            mutant.name,
            if outcome.killed() {
                "killed"
            } else {
                "NOT KILLED"
            },
            secs(outcome.time())
        );
        outcomes.push(outcome);
    }
    println!();
    print_table(&outcomes);
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.killed())
        .map(|o| o.mutant.name)
        .collect();
    println!(
        "\n{} of {} killed in {}",
        outcomes.len() - failed.len(),
        outcomes.len(),
        secs(start.elapsed())
    );
    for outcome in outcomes.iter().filter(|o| !o.killed()) {
        for kill in &outcome.kills {
            if let Verdict::Broken(why) = &kill.verdict {
                println!("\n{}: {why}", outcome.mutant.name);
            }
        }
    }
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        println!("not killed: {}", failed.join(", "));
        ExitCode::FAILURE
    }
}

/// The self-test's default bound: small enough to explore whole in about a second.
const SELF_TEST_BOUND: [u8; 3] = [2, 3, 1];

fn parse_bound(text: &str) -> Option<[u8; 3]> {
    let numbers: Vec<u8> = text
        .split(',')
        .map(|n| n.trim().parse().ok())
        .collect::<Option<_>>()?;
    numbers.try_into().ok()
}

fn run_self_test(runner: &Runner) -> ExitCode {
    println!(
        "coxswain-mutants --self-test: `{}` changes nothing and must survive",
        UNCHANGED.name
    );
    let outcome = runner.run(&UNCHANGED);
    print_table(std::slice::from_ref(&outcome));
    if outcome.survived() {
        println!("\nok: the runner reports a survivor as SURVIVED");
        ExitCode::SUCCESS
    } else {
        println!("\nthe runner did not report the unchanged core as a survivor");
        ExitCode::FAILURE
    }
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("coxswain-mutants: {message}\n\n{USAGE}");
    ExitCode::from(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> PathBuf {
        Runner::new().source
    }

    #[test]
    fn every_mutant_applies_exactly_once_to_todays_core_and_changes_it() {
        let mut names = BTreeSet::new();
        for mutant in MUTANTS {
            assert!(names.insert(mutant.name), "{} twice", mutant.name);
            assert!(
                mutant.file.starts_with("core/machine/src/")
                    || mutant.file.starts_with("core/session/src/"),
                "{}",
                mutant.name
            );
            assert_ne!(mutant.from, mutant.to, "{} changes nothing", mutant.name);
            let source = std::fs::read_to_string(workspace().join(mutant.file)).unwrap();
            let mutated = mutate(&source, &mutant).unwrap_or_else(|e| panic!("{e}"));
            assert_ne!(mutated, source);
        }
        assert_eq!(MUTANTS.len(), 48);
        let source = std::fs::read_to_string(workspace().join(UNCHANGED.file)).unwrap();
        assert_eq!(mutate(&source, &UNCHANGED).as_deref(), Ok(source.as_str()));
    }

    #[test]
    fn a_snippet_that_is_missing_or_repeated_is_an_error() {
        let mutant = Mutant {
            from: "x = 1;",
            to: "x = 2;",
            ..UNCHANGED
        };
        assert_eq!(mutate("a; x = 1; b", &mutant).as_deref(), Ok("a; x = 2; b"));
        assert!(mutate("a; b", &mutant).unwrap_err().contains("0 times"));
        assert!(mutate("x = 1; x = 1;", &mutant)
            .unwrap_err()
            .contains("2 times"));
    }

    /// Formatting the core does not break a snippet: whitespace between tokens, a wrapped
    /// line, a trailing comma; but a changed token does, and the match must still be unique.
    #[test]
    fn a_snippet_matches_the_code_however_it_is_formatted() {
        let mutant = Mutant {
            from: "if aborted && now > limit {\n    start(now, grace);\n}",
            to: "if false {\n    start(now, grace);\n}",
            ..UNCHANGED
        };
        let formatted = "fn f() {\n        if aborted\n            && now > limit\n        {\n            start(\n                now,\n                grace,\n            );\n        }\n    g();\n}";
        assert_eq!(
            mutate(formatted, &mutant).as_deref(),
            Ok("fn f() {\n        if false {\n    start(now, grace);\n}\n    g();\n}")
        );
        // Words stay words: `ifaborted` is another token.
        assert!(mutate("ifaborted && now > limit { start(now, grace); }", &mutant).is_err());
        assert!(mutate("if aborted && now >= limit { start(now, grace); }", &mutant).is_err());
        let twice = format!("{formatted}\n{formatted}");
        assert!(mutate(&twice, &mutant).unwrap_err().contains("2 times"));
    }

    /// Every mutant still applies exactly once to its file re-indented and with every line's
    /// breaks doubled: what a formatter may change, nothing it may not.
    #[test]
    fn every_mutant_applies_to_its_file_reformatted() {
        for mutant in MUTANTS {
            let source = std::fs::read_to_string(workspace().join(mutant.file)).unwrap();
            let reformatted: String = source
                .lines()
                .map(|line| format!("  {}\n\n", line.replace("    ", "\t")))
                .collect();
            let mutated = mutate(&reformatted, &mutant).unwrap_or_else(|e| panic!("{e}"));
            assert_ne!(mutated, reformatted, "{}", mutant.name);
        }
    }

    #[test]
    fn the_mutant_workspace_lists_only_the_copied_crates() {
        let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
        let cut = members_only(&manifest).unwrap();
        assert!(cut.contains(
            r#"members = ["core/machine", "core/log", "core/session", "model/checker", "model/conformance", "model/mutants", "model/spec", "tests"]"#
        ));
        assert!(!cut.contains("\"adapters/cli\",\n"));
        assert!(cut.contains("[profile.dev.package.coxswain-core]"));
        for member in MEMBERS {
            assert!(
                COPIED.iter().any(|c| member.starts_with(c)),
                "{member} is not copied"
            );
            assert!(
                manifest.contains(&format!("{member:?}")),
                "{member} is not a member"
            );
        }
    }

    #[test]
    fn the_probe_report_is_judged() {
        let mutant = MUTANTS[0];
        let property = mutant.killer.name();
        let report = |failing: &[&str], exhaustive: bool, trace: &str| {
            serde_json::json!({
                "failing": failing,
                "exhaustive": exhaustive,
                "crash_restore": false,
                "trace": trace,
            })
        };
        assert_eq!(
            judge_report(&mutant, &report(&[], true, "")),
            Verdict::Survived
        );
        assert_eq!(
            judge_report(&mutant, &report(&["I8 status"], true, "")),
            Verdict::WrongProperty("I8 status".into())
        );
        assert!(matches!(
            judge_report(&mutant, &report(&[], false, "")),
            Verdict::Broken(_)
        ));
        assert!(matches!(
            judge_report(&mutant, &report(&[property], false, "not a trace")),
            Verdict::Broken(_)
        ));
        // A trace of what the real core does (a corpus trace) is no counterexample.
        let corpus = workspace().join("tests/conformance");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&corpus)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        files.sort();
        let real = std::fs::read_to_string(&files[0]).unwrap();
        assert_eq!(
            judge_report(&mutant, &report(&[property], false, &real)),
            Verdict::TraceReplays
        );
        let state_only = Mutant {
            shows_in_outputs: false,
            ..mutant
        };
        assert_eq!(
            judge_report(&state_only, &report(&[property], false, &real)),
            Verdict::Killed
        );
    }

    #[test]
    fn the_oracle_findings_are_read_back() {
        let killed = "mutant-oracle monitor: I3 conservation\nmutant-oracle differential: caught\n";
        assert_eq!(judge_oracles("I3 conservation", killed), Verdict::Killed);
        let survived = "mutant-oracle monitor: survived\nmutant-oracle differential: survived";
        assert_eq!(
            judge_oracles("I3 conservation", survived),
            Verdict::Survived
        );
        assert!(matches!(
            judge_oracles("I6 cancel", killed),
            Verdict::WrongProperty(_)
        ));
        assert!(matches!(judge_oracles("I6 cancel", ""), Verdict::Broken(_)));
    }
}
