//! The facts of a session, computed once in Rust from its records: each record's row (its turn
//! and step, the depth of both pending lists after it, a one-line summary, a mark), each
//! message's life, and the overview the page draws. The page only draws these; it never applies
//! a delivery rule.
//!
//! The depths and the claimed/discarded ids are read off the core's own [`Auditor`] (its
//! [`coxswain_core::Restorer`]) as the records are replayed through it (S46–S49): the lists
//! before a splice name the items it removes, the lists after it are the depths. Each id's fate
//! (S58) is the core's answer too: the machine that restoring the whole log gives (after crash
//! repair's closers when the log ends inside a turn, S50), with an unbounded delivery memory,
//! is asked [`coxswain_core::Machine::fate`], spelled [`coxswain_core::Fate::to_json`].

use std::collections::HashMap;

use coxswain_core::{
    CancelCause, Config, Event, MessageId, SharedMessage, Splice, SpliceKind, Target, TurnEndReason,
};
use coxswain_log::{Auditor, Record};
use serde::{Deserialize as _, Serialize};
use serde_json::Value;

/// The longest summary a row carries (characters); longer text is cut with `…`.
pub(crate) const PREVIEW_CHARS: usize = 120;

/// The most columns the overview strip has: a long log is aggregated into buckets.
pub(crate) const OVERVIEW_BUCKETS: usize = 1200;

/// What a row is, on the wire of the page (short codes keep a 1M-record page small).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) enum Kind {
    /// A splice that inserts (a delivery or a prepend).
    #[serde(rename = "ins")]
    Insert,
    /// A splice a turn claims with.
    #[serde(rename = "clm")]
    Claim,
    /// A splice that discards (outcome canceled).
    #[serde(rename = "dis")]
    Discard,
    /// A `replace`.
    #[serde(rename = "rep")]
    Replace,
    /// `turn/start`.
    #[serde(rename = "ts")]
    TurnStart,
    /// `turn/end`.
    #[serde(rename = "te")]
    TurnEnd,
    /// `step/start`.
    #[serde(rename = "ss")]
    StepStart,
    /// `step/end`.
    #[serde(rename = "se")]
    StepEnd,
    /// `user/message`.
    #[serde(rename = "um")]
    UserMessage,
    /// A record of the host's (any other `type`).
    #[serde(rename = "h")]
    Host,
    /// A core record the core cannot read.
    #[serde(rename = "bad")]
    Malformed,
}

/// What a row is marked with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Mark {
    /// Nothing to mark.
    #[serde(rename = "")]
    None,
    /// A discard (a cancel, remove, clear, replace or dispose removed items, S12).
    Discard,
    /// A turn aborted by a cancel (S39).
    Abort,
    /// A turn ended by a host failure (S38).
    Error,
    /// Written by crash repair (S50): a turn closed `interrupted`, or a message redelivered
    /// (S59).
    Repair,
    /// The record the auditor rejects.
    Violation,
}

impl Mark {
    fn bit(self) -> u8 {
        match self {
            Mark::None => 0,
            Mark::Discard => 1,
            Mark::Abort => 2,
            Mark::Error => 4,
            Mark::Repair => 8,
            Mark::Violation => 16,
        }
    }
}

/// One record, as the page shows it. Serialized as an array:
/// `[seq, line, kind, turn, step, nt, ns, text, mark, ids]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Row(
    /// The record's `seq` (0 if it has none).
    pub(crate) u64,
    /// Its line in the file.
    pub(crate) usize,
    /// What it is.
    pub(crate) Kind,
    /// The turn it belongs to (0: between turns).
    pub(crate) u64,
    /// The step it belongs to (0: none).
    pub(crate) u64,
    /// Next-turn depth after it (-1: unknown, past a violation).
    pub(crate) i64,
    /// Next-step depth after it (-1: unknown).
    pub(crate) i64,
    /// A one-line summary.
    pub(crate) String,
    /// Its mark.
    pub(crate) Mark,
    /// The message ids it touches.
    pub(crate) Vec<String>,
);

