//! `coxswain run SCRIPT [--log PATH]`: a real agent session on the tokio adapter, with a scripted
//! host instead of a model service. It writes the session's JSON-lines log (to `PATH`, or to a
//! new temp dir; an existing log is resumed), prints a timeline of turns, steps, host events and
//! inbox changes as they happen, checks the log with `verify`, and ends with a summary.
//!
//! # Session script (JSON)
//!
//! ```text
//! {
//!   "note":   "free text, printed first",
//!   "stepMs": 200,                      // how long an unscripted step takes (default 200)
//!   "actions": [ {"at": MS, "note": "…", ACTION}, … ],   // MS since the start of the run
//!   "host": {                           // the scripted host's answers; unscripted calls get
//!     "preStep":      {"T.S": REPLY},   //   enter the claimed batch at once,
//!     "step":         {"T.S": REPLY},   //   completed after stepMs,
//!     "turnStopping": {"T":   REPLY}    //   done at once
//!   }
//! }
//! REPLY  = {"ms": MS, "answer": ANSWER, "cleanupMs": MS, "during": [{"at": MS, ACTION}, …]}
//!          `ms`: how long the call takes; `during`: actions at MS after the call began; when
//!          the turn's token trips, the call stops, waits `cleanupMs`, and answers (S40).
//! ANSWER = preStep: "enter" (the claimed batch) | {"enter": [MESSAGE…]} | "reject" | {"fail": ERR}
//!          step: "completed" | "max-tokens" | "continue" | {"fail": ERR}
//!          turnStopping: "done" | {"fail": ERR}          ERR = {"message": "…", "code": "…"}
//! ACTION = {"followup": MESSAGE} | {"steer": MESSAGE} | {"inject": MESSAGE}
//!        | {"send": {"message": MESSAGE, "target": "next-turn"|"next-step", "wakeup": BOOL}}
//!        | {"remove": "ID"} | {"replace": {"id": "ID", "message": MESSAGE}}
//!        | {"prepend": {"target": TARGET, "message": MESSAGE}} | {"clear": {}}
//!        | {"cancel": {"cause": {"kind": "user"|"parent"|"disposed"} | {"kind": "hook",
//!                      "reason": "…"}, "keepInbox": BOOL}}
//!        | {"maintenance": {"ms": MS}}     a job of MS (stops early when cancelled)
//!        | {"waitIdle": {}}                wait until no turn or maintenance runs
//!        | {"reopen": {}}                  close the agent and open its log again (resume)
//!        | {"dispose": {}}
//!        | {"record": {"type": "…", "data": …}}   a host event (only in a step's `during`)
//! MESSAGE = {"id": "…", "content": …, "source": {"kind": "…"}}  (source defaults to user)
//! ```
//!
//! Inside a host reply's `during`, `maintenance`, `waitIdle`, `reopen` and `dispose` are not
//! allowed (they wait for the very call that runs them). The runner decides nothing: every
//! action is one call on the [`Agent`], and every answer is the script's.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use coxswain_core::{
    CancelCause, Event, Message, Notification, PreStepAnswer, Status, StepAnswer, Target,
    TurnEndReason, TurnStoppingAnswer,
};
use coxswain_log::Entry;
use coxswain_tokio::{
    Agent, AgentError, Ending, FileLog, Host, Options, PreStepContext, Recovery, StepContext,
    TurnStoppingContext, Update,
};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::verify::{verify_bytes, Verdict};

// ----- the script -----

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Script {
    #[serde(default)]
    note: Option<String>,
    #[serde(default = "default_step_ms")]
    step_ms: u64,
    #[serde(default)]
    actions: Vec<Timed>,
    #[serde(default)]
    host: HostScript,
}

fn default_step_ms() -> u64 {
    200
}

