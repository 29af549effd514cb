//! One ACP session: its agent, the prompts whose answer is held, and the dispatcher task that
//! turns the agent's durable records into `session/update`s and answers the held prompts.
//!
//! Every answer is the core's: what `agent.fate(id)` (S58) says of the prompt's message. The
//! dispatcher answers from the records it has just sent when they say it (a v2 prompt's
//! `user/message` in the turn it saw claim it; the end of the turn that claimed a prompt),
//! exactly what `fate` would answer then; anything else asks `fate` when a record or
//! notification concerning the id arrives (its `user/message`, its claiming turn's end, its
//! discard), and once in the handler for a retry (after registering, so nothing is missed). A
//! final fate (discarded; claimed and entered; claimed, ended, never entered) never changes, so
//! asking late is as good as asking on time. An answer is released only once the updates it
//! reports were sent ([`Position`]): `fate` may run ahead of the dispatcher, and a v1 client
//! reads a prompt's response as the end of its turn's updates.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agent_client_protocol::{Client, ConnectionTo, Responder};
use coxswain_log::Entry;
use coxswain_tokio::coxswain_core::{Fate, Notification as CoreNotification, TurnEndKind};
use coxswain_tokio::{Agent, AgentError, Ending, Update};
use serde_json::{json, Value};
use tokio::sync::{broadcast, oneshot, watch};

use super::wire::{self, Notification, Version};
use crate::errors::AcpError;
use crate::store::SessionStore;
use crate::updates::{updates_of, AcpUpdate, TurnEnd};

/// How many turns' host errors a session keeps for v1 answers (`-32603` with the error).
const KEPT_ERRORS: usize = 1024;

/// The most requests held at once for one message id (a prompt and its retries): a client
/// retrying without waiting cannot grow the server's memory without bound.
const MAX_WAITERS: usize = 64;

/// How often [`Session::settle`] asks `fate` for one id (a second ask is final; one spare).
const SETTLE_TRIES: usize = 3;

/// How many records one read of the log brings back when the dispatcher lagged.
const RECOVERY_BATCH: usize = 256;

/// A prompt waiting for its answer.
struct Waiter {
    token: u64,
    responder: Responder<Value>,
    /// Dropped with the waiter: tells the prompt's `$/cancel_request` watcher it was answered.
    _answered: Option<oneshot::Sender<()>>,
}

/// The waiters of one message id.
#[derive(Default)]
struct Held {
    /// The turn that claimed the id, once known (its end settles the id).
    claimed: Option<u64>,
    waiters: Vec<Waiter>,
}

/// How far the client has been told: the records the dispatcher has sent (the history's
/// included). An answer is sent only once what it reports was sent as updates before it (a v1
/// prompt's turn end, a v2 prompt's `user_message`): `fate` may run ahead of the dispatcher.
#[derive(Default)]
struct Position {
    /// The last turn whose `turn/start` was sent.
    started: u64,
    /// The last turn whose `turn/end` was sent.
    ended: u64,
    /// The ids whose `user/message` was sent in turn `started`.
    entered: HashSet<String>,
    /// Updates were skipped (a lag): answer from fate alone.
    lagged: bool,
}

impl Position {
    fn observe(&mut self, update: &AcpUpdate) {
        match update {
            AcpUpdate::TurnStarted { turn } => {
                self.started = *turn;
                self.entered.clear();
            }
            AcpUpdate::TurnEnded { turn, .. } => self.ended = self.ended.max(*turn),
            AcpUpdate::UserMessage { message_id, .. } => {
                self.entered.insert(message_id.clone());
            }
            _ => {}
        }
    }

    /// Whether turn `turn`'s end was sent.
    fn ended(&self, turn: u64) -> bool {
        self.lagged || turn <= self.ended
    }

    /// Whether the `user/message` of `id`, entered in turn `turn`, was sent.
    fn entered(&self, turn: u64, id: &str) -> bool {
        self.lagged
            || turn < self.started
            || self.ended(turn)
            || (turn == self.started && self.entered.contains(id))
    }
}

