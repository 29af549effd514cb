//! The simulator's own reading of a log: what happened to every message it names, written from
//! `docs/SPEC.md` §13 (S51, S53, S58, S59), not from the core. The checker holds the drivers to
//! it: every `fate` answer must be the one this reading gives for the log the agent had written
//! when it answered (S58), every crash repair must append exactly the redelivery splices it
//! expects (S59, I16), and every message must run at most once per delivery, a redelivered one
//! in the first step after its claim (a model call then sees it).
//!
//! A *delivery* of an id starts at a splice that inserts it without `redelivery`; a splice that
//! inserts it with `redelivery` continues the same delivery (crash repair put it back). A
//! *run* is a `user/message` carrying the id inside an open step.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde_json::{json, Map, Value};

/// The two pending lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum List {
    /// NT, `next-turn`.
    NextTurn,
    /// NS, `next-step`.
    NextStep,
}

impl List {
    fn parse(name: &str) -> Option<List> {
        match name {
            "next-turn" => Some(List::NextTurn),
            "next-step" => Some(List::NextStep),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            List::NextTurn => "next-turn",
            List::NextStep => "next-step",
        }
    }

    fn index(self) -> usize {
        match self {
            List::NextTurn => 0,
            List::NextStep => 1,
        }
    }
}

/// How a held id left the lists (S58).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Left {
    Discarded,
    Claimed {
        turn: u64,
        step: Option<u64>,
        end: Option<String>,
    },
}

#[derive(Clone, Debug)]
struct Item {
    id: String,
    wakeup: bool,
    message: Value,
    /// Its delivery (an index into `Story::deliveries`).
    delivery: usize,
}

/// What became of a message crash repair redelivered (S59), once the log has been read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Afterwards {
    /// A later step's `user/message` carried it: it ran, once.
    Ran,
    /// An ordinary removal (remove, replace, clear, cancel, dispose) took it off the list.
    Discarded,
    /// A turn claimed it and ended before any step (`blocked`, `error` or `aborted`): S28, it
    /// does not come back.
    EndedBeforeStep,
    /// A turn claimed it and the process crashed again before any step: its allowance (A = 1)
    /// is spent, so repair does not bring it back.
    CrashedAgain,
    /// Still pending where the log ends (or claimed by a turn the log leaves open).
    Pending,
}

impl Afterwards {
    /// Every kind, in report order.
    pub const ALL: [Afterwards; 5] = [
        Afterwards::Ran,
        Afterwards::Discarded,
        Afterwards::EndedBeforeStep,
        Afterwards::CrashedAgain,
        Afterwards::Pending,
    ];

    /// Its name in the totals.
    pub fn name(self) -> &'static str {
        match self {
            Afterwards::Ran => "ran once",
            Afterwards::Discarded => "discarded later",
            Afterwards::EndedBeforeStep => "its turn ended before a step",
            Afterwards::CrashedAgain => "claimed unseen by a second crash",
            Afterwards::Pending => "pending at the end",
        }
    }
}

/// One delivery of an id: a splice inserted it without `redelivery`.
#[derive(Clone, Debug, Default)]
struct Delivery {
    /// The step whose `user/message` carried it (turn, step), once one has.
    ran: Option<(u64, u64)>,
    /// Set once crash repair redelivered it; then what became of it, once known.
    redelivered: Option<Option<Afterwards>>,
}

/// What crash repair should append to a log that ends where this story does (S50, S59).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Repair {
    /// The records, as `{type, data}`: `step/end` if a step is open, `turn/end interrupted`,
    /// then one redelivery splice per message the turn claimed after its last `step/start`.
    pub events: Vec<Value>,
    /// The redelivery splices among them.
    pub redelivered: u64,
    /// Messages not redelivered because their id was already redelivered `A` times.
    pub exhausted: u64,
    /// Messages not redelivered because their id is pending again (a later send reused it).
    pub reused: u64,
}

impl Repair {
    /// The ids it puts back, in order.
    pub fn ids(&self) -> Vec<String> {
        let mut ids = Vec::new();
        for event in &self.events {
            for message in event["data"]["inserted"]
                .as_array()
                .map_or(&[][..], Vec::as_slice)
            {
                ids.push(text(&message["id"]));
            }
        }
        ids
    }

