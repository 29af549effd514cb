//! Inputs: deliveries, queue edits, cancellation, maintenance, disposal and the host's answers.
//!
//! Every input has its own method on [`Machine`](crate::Machine); [`Input`] is the same set as a
//! value (one variant per input), for hosts that record or replay inputs. It serializes exactly as
//! an `"in"` line of the conformance trace format (`docs/FORMAT.md`).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::message::{Batch, MessageId, SharedMessage};
use crate::output::RequestKind;

/// Which pending list a delivery joins (S16).
///
/// # Examples
///
/// ```
/// use coxswain_core::Target;
///
/// assert_eq!(Target::ALL.map(Target::as_str), ["next-turn", "next-step"]);
/// assert_eq!("next-step".parse::<Target>(), Ok(Target::NextStep));
/// assert_eq!(Target::NextTurn.to_string(), "next-turn");
/// let unknown = "later".parse::<Target>().unwrap_err(); // an UnknownName, never a default
/// assert_eq!(unknown.to_string(), "unknown target `later`");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// NT: queued prompts, one claimed per turn.
    NextTurn,
    /// NS: steering and injected context, all claimed at every step boundary.
    NextStep,
}

impl Target {
    /// Both lists, NT first.
    pub const ALL: [Target; 2] = [Target::NextTurn, Target::NextStep];

    /// The wire name: `next-turn` or `next-step`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Target::NextTurn => "next-turn",
            Target::NextStep => "next-step",
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Target {
    type Err = UnknownName;

    /// Parses a wire name (`next-turn`, `next-step`); anything else is an error, never a default.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Target::ALL
            .into_iter()
            .find(|target| target.as_str() == name)
            .ok_or_else(|| UnknownName::new("target", name))
    }
}

/// The three named deliveries: `send` with a fixed target and wakeup (S16, S20, S22). This table
/// is the only place that says which list each preset joins and whether it wakes.
///
/// # Examples
///
/// ```
/// use coxswain_core::{Preset, Target};
///
/// for preset in Preset::ALL {
///     // Each preset is the one with its target and wakeup.
///     assert_eq!(Preset::of(preset.target(), preset.wakeup()), Some(preset));
/// }
/// assert_eq!(Preset::Inject.target(), Target::NextStep);
/// assert!(!Preset::Inject.wakeup());
/// assert_eq!(Preset::of(Target::NextTurn, false), None); // a quiet next-turn send
/// assert_eq!(Preset::Steer.as_str(), "steer");
/// assert_eq!("followup".parse::<Preset>(), Ok(Preset::Followup));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Preset {
    /// `followup(m) = send(m, next-turn, true)`: a prompt that gets a turn of its own (S22).
    Followup,
    /// `steer(m) = send(m, next-step, true)`: joins the running turn at its next boundary.
    Steer,
    /// `inject(m) = send(m, next-step, false)`: context that rides along, never wakes (S20).
    Inject,
}

impl Preset {
    /// Every preset.
    pub const ALL: [Preset; 3] = [Preset::Followup, Preset::Steer, Preset::Inject];

    /// The list the preset's message joins.
    pub const fn target(self) -> Target {
        match self {
            Preset::Followup => Target::NextTurn,
            Preset::Steer | Preset::Inject => Target::NextStep,
        }
    }

    /// Whether the preset's message makes the model run (S19).
    pub const fn wakeup(self) -> bool {
        !matches!(self, Preset::Inject)
    }

    /// The preset that sends to `target` with `wakeup`, if one does (a quiet next-turn send has
    /// none).
    pub fn of(target: Target, wakeup: bool) -> Option<Preset> {
        Preset::ALL
            .into_iter()
            .find(|preset| preset.target() == target && preset.wakeup() == wakeup)
    }

    /// The preset's name on the wire: `followup`, `steer` or `inject`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Preset::Followup => "followup",
            Preset::Steer => "steer",
            Preset::Inject => "inject",
        }
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Preset {
    type Err = UnknownName;

    /// Parses a preset name (`followup`, `steer`, `inject`); anything else is an error.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Preset::ALL
            .into_iter()
            .find(|preset| preset.as_str() == name)
            .ok_or_else(|| UnknownName::new("preset", name))
    }
}