/// One life of a message id: from its insertion to its claim, its discard, or the log's end.
/// An id delivered again after it left the lists has a second life.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Life {
    /// The id.
    pub(crate) id: String,
    /// The list it joined.
    pub(crate) target: Target,
    /// Whether it was waking (S19).
    pub(crate) waking: bool,
    /// Its source's kind, if any.
    pub(crate) source: Option<String>,
    /// Its content, cut to a preview.
    pub(crate) preview: String,
    /// The row that inserted it.
    pub(crate) inserted: usize,
    /// The row that claimed it and the claiming turn.
    pub(crate) claimed: Option<(usize, u64)>,
    /// The rows of the `user/message` records that entered it into a step.
    pub(crate) entered: Vec<usize>,
    /// The row that discarded it, and why.
    pub(crate) discarded: Option<(usize, String)>,
    /// Its insertion was crash repair's redelivery (S59): the splice's `redelivery` count.
    pub(crate) redelivered: Option<String>,
    /// The id's fate (S58) as the core answers it at the log's end (FORMAT.md's `F`); only on
    /// the id's last life (an earlier life's record was dropped when the id came back, S53),
    /// and none past a violation.
    pub(crate) fate: Option<String>,
}

/// The overview strip: the log's rows in at most [`OVERVIEW_BUCKETS`] buckets. Serialized as
/// parallel arrays, one entry per bucket.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Overview {
    /// Rows per bucket.
    pub(crate) per: usize,
    /// The turn open at the bucket's end (0: none).
    pub(crate) turn: Vec<u64>,
    /// Whether a step is open somewhere in the bucket.
    pub(crate) step: Vec<bool>,
    /// The deepest next-turn list in the bucket.
    pub(crate) nt: Vec<i64>,
    /// The deepest next-step list in the bucket.
    pub(crate) ns: Vec<i64>,
    /// The marks in the bucket, as bits (discard 1, abort 2, error 4, repair 8, violation 16).
    pub(crate) marks: Vec<u8>,
}

/// Counts shown at the top of the page.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Summary {
    /// Records read.
    pub(crate) records: usize,
    /// Host records among them.
    pub(crate) host: usize,
    /// Turns started.
    pub(crate) turns: usize,
    /// Steps started.
    pub(crate) steps: usize,
    /// Message lives (insertions of an id).
    pub(crate) messages: usize,
    /// Lives ended by a claim.
    pub(crate) claimed: usize,
    /// Lives ended by a discard.
    pub(crate) discarded: usize,
    /// Lives still pending at the log's end.
    pub(crate) pending: usize,
    /// Turns ended `aborted`.
    pub(crate) aborted: usize,
    /// Turns ended `error`.
    pub(crate) errors: usize,
    /// Turns closed `interrupted` by crash repair.
    pub(crate) interrupted: usize,
}

/// Everything the page shows but the verdict.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Facts {
    /// The counts.
    pub(crate) summary: Summary,
    /// One row per record, in log order.
    pub(crate) rows: Vec<Row>,
    /// Every message life, in order of insertion.
    pub(crate) lives: Vec<Life>,
    /// The overview strip.
    pub(crate) overview: Overview,
    /// Empty when the fates are the restored log's; else what they assume (the log ends inside
    /// a turn: crash repair's closers, S50).
    pub(crate) fates_after: String,
}

/// Cuts `text` to [`PREVIEW_CHARS`] characters.
pub(crate) fn preview(text: &str) -> String {
    match text.char_indices().nth(PREVIEW_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

fn value_preview(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(text)) => preview(text),
        Some(other) => preview(&other.to_string()),
        None => String::new(),
    }
}

fn cause_text(cause: &CancelCause) -> String {
    match cause {
        CancelCause::User => "user".into(),
        CancelCause::Parent => "parent".into(),
        CancelCause::Hook { reason } => format!("hook: {reason}"),
        CancelCause::Disposed => "disposed".into(),
    }
}

fn reason_text(reason: &TurnEndReason) -> (String, Mark) {
    match reason {
        TurnEndReason::Completed => ("completed".into(), Mark::None),
        TurnEndReason::MaxTokens => ("max-tokens".into(), Mark::None),
        TurnEndReason::Blocked => ("blocked".into(), Mark::None),
        TurnEndReason::Aborted { reason } => {
            (format!("aborted ({})", cause_text(reason)), Mark::Abort)
        }
        TurnEndReason::Error { error } => (
            format!("error {}: {}", error.code, preview(&error.message)),
            Mark::Error,
        ),
        TurnEndReason::Interrupted => ("interrupted (crash repair, S50)".into(), Mark::Repair),
    }
}

/// Replays `records` through the core's auditor and collects what the page shows.
pub(crate) fn collect(records: &[Record]) -> Facts {
    let mut builder = Builder {
        // Every record held (S58): a page shows each message's fate, none forgotten.
        auditor: Auditor::with_config(Config::new().with_unbounded_delivery_memory()),
        ..Builder::default()
    };
    for record in records {
        builder.push(record);
    }
    builder.finish()
}