#[derive(Clone, Debug, Deserialize)]
struct Timed {
    at: u64,
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
    #[serde(flatten)]
    action: Action,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
enum Action {
    Followup(Value),
    Steer(Value),
    Inject(Value),
    Send {
        message: Value,
        target: Target,
        #[serde(default)]
        wakeup: bool,
    },
    Remove(String),
    Replace {
        id: String,
        message: Value,
    },
    Prepend {
        target: Target,
        message: Value,
    },
    Clear {},
    Cancel {
        #[serde(default = "user_cause")]
        cause: CancelCause,
        #[serde(default)]
        keep_inbox: bool,
    },
    Maintenance {
        ms: u64,
    },
    WaitIdle {},
    Reopen {},
    Dispose {},
    Record {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        data: Value,
    },
}

fn user_cause() -> CancelCause {
    CancelCause::User
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HostScript {
    #[serde(default)]
    pre_step: BTreeMap<String, Reply<PreStepReply>>,
    #[serde(default)]
    step: BTreeMap<String, Reply<StepAnswer>>,
    #[serde(default)]
    turn_stopping: BTreeMap<String, Reply<TurnStoppingAnswer>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[serde(bound(deserialize = "A: Deserialize<'de>"))]
struct Reply<A> {
    #[serde(default)]
    ms: Option<u64>,
    #[serde(default)]
    answer: Option<A>,
    #[serde(default)]
    cleanup_ms: u64,
    #[serde(default)]
    during: Vec<Timed>,
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
enum PreStepReply {
    Answer(PreStepAnswer),
    /// `"enter"`: the claimed batch as it is.
    AsClaimed(String),
}

/// Parses and checks a script.
pub(crate) fn parse_script(text: &str) -> Result<Script, String> {
    let script: Script = serde_json::from_str(text).map_err(|e| e.to_string())?;
    for timed in &script.actions {
        check_action(&timed.action, None).map_err(|e| format!("action at {} ms: {e}", timed.at))?;
    }
    let host = &script.host;
    let steps = host
        .pre_step
        .iter()
        .map(|(k, r)| (k, "preStep", &r.during, r.ms, true));
    let steps = steps.chain(
        host.step
            .iter()
            .map(|(k, r)| (k, "step", &r.during, r.ms, true)),
    );
    let stops = host
        .turn_stopping
        .iter()
        .map(|(k, r)| (k, "turnStopping", &r.during, r.ms, false));
    for (key, kind, during, ms, stepped) in steps.chain(stops) {
        let well_formed = match key.split_once('.') {
            Some((turn, step)) => {
                stepped && turn.parse::<u64>().is_ok() && step.parse::<u64>().is_ok()
            }
            None => !stepped && key.parse::<u64>().is_ok(),
        };
        if !well_formed {
            let shape = if stepped { "TURN.STEP" } else { "TURN" };
            return Err(format!("host.{kind} key `{key}` is not {shape}"));
        }
        for timed in during {
            check_action(&timed.action, Some(kind))
                .map_err(|e| format!("host.{kind}.{key}: {e}"))?;
            if ms.is_some_and(|ms| timed.at > ms) {
                return Err(format!(
                    "host.{kind}.{key}: an action at {} ms after the answer",
                    timed.at
                ));
            }
        }
    }
    for (key, reply) in &host.pre_step {
        if let Some(PreStepReply::AsClaimed(word)) = &reply.answer {
            if word != "enter" {
                return Err(format!("host.preStep.{key}: unknown answer `{word}`"));
            }
        }
    }
    Ok(script)
}

/// `host`: the kind of host call whose `during` holds the action (`None` at the top level).
fn check_action(action: &Action, host: Option<&str>) -> Result<(), String> {
    let messages: Vec<&Value> = match action {
        Action::Followup(m) | Action::Steer(m) | Action::Inject(m) => vec![m],
        Action::Send { message, .. }
        | Action::Replace { message, .. }
        | Action::Prepend { message, .. } => vec![message],
        Action::Record { .. } if host != Some("step") => {
            return Err("`record` is a host event: only in a step's `during`".into())
        }
        Action::Maintenance { .. }
        | Action::WaitIdle {}
        | Action::Reopen {}
        | Action::Dispose {}
            if host.is_some() =>
        {
            return Err("this action waits for the host call that would run it".into())
        }
        _ => vec![],
    };
    messages
        .into_iter()
        .try_for_each(|m| to_message(m).map(drop))
}

/// A script message: `{id, content, source?}`; the source defaults to `{"kind": "user"}`.
fn to_message(value: &Value) -> Result<Message, String> {
    let mut object = value
        .as_object()
        .cloned()
        .ok_or_else(|| format!("a message is an object with an `id`, not {value}"))?;
    object
        .entry("source")
        .or_insert_with(|| json!({"kind": "user"}));
    Message::from_json(&Value::Object(object))
        .ok_or_else(|| format!("a message needs a string `id`: {value}"))
}

// ----- the timeline -----

/// Counts for the summary, from the updates.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) turns: BTreeMap<&'static str, usize>,
    pub(crate) steps: usize,
    pub(crate) host_events: usize,
    pub(crate) delivered: usize,
    pub(crate) claimed: usize,
    pub(crate) discarded: usize,
    pub(crate) rejected: usize,
    pub(crate) pending: usize,
}

struct Timeline {
    start: Instant,
    stats: Mutex<Stats>,
    quiet: bool,
}

impl Timeline {
    fn line(&self, seq: Option<u64>, text: impl AsRef<str>) {
        if self.quiet {
            return;
        }
        let ms = self.start.elapsed().as_millis();
        match seq {
            Some(seq) => println!("{ms:>6} ms  #{seq:<4} {}", text.as_ref()),
            None => println!("{ms:>6} ms        {}", text.as_ref()),
        }
    }

    fn stats(&self) -> std::sync::MutexGuard<'_, Stats> {
        self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn show(&self, update: &Update) {
        match update {
            Update::Recorded { seq, entry } => {
                let text = match entry {
                    Entry::Machine(event) => self.event(event),
                    Entry::Host(event) => {
                        self.stats().host_events += 1;
                        format!("      {} {}", event.kind(), preview(event.data()))
                    }
                };
                self.line(Some(*seq), text);
            }
            Update::Notified(notification) => self.notification(notification),
            Update::Ended(ending) => self.line(
                None,
                match ending {
                    Ending::Disposed => "agent disposed".to_owned(),
                    Ending::Closed => "agent closed".to_owned(),
                    Ending::Stopped(error) => format!("agent stopped: {error}"),
                    _ => "agent ended".to_owned(),
                },
            ),
            _ => {}
        }
    }

    fn event(&self, event: &Event) -> String {
        match event {
            Event::Spliced(splice) => {
                let target = splice.target.as_str();
                let ids: Vec<&str> = splice.inserted.iter().map(|m| m.id().as_str()).collect();
                let waking = if splice.wakeup { " (waking)" } else { "" };
                let at = splice.start;
                match (
                    splice.removed_count,
                    ids.is_empty(),
                    splice.outcome.is_some(),
                ) {
                    (_, false, false) => {
                        let content = splice.inserted.first().and_then(|m| m.content());
                        format!(
                            "inbox {target} @{at} + {}{waking} {}",
                            ids.join(", "),
                            content.map(preview).unwrap_or_default()
                        )
                    }
                    (n, true, false) => format!("inbox {target} @{at} claim ×{n}"),
                    (n, true, true) => format!("inbox {target} @{at} cancel ×{n}"),
                    (n, false, true) => {
                        format!(
                            "inbox {target} @{at} replace ×{n} with {}{waking}",
                            ids.join(", ")
                        )
                    }
                }
            }
            Event::TurnStart { turn } => format!("turn {turn} starts"),
            Event::StepStart { turn, step } => {
                self.stats().steps += 1;
                format!("  step {turn}.{step} starts")
            }
            Event::UserMessage(message) => format!(
                "    user/message {} {}",
                message.id(),
                message.content().map(preview).unwrap_or_default()
            ),
            Event::StepEnd { turn, step } => format!("  step {turn}.{step} ends"),
            Event::TurnEnd { turn, reason } => {
                let (kind, text) = describe_reason(reason);
                *self.stats().turns.entry(kind).or_default() += 1;
                format!("turn {turn} ends: {text}")
            }
        }
    }

    fn notification(&self, notification: &Notification) {
        match notification {
            Notification::Inserted { .. } => self.stats().delivered += 1,
            Notification::Discarded { message } => {
                self.stats().discarded += 1;
                self.line(None, format!("discarded {}", message.id()));
            }
            Notification::Claimed { message, turn } => {
                self.stats().claimed += 1;
                self.line(None, format!("claimed {} by turn {turn}", message.id()));
            }
            Notification::Status { status } => self.line(
                None,
                match status {
                    Status::Running => "status running",
                    Status::Idle => "status idle",
                },
            ),
            Notification::Error { turn, step, error } => self.line(
                None,
                format!(
                    "error in turn {turn} step {step}: {} ({})",
                    error.message, error.code
                ),
            ),
        }
    }
}

fn describe_reason(reason: &TurnEndReason) -> (&'static str, String) {
    match reason {
        TurnEndReason::Completed => ("completed", "completed".into()),
        TurnEndReason::MaxTokens => ("max-tokens", "max-tokens".into()),
        TurnEndReason::Blocked => ("blocked", "blocked".into()),
        TurnEndReason::Aborted { reason } => ("aborted", format!("aborted ({})", cause(reason))),
        TurnEndReason::Error { error } => {
            ("error", format!("error {} ({})", error.code, error.message))
        }
        TurnEndReason::Interrupted => ("interrupted", "interrupted (crash repair)".into()),
    }
}

fn cause(cause: &CancelCause) -> String {
    match cause {
        CancelCause::User => "user".into(),
        CancelCause::Parent => "parent".into(),
        CancelCause::Hook { reason } => format!("hook: {reason}"),
        CancelCause::Disposed => "disposed".into(),
    }
}

/// A short one-line view of a JSON value.
fn preview(value: &Value) -> String {
    let text = match value {
        Value::String(s) => format!("\"{s}\""),
        other => other.to_string(),
    };
    let text = text.replace('\n', " ");
    if text.chars().count() > 60 {
        let cut: String = text.chars().take(57).collect();
        format!("{cut}…")
    } else {
        text
    }
}

fn describe_message(message: &Message) -> String {
    format!(
        "{} {}",
        message.id(),
        message.content().map(preview).unwrap_or_default()
    )
}

// ----- the scripted host -----

struct ScriptedHost {
    timeline: Arc<Timeline>,
    script: Arc<HostScript>,
    step_ms: u64,
}

impl ScriptedHost {
    /// Plays a reply: its `during` actions, then the rest of its time; stops when `cancel`
    /// trips (then waits `cleanup_ms`). Returns whether it was cancelled, and after how long.
    async fn play<A>(
        &self,
        reply: Option<&Reply<A>>,
        default_ms: u64,
        agent: &Agent,
        step: Option<&StepContext>,
        cancel: &CancellationToken,
    ) -> Option<u128> {
        let start = Instant::now();
        let ms = reply.and_then(|r| r.ms).unwrap_or(default_ms);
        let mut during: Vec<&Timed> = reply.map(|r| r.during.iter().collect()).unwrap_or_default();
        during.sort_by_key(|t| t.at);
        let cleanup = reply.map_or(0, |r| r.cleanup_ms);
        let at = |ms: u64| start + Duration::from_millis(ms);
        for timed in during {
            tokio::select! {
                () = tokio::time::sleep_until(at(timed.at)) => {}
                () = cancel.cancelled() => return Some(self.cleanup(start, cleanup).await),
            }
            perform(&self.timeline, agent, step, "  host > ", &timed.action).await;
        }
        tokio::select! {
            () = tokio::time::sleep_until(at(ms)) => None,
            () = cancel.cancelled() => Some(self.cleanup(start, cleanup).await),
        }
    }

    async fn cleanup(&self, start: Instant, cleanup_ms: u64) -> u128 {
        let seen = start.elapsed().as_millis();
        tokio::time::sleep(Duration::from_millis(cleanup_ms)).await;
        seen
    }

    fn answered(&self, call: &str, answer: &str, cancelled: Option<u128>) {
        let how = match cancelled {
            Some(ms) => format!(" (saw the abort after {ms} ms)"),
            None => String::new(),
        };
        self.timeline
            .line(None, format!("  host answers {call}: {answer}{how}"));
    }
}

impl Host for ScriptedHost {
    async fn pre_step(&self, cx: PreStepContext) -> PreStepAnswer {
        let key = format!("{}.{}", cx.turn, cx.step);
        let reply = self.script.pre_step.get(&key);
        let cancelled = self.play(reply, 0, &cx.agent, None, &cx.cancel).await;
        let answer = match reply.and_then(|r| r.answer.clone()) {
            Some(PreStepReply::Answer(answer)) => answer,
            Some(PreStepReply::AsClaimed(_)) | None => PreStepAnswer::Enter(cx.messages),
        };
        if reply.is_some() || cancelled.is_some() {
            let text = match &answer {
                PreStepAnswer::Enter(batch) => {
                    let ids: Vec<&str> = batch.iter().map(|m| m.id().as_str()).collect();
                    format!("enter [{}]", ids.join(", "))
                }
                PreStepAnswer::Reject => "reject".into(),
                PreStepAnswer::Fail(error) => format!("fail {}", error.code),
            };
            self.answered(&format!("preStep {key}"), &text, cancelled);
        }
        answer
    }

    async fn step(&self, cx: StepContext) -> StepAnswer {
        let key = format!("{}.{}", cx.turn, cx.step);
        let reply = self.script.step.get(&key);
        let cancelled = self
            .play(reply, self.step_ms, &cx.agent, Some(&cx), &cx.cancel)
            .await;
        let answer = reply
            .and_then(|r| r.answer.clone())
            .unwrap_or(StepAnswer::Completed);
        let text = match &answer {
            StepAnswer::Completed => "completed".to_owned(),
            StepAnswer::MaxTokens => "max-tokens".to_owned(),
            StepAnswer::Continue => "continue (tools ran)".to_owned(),
            StepAnswer::Fail(error) => format!("fail {}", error.code),
        };
        self.answered(&format!("step {key}"), &text, cancelled);
        answer
    }

    async fn turn_stopping(&self, cx: TurnStoppingContext) -> TurnStoppingAnswer {
        let key = cx.turn.to_string();
        let reply = self.script.turn_stopping.get(&key);
        let cancelled = self.play(reply, 0, &cx.agent, None, &cx.cancel).await;
        let answer = reply
            .and_then(|r| r.answer.clone())
            .unwrap_or(TurnStoppingAnswer::Done);
        if reply.is_some() || cancelled.is_some() {
            let text = match &answer {
                TurnStoppingAnswer::Done => "done".to_owned(),
                TurnStoppingAnswer::Fail(error) => format!("fail {}", error.code),
            };
            self.answered(&format!("turnStopping {key}"), &text, cancelled);
        }
        answer
    }
}

/// One delivery, edit, cancel or host event: a single call on the agent.
async fn perform(
    timeline: &Timeline,
    agent: &Agent,
    step: Option<&StepContext>,
    who: &str,
    action: &Action,
) {
    let message = |value: &Value| to_message(value);
    let (label, result): (String, Result<Option<&str>, String>) = match action {
        Action::Followup(m) | Action::Steer(m) | Action::Inject(m) => match message(m) {
            Err(error) => ("deliver".into(), Err(error)),
            Ok(m) => {
                let (verb, target, wakeup) = match action {
                    Action::Followup(_) => ("followup", Target::NextTurn, true),
                    Action::Steer(_) => ("steer", Target::NextStep, true),
                    _ => ("inject", Target::NextStep, false),
                };
                let label = format!("{verb} {}", describe_message(&m));
                timeline.line(None, format!("{who}{label}"));
                let result = agent.send(m, target, wakeup).await;
                (label, result.map(|()| None).map_err(|e| e.to_string()))
            }
        },
        Action::Send {
            message: m,
            target,
            wakeup,
        } => match message(m) {
            Err(error) => ("send".into(), Err(error)),
            Ok(m) => {
                let label = format!(
                    "send {} to {} ({})",
                    describe_message(&m),
                    target.as_str(),
                    if *wakeup { "waking" } else { "quiet" }
                );
                timeline.line(None, format!("{who}{label}"));
                let result = agent.send(m, *target, *wakeup).await;
                (label, result.map(|()| None).map_err(|e| e.to_string()))
            }
        },
        Action::Remove(id) => {
            let label = format!("remove {id}");
            timeline.line(None, format!("{who}{label}"));
            let result = agent.remove(id.as_str()).await;
            (label, not_pending(result))
        }
        Action::Replace { id, message: m } => match message(m) {
            Err(error) => ("replace".into(), Err(error)),
            Ok(m) => {
                let label = format!("replace {id} with {}", describe_message(&m));
                timeline.line(None, format!("{who}{label}"));
                let result = agent.replace(id.as_str(), m).await;
                (label, not_pending(result))
            }
        },
        Action::Prepend { target, message: m } => match message(m) {
            Err(error) => ("prepend".into(), Err(error)),
            Ok(m) => {
                let label = format!("prepend {} to {}", describe_message(&m), target.as_str());
                timeline.line(None, format!("{who}{label}"));
                let result = agent.prepend(*target, m).await;
                (label, result.map(|()| None).map_err(|e| e.to_string()))
            }
        },
        Action::Clear {} => {
            timeline.line(None, format!("{who}clear"));
            let result = agent.clear().await;
            (
                "clear".into(),
                result.map(|()| None).map_err(|e| e.to_string()),
            )
        }
        Action::Cancel {
            cause: c,
            keep_inbox,
        } => {
            let label = format!(
                "cancel ({}){}",
                cause(c),
                if *keep_inbox { ", keep inbox" } else { "" }
            );
            timeline.line(None, format!("{who}{label}"));
            let result = agent.cancel(c.clone(), *keep_inbox).await;
            (label, result.map(|()| None).map_err(|e| e.to_string()))
        }
        Action::Record { kind, data } => {
            let label = format!("record {kind}");
            let result = match step {
                Some(cx) => cx.record(kind.clone(), data.clone()).await,
                None => Err(AgentError::StepClosed),
            };
            (label, result.map(|()| None).map_err(|e| e.to_string()))
        }
        Action::Maintenance { .. }
        | Action::WaitIdle {}
        | Action::Reopen {}
        | Action::Dispose {} => ("(runner action)".into(), Err("not allowed here".into())),
    };
    match result {
        Ok(None) => {}
        Ok(Some(note)) => timeline.line(None, format!("{who}{label}: {note}")),
        Err(error) => {
            timeline.stats().rejected += 1;
            timeline.line(None, format!("{who}{label}: rejected: {error}"));
        }
    }
}

fn not_pending(result: Result<bool, AgentError>) -> Result<Option<&'static str>, String> {
    match result {
        Ok(true) => Ok(None),
        Ok(false) => Ok(Some("not pending, nothing to do")),
        Err(error) => Err(error.to_string()),
    }
}

// ----- the runner -----

struct Current {
    agent: Agent,
    printer: JoinHandle<()>,
}

async fn open_agent(
    timeline: &Arc<Timeline>,
    host: &Arc<HostScript>,
    step_ms: u64,
    path: &Path,
) -> Result<Current, String> {
    let log = FileLog::open(path)
        .await
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let host = ScriptedHost {
        timeline: timeline.clone(),
        script: host.clone(),
        step_ms,
    };
    let (agent, recovery) = Agent::open_with(Options::named("coxswain-run"), host, log)
        .await
        .map_err(|e| format!("cannot open the agent on {}: {e}", path.display()))?;
    if recovery.records > 0 {
        timeline.line(None, describe_recovery(&recovery));
    }
    if recovery.interrupted_turn.is_some() {
        *timeline.stats().turns.entry("interrupted").or_default() += 1;
    }
    let mut updates = agent.subscribe();
    let printer_timeline = timeline.clone();
    let printer = tokio::spawn(async move {
        loop {
            match updates.recv().await {
                Ok(update) => {
                    printer_timeline.show(&update);
                    if matches!(update, Update::Ended(_)) {
                        break;
                    }
                }
                Err(RecvError::Lagged(n)) => {
                    printer_timeline.line(None, format!("(the timeline skipped {n} updates)"))
                }
                Err(RecvError::Closed) => break,
            }
        }
    });
    Ok(Current { agent, printer })
}

fn describe_recovery(recovery: &Recovery) -> String {
    let mut text = format!(
        "resumed from the log: {} records, last turn {}",
        recovery.records, recovery.last_turn
    );
    if let Some(torn) = recovery.torn_tail {
        let _ = write!(text, "; dropped a torn tail ({torn})");
    }
    if let Some(turn) = recovery.interrupted_turn {
        let _ = write!(
            text,
            "; turn {turn} closed `interrupted` ({} closers)",
            recovery.closers
        );
    }
    let _ = write!(
        text,
        "; parked: {} next-turn, {} next-step",
        recovery.pending_next_turn, recovery.pending_next_step
    );
    text
}

/// What a run produced.
pub(crate) struct Outcome {
    pub(crate) stats: Stats,
    pub(crate) verdict: Verdict,
}

/// Runs a script against a log at `path`; prints the timeline unless `quiet`.
pub(crate) async fn session(script: Script, path: &Path, quiet: bool) -> Result<Outcome, String> {
    let timeline = Arc::new(Timeline {
        start: Instant::now(),
        stats: Mutex::default(),
        quiet,
    });
    let host = Arc::new(script.host);
    let mut current = open_agent(&timeline, &host, script.step_ms, path).await?;
    let mut actions = script.actions;
    actions.sort_by_key(|t| t.at);
    let mut jobs = Vec::new();
    for timed in actions {
        tokio::time::sleep_until(timeline.start + Duration::from_millis(timed.at)).await;
        let agent = current.agent.clone();
        match timed.action {
            Action::Reopen {} => {
                timeline.line(
                    None,
                    "> reopen: close the agent, then open it again from its log",
                );
                let _ = agent.close().await;
                let _ = current.printer.await;
                current = open_agent(&timeline, &host, script.step_ms, path).await?;
            }
            Action::WaitIdle {} => {
                timeline.line(None, "> wait until idle");
                if let Err(error) = agent.when_idle().await {
                    timeline.line(None, format!("> wait until idle: {error}"));
                }
            }
            Action::Dispose {} => {
                timeline.line(None, "> dispose");
                if let Err(error) = agent.dispose().await {
                    timeline.stats().rejected += 1;
                    timeline.line(None, format!("> dispose: rejected: {error}"));
                }
            }
            Action::Maintenance { ms } => {
                timeline.line(None, format!("> maintenance job of {ms} ms"));
                let job_timeline = timeline.clone();
                jobs.push(tokio::spawn(async move {
                    let result = agent
                        .run_maintenance(move |token| async move {
                            let start = Instant::now();
                            tokio::select! {
                                () = tokio::time::sleep(Duration::from_millis(ms)) => None,
                                () = token.cancelled() => Some(start.elapsed().as_millis()),
                            }
                        })
                        .await;
                    let text = match result {
                        Ok(None) => "maintenance job done".to_owned(),
                        Ok(Some(ms)) => format!("maintenance job saw the abort after {ms} ms"),
                        Err(error) => {
                            job_timeline.stats().rejected += 1;
                            format!("> maintenance: rejected: {error}")
                        }
                    };
                    job_timeline.line(None, text);
                }));
            }
            action => perform(&timeline, &agent, None, "> ", &action).await,
        }
    }
    for job in jobs {
        let _ = job.await;
    }
    if current.agent.ending().is_none() {
        let _ = current.agent.when_idle().await;
        if let Ok(pending) = current.agent.pending().await {
            timeline.stats().pending = pending.next_turn.len() + pending.next_step.len();
        }
        let _ = current.agent.close().await;
    }
    let _ = current.printer.await;
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|e| format!("cannot read back {}: {e}", path.display()))?;
    let verdict = verify_bytes(&bytes);
    let stats = std::mem::take(&mut *timeline.stats());
    Ok(Outcome { stats, verdict })
}

fn summary(stats: &Stats) -> String {
    let turns: usize = stats.turns.values().sum();
    let reasons: Vec<String> = stats
        .turns
        .iter()
        .map(|(kind, n)| format!("{n} {kind}"))
        .collect();
    format!(
        "{turns} turns ({}), {} steps, {} host events; messages: {} delivered, {} claimed, \
         {} discarded, {} pending; {} actions rejected",
        reasons.join(", "),
        stats.steps,
        stats.host_events,
        stats.delivered,
        stats.claimed,
        stats.discarded,
        stats.pending,
        stats.rejected
    )
}

/// The log goes to a new directory under the system temp dir, kept after the run.
fn temp_log() -> Result<PathBuf, String> {
    let dir = tempfile::Builder::new()
        .prefix("coxswain-run-")
        .tempdir()
        .map_err(|e| format!("cannot make a temp dir: {e}"))?
        .keep();
    Ok(dir.join("session.jsonl"))
}

pub(crate) fn run(script_path: &Path, log: Option<&Path>) -> ExitCode {
    let script = match std::fs::read_to_string(script_path)
        .map_err(|e| e.to_string())
        .and_then(|text| parse_script(&text))
    {
        Ok(script) => script,
        Err(error) => {
            eprintln!("{}: {error}", script_path.display());
            return ExitCode::FAILURE;
        }
    };
    let path = match log {
        Some(path) => path.to_owned(),
        None => match temp_log() {
            Ok(path) => path,
            Err(error) => {
                eprintln!("{error}");
                return ExitCode::FAILURE;
            }
        },
    };
    if let Some(note) = &script.note {
        println!("{note}");
    }
    println!("log: {}", path.display());
    println!();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cannot start the tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = match runtime.block_on(session(script, &path, false)) {
        Ok(outcome) => outcome,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    println!();
    println!("summary: {}", summary(&outcome.stats));
    match outcome.verdict {
        Verdict::Ok {
            events,
            turns,
            repair,
        } => {
            println!(
                "log: {} ({events} records) verified: ok ({events} events, {turns} turns)",
                path.display()
            );
            if !repair.is_empty() {
                println!("     a later open will repair it: {}", repair.join("; "));
            }
            println!(
                "     check it again with: coxswain verify {}",
                path.display()
            );
            ExitCode::SUCCESS
        }
        Verdict::Violation { line, message } => {
            println!("log: {}: line {line}: {message}", path.display());
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUICKSTART: &str = include_str!("../../../examples/quickstart.json");
    const CANCEL_AND_RESUME: &str = include_str!("../../../examples/cancel-and-resume.json");

    #[test]
    fn every_action_parses() {
        let script = parse_script(
            r#"{"actions": [
                {"at": 0, "followup": {"id": "a", "content": "x"}},
                {"at": 0, "steer": {"id": "b", "content": "x", "source": {"kind": "plugin"}}},
                {"at": 0, "inject": {"id": "c", "content": "x"}},
                {"at": 0, "send": {"message": {"id": "d"}, "target": "next-turn", "wakeup": false}},
                {"at": 0, "remove": "a"},
                {"at": 0, "replace": {"id": "b", "message": {"id": "b2"}}},
                {"at": 0, "prepend": {"target": "next-step", "message": {"id": "e"}}},
                {"at": 0, "clear": {}, "note": "a comment"},
                {"at": 0, "cancel": {"cause": {"kind": "hook", "reason": "r"}, "keepInbox": true}},
                {"at": 0, "cancel": {}},
                {"at": 0, "maintenance": {"ms": 5}},
                {"at": 0, "waitIdle": {}},
                {"at": 0, "reopen": {}},
                {"at": 0, "dispose": {}}
            ], "host": {
                "preStep": {"1.1": {"answer": "enter"}, "2.1": {"answer": "reject"},
                            "3.1": {"answer": {"enter": [{"id": "z"}]}}},
                "step": {"1.1": {"ms": 10, "answer": "max-tokens", "cleanupMs": 3,
                                 "during": [{"at": 5, "record": {"type": "tool/call"}}]}},
                "turnStopping": {"1": {"answer": {"fail": {"message": "m", "code": "c"}}}}
            }}"#,
        )
        .unwrap();
        assert_eq!(script.actions.len(), 14);
        assert!(matches!(
            &script.actions[9].action,
            Action::Cancel {
                cause: CancelCause::User,
                keep_inbox: false
            }
        ));
        assert_eq!(script.step_ms, 200);
    }

    #[test]
    fn scripts_that_cannot_run_are_refused() {
        for (text, error) in [
            (
                r#"{"actions": [{"at": 0, "record": {"type": "x"}}]}"#,
                "only in a step",
            ),
            (
                r#"{"actions": [{"at": 0, "followup": {"content": "x"}}]}"#,
                "string `id`",
            ),
            (r#"{"host": {"step": {"1": {}}}}"#, "is not TURN.STEP"),
            (r#"{"host": {"turnStopping": {"1.1": {}}}}"#, "is not TURN"),
            (
                r#"{"host": {"step": {"1.1": {"during": [{"at": 0, "waitIdle": {}}]}}}}"#,
                "waits for the host call",
            ),
            (
                r#"{"host": {"step": {"1.1": {"ms": 5, "during": [{"at": 9, "clear": {}}]}}}}"#,
                "after the answer",
            ),
            (
                r#"{"host": {"preStep": {"1.1": {"answer": "go"}}}}"#,
                "unknown answer",
            ),
            (r#"{"actions": [], "bogus": 1}"#, "unknown field"),
        ] {
            let refused = parse_script(text).err().unwrap_or_default();
            assert!(refused.contains(error), "{text}: {refused}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn quickstart_runs_as_its_note_says() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.jsonl");
        let outcome = session(parse_script(QUICKSTART).unwrap(), &path, true)
            .await
            .unwrap();
        let s = &outcome.stats;
        let turns: Vec<_> = s.turns.iter().map(|(k, n)| (*k, *n)).collect();
        assert_eq!(turns, [("completed", 1), ("max-tokens", 1)]);
        assert_eq!(
            (
                s.steps,
                s.host_events,
                s.delivered,
                s.claimed,
                s.discarded,
                s.pending,
                s.rejected
            ),
            (4, 5, 5, 5, 0, 0, 0)
        );
        assert!(
            matches!(outcome.verdict, Verdict::Ok { turns: 2, ref repair, .. } if repair.is_empty())
        );
    }

    #[tokio::test(start_paused = true)]
    async fn cancel_and_resume_runs_as_its_note_says() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        let outcome = session(parse_script(CANCEL_AND_RESUME).unwrap(), &path, true)
            .await
            .unwrap();
        let s = &outcome.stats;
        let turns: Vec<_> = s.turns.iter().map(|(k, n)| (*k, *n)).collect();
        assert_eq!(
            turns,
            [("aborted", 1), ("completed", 4), ("interrupted", 1)]
        );
        assert_eq!(
            (s.delivered, s.claimed, s.discarded, s.pending, s.rejected),
            (7, 6, 1, 0, 0)
        );
        assert!(
            matches!(outcome.verdict, Verdict::Ok { turns: 6, ref repair, .. } if repair.is_empty())
        );
    }
}