/// A name that is not in a closed vocabulary (a target or a preset)
/// ([example](Target#examples)).
///
/// ```
/// use coxswain_core::UnknownName;
///
/// let unknown = UnknownName::new("preset", "nudge");
/// assert_eq!(unknown.what(), "preset");
/// assert_eq!(unknown.found(), "nudge");
/// assert_eq!(unknown.to_string(), "unknown preset `nudge`");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {}", crate::ShownId::new(found))]
pub struct UnknownName {
    what: &'static str,
    found: String,
}

impl UnknownName {
    /// The error for `found`, which names no `what` (`target`, `preset`, `request`, …): its text
    /// is `unknown WHAT `FOUND`` (the name shown as an id is, escaped and cut short).
    pub fn new(what: &'static str, found: &str) -> Self {
        UnknownName {
            what,
            found: found.to_owned(),
        }
    }

    /// The vocabulary the name is not in (`target`, `preset`, …).
    pub fn what(&self) -> &'static str {
        self.what
    }

    /// The name that was given.
    pub fn found(&self) -> &str {
        &self.found
    }
}

/// The host's answers that are one word (FORMAT.md: `{"step": "completed"}`, `{"turnStopping":
/// "done"}`, `{"preStep": "reject"}` …): the one table of them, in a fixed order (a binding may
/// name a word by its index in [`AnswerWord::ALL`]). Each word answers one request kind, and no
/// two kinds share a word.
///
/// ```
/// use coxswain_core::{AnswerWord, Input, RequestKind, StepAnswer};
///
/// assert_eq!(AnswerWord::ALL.map(AnswerWord::as_str), ["completed", "max-tokens", "continue", "done", "reject"]);
/// assert_eq!("continue".parse(), Ok(AnswerWord::Continue));
/// assert_eq!(AnswerWord::Continue.request(), RequestKind::Step);
/// assert_eq!(AnswerWord::Continue.input(), Input::Step(StepAnswer::Continue));
/// let unknown = "stop".parse::<AnswerWord>().unwrap_err();
/// assert_eq!(unknown.to_string(), "unknown answer word `stop`");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AnswerWord {
    /// `step`: `completed`.
    Completed,
    /// `step`: `max-tokens`.
    MaxTokens,
    /// `step`: `continue`.
    Continue,
    /// `turnStopping`: `done`.
    Done,
    /// `preStep`: `reject`.
    Reject,
}

impl AnswerWord {
    /// Every word, in its fixed order.
    pub const ALL: [AnswerWord; 5] = [
        AnswerWord::Completed,
        AnswerWord::MaxTokens,
        AnswerWord::Continue,
        AnswerWord::Done,
        AnswerWord::Reject,
    ];

    /// The word as the wire spells it.
    pub const fn as_str(self) -> &'static str {
        match self {
            AnswerWord::Completed => "completed",
            AnswerWord::MaxTokens => "max-tokens",
            AnswerWord::Continue => "continue",
            AnswerWord::Done => "done",
            AnswerWord::Reject => "reject",
        }
    }

    /// The kind of request the word answers.
    pub const fn request(self) -> RequestKind {
        match self {
            AnswerWord::Completed | AnswerWord::MaxTokens | AnswerWord::Continue => {
                RequestKind::Step
            }
            AnswerWord::Done => RequestKind::TurnStopping,
            AnswerWord::Reject => RequestKind::PreStep,
        }
    }

    /// The word answering a request of kind `request`.
    ///
    /// # Errors
    ///
    /// An [`UnknownName`] naming the word when it is no answer word, or not one of that
    /// request's (`unknown step answer `done``).
    ///
    /// ```
    /// use coxswain_core::{AnswerWord, RequestKind};
    ///
    /// assert_eq!(AnswerWord::of(RequestKind::TurnStopping, "done"), Ok(AnswerWord::Done));
    /// let refused = AnswerWord::of(RequestKind::Step, "done").unwrap_err();
    /// assert_eq!(refused.to_string(), "unknown step answer `done`");
    /// ```
    pub fn of(request: RequestKind, word: &str) -> Result<AnswerWord, UnknownName> {
        let what = match request {
            RequestKind::PreStep => "preStep answer",
            RequestKind::Step => "step answer",
            RequestKind::TurnStopping => "turnStopping answer",
        };
        AnswerWord::ALL
            .into_iter()
            .find(|answer| answer.request() == request && answer.as_str() == word)
            .ok_or_else(|| UnknownName::new(what, word))
    }

    /// The input that answers with this word.
    pub fn input(self) -> Input {
        match self {
            AnswerWord::Completed => Input::Step(StepAnswer::Completed),
            AnswerWord::MaxTokens => Input::Step(StepAnswer::MaxTokens),
            AnswerWord::Continue => Input::Step(StepAnswer::Continue),
            AnswerWord::Done => Input::TurnStopping(TurnStoppingAnswer::Done),
            AnswerWord::Reject => Input::PreStep(PreStepAnswer::Reject),
        }
    }
}

