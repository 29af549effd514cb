//! The runner: opens the agent on the log, runs the script's actions one at a time, each when its
//! trigger says, and closes the agent when the script is done.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use coxswain_core::Event;
use coxswain_log::{Entry, HostEvent};
use coxswain_tokio::{Agent, FileLog, Options, Recovery, Update};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use super::actions::perform;
use super::cue::Cue;
use super::host::ScriptedHost;
use super::script::{Action, HostScript, Script, Trigger};
use super::summary::Stats;
use super::timeline::{OpenStep, Timeline};
use super::Open;
use crate::pg::{write_store, Target};
use crate::verify::{verify_bytes, verify_records, Verdict};
use coxswain_postgres::Store;

/// What a run produced.
pub(crate) struct Outcome {
    pub(crate) stats: Stats,
    pub(crate) verdict: Verdict,
}

/// The open agent and what serves it.
struct Current {
    agent: Agent,
    printer: JoinHandle<()>,
    closing: Arc<AtomicBool>,
    running: Arc<watch::Sender<usize>>,
    /// A PostgreSQL session to release once closed: its store and the epoch held.
    release: Option<(Store, String, i64)>,
}

impl Current {
    /// Closes the agent and waits until its host calls returned and its updates are printed.
    async fn close(self) {
        self.closing.store(true, Ordering::SeqCst);
        let _ = self.agent.close().await;
        let mut running = self.running.subscribe();
        let _ = running.wait_for(|n| *n == 0).await;
        let _ = self.printer.await;
        if let Some((store, session, epoch)) = self.release {
            let _ = self.agent.finished().await;
            let _ = store.release(&session, epoch).await;
        }
    }
}

async fn open_agent(
    timeline: &Arc<Timeline>,
    host: &Arc<HostScript>,
    step_ms: u64,
    memory: Option<usize>,
    target: &Target,
    open: Open,
) -> Result<Current, String> {
    let closing = Arc::new(AtomicBool::new(false));
    let running = Arc::new(watch::Sender::new(0));
    let host = ScriptedHost {
        timeline: timeline.clone(),
        script: host.clone(),
        step_ms,
        closing: closing.clone(),
        running: running.clone(),
    };
    let mut options = Options::named("coxswain-run");
    if let Some(memory) = memory {
        options.delivery_memory = memory;
    }
    // `--resume-on-open` is sent below, once the timeline watches (so its turn is shown live,
    // not read back), before any action: what `Options::resume_on_open` does, made visible.
    options.redelivery = open.redelivery;
    let mut release = None;
    let opened = match target {
        Target::File(path) => {
            let log = FileLog::open(path)
                .await
                .map_err(|e| crate::pg::cannot_open(path, &e))?;
            Agent::open_with(options, host, log).await
        }
        Target::Postgres { url, session } => {
            let store = write_store(url)
                .await
                .map_err(|e| format!("cannot open {}: {e}", target.describe()))?;
            let log = store
                .open(session)
                .await
                .map_err(|e| format!("cannot open {}: {e}", target.describe()))?;
            release = Some((store, session.clone(), log.epoch().unwrap_or(0)));
            Agent::open_with(options, host, log).await
        }
    };
    let (agent, recovery) =
        opened.map_err(|e| format!("cannot open the agent on {}: {e}", target.describe()))?;
    let mut updates = agent.subscribe();
    timeline.count_from(agent.subscribe());
    if recovery.records > 0 {
        timeline.line(None, describe_recovery(&recovery));
    }
    if recovery.closers > 0 {
        show_repair(timeline, &recovery, target).await?;
    }
    let printer_timeline = timeline.clone();
    let printer = tokio::spawn(async move {
        let mut open: OpenStep = None;
        loop {
            match updates.recv().await {
                Ok(update) => {
                    printer_timeline.show(&update, &mut open);
                    printer_timeline.handled(1);
                    if matches!(update, Update::Ended(_)) {
                        break;
                    }
                }
                Err(RecvError::Lagged(n)) => {
                    printer_timeline.line(None, format!("(the timeline skipped {n} updates)"));
                    printer_timeline.handled(n);
                }
                Err(RecvError::Closed) => break,
            }
        }
    });
    if open.resume_on_open {
        timeline.say("> resume (S57): start the parked work").await;
        if let Err(error) = agent.resume().await {
            return Err(format!("resume on {}: {error}", target.describe()));
        }
    }
    Ok(Current {
        agent,
        printer,
        closing,
        running,
        release,
    })
}

/// Crash repair appends its closers while the agent opens, before anyone can subscribe: they
/// are read back from the log and shown like every other record.
async fn show_repair(
    timeline: &Timeline,
    recovery: &Recovery,
    target: &Target,
) -> Result<(), String> {
    let records = target
        .records()
        .await
        .map_err(|e| format!("cannot read back {}: {e}", target.describe()))?;
    let mut open: OpenStep = None;
    for record in records.iter().skip(recovery.records) {
        let seq = record.seq.unwrap_or(record.line as u64);
        match entry_of(&record.event) {
            Some(entry) => timeline.record(seq, &entry, &mut open),
            None => timeline.line(Some(seq), format!("(unreadable) {}", record.event)),
        }
    }
    Ok(())
}