/// What the handlers and the dispatcher share, under one lock: the held prompts and the
/// position (so a prompt found not answerable yet is noted before the update that answers it
/// is looked at).
#[derive(Default)]
struct State {
    held: HashMap<String, Held>,
    position: Position,
}

/// One open session on this connection.
pub(crate) struct Session {
    pub(crate) id: String,
    pub(crate) agent: Agent,
    pub(crate) version: Version,
    connection: ConnectionTo<Client>,
    /// Where the session's log is read back from when the dispatcher lagged.
    store: Arc<SessionStore>,
    /// The `seq` of the last record whose updates were sent (or skipped, before a restore's
    /// resume): a lag is recovered from the log after it.
    last_seq: AtomicU64,
    state: Mutex<State>,
    /// The host error of each recent turn that ended `error`.
    errors: Mutex<BTreeMap<u64, Value>>,
    tokens: AtomicU64,
    /// Set once the dispatcher has ended (every held prompt answered).
    done: watch::Sender<bool>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Session {
    pub(crate) fn new(
        id: String,
        agent: Agent,
        version: Version,
        connection: ConnectionTo<Client>,
        store: Arc<SessionStore>,
    ) -> Arc<Session> {
        Arc::new(Session {
            id,
            agent,
            version,
            connection,
            store,
            last_seq: AtomicU64::new(0),
            state: Mutex::new(State::default()),
            errors: Mutex::new(BTreeMap::new()),
            tokens: AtomicU64::new(0),
            done: watch::channel(false).0,
        })
    }

    /// Notes that every record up to `seq` was sent or skipped (the history of a restore).
    pub(crate) fn saw(&self, seq: u64) {
        self.last_seq.fetch_max(seq, Ordering::Relaxed);
    }

    /// Sends the updates one record stands for (live or replayed), keeps a turn's error, and
    /// moves the position past them.
    pub(crate) fn send_record(&self, updates: &[AcpUpdate]) {
        self.keep_errors(updates);
        for update in updates {
            for json in wire::update_json(self.version, update) {
                self.send_update(json);
            }
        }
        let mut state = lock(&self.state);
        for update in updates {
            state.position.observe(update);
        }
    }

    /// Keeps a turn's error from a record not sent (a history not replayed), and moves the
    /// position past it (nothing before a restore is waited for).
    pub(crate) fn skip_record(&self, updates: &[AcpUpdate]) {
        self.keep_errors(updates);
        let mut state = lock(&self.state);
        for update in updates {
            state.position.observe(update);
        }
    }

    fn keep_errors(&self, updates: &[AcpUpdate]) {
        for update in updates {
            if let AcpUpdate::TurnEnded {
                turn,
                end: TurnEnd::Error(error),
            } = update
            {
                let mut errors = lock(&self.errors);
                errors.insert(*turn, error.clone());
                while errors.len() > KEPT_ERRORS {
                    errors.pop_first();
                }
            }
        }
    }

    /// Sends the v2 resume's state snapshot (idle, the last turn) after the replay.
    pub(crate) fn send_resume_snapshot(&self) {
        if self.version == Version::V2 {
            self.send_update(wire::resume_snapshot(self.agent.last_turn()));
        }
    }

    fn send_update(&self, update: Value) {
        let sent = match wire::notification(self.version, &self.id, update.clone()) {
            Ok(Notification::V1(n)) => self.connection.send_notification(*n),
            Ok(Notification::V2(n)) => self.connection.send_notification(*n),
            Err(error) => {
                eprintln!(
                    "coxswain-acp: session {}: an update the schema refuses ({error}): {update}",
                    self.id
                );
                return;
            }
        };
        if let Err(error) = sent {
            eprintln!(
                "coxswain-acp: session {}: sending an update failed: {error}",
                self.id
            );
        }
    }

    /// Holds `responder` until the answer of message `id` is known; returns its token (to
    /// [`release`](Session::release) it if the delivery is refused). `answered` is dropped
    /// once the prompt is answered. `None` (answered `-32011`) when [`MAX_WAITERS`] requests
    /// for `id` are already held.
    pub(crate) fn hold(
        &self,
        id: &str,
        responder: Responder<Value>,
        answered: Option<oneshot::Sender<()>>,
    ) -> Option<u64> {
        let token = self.tokens.fetch_add(1, Ordering::Relaxed);
        let mut state = lock(&self.state);
        let held = state.held.entry(id.to_owned()).or_default();
        if held.waiters.len() >= MAX_WAITERS {
            drop(state);
            let limit = MAX_WAITERS;
            respond(responder, Err(AcpError::TooManyRetries { limit }));
            return None;
        }
        held.waiters.push(Waiter {
            token,
            responder,
            _answered: answered,
        });
        Some(token)
    }

    /// Takes back a held responder (its delivery was refused): `None` if it was answered
    /// meanwhile.
    pub(crate) fn release(&self, id: &str, token: u64) -> Option<Responder<Value>> {
        let mut state = lock(&self.state);
        let entry = state.held.get_mut(id)?;
        let index = entry.waiters.iter().position(|w| w.token == token)?;
        let waiter = entry.waiters.remove(index);
        if entry.waiters.is_empty() {
            state.held.remove(id);
        }
        Some(waiter.responder)
    }

    /// Answers every prompt held for `id` if its fate is final and what it reports was sent;
    /// otherwise notes the claiming turn (if claimed), so that the turn's end, or the id's
    /// `user/message`, settles it.
    ///
    /// A fate read before the dispatcher sent what settles it (the claiming turn's end, the
    /// id's `user/message`) is asked again: the dispatcher may have looked at the id before
    /// `claimed` was noted, and nothing would look at it again. The record was applied to the
    /// core before it was broadcast, so the second answer is final; the loop is bounded.
    pub(crate) async fn settle(&self, id: &str) {
        for _ in 0..SETTLE_TRIES {
            if !lock(&self.state).held.contains_key(id) {
                return;
            }
            let fate = self.agent.fate(id).await;
            let (answer, waiters) = {
                let mut state = lock(&self.state);
                match self.answer_of(id, &fate, &state.position) {
                    None => {
                        let Fate::Claimed { turn, .. } = fate else {
                            return;
                        };
                        let sent = state.position.ended(turn) || state.position.entered(turn, id);
                        if let Some(entry) = state.held.get_mut(id) {
                            entry.claimed = Some(turn);
                        }
                        if sent {
                            // What settles it was sent before `claimed` was noted: ask again.
                            continue;
                        }
                        return;
                    }
                    Some(answer) => (
                        answer,
                        state.held.remove(id).map(|h| h.waiters).unwrap_or_default(),
                    ),
                }
            };
            for waiter in waiters {
                respond(waiter.responder, answer.clone());
            }
            return;
        }
    }

    /// The answer a prompt for `id` gets once its fate is `fate` and the client was told
    /// `position`, or `None` while it waits.
    fn answer_of(
        &self,
        id: &str,
        fate: &Fate,
        position: &Position,
    ) -> Option<Result<Value, AcpError>> {
        match fate {
            Fate::Pending { .. } | Fate::Unknown => None,
            Fate::Discarded => Some(Err(AcpError::Cancelled)),
            Fate::Claimed {
                turn,
                step: Some(_),
                end,
            } => match self.version {
                Version::V2 => position
                    .entered(*turn, id)
                    .then(|| Ok(json!({ "messageId": id }))),
                Version::V1 => match end {
                    Some(end) if position.ended(*turn) => Some(self.v1_answer(*turn, *end)),
                    _ => None,
                },
            },
            Fate::Claimed {
                turn,
                step: None,
                end: Some(end),
            } => position
                .ended(*turn)
                .then(|| not_inserted(self.version, *turn, *end)),
            Fate::Claimed {
                step: None,
                end: None,
                ..
            } => None,
        }
    }

    /// A v1 prompt's answer once the turn that entered it ended `end`.
    fn v1_answer(&self, turn: u64, end: TurnEndKind) -> Result<Value, AcpError> {
        let reason = TurnEnd::from_kind(end, || {
            lock(&self.errors)
                .get(&turn)
                .cloned()
                .unwrap_or_else(|| json!({ "kind": "error", "turn": turn }))
        });
        v1_turn_answer(turn, &reason)
    }

    /// The dispatcher's own answer, without asking `fate`, for a v2 prompt whose
    /// `user/message` it has just sent in the turn it saw claim it (the core's claim
    /// notification and the entry are what `fate` would read: `claimed { turn, step }`). Asking
    /// `fate` instead would wait behind the driver's next append. Anything else is left to
    /// [`settle`](Session::settle).
    fn answer_entered(&self, id: &str) {
        if self.version != Version::V2 {
            return;
        }
        let waiters = {
            let mut state = lock(&self.state);
            let turn = state.position.started;
            match state.held.get(id) {
                Some(held) if held.claimed == Some(turn) && !state.position.lagged => {
                    state.held.remove(id).map(|h| h.waiters).unwrap_or_default()
                }
                _ => return,
            }
        };
        for waiter in waiters {
            respond(waiter.responder, Ok(json!({ "messageId": id })));
        }
    }

    /// The dispatcher's own answers at the end of turn `turn` (just sent): every prompt it saw
    /// claimed by that turn gets, if the turn entered it, the turn's answer (v1: its stop
    /// reason, or `-32603` with the host's error; v2: its `messageId`), else `-32012`, exactly
    /// what `fate` answers then (`claimed { turn, step?, end }`).
    fn answer_turn_end(&self, turn: u64, end: &TurnEnd) {
        let answered: Vec<(String, Vec<Waiter>, bool)> = {
            let mut state = lock(&self.state);
            if state.position.lagged {
                return;
            }
            let ids: Vec<String> = state
                .held
                .iter()
                .filter(|(_, h)| h.claimed == Some(turn))
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| {
                    let entered = state.position.entered.contains(&id);
                    let held = state.held.remove(&id)?;
                    Some((id, held.waiters, entered))
                })
                .collect()
        };
        for (id, waiters, entered) in answered {
            let answer = match (entered, self.version) {
                (true, Version::V2) => Ok(json!({ "messageId": id })),
                (true, Version::V1) => v1_turn_answer(turn, end),
                (false, _) => not_inserted(self.version, turn, end.end_kind()),
            };
            for waiter in waiters {
                respond(waiter.responder, answer.clone());
            }
        }
    }

