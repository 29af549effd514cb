//! Restoring a machine from a durable log (SPEC §9, S46–S48).
//!
//! [`Restorer`] reads a log one event at a time (so a log file can be streamed), replaying every
//! `agent/inbox/spliced` event at or after the seed boundary into the inbox the restored machine
//! gets (its two pending lists and its delivery memory, changed by the inbox's own restored
//! splice, S53) and taking `lastTurn` from the last `turn/start` of the whole log; every other event is read past. It
//! validates as it goes and produces a [`Machine`] only when the whole log was valid: nothing is
//! ever partially restored (S47). The restored machine is idle and emits nothing; its items park
//! until the next wake (S48).

use std::collections::HashMap;
use std::num::NonZeroUsize;

use serde_json::Value;
use smallvec::SmallVec;

use crate::config::Config;
use crate::error::{InvalidLog, LogViolation};
use crate::fate::TurnEndKind;
use crate::hasher::IdHasher;
use crate::inbox::Inbox;
use crate::input::Target;
use crate::machine::{Machine, RestorerBehaviour};
use crate::memory::Left;
use crate::message::{Message, MessageId, SharedMessage};
use crate::output::{Event, Splice};
use crate::position::LogPosition;

/// Rebuilds a [`Machine`] from a durable log, one event at a time.
///
/// ```
/// use coxswain_core::{Machine, Restorer};
/// use serde_json::json;
///
/// let log = [
///     json!({"type": "agent/inbox/spliced", "data": {"target": "next-turn", "start": 0,
///            "inserted": [{"id": "a", "source": {"kind": "user"}, "content": "hi"}], "wakeup": true}}),
///     json!({"type": "model/output", "data": "anything"}),
/// ];
/// let machine = Machine::restore(&log, 0)?;
/// assert_eq!(machine.pending(coxswain_core::Target::NextTurn).len(), 1);
/// # Ok::<(), coxswain_core::InvalidLog>(())
/// ```
///
/// Streaming a log, one event at a time, with typed events, JSON and host events mixed:
///
/// ```
/// use coxswain_core::{Event, Machine, Message, Restorer, Target};
/// use serde_json::json;
///
/// let mut live = Machine::new();
/// let mut log: Vec<Event> = Vec::new();
/// live.followup(Message::user("m1", "hi"))?.persist_into(&mut log).for_each(drop);
/// live.steer(Message::user("m2", "also"))?.persist_into(&mut log).for_each(drop);
///
/// let mut restorer = Restorer::new(0);
/// for event in &log {
///     restorer.push_event(event)?;
/// }
/// restorer.skip_host_event()?; // e.g. a `model/output` record
/// restorer.push_json(&json!({"type": "tool/call", "data": {}}))?;
/// assert_eq!(restorer.events_read(), log.len() + 2);
/// assert_eq!(restorer.position().open_turn(), Some(1)); // the log ends inside turn 1
/// assert_eq!(restorer.pending(Target::NextStep).len(), 1); // m2
/// let error = restorer.clone().finish().unwrap_err(); // run crash repair first (S50)
/// assert_eq!(error.index, 1); // the `turn/start` of the open turn
///
/// for closer in restorer.position().closers() {
///     restorer.push_event(&closer)?; // what crash repair appends
/// }
/// let machine = restorer.finish()?;
/// assert_eq!((machine.last_turn(), machine.pending(Target::NextStep).len()), (1, 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// `==` is structural (the events read included); the model checker's view is
/// [`Restorer::behaviour`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restorer {
    seed_length: usize,
    /// The index the next event gets.
    index: usize,
    /// The lists and the delivery memory the replayed splices leave, changed by the inbox's
    /// own restored splice (S46, S53): the restored machine gets it as it is.
    inbox: Inbox,
    /// The admission bound the restored machine gets (S55; a longer restored list is kept).
    max_pending: Option<NonZeroUsize>,
    /// Where the log so far stands: last turn, open turn and step.
    position: LogPosition,
    /// The index of the last `turn/start` (names the open turn of an unbalanced log, S46).
    turn_started_at: usize,
    /// The first error: a restorer that failed keeps failing.
    failed: Option<InvalidLog>,
    /// S59: what the open turn claimed since its last `step/start` (since its `turn/start` if
    /// none), in claim order, each with the list it was claimed from: what crash repair may
    /// redeliver.
    unseen: Vec<(Target, SharedMessage, bool)>,
    /// S59: per id, the replayed splices that carry `redelivery` and insert it.
    redeliveries: HashMap<MessageId, u64, IdHasher>,
}

