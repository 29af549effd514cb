//! An independent reference model of coxswain, written from `shared/SPEC.md` alone.
//!
//! It works entirely at the JSON level of `shared/conformance/FORMAT.md`: inputs are the values of
//! `"in"` lines, outputs the values of `"out"` lines. It shares no types with the real machine so the
//! two can be differential-tested. It is deliberately naive: plain `Vec`s, linear scans, and the whole
//! state cloned for every input so that a rejected input trivially changes nothing (S5).
//!
//! Everything here is test code: malformed JSON input is a programming error and panics.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Map, Value};

/// One of the two pending lists (SPEC vocabulary: NT and NS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// `next-turn` (NT).
    NextTurn,
    /// `next-step` (NS).
    NextStep,
}

impl Target {
    fn parse(v: &Value) -> Target {
        match v.as_str() {
            Some("next-turn") => Target::NextTurn,
            Some("next-step") => Target::NextStep,
            _ => panic!("bad target {v}"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Target::NextTurn => "next-turn",
            Target::NextStep => "next-step",
        }
    }
}

/// A pending item: the message value verbatim (S6–S8) and whether it was delivered waking (S19).
#[derive(Clone, Debug, PartialEq)]
struct Item {
    msg: Value,
    waking: bool,
}

impl Item {
    fn id(&self) -> &str {
        msg_id(&self.msg)
    }
}

/// The id of a message value (S6). Panics on a malformed message (test input).
fn msg_id(m: &Value) -> &str {
    m.get("id")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("message without string id: {m}"))
}

/// Which request is outstanding while running (S4, I10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Awaiting {
    PreStep,
    Step,
    TurnStopping,
}

/// The open turn of a running driver (S23, S27–S34).
#[derive(Clone, Debug, PartialEq)]
struct Turn {
    /// The turn number.
    turn: u64,
    /// The last entered step of the turn, 0 before the first (S23).
    step: u64,
    /// The outstanding request.
    awaiting: Awaiting,
    /// Some step of this turn hit `max-tokens` (sticky reason, S34).
    max_tokens_hit: bool,
    /// The latest step's outcome was terminal (`completed` / `max-tokens`), S30/S33/S34.
    latest_terminal: bool,
}

/// The phase (S23). The cancel cause and the wake latch of the current activity are kept beside it
/// in [`Reference`] and reset whenever an activity starts or ends.
#[derive(Clone, Debug, PartialEq)]
enum Phase {
    Idle,
    Maintenance,
    Running(Turn),
    Disposed,
}

/// The reference model.
#[derive(Clone, Debug)]
pub(crate) struct Reference {
    /// NT, the `next-turn` list.
    nt: Vec<Item>,
    /// NS, the `next-step` list.
    ns: Vec<Item>,
    phase: Phase,
    /// The first cancel cause of the current activity (running turn or maintenance job), if its
    /// cancellation was requested (S39). Always `None` while idle.
    cancel: Option<Value>,
    /// The wake latch `wakeRequested` of the current activity (S24–S26). Always false while idle.
    wake_requested: bool,
    /// `disposing` flag (S45): dispose was called but the machine was not yet quiescent.
    disposing: bool,
    /// `lastTurn`: the number of the last opened turn (S23, S27, S46).
    last_turn: u64,
}

/// One pending list as (message id, waking flag) in list order.
pub(crate) type PendingView = Vec<(String, bool)>;

/// Outputs collected during one input.
type Out = Vec<Value>;

fn event(ty: &str, data: Value) -> Value {
    json!({ "event": { "type": ty, "data": data } })
}

fn notify(ty: &str, fields: Value) -> Value {
    let mut obj = Map::new();
    obj.insert("type".to_string(), json!(ty));
    for (k, v) in fields.as_object().expect("notification fields") {
        obj.insert(k.clone(), v.clone());
    }
    json!({ "notify": Value::Object(obj) })
}

fn request(name: &str, data: Value) -> Value {
    json!({ "request": { name: data } })
}

/// A host answer to `preStep` (S29).
enum PreStepAnswer {
    Enter(Vec<Value>),
    Reject,
    Fail(Value),
}

/// A host answer to `step` (S32).
#[derive(PartialEq)]
enum StepAnswer {
    Completed,
    MaxTokens,
    Continue,
    Fail(Value),
}

/// A host answer to `turnStopping` (S33).
enum TurnStoppingAnswer {
    Done,
    Fail(Value),
}

impl Reference {
    /// A fresh machine: idle, `lastTurn` 0, empty lists.
    pub(crate) fn new() -> Self {
        Reference {
            nt: Vec::new(),
            ns: Vec::new(),
            phase: Phase::Idle,
            cancel: None,
            wake_requested: false,
            disposing: false,
            last_turn: 0,
        }
    }

    // ------------------------------------------------------------------------------------------
    // Restore (S46–S48)
    // ------------------------------------------------------------------------------------------

    /// Restore from a durable log (S46–S48). `Err` exactly when S46/S47 say the log is invalid.
    pub(crate) fn restore(log: &[Value], seed_length: usize) -> Result<Self, String> {
        // S46: seedLength clamped into [0, len].
        let seed = seed_length.min(log.len());
        // S48: restoring never wakes: the machine is idle, no latch.
        let mut m = Reference::new();
        // Whether the log is inside an open turn at this point (S46: may not end inside one).
        let mut open = false;
        for (i, ev) in log.iter().enumerate() {
            // S46: every event needs a string `type` (the whole log, seed included).
            let Some(ty) = ev.get("type").and_then(Value::as_str) else {
                return Err(format!("event {i}: lacks a string type (S46)"));
            };
            let data = ev.get("data");
            match ty {
                "turn/start" => {
                    // S46: lastTurn = turn of the last turn/start in the whole log.
                    let Some(t) = data.and_then(|d| d.get("turn")).and_then(Value::as_u64) else {
                        return Err(format!("event {i}: turn/start lacks an integer turn (S46)"));
                    };
                    m.last_turn = t;
                    open = true;
                }
                "turn/end" => open = false,
                // S46: splices before the seed boundary are not read.
                "agent/inbox/spliced" if i >= seed => m.replay_splice(i, data)?,
                // Every other event is read past.
                _ => {}
            }
        }
        if open {
            return Err("log ends inside an open turn (S46, S50)".to_string());
        }
        Ok(m)
    }

    /// Re-apply one durable splice during restore, validating it (S46, S11, S13).
    fn replay_splice(&mut self, i: usize, data: Option<&Value>) -> Result<(), String> {
        let bad = |what: &str| Err(format!("event {i}: splice {what} (S46)"));
        let Some(d) = data.and_then(Value::as_object) else {
            return bad("has no data object");
        };
        let target = match d.get("target").and_then(Value::as_str) {
            Some("next-turn") => Target::NextTurn,
            Some("next-step") => Target::NextStep,
            _ => return bad("lacks a valid target"),
        };
        let Some(start) = d.get("start").and_then(Value::as_u64) else {
            return bad("has a non-integer start");
        };
        let removed = match d.get("removedCount") {
            None => 0,
            Some(v) => match v.as_u64() {
                Some(n) => n,
                None => return bad("has a non-integer removedCount"),
            },
        };
        // S11: 0 <= start <= len, start + removedCount <= len.
        let len = self.list(target).len() as u64;
        if start > len || removed > len - start {
            return bad("has out-of-range coordinates (S11)");
        }
        let Some(inserted) = d.get("inserted").and_then(Value::as_array) else {
            return bad("has no inserted list");
        };
        for msg in inserted {
            if msg.get("id").and_then(Value::as_str).is_none() {
                return bad("inserts a message without a string id");
            }
        }
        // S48: the waking flag comes from the splice (absent = quiet); present must be `true`.
        let waking = match d.get("wakeup") {
            None => false,
            Some(Value::Bool(true)) => true,
            Some(_) => return bad("has a wakeup that is not true"),
        };
        let start = start as usize;
        let removed = removed as usize;
        let mut list = self.list(target).clone();
        let items: Vec<Item> = inserted
            .iter()
            .map(|msg| Item {
                msg: msg.clone(),
                waking,
            })
            .collect();
        list.splice(start..start + removed, items);
        // S13: no id pending twice across NT and NS after the splice.
        let other = match target {
            Target::NextTurn => &self.ns,
            Target::NextStep => &self.nt,
        };
        let mut ids: Vec<&str> = Vec::new();
        for item in list.iter().chain(other.iter()) {
            if ids.contains(&item.id()) {
                return bad(&format!("makes id {:?} pending twice (S13)", item.id()));
            }
            ids.push(item.id());
        }
        *self.list_mut(target) = list;
        Ok(())
    }

    // ------------------------------------------------------------------------------------------
    // Queries
    // ------------------------------------------------------------------------------------------

    /// The pending lists: (NT, NS), each as (id, waking) in list order.
    pub(crate) fn pending(&self) -> (PendingView, PendingView) {
        let view = |l: &Vec<Item>| {
            l.iter()
                .map(|i| (i.id().to_string(), i.waking))
                .collect::<Vec<_>>()
        };
        (view(&self.nt), view(&self.ns))
    }

    /// `lastTurn` (S23/S27/S46). While a turn is running this is that turn's number.
    pub(crate) fn last_turn(&self) -> u64 {
        self.last_turn
    }

