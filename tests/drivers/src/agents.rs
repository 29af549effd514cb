//! The agent parity interpreter (issue 51, part 5): reads the scenarios of
//! `tests/agents/scenarios` (their format: `tests/agents/FORMAT.md`), runs each through a Rust
//! driver's `Agent` (`tests/agents.rs` implements [`Driver`] for tokio and threads) and reports
//! every mismatch against the scenario's expected outcomes, log lines and append count. The
//! Python and Node runners hold their bindings to the same files.
//!
//! The interpreter only translates: the scenario's host script ([`HostScript`]) and log faults
//! ([`LogScript`]) are what a driver's host and log consult; what each call returns is turned
//! into `{"ok": ...}` / `{"error": KIND}` by the driver's runner.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use coxswain_core::{Message, SharedMessage};
use coxswain_log::Entry;
use serde_json::{json, Value};

/// How long a step may take unless it says (`within_ms`).
pub const WITHIN: Duration = Duration::from_secs(10);

/// The scenarios' directory.
pub fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../agents/scenarios")
}

/// One scenario file.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The file's stem.
    pub name: String,
    /// Its JSON.
    pub body: Value,
}

impl Scenario {
    /// Every scenario, by name.
    ///
    /// # Errors
    ///
    /// The directory or a file that cannot be read or parsed, named.
    pub fn all() -> Result<Vec<Scenario>, String> {
        let dir = scenarios_dir();
        let entries =
            std::fs::read_dir(&dir).map_err(|error| format!("{}: {error}", dir.display()))?;
        let mut scenarios = Vec::new();
        for entry in entries {
            let path = entry.map_err(|error| error.to_string())?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let text = std::fs::read_to_string(&path)
                .map_err(|error| format!("{}: {error}", path.display()))?;
            let body: Value = serde_json::from_str(&text)
                .map_err(|error| format!("{}: {error}", path.display()))?;
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_owned();
            scenarios.push(Scenario { name, body });
        }
        scenarios.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(scenarios)
    }

    /// Why `driver` does not run this scenario (`skip`, or `needs.log-faults`), if it does not.
    pub fn skipped(&self, driver: &str) -> Option<String> {
        if let Some(why) = self.body["skip"][driver].as_str() {
            return Some(why.to_owned());
        }
        let needs = self.body["needs"]["log-faults"].as_array();
        needs
            .filter(|drivers| drivers.iter().any(|d| d == driver))
            .map(|_| "needs log-faults".to_owned())
    }

    /// The option `key` in milliseconds, if given.
    pub fn option_ms(&self, key: &str) -> Option<Duration> {
        self.body["options"][key]
            .as_u64()
            .map(Duration::from_millis)
    }

    /// The option `key`, if given.
    pub fn option(&self, key: &str) -> Option<usize> {
        self.body["options"][key]
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
    }

    /// The log's bytes before the agent opens (`given`).
    pub fn given(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        for line in self.body["given"].as_array().into_iter().flatten() {
            bytes.extend_from_slice(line.as_str().unwrap_or_default().as_bytes());
            bytes.push(b'\n');
        }
        bytes
    }

    /// The expected log lines.
    pub fn log(&self) -> Vec<String> {
        strings(&self.body["log"])
    }
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .map(|line| line.as_str().unwrap_or_default().to_owned())
        .collect()
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A scenario's message content, its `$nest` / `$text` shorthands expanded.
pub fn expand(content: &Value) -> Value {
    if let Some(depth) = content.get("$nest").and_then(Value::as_u64) {
        let mut value = json!([]);
        for _ in 1..depth {
            value = Value::Array(vec![value]);
        }
        return value;
    }
    if let Some(length) = content.get("$text").and_then(Value::as_u64) {
        return Value::String("x".repeat(usize::try_from(length).unwrap_or_default()));
    }
    content.clone()
}

/// A scenario's message (source `{kind: user}`).
pub fn message(value: &Value) -> Message {
    let id = value["id"].as_str().unwrap_or_default();
    Message::user(id, expand(&value["content"]))
}

/// `{"ok": value}`.
pub fn ok(value: Value) -> Value {
    json!({ "ok": value })
}

/// `{"error": kind}`.
pub fn error(kind: &str) -> Value {
    json!({ "error": kind })
}

/// Set when the scenario is over: a deaf call may return then.
#[derive(Clone, Debug, Default)]
pub struct Release(Arc<(Mutex<bool>, Condvar)>);

impl Release {
    /// Lets every deaf call return.
    pub fn set(&self) {
        *lock(&self.0 .0) = true;
        self.0 .1.notify_all();
    }

    /// Whether [`set`](Release::set) was called.
    pub fn is_set(&self) -> bool {
        *lock(&self.0 .0)
    }