#[derive(Default)]
struct Builder {
    auditor: Auditor,
    failed: bool,
    summary: Summary,
    rows: Vec<Row>,
    lives: Vec<Life>,
    /// The open life of each pending id.
    open: HashMap<String, usize>,
    /// The most recent life of each id (for `user/message`).
    latest: HashMap<String, usize>,
    /// Discard rows waiting for the next core record, which may say they were a cancel's.
    recent_discards: Vec<(usize, Vec<usize>)>,
}

impl Builder {
    fn push(&mut self, record: &Record) {
        let index = self.rows.len();
        let kind_name = record
            .event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let is_core = Event::TYPES.contains(&kind_name);
        let typed: Option<Event> = if is_core {
            typed_event(&record.event)
        } else {
            None
        };
        // S59: the count as written (restore reads `redelivery` as an extra key, S46).
        let redelivery = match &typed {
            Some(Event::Spliced(_)) => record.event["data"].get("redelivery").map(|r| match r {
                Value::String(text) => format!("{text:?}"),
                other => other.to_string(),
            }),
            _ => None,
        };
        // The items a claim or discard removes: the restorer's list before the splice.
        let removed: Vec<SharedMessage> = match &typed {
            Some(Event::Spliced(splice)) if !self.failed && splice.removed_count > 0 => self
                .auditor
                .restorer()
                .pending(splice.target)
                .skip(splice.start)
                .take(splice.removed_count)
                .map(|(message, _)| message.clone())
                .collect(),
            _ => Vec::new(),
        };
        let position = *self.auditor.position();
        let violation = !self.failed && self.auditor.push_json(&record.event).is_err();
        self.failed |= violation;
        let (mut turn, mut step) = (
            position.open_turn().unwrap_or(0),
            position.open_step().unwrap_or(0),
        );
        let (kind, text, mut mark, ids) = match &typed {
            None if is_core => (
                Kind::Malformed,
                format!(
                    "malformed {kind_name}: {}",
                    preview(&record.event.to_string())
                ),
                Mark::None,
                Vec::new(),
            ),
            None => {
                self.summary.host += 1;
                let data = record.event.get("data");
                (
                    Kind::Host,
                    preview(&format!(
                        "{kind_name} {}",
                        data.map(Value::to_string).unwrap_or_default()
                    )),
                    Mark::None,
                    Vec::new(),
                )
            }
            Some(Event::Spliced(splice)) => {
                self.splice(index, splice, &removed, turn, redelivery.as_deref())
            }
            Some(event) => self.core(index, event, &mut turn, &mut step),
        };
        if violation {
            mark = Mark::Violation;
        }
        // A cancel discards, closes the step, then ends the turn aborted (S39).
        if !matches!(kind, Kind::Discard | Kind::Host | Kind::StepEnd) {
            self.settle_discards(&typed);
        }
        let (nt, ns) = if self.failed {
            (-1, -1)
        } else {
            let restorer = self.auditor.restorer();
            (
                restorer.pending(Target::NextTurn).len() as i64,
                restorer.pending(Target::NextStep).len() as i64,
            )
        };
        self.rows.push(Row(
            record.seq.unwrap_or(0),
            record.line,
            kind,
            turn,
            step,
            nt,
            ns,
            text,
            mark,
            ids,
        ));
    }

    /// A core event's row; `turn` and `step` start as the position before it.
    fn core(
        &mut self,
        index: usize,
        event: &Event,
        turn: &mut u64,
        step: &mut u64,
    ) -> (Kind, String, Mark, Vec<String>) {
        match event {
            // `push` gives splices to `splice`, which knows what they removed.
            Event::Spliced(_) => (Kind::Malformed, String::new(), Mark::None, Vec::new()),
            Event::TurnStart { turn: number } => {
                self.summary.turns += 1;
                *turn = *number;
                *step = 0;
                (
                    Kind::TurnStart,
                    format!("turn {number} starts"),
                    Mark::None,
                    Vec::new(),
                )
            }
            Event::TurnEnd {
                turn: number,
                reason,
            } => {
                *turn = *number;
                let (why, mark) = reason_text(reason);
                match mark {
                    Mark::Abort => self.summary.aborted += 1,
                    Mark::Error => self.summary.errors += 1,
                    Mark::Repair => self.summary.interrupted += 1,
                    _ => {}
                }
                (
                    Kind::TurnEnd,
                    format!("turn {number} ends: {why}"),
                    mark,
                    Vec::new(),
                )
            }
            Event::StepStart {
                turn: number,
                step: s,
            } => {
                self.summary.steps += 1;
                (*turn, *step) = (*number, *s);
                (
                    Kind::StepStart,
                    format!("step {number}.{s} starts"),
                    Mark::None,
                    Vec::new(),
                )
            }
            Event::StepEnd {
                turn: number,
                step: s,
            } => {
                (*turn, *step) = (*number, *s);
                (
                    Kind::StepEnd,
                    format!("step {number}.{s} ends"),
                    Mark::None,
                    Vec::new(),
                )
            }
            Event::UserMessage(message) => {
                let id = message.id().as_str().to_owned();
                // Between turns it is the host's (amended I5), and enters no step (nor does
                // one outside a step, which the auditor marks).
                let between = *turn == 0;
                if let (Some(&life), true) = (self.latest.get(&id), *step > 0) {
                    self.lives[life].entered.push(index);
                }
                let host = if between {
                    " (the host's, between turns)"
                } else {
                    ""
                };
                (
                    Kind::UserMessage,
                    format!("user/message {id} {}{host}", quoted(message.content())),
                    Mark::None,
                    vec![id],
                )
            }
        }
    }