    /// Public status (S23): `running` when running, otherwise `idle` (also when disposed, S45).
    pub(crate) fn status(&self) -> &'static str {
        match self.phase {
            Phase::Running(_) => "running",
            _ => "idle",
        }
    }

    /// S44: no driver and no maintenance active.
    pub(crate) fn is_quiescent(&self) -> bool {
        matches!(self.phase, Phase::Idle | Phase::Disposed)
    }

    // ------------------------------------------------------------------------------------------
    // Input dispatch
    // ------------------------------------------------------------------------------------------

    /// Apply one input (the value of an `"in"` line). `Ok` = every output in order; `Err` = the
    /// rejection kind, and then the model is unchanged (S5).
    pub(crate) fn apply(&mut self, input: &Value) -> Result<Vec<Value>, &'static str> {
        let obj = input.as_object().expect("input must be an object");
        assert_eq!(obj.len(), 1, "input must have exactly one key: {input}");
        let (key, arg) = obj.iter().next().expect("one key");
        // S45: once disposed, every input is rejected `disposed`, before any other check.
        if self.phase == Phase::Disposed {
            return Err("disposed");
        }
        // S5: work on a copy; keep it only if the input succeeds.
        let mut next = self.clone();
        let mut out: Out = Vec::new();
        match key.as_str() {
            "send" => next.on_send(
                &mut out,
                arg["message"].clone(),
                Target::parse(&arg["target"]),
                arg["wakeup"].as_bool().expect("send.wakeup bool"),
            )?,
            // S16 presets.
            "followup" => next.on_send(&mut out, arg.clone(), Target::NextTurn, true)?,
            "steer" => next.on_send(&mut out, arg.clone(), Target::NextStep, true)?,
            "inject" => next.on_send(&mut out, arg.clone(), Target::NextStep, false)?,
            "remove" => next.on_remove(&mut out, arg.as_str().expect("remove id")),
            "replace" => next.on_replace(
                &mut out,
                arg["id"].as_str().expect("replace.id"),
                arg["message"].clone(),
            )?,
            "prepend" => next.on_prepend(
                &mut out,
                Target::parse(&arg["target"]),
                arg["message"].clone(),
            )?,
            "clear" => next.clear(&mut out),
            "cancel" => {
                let cause = arg["cause"].clone();
                assert!(cause.get("kind").is_some(), "cancel cause needs a kind");
                let keep = match arg.get("keepInbox") {
                    None => false,
                    Some(v) => v.as_bool().expect("keepInbox bool"),
                };
                next.on_cancel(&mut out, cause, keep);
            }
            "maintenance" => match arg.as_str() {
                Some("begin") => next.on_begin_maintenance()?,
                Some("end") => next.on_end_maintenance(&mut out)?,
                _ => panic!("bad maintenance input {arg}"),
            },
            "dispose" => next.on_dispose(&mut out),
            "preStep" => {
                let answer = if arg.as_str() == Some("reject") {
                    PreStepAnswer::Reject
                } else if let Some(msgs) = arg.get("enter") {
                    let msgs = msgs.as_array().expect("enter list").clone();
                    for m in &msgs {
                        msg_id(m);
                    }
                    PreStepAnswer::Enter(msgs)
                } else if let Some(e) = arg.get("fail") {
                    PreStepAnswer::Fail(e.clone())
                } else {
                    panic!("bad preStep answer {arg}")
                };
                next.on_pre_step(&mut out, answer)?;
            }
            "step" => {
                let answer = match arg.as_str() {
                    Some("completed") => StepAnswer::Completed,
                    Some("max-tokens") => StepAnswer::MaxTokens,
                    Some("continue") => StepAnswer::Continue,
                    _ => StepAnswer::Fail(arg.get("fail").expect("bad step answer").clone()),
                };
                next.on_step(&mut out, answer)?;
            }
            "turnStopping" => {
                let answer = if arg.as_str() == Some("done") {
                    TurnStoppingAnswer::Done
                } else {
                    TurnStoppingAnswer::Fail(
                        arg.get("fail").expect("bad turnStopping answer").clone(),
                    )
                };
                next.on_turn_stopping(&mut out, answer)?;
            }
            other => panic!("unknown input kind {other:?}"),
        }
        *self = next;
        Ok(out)
    }

    // ------------------------------------------------------------------------------------------
    // Lists and splices (S10–S14)
    // ------------------------------------------------------------------------------------------

    fn list(&self, t: Target) -> &Vec<Item> {
        match t {
            Target::NextTurn => &self.nt,
            Target::NextStep => &self.ns,
        }
    }

    fn list_mut(&mut self, t: Target) -> &mut Vec<Item> {
        match t {
            Target::NextTurn => &mut self.nt,
            Target::NextStep => &mut self.ns,
        }
    }

    /// S15: an id is looked up in NT, then NS.
    fn find(&self, id: &str) -> Option<(Target, usize)> {
        for t in [Target::NextTurn, Target::NextStep] {
            for (i, item) in self.list(t).iter().enumerate() {
                if item.id() == id {
                    return Some((t, i));
                }
            }
        }
        None
    }

    /// S9/S13: is this id pending in NT or NS?
    fn is_pending(&self, id: &str) -> bool {
        self.find(id).is_some()
    }

    /// S19: waking work = at least one pending item, in either list, delivered waking.
    fn has_waking_work(&self) -> bool {
        self.nt.iter().chain(self.ns.iter()).any(|i| i.waking)
    }

    /// One splice on one list (S10, S14), already validated by the caller.
    ///
    /// Emits, in order: the durable `agent/inbox/spliced` (only if non-empty), then (list change),
    /// one `discarded` per removed message if `canceled` (an ordinary removal, S12), then one
    /// `inserted` per inserted message. Claims pass `canceled = false` and insert nothing, so they
    /// emit only the splice (S12, S28). Returns the removed items.
    #[allow(clippy::too_many_arguments)]
    fn splice(
        &mut self,
        out: &mut Out,
        target: Target,
        start: usize,
        removed_count: usize,
        inserted: Vec<Item>,
        canceled: bool,
        wakeup: bool,
    ) -> Vec<Item> {
        if removed_count == 0 && inserted.is_empty() {
            // S10: an empty splice emits nothing.
            return Vec::new();
        }
        // S10: optional keys only when they apply.
        let mut data = Map::new();
        data.insert("target".into(), json!(target.name()));
        data.insert("start".into(), json!(start));
        if removed_count > 0 {
            data.insert("removedCount".into(), json!(removed_count));
        }
        let inserted_msgs: Vec<Value> = inserted.iter().map(|i| i.msg.clone()).collect();
        data.insert("inserted".into(), Value::Array(inserted_msgs.clone()));
        if canceled && removed_count > 0 {
            data.insert("outcome".into(), json!("canceled"));
        }
        if wakeup {
            data.insert("wakeup".into(), json!(true));
        }
        out.push(event("agent/inbox/spliced", Value::Object(data)));
        // S14: then the list change.
        let removed: Vec<Item> = self
            .list_mut(target)
            .splice(start..start + removed_count, inserted)
            .collect();
        // S14: then `discarded` per removed message (ordinary removals only, S12).
        if canceled {
            for item in &removed {
                out.push(notify(
                    "agent/inbox/discarded",
                    json!({ "message": item.msg }),
                ));
            }
        }
        // S14: then `inserted` per inserted message, batch order.
        for msg in inserted_msgs {
            out.push(notify("agent/inbox/inserted", json!({ "message": msg })));
        }
        removed
    }

    // ------------------------------------------------------------------------------------------
    // Delivery and queue operations (S15–S22)
    // ------------------------------------------------------------------------------------------

    /// S16 `send(message, target, wakeup)`.
    fn on_send(
        &mut self,
        out: &mut Out,
        msg: Value,
        target: Target,
        wakeup: bool,
    ) -> Result<(), &'static str> {
        // S18: a waking send while the current activity's cancellation was requested goes to NT.
        // Non-waking sends are never retargeted.
        let target = if wakeup && self.cancel.is_some() {
            Target::NextTurn
        } else {
            target
        };
        // S13: validate before emitting anything.
        if self.is_pending(msg_id(&msg)) {
            return Err("already-pending");
        }
        // S17: appended at the end of the resolved list; S10: `wakeup: true` iff the send is waking.
        let start = self.list(target).len();
        self.splice(
            out,
            target,
            start,
            0,
            vec![Item {
                msg,
                waking: wakeup,
            }],
            false,
            wakeup,
        );
        // S20: a non-waking send does nothing else. S21: a waking one wakes.
        if wakeup {
            self.wake(out);
        }
        Ok(())
    }

    /// S15 `remove(id)`: absent → nothing; else an ordinary single-item removal.
    fn on_remove(&mut self, out: &mut Out, id: &str) {
        if let Some((t, i)) = self.find(id) {
            self.splice(out, t, i, 1, Vec::new(), true, false);
        }
    }

    /// S15 `replace(id, message)`: absent → nothing (never rejected); the new item inherits the
    /// waking flag and its splice carries `wakeup: true` exactly when the old one was waking.
    fn on_replace(&mut self, out: &mut Out, id: &str, msg: Value) -> Result<(), &'static str> {
        let Some((t, i)) = self.find(id) else {
            return Ok(());
        };
        // S13: the new id may equal the replaced one, but not any other pending id.
        let new_id = msg_id(&msg);
        if new_id != id && self.is_pending(new_id) {
            return Err("already-pending");
        }
        let waking = self.list(t)[i].waking;
        // S14: splice, then discarded(old), then inserted(new).
        self.splice(out, t, i, 1, vec![Item { msg, waking }], true, waking);
        Ok(())
    }

    /// S15 `prepend(target, message)`: a non-waking insertion at position 0.
    fn on_prepend(
        &mut self,
        out: &mut Out,
        target: Target,
        msg: Value,
    ) -> Result<(), &'static str> {
        if self.is_pending(msg_id(&msg)) {
            return Err("already-pending");
        }
        self.splice(
            out,
            target,
            0,
            0,
            vec![Item { msg, waking: false }],
            false,
            false,
        );
        Ok(())
    }

    /// S15 `clear()`: NS splice, NS discards, NT splice, NT discards. Touches nothing else.
    fn clear(&mut self, out: &mut Out) {
        for t in [Target::NextStep, Target::NextTurn] {
            let len = self.list(t).len();
            if len > 0 {
                self.splice(out, t, 0, len, Vec::new(), true, false);
            }
        }
    }

    /// S24 wake, after a waking send.
    fn wake(&mut self, out: &mut Out) {
        match self.phase {
            // S24: from idle, enter running and open a turn in the same transition.
            Phase::Idle => {
                out.push(notify("agent/status", json!({ "status": "running" })));
                self.open_turn(out);
            }
            // S24: running and not aborted: nothing; the driver claims at its next boundary.
            Phase::Running(_) if self.cancel.is_none() => {}
            // S24: maintenance, or running with cancellation requested: latch, except while
            // disposing or when the activity's cancel cause is `{kind:"disposed"}`.
            Phase::Running(_) | Phase::Maintenance => {
                let disposed_cause = self
                    .cancel
                    .as_ref()
                    .is_some_and(|c| c.get("kind") == Some(&json!("disposed")));
                if !self.disposing && !disposed_cause {
                    self.wake_requested = true;
                }
            }
            Phase::Disposed => unreachable!("inputs are rejected once disposed"),
        }
    }

    // ------------------------------------------------------------------------------------------
    // Turns and steps (S27–S38)
    // ------------------------------------------------------------------------------------------

    fn turn(&self) -> &Turn {
        match &self.phase {
            Phase::Running(t) => t,
            _ => panic!("no running turn"),
        }
    }

    fn turn_mut(&mut self) -> &mut Turn {
        match &mut self.phase {
            Phase::Running(t) => t,
            _ => panic!("no running turn"),
        }
    }

    /// Is the outstanding request `want`? (S4: otherwise `unexpected-completion`.)
    fn awaiting(&self, want: Awaiting) -> bool {
        matches!(&self.phase, Phase::Running(t) if t.awaiting == want)
    }

    /// S27: open turn `lastTurn + 1`: `turn/start`, claim at the turn boundary, request `preStep`.
    /// The status is already `running` (the caller emitted it if needed). A new turn is a new
    /// activity: fresh cancellation token (S42), latch cleared (S35).
    fn open_turn(&mut self, out: &mut Out) {
        let turn = self.last_turn + 1;
        self.last_turn = turn;
        self.phase = Phase::Running(Turn {
            turn,
            step: 0,
            awaiting: Awaiting::PreStep,
            max_tokens_hit: false,
            latest_terminal: false,
        });
        self.cancel = None;
        self.wake_requested = false;
        out.push(event("turn/start", json!({ "turn": turn })));
        let batch = self.claim(out, turn, true);
        out.push(request(
            "preStep",
            json!({ "turn": turn, "step": 1, "messages": batch }),
        ));
    }

    /// S28 claim: all of NS as one pure deletion, then (turn boundary only) the first NT item as
    /// one pure deletion; then one `claimed` per message in batch order (NS first).
    fn claim(&mut self, out: &mut Out, turn: u64, turn_boundary: bool) -> Vec<Value> {
        let mut batch: Vec<Value> = Vec::new();
        let ns_len = self.ns.len();
        if ns_len > 0 {
            let removed = self.splice(out, Target::NextStep, 0, ns_len, Vec::new(), false, false);
            batch.extend(removed.into_iter().map(|i| i.msg));
        }
        if turn_boundary && !self.nt.is_empty() {
            let removed = self.splice(out, Target::NextTurn, 0, 1, Vec::new(), false, false);
            batch.extend(removed.into_iter().map(|i| i.msg));
        }
        for msg in &batch {
            out.push(notify(
                "agent/inbox/claimed",
                json!({ "message": msg, "turn": turn }),
            ));
        }
        batch
    }

    /// S33 (and S30 via `turnStopping`): claim between steps (NS only) and request the next pre-step.
    fn next_pre_step(&mut self, out: &mut Out) {
        let turn = self.turn().turn;
        let batch = self.claim(out, turn, false);
        let t = self.turn_mut();
        t.awaiting = Awaiting::PreStep;
        let step = t.step + 1;
        out.push(request(
            "preStep",
            json!({ "turn": turn, "step": step, "messages": batch }),
        ));
    }

    /// S34: `max-tokens` if any step of the turn hit the limit, otherwise `completed`.
    fn normal_stop_reason(&self) -> Value {
        if self.turn().max_tokens_hit {
            json!({ "kind": "max-tokens" })
        } else {
            json!({ "kind": "completed" })
        }
    }

    /// The `aborted` reason with the activity's first cancel cause (S36, S39).
    fn aborted_reason(&self) -> Value {
        json!({ "kind": "aborted", "reason": self.cancel.clone().expect("cancel requested") })
    }

    /// S30 answer to `preStep`.
    fn on_pre_step(&mut self, out: &mut Out, answer: PreStepAnswer) -> Result<(), &'static str> {
        if !self.awaiting(Awaiting::PreStep) {
            return Err("unexpected-completion");
        }
        // S30 (1): cancellation requested → aborted, no step.
        if self.cancel.is_some() {
            let reason = self.aborted_reason();
            self.end_turn(out, reason);
            return Ok(());
        }
        match answer {
            // S30 (2): fail → error path.
            PreStepAnswer::Fail(e) => self.error_path(out, e),
            // S30 (3): reject → blocked.
            PreStepAnswer::Reject => self.end_turn(out, json!({ "kind": "blocked" })),
            PreStepAnswer::Enter(msgs) => {
                let t = self.turn();
                if msgs.is_empty() && t.step == 0 {
                    // S30 (4): empty first proposal → completed, no step, no turnStopping.
                    self.end_turn(out, json!({ "kind": "completed" }));
                } else if msgs.is_empty() && t.latest_terminal {
                    // S30 (5): empty after a terminal step → S34 reason at once.
                    let reason = self.normal_stop_reason();
                    self.end_turn(out, reason);
                } else {
                    // S30 (6, 7): enter step S = step + 1 (possibly with no messages after a
                    // `continue` step).
                    let t = self.turn_mut();
                    t.step += 1;
                    t.awaiting = Awaiting::Step;
                    let (turn, step) = (t.turn, t.step);
                    out.push(event("step/start", json!({ "turn": turn, "step": step })));
                    for m in msgs {
                        out.push(event("user/message", m));
                    }
                    out.push(request("step", json!({ "turn": turn, "step": step })));
                }
            }
        }
        Ok(())
    }

    /// S32/S33 answer to `step`.
    fn on_step(&mut self, out: &mut Out, answer: StepAnswer) -> Result<(), &'static str> {
        if !self.awaiting(Awaiting::Step) {
            return Err("unexpected-completion");
        }
        // S32: `step/end` first, in every case.
        let (turn, step) = (self.turn().turn, self.turn().step);
        out.push(event("step/end", json!({ "turn": turn, "step": step })));
        // S33: cancellation requested → aborted (also classifies a failure, S38).
        if self.cancel.is_some() {
            let reason = self.aborted_reason();
            self.end_turn(out, reason);
            return Ok(());
        }
        if let StepAnswer::Fail(e) = answer {
            // S33: fail → error path.
            self.error_path(out, e);
            return Ok(());
        }
        let terminal = answer != StepAnswer::Continue;
        let t = self.turn_mut();
        if answer == StepAnswer::MaxTokens {
            t.max_tokens_hit = true; // S34: sticky reason
        }
        t.latest_terminal = terminal; // S34: stop decision follows the latest outcome
        if terminal && self.ns.is_empty() {
            // S33: terminal and NS empty → ask the turn-stopping hook.
            self.turn_mut().awaiting = Awaiting::TurnStopping;
            out.push(request("turnStopping", json!({ "turn": turn })));
        } else {
            // S33: NS not empty, or `continue` → claim between steps, next pre-step.
            self.next_pre_step(out);
        }
        Ok(())
    }

    /// S33 answer to `turnStopping`.
    fn on_turn_stopping(
        &mut self,
        out: &mut Out,
        answer: TurnStoppingAnswer,
    ) -> Result<(), &'static str> {
        if !self.awaiting(Awaiting::TurnStopping) {
            return Err("unexpected-completion");
        }
        // S33: cancellation requested → aborted.
        if self.cancel.is_some() {
            let reason = self.aborted_reason();
            self.end_turn(out, reason);
            return Ok(());
        }
        match answer {
            // S33: fail → error path.
            TurnStoppingAnswer::Fail(e) => self.error_path(out, e),
            TurnStoppingAnswer::Done => {
                if self.ns.is_empty() {
                    // S33/S34: NS still empty → end with the sticky reason.
                    let reason = self.normal_stop_reason();
                    self.end_turn(out, reason);
                } else {
                    // S33: hooks steered or injected → claim between steps, next pre-step.
                    self.next_pre_step(out);
                }
            }
        }
        Ok(())
    }

    /// S38 error path: `agent/error` (step = last entered step), `turn/end error`, driver exit.
    fn error_path(&mut self, out: &mut Out, error: Value) {
        let t = self.turn();
        out.push(notify(
            "agent/error",
            json!({ "turn": t.turn, "step": t.step, "error": error }),
        ));
        self.end_turn(out, json!({ "kind": "error", "error": error }));
    }

    /// S35 closing: `turn/end`, then continuation (completed / max-tokens / blocked with waking
    /// work) or driver exit.
    fn end_turn(&mut self, out: &mut Out, reason: Value) {
        let turn = self.turn().turn;
        out.push(event("turn/end", json!({ "turn": turn, "reason": reason })));
        let kind = reason["kind"].as_str().expect("reason kind");
        let may_continue = matches!(kind, "completed" | "max-tokens" | "blocked");
        if may_continue && self.has_waking_work() {
            // S35: next turn at once, same running interval, no status change.
            self.open_turn(out);
        } else {
            self.exit_driver(out);
        }
    }

    /// S35 driver exit: `status idle`, then `disposed` if disposing (S45), else replay the latch
    /// (S25: `status running` and a new turn if latched and there is waking work).
    fn exit_driver(&mut self, out: &mut Out) {
        let latch = self.wake_requested;
        self.phase = Phase::Idle;
        self.cancel = None;
        self.wake_requested = false;
        out.push(notify("agent/status", json!({ "status": "idle" })));
        if self.disposing {
            self.become_disposed(out);
            return;
        }
        if latch && self.has_waking_work() {
            out.push(notify("agent/status", json!({ "status": "running" })));
            self.open_turn(out);
        }
    }

    /// S45: the final `disposed` output.
    fn become_disposed(&mut self, out: &mut Out) {
        self.phase = Phase::Disposed;
        self.disposing = false;
        out.push(json!({ "disposed": {} }));
    }

    // ------------------------------------------------------------------------------------------
    // Cancellation, maintenance, disposal (S39–S45)
    // ------------------------------------------------------------------------------------------

    /// S39 `cancel(cause, {keepInbox})`: the clear (if any), then `abort` (first cancel only).
    fn on_cancel(&mut self, out: &mut Out, cause: Value, keep_inbox: bool) {
        let idle = self.phase == Phase::Idle;
        if !keep_inbox {
            // S39 (1): clear in any phase; if not idle, clear the latch too (S26).
            self.clear(out);
            if !idle {
                self.wake_requested = false;
            }
        }
        // S39 (2): the first cause of an activity wins; `abort` only on its first cancel; an idle
        // machine never emits `abort`.
        if !idle && self.cancel.is_none() {
            self.cancel = Some(cause.clone());
            out.push(request("abort", json!({ "cause": cause })));
        }
    }

    /// S43 `beginMaintenance()`: only when idle, else `busy`. No output.
    fn on_begin_maintenance(&mut self) -> Result<(), &'static str> {
        if self.phase != Phase::Idle {
            return Err("busy");
        }
        self.phase = Phase::Maintenance;
        self.cancel = None;
        self.wake_requested = false;
        Ok(())
    }

    /// S43 `endMaintenance()`: back to idle (no status output), then `disposed` if disposing (S45),
    /// else replay the latch (S25: only `status running` appears).
    fn on_end_maintenance(&mut self, out: &mut Out) -> Result<(), &'static str> {
        if self.phase != Phase::Maintenance {
            return Err("unexpected-completion");
        }
        let latch = self.wake_requested;
        self.phase = Phase::Idle;
        self.cancel = None;
        self.wake_requested = false;
        if self.disposing {
            self.become_disposed(out);
            return Ok(());
        }
        if latch && self.has_waking_work() {
            out.push(notify("agent/status", json!({ "status": "running" })));
            self.open_turn(out);
        }
        Ok(())
    }

    /// S45 `dispose()`: `cancel({kind:"disposed"})` without keepInbox, then disposing; `disposed`
    /// at once if already quiescent (idle).
    fn on_dispose(&mut self, out: &mut Out) {
        self.on_cancel(out, json!({ "kind": "disposed" }), false);
        self.disposing = true;
        if self.phase == Phase::Idle {
            self.become_disposed(out);
        }
    }
}

