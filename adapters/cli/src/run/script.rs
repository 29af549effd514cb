//! The session script: its types, and the strict parser of the grammar in the module doc. Every
//! message is checked and every name resolved here, so a script that parses can run.

use std::collections::BTreeMap;

use coxswain_core::{PreStepAnswer, StepAnswer, TurnStoppingAnswer};
use serde::Deserialize;
use serde_json::Value;

use super::cue::step_key;
use super::script_entry::{parse_entry, Place};
pub(crate) use super::script_entry::{Action, Trigger};

/// A parsed script.
#[derive(Debug)]
pub(crate) struct Script {
    pub(crate) note: Option<String>,
    pub(crate) step_ms: u64,
    /// The delivery memory's capacity (S51); `None`: the adapter's default.
    pub(crate) memory: Option<usize>,
    pub(crate) actions: Vec<Cued>,
    pub(crate) host: HostScript,
}

/// A top-level action and what it waits for.
#[derive(Clone, Debug)]
pub(crate) struct Cued {
    pub(crate) trigger: Trigger,
    pub(crate) action: Action,
}

/// An action of a host reply's `during`: MS after the call began.
#[derive(Clone, Debug)]
pub(crate) struct Timed {
    pub(crate) at: u64,
    pub(crate) action: Action,
}

/// The scripted host's answers, keyed by turn and step.
#[derive(Debug, Default)]
pub(crate) struct HostScript {
    pub(crate) pre_step: BTreeMap<(u64, u64), Reply<PreStepPlan>>,
    pub(crate) step: BTreeMap<(u64, u64), Reply<StepAnswer>>,
    pub(crate) turn_stopping: BTreeMap<u64, Reply<TurnStoppingAnswer>>,
}

/// One host call's script.
#[derive(Debug)]
pub(crate) struct Reply<A> {
    pub(crate) ms: Option<u64>,
    pub(crate) answer: Option<A>,
    pub(crate) cleanup_ms: u64,
    pub(crate) during: Vec<Timed>,
}

/// A pre-step answer: the claimed batch as it is, or a scripted answer.
#[derive(Clone, Debug)]
pub(crate) enum PreStepPlan {
    AsClaimed,
    Answer(PreStepAnswer),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawScript {
    #[serde(default)]
    note: Option<String>,
    #[serde(default = "default_step_ms")]
    step_ms: u64,
    #[serde(default)]
    memory: Option<usize>,
    #[serde(default)]
    actions: Vec<Value>,
    #[serde(default)]
    host: RawHost,
}

fn default_step_ms() -> u64 {
    200
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawHost {
    #[serde(default)]
    pre_step: BTreeMap<String, RawReply<RawPreStep>>,
    #[serde(default)]
    step: BTreeMap<String, RawReply<StepAnswer>>,
    #[serde(default)]
    turn_stopping: BTreeMap<String, RawReply<TurnStoppingAnswer>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[serde(bound(deserialize = "A: Deserialize<'de>"))]
struct RawReply<A> {
    #[serde(default)]
    ms: Option<u64>,
    #[serde(default)]
    answer: Option<A>,
    #[serde(default)]
    cleanup_ms: u64,
    #[serde(default)]
    during: Vec<Value>,
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawPreStep {
    Answer(PreStepAnswer),
    Word(String),
}

/// Parses and checks a script.
pub(crate) fn parse_script(text: &str) -> Result<Script, String> {
    let raw: RawScript = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let actions = raw
        .actions
        .iter()
        .enumerate()
        .map(|(index, value)| {
            let (trigger, action) = parse_entry(value, Place::TopLevel)
                .map_err(|e| format!("actions[{index}]: {e}"))?;
            Ok(Cued { trigger, action })
        })
        .collect::<Result<_, String>>()?;
    let pre_step = stepped(raw.host.pre_step, "preStep", |key, word| match word {
        RawPreStep::Answer(answer) => Ok(PreStepPlan::Answer(answer)),
        RawPreStep::Word(word) if word == "enter" => Ok(PreStepPlan::AsClaimed),
        RawPreStep::Word(word) => Err(format!("host.preStep.{key}: unknown answer `{word}`")),
    })?;
    let step = stepped(raw.host.step, "step", |_, answer| Ok(answer))?;
    let mut turn_stopping = BTreeMap::new();
    for (key, reply) in raw.host.turn_stopping {
        let turn = key
            .parse::<u64>()
            .ok()
            .filter(|_| key.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| format!("host.turnStopping key `{key}` is not TURN"))?;
        let reply = reply_of(reply, "turnStopping", &key, Ok)?;
        turn_stopping.insert(turn, reply);
    }
    Ok(Script {
        note: raw.note,
        step_ms: raw.step_ms,
        memory: raw.memory,
        actions,
        host: HostScript {
            pre_step,
            step,
            turn_stopping,
        },
    })
}

type Stepped<A> = BTreeMap<(u64, u64), Reply<A>>;

fn stepped<R, A>(
    raw: BTreeMap<String, RawReply<R>>,
    kind: &'static str,
    answer: impl Fn(&str, R) -> Result<A, String>,
) -> Result<Stepped<A>, String> {
    let mut replies = BTreeMap::new();
    for (key, reply) in raw {
        let turn_step =
            step_key(&key).ok_or_else(|| format!("host.{kind} key `{key}` is not TURN.STEP"))?;
        let reply = reply_of(reply, kind, &key, |r| answer(&key, r))?;
        replies.insert(turn_step, reply);
    }
    Ok(replies)
}

fn reply_of<R, A>(
    raw: RawReply<R>,
    kind: &'static str,
    key: &str,
    answer: impl FnOnce(R) -> Result<A, String>,
) -> Result<Reply<A>, String> {
    let mut during = Vec::with_capacity(raw.during.len());
    for (index, value) in raw.during.iter().enumerate() {
        let context = |e: String| format!("host.{kind}.{key}.during[{index}]: {e}");
        let (trigger, action) = parse_entry(value, Place::During(kind)).map_err(context)?;
        let at = match trigger {
            Trigger::At(at) => at,
            Trigger::When(_) | Trigger::Next => {
                return Err(context(
                    "an action in `during` runs at `at` MS after the call began: give its `at`"
                        .into(),
                ))
            }
        };
        if raw.ms.is_some_and(|ms| at > ms) {
            return Err(format!(
                "host.{kind}.{key}: an action at {at} ms after the answer"
            ));
        }
        during.push(Timed { at, action });
    }
    Ok(Reply {
        ms: raw.ms,
        answer: raw.answer.map(answer).transpose()?,
        cleanup_ms: raw.cleanup_ms,
        during,
    })
}