    fn splice(
        &mut self,
        index: usize,
        splice: &Splice,
        removed: &[SharedMessage],
        turn: u64,
        redelivery: Option<&str>,
    ) -> (Kind, String, Mark, Vec<String>) {
        let removed_ids: Vec<String> = removed.iter().map(|m| m.id().to_string()).collect();
        let inserted_ids: Vec<String> =
            splice.inserted.iter().map(|m| m.id().to_string()).collect();
        self.close_lives(index, splice, &removed_ids, &inserted_ids, turn);
        self.open_lives(index, splice, redelivery);
        let (kind, mut text, mut mark) = describe(splice, &removed_ids, turn);
        if let Some(r) = redelivery {
            // S59: written by crash repair, not by a send.
            text.push_str(&format!(", redelivered ({r}) by crash repair (S59)"));
            mark = Mark::Repair;
        }
        let mut ids = removed_ids;
        ids.extend(inserted_ids);
        (kind, preview(&text), mark, ids)
    }

    /// Ends the lives of what a splice removes: claimed by `turn`, or discarded (and why).
    fn close_lives(
        &mut self,
        index: usize,
        splice: &Splice,
        removed_ids: &[String],
        inserted_ids: &[String],
        turn: u64,
    ) {
        let closed: Vec<usize> = removed_ids
            .iter()
            .filter_map(|id| self.open.remove(id))
            .collect();
        let splice_kind = splice.kind();
        match splice_kind {
            SpliceKind::Claim => {
                for &life in &closed {
                    self.lives[life].claimed = Some((index, turn));
                    self.summary.claimed += 1;
                }
            }
            SpliceKind::Discard | SpliceKind::Replace => {
                let why = match splice_kind {
                    SpliceKind::Replace => format!("replaced by {} (S15)", inserted_ids.join(", ")),
                    _ => {
                        let others = match removed_ids.len() {
                            0 | 1 => String::new(),
                            n => format!(" with {} others", n - 1),
                        };
                        format!(
                            "removed from {}{others} with outcome canceled (remove, clear, \
                             cancel or dispose, S12)",
                            splice.target
                        )
                    }
                };
                for &life in &closed {
                    self.lives[life].discarded = Some((index, why.clone()));
                    self.summary.discarded += 1;
                }
                if splice_kind == SpliceKind::Discard {
                    self.recent_discards.push((index, closed.clone()));
                }
            }
            SpliceKind::Insert => {}
        }
    }

    /// Starts a life for every message a splice inserts.
    fn open_lives(&mut self, index: usize, splice: &Splice, redelivery: Option<&str>) {
        for message in &splice.inserted {
            let id = message.id().to_string();
            let life = self.lives.len();
            self.lives.push(Life {
                id: id.clone(),
                target: splice.target,
                waking: splice.wakeup,
                source: message.source_kind().map(str::to_owned),
                preview: value_preview(message.content()),
                inserted: index,
                claimed: None,
                entered: Vec::new(),
                discarded: None,
                redelivered: redelivery.map(str::to_owned),
                fate: None,
            });
            self.summary.messages += 1;
            self.open.insert(id.clone(), life);
            self.latest.insert(id, life);
        }
    }

    /// The discards just before this core record (a `step/end` between them aside): a
    /// `turn/end` aborted says they were its cancel's (S39); anything else leaves them as
    /// they are.
    fn settle_discards(&mut self, typed: &Option<Event>) {
        let discards = std::mem::take(&mut self.recent_discards);
        let Some(Event::TurnEnd {
            turn,
            reason: TurnEndReason::Aborted { reason },
        }) = typed
        else {
            return;
        };
        for (_, lives) in discards {
            for life in lives {
                if let Some((_, why)) = &mut self.lives[life].discarded {
                    *why = format!(
                        "discarded by the cancel ({}) that aborted turn {turn} (S39)",
                        cause_text(reason)
                    );
                }
            }
        }
    }