impl Restorer {
    /// The view of what this restorer's future behaviour depends on, which the model checkers
    /// compare and hash ([`RestorerBehaviour`] says what counts and why). `==` on the restorer
    /// itself is structural.
    ///
    /// ```
    /// use coxswain_core::{Restorer, RestorerBehaviour, Target};
    ///
    /// // Two restorers that read different histories (one skipped a host event) behave alike.
    /// let plain = Restorer::new(0);
    /// let mut read_more = Restorer::new(0);
    /// read_more.skip_host_event()?;
    /// assert_ne!(plain, read_more); // structurally: one read an event more
    /// let view: RestorerBehaviour<'_> = plain.behaviour();
    /// assert_eq!(view, read_more.behaviour());
    /// assert_eq!(read_more.pending(Target::NextTurn).len(), 0);
    /// # Ok::<(), coxswain_core::InvalidLog>(())
    /// ```
    pub fn behaviour(&self) -> RestorerBehaviour<'_> {
        RestorerBehaviour::new(
            self.seed_length.saturating_sub(self.index),
            &self.inbox,
            self.max_pending,
            &self.position,
            &self.failed,
        )
    }
}

/// A splice as read from the log, validated except for its coordinates.
struct RawSplice<'a> {
    target: Target,
    start: Option<u64>,
    removed_count: Option<u64>,
    inserted: Inserted<'a>,
    wakeup: bool,
    /// It carries `outcome` (an ordinary removal); without it, removals are claims (S58).
    outcome: bool,
    /// It carries `redelivery` (crash repair's, S59), whatever its value.
    redelivery: bool,
}