    /// Blocks (a thread) until [`set`](Release::set).
    pub fn wait(&self) {
        let mut set = lock(&self.0 .0);
        while !*set {
            set = self.0 .1.wait(set).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// What a pre-step call answers.
#[derive(Clone, Debug)]
pub enum PreStepScript {
    /// Returns nothing (a binding's `None` / `undefined`).
    Nothing,
    /// Enters the claimed batch as it is.
    EnterClaimed,
    /// Enters these: the claimed message of an id, or a new message.
    Enter(Vec<Result<String, Message>>),
    /// Rejects the step.
    Reject,
    /// Fails with this text.
    Raise(String),
}

impl PreStepScript {
    /// The batch an [`Enter`](PreStepScript::Enter) names, from the claimed `messages`.
    pub fn batch<'a>(
        items: &[Result<String, Message>],
        claimed: impl Iterator<Item = &'a SharedMessage> + Clone,
    ) -> Vec<SharedMessage> {
        items
            .iter()
            .filter_map(|item| match item {
                Ok(id) => claimed.clone().find(|m| m.id().as_str() == id).cloned(),
                Err(message) => Some(SharedMessage::from(message.clone())),
            })
            .collect()
    }
}

/// What a step call does.
#[derive(Clone, Debug)]
pub enum StepScript {
    /// Answers this word: `completed`, `continue` or `max-tokens`.
    Answer(String),
    /// Returns nothing.
    Nothing,
    /// Fails with this text.
    Raise(String),
    /// Waits for its cancellation, then answers `completed`.
    UntilCancelled,
    /// Ignores its cancellation; returns `completed` only once the scenario is over.
    Deaf,
    /// Records these host events (type, data), then does the rest.
    Record(Vec<(String, Value)>, Box<StepScript>),
}

/// What a turn-stopping call answers.
#[derive(Clone, Debug)]
pub enum TurnStoppingScript {
    /// Done.
    Done,
    /// Returns nothing.
    Nothing,
    /// Fails with this text.
    Raise(String),
}

/// The scenario's host: which hooks it writes and what each call answers, in order.
#[derive(Clone, Debug)]
pub struct HostScript {
    hooks: Arc<Value>,
    calls: Arc<Mutex<HashMap<&'static str, usize>>>,
    /// Set once the scenario is over.
    pub release: Release,
}

impl HostScript {
    /// The host of `scenario`.
    pub fn of(scenario: &Scenario) -> Self {
        HostScript {
            hooks: Arc::new(scenario.body["hooks"].clone()),
            calls: Arc::default(),
            release: Release::default(),
        }
    }

    /// Whether the host writes `hook` (`pre_step`, `turn_stopping`; `step` always).
    pub fn writes(&self, hook: &str) -> bool {
        hook == "step" || !self.hooks[hook].is_null()
    }

    fn next(&self, hook: &'static str) -> Value {
        let script = &self.hooks[hook];
        let mut calls = lock(&self.calls);
        let call = calls.entry(hook).or_default();
        let answer = match script.as_array() {
            Some(list) if !list.is_empty() => list[(*call).min(list.len() - 1)].clone(),
            _ if hook == "step" => json!("completed"),
            _ => Value::Null,
        };
        *call += 1;
        answer
    }

    /// The next pre-step call's answer.
    pub fn pre_step(&self) -> PreStepScript {
        let answer = self.next("pre_step");
        match answer.as_str() {
            Some("nothing") => PreStepScript::Nothing,
            Some("reject") => PreStepScript::Reject,
            Some(_) => PreStepScript::EnterClaimed,
            None if answer.get("raise").is_some() => {
                PreStepScript::Raise(answer["raise"].as_str().unwrap_or_default().to_owned())
            }
            None => PreStepScript::Enter(
                answer["enter"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|item| match item.as_str() {
                        Some(id) => Ok(id.to_owned()),
                        None => Err(message(item)),
                    })
                    .collect(),
            ),
        }
    }

    /// The next step call's script.
    pub fn step(&self) -> StepScript {
        step_script(&self.next("step"))
    }

    /// The next turn-stopping call's answer.
    pub fn turn_stopping(&self) -> TurnStoppingScript {
        let answer = self.next("turn_stopping");
        match answer.as_str() {
            Some("nothing") => TurnStoppingScript::Nothing,
            Some(_) => TurnStoppingScript::Done,
            None => {
                TurnStoppingScript::Raise(answer["raise"].as_str().unwrap_or_default().to_owned())
            }
        }
    }
}

fn step_script(answer: &Value) -> StepScript {
    match answer.as_str() {
        Some("nothing") => StepScript::Nothing,
        Some("until-cancelled") => StepScript::UntilCancelled,
        Some("deaf") => StepScript::Deaf,
        Some(word) => StepScript::Answer(word.to_owned()),
        None if answer.get("raise").is_some() => {
            StepScript::Raise(answer["raise"].as_str().unwrap_or_default().to_owned())
        }
        None => {
            let events = answer["record"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| {
                    (
                        e["type"].as_str().unwrap_or_default().to_owned(),
                        e["data"].clone(),
                    )
                })
                .collect();
            StepScript::Record(events, Box::new(step_script(&answer["then"])))
        }
    }
}

/// A scripted fault of the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Cut back: not in the log.
    Fail,
    /// May or may not be in the log.
    Indeterminate,
    /// Another writer owns the session.
    Fenced,
}

#[derive(Debug, Default)]
struct LogState {
    faults: HashMap<usize, Fault>,
    opened: bool,
    calls: usize,
    written: usize,
}

/// The scenario's log faults, and the count of appends that went through.
#[derive(Clone, Debug, Default)]
pub struct LogScript(Arc<Mutex<LogState>>);

impl LogScript {
    /// The faults of `scenario`.
    pub fn of(scenario: &Scenario) -> Self {
        let mut state = LogState::default();
        for fault in scenario.body["faults"].as_array().into_iter().flatten() {
            let kind = match fault["fault"].as_str() {
                Some("indeterminate") => Fault::Indeterminate,
                Some("fenced") => Fault::Fenced,
                _ => Fault::Fail,
            };
            let at = fault["append"].as_u64().unwrap_or_default();
            state
                .faults
                .insert(usize::try_from(at).unwrap_or_default(), kind);
        }
        LogScript(Arc::new(Mutex::new(state)))
    }