    /// How many messages it puts back into each list: NT, NS.
    pub fn put_back(&self) -> [usize; 2] {
        let mut back = [0; 2];
        for event in &self.events {
            if let Some(list) = event["data"]["target"].as_str().and_then(List::parse) {
                back[list.index()] += 1;
            }
        }
        back
    }
}

/// A log read so far, with a delivery memory of `capacity` ids (S51).
#[derive(Clone, Debug)]
pub struct Story {
    capacity: usize,
    lists: [Vec<Item>; 2],
    /// Held ids, oldest first, and how each left.
    held: VecDeque<String>,
    left: HashMap<String, Left>,
    last_turn: u64,
    open_turn: Option<u64>,
    open_step: Option<u64>,
    /// What the open turn claimed since its last `step/start` (every claim before its first),
    /// in claim order: no model call has seen these yet.
    unseen: Vec<(List, Item)>,
    /// What the open step is to carry: claimed before its `step/start`, not yet in one of its
    /// `user/message` events (id, delivery).
    entering: Vec<(String, usize)>,
    /// Per id, the splices that carried `redelivery` and inserted it (S59's count).
    redeliveries: HashMap<String, u64>,
    /// Every delivery, in insertion order.
    deliveries: Vec<Delivery>,
    /// Per id, the delivery its last claim took (a redelivery continues it).
    claimed: HashMap<String, usize>,
    /// What the step that just ended did not carry (id, delivery, turn, step): a violation
    /// unless crash repair closed that step (its `turn/end interrupted` follows: the power cut
    /// kept the `step/start` and lost the rest of its batch, so no model call ran).
    missing: Vec<(String, usize, u64, u64)>,
    /// Anything the log shows that breaks S28–S30 or S59 for this simulation.
    violations: Vec<String>,
    records: usize,
    /// Whether items keep their message ([`Story::repair`] writes it back).
    keep_messages: bool,
}

fn text(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_owned)
}

impl Story {
    /// An empty log, read with a delivery memory of `capacity` ids.
    pub fn new(capacity: usize) -> Self {
        Story {
            capacity,
            lists: [Vec::new(), Vec::new()],
            held: VecDeque::new(),
            left: HashMap::new(),
            last_turn: 0,
            open_turn: None,
            open_step: None,
            unseen: Vec::new(),
            entering: Vec::new(),
            redeliveries: HashMap::new(),
            deliveries: Vec::new(),
            claimed: HashMap::new(),
            missing: Vec::new(),
            violations: Vec::new(),
            records: 0,
            keep_messages: false,
        }
    }

    /// An empty log, read to know what crash repair appends to it ([`Story::repair`]): like
    /// [`Story::new`], and it keeps every pending message.
    pub fn for_repair(capacity: usize) -> Self {
        Story {
            keep_messages: true,
            ..Story::new(capacity)
        }
    }

    /// Reads one record (`{seq?, type, data}`).
    pub fn read(&mut self, record: &Value) {
        self.records += 1;
        let data = &record["data"];
        let kind = record["type"].as_str().unwrap_or("");
        if !self.missing.is_empty() {
            let repaired = kind == "turn/end" && data["reason"]["kind"] == "interrupted";
            self.missed(repaired);
        }
        match kind {
            "agent/inbox/spliced" => self.splice(data),
            "turn/start" => {
                let turn = data["turn"].as_u64().unwrap_or(0);
                self.last_turn = turn;
                self.open_turn = Some(turn);
                self.open_step = None;
                self.unseen.clear();
                self.entering.clear();
            }
            "step/start" => {
                self.step_end();
                self.open_step = data["step"].as_u64();
                // The sim's hosts enter every claimed message (S29, S30): all of them must be
                // in this step's `user/message` events.
                self.entering = self
                    .unseen
                    .drain(..)
                    .map(|(_, item)| (item.id, item.delivery))
                    .collect();
            }
            "user/message" => self.user_message(data),
            "step/end" => {
                self.step_end();
                self.open_step = None;
            }
            "turn/end" => self.turn_end(data),
            _ => {}
        }
    }

    /// The open step is over: everything it was to carry must have been in it (checked at
    /// the next record: crash repair may have closed it).
    fn step_end(&mut self) {
        if let (Some(turn), Some(step)) = (self.open_turn, self.open_step) {
            for (id, delivery) in std::mem::take(&mut self.entering) {
                self.missing.push((id, delivery, turn, step));
            }
        }
    }

