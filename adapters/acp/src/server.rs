//! The ACP side: one connection, both lifecycles (v1 and the unstable v2, negotiated at
//! `initialize` by the crate's protocol router), and every handler of docs/acp.md's mapping.
//!
//! Every handler awaits its coxswain call (durable) before it returns, so the connection's
//! messages reach the core in the order the client sent them (the crate's dispatch loop waits
//! for each handler); the long waits (a prompt held until its insertion or its turn's end, a
//! close waiting for the turn to stop) run in the session's dispatcher or a spawned task.
//! Nothing here decides what happens to a prompt: the core answers, through `fate` (S58).

mod requests;
mod session;
mod transport;
mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use agent_client_protocol::{
    self as acp, on_receive_notification, on_receive_request, Client, ConnectTo, ConnectionTo,
    HandleDispatchFrom, NullClose, Protocol, Responder,
};
use coxswain_tokio::coxswain_core::{CancelCause, Fate, Message, Status, Target};
use coxswain_tokio::{AgentError, Host, Options, SyncPolicy};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use self::requests::{
    Cancel, Close, IdleBehavior, Load, NewSession, Prompt, Queue, Replace, Resume, Revoke, Steering,
};
use self::session::{not_inserted, respond, Session};
use self::wire::Version;
use crate::errors::{check_key, AcpError, ServeError};
use crate::store::{fresh_session_id, is_session_id, SessionStore, Storage};
use crate::updates::updates_of;

/// The adapter's settings: where the logs live, and the coxswain options of every session.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// Where the logs live.
    pub storage: Storage,
    /// The admission bound `P` (S55): the most prompts one pending list may hold. Default
    /// 10000.
    pub max_pending: usize,
    /// Crash repair's redelivery allowance `A` (S59). Default 1: a prompt claimed when the
    /// agent died, before any model call saw it, is inserted after a restart.
    pub redelivery: u64,
    /// When the file logs sync (ignored by PostgreSQL). Default every append.
    pub sync: SyncPolicy,
    /// The most sessions open at once on one connection (each holds an agent and its
    /// buffers); one more `session/new` / `session/load` / `session/resume` is answered
    /// `-32011 backpressure, data: { kind: "sessions", limit }`. Default 64.
    pub max_sessions: usize,
    /// How many updates a session's dispatcher may fall behind its agent (each session's
    /// buffer); one that falls further behind reads what it missed back from the log and sends
    /// it, in order. Default 1024.
    pub update_capacity: usize,
}

impl Config {
    /// The default admission bound.
    pub const DEFAULT_MAX_PENDING: usize = 10_000;
    /// The default redelivery allowance.
    pub const DEFAULT_REDELIVERY: u64 = 1;
    /// The default bound on the sessions open on one connection.
    pub const DEFAULT_MAX_SESSIONS: usize = 64;
    /// The longest message id (an `idempotencyKey` of 255 characters of up to 4 bytes each).
    const MAX_ID_BYTES: usize = 1024;
    /// The default [`Config::update_capacity`].
    pub const DEFAULT_UPDATE_CAPACITY: usize = 1024;

    /// The defaults, with the logs in `storage`.
    pub fn new(storage: Storage) -> Config {
        Config {
            storage,
            max_pending: Config::DEFAULT_MAX_PENDING,
            redelivery: Config::DEFAULT_REDELIVERY,
            sync: SyncPolicy::default(),
            max_sessions: Config::DEFAULT_MAX_SESSIONS,
            update_capacity: Config::DEFAULT_UPDATE_CAPACITY,
        }
    }

