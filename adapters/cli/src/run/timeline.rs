//! The timeline: one line per record, notification and action, in one order on any machine.
//!
//! Updates are printed by the printer task; actions and host answers by whoever performs them,
//! through [`Timeline::say`], which first waits until the printer has shown every update the
//! agent published so far. So an action's line always follows what triggered it and precedes
//! what it caused. The timeline also keeps what happened ([`Cue`]s), for `"when"` triggers.

use std::sync::{Mutex, MutexGuard, PoisonError};

use coxswain_core::{
    CancelCause, Event, Message, Notification, ShownId, SpliceKind, Status, TurnEndReason,
};
use coxswain_log::Entry;
use coxswain_tokio::{Ending, Update};
use serde_json::Value;
use tokio::sync::broadcast::{self, error::TryRecvError};
use tokio::sync::watch;
use tokio::time::Instant;

use super::cue::Cue;
use super::summary::Stats;

pub(crate) struct Timeline {
    start: Instant,
    quiet: bool,
    stats: Mutex<Stats>,
    /// What happened in this run, in order.
    seen: watch::Sender<Vec<Cue>>,
    /// How many updates the printer has handled, over every agent of the run.
    printed: watch::Sender<u64>,
    /// A second subscription that only counts what the agent published.
    published: Mutex<Published>,
}

#[derive(Default)]
struct Published {
    receiver: Option<broadcast::Receiver<Update>>,
    count: u64,
}

impl Published {
    /// Counts what was published since the last call; returns the count so far.
    fn drain(&mut self) -> u64 {
        while let Some(rx) = self.receiver.as_mut() {
            match rx.try_recv() {
                Ok(_) => self.count += 1,
                Err(TryRecvError::Lagged(n)) => self.count += n,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Closed) => self.receiver = None,
            }
        }
        self.count
    }
}

/// The step a host event lands in: the printer follows `step/start` and `step/end`.
pub(crate) type OpenStep = Option<(u64, u64)>;

impl Timeline {
    pub(crate) fn new(quiet: bool) -> Self {
        Timeline {
            start: Instant::now(),
            quiet,
            stats: Mutex::default(),
            seen: watch::Sender::new(Vec::new()),
            printed: watch::Sender::new(0),
            published: Mutex::default(),
        }
    }

    pub(crate) fn start(&self) -> Instant {
        self.start
    }

    pub(crate) fn stats(&self) -> MutexGuard<'_, Stats> {
        self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts the updates of a new agent (subscribed before its first input).
    /// The previous agent's updates were all printed by then: they are counted first.
    pub(crate) fn count_from(&self, receiver: broadcast::Receiver<Update>) {
        let mut published = self.published();
        published.drain();
        published.receiver = Some(receiver);
    }

    fn published(&self) -> MutexGuard<'_, Published> {
        self.published
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until the printer has shown every update published so far.
    pub(crate) async fn settle(&self) {
        let target = self.published().drain();
        let mut printed = self.printed.subscribe();
        let _ = printed.wait_for(|n| *n >= target).await;
    }

    /// An action's or the host's line, after everything published before it.
    pub(crate) async fn say(&self, text: impl AsRef<str>) {
        self.settle().await;
        self.line(None, text);
    }

    /// A line now: the printer's own, or a line nothing published can precede.
    pub(crate) fn line(&self, seq: Option<u64>, text: impl AsRef<str>) {
        if self.quiet {
            return;
        }
        let ms = self.start.elapsed().as_millis();
        match seq {
            Some(seq) => println!("{ms:>6} ms  #{seq:<4} {}", text.as_ref()),
            None => println!("{ms:>6} ms        {}", text.as_ref()),
        }
    }

    /// Whether `cue` happened in this run.
    pub(crate) fn has_seen(&self, cue: &Cue) -> bool {
        self.seen.borrow().contains(cue)
    }

    /// Resolves once `cue` happened.
    pub(crate) async fn seen(&self, cue: &Cue) {
        let mut seen = self.seen.subscribe();
        let _ = seen.wait_for(|seen| seen.contains(cue)).await;
    }

    fn happened(&self, cue: Cue) {
        self.seen.send_modify(|seen| seen.push(cue));
    }

    /// The printer handled one more update (or skipped `n`).
    pub(crate) fn handled(&self, n: u64) {
        self.printed.send_modify(|printed| *printed += n);
    }

    /// Prints one update and notes what happened.
    pub(crate) fn show(&self, update: &Update, open: &mut OpenStep) {
        match update {
            Update::Recorded { seq, entry } => self.record(*seq, entry, open),
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

    /// Prints one record of the log.
    pub(crate) fn record(&self, seq: u64, entry: &Entry, open: &mut OpenStep) {
        let text = match entry {
            Entry::Machine(event) => {
                match event {
                    Event::StepStart { turn, step } => *open = Some((*turn, *step)),
                    Event::StepEnd { .. } => *open = None,
                    _ => {}
                }
                self.event(event)
            }
            Entry::Host(event) => {
                self.stats().host_events += 1;
                if let Some((turn, step)) = *open {
                    self.happened(Cue::Recorded {
                        kind: event.kind().to_owned(),
                        turn,
                        step,
                    });
                }
                format!("      {} {}", event.kind(), preview(event.data()))
            }
        };
        self.line(Some(seq), text);
        if let Entry::Machine(event) = entry {
            if let Some(cue) = Cue::of_event(event) {
                self.happened(cue);
            }
        }
    }

    fn event(&self, event: &Event) -> String {
        match event {
            Event::Spliced(splice) => {
                let target = splice.target;
                let ids: Vec<&str> = splice.inserted.iter().map(|m| m.id().as_str()).collect();
                let waking = if splice.wakeup { " (waking)" } else { "" };
                let (at, n, ids) = (splice.start, splice.removed_count, ids.join(", "));
                match splice.kind() {
                    SpliceKind::Insert => {
                        let content = splice.inserted.first().and_then(|m| m.content());
                        let content = content.map(preview).unwrap_or_default();
                        format!("inbox {target} @{at} + {ids}{waking} {content}")
                    }
                    SpliceKind::Claim => format!("inbox {target} @{at} claim ×{n}"),
                    SpliceKind::Discard => format!("inbox {target} @{at} cancel ×{n}"),
                    SpliceKind::Replace => {
                        format!("inbox {target} @{at} replace ×{n} with {ids}{waking}")
                    }
                }
            }
            Event::TurnStart { turn } => format!("turn {turn} starts"),
            Event::StepStart { turn, step } => {
                self.stats().steps += 1;
                format!("  step {turn}.{step} starts")
            }
            Event::UserMessage(message) => {
                format!("    {} {}", event.kind(), describe_message(message))
            }
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
                self.line(
                    None,
                    format!("discarded {}", ShownId::bare(message.id().as_str())),
                );
            }
            Notification::Claimed { message, turn } => {
                self.stats().claimed += 1;
                self.line(
                    None,
                    format!(
                        "claimed {} by turn {turn}",
                        ShownId::bare(message.id().as_str())
                    ),
                );
                self.happened(Cue::Claimed(message.id().as_str().to_owned()));
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

pub(crate) fn cause(cause: &CancelCause) -> String {
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

/// `ID "content"`.
pub(crate) fn describe_message(message: &Message) -> String {
    format!(
        "{} {}",
        ShownId::bare(message.id().as_str()),
        message.content().map(preview).unwrap_or_default()
    )
}