    /// The messages the last step did not carry: cut by the crash when `repaired`, else a
    /// violation.
    fn missed(&mut self, repaired: bool) {
        for (id, delivery, turn, step) in std::mem::take(&mut self.missing) {
            if repaired {
                self.decide(delivery, Afterwards::CrashedAgain);
            } else {
                self.violations.push(format!(
                    "record {}: `{id}`, claimed by turn {turn}, is not among step {step}'s \
                     messages (the host entered the whole claimed batch)",
                    self.records
                ));
            }
        }
    }

    fn splice(&mut self, data: &Value) {
        let Some(list) = data["target"].as_str().and_then(List::parse) else {
            return; // the Auditor reports it
        };
        let redelivery = data["redelivery"].as_u64();
        let wakeup = data["wakeup"] == Value::Bool(true);
        let mut inserted = Vec::new();
        for message in data["inserted"].as_array().map_or(&[][..], Vec::as_slice) {
            let id = text(&message["id"]);
            // S53: an inserted id leaves the memory.
            if self.left.remove(&id).is_some() {
                self.held.retain(|held| *held != id);
            }
            let delivery = self.deliver(&id, redelivery);
            let message = if self.keep_messages {
                message.clone()
            } else {
                Value::Null
            };
            inserted.push(Item {
                id,
                wakeup,
                message,
                delivery,
            });
        }
        let items = &mut self.lists[list.index()];
        let start = (data["start"].as_u64().unwrap_or(0) as usize).min(items.len());
        let count = (data["removedCount"].as_u64().unwrap_or(0) as usize).min(items.len() - start);
        let removed: Vec<Item> = items.splice(start..start + count, inserted).collect();
        let ordinary = data.get("outcome").is_some();
        for item in removed {
            if self.pending(&item.id).is_some() {
                continue; // a replace that kept its id
            }
            let left = if ordinary {
                self.decide(item.delivery, Afterwards::Discarded);
                Left::Discarded
            } else {
                self.claimed.insert(item.id.clone(), item.delivery);
                Left::Claimed {
                    turn: self.last_turn,
                    step: None,
                    end: None,
                }
            };
            self.left.insert(item.id.clone(), left);
            self.held.push_back(item.id.clone());
            while self.held.len() > self.capacity {
                if let Some(forgotten) = self.held.pop_front() {
                    self.left.remove(&forgotten);
                }
            }
            if !ordinary && self.open_turn.is_some() {
                self.unseen.push((list, item));
            }
        }
    }

    /// The delivery an insertion of `id` belongs to: a new one, or with `redelivery` the one
    /// its last claim took (S59: crash repair puts that message back).
    fn deliver(&mut self, id: &str, redelivery: Option<u64>) -> usize {
        let Some(_) = redelivery else {
            self.deliveries.push(Delivery::default());
            return self.deliveries.len() - 1;
        };
        *self.redeliveries.entry(id.to_owned()).or_default() += 1;
        let Some(&index) = self.claimed.get(id) else {
            self.violations.push(format!(
                "record {}: `{id}` is redelivered, but no turn claimed it",
                self.records
            ));
            self.deliveries.push(Delivery::default());
            return self.deliveries.len() - 1;
        };
        if let Some((turn, step)) = self.deliveries[index].ran {
            self.violations.push(format!(
                "record {}: `{id}` is redelivered, but step {step} of turn {turn} already \
                 carried it (S59: only what no model call saw)",
                self.records
            ));
        }
        self.deliveries[index].redelivered = Some(None);
        index
    }

    /// What became of a redelivered message, once known.
    fn decide(&mut self, delivery: usize, afterwards: Afterwards) {
        if let Some(Delivery {
            redelivered: Some(open @ None),
            ..
        }) = self.deliveries.get_mut(delivery)
        {
            *open = Some(afterwards);
        }
    }