    /// From now on appends are the agent's (not the open's repair).
    pub fn opened(&self) {
        lock(&self.0).opened = true;
    }

    /// Called by a driver's log before it appends `entries`: the fault to fail it with, if one
    /// is scripted for this append.
    pub fn before(&self, entries: &[Entry]) -> Option<Fault> {
        let mut state = lock(&self.0);
        if entries.is_empty() || !state.opened {
            return None;
        }
        state.calls += 1;
        let calls = state.calls;
        state.faults.get(&calls).copied()
    }

    /// Called by a driver's log once an append of the agent's went through.
    pub fn after(&self, entries: &[Entry]) {
        let mut state = lock(&self.0);
        if !entries.is_empty() && state.opened {
            state.written += 1;
        }
    }

    /// How many appends carrying records went through after open.
    pub fn written(&self) -> usize {
        lock(&self.0).written
    }
}

/// One call of a scenario's steps to the agent.
#[derive(Clone, Debug)]
pub enum Call {
    /// `followup`, `steer` or `inject`.
    Deliver(&'static str, Message),
    /// The guarded steer of S54: `steer_expecting(turn, message)`.
    SteerExpecting(u64, Message),
    /// `remove(id)`.
    Remove(String),
    /// `cancel({kind: user}, {keepInbox})`.
    Cancel {
        /// Keep the pending lists.
        keep_inbox: bool,
    },
    /// `resume`.
    Resume,
    /// `pending`.
    Pending,
    /// `fate(id)`.
    Fate(String),
    /// `when_idle`.
    WaitIdle,
    /// `close`.
    Close,
    /// `dispose`.
    Dispose,
}

/// An agent under test, driven by blocking calls.
pub trait AgentUnderTest {
    /// Makes `call` and gives its outcome (`{"ok": ...}` / `{"error": KIND}`), or
    /// `{"error": "timeout"}` past `within`.
    fn call(&mut self, call: Call, within: Duration) -> Value;
    /// The log's bytes as they are now.
    fn log_bytes(&self) -> Vec<u8>;
    /// Ends the agent after the last step (a deaf call was released already).
    fn finish(&mut self);
}

/// One Rust driver.
pub trait Driver {
    /// Its name in the scenarios' `skip` and `needs`.
    const NAME: &'static str;
    /// Opens an agent for `scenario` with its host and log scripts.
    ///
    /// # Errors
    ///
    /// Why it did not open (a mismatch).
    fn open(
        scenario: &Scenario,
        host: HostScript,
        log: LogScript,
    ) -> Result<Box<dyn AgentUnderTest>, String>;
}

fn lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .split('\n')
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect()
}

fn count_type(bytes: &[u8], kind: &str) -> usize {
    lines(bytes)
        .iter()
        .filter(|line| {
            serde_json::from_str::<Value>(line)
                .map(|record| record["type"] == kind)
                .unwrap_or(false)
        })
        .count()
}

/// Runs one scenario through `D`; returns every mismatch (empty: it holds).
pub fn run<D: Driver>(scenario: &Scenario) -> Vec<String> {
    let host = HostScript::of(scenario);
    let log = LogScript::of(scenario);
    let mut agent = match D::open(scenario, host.clone(), log.clone()) {
        Ok(agent) => agent,
        Err(why) => return vec![format!("open: {why}")],
    };
    log.opened();
    let mut mismatches = Vec::new();
    let steps = scenario.body["steps"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (index, step) in steps.iter().enumerate() {
        let within = step["within_ms"]
            .as_u64()
            .map_or(WITHIN, Duration::from_millis);
        let id = || step["id"].as_str().unwrap_or_default().to_owned();
        let got = match step["do"].as_str().unwrap_or_default() {
            "followup" => agent.call(Call::Deliver("followup", message(&step["message"])), within),
            "steer" => match step["turn"].as_u64() {
                Some(turn) => agent.call(
                    Call::SteerExpecting(turn, message(&step["message"])),
                    within,
                ),
                None => agent.call(Call::Deliver("steer", message(&step["message"])), within),
            },
            "inject" => agent.call(Call::Deliver("inject", message(&step["message"])), within),
            "remove" => agent.call(Call::Remove(id()), within),
            "cancel" => {
                let keep_inbox = step["keep_inbox"].as_bool().unwrap_or(false);
                agent.call(Call::Cancel { keep_inbox }, within)
            }
            "resume" => agent.call(Call::Resume, within),
            "pending" => agent.call(Call::Pending, within),
            "fate" => agent.call(Call::Fate(id()), within),
            "wait-idle" => agent.call(Call::WaitIdle, within),
            "close" => agent.call(Call::Close, within),
            "dispose" => agent.call(Call::Dispose, within),
            "release" => {
                host.release.set();
                Value::Null
            }
            "sleep" => {
                std::thread::sleep(Duration::from_millis(step["ms"].as_u64().unwrap_or(0)));
                Value::Null
            }
            "await-record" => {
                let kind = step["type"].as_str().unwrap_or_default();
                let count = usize::try_from(step["count"].as_u64().unwrap_or(1)).unwrap_or(1);
                let deadline = Instant::now() + within;
                loop {
                    if count_type(&agent.log_bytes(), kind) >= count {
                        break ok(Value::Null);
                    }
                    if Instant::now() > deadline {
                        break error("timeout");
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            other => error(&format!("the runner has no step {other}")),
        };
        if let Some(expected) = step.get("expect") {
            if got != *expected {
                let what = step["id"]
                    .as_str()
                    .or_else(|| step["message"]["id"].as_str())
                    .unwrap_or_default();
                let what: String = what.chars().take(16).collect();
                mismatches.push(format!(
                    "step {index} ({} {what}): expected {expected}, got {got}",
                    step["do"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    host.release.set();
    agent.finish();
    let got = lines(&agent.log_bytes());
    let expected = scenario.log();
    for i in 0..got.len().max(expected.len()) {
        let want = expected.get(i).map_or("(none)", String::as_str);
        let have = got.get(i).map_or("(none)", String::as_str);
        if want != have {
            mismatches.push(format!("log line {}: expected {want}, got {have}", i + 1));
        }
    }
    if let Some(appends) = scenario.body["appends"].as_u64() {
        let written = log.written() as u64;
        if written != appends {
            mismatches.push(format!("appends: expected {appends}, got {written}"));
        }
    }
    mismatches
}

/// Runs every scenario through `D`: the report (every mismatch of every scenario, and every
/// skipped one) and how many scenarios failed.
///
/// # Errors
///
/// The scenarios cannot be read.
pub fn run_all<D: Driver>() -> Result<(String, usize), String> {
    let scenarios = Scenario::all()?;
    if scenarios.len() < 20 {
        return Err(format!(
            "{} scenarios in {}",
            scenarios.len(),
            scenarios_dir().display()
        ));
    }
    let (mut report, mut failed) = (String::new(), 0);
    for scenario in &scenarios {
        if let Some(why) = scenario.skipped(D::NAME) {
            report.push_str(&format!("SKIP {} ({}): {why}\n", scenario.name, D::NAME));
            continue;
        }
        let mismatches = run::<D>(scenario);
        if mismatches.is_empty() {
            report.push_str(&format!("ok   {} ({})\n", scenario.name, D::NAME));
        } else {
            failed += 1;
            report.push_str(&format!("FAIL {} ({}):\n", scenario.name, D::NAME));
            for mismatch in mismatches {
                report.push_str(&format!("       {mismatch}\n"));
            }
        }
    }
    Ok((report, failed))
}