impl fmt::Display for AnswerWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AnswerWord {
    type Err = UnknownName;

    /// Parses an answer word (`completed`, `max-tokens`, `continue`, `done`, `reject`); anything
    /// else is an error naming it.
    fn from_str(word: &str) -> Result<Self, Self::Err> {
        AnswerWord::ALL
            .into_iter()
            .find(|answer| answer.as_str() == word)
            .ok_or_else(|| UnknownName::new("answer word", word))
    }
}

/// Why an activity is cancelled (S36).
///
/// # Examples
///
/// ```
/// use coxswain_core::{CancelCause, Machine, Message};
/// use serde_json::json;
///
/// let mut machine = Machine::new();
/// machine.followup(Message::user("m1", "hi"))?.persisted().for_each(drop); // a turn runs
/// let hook = CancelCause::Hook { reason: "budget spent".into() };
/// machine.cancel(hook.clone(), false)?.persisted().for_each(drop);
/// assert_eq!(machine.cancel_cause(), Some(&hook));
/// assert_eq!(serde_json::to_value(&CancelCause::User)?, json!({"kind": "user"}));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CancelCause {
    /// The user stopped it.
    User,
    /// A parent agent stopped it.
    Parent,
    /// A hook stopped it.
    Hook {
        /// The hook's explanation.
        reason: Arc<str>,
    },
    /// The agent is being disposed. As the cause of an ordinary `cancel` it does not dispose the
    /// machine, but nothing latches under it (S24).
    Disposed,
}

/// A failure the host reports (S29, S32, S33): `{ message, code, … }`. Any other field of the
/// host's error (a status, a retry hint, a cause) is kept as it is, in [`details`](Self::details),
/// and written back beside `message` and `code` wherever the error goes (`agent/error`, a
/// `turn/end`'s reason): the machine reads only `message` and `code`.
///
/// # Examples
///
/// ```
/// use coxswain_core::{ErrorInfo, StepAnswer};
/// use serde_json::json;
///
/// let failed = StepAnswer::Fail(ErrorInfo::new("model unavailable", "upstream-503"));
/// assert_eq!(
///     serde_json::to_value(&failed)?,
///     json!({"fail": {"message": "model unavailable", "code": "upstream-503"}})
/// );
/// // A host's richer error keeps every field it has.
/// let given = json!({"message": "rate limited", "code": "429", "retryAfterMs": 1500});
/// let error: ErrorInfo = serde_json::from_value(given.clone())?;
/// assert_eq!(error.details.get("retryAfterMs"), Some(&json!(1500)));
/// assert_eq!(serde_json::to_value(&error)?, given);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// Human-readable description.
    pub message: Arc<str>,
    /// Machine-readable code.
    pub code: Arc<str>,
    /// Every other field of the host's error, kept as it is (empty for the errors the machine
    /// and the session layer make).
    #[serde(flatten, default, skip_serializing_if = "Details::is_empty")]
    pub details: Details,
}

impl ErrorInfo {
    /// An error with a message and a code.
    pub fn new(message: impl Into<Arc<str>>, code: impl Into<Arc<str>>) -> Self {
        ErrorInfo {
            message: message.into(),
            code: code.into(),
            details: Details::default(),
        }
    }
}