    /// The tokio options every session's agent opens with: an unbounded delivery memory (S58:
    /// a retry is answered from `fate` for the session's life), the redelivery allowance and
    /// the admission bound, and no resume at open (the server sends `resume` after the
    /// history was replayed).
    pub fn options(&self) -> Options {
        let mut options = Options::named("coxswain-acp");
        options.delivery_memory = Options::UNBOUNDED_DELIVERY_MEMORY;
        options.redelivery = self.redelivery;
        options.max_pending = self.max_pending;
        options.resume_on_open = false;
        options.max_id_bytes = Config::MAX_ID_BYTES;
        options.update_capacity = self.update_capacity;
        options
    }
}

/// The standard input and output, the transport an editor spawns an agent with: one JSON-RPC
/// message a line, a line bounded at 4 MiB (a longer one is answered `-32700` with
/// `data: { bytes, limit }` and discarded, the connection goes on), and what an error echoes of
/// the input cut to 1 KiB.
pub fn stdio() -> impl ConnectTo<acp::Agent> + 'static {
    transport::lines(
        tokio::io::stdin(),
        tokio::io::stdout(),
        transport::MAX_LINE_BYTES,
    )
}

/// Serves ACP on `transport` until the client closes it: v1 and the unstable v2, negotiated
/// at `initialize`, one coxswain agent per ACP session, its host built by `make_host(sessionId)`.
///
/// Connects to the storage first (a directory it creates if missing, or PostgreSQL): an
/// unreachable one is [`ServeError::Store`] before anything is read. When the connection ends,
/// every open session's agent is closed (its log synced and released; a turn left running is
/// closed `interrupted` at the next `session/load` / `session/resume`, and the prompts it
/// claimed are redelivered, S59).
pub async fn serve<H, F, T>(config: Config, make_host: F, transport: T) -> Result<(), ServeError>
where
    H: Host,
    F: Fn(&str) -> H + Send + Sync + 'static,
    T: ConnectTo<acp::Agent> + 'static,
{
    let store = SessionStore::connect(config.storage.clone())
        .await?
        .with_sync(config.sync);
    let server = Arc::new(Server {
        store: Arc::new(store),
        options: config.options(),
        max_sessions: config.max_sessions,
        make_host,
        sessions: Arc::new(Mutex::new(HashMap::new())),
        closing: Mutex::new(Vec::new()),
    });
    let router = acp::Agent
        .protocol_router()
        .with_v1(v1_agent(server.clone()))
        .with_v2(v2_agent(server.clone()));
    let served = router.connect_to(transport).await;
    server.shutdown().await;
    served.map_err(ServeError::Connection)
}