    fn user_message(&mut self, data: &Value) {
        let id = text(&data["id"]);
        let (Some(turn), Some(step)) = (self.open_turn, self.open_step) else {
            return; // a host's message between turns (I5): no run
        };
        if let Some(Left::Claimed {
            turn: claimed,
            step: first @ None,
            ..
        }) = self.left.get_mut(&id)
        {
            if *claimed == turn {
                *first = Some(step);
            }
        }
        let Some(at) = self
            .entering
            .iter()
            .position(|(entering, _)| *entering == id)
        else {
            self.violations.push(format!(
                "record {}: step {step} of turn {turn} carries `{id}`, which no claim of it \
                 awaited (a message run twice, or never claimed)",
                self.records
            ));
            return;
        };
        let (_, delivery) = self.entering.remove(at);
        match self.deliveries[delivery].ran {
            Some((t1, s1)) => self.violations.push(format!(
                "record {}: `{id}` ran twice in one delivery: step {s1} of turn {t1}, then \
                 step {step} of turn {turn}",
                self.records
            )),
            None => self.deliveries[delivery].ran = Some((turn, step)),
        }
        self.decide(delivery, Afterwards::Ran);
    }

    fn turn_end(&mut self, data: &Value) {
        self.step_end();
        let Some(turn) = self.open_turn.take() else {
            return;
        };
        self.open_step = None;
        let kind = data["reason"]["kind"].as_str().map(str::to_owned);
        for left in self.left.values_mut() {
            if let Left::Claimed {
                turn: claimed,
                end: end @ None,
                ..
            } = left
            {
                if *claimed == turn {
                    end.clone_from(&kind);
                }
            }
        }
        let (afterwards, silent) = match kind.as_deref() {
            Some("interrupted") => (Afterwards::CrashedAgain, false),
            Some("completed" | "max-tokens") => (Afterwards::EndedBeforeStep, true),
            _ => (Afterwards::EndedBeforeStep, false),
        };
        for (_, item) in std::mem::take(&mut self.unseen) {
            if silent {
                self.violations.push(format!(
                    "record {}: `{}`, claimed by turn {turn}, ended {} without a step (the \
                     host enters every claimed batch)",
                    self.records,
                    item.id,
                    kind.as_deref().unwrap_or("")
                ));
            }
            self.decide(item.delivery, afterwards);
        }
    }

    fn pending(&self, id: &str) -> Option<List> {
        [List::NextTurn, List::NextStep]
            .into_iter()
            .find(|list| self.lists[list.index()].iter().any(|item| item.id == id))
    }

    /// `fate(id)` for the log read so far, in FORMAT.md's spelling (S58): pending, else the
    /// record the memory holds, else `unknown`.
    pub fn fate(&self, id: &str) -> Value {
        if let Some(list) = self.pending(id) {
            return json!({ "pending": list.name() });
        }
        match self.left.get(id) {
            None => json!("unknown"),
            Some(Left::Discarded) => json!("discarded"),
            Some(Left::Claimed { turn, step, end }) => {
                let mut claimed = Map::new();
                claimed.insert("turn".into(), json!(turn));
                if let Some(step) = step {
                    claimed.insert("step".into(), json!(step));
                }
                if let Some(end) = end {
                    claimed.insert("end".into(), json!(end));
                }
                json!({ "claimed": claimed })
            }
        }
    }

    /// What crash repair with allowance `allowance` appends to a log that ends here (S50,
    /// S59): nothing when no turn is open. The messages are those a story
    /// [`for_repair`](Story::for_repair) keeps (`null` otherwise).
    pub fn repair(&self, allowance: u64) -> Repair {
        let mut repair = Repair::default();
        let Some(turn) = self.open_turn else {
            return repair;
        };
        if let Some(step) = self.open_step {
            repair
                .events
                .push(json!({"type": "step/end", "data": {"turn": turn, "step": step}}));
        }
        repair.events.push(json!({
            "type": "turn/end",
            "data": {"turn": turn, "reason": {"kind": "interrupted"}},
        }));
        let mut back = [0u64; 2];
        for (list, item) in &self.unseen {
            let r = 1 + self.redeliveries.get(&item.id).copied().unwrap_or(0);
            if r > allowance {
                repair.exhausted += 1;
                continue;
            }
            if self.pending(&item.id).is_some() {
                repair.reused += 1;
                continue;
            }
            let mut data = json!({
                "target": list.name(),
                "start": back[list.index()],
                "inserted": [item.message],
                "redelivery": r,
            });
            if item.wakeup {
                data["wakeup"] = json!(true);
            }
            back[list.index()] += 1;
            repair.redelivered += 1;
            repair
                .events
                .push(json!({"type": "agent/inbox/spliced", "data": data}));
        }
        repair
    }