    /// Settles every id claimed by `turn` (its end is their answer, or their not-inserted).
    async fn settle_claimed_by(&self, turn: u64) {
        let ids: Vec<String> = lock(&self.state)
            .held
            .iter()
            .filter(|(_, h)| h.claimed == Some(turn))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.settle(&id).await;
        }
    }

    /// Settles every held id.
    async fn settle_all(&self) {
        let ids: Vec<String> = lock(&self.state).held.keys().cloned().collect();
        for id in ids {
            self.settle(&id).await;
        }
    }

    fn note_claim(&self, id: &str, turn: u64) {
        if let Some(entry) = lock(&self.state).held.get_mut(id) {
            entry.claimed = Some(turn);
        }
    }

    /// A call refused by the agent: a stopped agent's refusal names why it stopped (fenced or
    /// locked: `-32013`), everything else as the errors table says.
    pub(crate) fn refusal(&self, error: &AgentError) -> AcpError {
        match (error, self.agent.ending()) {
            (AgentError::Stopped, Some(Ending::Stopped(log))) => AcpError::of_stopped(&log),
            _ => AcpError::of_agent(error),
        }
    }

    /// Answers every prompt still held with `error` (the agent ended).
    pub(crate) fn fail_all(&self, error: &AcpError) {
        let held: Vec<Held> = lock(&self.state).held.drain().map(|(_, h)| h).collect();
        for entry in held {
            for waiter in entry.waiters {
                respond(waiter.responder, Err(error.clone()));
            }
        }
    }

    /// One live record (or one read back after a lag): its updates, then the answers it
    /// settles. A record at or below the last `seq` sent was already sent (read back from the
    /// log after a lag, then found again in the channel) and is skipped.
    async fn on_record(&self, seq: u64, entry: &Entry) {
        if seq <= self.last_seq.load(Ordering::Relaxed) {
            return;
        }
        self.last_seq.store(seq, Ordering::Relaxed);
        let list = updates_of(entry);
        self.send_record(&list);
        for update in list {
            match update {
                AcpUpdate::UserMessage { message_id, .. } => {
                    self.answer_entered(&message_id);
                    self.settle(&message_id).await;
                }
                AcpUpdate::TurnEnded { turn, end } => {
                    self.answer_turn_end(turn, &end);
                    self.settle_claimed_by(turn).await;
                    self.resume_parked(&end);
                }
                _ => {}
            }
        }
    }

    /// The dispatcher fell `skipped` updates behind the agent (a client reading too slowly):
    /// the records it missed are read back from the log, after the last `seq` sent, and sent
    /// in order (bounded batches), then every held id is settled from its fate (the missed
    /// notifications: claims, discards). If the log cannot be read, the updates stay lost and
    /// the held prompts are answered from fate alone.
    async fn recover(&self, skipped: u64) {
        let from = self.last_seq.load(Ordering::Relaxed);
        loop {
            let after = self.last_seq.load(Ordering::Relaxed);
            match self
                .store
                .records_after(&self.id, after, RECOVERY_BATCH)
                .await
            {
                Ok(batch) => {
                    let complete = batch.len() < RECOVERY_BATCH;
                    for (seq, entry) in &batch {
                        self.on_record(*seq, entry).await;
                    }
                    if complete {
                        eprintln!(
                            "coxswain-acp: session {}: {skipped} updates skipped (the dispatcher fell behind); the records after seq {from} were read back from the log and sent",
                            self.id
                        );
                        break;
                    }
                }
                Err(error) => {
                    eprintln!(
                        "coxswain-acp: session {}: {skipped} updates skipped (the client reads too slowly) and the log cannot be read back ({error}); answering from fate",
                        self.id
                    );
                    lock(&self.state).position.lagged = true;
                    break;
                }
            }
        }
        self.settle_all().await;
    }

    /// The dispatcher: records → updates, and the held prompts' answers, until the agent ends.
    pub(crate) async fn dispatch(self: Arc<Session>, mut updates: broadcast::Receiver<Update>) {
        let ending = loop {
            match updates.recv().await {
                Ok(Update::Recorded { seq, entry }) => self.on_record(seq, &entry).await,
                Ok(Update::Notified(CoreNotification::Claimed { message, turn })) => {
                    self.note_claim(message.id().as_str(), turn);
                }
                Ok(Update::Notified(CoreNotification::Discarded { message })) => {
                    self.settle(message.id().as_str()).await;
                }
                Ok(Update::Notified(_)) => {}
                Ok(Update::Ended(ending)) => break Some(ending),
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(skipped)) => self.recover(skipped).await,
                Err(broadcast::error::RecvError::Closed) => break None,
            }
        };
        // What is still held when the agent ends: answered from fate where final and sent,
        // else refused (closed: discarded, `-32800`; stopped: the log failed).
        self.settle_all().await;
        let error = match ending {
            Some(Ending::Stopped(log)) => AcpError::of_stopped(&log),
            _ => AcpError::Cancelled,
        };
        self.fail_all(&error);
        // `send_replace` stores the value even with no receiver yet (a close that subscribes
        // later must still see it).
        self.done.send_replace(true);
    }

    /// After a turn that ended `error` or `aborted` the core does not continue (S35): waking
    /// work queued behind it parks until a `resume` (S57). An editor user expects the queued
    /// prompts to run, so the adapter sends `resume` at once (it does nothing when nothing is
    /// parked, or a turn already runs). Sent from a task: the dispatcher never waits on the
    /// driver.
    fn resume_parked(&self, end: &TurnEnd) {
        if !matches!(end.end_kind(), TurnEndKind::Error | TurnEndKind::Aborted) {
            return;
        }
        let agent = self.agent.clone();
        let id = self.id.clone();
        tokio::spawn(async move {
            match agent.resume().await {
                Ok(()) => {}
                // A closed or stopped agent has nothing left to run.
                Err(error) if agent.ending().is_some() => {
                    let _ = error;
                }
                Err(error) => {
                    eprintln!(
                        "coxswain-acp: session {id}: resume after a turn end failed: {error}"
                    );
                }
            }
        });
    }

    /// Resolves once the dispatcher has ended.
    pub(crate) async fn finished(&self) {
        let mut done = self.done.subscribe();
        let _ = done.wait_for(|d| *d).await;
    }
}