/// The state of one connection.
struct Server<F> {
    store: Arc<SessionStore>,
    options: Options,
    max_sessions: usize,
    make_host: F,
    /// Shared with each session's dispatcher task, which drops its session when its agent
    /// ends on its own (stopped: a failed log, fenced).
    sessions: Arc<Mutex<HashMap<String, Arc<Session>>>>,
    /// The `session/close`s still running (the agent given its grace, closed, released).
    closing: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

// ---------------------------------------------------------------------------------------------
// The two connection builders: the version's `initialize`, the shared handlers, and the
// version's restore method.
// ---------------------------------------------------------------------------------------------

fn v1_agent<H, F>(server: Arc<Server<F>>) -> impl ConnectTo<Client>
where
    H: Host,
    F: Fn(&str) -> H + Send + Sync + 'static,
{
    use acp::v1::schema as v1;
    let builder = acp::Agent.v1().name("coxswain-acp").on_receive_request(
        async |_request: v1::InitializeRequest,
               responder: acp::v1::Responder<v1::InitializeResponse>,
               _connection: acp::v1::ConnectionTo<Client>| {
            match serde_json::from_value(wire::initialize_json(Version::V1)) {
                Ok(answer) => responder.respond(answer),
                Err(error) => responder.respond_with_internal_error(error),
            }
        },
        on_receive_request!(),
    );
    let restore = server.clone();
    shared(builder, server, Version::V1).on_receive_request(
        async move |request: Load, responder, connection: acp::v1::ConnectionTo<Client>| {
            restore
                .restore(
                    Version::V1,
                    request.session_id,
                    true,
                    responder.into_raw(),
                    connection.into(),
                )
                .await;
            Ok(())
        },
        on_receive_request!(),
    )
}

fn v2_agent<H, F>(server: Arc<Server<F>>) -> impl ConnectTo<Client>
where
    H: Host,
    F: Fn(&str) -> H + Send + Sync + 'static,
{
    use acp::v2::schema as v2;
    let builder = acp::Agent.v2().name("coxswain-acp").on_receive_request(
        async |_request: v2::InitializeRequest,
               responder: acp::v2::Responder<v2::InitializeResponse>,
               _connection: acp::v2::ConnectionTo<Client>| {
            match serde_json::from_value(wire::initialize_json(Version::V2)) {
                Ok(answer) => responder.respond(answer),
                Err(error) => responder.respond_with_internal_error(error),
            }
        },
        on_receive_request!(),
    );
    let restore = server.clone();
    shared(builder, server, Version::V2).on_receive_request(
        async move |request: Resume, responder, connection: acp::v2::ConnectionTo<Client>| {
            let responder = responder.into_raw();
            let replay = match &request.replay_from {
                None => false,
                Some(from) if from.get("type").and_then(Value::as_str) == Some("start") => true,
                Some(from) => {
                    respond(
                        responder,
                        Err(AcpError::invalid(format!(
                            "replayFrom {from} is not supported (only {{\"type\":\"start\"}})"
                        ))),
                    );
                    return Ok(());
                }
            };
            restore
                .restore(
                    Version::V2,
                    request.session_id,
                    replay,
                    responder,
                    connection.into(),
                )
                .await;
            Ok(())
        },
        on_receive_request!(),
    )
}

/// The handlers both versions share.
fn shared<P, D, H, F>(
    builder: acp::Builder<acp::Agent, D, acp::NullRun, NullClose, P>,
    server: Arc<Server<F>>,
    version: Version,
) -> acp::Builder<acp::Agent, impl HandleDispatchFrom<Client>, acp::NullRun, NullClose, P>
where
    P: Protocol,
    D: HandleDispatchFrom<Client> + 'static,
    H: Host,
    F: Fn(&str) -> H + Send + Sync + 'static,
{
    let (s1, s2, s3, s4, s5, s6, s7, s8) = (
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
        server,
    );
    builder
        .on_receive_request(
            async move |_request: NewSession, responder: Responder<Value, P>, connection| {
                s1.new_session(version, responder.into_raw(), raw(connection))
                    .await;
                Ok(())
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |request: Prompt, responder: Responder<Value, P>, _connection| {
                s2.prompt(version, request, responder.into_raw()).await;
                Ok(())
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |request: Queue, responder: Responder<Value, P>, _connection| {
                let answer = s3.queue(version, request).await;
                respond(responder.into_raw(), answer);
                Ok(())
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |request: Steering, responder: Responder<Value, P>, _connection| {
                let answer = s4.steering(version, request).await;
                respond(responder.into_raw(), answer);
                Ok(())
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |request: Revoke, responder: Responder<Value, P>, _connection| {
                let answer = s5.revoke(request).await;
                respond(responder.into_raw(), answer);
                Ok(())
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |request: Replace, responder: Responder<Value, P>, _connection| {
                let answer = s6.replace(version, request).await;
                respond(responder.into_raw(), answer);
                Ok(())
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |request: Close, responder: Responder<Value, P>, _connection| {
                s7.close(request, responder.into_raw()).await;
                Ok(())
            },
            on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: Cancel, _connection| {
                s8.cancel(notification).await;
                Ok(())
            },
            on_receive_notification!(),
        )
}

/// A retried `_session/queue` / `_session/steering` (the id was already delivered), answered
/// from its fate (S58) as `session/prompt` is: discarded `-32800`; claimed by a turn that ended
/// before entering it `-32012` (`-32800` if that turn was cancelled); otherwise accepted, with
/// where it went (`Ok(fate)`).
async fn retry_outcome(session: &Session, id: &str) -> Result<Fate, AcpError> {
    let fate = session.agent.fate(id).await;
    match fate {
        Fate::Discarded => Err(AcpError::Cancelled),
        Fate::Claimed {
            turn,
            step: None,
            end: Some(end),
        } => match not_inserted(session.version, turn, end) {
            // v1's `{stopReason: "cancelled"}` is a prompt's answer; these methods answer -32800.
            Ok(_) => Err(AcpError::Cancelled),
            Err(error) => Err(error),
        },
        fate => Ok(fate),
    }
}

/// A retried steer's answer: failed as [`retry_outcome`] says, else `injected` when it is
/// pending for a step (or claimed by `turn`, the turn the steer was meant for), else
/// `startedNewTurn` (pending for a turn, or claimed by another turn).
async fn steer_retry(session: &Session, id: &str, turn: u64) -> Value {
    match retry_outcome(session, id).await {
        Err(error) => failed(&error),
        Ok(Fate::Pending {
            target: Target::NextStep,
        }) => json!({ "outcome": "injected", "messageId": id }),
        Ok(Fate::Claimed { turn: claimed, .. }) if claimed == turn => {
            json!({ "outcome": "injected", "messageId": id })
        }
        Ok(_) => json!({ "outcome": "startedNewTurn", "messageId": id }),
    }
}

/// The version-neutral connection.
fn raw<C: Into<ConnectionTo<Client>>>(connection: C) -> ConnectionTo<Client> {
    connection.into()
}

/// A fresh prompt id: `p-` then 32 random hex digits.
fn fresh_prompt_id() -> String {
    let session = fresh_session_id();
    format!("p-{}", session.trim_start_matches("s-"))
}

/// The message id of a prompt: its key (checked), or a fresh one.
fn message_id(key: Option<String>) -> Result<String, AcpError> {
    match key {
        Some(key) => {
            check_key(&key)?;
            Ok(key)
        }
        None => Ok(fresh_prompt_id()),
    }
}

/// A `session/prompt`'s message (S2's user message, the prompt blocks as its content).
fn user_message(id: &str, prompt: Vec<Value>) -> Message {
    Message::user(id, Value::Array(prompt))
}

impl<H, F> Server<F>
where
    H: Host,
    F: Fn(&str) -> H + Send + Sync + 'static,
{
    /// Refuses one more session once [`Config::max_sessions`] are open (the handlers run one at
    /// a time, so the count cannot move between this check and the insertion).
    fn room(&self) -> Result<(), AcpError> {
        if lock(&self.sessions).len() >= self.max_sessions {
            return Err(AcpError::TooManySessions {
                limit: self.max_sessions,
            });
        }
        Ok(())
    }

    fn session(&self, id: &str) -> Result<Arc<Session>, AcpError> {
        lock(&self.sessions)
            .get(id)
            .cloned()
            .ok_or_else(|| AcpError::UnknownSession(id.to_owned()))
    }

    /// Starts serving an opened agent: its dispatcher runs on the connection.
    fn start(
        &self,
        session: Arc<Session>,
        updates: tokio::sync::broadcast::Receiver<coxswain_tokio::Update>,
        connection: &ConnectionTo<Client>,
    ) {
        lock(&self.sessions).insert(session.id.clone(), session.clone());
        let dispatcher = session.clone().dispatch(updates);
        let sessions = self.sessions.clone();
        if let Err(error) = connection.spawn(async move {
            dispatcher.await;
            // The agent ended (closed, or stopped on its log): the session leaves the
            // connection, later requests naming it get `-32002`.
            let mut sessions = lock(&sessions);
            if sessions
                .get(&session.id)
                .is_some_and(|open| Arc::ptr_eq(open, &session))
            {
                sessions.remove(&session.id);
            }
            Ok(())
        }) {
            eprintln!("coxswain-acp: the connection refused the session's dispatcher: {error}");
        }
    }

    /// `session/new`.
    async fn new_session(
        &self,
        version: Version,
        responder: Responder<Value>,
        connection: ConnectionTo<Client>,
    ) {
        if let Err(error) = self.room() {
            return respond(responder, Err(error));
        }
        let id = fresh_session_id();
        let host = (self.make_host)(&id);
        let opened = match self
            .store
            .create_named(&id, host, self.options.clone())
            .await
        {
            Ok(opened) => opened,
            Err(error) => return respond(responder, Err(AcpError::of_store(&error))),
        };
        let updates = opened.agent.subscribe();
        let session = Session::new(
            id.clone(),
            opened.agent,
            version,
            connection.clone(),
            self.store.clone(),
        );
        self.start(session, updates, &connection);
        respond(responder, Ok(json!({ "sessionId": id })));
    }

    /// `session/load` (v1) and `session/resume` (v2): open the log (restore, crash repair,
    /// redelivery), replay its history if asked, then `resume` (S57).
    async fn restore(
        &self,
        version: Version,
        id: String,
        replay: bool,
        responder: Responder<Value>,
        connection: ConnectionTo<Client>,
    ) {
        if lock(&self.sessions).contains_key(&id) {
            return respond(
                responder,
                Err(AcpError::invalid(format!(
                    "session {id} is already open on this connection"
                ))),
            );
        }
        if !is_session_id(&id) {
            return respond(responder, Err(AcpError::UnknownSession(id)));
        }
        if let Err(error) = self.room() {
            return respond(responder, Err(error));
        }
        let host = (self.make_host)(&id);
        let opened = match self.store.open(&id, host, self.options.clone(), true).await {
            Ok(opened) => opened,
            Err(error) => return respond(responder, Err(AcpError::of_store(&error))),
        };
        let updates = opened.agent.subscribe();
        let session = Session::new(
            id,
            opened.agent,
            version,
            connection.clone(),
            self.store.clone(),
        );
        for (seq, entry) in &opened.history {
            session.saw(*seq);
            let list = updates_of(entry);
            if replay {
                session.send_record(&list);
            } else {
                session.skip_record(&list);
            }
        }
        // v2: the current state after the replay and before the answer (restored work parks
        // until the resume: idle).
        session.send_resume_snapshot();
        // `resume` (S57) before the dispatcher starts: what it writes (a parked prompt's turn)
        // waits in the subscription and is sent after the `{}`, always in that order.
        let answer = match session.agent.resume().await {
            Ok(()) => Ok(json!({})),
            Err(error) => Err(AcpError::of_agent(&error)),
        };
        respond(responder, answer);
        self.start(session, updates, &connection);
    }

    /// `session/prompt`: a follow-up (S2), held until the core answers it.
    async fn prompt(&self, version: Version, request: Prompt, responder: Responder<Value>) {
        let checked = self.session(&request.session_id).and_then(|session| {
            wire::check_prompt(version, &request.prompt)?;
            Ok((session, message_id(request.idempotency_key)?))
        });
        let (session, id) = match checked {
            Ok(checked) => checked,
            Err(error) => return respond(responder, Err(error)),
        };
        // Held before the delivery, so no record or notification about it is missed.
        let withdrawn = responder.cancellation();
        let (answered, unanswered) = oneshot::channel();
        let Some(token) = session.hold(&id, responder, Some(answered)) else {
            return;
        };
        match session
            .agent
            .followup(user_message(&id, request.prompt))
            .await
        {
            Ok(()) => {}
            // A retry: answered from its fate (now if final, else when it is).
            Err(error) if error.was_delivered() => session.settle(&id).await,
            Err(error) => {
                if let Some(responder) = session.release(&id, token) {
                    respond(responder, Err(session.refusal(&error)));
                }
                return;
            }
        }
        // The client withdrew the request (`$/cancel_request`) while it is held: the prompt is
        // removed (S12) if it is still pending, and then answered `-32800` by its discard;
        // one already claimed is answered as usual.
        let agent = session.agent.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = withdrawn.cancelled() => {
                    if let Err(error) = agent.remove(id.as_str()).await {
                        eprintln!("coxswain-acp: withdrawing prompt {id} failed: {error}");
                    }
                }
                _ = unanswered => {}
            }
        });
    }

    /// `_session/queue`: a follow-up, answered once durable.
    async fn queue(&self, version: Version, request: Queue) -> Result<Value, AcpError> {
        let session = self.session(&request.session_id)?;
        wire::check_prompt(version, &request.prompt)?;
        let id = message_id(request.idempotency_key)?;
        match session
            .agent
            .followup(user_message(&id, request.prompt))
            .await
        {
            Ok(()) => Ok(json!({ "messageId": id })),
            // A retry: answered from the id's fate (S58), as `session/prompt` is.
            Err(error) if error.was_delivered() => retry_outcome(&session, &id)
                .await
                .map(|_| json!({ "messageId": id })),
            Err(error) => Err(session.refusal(&error)),
        }
    }

    /// `_session/steering` (docs/acp.md, "Steering"). Only the core's guards decide (S54): a
    /// steer joins turn `t` through `steer_expecting(t)`, the idle answer is
    /// `followup_if_idle_after(t)`; a `turn-mismatch` from either (the turn moved on between
    /// the read of `last_turn` and the send) takes the other path, at most [`STEER_TRIES`]
    /// sends, then `outcome: "failed"`. A named `turn` is tried once: once it ended, the idle
    /// answer is a plain follow-up (after the running turn if another runs).
    async fn steering(&self, version: Version, request: Steering) -> Result<Value, AcpError> {
        let session = self.session(&request.session_id)?;
        wire::check_prompt(version, &request.prompt)?;
        let id = message_id(request.idempotency_key)?;
        let message = user_message(&id, request.prompt);
        let agent = &session.agent;
        let start_new = request.idle_behavior != Some(IdleBehavior::PromptRequired);
        let injected = json!({ "outcome": "injected", "messageId": id });
        let started = json!({ "outcome": "startedNewTurn", "messageId": id });
        if let Some(turn) = request.turn {
            match agent.steer_expecting(turn, message.clone()).await {
                Ok(()) => return Ok(injected),
                Err(error) if error.was_delivered() => {
                    return Ok(steer_retry(&session, &id, turn).await);
                }
                Err(AgentError::TurnMismatch(_)) => {}
                Err(error) => return Ok(failed(&session.refusal(&error))),
            }
            if !start_new {
                return Ok(json!({ "outcome": "promptRequired" }));
            }
            return match agent.followup(message).await {
                Ok(()) => Ok(started),
                Err(error) if error.was_delivered() => Ok(steer_retry(&session, &id, turn).await),
                Err(error) => Ok(failed(&session.refusal(&error))),
            };
        }
        // The status is only a hint of which guard to try first.
        let mut running = agent.status() == Status::Running;
        let mut mismatch = None;
        for _ in 0..STEER_TRIES {
            let turn = agent.last_turn();
            let sent = if running {
                agent.steer_expecting(turn, message.clone()).await
            } else if start_new {
                agent.followup_if_idle_after(turn, message.clone()).await
            } else if agent.status() == Status::Running {
                // promptRequired inserts nothing at idle: only the running case sends.
                Err(AgentError::TurnMismatch(
                    coxswain_tokio::coxswain_core::Expect::IdleAfter(turn),
                ))
            } else {
                return Ok(json!({ "outcome": "promptRequired" }));
            };
            match sent {
                Ok(()) if running => return Ok(injected),
                Ok(()) => return Ok(started),
                Err(error) if error.was_delivered() => {
                    return Ok(steer_retry(&session, &id, turn).await);
                }
                Err(error @ AgentError::TurnMismatch(_)) => {
                    mismatch = Some(error);
                    running = !running;
                }
                Err(error) => return Ok(failed(&session.refusal(&error))),
            }
        }
        let error = mismatch.unwrap_or(AgentError::Closed);
        Ok(failed(&session.refusal(&error)))
    }

    /// `_session/revoke`: `remove` (S12); a held prompt of it gets `-32800` (its discard).
    async fn revoke(&self, request: Revoke) -> Result<Value, AcpError> {
        let session = self.session(&request.session_id)?;
        match session.agent.remove(request.message_id.as_str()).await {
            Ok(revoked) => Ok(json!({ "revoked": revoked })),
            Err(error) => Err(session.refusal(&error)),
        }
    }

    /// `_session/replace`: `replace` (S14) under the same id; a held prompt keeps waiting.
    async fn replace(&self, version: Version, request: Replace) -> Result<Value, AcpError> {
        let session = self.session(&request.session_id)?;
        wire::check_prompt(version, &request.prompt)?;
        let message = user_message(&request.message_id, request.prompt);
        match session
            .agent
            .replace(request.message_id.as_str(), message)
            .await
        {
            Ok(replaced) => Ok(json!({ "replaced": replaced })),
            Err(error) => Err(session.refusal(&error)),
        }
    }

    /// `session/cancel`: `cancel` without `keepInbox` (S39). Every discarded prompt gets
    /// `-32800` through its discard; an unknown session is ignored (a notification has no
    /// answer).
    async fn cancel(&self, notification: Cancel) {
        let Ok(session) = self.session(&notification.session_id) else {
            eprintln!(
                "coxswain-acp: session/cancel for unknown session {}",
                notification.session_id
            );
            return;
        };
        if let Err(error) = session.agent.cancel(CancelCause::User, false).await {
            eprintln!(
                "coxswain-acp: session {}: cancel failed: {error}",
                session.id
            );
        }
    }

    /// `session/close`: the session leaves this connection at once (later requests naming it
    /// get `-32002`); cancel without `keepInbox` (held prompts get `-32800`), the running turn
    /// is given its abort grace to end, then the agent is closed and its log released; `{}`
    /// once every held prompt was answered.
    async fn close(&self, request: Close, responder: Responder<Value>) {
        let Some(session) = lock(&self.sessions).remove(&request.session_id) else {
            return respond(responder, Err(AcpError::UnknownSession(request.session_id)));
        };
        let cancelled = session.agent.cancel(CancelCause::User, false).await;
        let grace = self.options.abort_grace + Duration::from_secs(1);
        let store = self.store.clone();
        let closing = async move {
            if cancelled.is_ok() {
                let _ = tokio::time::timeout(grace, session.agent.when_idle()).await;
            }
            // Closed whatever the turn did (a turn left running is closed `interrupted` at the
            // next open); the PostgreSQL lease is released before the answer.
            let closed = store.close(&session.id, &session.agent).await;
            // The dispatcher answers what is still held once the agent ended; if it does not
            // end in time, what is left is answered here (each prompt exactly once: an answer
            // takes its waiters out of the session under its lock).
            if tokio::time::timeout(grace, session.finished())
                .await
                .is_err()
            {
                eprintln!(
                    "coxswain-acp: session {}: the dispatcher did not end after close",
                    session.id
                );
                session.fail_all(&AcpError::Cancelled);
            }
            // A cancel refused because the agent already ended (stopped after a failed log)
            // leaves nothing to close: the session is gone all the same. Only a failed final
            // sync is the client's business (acknowledged records may be lost).
            if let Err(error) = &cancelled {
                eprintln!(
                    "coxswain-acp: session {}: cancel at close: {error}",
                    session.id
                );
            }
            let answer = match closed {
                Ok(()) => Ok(json!({})),
                Err(error) => Err(AcpError::of_agent(&error)),
            };
            respond(responder, answer);
        };
        // Not a connection task: a client that closes its end right after `session/close`
        // must not cut the close short (the agent unclosed, the lease held); `shutdown` waits
        // for it.
        let mut closing_tasks = lock(&self.closing);
        closing_tasks.retain(|task| !task.is_finished());
        closing_tasks.push(tokio::spawn(closing));
    }

    /// The connection ended: every open agent is closed (its log synced and released).
    async fn shutdown(&self) {
        let closing: Vec<_> = lock(&self.closing).drain(..).collect();
        for task in closing {
            if let Err(error) = task.await {
                eprintln!("coxswain-acp: a session/close did not finish: {error}");
            }
        }
        let sessions: Vec<Arc<Session>> = lock(&self.sessions).drain().map(|(_, s)| s).collect();
        for session in sessions {
            if let Err(error) = self.store.close(&session.id, &session.agent).await {
                eprintln!(
                    "coxswain-acp: session {}: closing failed: {error}",
                    session.id
                );
            }
        }
    }
}

/// How many guarded sends one `_session/steering` makes at most (S54's guards racing turns).
const STEER_TRIES: usize = 3;

/// A steer the core refused: `{ outcome: "failed", error: { code, message, data } }`.
fn failed(error: &AcpError) -> Value {
    let rpc = error.to_rpc();
    let mut failure = json!({ "code": rpc.code.value(), "message": rpc.message });
    if let (Some(data), Some(object)) = (rpc.data, failure.as_object_mut()) {
        object.insert("data".into(), data);
    }
    json!({ "outcome": "failed", "error": failure })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_options_of_every_session() {
        let options = Config::new(Storage::Dir("x".into())).options();
        assert_eq!(options.delivery_memory, Options::UNBOUNDED_DELIVERY_MEMORY);
        assert_eq!(options.redelivery, 1);
        assert_eq!(options.max_pending, 10_000);
        assert!(!options.resume_on_open);
        assert_eq!(options.validate().map_err(|e| e.to_string()), Ok(()));
    }

    #[test]
    fn prompt_ids_are_keys_or_fresh() {
        assert_eq!(message_id(Some("k".into())), Ok("k".into()));
        assert_eq!(
            message_id(Some(String::new())),
            Err(AcpError::invalid("idempotencyKey is empty"))
        );
        let fresh = message_id(None).unwrap_or_default();
        assert_eq!(fresh.len(), 34, "{fresh}");
        assert!(fresh.starts_with("p-"), "{fresh}");
        assert_ne!(message_id(None).unwrap_or_default(), fresh);
    }

    #[tokio::test]
    async fn an_unusable_storage_fails_serve_before_anything_is_read() {
        let file = std::env::temp_dir().join(format!("coxswain-acp-{}.file", fresh_prompt_id()));
        let _ = std::fs::write(&file, b"");
        let config = Config::new(Storage::Dir(file.clone()));
        let served = serve(config, |_| crate::echo::EchoHost::new(), stdio()).await;
        let _ = std::fs::remove_file(&file);
        assert!(
            matches!(&served, Err(ServeError::Store(error)) if error.to_string().contains(&file.display().to_string())),
            "{served:?}"
        );
    }

    #[test]
    fn steering_params_parse_with_their_idle_behavior() {
        let steer: Result<Steering, _> = serde_json::from_value(json!({
            "sessionId": "s", "prompt": [], "idleBehavior": "promptRequired", "turn": 3
        }));
        let steer = steer.map_err(|e| e.to_string());
        assert_eq!(
            steer.as_ref().map(|s| (s.idle_behavior, s.turn)),
            Ok((Some(IdleBehavior::PromptRequired), Some(3)))
        );
    }
}