/// A record read back (`{seq?, type, data}`) as the entry it was appended as.
fn entry_of(record: &serde_json::Value) -> Option<Entry> {
    let kind = record.get("type")?.as_str()?;
    let data = record.get("data").cloned().unwrap_or_default();
    if Event::TYPES.contains(&kind) {
        let event = serde_json::json!({"type": kind, "data": data});
        serde_json::from_value(event).ok().map(Entry::Machine)
    } else {
        HostEvent::new(kind, data).ok().map(Entry::Host)
    }
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
            recovery.closers.saturating_sub(recovery.redelivered)
        );
    }
    if recovery.redelivered > 0 {
        let _ = write!(
            text,
            "; {} claimed unseen, redelivered (S59)",
            recovery.redelivered
        );
    }
    let _ = write!(
        text,
        "; parked: {} next-turn, {} next-step",
        recovery.pending_next_turn, recovery.pending_next_step
    );
    text
}

/// Waits for an action's trigger. `false`: its event can no longer happen (the agent is idle or
/// ended without it, and only the runner could make it act again).
async fn reached(timeline: &Timeline, agent: &Agent, trigger: &Trigger) -> bool {
    let cue: &Cue = match trigger {
        Trigger::Next => return true,
        Trigger::At(ms) => {
            tokio::time::sleep_until(timeline.start() + Duration::from_millis(*ms)).await;
            return true;
        }
        Trigger::When(cue) => cue,
    };
    tokio::select! {
        () = timeline.seen(cue) => {
            // The cue's record may be one of a batch the driver is still publishing: a command
            // round trip lets the batch finish, so the action's line follows all of it.
            let _ = agent.pending().await;
            return true;
        }
        _ = agent.when_idle() => {}
    }
    timeline.settle().await;
    timeline.has_seen(cue)
}

/// Runs a script against the log at `target`; prints the timeline unless `quiet`.
pub(crate) async fn session(
    script: Script,
    target: &Target,
    open: Open,
    quiet: bool,
) -> Result<Outcome, String> {
    let timeline = Arc::new(Timeline::new(quiet));
    let host = Arc::new(script.host);
    let mut current = open_agent(
        &timeline,
        &host,
        script.step_ms,
        script.memory,
        target,
        open,
    )
    .await?;
    let mut jobs = Vec::new();
    for cued in script.actions {
        if !reached(&timeline, &current.agent, &cued.trigger).await {
            timeline.stats().skipped += 1;
            if let Trigger::When(cue) = &cued.trigger {
                timeline
                    .say(format!("> skipped: `{cue}` did not happen, and cannot now"))
                    .await;
            }
            continue;
        }
        let agent = current.agent.clone();
        match cued.action {
            Action::Reopen => {
                timeline
                    .say("> reopen: close the agent, then open it again from its log")
                    .await;
                current.close().await;
                current = open_agent(
                    &timeline,
                    &host,
                    script.step_ms,
                    script.memory,
                    target,
                    open,
                )
                .await?;
            }
            Action::WaitIdle => {
                timeline.say("> wait until idle").await;
                if let Err(error) = agent.when_idle().await {
                    timeline.say(format!("> wait until idle: {error}")).await;
                }
            }
            Action::Dispose => {
                timeline.say("> dispose").await;
                if let Err(error) = agent.dispose().await {
                    timeline.stats().rejected += 1;
                    timeline.say(format!("> dispose: rejected: {error}")).await;
                }
            }
            Action::Maintenance { ms } => {
                timeline.say(format!("> maintenance job of {ms} ms")).await;
                let (began, job) = maintenance(&timeline, agent, ms);
                match began.await {
                    Ok(()) => jobs.push(job),
                    // Refused: the job never began; its line is printed by now.
                    Err(_) => drop(job.await),
                }
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
    }
    current.close().await;
    let verdict = match target {
        Target::File(path) => {
            let owned = path.clone();
            let bytes = tokio::task::spawn_blocking(move || crate::logfile::read(&owned))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("cannot read back the log: {e}"))?;
            verify_bytes(&bytes)
        }
        Target::Postgres { .. } => verify_records(&target.records().await?, None),
    };
    let stats = std::mem::take(&mut *timeline.stats());
    Ok(Outcome { stats, verdict })
}

/// Starts a maintenance job of `ms` (it stops early when cancelled). The receiver resolves once
/// the job has begun, or fails if the agent refused it.
fn maintenance(
    timeline: &Arc<Timeline>,
    agent: Agent,
    ms: u64,
) -> (oneshot::Receiver<()>, JoinHandle<()>) {
    let (began_tx, began) = oneshot::channel();
    let timeline = timeline.clone();
    let job = tokio::spawn(async move {
        let result = agent
            .run_maintenance(move |token| async move {
                let _ = began_tx.send(());
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(ms)) => false,
                    () = token.cancelled() => true,
                }
            })
            .await;
        let text = match result {
            Ok(false) => "maintenance job done".to_owned(),
            Ok(true) => "maintenance job saw the abort".to_owned(),
            Err(error) => {
                timeline.stats().rejected += 1;
                format!("> maintenance: rejected: {error}")
            }
        };
        timeline.say(text).await;
    });
    (began, job)
}