enum Inserted<'a> {
    Json(&'a [Value]),
    Typed(&'a [SharedMessage]),
}

impl Restorer {
    /// The largest turn number a restored log may hold (S46): 2^53 − 2, so that the next turn,
    /// 2^53 − 1, is still a JSON-safe integer.
    ///
    /// ```
    /// use coxswain_core::{LogViolation, Machine, Restorer};
    /// use serde_json::json;
    ///
    /// let log = |turn: u64| [
    ///     json!({"type": "turn/start", "data": {"turn": turn}}),
    ///     json!({"type": "turn/end", "data": {"turn": turn, "reason": {"kind": "completed"}}}),
    /// ];
    /// assert_eq!(Machine::restore(&log(Restorer::MAX_TURN), 0).map(|m| m.last_turn()), Ok(Restorer::MAX_TURN));
    /// let error = Machine::restore(&log(Restorer::MAX_TURN + 1), 0).unwrap_err();
    /// assert_eq!(error.violation, LogViolation::TurnWithoutNumber);
    /// ```
    pub const MAX_TURN: u64 = (1 << 53) - 2;

    /// A restorer that replays splices from event `seed_length` on (S46), with no delivery
    /// memory. A seed boundary past the end of the log means no splice is replayed (the boundary
    /// is clamped to the length).
    pub fn new(seed_length: usize) -> Self {
        Restorer::with_config(Config::new(), seed_length)
    }

    /// A restorer for a machine with the host's [`Config`]: the replayed splices rebuild its
    /// delivery memory by the live rule (S53).
    pub fn with_config(config: Config, seed_length: usize) -> Self {
        let hasher = IdHasher::new(config.hash_seed);
        Restorer {
            seed_length,
            index: 0,
            inbox: Inbox::with_memory(config.delivery_memory, hasher.clone()),
            max_pending: config.max_pending,
            position: LogPosition::new(),
            turn_started_at: 0,
            failed: None,
            unseen: Vec::new(),
            redeliveries: HashMap::with_hasher(hasher),
        }
    }

    /// Reads the next event of the log, as JSON: `{ type, data }` (other keys are ignored).
    ///
    /// # Errors
    ///
    /// [`InvalidLog`] naming this event and the rule it breaks (S46, S47), or the first error
    /// again: a restorer that failed keeps failing.
    pub fn push_json(&mut self, event: &Value) -> Result<(), InvalidLog> {
        self.guard(|this| {
            let Some(kind) = event.get("type").and_then(Value::as_str) else {
                return Err(LogViolation::MissingType);
            };
            let data = event.get("data").unwrap_or(&Value::Null);
            match kind {
                Event::SPLICED if this.replays() => this.apply(parse_splice(data)?),
                Event::TURN_START => {
                    let turn = data
                        .get("turn")
                        .and_then(Value::as_u64)
                        .ok_or(LogViolation::TurnWithoutNumber)?;
                    this.turn_started(turn)
                }
                Event::TURN_END => {
                    let kind = data
                        .get("reason")
                        .and_then(|reason| reason.get("kind"))
                        .and_then(Value::as_str)
                        .and_then(|kind| kind.parse().ok());
                    this.turn_ended(kind);
                    Ok(())
                }
                Event::USER_MESSAGE => {
                    if let Some(id) = data.get("id").and_then(Value::as_str) {
                        this.entered(&MessageId::new(id));
                    }
                    Ok(())
                }
                Event::STEP_START => {
                    match data.get("step").and_then(Value::as_u64) {
                        Some(step) => this.position.step_started(step),
                        None => this.position.step_ended(),
                    }
                    this.step_started();
                    Ok(())
                }
                Event::STEP_END => {
                    this.position.step_ended();
                    Ok(())
                }
                _ => Ok(()),
            }
        })
    }

    /// Reads the next event of the log, as a typed event the machine emitted.
    ///
    /// # Errors
    ///
    /// [`InvalidLog`] naming this event and the rule it breaks (S46, S47), or the first error
    /// again: a restorer that failed keeps failing.
    pub fn push_event(&mut self, event: &Event) -> Result<(), InvalidLog> {
        self.guard(|this| match event {
            Event::Spliced(splice) if this.replays() => this.apply(typed_splice(splice)),
            Event::TurnStart { turn } => this.turn_started(*turn),
            Event::TurnEnd { reason, .. } => {
                this.turn_ended(Some(reason.end_kind()));
                Ok(())
            }
            Event::UserMessage(message) => {
                this.entered(message.id());
                Ok(())
            }
            Event::StepStart { step, .. } => {
                this.position.step_started(*step);
                this.step_started();
                Ok(())
            }
            other => {
                this.position.advance(other);
                Ok(())
            }
        })
    }

    /// Reads past an event the host wrote (model output, tool calls…): it only counts toward
    /// the seed boundary. Equivalent to [`push_json`](Restorer::push_json) with any other `type`.
    ///
    /// # Errors
    ///
    /// The first [`InvalidLog`] again if an earlier event was invalid.
    pub fn skip_host_event(&mut self) -> Result<(), InvalidLog> {
        self.guard(|_| Ok(()))
    }

    /// The restored machine: idle, emitting nothing (S48). Fails if the log ends inside an open
    /// turn (run crash repair first, S50) or if any event was invalid.
    ///
    /// # Errors
    ///
    /// The first [`InvalidLog`], or [`LogViolation::OpenTurn`] at the open turn's `turn/start` if
    /// the log ends inside it.
    pub fn finish(self) -> Result<Machine, InvalidLog> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        if self.position.open().is_some() {
            return Err(InvalidLog {
                index: self.turn_started_at,
                violation: LogViolation::OpenTurn,
            });
        }
        Ok(Machine::with_state(
            self.inbox,
            self.position.last_turn(),
            self.max_pending,
        ))
    }

    /// The number of events read so far.
    pub fn events_read(&self) -> usize {
        self.index
    }

    /// The items the log so far leaves pending in one list, with their waking flags.
    pub fn pending(
        &self,
        target: Target,
    ) -> impl ExactSizeIterator<Item = (&SharedMessage, bool)> + '_ {
        self.inbox
            .items(target)
            .iter()
            .map(|item| (item.message(), item.is_waking()))
    }

    /// Where the log read so far stands: its last turn, the turn and step it leaves open
    /// (crash repair closes them, S50: [`LogPosition::closers`]).
    pub fn position(&self) -> &LogPosition {
        &self.position
    }

    fn guard(
        &mut self,
        step: impl FnOnce(&mut Self) -> Result<(), LogViolation>,
    ) -> Result<(), InvalidLog> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let index = self.index;
        self.index += 1;
        step(self).map_err(|violation| {
            let error = InvalidLog { index, violation };
            self.failed = Some(error.clone());
            error
        })
    }

    /// Splices before the seed boundary are not read (S46).
    fn replays(&self) -> bool {
        // `index` was already advanced past the current event.
        self.index > self.seed_length
    }

    /// S46: a restored turn is an integer in `[0, 2^53 − 2]`, so the next turn's number is a
    /// JSON-safe integer in every port (2^53 − 1 is JavaScript's `Number.MAX_SAFE_INTEGER`).
    fn turn_started(&mut self, turn: u64) -> Result<(), LogViolation> {
        if turn > Restorer::MAX_TURN {
            return Err(LogViolation::TurnWithoutNumber);
        }
        self.position.turn_started(turn);
        self.unseen.clear();
        // `index` was already advanced past the current event.
        self.turn_started_at = self.index - 1;
        Ok(())
    }

    /// S59: a `step/start` inside the open turn: the claims before it were seen by a model call.
    fn step_started(&mut self) {
        if self.position.open().is_some() {
            self.unseen.clear();
        }
    }

    /// Crash repair (S50 with S59's redelivery, allowance `allowance`): the events to append to
    /// the log read so far, in order. Empty when the log does not end inside an open turn.
    /// Otherwise the closers ([`LogPosition::closers`]: `step/end` if a step is open, then
    /// `turn/end {kind: "interrupted"}`), then one redelivery splice
    /// `{target, start: k, inserted: [m], wakeup: true?, redelivery: r}` for each message the
    /// open turn claimed after its last `step/start` (all its claims if it has none), in claim
    /// order, `k` counting this repair's earlier re-insertions into the same list, `r` one more
    /// than the replayed splices carrying `redelivery` that insert the id. A message is skipped
    /// when `r > allowance` or when its id is pending at the end of the log (or re-inserted
    /// already by this repair): repair never makes an id pending twice (S13). Allowance 0 is
    /// S50 unchanged. Push the events back into this restorer (or append them to the log and
    /// restore) to get the repaired machine.
    ///
    /// ```
    /// use coxswain_core::{Event, Machine, Message, MessageId, Restorer, Target};
    ///
    /// let mut live = Machine::new();
    /// let mut log: Vec<Event> = Vec::new();
    /// live.followup(Message::user("m1", "hi"))?.persist_into(&mut log).for_each(drop);
    /// let mut restorer = Restorer::new(0);
    /// for event in &log {
    ///     restorer.push_event(event)?;
    /// }
    /// assert_eq!(restorer.repair(0).len(), 1); // turn/end {interrupted}: m1 is gone (S50)
    /// let repair = restorer.repair(1);
    /// assert_eq!(repair.len(), 2);
    /// let Event::Spliced(splice) = &repair[1] else { unreachable!() };
    /// assert_eq!((splice.target, splice.start, splice.wakeup, splice.redelivery), (Target::NextTurn, 0, true, Some(1)));
    /// for event in &repair {
    ///     restorer.push_event(event)?;
    /// }
    /// let machine = restorer.finish()?;
    /// assert!(machine.is_pending(&MessageId::new("m1"))); // parked until a wake (S48, S57)
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn repair(&self, allowance: u64) -> Vec<Event> {
        let mut events = self.position.closers();
        if events.is_empty() || allowance == 0 {
            return events;
        }
        let mut again: Vec<&MessageId> = Vec::new();
        let (mut next_turn, mut next_step) = (0, 0);
        for (target, message, waking) in &self.unseen {
            let id = message.id();
            if self.inbox.contains(id) || again.contains(&id) {
                continue;
            }
            let r = self
                .redeliveries
                .get(id)
                .copied()
                .unwrap_or(0)
                .saturating_add(1);
            if r > allowance {
                continue;
            }
            let k = match target {
                Target::NextTurn => &mut next_turn,
                Target::NextStep => &mut next_step,
            };
            events.push(Event::Spliced(Splice {
                target: *target,
                start: *k,
                removed_count: 0,
                inserted: SmallVec::from_buf([message.clone()]),
                outcome: None,
                wakeup: *waking,
                redelivery: Some(r),
            }));
            *k += 1;
            again.push(id);
        }
        events
    }

    /// S58: a `turn/end` gives the claims of the turn of the last `turn/start` (0 if none)
    /// their `end`: its reason's kind (`None`: not one of the six kinds, no `end` is set).
    fn turn_ended(&mut self, kind: Option<TurnEndKind>) {
        self.inbox.turn_ended(self.position.last_turn(), kind);
        self.position.turn_ended();
        self.unseen.clear();
    }

    /// S58: a `user/message` inside the open step of the open turn: a record held as claimed
    /// by that turn gets the step, if it has none.
    fn entered(&mut self, id: &MessageId) {
        if let (Some(turn), Some(step)) = (self.position.open_turn(), self.position.open_step()) {
            self.inbox.entered(turn, step, [id]);
        }
    }

    /// Applies one splice after checking its coordinates (S11) and ids (S13).
    fn apply(&mut self, splice: RawSplice<'_>) -> Result<(), LogViolation> {
        let len = self.inbox.len(splice.target);
        let start = splice
            .start
            .and_then(|start| usize::try_from(start).ok())
            .filter(|&start| start <= len)
            .ok_or(LogViolation::SpliceStart)?;
        let removed = splice
            .removed_count
            .map_or(Some(0), |count| usize::try_from(count).ok())
            .filter(|&count| count <= len - start)
            .ok_or(LogViolation::SpliceRemovedCount)?;
        // Every inserted message is validated before the lists change; one inline slot covers
        // every splice the machine itself writes.
        let inserted: SmallVec<[SharedMessage; 1]> = match splice.inserted {
            Inserted::Typed(messages) => messages.iter().cloned().collect(),
            Inserted::Json(values) => values
                .iter()
                .map(|value| Message::from_json(value).map(SharedMessage::new))
                .collect::<Option<_>>()
                .ok_or(LogViolation::SpliceInserted)?,
        };
        // S58: a removal with `outcome` is ordinary; without, a claim by the last turn.
        let how = if splice.outcome {
            Left::Discarded
        } else {
            Left::Claimed(self.position.last_turn())
        };
        if splice.redelivery {
            for message in &inserted {
                let count = self.redeliveries.entry(message.id().clone()).or_insert(0);
                *count = count.saturating_add(1);
            }
        }
        let gone = self
            .inbox
            .restore_splice(splice.target, start, removed, inserted, splice.wakeup, how)
            .map_err(LogViolation::AlreadyPending)?;
        // S59: a claim inside the open turn, in claim order.
        if !splice.outcome && self.position.open().is_some() {
            self.unseen.extend(
                gone.into_iter()
                    .map(|item| (splice.target, item.message().clone(), item.is_waking())),
            );
        }
        Ok(())
    }
}