/// The fields of a host's error besides `message` and `code` ([`ErrorInfo::details`]): shared
/// (cloning an error is a reference-count bump), compared and hashed by value.
///
/// # Examples
///
/// ```
/// use coxswain_core::{Details, ErrorInfo};
/// use serde_json::json;
///
/// assert!(ErrorInfo::new("no model", "upstream-503").details.is_empty());
/// let mut fields = serde_json::Map::new();
/// fields.insert("status".into(), json!(503));
/// let details = Details::from(fields);
/// assert_eq!(details.get("status"), Some(&json!(503)));
/// assert_eq!(details.iter().count(), 1);
/// let error = ErrorInfo { details, ..ErrorInfo::new("no model", "upstream-503") };
/// assert_eq!(
///     serde_json::to_value(&error)?,
///     json!({"message": "no model", "code": "upstream-503", "status": 503})
/// );
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Details(Option<Arc<serde_json::Map<String, serde_json::Value>>>);

impl Details {
    /// Whether there is no other field ([example](Details#examples)).
    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|fields| fields.is_empty())
    }

    /// The field `key`, if the error has it ([example](Details#examples)).
    pub fn get(&self, key: &str) -> Option<&serde_json::Value> {
        self.0.as_ref().and_then(|fields| fields.get(key))
    }

    /// Every other field, in key order ([example](Details#examples)).
    pub fn iter(&self) -> impl Iterator<Item = (&String, &serde_json::Value)> {
        self.0.iter().flat_map(|fields| fields.iter())
    }
}

impl From<serde_json::Map<String, serde_json::Value>> for Details {
    fn from(fields: serde_json::Map<String, serde_json::Value>) -> Self {
        Details((!fields.is_empty()).then(|| Arc::new(fields)))
    }
}

impl std::hash::Hash for Details {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // A map's JSON text is canonical (its keys are sorted): equal details, equal text.
        for (key, value) in self.iter() {
            key.hash(state);
            value.to_string().hash(state);
        }
    }
}

impl Serialize for Details {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Details {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde_json::Map::deserialize(deserializer).map(Details::from)
    }
}

/// The host's answer to a `preStep` request (S29) ([example](crate::Machine#examples)).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PreStepAnswer {
    /// Run the step with exactly these messages (the host may keep, rewrite, drop or add).
    Enter(Batch),
    /// The step must not run: the turn ends `blocked`.
    Reject,
    /// The hook or prompt assembly failed (error path, S38).
    Fail(ErrorInfo),
}

/// The host's answer to a `step` request (S32) ([example](crate::Machine#examples)).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepAnswer {
    /// The model stopped on its own (terminal).
    Completed,
    /// The model hit the output limit; truncated tool calls did not run (terminal).
    MaxTokens,
    /// Tools ran and the turn goes on.
    Continue,
    /// The step failed (error path, S38).
    Fail(ErrorInfo),
}

/// The host's answer to a `turnStopping` request (S33) ([example](crate::Machine#examples)).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TurnStoppingAnswer {
    /// The turn-stopping hooks ran.
    Done,
    /// A turn-stopping hook failed (error path, S38).
    Fail(ErrorInfo),
}

/// An expected-turn guard on a `send` (S54): the send is accepted only while the guard holds,
/// otherwise it is rejected [`Rejected::TurnMismatch`](crate::Rejected::TurnMismatch) and changes
/// nothing. It is checked after the identity checks (S13, S52, S56) and before the admission bound
/// (S55), so the retry of an accepted guarded send is still `already-pending` or
/// `already-delivered`.
///
/// # Examples
///
/// ```
/// use coxswain_core::{Expect, Machine, Message, Rejected, Target};
/// use serde_json::json;
///
/// let mut machine = Machine::new();
/// machine.followup(Message::user("m1", "hi"))?.persisted().for_each(drop); // turn 1 runs
/// // A steer meant for turn 1 joins it; one meant for turn 2 is refused.
/// let steer = |id| Message::user(id, "look at the tests too");
/// machine.send(steer("s1"), Target::NextStep, true, Some(Expect::Turn(1)))?.persisted().for_each(drop);
/// assert_eq!(
///     machine.send(steer("s2"), Target::NextStep, true, Some(Expect::Turn(2))).err(),
///     Some(Rejected::TurnMismatch(Expect::Turn(2)))
/// );
/// assert_eq!(serde_json::to_value(Expect::IdleAfter(1))?, json!({"idleAfter": 1}));
/// assert_eq!(Expect::Turn(7).to_string(), "turn 7 running");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Expect {
    /// `{ "turn": n }`: turn `n` is open and its cancellation was not requested (pre-step, step
    /// or turn-stopping).
    Turn(u64),
    /// `{ "idleAfter": n }`: the machine is idle (not in maintenance) and its last turn is `n`.
    IdleAfter(u64),
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expect::Turn(turn) => write!(f, "turn {turn} running"),
            Expect::IdleAfter(turn) => write!(f, "idle after turn {turn}"),
        }
    }
}