/// A v1 prompt's answer when the turn that entered it ended `end`: its stop reason, or, for a
/// turn that failed or was interrupted (v1 has no `error` stop reason), `-32603` with the error.
fn v1_turn_answer(turn: u64, end: &TurnEnd) -> Result<Value, AcpError> {
    match wire::turn_error(turn, end) {
        Some(error) => Err(AcpError::TurnFailed(error)),
        None => Ok(json!({ "stopReason": wire::stop_reason(end) })),
    }
}

/// The answer of a prompt claimed by turn `turn`, which ended `end` before entering it. A turn
/// stopped by a cancel or a close (`aborted`) answers as a cancel does: v2 `-32800` (the v2
/// schema's close MUST), v1 `{stopReason: "cancelled"}` (the v1 schema's MUST for a cancel);
/// any other end `-32012` (the prompt was never seen by the model).
pub(crate) fn not_inserted(
    version: Version,
    turn: u64,
    end: TurnEndKind,
) -> Result<Value, AcpError> {
    match (end, version) {
        (TurnEndKind::Aborted, Version::V2) => Err(AcpError::Cancelled),
        (TurnEndKind::Aborted, Version::V1) => Ok(json!({ "stopReason": "cancelled" })),
        _ => Err(AcpError::NotInserted {
            turn,
            end: end.as_str().to_owned(),
        }),
    }
}