    fn finish(mut self) -> Facts {
        self.summary.records = self.rows.len();
        self.summary.pending = self.open.len();
        let fates_after = self.fill_fates();
        let overview = overview(&self.rows);
        Facts {
            summary: self.summary,
            rows: self.rows,
            lives: self.lives,
            overview,
            fates_after,
        }
    }

    /// Asks the core each id's fate (S58) on the machine the whole log restores to, its last
    /// life carrying it. A log that ends inside a turn is closed first with crash repair's
    /// closers and no redelivery (S50, S59 with allowance 0), as a restore would need; the
    /// returned note says so. Past a violation nothing restores: no fates.
    fn fill_fates(&mut self) -> String {
        if self.failed {
            return String::new();
        }
        let mut restorer = self.auditor.restorer().clone();
        let open = restorer.position().open_turn();
        for event in restorer.repair(0) {
            if restorer.push_event(&event).is_err() {
                return String::new();
            }
        }
        let Ok(machine) = restorer.finish() else {
            return String::new();
        };
        for (id, &life) in &self.latest {
            let fate = machine.fate(&MessageId::new(id.as_str()));
            self.lives[life].fate = Some(fate.to_json().to_string());
        }
        match open {
            Some(turn) => format!(
                "after crash repair closes turn {turn} `interrupted`, without redelivery (S50)"
            ),
            None => String::new(),
        }
    }
}

/// A core record as a typed event. A splice whose `redelivery` is not a count is still a
/// splice to restore (S46 reads `redelivery` as an extra key, S59): it is read without it.
fn typed_event(event: &Value) -> Option<Event> {
    if let Ok(typed) = Event::deserialize(event) {
        return Some(typed);
    }
    let redelivery = event.get("data").and_then(|data| data.get("redelivery"))?;
    if redelivery.is_u64() {
        return None;
    }
    let mut without = event.clone();
    without
        .get_mut("data")
        .and_then(Value::as_object_mut)?
        .remove("redelivery");
    Event::deserialize(&without).ok()
}

fn quoted(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => format!("\"{}\"", preview(text)),
        other => value_preview(other),
    }
}

/// Aggregates the rows into at most [`OVERVIEW_BUCKETS`] buckets.
fn overview(rows: &[Row]) -> Overview {
    let per = rows.len().div_ceil(OVERVIEW_BUCKETS).max(1);
    let mut overview = Overview {
        per,
        ..Overview::default()
    };
    for chunk in rows.chunks(per) {
        // A turn is open at the bucket's end unless its last row ended it.
        overview.turn.push(match chunk.last() {
            Some(last) if last.2 != Kind::TurnEnd => last.3,
            _ => 0,
        });
        overview.step.push(chunk.iter().any(|row| row.4 > 0));
        overview
            .nt
            .push(chunk.iter().map(|row| row.5).max().unwrap_or(-1));
        overview
            .ns
            .push(chunk.iter().map(|row| row.6).max().unwrap_or(-1));
        overview
            .marks
            .push(chunk.iter().fold(0, |bits, row| bits | row.8.bit()));
    }
    overview
}

/// A splice's line in the viewer: its kind, its text and its mark.
fn describe(splice: &Splice, removed_ids: &[String], turn: u64) -> (Kind, String, Mark) {
    let at = format!("{} @{}", splice.target, splice.start);
    let waking = if splice.wakeup { " (waking)" } else { "" };
    let contents = || {
        splice
            .inserted
            .iter()
            .map(|m| format!("{} {}", m.id(), quoted(m.content())))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match splice.kind() {
        SpliceKind::Insert => (
            Kind::Insert,
            format!("inbox {at} + {}{waking}", contents()),
            Mark::None,
        ),
        SpliceKind::Claim => (
            Kind::Claim,
            format!(
                "inbox {at} claim ×{}: {} by turn {turn}",
                splice.removed_count,
                removed_ids.join(", ")
            ),
            Mark::None,
        ),
        SpliceKind::Discard => (
            Kind::Discard,
            format!(
                "inbox {at} discard ×{}: {}",
                splice.removed_count,
                removed_ids.join(", ")
            ),
            Mark::Discard,
        ),
        SpliceKind::Replace => (
            Kind::Replace,
            format!(
                "inbox {at} replace {} → {}{waking}",
                removed_ids.join(", "),
                contents()
            ),
            Mark::Discard,
        ),
    }
}