/// The two maintenance inputs (S43) ([example](Input#examples)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MaintenanceInput {
    /// `begin_maintenance()`.
    Begin,
    /// `end_maintenance()`.
    End,
}

/// One input to the machine, as a value. [`Machine::handle`](crate::Machine::handle) applies it.
///
/// # Examples
///
/// ```
/// use coxswain_core::{Input, MaintenanceInput, Machine, Message, Preset, Target};
///
/// let mut machine = Machine::new();
/// let context = Message::user("c1", "notes").into();
/// assert_eq!(Input::delivery(context, Target::NextStep, false), Input::Inject(Message::user("c1", "notes").into()));
/// machine.handle(Input::preset(Preset::Inject, Message::user("c1", "notes").into()))?.persisted().for_each(drop);
/// let quiet = Input::delivery(Message::user("m1", "later").into(), Target::NextTurn, false);
/// assert!(matches!(quiet, Input::Send { wakeup: false, .. })); // no preset is a quiet NT send
/// machine.handle(quiet)?.persisted().for_each(drop);
/// machine.handle(Input::Maintenance(MaintenanceInput::Begin))?.persisted().for_each(drop);
/// assert!(machine.is_maintenance());
/// assert_eq!(machine.pending(Target::NextStep).len(), 1);
/// # Ok::<(), coxswain_core::Rejected>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
#[non_exhaustive]
pub enum Input {
    /// `send(message, target, wakeup, expect)` (S16, S54).
    Send {
        /// The message.
        message: SharedMessage,
        /// The list it joins (unless retargeted, S18).
        target: Target,
        /// Whether it makes the model run (S19).
        wakeup: bool,
        /// The expected-turn guard (S54), if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expect: Option<Expect>,
    },
    /// `followup(message)`: [`Preset::Followup`].
    Followup(SharedMessage),
    /// `steer(message)`: [`Preset::Steer`].
    Steer(SharedMessage),
    /// `inject(message)`: [`Preset::Inject`].
    Inject(SharedMessage),
    /// Remove a pending message by id (S15).
    Remove(MessageId),
    /// Replace a pending message by id (S15).
    Replace {
        /// The pending message to replace.
        id: MessageId,
        /// Its replacement.
        message: SharedMessage,
    },
    /// Put a quiet message first in a list (S15).
    Prepend {
        /// The list.
        target: Target,
        /// The message.
        message: SharedMessage,
    },
    /// Discard everything pending (S15).
    Clear {},
    /// Cancel the current activity (S39).
    Cancel {
        /// The cause.
        cause: CancelCause,
        /// Keep the pending lists (and the wake latch) as they are.
        #[serde(default)]
        keep_inbox: bool,
    },
    /// Begin or end a maintenance job (S43).
    Maintenance(MaintenanceInput),
    /// Dispose the machine (S45).
    Dispose {},
    /// Start parked waking work (S57).
    Resume {},
    /// Answer the outstanding `preStep` request.
    PreStep(PreStepAnswer),
    /// Answer the outstanding `step` request.
    Step(StepAnswer),
    /// Answer the outstanding `turnStopping` request.
    TurnStopping(TurnStoppingAnswer),
}