    /// What became of every redelivered message (those whose story the log leaves open are
    /// [`Afterwards::Pending`]), and every violation found.
    pub fn finish(mut self) -> (BTreeMap<Afterwards, u64>, Vec<String>) {
        self.missed(false);
        let mut afterwards = BTreeMap::new();
        for delivery in &self.deliveries {
            if let Some(fate) = delivery.redelivered {
                *afterwards
                    .entry(fate.unwrap_or(Afterwards::Pending))
                    .or_default() += 1;
            }
        }
        (afterwards, self.violations)
    }

    /// The violations found so far.
    pub fn violations(&self) -> &[String] {
        &self.violations
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn splice(target: &str, start: u64, removed: u64, ids: &[&str], extra: Value) -> Value {
        let inserted: Vec<Value> = ids
            .iter()
            .map(|id| json!({"id": id, "source": {"kind": "user"}, "content": "c"}))
            .collect();
        let mut data = json!({"target": target, "start": start, "inserted": inserted});
        if removed > 0 {
            data["removedCount"] = json!(removed);
        }
        if let Value::Object(extra) = extra {
            for (key, value) in extra {
                data[key] = value;
            }
        }
        json!({"type": "agent/inbox/spliced", "data": data})
    }

    fn read(story: &mut Story, records: &[Value]) {
        for record in records {
            story.read(record);
        }
    }

    /// The trace `i16-repair-restore-unseen-claims-pending-again`'s shape: turn 2 claims x, s
    /// (NS) and q (NT), b arrives, the process dies before the pre-step answer.
    fn crashed_turn() -> Vec<Value> {
        vec![
            splice("next-turn", 0, 0, &["a"], json!({"wakeup": true})),
            json!({"type": "turn/start", "data": {"turn": 1}}),
            splice("next-turn", 0, 1, &[], json!({})),
            json!({"type": "step/start", "data": {"turn": 1, "step": 1}}),
            json!({"type": "user/message", "data": {"id": "a"}}),
            json!({"type": "step/end", "data": {"turn": 1, "step": 1}}),
            json!({"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}}),
            splice("next-step", 0, 0, &["x"], json!({})),
            splice("next-turn", 0, 0, &["q"], json!({})),
            splice("next-step", 1, 0, &["s"], json!({"wakeup": true})),
            json!({"type": "turn/start", "data": {"turn": 2}}),
            splice("next-step", 0, 2, &[], json!({})),
            splice("next-turn", 0, 1, &[], json!({})),
            splice("next-turn", 0, 0, &["b"], json!({"wakeup": true})),
        ]
    }

    #[test]
    fn fates_follow_s58() {
        let mut story = Story::new(usize::MAX);
        read(&mut story, &crashed_turn());
        assert_eq!(
            story.fate("a"),
            json!({"claimed": {"turn": 1, "step": 1, "end": "completed"}})
        );
        assert_eq!(story.fate("x"), json!({"claimed": {"turn": 2}}));
        assert_eq!(story.fate("b"), json!({"pending": "next-turn"}));
        assert_eq!(story.fate("never"), json!("unknown"));
        // A memory of 2 holds the last two ids that left: s, q (x and a forgotten).
        let mut small = Story::new(2);
        read(&mut small, &crashed_turn());
        assert_eq!(small.fate("x"), json!("unknown"));
        assert_eq!(small.fate("q"), json!({"claimed": {"turn": 2}}));
        // An ordinary removal.
        read(
            &mut small,
            &[splice(
                "next-turn",
                0,
                1,
                &[],
                json!({"outcome": "canceled"}),
            )],
        );
        assert_eq!(small.fate("b"), json!("discarded"));
    }

    #[test]
    fn repair_redelivers_what_no_model_saw_s59() {
        let mut story = Story::for_repair(0);
        read(&mut story, &crashed_turn());
        let repair = story.repair(1);
        let message = |id: &str| json!({"id": id, "source": {"kind": "user"}, "content": "c"});
        assert_eq!(
            repair.events,
            [
                json!({"type": "turn/end", "data": {"turn": 2, "reason": {"kind": "interrupted"}}}),
                json!({"type": "agent/inbox/spliced", "data": {"target": "next-step", "start": 0,
                    "inserted": [message("x")], "redelivery": 1}}),
                json!({"type": "agent/inbox/spliced", "data": {"target": "next-step", "start": 1,
                    "inserted": [message("s")], "wakeup": true, "redelivery": 1}}),
                json!({"type": "agent/inbox/spliced", "data": {"target": "next-turn", "start": 0,
                    "inserted": [message("q")], "redelivery": 1}}),
            ]
        );
        assert_eq!((repair.redelivered, repair.exhausted), (3, 0));
        assert_eq!(story.repair(0).redelivered, 0);
        assert_eq!(story.repair(0).exhausted, 3);
        // After that repair, turn 3 claims them again and dies: A = 1 is spent.
        read(&mut story, &repair.events);
        read(
            &mut story,
            &[
                json!({"type": "turn/start", "data": {"turn": 3}}),
                splice("next-step", 0, 2, &[], json!({})),
                splice("next-turn", 0, 1, &[], json!({})),
            ],
        );
        let again = story.repair(1);
        assert_eq!(
            (again.redelivered, again.exhausted, again.events.len()),
            (0, 3, 1)
        );
        read(&mut story, &again.events);
        let (afterwards, violations) = story.finish();
        assert_eq!(violations, Vec::<String>::new());
        assert_eq!(afterwards, BTreeMap::from([(Afterwards::CrashedAgain, 3)]));
    }

    /// A power cut that kept a `step/start` and lost the `user/message` events of its batch: no
    /// model call ran, the claims came before the last `step/start` (S59: not redelivered), and
    /// the step crash repair closes is not a violation.
    #[test]
    fn a_step_cut_by_the_crash_is_not_a_missing_message() {
        let mut story = Story::for_repair(usize::MAX);
        read(&mut story, &crashed_turn());
        let repair = story.repair(1);
        read(&mut story, &repair.events);
        read(
            &mut story,
            &[
                json!({"type": "turn/start", "data": {"turn": 3}}),
                splice("next-step", 0, 2, &[], json!({})),
                splice("next-turn", 0, 1, &[], json!({})),
                json!({"type": "step/start", "data": {"turn": 3, "step": 1}}),
                json!({"type": "user/message", "data": {"id": "x"}}),
            ],
        );
        assert_eq!(story.fate("x"), json!({"claimed": {"turn": 3, "step": 1}}));
        let again = story.repair(1);
        assert_eq!(
            again.events,
            [
                json!({"type": "step/end", "data": {"turn": 3, "step": 1}}),
                json!({"type": "turn/end", "data": {"turn": 3, "reason": {"kind": "interrupted"}}}),
            ]
        );
        read(&mut story, &again.events);
        assert_eq!(
            story.fate("s"),
            json!({"claimed": {"turn": 3, "end": "interrupted"}})
        );
        let (afterwards, violations) = story.finish();
        assert_eq!(violations, Vec::<String>::new());
        assert_eq!(
            afterwards,
            BTreeMap::from([(Afterwards::Ran, 1), (Afterwards::CrashedAgain, 2)])
        );
    }

    #[test]
    fn a_second_run_and_a_missing_message_are_violations() {
        let mut story = Story::new(0);
        read(
            &mut story,
            &[
                splice("next-step", 0, 0, &["m", "n"], json!({"wakeup": true})),
                json!({"type": "turn/start", "data": {"turn": 1}}),
                splice("next-step", 0, 2, &[], json!({})),
                json!({"type": "step/start", "data": {"turn": 1, "step": 1}}),
                json!({"type": "user/message", "data": {"id": "m"}}),
                json!({"type": "step/end", "data": {"turn": 1, "step": 1}}),
                json!({"type": "step/start", "data": {"turn": 1, "step": 2}}),
                json!({"type": "user/message", "data": {"id": "m"}}),
            ],
        );
        assert_eq!(
            story.violations(),
            [
                "record 7: `n`, claimed by turn 1, is not among step 1's messages (the host \
                 entered the whole claimed batch)",
                "record 8: step 2 of turn 1 carries `m`, which no claim of it awaited (a \
                 message run twice, or never claimed)",
            ]
        );
    }
}