/// Sends one answer; a closed connection is no one's error.
pub(crate) fn respond(responder: Responder<Value>, answer: Result<Value, AcpError>) {
    let sent = match answer {
        Ok(value) => responder.respond(value),
        Err(error) => responder.respond_with_error(error.to_rpc()),
    };
    if let Err(error) = sent {
        eprintln!("coxswain-acp: sending an answer failed: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(updates: &[AcpUpdate]) -> Position {
        let mut position = Position::default();
        for update in updates {
            position.observe(update);
        }
        position
    }

    fn entered(id: &str) -> AcpUpdate {
        AcpUpdate::UserMessage {
            message_id: id.into(),
            content: Vec::new(),
        }
    }

    #[test]
    fn a_turn_is_answerable_only_once_its_end_was_sent() {
        let running = seen(&[AcpUpdate::TurnStarted { turn: 1 }, entered("p1")]);
        assert!(
            !running.ended(1),
            "a v1 answer may not overtake its turn's updates"
        );
        let ended = seen(&[
            AcpUpdate::TurnStarted { turn: 1 },
            entered("p1"),
            AcpUpdate::TurnEnded {
                turn: 1,
                end: TurnEnd::Completed,
            },
        ]);
        assert!(ended.ended(1));
        assert!(!ended.ended(2));
    }

    #[test]
    fn a_v2_answer_waits_for_its_user_message_to_be_sent() {
        let started = seen(&[AcpUpdate::TurnStarted { turn: 2 }]);
        assert!(!started.entered(2, "p1"));
        let sent = seen(&[AcpUpdate::TurnStarted { turn: 2 }, entered("p1")]);
        assert!(sent.entered(2, "p1"));
        assert!(!sent.entered(2, "p2"));
        // A later turn's start means every message of the earlier one was sent.
        let later = seen(&[
            AcpUpdate::TurnStarted { turn: 2 },
            AcpUpdate::TurnStarted { turn: 3 },
        ]);
        assert!(later.entered(2, "p2"));
        assert!(!later.entered(3, "p2"));
    }

    #[test]
    fn after_a_lag_fate_alone_answers() {
        let mut position = Position::default();
        assert!(!position.ended(5));
        position.lagged = true;
        assert!(position.ended(5));
        assert!(position.entered(5, "x"));
    }
}