impl Input {
    /// The messages this input carries, in the order its JSON form holds them: the one of a
    /// send, follow-up, steer, inject, replace or prepend; a pre-step `enter` batch's, in order.
    /// (For a host that checks or binds what an input delivers before feeding it.)
    ///
    /// ```
    /// use coxswain_core::{Input, Message, MessageId, PreStepAnswer};
    /// use std::sync::Arc;
    ///
    /// let m = Arc::new(Message::user("m1", "hi"));
    /// assert_eq!(Input::Followup(Arc::clone(&m)).messages().count(), 1);
    /// let enter = Input::PreStep(PreStepAnswer::Enter(vec![Arc::clone(&m), m].into()));
    /// assert_eq!(enter.messages().count(), 2);
    /// assert_eq!(Input::Remove(MessageId::new("m1")).messages().count(), 0);
    /// ```
    pub fn messages(&self) -> impl Iterator<Item = &SharedMessage> + '_ {
        let (one, batch): (Option<&SharedMessage>, &[SharedMessage]) = match self {
            Input::Send { message, .. }
            | Input::Followup(message)
            | Input::Steer(message)
            | Input::Inject(message)
            | Input::Replace { message, .. }
            | Input::Prepend { message, .. } => (Some(message), &[]),
            Input::PreStep(PreStepAnswer::Enter(batch)) => (None, batch),
            _ => (None, &[]),
        };
        one.into_iter().chain(batch)
    }

    /// The input that delivers `message` with a preset.
    pub fn preset(preset: Preset, message: SharedMessage) -> Input {
        match preset {
            Preset::Followup => Input::Followup(message),
            Preset::Steer => Input::Steer(message),
            Preset::Inject => Input::Inject(message),
        }
    }

    /// The input that sends `message` to `target` with `wakeup`: its preset when one has that
    /// target and wakeup, else a plain `send`.
    pub fn delivery(message: SharedMessage, target: Target, wakeup: bool) -> Input {
        match Preset::of(target, wakeup) {
            Some(preset) => Input::preset(preset, message),
            None => Input::Send {
                message,
                target,
                wakeup,
                expect: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use serde_json::json;

    #[test]
    fn names_parse_back_and_unknown_names_are_errors() {
        for target in Target::ALL {
            assert_eq!(target.as_str().parse::<Target>(), Ok(target));
        }
        for preset in Preset::ALL {
            assert_eq!(preset.as_str().parse::<Preset>(), Ok(preset));
        }
        assert_eq!(
            "next_turn".parse::<Target>().unwrap_err().to_string(),
            "unknown target `next_turn`"
        );
        assert_eq!(
            "nudge".parse::<Preset>().unwrap_err().to_string(),
            "unknown preset `nudge`"
        );
    }

    #[test]
    fn answer_words_parse_back_and_read_as_their_inputs() {
        for word in AnswerWord::ALL {
            assert_eq!(word.as_str().parse::<AnswerWord>(), Ok(word));
            assert_eq!(AnswerWord::of(word.request(), word.as_str()), Ok(word));
            assert_eq!(word.to_string(), word.as_str());
            // The word is the answer's own wire spelling, under its request's key.
            let wire = serde_json::to_value(word.input()).unwrap();
            assert_eq!(wire, json!({ word.request().as_str(): word.as_str() }));
        }
        assert_eq!(
            "stop".parse::<AnswerWord>().unwrap_err().to_string(),
            "unknown answer word `stop`"
        );
        // A word of another request is no answer to this one.
        assert_eq!(
            AnswerWord::of(RequestKind::Step, "done")
                .unwrap_err()
                .to_string(),
            "unknown step answer `done`"
        );
        let unknown = AnswerWord::of(RequestKind::PreStep, "enter").unwrap_err();
        assert_eq!(
            (unknown.what(), unknown.found()),
            ("preStep answer", "enter")
        );
    }

    #[test]
    fn targets_and_presets_display_their_wire_names() {
        assert_eq!(Target::NextTurn.to_string(), "next-turn");
        assert_eq!(Target::NextStep.to_string(), "next-step");
        assert_eq!(Preset::Followup.to_string(), "followup");
        assert_eq!(Preset::Steer.to_string(), "steer");
        assert_eq!(Preset::Inject.to_string(), "inject");
    }

    #[test]
    fn of_finds_the_preset_for_each_target_and_wakeup_s19() {
        assert_eq!(Preset::of(Target::NextTurn, true), Some(Preset::Followup));
        assert_eq!(Preset::of(Target::NextStep, true), Some(Preset::Steer));
        assert_eq!(Preset::of(Target::NextStep, false), Some(Preset::Inject));
        // A quiet next-turn send is only expressible as a raw `send`.
        assert_eq!(Preset::of(Target::NextTurn, false), None);
    }

    #[test]
    fn presets_serialize_as_their_own_input_lines() {
        let m = Arc::new(Message::user("a", "hi"));
        for preset in Preset::ALL {
            let wire = serde_json::to_value(Input::preset(preset, m.clone())).unwrap();
            assert_eq!(
                wire.as_object().unwrap().keys().next().unwrap(),
                preset.as_str()
            );
        }
    }

    fn round_trip(input: Input, wire: serde_json::Value) {
        assert_eq!(serde_json::to_value(&input).unwrap(), wire);
        assert_eq!(serde_json::from_value::<Input>(wire).unwrap(), input);
    }

    #[test]
    fn inputs_serialize_as_format_md_in_lines() {
        let m = Arc::new(Message::user("a", "hi"));
        let mj = json!({"id": "a", "source": {"kind": "user"}, "content": "hi"});
        round_trip(
            Input::Send {
                message: m.clone(),
                target: Target::NextTurn,
                wakeup: false,
                expect: None,
            },
            json!({"send": {"message": mj, "target": "next-turn", "wakeup": false}}),
        );
        round_trip(
            Input::Send {
                message: m.clone(),
                target: Target::NextStep,
                wakeup: true,
                expect: Some(Expect::Turn(3)),
            },
            json!({"send": {"message": mj, "target": "next-step", "wakeup": true, "expect": {"turn": 3}}}),
        );
        round_trip(
            Input::Send {
                message: m.clone(),
                target: Target::NextTurn,
                wakeup: true,
                expect: Some(Expect::IdleAfter(0)),
            },
            json!({"send": {"message": mj, "target": "next-turn", "wakeup": true, "expect": {"idleAfter": 0}}}),
        );
        round_trip(Input::Followup(m.clone()), json!({"followup": mj}));
        round_trip(Input::Steer(m.clone()), json!({"steer": mj}));
        round_trip(Input::Inject(m.clone()), json!({"inject": mj}));
        round_trip(Input::Remove("a".into()), json!({"remove": "a"}));
        round_trip(
            Input::Replace {
                id: "a".into(),
                message: m.clone(),
            },
            json!({"replace": {"id": "a", "message": mj}}),
        );
        round_trip(
            Input::Prepend {
                target: Target::NextStep,
                message: m.clone(),
            },
            json!({"prepend": {"target": "next-step", "message": mj}}),
        );
        round_trip(Input::Clear {}, json!({"clear": {}}));
        round_trip(
            Input::Cancel {
                cause: CancelCause::Hook { reason: "r".into() },
                keep_inbox: true,
            },
            json!({"cancel": {"cause": {"kind": "hook", "reason": "r"}, "keepInbox": true}}),
        );
        round_trip(
            Input::Maintenance(MaintenanceInput::Begin),
            json!({"maintenance": "begin"}),
        );
        round_trip(Input::Dispose {}, json!({"dispose": {}}));
        round_trip(Input::Resume {}, json!({"resume": {}}));
        round_trip(
            Input::PreStep(PreStepAnswer::Enter([m.clone()].into_iter().collect())),
            json!({"preStep": {"enter": [mj]}}),
        );
        round_trip(
            Input::PreStep(PreStepAnswer::Reject),
            json!({"preStep": "reject"}),
        );
        round_trip(
            Input::PreStep(PreStepAnswer::Fail(ErrorInfo::new("m", "c"))),
            json!({"preStep": {"fail": {"message": "m", "code": "c"}}}),
        );
        round_trip(
            Input::Step(StepAnswer::MaxTokens),
            json!({"step": "max-tokens"}),
        );
        round_trip(
            Input::Step(StepAnswer::Continue),
            json!({"step": "continue"}),
        );
        round_trip(
            Input::TurnStopping(TurnStoppingAnswer::Done),
            json!({"turnStopping": "done"}),
        );
    }

    #[test]
    fn s39_keep_inbox_defaults_to_false() {
        let input: Input =
            serde_json::from_value(json!({"cancel": {"cause": {"kind": "user"}}})).unwrap();
        assert_eq!(
            input,
            Input::Cancel {
                cause: CancelCause::User,
                keep_inbox: false
            }
        );
    }
}