impl Machine {
    /// Restores a machine from a durable log of JSON events `{ type, data }` (S46–S48), replaying
    /// splices from `seed_length` on, with no delivery memory. See [`Restorer`] to stream a log
    /// instead.
    ///
    /// # Errors
    ///
    /// [`InvalidLog`] naming the first invalid event and the rule it breaks (S46, S47), or the open
    /// turn's `turn/start` if the log ends inside it (run crash repair first, S50).
    pub fn restore(log: &[Value], seed_length: usize) -> Result<Machine, InvalidLog> {
        Machine::restore_with(Config::new(), log, seed_length)
    }

    /// [`restore`](Machine::restore) for a machine with the host's [`Config`]: the delivery
    /// memory is rebuilt from the replayed splices (S53).
    ///
    /// # Errors
    ///
    /// As [`restore`](Machine::restore).
    pub fn restore_with(
        config: Config,
        log: &[Value],
        seed_length: usize,
    ) -> Result<Machine, InvalidLog> {
        let mut restorer = Restorer::with_config(config, seed_length);
        for event in log {
            restorer.push_json(event)?;
        }
        restorer.finish()
    }

    /// Restores a machine from the typed events it (or another machine) emitted.
    ///
    /// # Errors
    ///
    /// As [`restore`](Machine::restore).
    pub fn restore_events<'a>(
        log: impl IntoIterator<Item = &'a Event>,
        seed_length: usize,
    ) -> Result<Machine, InvalidLog> {
        let mut restorer = Restorer::new(seed_length);
        for event in log {
            restorer.push_event(event)?;
        }
        restorer.finish()
    }
}