// ----------------------------------------------------------------------------------------------
// Tests
// ----------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    // ---- input builders ----

    fn m(id: &str) -> Value {
        json!({ "id": id, "source": { "kind": "user" }, "content": id })
    }
    fn ctx(id: &str) -> Value {
        json!({ "id": id, "source": { "kind": "plugin", "name": "p" }, "content": [id] })
    }
    fn followup(msg: &Value) -> Value {
        json!({ "followup": msg })
    }
    fn steer(msg: &Value) -> Value {
        json!({ "steer": msg })
    }
    fn inject(msg: &Value) -> Value {
        json!({ "inject": msg })
    }
    fn enter(msgs: &[&Value]) -> Value {
        json!({ "preStep": { "enter": msgs } })
    }
    fn cancel(kind: &str, keep: bool) -> Value {
        json!({ "cancel": { "cause": { "kind": kind }, "keepInbox": keep } })
    }
    fn err(code: &str) -> Value {
        json!({ "message": "boom", "code": code })
    }

    // ---- output builders ----

    fn spliced(data: Value) -> Value {
        json!({ "event": { "type": "agent/inbox/spliced", "data": data } })
    }
    fn ins(msg: &Value) -> Value {
        json!({ "notify": { "type": "agent/inbox/inserted", "message": msg } })
    }
    fn disc(msg: &Value) -> Value {
        json!({ "notify": { "type": "agent/inbox/discarded", "message": msg } })
    }
    fn claimed(msg: &Value, turn: u64) -> Value {
        json!({ "notify": { "type": "agent/inbox/claimed", "message": msg, "turn": turn } })
    }
    fn status(s: &str) -> Value {
        json!({ "notify": { "type": "agent/status", "status": s } })
    }
    fn turn_start(t: u64) -> Value {
        json!({ "event": { "type": "turn/start", "data": { "turn": t } } })
    }
    fn turn_end(t: u64, reason: Value) -> Value {
        json!({ "event": { "type": "turn/end", "data": { "turn": t, "reason": reason } } })
    }
    fn step_start(t: u64, s: u64) -> Value {
        json!({ "event": { "type": "step/start", "data": { "turn": t, "step": s } } })
    }
    fn step_end(t: u64, s: u64) -> Value {
        json!({ "event": { "type": "step/end", "data": { "turn": t, "step": s } } })
    }
    fn user_msg(msg: &Value) -> Value {
        json!({ "event": { "type": "user/message", "data": msg } })
    }
    fn req_pre_step(t: u64, s: u64, msgs: &[&Value]) -> Value {
        json!({ "request": { "preStep": { "turn": t, "step": s, "messages": msgs } } })
    }
    fn req_step(t: u64, s: u64) -> Value {
        json!({ "request": { "step": { "turn": t, "step": s } } })
    }
    fn req_turn_stopping(t: u64) -> Value {
        json!({ "request": { "turnStopping": { "turn": t } } })
    }
    fn abort(kind: &str) -> Value {
        json!({ "request": { "abort": { "cause": { "kind": kind } } } })
    }
    fn completed() -> Value {
        json!({ "kind": "completed" })
    }
    fn aborted(kind: &str) -> Value {
        json!({ "kind": "aborted", "reason": { "kind": kind } })
    }
    /// The claim splice of the single first NT item.
    fn claim_nt() -> Value {
        spliced(json!({ "target": "next-turn", "start": 0, "removedCount": 1, "inserted": [] }))
    }

    fn ok(r: &mut Reference, input: Value) -> Vec<Value> {
        r.apply(&input)
            .unwrap_or_else(|e| panic!("{input} rejected {e}"))
    }

    /// Idle follow-up `a` opened turn 1 and is awaiting its pre-step.
    fn running_turn1() -> (Reference, Value) {
        let mut r = Reference::new();
        let a = m("a");
        ok(&mut r, followup(&a));
        (r, a)
    }

    /// Turn 1 is in step 1 (entered `a`).
    fn in_step1() -> (Reference, Value) {
        let (mut r, a) = running_turn1();
        ok(&mut r, enter(&[&a]));
        (r, a)
    }

    #[test]
    fn format_example_idle_followup_one_text_step() {
        let mut r = Reference::new();
        let a = json!({"id":"a","source":{"kind":"user"},"content":"hi"});
        assert_eq!(
            ok(&mut r, json!({"followup": a})),
            vec![
                json!({"event":{"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"inserted":[{"id":"a","source":{"kind":"user"},"content":"hi"}],"wakeup":true}}}),
                json!({"notify":{"type":"agent/inbox/inserted","message":{"id":"a","source":{"kind":"user"},"content":"hi"}}}),
                json!({"notify":{"type":"agent/status","status":"running"}}),
                json!({"event":{"type":"turn/start","data":{"turn":1}}}),
                json!({"event":{"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}}}),
                json!({"notify":{"type":"agent/inbox/claimed","message":{"id":"a","source":{"kind":"user"},"content":"hi"},"turn":1}}),
                json!({"request":{"preStep":{"turn":1,"step":1,"messages":[{"id":"a","source":{"kind":"user"},"content":"hi"}]}}}),
            ]
        );
        assert_eq!(r.status(), "running");
        assert!(!r.is_quiescent());
        assert_eq!(
            ok(&mut r, json!({"preStep":{"enter":[a]}})),
            vec![
                json!({"event":{"type":"step/start","data":{"turn":1,"step":1}}}),
                json!({"event":{"type":"user/message","data":{"id":"a","source":{"kind":"user"},"content":"hi"}}}),
                json!({"request":{"step":{"turn":1,"step":1}}}),
            ]
        );
        assert_eq!(
            ok(&mut r, json!({"step":"completed"})),
            vec![
                json!({"event":{"type":"step/end","data":{"turn":1,"step":1}}}),
                json!({"request":{"turnStopping":{"turn":1}}}),
            ]
        );
        assert_eq!(
            ok(&mut r, json!({"turnStopping":"done"})),
            vec![
                json!({"event":{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}}),
                json!({"notify":{"type":"agent/status","status":"idle"}}),
            ]
        );
        assert_eq!(r.status(), "idle");
        assert!(r.is_quiescent());
        assert_eq!(r.last_turn(), 1);
    }

    #[test]
    fn s24_idle_followup_opens_turn() {
        let mut r = Reference::new();
        let a = m("a");
        assert_eq!(
            ok(&mut r, followup(&a)),
            vec![
                spliced(json!({"target":"next-turn","start":0,"inserted":[a],"wakeup":true})),
                ins(&a),
                status("running"),
                turn_start(1),
                claim_nt(),
                claimed(&a, 1),
                req_pre_step(1, 1, &[&a]),
            ]
        );
        assert_eq!(r.pending(), (vec![], vec![]));
        assert_eq!(r.last_turn(), 1);
    }

    #[test]
    fn s20_idle_inject_only_splices_and_inserts() {
        let mut r = Reference::new();
        let c = ctx("c");
        assert_eq!(
            ok(&mut r, inject(&c)),
            vec![
                spliced(json!({"target":"next-step","start":0,"inserted":[c]})),
                ins(&c)
            ]
        );
        assert_eq!(r.status(), "idle");
        assert_eq!(r.pending(), (vec![], vec![("c".to_string(), false)]));
    }

    #[test]
    fn s28_idle_steer_claims_ns_then_first_nt() {
        let mut r = Reference::new();
        let (q, c, s) = (m("q"), ctx("c"), m("s"));
        ok(
            &mut r,
            json!({"send":{"message":q,"target":"next-turn","wakeup":false}}),
        );
        ok(&mut r, inject(&c));
        assert_eq!(
            ok(&mut r, steer(&s)),
            vec![
                spliced(json!({"target":"next-step","start":1,"inserted":[s],"wakeup":true})),
                ins(&s),
                status("running"),
                turn_start(1),
                spliced(json!({"target":"next-step","start":0,"removedCount":2,"inserted":[]})),
                claim_nt(),
                claimed(&c, 1),
                claimed(&s, 1),
                claimed(&q, 1),
                req_pre_step(1, 1, &[&c, &s, &q]),
            ]
        );
    }

    #[test]
    fn s13_duplicate_pending_id_rejected_without_change() {
        let mut r = Reference::new();
        ok(&mut r, inject(&m("a")));
        assert_eq!(r.apply(&followup(&m("a"))), Err("already-pending"));
        assert_eq!(
            r.apply(&json!({"prepend":{"target":"next-turn","message":m("a")}})),
            Err("already-pending")
        );
        ok(&mut r, inject(&m("b")));
        assert_eq!(
            r.apply(&json!({"replace":{"id":"b","message":m("a")}})),
            Err("already-pending")
        );
        assert_eq!(
            r.pending(),
            (
                vec![],
                vec![("a".to_string(), false), ("b".to_string(), false)]
            )
        );
        assert_eq!(r.status(), "idle");
    }

    #[test]
    fn s9_claimed_id_may_be_delivered_again() {
        let (mut r, a) = running_turn1();
        let out = ok(&mut r, followup(&a));
        assert_eq!(
            out,
            vec![
                spliced(json!({"target":"next-turn","start":0,"inserted":[a],"wakeup":true})),
                ins(&a)
            ]
        );
    }

    #[test]
    fn s15_remove_is_ordinary_cancellation() {
        let mut r = Reference::new();
        let (a, b) = (m("a"), m("b"));
        ok(&mut r, inject(&a));
        ok(&mut r, inject(&b));
        assert_eq!(
            ok(&mut r, json!({"remove":"b"})),
            vec![
                spliced(
                    json!({"target":"next-step","start":1,"removedCount":1,"inserted":[],"outcome":"canceled"})
                ),
                disc(&b),
            ]
        );
        assert_eq!(ok(&mut r, json!({"remove":"zz"})), Vec::<Value>::new());
    }

    #[test]
    fn s15_replace_inherits_waking_flag() {
        let (mut r, _a) = in_step1();
        let (b, b2) = (
            m("b"),
            json!({"id":"b","source":{"kind":"user"},"content":"edited"}),
        );
        ok(&mut r, followup(&b));
        assert_eq!(
            ok(&mut r, json!({"replace":{"id":"b","message":b2}})),
            vec![
                spliced(
                    json!({"target":"next-turn","start":0,"removedCount":1,"inserted":[b2],"outcome":"canceled","wakeup":true})
                ),
                disc(&b),
                ins(&b2),
            ]
        );
        assert_eq!(r.pending().0, vec![("b".to_string(), true)]);
        // A quiet item's replacement stays quiet and its splice has no `wakeup`.
        let (c, d) = (ctx("c"), ctx("d"));
        ok(&mut r, inject(&c));
        assert_eq!(
            ok(&mut r, json!({"replace":{"id":"c","message":d}})),
            vec![
                spliced(
                    json!({"target":"next-step","start":0,"removedCount":1,"inserted":[d],"outcome":"canceled"})
                ),
                disc(&c),
                ins(&d),
            ]
        );
        assert_eq!(r.pending().1, vec![("d".to_string(), false)]);
        // Absent id: nothing, never rejected (even with a pending new id).
        assert_eq!(
            ok(&mut r, json!({"replace":{"id":"zz","message":d}})),
            Vec::<Value>::new()
        );
    }

    #[test]
    fn s15_prepend_is_quiet_and_first() {
        let mut r = Reference::new();
        let (a, b) = (m("a"), m("b"));
        ok(&mut r, inject(&a));
        assert_eq!(
            ok(
                &mut r,
                json!({"prepend":{"target":"next-step","message":b}})
            ),
            vec![
                spliced(json!({"target":"next-step","start":0,"inserted":[b]})),
                ins(&b)
            ]
        );
        assert_eq!(
            r.pending().1,
            vec![("b".to_string(), false), ("a".to_string(), false)]
        );
        assert_eq!(r.status(), "idle");
    }

    #[test]
    fn s15_clear_ns_then_nt_each_with_its_discards() {
        let mut r = Reference::new();
        let (q1, q2, c) = (m("q1"), m("q2"), ctx("c"));
        for q in [&q1, &q2] {
            ok(
                &mut r,
                json!({"send":{"message":q,"target":"next-turn","wakeup":false}}),
            );
        }
        ok(&mut r, inject(&c));
        assert_eq!(
            ok(&mut r, json!({"clear":{}})),
            vec![
                spliced(
                    json!({"target":"next-step","start":0,"removedCount":1,"inserted":[],"outcome":"canceled"})
                ),
                disc(&c),
                spliced(
                    json!({"target":"next-turn","start":0,"removedCount":2,"inserted":[],"outcome":"canceled"})
                ),
                disc(&q1),
                disc(&q2),
            ]
        );
        assert_eq!(ok(&mut r, json!({"clear":{}})), Vec::<Value>::new());
    }

    #[test]
    fn s24_running_followup_does_not_wake_and_s35_continues() {
        let (mut r, _a) = in_step1();
        let b = m("b");
        assert_eq!(
            ok(&mut r, followup(&b)),
            vec![
                spliced(json!({"target":"next-turn","start":0,"inserted":[b],"wakeup":true})),
                ins(&b)
            ]
        );
        // S33: terminal with NS empty asks the hook even though NT has a follow-up.
        assert_eq!(
            ok(&mut r, json!({"step":"completed"})),
            vec![step_end(1, 1), req_turn_stopping(1)]
        );
        assert_eq!(
            ok(&mut r, json!({"turnStopping":"done"})),
            vec![
                turn_end(1, completed()),
                turn_start(2),
                claim_nt(),
                claimed(&b, 2),
                req_pre_step(2, 1, &[&b]),
            ]
        );
        assert_eq!(r.status(), "running");
    }

    #[test]
    fn s33_steer_during_step_claimed_between_steps() {
        let (mut r, _a) = in_step1();
        let (s, f) = (m("s"), m("f"));
        ok(&mut r, followup(&f));
        ok(&mut r, steer(&s));
        // NT is never touched between steps (S28).
        assert_eq!(
            ok(&mut r, json!({"step":"completed"})),
            vec![
                step_end(1, 1),
                spliced(json!({"target":"next-step","start":0,"removedCount":1,"inserted":[]})),
                claimed(&s, 1),
                req_pre_step(1, 2, &[&s]),
            ]
        );
        assert_eq!(
            ok(&mut r, enter(&[&s])),
            vec![step_start(1, 2), user_msg(&s), req_step(1, 2)]
        );
    }

    #[test]
    fn s33_turn_stopping_hook_injects_and_turn_goes_on() {
        let (mut r, _a) = in_step1();
        ok(&mut r, json!({"step":"completed"}));
        let c = ctx("c");
        ok(&mut r, inject(&c));
        assert_eq!(
            ok(&mut r, json!({"turnStopping":"done"})),
            vec![
                spliced(json!({"target":"next-step","start":0,"removedCount":1,"inserted":[]})),
                claimed(&c, 1),
                req_pre_step(1, 2, &[&c]),
            ]
        );
        // S30: an empty enter after a terminal step ends at once, without turnStopping.
        assert_eq!(
            ok(&mut r, enter(&[])),
            vec![turn_end(1, completed()), status("idle")]
        );
    }

    #[test]
    fn s34_max_tokens_reason_is_sticky_but_stop_follows_latest() {
        let (mut r, _a) = in_step1();
        let c = ctx("c");
        ok(&mut r, inject(&c));
        // max-tokens with NS non-empty: next pre-step.
        assert_eq!(
            ok(&mut r, json!({"step":"max-tokens"})),
            vec![
                step_end(1, 1),
                spliced(json!({"target":"next-step","start":0,"removedCount":1,"inserted":[]})),
                claimed(&c, 1),
                req_pre_step(1, 2, &[&c]),
            ]
        );
        ok(&mut r, enter(&[&c]));
        // A continue step: the turn goes on even though an earlier step hit max-tokens.
        assert_eq!(
            ok(&mut r, json!({"step":"continue"})),
            vec![step_end(1, 2), req_pre_step(1, 3, &[])]
        );
        // S30: enter([]) after continue opens a step with no messages.
        assert_eq!(
            ok(&mut r, enter(&[])),
            vec![step_start(1, 3), req_step(1, 3)]
        );
        ok(&mut r, json!({"step":"completed"}));
        assert_eq!(
            ok(&mut r, json!({"turnStopping":"done"})),
            vec![turn_end(1, json!({"kind":"max-tokens"})), status("idle")]
        );
    }

    #[test]
    fn s30_max_tokens_then_empty_enter_ends_with_max_tokens() {
        let (mut r, _a) = in_step1();
        let c = ctx("c");
        ok(&mut r, inject(&c));
        ok(&mut r, json!({"step":"max-tokens"}));
        let s = m("s");
        ok(&mut r, steer(&s)); // lands in NS; not looked at again by enter([])
        assert_eq!(
            ok(&mut r, enter(&[])),
            vec![
                turn_end(1, json!({"kind":"max-tokens"})),
                // S35: waking work (the steer) → next turn at once.
                turn_start(2),
                spliced(json!({"target":"next-step","start":0,"removedCount":1,"inserted":[]})),
                claimed(&s, 2),
                req_pre_step(2, 1, &[&s]),
            ]
        );
    }

    #[test]
    fn s30_empty_first_proposal_completes_without_step() {
        let (mut r, _a) = running_turn1();
        assert_eq!(
            ok(&mut r, enter(&[])),
            vec![turn_end(1, completed()), status("idle")]
        );
    }

    #[test]
    fn s35_blocked_turn_does_not_stall_following_followups() {
        let (mut r, _a) = running_turn1();
        let b = m("b");
        ok(&mut r, followup(&b));
        assert_eq!(
            ok(&mut r, json!({"preStep":"reject"})),
            vec![
                turn_end(1, json!({"kind":"blocked"})),
                turn_start(2),
                claim_nt(),
                claimed(&b, 2),
                req_pre_step(2, 1, &[&b]),
            ]
        );
    }

    #[test]
    fn s19_quiet_nt_item_gets_own_turn_before_followup() {
        let (mut r, _a) = running_turn1();
        let (q, b) = (m("q"), m("b"));
        ok(
            &mut r,
            json!({"send":{"message":q,"target":"next-turn","wakeup":false}}),
        );
        ok(&mut r, followup(&b));
        assert_eq!(
            ok(&mut r, enter(&[])),
            vec![
                turn_end(1, completed()),
                turn_start(2),
                claim_nt(),
                claimed(&q, 2),
                req_pre_step(2, 1, &[&q]),
            ]
        );
        assert_eq!(
            ok(&mut r, enter(&[])),
            vec![
                turn_end(2, completed()),
                turn_start(3),
                claim_nt(),
                claimed(&b, 3),
                req_pre_step(3, 1, &[&b]),
            ]
        );
        assert_eq!(
            ok(&mut r, enter(&[])),
            vec![turn_end(3, completed()), status("idle")]
        );
    }

    #[test]
    fn s19_quiet_items_alone_never_continue() {
        let (mut r, _a) = running_turn1();
        ok(&mut r, inject(&ctx("c")));
        ok(
            &mut r,
            json!({"send":{"message":m("q"),"target":"next-turn","wakeup":false}}),
        );
        assert_eq!(
            ok(&mut r, json!({"preStep":"reject"})),
            vec![turn_end(1, json!({"kind":"blocked"})), status("idle")]
        );
        assert_eq!(
            r.pending(),
            (
                vec![("q".to_string(), false)],
                vec![("c".to_string(), false)]
            )
        );
    }

    #[test]
    fn s38_step_failure_error_path() {
        let (mut r, _a) = in_step1();
        let e = err("E1");
        assert_eq!(
            ok(&mut r, json!({"step":{"fail":e}})),
            vec![
                step_end(1, 1),
                json!({"notify":{"type":"agent/error","turn":1,"step":1,"error":e}}),
                turn_end(1, json!({"kind":"error","error":e})),
                status("idle"),
            ]
        );
    }

    #[test]
    fn s38_pre_step_failure_step_zero_and_no_continuation() {
        let (mut r, _a) = running_turn1();
        let b = m("b");
        ok(&mut r, followup(&b));
        let e = err("E2");
        assert_eq!(
            ok(&mut r, json!({"preStep":{"fail":e}})),
            vec![
                json!({"notify":{"type":"agent/error","turn":1,"step":0,"error":e}}),
                turn_end(1, json!({"kind":"error","error":e})),
                status("idle"),
            ]
        );
        assert_eq!(r.pending().0, vec![("b".to_string(), true)]);
    }

    #[test]
    fn s33_turn_stopping_failure_error_path() {
        let (mut r, _a) = in_step1();
        ok(&mut r, json!({"step":"completed"}));
        let e = err("E3");
        assert_eq!(
            ok(&mut r, json!({"turnStopping":{"fail":e}})),
            vec![
                json!({"notify":{"type":"agent/error","turn":1,"step":1,"error":e}}),
                turn_end(1, json!({"kind":"error","error":e})),
                status("idle"),
            ]
        );
    }

    #[test]
    fn s38_failure_while_cancel_requested_is_aborted() {
        let (mut r, _a) = in_step1();
        assert_eq!(ok(&mut r, cancel("user", true)), vec![abort("user")]);
        assert_eq!(
            ok(&mut r, json!({"step":{"fail":err("E")}})),
            vec![step_end(1, 1), turn_end(1, aborted("user")), status("idle")]
        );
    }

    #[test]
    fn s4_unexpected_completions_rejected() {
        let mut r = Reference::new();
        assert_eq!(r.apply(&enter(&[])), Err("unexpected-completion"));
        assert_eq!(
            r.apply(&json!({"step":"completed"})),
            Err("unexpected-completion")
        );
        assert_eq!(
            r.apply(&json!({"turnStopping":"done"})),
            Err("unexpected-completion")
        );
        assert_eq!(
            r.apply(&json!({"maintenance":"end"})),
            Err("unexpected-completion")
        );
        let (mut r, _a) = running_turn1();
        assert_eq!(
            r.apply(&json!({"step":"completed"})),
            Err("unexpected-completion")
        );
        assert_eq!(
            r.apply(&json!({"turnStopping":"done"})),
            Err("unexpected-completion")
        );
    }

    #[test]
    fn s39_cancel_clear_then_abort_and_first_cause_wins() {
        let (mut r, _a) = in_step1();
        let (c, b) = (ctx("c"), m("b"));
        ok(&mut r, inject(&c));
        ok(&mut r, followup(&b));
        assert_eq!(
            ok(
                &mut r,
                json!({"cancel":{"cause":{"kind":"hook","reason":"r"}}})
            ),
            vec![
                spliced(
                    json!({"target":"next-step","start":0,"removedCount":1,"inserted":[],"outcome":"canceled"})
                ),
                disc(&c),
                spliced(
                    json!({"target":"next-turn","start":0,"removedCount":1,"inserted":[],"outcome":"canceled"})
                ),
                disc(&b),
                json!({"request":{"abort":{"cause":{"kind":"hook","reason":"r"}}}}),
            ]
        );
        // A later cancel keeps the first cause and emits no second abort.
        assert_eq!(ok(&mut r, cancel("user", false)), Vec::<Value>::new());
        assert_eq!(
            ok(&mut r, json!({"step":"completed"})),
            vec![
                step_end(1, 1),
                turn_end(
                    1,
                    json!({"kind":"aborted","reason":{"kind":"hook","reason":"r"}})
                ),
                status("idle"),
            ]
        );
    }

    #[test]
    fn s39_idle_cancel_never_aborts() {
        let mut r = Reference::new();
        assert_eq!(ok(&mut r, cancel("user", false)), Vec::<Value>::new());
        let c = ctx("c");
        ok(&mut r, inject(&c));
        assert_eq!(ok(&mut r, cancel("user", true)), Vec::<Value>::new());
        assert_eq!(
            ok(&mut r, cancel("user", false)),
            vec![
                spliced(
                    json!({"target":"next-step","start":0,"removedCount":1,"inserted":[],"outcome":"canceled"})
                ),
                disc(&c),
            ]
        );
    }

    #[test]
    fn s41_cancel_after_idle_followup_aborts_without_step() {
        let (mut r, _a) = running_turn1();
        assert_eq!(ok(&mut r, cancel("user", true)), vec![abort("user")]);
        assert_eq!(
            ok(&mut r, enter(&[&m("a")])),
            vec![turn_end(1, aborted("user")), status("idle")]
        );
    }

    #[test]
    fn s18_s25_steer_after_cancel_retargets_and_latch_replays() {
        let (mut r, _a) = in_step1();
        ok(&mut r, cancel("user", true));
        let s = m("s");
        assert_eq!(
            ok(&mut r, steer(&s)),
            vec![
                spliced(json!({"target":"next-turn","start":0,"inserted":[s],"wakeup":true})),
                ins(&s)
            ]
        );
        // A non-waking send is never retargeted.
        let c = ctx("c");
        assert_eq!(
            ok(&mut r, inject(&c)),
            vec![
                spliced(json!({"target":"next-step","start":0,"inserted":[c]})),
                ins(&c)
            ]
        );
        assert_eq!(
            ok(&mut r, json!({"step":"completed"})),
            vec![
                step_end(1, 1),
                turn_end(1, aborted("user")),
                status("idle"),
                status("running"),
                turn_start(2),
                spliced(json!({"target":"next-step","start":0,"removedCount":1,"inserted":[]})),
                claim_nt(),
                claimed(&c, 2),
                claimed(&s, 2),
                req_pre_step(2, 1, &[&c, &s]),
            ]
        );
    }

    #[test]
    fn s26_keep_inbox_parks_work_sent_before_cancel() {
        let (mut r, _a) = in_step1();
        let b = m("b");
        ok(&mut r, followup(&b));
        ok(&mut r, cancel("user", true));
        assert_eq!(
            ok(&mut r, json!({"step":"continue"})),
            vec![step_end(1, 1), turn_end(1, aborted("user")), status("idle")]
        );
        assert_eq!(r.pending().0, vec![("b".to_string(), true)]);
        // A later wake picks the parked item first (FIFO).
        let d = m("d");
        assert_eq!(
            ok(&mut r, followup(&d)),
            vec![
                spliced(json!({"target":"next-turn","start":1,"inserted":[d],"wakeup":true})),
                ins(&d),
                status("running"),
                turn_start(2),
                claim_nt(),
                claimed(&b, 2),
                req_pre_step(2, 1, &[&b]),
            ]
        );
    }

    #[test]
    fn s25_latch_replays_for_parked_work_even_if_latching_item_removed() {
        let (mut r, _a) = in_step1();
        let (b, s) = (m("b"), m("s"));
        ok(&mut r, followup(&b)); // parked by the keepInbox cancel
        ok(&mut r, cancel("user", true));
        ok(&mut r, followup(&s)); // latches
        ok(&mut r, json!({"remove":"s"}));
        assert_eq!(
            ok(&mut r, json!({"step":"completed"})),
            vec![
                step_end(1, 1),
                turn_end(1, aborted("user")),
                status("idle"),
                status("running"),
                turn_start(2),
                claim_nt(),
                claimed(&b, 2),
                req_pre_step(2, 1, &[&b]),
            ]
        );
    }

    #[test]
    fn s26_cancel_without_keep_inbox_clears_latch() {
        let (mut r, _a) = in_step1();
        ok(&mut r, cancel("user", true));
        ok(&mut r, followup(&m("s"))); // latched
        let s = m("s");
        assert_eq!(
            ok(&mut r, cancel("parent", false)),
            vec![
                spliced(
                    json!({"target":"next-turn","start":0,"removedCount":1,"inserted":[],"outcome":"canceled"})
                ),
                disc(&s),
            ]
        );
        // Only quiet work remains; the cleared latch does not replay at the exit.
        ok(&mut r, inject(&ctx("c")));
        assert_eq!(
            ok(&mut r, json!({"step":"completed"})),
            vec![step_end(1, 1), turn_end(1, aborted("user")), status("idle")]
        );
    }

    #[test]
    fn s24_disposed_cause_does_not_latch() {
        let (mut r, _a) = in_step1();
        assert_eq!(
            ok(&mut r, cancel("disposed", true)),
            vec![abort("disposed")]
        );
        ok(&mut r, followup(&m("b")));
        assert_eq!(
            ok(&mut r, json!({"step":"completed"})),
            vec![
                step_end(1, 1),
                turn_end(1, aborted("disposed")),
                status("idle")
            ]
        );
        // An ordinary cancel: the machine is not disposed.
        assert_eq!(r.pending().0, vec![("b".to_string(), true)]);
        assert!(r.apply(&json!({"maintenance":"begin"})).is_ok());
    }

    #[test]
    fn s43_maintenance_latches_and_replays_at_end() {
        let mut r = Reference::new();
        assert_eq!(
            ok(&mut r, json!({"maintenance":"begin"})),
            Vec::<Value>::new()
        );
        assert!(!r.is_quiescent());
        assert_eq!(r.status(), "idle");
        assert_eq!(r.apply(&json!({"maintenance":"begin"})), Err("busy"));
        let s = m("s");
        assert_eq!(
            ok(&mut r, steer(&s)),
            vec![
                spliced(json!({"target":"next-step","start":0,"inserted":[s],"wakeup":true})),
                ins(&s)
            ]
        );
        assert_eq!(
            ok(&mut r, json!({"maintenance":"end"})),
            vec![
                status("running"),
                turn_start(1),
                spliced(json!({"target":"next-step","start":0,"removedCount":1,"inserted":[]})),
                claimed(&s, 1),
                req_pre_step(1, 1, &[&s]),
            ]
        );
        assert_eq!(r.apply(&json!({"maintenance":"begin"})), Err("busy"));
    }

    #[test]
    fn s43_maintenance_cancel_keep_inbox_keeps_latch_and_retargets() {
        let mut r = Reference::new();
        ok(&mut r, json!({"maintenance":"begin"}));
        let (a, s) = (m("a"), m("s"));
        ok(&mut r, followup(&a));
        assert_eq!(ok(&mut r, cancel("user", true)), vec![abort("user")]);
        assert_eq!(
            ok(&mut r, steer(&s)),
            vec![
                spliced(json!({"target":"next-turn","start":1,"inserted":[s],"wakeup":true})),
                ins(&s)
            ]
        );
        assert_eq!(
            ok(&mut r, json!({"maintenance":"end"})),
            vec![
                status("running"),
                turn_start(1),
                claim_nt(),
                claimed(&a, 1),
                req_pre_step(1, 1, &[&a]),
            ]
        );
    }

    #[test]
    fn s43_maintenance_cancel_clears_lists_and_latch() {
        let mut r = Reference::new();
        ok(&mut r, json!({"maintenance":"begin"}));
        let a = m("a");
        ok(&mut r, followup(&a));
        assert_eq!(
            ok(&mut r, cancel("user", false)),
            vec![
                spliced(
                    json!({"target":"next-turn","start":0,"removedCount":1,"inserted":[],"outcome":"canceled"})
                ),
                disc(&a),
                abort("user"),
            ]
        );
        assert_eq!(
            ok(&mut r, json!({"maintenance":"end"})),
            Vec::<Value>::new()
        );
        assert!(r.is_quiescent());
    }

    #[test]
    fn s45_dispose_idle_clears_then_disposed_then_rejects_everything() {
        let mut r = Reference::new();
        let c = ctx("c");
        ok(&mut r, inject(&c));
        assert_eq!(
            ok(&mut r, json!({"dispose":{}})),
            vec![
                spliced(
                    json!({"target":"next-step","start":0,"removedCount":1,"inserted":[],"outcome":"canceled"})
                ),
                disc(&c),
                json!({"disposed":{}}),
            ]
        );
        for input in [
            followup(&m("x")),
            json!({"remove":"x"}),
            json!({"clear":{}}),
            json!({"dispose":{}}),
            json!({"maintenance":"end"}),
            enter(&[]),
            cancel("user", false),
        ] {
            assert_eq!(r.apply(&input), Err("disposed"));
        }
        assert_eq!(r.status(), "idle");
        assert!(r.is_quiescent());
    }

    #[test]
    fn s45_dispose_running_parks_deliveries_and_ends_after_status_idle() {
        let (mut r, _a) = in_step1();
        assert_eq!(ok(&mut r, json!({"dispose":{}})), vec![abort("disposed")]);
        let s = m("s");
        // Retargeted (cancel requested), appended, not latched.
        assert_eq!(
            ok(&mut r, steer(&s)),
            vec![
                spliced(json!({"target":"next-turn","start":0,"inserted":[s],"wakeup":true})),
                ins(&s)
            ]
        );
        // A second dispose clears again but emits no second abort.
        assert_eq!(
            ok(&mut r, json!({"dispose":{}})),
            vec![
                spliced(
                    json!({"target":"next-turn","start":0,"removedCount":1,"inserted":[],"outcome":"canceled"})
                ),
                disc(&s),
            ]
        );
        ok(&mut r, followup(&m("t")));
        assert_eq!(
            ok(&mut r, json!({"step":"completed"})),
            vec![
                step_end(1, 1),
                turn_end(1, aborted("disposed")),
                status("idle"),
                json!({"disposed":{}}),
            ]
        );
        assert_eq!(r.apply(&followup(&m("u"))), Err("disposed"));
    }

    #[test]
    fn s45_dispose_after_user_cancel_keeps_first_cause_and_does_not_latch() {
        let (mut r, _a) = in_step1();
        ok(&mut r, cancel("user", true));
        assert_eq!(ok(&mut r, json!({"dispose":{}})), Vec::<Value>::new());
        ok(&mut r, followup(&m("b")));
        assert_eq!(
            ok(&mut r, json!({"step":"completed"})),
            vec![
                step_end(1, 1),
                turn_end(1, aborted("user")),
                status("idle"),
                json!({"disposed":{}}),
            ]
        );
    }

    #[test]
    fn s45_dispose_during_maintenance_disposed_at_end() {
        let mut r = Reference::new();
        ok(&mut r, json!({"maintenance":"begin"}));
        assert_eq!(ok(&mut r, json!({"dispose":{}})), vec![abort("disposed")]);
        ok(&mut r, followup(&m("a")));
        assert_eq!(
            ok(&mut r, json!({"maintenance":"end"})),
            vec![json!({"disposed":{}})]
        );
    }

    #[test]
    fn s42_each_turn_is_its_own_activity() {
        let (mut r, _a) = in_step1();
        let b = m("b");
        ok(&mut r, followup(&b));
        ok(&mut r, json!({"step":"completed"}));
        ok(&mut r, json!({"turnStopping":"done"})); // turn 2 opens
        assert_eq!(ok(&mut r, cancel("user", true)), vec![abort("user")]);
        assert_eq!(
            ok(&mut r, enter(&[&b])),
            vec![turn_end(2, aborted("user")), status("idle")]
        );
        let c = m("c");
        ok(&mut r, followup(&c));
        assert_eq!(ok(&mut r, cancel("parent", true)), vec![abort("parent")]);
    }

    #[test]
    fn s5_rejected_input_changes_nothing() {
        let (mut r, _a) = in_step1();
        let before = format!("{r:?}");
        assert_eq!(r.apply(&enter(&[])), Err("unexpected-completion"));
        assert_eq!(r.apply(&json!({"maintenance":"begin"})), Err("busy"));
        assert_eq!(format!("{r:?}"), before);
    }

    #[test]
    fn s46_restore_rebuilds_lists_from_seed_and_last_turn() {
        let (a, b, c) = (m("a"), m("b"), m("c"));
        let log = vec![
            json!({"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"inserted":[a],"wakeup":true}}),
            json!({"type":"turn/start","data":{"turn":4}}),
            json!({"type":"model/output","data":null}),
            json!({"type":"turn/end","data":{"turn":4,"reason":{"kind":"interrupted"}}}),
            json!({"type":"agent/inbox/spliced","seq":9,"data":{"target":"next-step","start":0,"removedCount":0,"inserted":[b,c],"outcome":"weird","wakeup":true}}),
            json!({"type":"agent/inbox/spliced","data":{"target":"next-step","start":0,"removedCount":1,"inserted":[]}}),
        ];
        let r = Reference::restore(&log, 1).expect("valid");
        assert_eq!(r.pending(), (vec![], vec![("c".to_string(), true)]));
        assert_eq!(r.last_turn(), 4);
        assert_eq!(r.status(), "idle");
        let r = Reference::restore(&log, 0).expect("valid");
        assert_eq!(r.pending().0, vec![("a".to_string(), true)]);
        // Clamped seed: nothing replayed.
        let r = Reference::restore(&log, 99).expect("valid");
        assert_eq!(r.pending(), (vec![], vec![]));
        // S48: restoring never wakes; the next turn is lastTurn + 1.
        let mut r = Reference::restore(&log, 0).expect("valid");
        let d = m("d");
        assert_eq!(
            ok(&mut r, followup(&d)),
            vec![
                spliced(json!({"target":"next-turn","start":1,"inserted":[d],"wakeup":true})),
                ins(&d),
                status("running"),
                turn_start(5),
                spliced(json!({"target":"next-step","start":0,"removedCount":1,"inserted":[]})),
                claim_nt(),
                claimed(&c, 5),
                claimed(&a, 5),
                req_pre_step(5, 1, &[&c, &a]),
            ]
        );
    }

    #[test]
    fn s47_restore_rejects_invalid_logs() {
        let a = m("a");
        let bad = [
            json!([{"data":{}}]),
            json!([{"type":"turn/start","data":{"turn":"1"}}, {"type":"turn/end","data":{}}]),
            json!([{"type":"turn/start","data":{"turn":1}}]),
            json!([{"type":"agent/inbox/spliced","data":{"target":"nt","start":0,"inserted":[]}}]),
            json!([{"type":"agent/inbox/spliced","data":{"target":"next-turn","start":1,"inserted":[]}}]),
            json!([{"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}}]),
            json!([{"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"inserted":[{"content":1}]}}]),
            json!([{"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"inserted":[a],"wakeup":false}}]),
            json!([{"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"inserted":[a,a]}}]),
            json!([
                {"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"inserted":[a]}},
                {"type":"agent/inbox/spliced","data":{"target":"next-step","start":0,"inserted":[a]}}
            ]),
        ];
        for log in bad {
            let events = log.as_array().expect("array").clone();
            assert!(Reference::restore(&events, 0).is_err(), "accepted {log}");
        }
        // An invalid splice before the seed boundary is not read.
        let events = vec![json!({"type":"agent/inbox/spliced","data":{"target":"nt"}})];
        assert!(Reference::restore(&events, 1).is_ok());
    }

    /// A tiny deterministic PRNG (xorshift64*), std only.
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) % n
        }
    }

    fn random_input(rng: &mut Rng) -> Value {
        let id = format!("m{}", rng.below(6));
        let msg = m(&id);
        let target = if rng.below(2) == 0 {
            "next-turn"
        } else {
            "next-step"
        };
        let causes = ["user", "parent", "disposed"];
        match rng.below(22) {
            0 | 1 => followup(&msg),
            2 | 3 => steer(&msg),
            4 => inject(&msg),
            5 => json!({"send":{"message":msg,"target":target,"wakeup":rng.below(2)==0}}),
            6 => json!({"remove": id}),
            7 => json!({"replace":{"id": format!("m{}", rng.below(6)),"message":msg}}),
            8 => json!({"prepend":{"target":target,"message":msg}}),
            9 => json!({"clear":{}}),
            10 => cancel(causes[rng.below(3) as usize], rng.below(2) == 0),
            11 => json!({"maintenance":"begin"}),
            12 => json!({"maintenance":"end"}),
            13 => {
                if rng.below(8) == 0 {
                    json!({"dispose":{}})
                } else {
                    json!({"maintenance":"end"})
                }
            }
            14 => enter(&[]),
            15 => enter(&[&msg]),
            16 => json!({"preStep":"reject"}),
            17 => json!({"preStep":{"fail":err("P")}}),
            18 => {
                let outcome = ["completed", "max-tokens", "continue"][rng.below(3) as usize];
                json!({ "step": outcome })
            }
            19 => json!({"step":{"fail":err("S")}}),
            20 => json!({"turnStopping":"done"}),
            _ => json!({"turnStopping":{"fail":err("T")}}),
        }
    }

    /// S49 / I1 / I5 / I8 / I10 on random walks: the model agrees with its own durable log.
    #[test]
    fn s49_random_walks_keep_replay_equivalence_and_enclosure() {
        // Coverage: which turn-end kinds (and disposal) the walks reached.
        let mut seen: Vec<String> = Vec::new();
        for seed in 1..=300u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let mut r = Reference::new();
            let mut log: Vec<Value> = Vec::new();
            let mut statuses: Vec<String> = Vec::new();
            let (mut open_turn, mut open_step): (Option<u64>, Option<u64>) = (None, None);
            let mut outstanding = 0i32;
            for _ in 0..120 {
                let input = random_input(&mut rng);
                let Ok(outs) = r.apply(&input) else { continue };
                for o in &outs {
                    if let Some(ev) = o.get("event") {
                        log.push(ev.clone());
                        let d = &ev["data"];
                        match ev["type"].as_str().expect("type") {
                            "turn/start" => {
                                assert_eq!(open_turn, None, "I5 seed {seed}");
                                open_turn = d["turn"].as_u64();
                            }
                            "turn/end" => {
                                seen.push(d["reason"]["kind"].as_str().expect("kind").into());
                                assert_eq!(open_step, None, "I5 seed {seed}");
                                assert_eq!(open_turn, d["turn"].as_u64(), "I5 seed {seed}");
                                open_turn = None;
                            }
                            "step/start" => {
                                assert!(open_turn.is_some() && open_step.is_none(), "I5");
                                open_step = d["step"].as_u64();
                            }
                            "step/end" => {
                                assert_eq!(open_step, d["step"].as_u64(), "I5 seed {seed}");
                                open_step = None;
                            }
                            "user/message" => assert!(open_step.is_some(), "I5 seed {seed}"),
                            _ => {}
                        }
                    }
                    if let Some(n) = o.get("notify") {
                        if n["type"] == "agent/status" {
                            statuses.push(n["status"].as_str().expect("status").to_string());
                        }
                    }
                    if o.get("disposed").is_some() {
                        seen.push("disposed".into());
                    }
                    if let Some(q) = o.get("request") {
                        if q.get("abort").is_none() {
                            outstanding += 1;
                        }
                    }
                }
                // I10: one outstanding request while running, none otherwise.
                let answered = ["preStep", "step", "turnStopping"]
                    .iter()
                    .any(|k| input.get(*k).is_some());
                if answered {
                    outstanding -= 1;
                }
                let want = i32::from(r.status() == "running");
                assert_eq!(outstanding, want, "I10 seed {seed} after {input}");
                // S49 / I1: restoring the log (with crash-repair closers) gives the same lists.
                let mut repaired = log.clone();
                if let Some(t) = open_turn {
                    if let Some(s) = open_step {
                        repaired.push(json!({"type":"step/end","data":{"turn":t,"step":s}}));
                    }
                    repaired.push(json!({"type":"turn/end","data":{"turn":t,"reason":{"kind":"interrupted"}}}));
                }
                let restored = Reference::restore(&repaired, 0).expect("own log is valid");
                assert_eq!(restored.pending(), r.pending(), "S49 seed {seed}");
                if r.is_quiescent() {
                    assert_eq!(restored.last_turn(), r.last_turn(), "S49 seed {seed}");
                }
            }
            // I8: status notifications alternate, starting with running.
            for (i, s) in statuses.iter().enumerate() {
                let want = if i % 2 == 0 { "running" } else { "idle" };
                assert_eq!(s, want, "I8 seed {seed}");
            }
        }
        for kind in [
            "completed",
            "max-tokens",
            "blocked",
            "aborted",
            "error",
            "disposed",
        ] {
            assert!(seen.iter().any(|k| k == kind), "walks never reached {kind}");
        }
    }

    // ---- conformance corpus ----

    /// Replays one trace file's text; returns the first mismatch as text, if any.
    fn replay_trace(text: &str) -> Result<(), String> {
        let mut lines: Vec<(usize, String, Value)> = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            let line_no = n + 1;
            if raw.trim().is_empty() {
                continue;
            }
            let v: Value =
                serde_json::from_str(raw).map_err(|e| format!("line {line_no}: not JSON: {e}"))?;
            let obj = v
                .as_object()
                .filter(|o| o.len() == 1)
                .ok_or_else(|| format!("line {line_no}: not a one-key object"))?;
            let (k, val) = obj.iter().next().expect("one key");
            if k == "note" {
                continue;
            }
            lines.push((line_no, k.clone(), val.clone()));
        }
        let mut i = 0;
        let mut model = Reference::new();
        if let Some((line_no, k, given)) = lines.first() {
            if k == "given" {
                let log = given["log"]
                    .as_array()
                    .ok_or_else(|| format!("line {line_no}: given.log is not a list"))?;
                let seed = given.get("seedLength").and_then(Value::as_u64).unwrap_or(0) as usize;
                let expect_invalid = matches!(
                    lines.get(1),
                    Some((_, k, v)) if k == "rejected" && v == "invalid-log"
                );
                match (Reference::restore(log, seed), expect_invalid) {
                    (Ok(_), true) => {
                        return Err(format!(
                            "line {}: expected invalid-log, model restored the log",
                            lines[1].0
                        ))
                    }
                    (Err(e), false) => {
                        return Err(format!(
                        "line {line_no}: model rejects the given log ({e}), trace expects it valid"
                    ))
                    }
                    (Err(_), true) => return Ok(()),
                    (Ok(r), false) => model = r,
                }
                i = 1;
            }
        }
        while i < lines.len() {
            let (in_line, k, input) = &lines[i];
            if k != "in" {
                return Err(format!("line {in_line}: unexpected {k:?} line"));
            }
            i += 1;
            let mut expected: Vec<(usize, Value)> = Vec::new();
            let mut rejected: Option<(usize, String)> = None;
            while i < lines.len() && lines[i].1 != "in" {
                let (n, k, v) = &lines[i];
                match k.as_str() {
                    "out" if rejected.is_none() => expected.push((*n, v.clone())),
                    "rejected" if rejected.is_none() && expected.is_empty() => {
                        rejected = Some((*n, v.as_str().unwrap_or("?").to_string()));
                    }
                    _ => return Err(format!("line {n}: unexpected {k:?} line")),
                }
                i += 1;
            }
            let actual = model.apply(input);
            match (actual, rejected) {
                (Err(kind), Some((n, want))) => {
                    if kind != want {
                        return Err(format!(
                            "line {n}: expected rejected {want:?}, model rejected {kind:?} (input line {in_line})"
                        ));
                    }
                }
                (Err(kind), None) => {
                    return Err(format!(
                        "line {in_line}: model rejected {kind:?}, trace expects outputs {:?}",
                        expected.iter().map(|(_, v)| v).collect::<Vec<_>>()
                    ))
                }
                (Ok(outs), Some((n, want))) => {
                    return Err(format!(
                        "line {n}: expected rejected {want:?}, model accepted with outputs {outs:?}"
                    ))
                }
                (Ok(outs), None) => {
                    let len = outs.len().max(expected.len());
                    for j in 0..len {
                        let want = expected.get(j);
                        let got = outs.get(j);
                        if want.map(|(_, v)| v) != got {
                            let at = want.map_or_else(
                                || {
                                    format!(
                                        "after line {}",
                                        expected.last().map_or(*in_line, |e| e.0)
                                    )
                                },
                                |(n, _)| format!("line {n}"),
                            );
                            return Err(format!(
                                "{at} (input line {in_line}, output #{j}): expected {} / model {}\n      all expected: {:?}\n      all model:    {:?}",
                                want.map_or("<nothing>".to_string(), |(_, v)| v.to_string()),
                                got.map_or("<nothing>".to_string(), Value::to_string),
                                expected.iter().map(|(_, v)| v.to_string()).collect::<Vec<_>>(),
                                outs.iter().map(Value::to_string).collect::<Vec<_>>(),
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    #[test]
    fn reference_replays_format_example_as_trace() {
        let trace = r#"
{"note":"FORMAT.md example"}
{"in":{"followup":{"id":"a","source":{"kind":"user"},"content":"hi"}}}
{"out":{"event":{"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"inserted":[{"id":"a","source":{"kind":"user"},"content":"hi"}],"wakeup":true}}}}
{"out":{"notify":{"type":"agent/inbox/inserted","message":{"id":"a","source":{"kind":"user"},"content":"hi"}}}}
{"out":{"notify":{"type":"agent/status","status":"running"}}}
{"out":{"event":{"type":"turn/start","data":{"turn":1}}}}
{"out":{"event":{"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}}}}
{"out":{"notify":{"type":"agent/inbox/claimed","message":{"id":"a","source":{"kind":"user"},"content":"hi"},"turn":1}}}
{"out":{"request":{"preStep":{"turn":1,"step":1,"messages":[{"id":"a","source":{"kind":"user"},"content":"hi"}]}}}}
{"in":{"preStep":{"enter":[{"id":"a","source":{"kind":"user"},"content":"hi"}]}}}
{"out":{"event":{"type":"step/start","data":{"turn":1,"step":1}}}}
{"out":{"event":{"type":"user/message","data":{"id":"a","source":{"kind":"user"},"content":"hi"}}}}
{"out":{"request":{"step":{"turn":1,"step":1}}}}
{"in":{"step":"completed"}}
{"out":{"event":{"type":"step/end","data":{"turn":1,"step":1}}}}
{"out":{"request":{"turnStopping":{"turn":1}}}}
{"in":{"turnStopping":"done"}}
{"out":{"event":{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}}}
{"out":{"notify":{"type":"agent/status","status":"idle"}}}
{"in":{"maintenance":"end"}}
{"rejected":"unexpected-completion"}
"#;
        assert_eq!(replay_trace(trace), Ok(()));
        // The replayer itself notices a wrong expectation.
        let broken = trace.replace(r#""status":"idle""#, r#""status":"running""#);
        assert!(replay_trace(&broken).is_err());
        let invalid = r#"{"given":{"log":[{"type":"turn/start","data":{"turn":1}}]}}
{"rejected":"invalid-log"}"#;
        assert_eq!(replay_trace(invalid), Ok(()));
    }

    #[test]
    fn reference_replays_corpus() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance");
        let mut files: Vec<std::path::PathBuf> = match std::fs::read_dir(&dir) {
            Ok(entries) => entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                .collect(),
            Err(_) => Vec::new(),
        };
        files.sort();
        let mut failures: Vec<String> = Vec::new();
        for path in &files {
            let text = std::fs::read_to_string(path).expect("readable trace");
            if let Err(e) = replay_trace(&text) {
                let name = path
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
                failures.push(format!("{name}: {e}"));
            }
        }
        eprintln!(
            "reference replayed {} trace(s) from {}, {} mismatching",
            files.len(),
            dir.display(),
            failures.len()
        );
        assert!(
            failures.is_empty(),
            "{} of {} trace(s) disagree with the reference model:\n  {}",
            failures.len(),
            files.len(),
            failures.join("\n  ")
        );
    }
}