fn parse_splice(data: &Value) -> Result<RawSplice<'_>, LogViolation> {
    let target = data
        .get("target")
        .and_then(Value::as_str)
        .and_then(|name| name.parse::<Target>().ok())
        .ok_or(LogViolation::SpliceTarget)?;
    let start = Some(
        data.get("start")
            .and_then(Value::as_u64)
            .ok_or(LogViolation::SpliceStart)?,
    );
    let removed_count = match data.get("removedCount") {
        None => None,
        Some(count) => Some(count.as_u64().ok_or(LogViolation::SpliceRemovedCount)?),
    };
    let inserted = data
        .get("inserted")
        .and_then(Value::as_array)
        .ok_or(LogViolation::SpliceInserted)?;
    let wakeup = match data.get("wakeup") {
        None => false,
        Some(Value::Bool(true)) => true,
        Some(_) => return Err(LogViolation::SpliceWakeup),
    };
    Ok(RawSplice {
        target,
        start,
        removed_count,
        inserted: Inserted::Json(inserted),
        wakeup,
        outcome: data.get("outcome").is_some(),
        redelivery: data.get("redelivery").is_some(),
    })
}

fn typed_splice(splice: &Splice) -> RawSplice<'_> {
    RawSplice {
        target: splice.target,
        start: u64::try_from(splice.start).ok(),
        removed_count: u64::try_from(splice.removed_count).ok(),
        inserted: Inserted::Typed(&splice.inserted),
        wakeup: splice.wakeup,
        outcome: splice.outcome.is_some(),
        redelivery: splice.redelivery.is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn m(id: &str) -> Value {
        json!({"id": id, "source": {"kind": "user"}, "content": id})
    }

    fn spliced(data: Value) -> Value {
        json!({"type": "agent/inbox/spliced", "data": data})
    }

    fn ids(machine: &Machine, target: Target) -> Vec<(String, bool)> {
        machine
            .pending(target)
            .map(|item| (item.message().id().to_string(), item.is_waking()))
            .collect()
    }

    fn violation(log: &[Value], seed: usize) -> (usize, LogViolation) {
        let error = Machine::restore(log, seed).unwrap_err();
        (error.index, error.violation)
    }

    /// The checker's view of a restorer ([`Restorer::behaviour`]): what it restored and how it
    /// will read the rest; `==` is structural.
    #[test]
    fn restorers_behave_by_what_they_restored() {
        let hash = |restorer: &Restorer| crate::test_support::hash_of(&restorer.behaviour());
        let fed = |events: &[Value]| {
            let mut restorer = Restorer::new(0);
            for event in events {
                restorer.push_json(event).unwrap();
            }
            restorer
        };
        let insert = |id| spliced(json!({"target": "next-turn", "start": 0, "inserted": [m(id)]}));
        let noise = json!({"type": "model/output", "data": 1});
        let a = fed(&[insert("a")]);
        // Reading an event that restores nothing leaves an equal behaviour (the count is left
        // out), not an equal restorer.
        let a_later = fed(&[insert("a"), noise]);
        assert_eq!(a.behaviour(), a_later.behaviour());
        assert_eq!(hash(&a), hash(&a_later));
        assert_ne!(a, a_later);
        assert_eq!(a, fed(&[insert("a")]));
        let b = fed(&[insert("b")]);
        assert_ne!(a.behaviour(), b.behaviour());
        assert_ne!(hash(&a), hash(&b));

        // The events left before the seed boundary count (S46), once behind it they do not.
        let skipped = |seed_length| {
            let mut restorer = Restorer::new(seed_length);
            restorer.skip_host_event().unwrap();
            restorer
        };
        assert_ne!(skipped(3).behaviour(), skipped(2).behaviour());
        assert_ne!(hash(&skipped(3)), hash(&skipped(2)));
        assert_eq!(skipped(1).behaviour(), skipped(0).behaviour());

        // Which step an open turn leaves open counts (crash repair closes it, S50); how many
        // steps it closed does not.
        let turn = json!({"type": "turn/start", "data": {"turn": 1}});
        let step = |n: u64| json!({"type": "step/start", "data": {"step": n}});
        let step_end = json!({"type": "step/end", "data": {}});
        let open_turn = fed(std::slice::from_ref(&turn));
        let closed_a_step = fed(&[turn.clone(), step(1), step_end.clone()]);
        assert_eq!(open_turn.behaviour(), closed_a_step.behaviour());
        assert_eq!(hash(&open_turn), hash(&closed_a_step));
        let in_step = |n| fed(&[turn.clone(), step(n)]);
        for n in [0, 1, 2] {
            assert_ne!(
                open_turn.behaviour(),
                in_step(n).behaviour(),
                "step {n} open"
            );
        }
        assert_ne!(in_step(1).behaviour(), in_step(2).behaviour());
        // The first error counts (S47).
        let mut failed = fed(&[insert("a")]);
        assert!(failed.push_json(&json!({})).is_err());
        assert_ne!(failed.behaviour(), a_later.behaviour());
    }

    #[test]
    fn s46_host_events_count_toward_the_seed_boundary_and_keep_a_failure() {
        let insert = spliced(json!({"target": "next-turn", "start": 0, "inserted": [m("a")]}));
        let mut restorer = Restorer::new(2);
        restorer.skip_host_event().unwrap();
        restorer.skip_host_event().unwrap();
        restorer.push_json(&insert).unwrap();
        assert_eq!(restorer.events_read(), 3);
        assert_eq!(
            ids(&restorer.finish().unwrap(), Target::NextTurn),
            [("a".to_owned(), false)]
        );

        let mut failed = Restorer::new(0);
        let error = failed.push_json(&json!({"data": {}})).unwrap_err();
        assert_eq!(failed.skip_host_event(), Err(error));
    }

    #[test]
    fn s46_typed_events_before_the_seed_boundary_are_not_replayed() {
        let typed = Event::Spliced(Splice {
            target: Target::NextTurn,
            start: 0,
            removed_count: 0,
            inserted: [std::sync::Arc::new(Message::user("a", "hi"))]
                .into_iter()
                .collect(),
            outcome: None,
            wakeup: true,
            redelivery: None,
        });
        let restore = |seed_length| {
            let mut restorer = Restorer::new(seed_length);
            restorer.push_event(&typed).unwrap();
            restorer.push_event(&typed).unwrap();
            restorer.finish().unwrap()
        };
        assert_eq!(ids(&restore(1), Target::NextTurn), [("a".to_owned(), true)]);
        // Both splices replayed: the second inserts a pending id again (S9 at restore, S47).
        let mut both = Restorer::new(0);
        both.push_event(&typed).unwrap();
        assert!(both.push_event(&typed).is_err());
    }

    #[test]
    fn s46_replays_splices_and_reads_past_everything_else() {
        let log = [
            spliced(
                json!({"target": "next-turn", "start": 0, "inserted": [m("a"), m("b")], "wakeup": true}),
            ),
            json!({"type": "turn/start", "data": {"turn": 4}, "seq": 9}),
            spliced(json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []})),
            json!({"type": "model/output", "data": [1, 2]}),
            json!({"type": "turn/end", "data": {"turn": 4, "reason": {"kind": "completed"}}}),
            spliced(
                json!({"target": "next-step", "start": 0, "removedCount": 0, "inserted": [m("c")], "outcome": "whatever", "extra": 1}),
            ),
            spliced(json!({"target": "next-turn", "start": 1, "inserted": [m("d")]})),
        ];
        let machine = Machine::restore(&log, 0).unwrap();
        assert_eq!(
            ids(&machine, Target::NextTurn),
            [("b".to_owned(), true), ("d".to_owned(), false)]
        );
        assert_eq!(ids(&machine, Target::NextStep), [("c".to_owned(), false)]);
        assert_eq!(machine.last_turn(), 4);
        assert_eq!(machine.status(), crate::Status::Idle);
        let mut machine = machine;
        assert!(machine.drain().is_empty(), "restoring emits nothing (S46)");
        assert_eq!(
            machine.outstanding(),
            None,
            "restoring never wakes the driver (S48)"
        );
    }

    #[test]
    fn s46_seed_boundary_skips_earlier_splices_but_not_turns() {
        let log = [
            spliced(json!({"target": "bogus"})),
            json!({"type": "turn/start", "data": {"turn": 7}}),
            json!({"type": "turn/end", "data": {"turn": 7}}),
            spliced(json!({"target": "next-step", "start": 0, "inserted": [m("x")]})),
        ];
        let machine = Machine::restore(&log, 3).unwrap();
        assert_eq!(ids(&machine, Target::NextStep), [("x".to_owned(), false)]);
        assert_eq!(machine.last_turn(), 7);
        let machine = Machine::restore(&log, 99).unwrap();
        assert_eq!(ids(&machine, Target::NextStep), []);
        assert_eq!(violation(&log, 0), (0, LogViolation::SpliceTarget));
    }

    #[test]
    fn s46_s47_each_violation_names_its_event() {
        let ok = spliced(json!({"target": "next-turn", "start": 0, "inserted": [m("a")]}));
        let cases = [
            (json!({"data": {}}), LogViolation::MissingType),
            (json!({"type": 3}), LogViolation::MissingType),
            (
                json!({"type": "turn/start", "data": {}}),
                LogViolation::TurnWithoutNumber,
            ),
            (
                json!({"type": "turn/start", "data": {"turn": -1}}),
                LogViolation::TurnWithoutNumber,
            ),
            (
                json!({"type": "turn/start", "data": {"turn": 1.5}}),
                LogViolation::TurnWithoutNumber,
            ),
            (
                spliced(json!({"start": 0, "inserted": []})),
                LogViolation::SpliceTarget,
            ),
            (
                spliced(json!({"target": "next-turn", "start": 2, "inserted": []})),
                LogViolation::SpliceStart,
            ),
            (
                spliced(json!({"target": "next-turn", "start": "0", "inserted": []})),
                LogViolation::SpliceStart,
            ),
            (
                spliced(
                    json!({"target": "next-turn", "start": 0, "removedCount": 2, "inserted": []}),
                ),
                LogViolation::SpliceRemovedCount,
            ),
            (
                spliced(
                    json!({"target": "next-turn", "start": 1, "removedCount": 1, "inserted": []}),
                ),
                LogViolation::SpliceRemovedCount,
            ),
            (
                spliced(
                    json!({"target": "next-turn", "start": 0, "removedCount": null, "inserted": []}),
                ),
                LogViolation::SpliceRemovedCount,
            ),
            (
                spliced(json!({"target": "next-turn", "start": 0})),
                LogViolation::SpliceInserted,
            ),
            (
                spliced(json!({"target": "next-turn", "start": 0, "inserted": [{"id": 1}]})),
                LogViolation::SpliceInserted,
            ),
            (
                spliced(json!({"target": "next-turn", "start": 0, "inserted": ["a"]})),
                LogViolation::SpliceInserted,
            ),
            (
                spliced(
                    json!({"target": "next-turn", "start": 0, "inserted": [], "wakeup": false}),
                ),
                LogViolation::SpliceWakeup,
            ),
            (
                spliced(json!({"target": "next-step", "start": 0, "inserted": [m("a")]})),
                LogViolation::AlreadyPending("a".into()),
            ),
            (
                spliced(json!({"target": "next-step", "start": 0, "inserted": [m("b"), m("b")]})),
                LogViolation::AlreadyPending("b".into()),
            ),
        ];
        for (bad, expected) in cases {
            let log = [ok.clone(), json!({"type": "host/event"}), bad.clone()];
            assert_eq!(violation(&log, 0), (2, expected), "{bad}");
        }
    }

    #[test]
    fn s46_a_log_ending_inside_a_turn_needs_repair() {
        let log = [
            json!({"type": "turn/start", "data": {"turn": 1}}),
            json!({"type": "turn/end", "data": {"turn": 1}}),
            json!({"type": "turn/start", "data": {"turn": 2}}),
            json!({"type": "step/start", "data": {"turn": 2, "step": 1}}),
        ];
        assert_eq!(violation(&log, 0), (2, LogViolation::OpenTurn));
        let mut repaired = log.to_vec();
        repaired.push(json!({"type": "step/end", "data": {"turn": 2, "step": 1}}));
        repaired.push(
            json!({"type": "turn/end", "data": {"turn": 2, "reason": {"kind": "interrupted"}}}),
        );
        assert_eq!(Machine::restore(&repaired, 0).unwrap().last_turn(), 2);
    }

    #[test]
    fn s50_the_restorer_knows_where_the_log_ends() {
        let mut restorer = Restorer::new(0);
        let mut push = |event: Value| restorer.push_json(&event).unwrap();
        push(json!({"type": "turn/start", "data": {"turn": 3}}));
        push(json!({"type": "step/start", "data": {"turn": 3, "step": 1}}));
        push(json!({"type": "step/end", "data": {"turn": 3, "step": 1}}));
        push(json!({"type": "step/start", "data": {"turn": 3, "step": 2}}));
        assert_eq!(
            (
                restorer.position().open_turn(),
                restorer.position().open_step()
            ),
            (Some(3), Some(2))
        );
        let mut closed = restorer.clone();
        closed
            .push_event(&Event::StepEnd { turn: 3, step: 2 })
            .unwrap();
        assert_eq!(
            (closed.position().open_turn(), closed.position().open_step()),
            (Some(3), None)
        );
        closed
            .push_event(&Event::TurnEnd {
                turn: 3,
                reason: crate::TurnEndReason::Interrupted,
            })
            .unwrap();
        assert_eq!(
            (closed.position().open_turn(), closed.position().open_step()),
            (None, None)
        );
        assert_eq!(closed.finish().unwrap().last_turn(), 3);
        assert_eq!(
            restorer.finish().unwrap_err().violation,
            LogViolation::OpenTurn
        );
    }

    #[test]
    fn s47_a_failed_restorer_stays_failed() {
        let mut restorer = Restorer::new(0);
        let error = restorer.push_json(&json!({})).unwrap_err();
        assert_eq!(
            restorer.push_json(&json!({"type": "x"})),
            Err(error.clone())
        );
        assert_eq!(restorer.finish().unwrap_err(), error);
    }

    #[test]
    fn s49_typed_and_json_restores_agree() {
        let mut machine = Machine::new();
        let mut events = Vec::new();
        let mut apply = |transition: Result<crate::Transition<'_>, crate::Rejected>| {
            let transition = transition.unwrap();
            events.extend_from_slice(transition.events());
            transition.persisted().for_each(drop);
        };
        apply(machine.inject(Message::user("c", "c")));
        apply(machine.followup(Message::user("a", "a")));
        apply(machine.followup(Message::user("b", "b")));
        apply(machine.prepend(Target::NextTurn, Message::user("p", "p")));
        apply(machine.cancel(crate::CancelCause::User, true));
        apply(machine.answer_pre_step(crate::PreStepAnswer::Reject));
        let typed = Machine::restore_events(&events, 0).unwrap();
        let json: Vec<Value> = events
            .iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect();
        let from_json = Machine::restore(&json, 0).unwrap();
        assert_eq!(typed, from_json);
        // Restored under other keys than the live machine's prepend and claims left: the same
        // behaviour, not the same machine.
        assert_eq!(typed.behaviour(), machine.behaviour());
        assert_ne!(typed, machine);
        assert_eq!(
            ids(&typed, Target::NextTurn),
            [("p".to_owned(), false), ("b".to_owned(), true)]
        );
    }
}
