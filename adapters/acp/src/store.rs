//! Where the sessions' logs live: one coxswain log per ACP session, in a directory of file logs
//! (`DIR/<sessionId>.jsonl`) or in PostgreSQL (`coxswain-postgres`, one fenced session each).
//!
//! INTERFACE OWNED BY THE LEAD: the types and signatures below are fixed; helper H2 fills in the
//! bodies (and may add private items, variants of [`StoreError`] and tests). Changed by H7 for
//! the review: `open`'s `replay`, [`SessionStore::close`], [`SessionStore::records_after`].
//!
//! # Session ids
//!
//! A session id is `s-` then 32 lowercase hex digits, from the OS's randomness (never a
//! counter). [`SessionStore::open`] treats any other string as an unknown session, so an id
//! never names a path outside the directory (`../x` is unknown, not a file).
//!
//! # A session's history
//!
//! [`OpenedSession::history`] is recorded while the agent opens (only when
//! [`SessionStore::open`] is asked to, `replay`: a session's whole history is held in memory),
//! by a thin [`DurableLog`] wrapper around the session's log: every record the read-back
//! visited, then every record the open appended (crash repair's closers, S50, and redelivery
//! splices, S59), each with its `seq`. The wrapper stops recording when the open returns; the
//! same works for both storages. [`SessionStore::records_after`] reads a bounded slice of the
//! records later (a dispatcher that fell behind the agent's updates).
//! With [`Options::resume_on_open`] set, what `resume` wrote during the open is in the history
//! too, but records the driver appends concurrently afterwards might not be: leave it off and
//! send `resume` after subscribing (what the server does).
//!
//! # Closing
//!
//! [`SessionStore::close`] closes a session's agent and waits until its log is released: a file
//! log's lock, or a PostgreSQL session's lease (given up at once, so another process may open
//! it without waiting for the lease to lapse). Whenever the agent's driver ends otherwise (it
//! stopped, or its last handle was dropped), the lease is released too, but only as a best
//! effort (a task on the runtime, lost if the runtime ends first; the lease then lapses).

mod records;
use self::records::{discard_empty_session, file_records_after, pg_records_after};

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use coxswain_log::{Entry, HostEvent, LineBuffer, LineTooLong, Reader, Record};
use coxswain_postgres::{redact, PgError, PgLog, Store, StoreOptions};
use coxswain_tokio::coxswain_core::Event;
use coxswain_tokio::{
    Agent, AgentError, DurableLog, FileLog, Host, LogError, OpenError, Options, ReadBack, Recovery,
    SyncPolicy,
};
use tokio::sync::watch;

/// Where the logs live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Storage {
    /// A directory of JSON-lines file logs, one `<sessionId>.jsonl` per session.
    Dir(PathBuf),
    /// A PostgreSQL URL (`postgres://…`).
    Postgres(String),
}

/// What opening a session's log failed on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No such session (never created, or its log is gone).
    #[error("unknown session {0}")]
    UnknownSession(String),
    /// Another process holds the session's log (the file log's lock).
    #[error("session {session} is locked by another process: {detail}")]
    Locked {
        /// The session.
        session: String,
        /// The log's error text (names the path).
        detail: String,
    },
    /// PostgreSQL: another writer took the session over (fenced).
    #[error("session {session} was taken over by another writer: {detail}")]
    Fenced {
        /// The session.
        session: String,
        /// The log's error text.
        detail: String,
    },
    /// Anything else (the log or the database failed; the text names the path or URL).
    #[error("{0}")]
    Failed(String),
}

impl StoreError {
    /// The kind, as `data.kind` of the ACP error carries it: `unknown-session`, `locked`,
    /// `fenced`, `failed`.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreError::UnknownSession(_) => "unknown-session",
            StoreError::Locked { .. } => "locked",
            StoreError::Fenced { .. } => "fenced",
            StoreError::Failed(_) => "failed",
        }
    }
}

/// A session's agent, opened on its log.
#[derive(Debug)]
#[non_exhaustive]
pub struct OpenedSession {
    /// The ACP session id.
    pub session_id: String,
    /// The agent (its driver task runs on the current tokio runtime).
    pub agent: Agent,
    /// What restoring the log found (S50, S59).
    pub recovery: Recovery,
    /// Opened with `replay` ([`SessionStore::open`]): every record the log holds once opened,
    /// in log order, with its `seq`: what it held before, then what the open appended (crash
    /// repair's closers, S50, and redelivery splices, S59). The history that `session/load` /
    /// `session/resume` replays; records after it arrive through `agent.subscribe()`
    /// (subscribe before sending anything). Empty without `replay`, and for a new session.
    pub history: Vec<(u64, Entry)>,
}

/// The logs of every session.
#[derive(Debug)]
pub struct SessionStore {
    storage: Storage,
    /// How the file logs sync (`--sync`); PostgreSQL commits every append.
    sync: SyncPolicy,
    /// The connection pool, for [`Storage::Postgres`].
    pg: Option<Store>,
    /// PostgreSQL: the sessions this store has open, each until its lease is released (the
    /// receiver turns `true` then, or errs if the release was lost). A second open of one of
    /// them in this process is refused `Locked` (the file log's lock does that for files),
    /// rather than taking the session over from itself (the owner is the process's).
    live: Live,
}

impl SessionStore {
    /// Connects to the storage: checks the directory (creating it if missing; refusing a file or
    /// an unwritable one) or connects to the database (migrating its schema).
    ///
    /// # Errors
    ///
    /// [`StoreError::Failed`], naming the directory or the (password-redacted) URL and what
    /// was wrong.
    pub async fn connect(storage: Storage) -> Result<SessionStore, StoreError> {
        let pg = match &storage {
            Storage::Dir(dir) => {
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || check_dir(&dir))
                    .await
                    .map_err(|error| StoreError::Failed(error.to_string()))??;
                None
            }
            Storage::Postgres(url) => {
                let store =
                    Store::connect(url, StoreOptions::default())
                        .await
                        .map_err(|error| {
                            StoreError::Failed(format!("PostgreSQL {}: {error}", redact(url)))
                        })?;
                Some(store)
            }
        };
        Ok(SessionStore {
            storage,
            sync: SyncPolicy::default(),
            pg,
            live: Arc::default(),
        })
    }

    /// The same store, its file logs syncing as `policy` says (`--sync`; the default is
    /// [`SyncPolicy::EveryAppend`]). PostgreSQL ignores it: every append is a commit.
    pub fn with_sync(mut self, policy: SyncPolicy) -> Self {
        self.sync = policy;
        self
    }

    /// The sync policy of the file logs.
    pub fn sync(&self) -> SyncPolicy {
        self.sync
    }

    /// The storage.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// Creates a new session (a fresh id, `s-` then 32 random hex digits; a new, empty log) and
    /// opens an agent on it with `options`.
    ///
    /// # Errors
    ///
    /// [`StoreError::Failed`] when the log cannot be created or the agent not opened (invalid
    /// `options` included).
    pub async fn create<H: Host>(
        &self,
        host: H,
        options: Options,
    ) -> Result<OpenedSession, StoreError> {
        self.create_named(&fresh_session_id(), host, options).await
    }

    /// Creates the new session `session_id` (from [`fresh_session_id`], for a caller that must
    /// know the id before the host is built) and opens an agent on it with `options`, as
    /// [`create`](SessionStore::create) does.
    ///
    /// # Errors
    ///
    /// [`StoreError::Failed`] for an id that is not a session id (`s-` + 32 lowercase hex),
    /// an id that already names a session (`session s-… already exists`; nothing is touched),
    /// invalid `options` (before anything is created), or a log that cannot be created or an
    /// agent that cannot be opened (a file just created is removed again).
    pub async fn create_named<H: Host>(
        &self,
        session_id: &str,
        host: H,
        options: Options,
    ) -> Result<OpenedSession, StoreError> {
        if !is_session_id(session_id) {
            return Err(StoreError::Failed(format!(
                "invalid session id {}: a session id is `s-` then 32 lowercase hex digits",
                coxswain_tokio::coxswain_core::ShownId::new(session_id)
            )));
        }
        options
            .validate()
            .map_err(|error| StoreError::Failed(format!("invalid options: {error}")))?;
        let id = session_id.to_owned();
        match (&self.storage, &self.pg) {
            (Storage::Postgres(_), Some(store)) => {
                match store.open_read_only(&id).await {
                    Err(PgError::NoSession(_)) => {}
                    Ok(_) => {
                        return Err(StoreError::Failed(format!("session {id} already exists")))
                    }
                    Err(error) => return Err(pg_failed(&id, &error)),
                }
                let live = self.claim_live(&id)?;
                let log = store.open(&id).await.map_err(|e| pg_error(&id, e))?;
                let opened = self
                    .open_on(
                        id.clone(),
                        pg_recorded(store, log, live, false),
                        host,
                        options,
                    )
                    .await;
                if opened.is_err() {
                    // Nothing of the new session is kept: its row goes if it holds no record
                    // (the log was dropped with the failed open; its lease release, if it
                    // comes later, finds no row). Best effort: when the database itself failed
                    // the open, this may fail too, leaving an empty session that a later
                    // `create_named` of the same (random) id refuses and `open` restores empty.
                    let _ = discard_empty_session(store, &id).await;
                }
                opened
            }
            (Storage::Dir(dir), _) => {
                let path = dir.join(format!("{id}.jsonl"));
                let (new_id, new_path) = (id.clone(), path.clone());
                tokio::task::spawn_blocking(move || create_file(&new_id, &new_path))
                    .await
                    .map_err(|error| StoreError::Failed(error.to_string()))??;
                let opened = match FileLog::open_with(&path, self.sync).await {
                    Ok(log) => {
                        self.open_on(id.clone(), Recorded::new(log, false), host, options)
                            .await
                    }
                    Err(error) => Err(log_error(&id, &path, error)),
                };
                if opened.is_err() {
                    // Nothing of the new session is kept (its log was dropped, unlocked).
                    let _ = tokio::fs::remove_file(&path).await;
                }
                opened
            }
            (Storage::Postgres(url), None) => Err(StoreError::Failed(format!(
                "PostgreSQL {}: not connected",
                redact(url)
            ))),
        }
    }

    /// Opens an existing session's log (restore, crash repair, redelivery per
    /// `options.redelivery`); with `replay`, collects its history
    /// ([`OpenedSession::history`], the whole log in memory: only for a client that asked
    /// for the replay).
    ///
    /// # Errors
    ///
    /// [`StoreError::UnknownSession`] for an id that is not `s-` + 32 lowercase hex digits or
    /// names no stored session; [`StoreError::Locked`] while another process holds the log
    /// (the file's lock; PostgreSQL: another writer's live lease); [`StoreError::Fenced`] when
    /// another writer took the PostgreSQL session over during the open;
    /// [`StoreError::Failed`] otherwise (the text names the path or the session).
    pub async fn open<H: Host>(
        &self,
        session_id: &str,
        host: H,
        options: Options,
        replay: bool,
    ) -> Result<OpenedSession, StoreError> {
        if !is_session_id(session_id) {
            return Err(StoreError::UnknownSession(session_id.to_owned()));
        }
        options
            .validate()
            .map_err(|error| StoreError::Failed(format!("invalid options: {error}")))?;
        let id = session_id.to_owned();
        match (&self.storage, &self.pg) {
            (Storage::Postgres(_), Some(store)) => {
                match store.open_read_only(&id).await {
                    Ok(_) => {}
                    Err(PgError::NoSession(_)) => return Err(StoreError::UnknownSession(id)),
                    Err(error) => return Err(pg_failed(&id, &error)),
                }
                let live = self.claim_live(&id)?;
                let log = store.open(&id).await.map_err(|e| pg_error(&id, e))?;
                self.open_on(id, pg_recorded(store, log, live, replay), host, options)
                    .await
            }
            (Storage::Dir(dir), _) => {
                let path = dir.join(format!("{id}.jsonl"));
                match tokio::fs::symlink_metadata(&path).await {
                    Ok(_) => {}
                    Err(error) if error.kind() == io::ErrorKind::NotFound => {
                        return Err(StoreError::UnknownSession(id))
                    }
                    Err(error) => {
                        return Err(StoreError::Failed(format!(
                            "session {id}: cannot read {}: {error}",
                            path.display()
                        )))
                    }
                }
                let log = FileLog::open_with(&path, self.sync)
                    .await
                    .map_err(|error| log_error(&id, &path, error))?;
                self.open_on(id, Recorded::new(log, replay), host, options)
                    .await
            }
            (Storage::Postgres(url), None) => Err(StoreError::Failed(format!(
                "PostgreSQL {}: not connected",
                redact(url)
            ))),
        }
    }

    /// Opens the agent on a recorded log and hands back the session with its history.
    async fn open_on<H: Host, L: DurableLog>(
        &self,
        session_id: String,
        log: Recorded<L>,
        host: H,
        options: Options,
    ) -> Result<OpenedSession, StoreError> {
        let history = Arc::clone(&log.history);
        let opened = Agent::open_with(options, host, log).await;
        // Stop recording: what follows reaches the server through `agent.subscribe()`.
        let history = lock(&history).take().unwrap_or_default();
        let (agent, recovery) = opened.map_err(|error| self.open_error(&session_id, error))?;
        Ok(OpenedSession {
            session_id,
            agent,
            recovery,
            history,
        })
    }
}

impl SessionStore {
    /// Closes `agent` (session `session_id`'s, opened by this store: [`Agent::close`], its log
    /// synced) and waits until its log is released: a file log's lock (released before
    /// `close` returns), or a PostgreSQL session's lease, given up at once so that another
    /// process opens the session without waiting for the lease to lapse. The wait is bounded by
    /// the lease (10 s by default): past it the lease lapsed anyway. A release that fails is
    /// one line on stderr naming the session (the lease then lapses).
    ///
    /// # Errors
    ///
    /// What [`Agent::close`] fails with ([`AgentError::FinalSync`]); the lease is released
    /// all the same.
    pub async fn close(&self, session_id: &str, agent: &Agent) -> Result<(), AgentError> {
        // Taken before the close: the entry of this agent's open (the release removes it).
        let released = lock(&self.live).get(session_id).cloned();
        let closed = agent.close().await;
        if let (Some(mut released), Some(store)) = (released, &self.pg) {
            let bound = store.lease() + Duration::from_secs(1);
            // `Err`: the release task was lost (its runtime ended): nothing more to wait for.
            let _ = tokio::time::timeout(bound, released.wait_for(|done| *done)).await;
        }
        closed
    }

    /// At most `max` records of session `session_id`'s log whose `seq` is above `after_seq`,
    /// in log order, with their `seq` (what a dispatcher that fell behind the agent's updates
    /// missed). Read from the storage, not from the agent: a file log is read through its own
    /// descriptor (the agent's lock does not stop readers; only complete lines are read, so a
    /// record being appended is left for the next call), a PostgreSQL session with one
    /// `SELECT`. Memory is bounded by `max` records (and one line).
    ///
    /// # Errors
    ///
    /// [`StoreError::UnknownSession`] for an id that is not a session id or names no stored
    /// session; [`StoreError::Failed`] when the log cannot be read or holds a corrupt record
    /// (the text names the session, and the file or the `seq`).
    pub async fn records_after(
        &self,
        session_id: &str,
        after_seq: u64,
        max: usize,
    ) -> Result<Vec<(u64, Entry)>, StoreError> {
        if !is_session_id(session_id) {
            return Err(StoreError::UnknownSession(session_id.to_owned()));
        }
        let id = session_id.to_owned();
        match (&self.storage, &self.pg) {
            (Storage::Dir(dir), _) => {
                let path = dir.join(format!("{id}.jsonl"));
                tokio::task::spawn_blocking(move || file_records_after(&id, &path, after_seq, max))
                    .await
                    .map_err(|error| StoreError::Failed(error.to_string()))?
            }
            (Storage::Postgres(_), Some(store)) => {
                pg_records_after(store, &id, after_seq, max).await
            }
            (Storage::Postgres(url), None) => Err(StoreError::Failed(format!(
                "PostgreSQL {}: not connected",
                redact(url)
            ))),
        }
    }

    /// Marks PostgreSQL session `id` open in this process, until its lease is released (or the
    /// guard dropped).
    fn claim_live(&self, id: &str) -> Result<LiveGuard, StoreError> {
        let mut live = lock(&self.live);
        if live.contains_key(id) {
            return Err(StoreError::Locked {
                session: id.to_owned(),
                detail: format!("session {id} is already open in this process"),
            });
        }
        let (done, released) = watch::channel(false);
        live.insert(id.to_owned(), released);
        Ok(LiveGuard {
            live: Arc::clone(&self.live),
            id: id.to_owned(),
            done,
        })
    }
}

/// The PostgreSQL sessions open in this process: each one's "released" signal.
type Live = Arc<Mutex<HashMap<String, watch::Receiver<bool>>>>;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A PostgreSQL session open in this process: unmarked when dropped, which signals that its
/// lease is released (the release task drops it last).
struct LiveGuard {
    live: Live,
    id: String,
    done: watch::Sender<bool>,
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        lock(&self.live).remove(&self.id);
        self.done.send_replace(true);
    }
}

/// Whether `id` is a session id this store makes: `s-` then 32 lowercase hex digits.
pub fn is_session_id(id: &str) -> bool {
    id.strip_prefix("s-").is_some_and(|hex| {
        hex.len() == 32 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// A fresh session id: `s-` then 32 lowercase hex digits (128 bits from the OS's randomness,
/// through std's randomly keyed hasher), for [`SessionStore::create_named`].
pub fn fresh_session_id() -> String {
    format!("s-{:016x}{:016x}", random_u64(), random_u64())
}

/// 64 random bits: each [`RandomState`] is keyed from the OS's randomness (per thread, then
/// varied per instance); the process id and a counter are mixed in so two draws never hash
/// the same input.
fn random_u64() -> u64 {
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(DRAWS.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    hasher.finish()
}

/// Creates the directory if missing; refuses a path that is not a directory, or one this
/// process cannot create a file in.
fn check_dir(dir: &Path) -> Result<(), StoreError> {
    let failed = |what: &str, error: &dyn std::fmt::Display| {
        StoreError::Failed(format!(
            "session directory {}: {what}: {error}",
            dir.display()
        ))
    };
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(StoreError::Failed(format!(
                "session directory {}: not a directory",
                dir.display()
            )))
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|error| failed("cannot create it", &error))?;
        }
        Err(error) => return Err(failed("cannot read it", &error)),
    }
    // Writable: create (and remove) a probe file, as a session's log would be created.
    let probe = dir.join(format!(".coxswain-acp-probe-{}", fresh_session_id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|error| failed("cannot create a file in it", &error))?;
    std::fs::remove_file(&probe).map_err(|error| failed("cannot remove a file in it", &error))?;
    Ok(())
}

/// Creates session `id`'s empty log file `path`, never an existing one.
fn create_file(id: &str, path: &Path) -> Result<(), StoreError> {
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => Err(StoreError::Failed(
            format!("session {id} already exists: {}", path.display()),
        )),
        Err(error) => Err(StoreError::Failed(format!(
            "session {id}: cannot create its log {}: {error}",
            path.display()
        ))),
    }
}

/// A file log's open error.
fn log_error(id: &str, path: &Path, error: LogError) -> StoreError {
    match error {
        LogError::Locked { .. } => StoreError::Locked {
            session: id.to_owned(),
            detail: error.to_string(),
        },
        other => failed_in(id, Some(&path.display().to_string()), &other.to_string()),
    }
}

/// A session's log, as an error names it: its file, or nothing more than the session id in
/// PostgreSQL.
fn log_place(storage: &Storage, id: &str) -> Option<String> {
    match storage {
        Storage::Dir(dir) => Some(dir.join(format!("{id}.jsonl")).display().to_string()),
        Storage::Postgres(_) => None,
    }
}

/// `session <id>: [<path>: ]<text>`, the path left out when the text already names it.
fn failed_in(id: &str, place: Option<&str>, text: &str) -> StoreError {
    match place {
        Some(place) if !text.contains(place) => {
            StoreError::Failed(format!("session {id}: {place}: {text}"))
        }
        _ => StoreError::Failed(format!("session {id}: {text}")),
    }
}

impl SessionStore {
    /// An agent's open error.
    fn open_error(&self, id: &str, error: OpenError) -> StoreError {
        match error {
            OpenError::Log(LogError::Locked { .. }) => StoreError::Locked {
                session: id.to_owned(),
                detail: error.to_string(),
            },
            OpenError::Log(LogError::Fenced { .. }) => StoreError::Fenced {
                session: id.to_owned(),
                detail: error.to_string(),
            },
            other => failed_in(
                id,
                log_place(&self.storage, id).as_deref(),
                &other.to_string(),
            ),
        }
    }
}

/// A PostgreSQL take's error: another live writer is `Locked`.
fn pg_error(id: &str, error: PgError) -> StoreError {
    match error {
        PgError::Held { .. } => StoreError::Locked {
            session: id.to_owned(),
            detail: error.to_string(),
        },
        PgError::NoSession(_) => StoreError::UnknownSession(id.to_owned()),
        other => pg_failed(id, &other),
    }
}

fn pg_failed(id: &str, error: &PgError) -> StoreError {
    StoreError::Failed(format!("session {id}: {error}"))
}

/// A PostgreSQL session's log, recorded if `replay`, released when the agent lets it go.
fn pg_recorded(store: &Store, log: PgLog, live: LiveGuard, replay: bool) -> Recorded<PgLog> {
    let release = Release {
        release: log
            .epoch()
            .map(|epoch| (store.clone(), log.session().to_owned(), epoch)),
        live: Some(live),
    };
    Recorded {
        log,
        history: Arc::new(Mutex::new(replay.then(Vec::new))),
        _lease: Some(release),
    }
}

/// The records of a session's history, with their `seq`; `None` once no longer recorded.
type History = Arc<Mutex<Option<Vec<(u64, Entry)>>>>;

/// The session's log, recording what the open reads back and appends (see the module docs).
struct Recorded<L> {
    /// Declared first: dropped (its lease renewal stopped) before `release` runs.
    log: L,
    /// `Some` while the open runs and records; taken when it returns.
    history: History,
    /// PostgreSQL: the session given up once the log is dropped.
    /// Held for its `Drop`.
    _lease: Option<Release>,
}

impl<L> Recorded<L> {
    /// A file log, recorded if `replay`.
    fn new(log: L, replay: bool) -> Self {
        Recorded {
            log,
            history: Arc::new(Mutex::new(replay.then(Vec::new))),
            _lease: None,
        }
    }

    fn with_history(&self, f: impl FnOnce(&mut Vec<(u64, Entry)>)) {
        if let Some(history) = lock(&self.history).as_mut() {
            f(history);
        }
    }
}

/// A PostgreSQL session's lease, given up (released) when dropped, so another process may take
/// the session at once rather than after the lease; then the session is unmarked open in this
/// process ([`LiveGuard`]), which is what [`SessionStore::close`] waits for. Best effort: the
/// release runs as a task on the current runtime, lost if the runtime ends first (the lease
/// then lapses).
struct Release {
    release: Option<(Store, String, i64)>,
    live: Option<LiveGuard>,
}

impl Drop for Release {
    fn drop(&mut self) {
        let live = self.live.take();
        let Some((store, session, epoch)) = self.release.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let bound = store.lease();
            match tokio::time::timeout(bound, store.release(&session, epoch)).await {
                Ok(Ok(_)) => {}
                Ok(Err(error)) => eprintln!(
                    "coxswain-acp: session {session}: releasing its PostgreSQL lease failed \
                     (it lapses within {bound:?}): {error}"
                ),
                Err(_) => eprintln!(
                    "coxswain-acp: session {session}: releasing its PostgreSQL lease took \
                     longer than {bound:?} (it has lapsed)"
                ),
            }
            drop(live);
        });
    }
}

impl<L: DurableLog> DurableLog for Recorded<L> {
    async fn read_back(
        &mut self,
        visit: &mut (dyn FnMut(Record) -> ControlFlow<()> + Send),
    ) -> Result<ReadBack, LogError> {
        let mut recording = lock(&self.history).is_some();
        let mut read = Vec::new();
        let result = self
            .log
            .read_back(&mut |record: Record| {
                if recording {
                    match entry_of(&record) {
                        // Readers ignore `seq` (S46); a record without one is numbered by its line.
                        Some(entry) => read.push((record.seq.unwrap_or(record.line as u64), entry)),
                        // Not a record the restore accepts: it fails the open anyway.
                        None => recording = false,
                    }
                }
                visit(record)
            })
            .await;
        self.with_history(|history| *history = read);
        result
    }

    async fn repair_tail(&mut self) -> Result<(), LogError> {
        self.log.repair_tail().await
    }

    async fn append(&mut self, batch: &[Entry]) -> Result<u64, LogError> {
        let first = self.log.append(batch).await?;
        self.with_history(|history| {
            history.extend((first..).zip(batch.iter().cloned()));
        });
        Ok(first)
    }

    async fn sync(&mut self) -> Result<(), LogError> {
        self.log.sync().await
    }
}

/// A record read back (`{seq?, type, data}`) as the entry it was appended as.
fn entry_of(record: &Record) -> Option<Entry> {
    let kind = record.event.get("type")?.as_str()?;
    let data = record.event.get("data").cloned().unwrap_or_default();
    if Event::TYPES.contains(&kind) {
        let event = serde_json::json!({"type": kind, "data": data});
        serde_json::from_value(event).ok().map(Entry::Machine)
    } else {
        HostEvent::new(kind, data).ok().map(Entry::Host)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use coxswain_tokio::coxswain_core::{Message, PreStepAnswer, StepAnswer};
    use coxswain_tokio::{Hooks, PreStepContext, StepContext};
    use serde_json::{json, Value};

    use super::*;

    /// Answers every step `completed`, writing nothing of its own.
    struct Quiet;

    impl Host for Quiet {
        fn hooks(&self) -> Hooks {
            Hooks::NONE
        }

        async fn step(&self, _cx: StepContext) -> StepAnswer {
            StepAnswer::Completed
        }
    }

    /// Its pre-step never answers (until cancelled): a turn's claim stays unseen.
    struct PreStepHangs;

    impl Host for PreStepHangs {
        async fn pre_step(&self, cx: PreStepContext) -> PreStepAnswer {
            cx.cancel.cancelled().await;
            PreStepAnswer::Reject
        }

        async fn step(&self, _cx: StepContext) -> StepAnswer {
            StepAnswer::Completed
        }
    }

    async fn dir_store(dir: &Path) -> SessionStore {
        SessionStore::connect(Storage::Dir(dir.to_owned()))
            .await
            .unwrap()
    }

    fn failed(error: StoreError) -> String {
        match error {
            StoreError::Failed(text) => text,
            other => panic!("not Failed: {other:?}"),
        }
    }

    /// The history as `seq type data` lines.
    fn lines(history: &[(u64, Entry)]) -> Vec<String> {
        history
            .iter()
            .map(|(seq, entry)| {
                let value = serde_json::to_value(entry).unwrap();
                format!(
                    "{seq} {} {}",
                    value["type"].as_str().unwrap(),
                    value["data"]
                )
            })
            .collect()
    }

    #[test]
    fn session_ids_are_s_then_32_lowercase_hex_digits() {
        let id = fresh_session_id();
        assert!(is_session_id(&id), "{id}");
        assert_eq!(id.len(), 34);
        assert_ne!(fresh_session_id(), id);
        for bad in [
            "",
            "s-",
            "../x",
            "s-0123456789abcdef0123456789abcde",
            "s-0123456789abcdef0123456789abcdef0",
            "s-0123456789ABCDEF0123456789abcdef",
            "S-0123456789abcdef0123456789abcdef",
            "s-0123456789abcdef0123456789abcdeg",
            "s-/123456789abcdef0123456789abcdef",
            "x-0123456789abcdef0123456789abcdef",
        ] {
            assert!(!is_session_id(bad), "{bad}");
        }
        assert!(is_session_id("s-0123456789abcdef0123456789abcdef"));
        // 1000 draws, no repeat (not a counter either: the digits differ everywhere).
        let ids: std::collections::HashSet<String> =
            (0..1000).map(|_| fresh_session_id()).collect();
        assert_eq!(ids.len(), 1000);
    }

    #[tokio::test]
    async fn connect_creates_a_missing_directory_and_refuses_a_file_or_an_unwritable_one() {
        let temp = tempfile::tempdir().unwrap();
        let nested = temp.path().join("a/b/sessions");
        let store = dir_store(&nested).await;
        assert!(nested.is_dir());
        assert_eq!(store.storage(), &Storage::Dir(nested.clone()));
        assert_eq!(store.sync(), SyncPolicy::EveryAppend);
        assert_eq!(
            store.with_sync(SyncPolicy::PerTurn).sync(),
            SyncPolicy::PerTurn
        );
        // The probe file is gone.
        assert_eq!(std::fs::read_dir(&nested).unwrap().count(), 0);

        let file = temp.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let error = SessionStore::connect(Storage::Dir(file.clone()))
            .await
            .unwrap_err();
        assert_eq!(error.kind(), "failed");
        assert_eq!(
            failed(error),
            format!("session directory {}: not a directory", file.display())
        );
        let under = file.join("sub");
        let text = failed(
            SessionStore::connect(Storage::Dir(under.clone()))
                .await
                .unwrap_err(),
        );
        assert!(
            text.starts_with(&format!("session directory {}: cannot ", under.display())),
            "{text}"
        );
        // Not writable even by root.
        let text = failed(
            SessionStore::connect(Storage::Dir("/proc".into()))
                .await
                .unwrap_err(),
        );
        assert!(
            text.starts_with("session directory /proc: cannot create a file in it: "),
            "{text}"
        );
    }

    #[tokio::test]
    async fn create_makes_a_fresh_log_file_and_open_restores_it_with_its_history() {
        let temp = tempfile::tempdir().unwrap();
        let store = dir_store(temp.path()).await;
        let first = store.create(Quiet, Options::default()).await.unwrap();
        let second = store.create(Quiet, Options::default()).await.unwrap();
        assert!(is_session_id(&first.session_id));
        assert_ne!(first.session_id, second.session_id);
        assert_eq!(first.history, vec![]);
        assert_eq!(first.recovery.records, 0);
        let path = temp.path().join(format!("{}.jsonl", first.session_id));
        assert!(path.is_file());
        first
            .agent
            .followup(Message::user("m1", "hi"))
            .await
            .unwrap();
        first.agent.when_idle().await.unwrap();
        first.agent.close().await.unwrap();
        second.agent.close().await.unwrap();

        let reopened = store
            .open(&first.session_id, Quiet, Options::default(), true)
            .await
            .unwrap();
        assert_eq!(reopened.session_id, first.session_id);
        assert_eq!(reopened.recovery.records, 7);
        assert_eq!(lines(&reopened.history), ONE_TURN);
        // What the agent appends after the open is not history.
        reopened
            .agent
            .followup(Message::user("m2", "again"))
            .await
            .unwrap();
        reopened.agent.when_idle().await.unwrap();
        reopened.agent.close().await.unwrap();
        assert_eq!(lines(&reopened.history), ONE_TURN);
    }

    /// The 7 records of one completed turn that entered `m1` ("hi").
    const ONE_TURN: [&str; 7] = [
        r#"1 agent/inbox/spliced {"target":"next-turn","start":0,"inserted":[{"id":"m1","source":{"kind":"user"},"content":"hi"}],"wakeup":true}"#,
        r#"2 turn/start {"turn":1}"#,
        r#"3 agent/inbox/spliced {"target":"next-turn","start":0,"removedCount":1,"inserted":[]}"#,
        r#"4 step/start {"turn":1,"step":1}"#,
        r#"5 user/message {"id":"m1","source":{"kind":"user"},"content":"hi"}"#,
        r#"6 step/end {"turn":1,"step":1}"#,
        r#"7 turn/end {"turn":1,"reason":{"kind":"completed"}}"#,
    ];

    /// A new session of `store` that ran one turn entering `m1` (its agent still open).
    async fn one_turn(store: &SessionStore) -> OpenedSession {
        let made = store.create(Quiet, Options::default()).await.unwrap();
        made.agent
            .followup(Message::user("m1", "hi"))
            .await
            .unwrap();
        made.agent.when_idle().await.unwrap();
        made
    }

    #[tokio::test]
    async fn open_collects_the_history_only_when_asked_to_replay_it() {
        let temp = tempfile::tempdir().unwrap();
        let store = dir_store(temp.path()).await;
        let made = one_turn(&store).await;
        let id = made.session_id.clone();
        store.close(&id, &made.agent).await.unwrap();
        let quiet = store
            .open(&id, Quiet, Options::default(), false)
            .await
            .unwrap();
        assert_eq!(quiet.recovery.records, 7);
        assert_eq!(quiet.history, vec![]);
        assert_eq!(quiet.agent.last_turn(), 1);
        store.close(&id, &quiet.agent).await.unwrap();
        let replayed = store
            .open(&id, Quiet, Options::default(), true)
            .await
            .unwrap();
        assert_eq!(lines(&replayed.history), ONE_TURN);
        store.close(&id, &replayed.agent).await.unwrap();
    }

    #[tokio::test]
    async fn records_after_reads_a_bounded_slice_of_a_held_file_log() {
        let temp = tempfile::tempdir().unwrap();
        let store = dir_store(temp.path()).await;
        let made = one_turn(&store).await;
        let id = made.session_id.clone();
        // The agent holds the file's lock: reading is not stopped by it.
        assert_eq!(
            lines(&store.records_after(&id, 0, 100).await.unwrap()),
            ONE_TURN
        );
        assert_eq!(
            lines(&store.records_after(&id, 4, 2).await.unwrap()),
            ONE_TURN[4..6]
        );
        assert_eq!(
            lines(&store.records_after(&id, 6, 2).await.unwrap()),
            ONE_TURN[6..]
        );
        assert_eq!(store.records_after(&id, 7, 10).await.unwrap(), vec![]);
        assert_eq!(store.records_after(&id, 0, 0).await.unwrap(), vec![]);
        // What the agent appends later is read by the next call.
        made.agent
            .followup(Message::user("m2", "again"))
            .await
            .unwrap();
        made.agent.when_idle().await.unwrap();
        let later = store.records_after(&id, 7, 100).await.unwrap();
        assert_eq!(later.first().map(|(seq, _)| *seq), Some(8));
        assert_eq!(later.len(), 7);
        store.close(&id, &made.agent).await.unwrap();

        // A record still being written (no `\n` yet) is left for the next call.
        let path = temp.path().join(format!("{id}.jsonl"));
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut file, br#"{"seq":15,"type":"turn/start","da"#).unwrap();
        assert_eq!(store.records_after(&id, 14, 10).await.unwrap(), vec![]);

        for unknown in [fresh_session_id(), "../x".to_owned()] {
            let error = store.records_after(&unknown, 0, 10).await.unwrap_err();
            assert_eq!(error.to_string(), format!("unknown session {unknown}"));
        }
        // A corrupt record fails naming the session, the file and the line.
        let bad = fresh_session_id();
        let bad_path = temp.path().join(format!("{bad}.jsonl"));
        std::fs::write(
            &bad_path,
            "{\"seq\":1,\"type\":\"turn/start\",\"data\":{\"turn\":1}}\nnot json\n",
        )
        .unwrap();
        assert_eq!(
            failed(store.records_after(&bad, 0, 10).await.unwrap_err()),
            format!(
                "session {bad}: {}: corrupt log: line 2: not JSON: expected ident at line 1 column 2",
                bad_path.display()
            )
        );
        // Before the corrupt line, what is asked for is read.
        assert_eq!(
            lines(&store.records_after(&bad, 0, 1).await.unwrap()),
            [r#"1 turn/start {"turn":1}"#]
        );
    }

    #[tokio::test]
    async fn s59_history_holds_the_closers_and_the_redelivery_splices_the_open_appended() {
        let temp = tempfile::tempdir().unwrap();
        let store = dir_store(temp.path()).await;
        let crashed = store
            .create(PreStepHangs, Options::default())
            .await
            .unwrap();
        crashed
            .agent
            .followup(Message::user("m1", "hi"))
            .await
            .unwrap();
        // The pre-step is outstanding: the log ends inside turn 1. Copy it as a crash leaves it.
        let path = temp.path().join(format!("{}.jsonl", crashed.session_id));
        let bytes = std::fs::read(&path).unwrap();
        let id = fresh_session_id();
        std::fs::write(temp.path().join(format!("{id}.jsonl")), &bytes).unwrap();
        crashed.agent.close().await.unwrap();

        let mut options = Options::default();
        options.redelivery = 1;
        let opened = store.open(&id, Quiet, options, true).await.unwrap();
        assert_eq!(opened.recovery.interrupted_turn, Some(1));
        assert_eq!(opened.recovery.redelivered, 1);
        assert_eq!(
            lines(&opened.history),
            [
                r#"1 agent/inbox/spliced {"target":"next-turn","start":0,"inserted":[{"id":"m1","source":{"kind":"user"},"content":"hi"}],"wakeup":true}"#,
                r#"2 turn/start {"turn":1}"#,
                r#"3 agent/inbox/spliced {"target":"next-turn","start":0,"removedCount":1,"inserted":[]}"#,
                r#"4 turn/end {"turn":1,"reason":{"kind":"interrupted"}}"#,
                r#"5 agent/inbox/spliced {"target":"next-turn","start":0,"inserted":[{"id":"m1","content":"hi","source":{"kind":"user"}}],"wakeup":true,"redelivery":1}"#,
            ]
        );
        // The history is exactly the file.
        opened.agent.close().await.unwrap();
        let file: Vec<Value> = std::fs::read_to_string(temp.path().join(format!("{id}.jsonl")))
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        let history: Vec<Value> = opened
            .history
            .iter()
            .map(|(seq, entry)| {
                let mut value = serde_json::to_value(entry).unwrap();
                value["seq"] = json!(seq);
                value
            })
            .collect();
        assert_eq!(history, file);
    }

    #[tokio::test]
    async fn open_refuses_unknown_and_malformed_ids_without_touching_a_path() {
        let temp = tempfile::tempdir().unwrap();
        let store = dir_store(&temp.path().join("sessions")).await;
        std::fs::write(temp.path().join("x.jsonl"), "").unwrap();
        for id in [
            "../x",
            "s-0123456789abcdef0123456789abcdef",
            "",
            "s-../../x",
        ] {
            let error = store
                .open(id, Quiet, Options::default(), true)
                .await
                .unwrap_err();
            assert_eq!(error.kind(), "unknown-session");
            assert_eq!(error.to_string(), format!("unknown session {id}"));
        }
        assert_eq!(
            std::fs::read_dir(temp.path().join("sessions"))
                .unwrap()
                .count(),
            0
        );
        assert_eq!(std::fs::read(temp.path().join("x.jsonl")).unwrap(), b"");
    }

    #[tokio::test]
    async fn a_session_another_writer_holds_is_locked_naming_the_file() {
        let temp = tempfile::tempdir().unwrap();
        let store = dir_store(temp.path()).await;
        let held = store.create(Quiet, Options::default()).await.unwrap();
        let error = store
            .open(&held.session_id, Quiet, Options::default(), true)
            .await
            .unwrap_err();
        assert_eq!(error.kind(), "locked");
        let path = temp.path().join(format!("{}.jsonl", held.session_id));
        let StoreError::Locked { session, detail } = &error else {
            panic!("{error:?}")
        };
        assert_eq!(session, &held.session_id);
        assert!(detail.contains(&path.display().to_string()), "{detail}");
        assert_eq!(
            error.to_string(),
            format!(
                "session {} is locked by another process: {detail}",
                held.session_id
            )
        );
        held.agent.close().await.unwrap();
        // Released: it opens now.
        let opened = store
            .open(&held.session_id, Quiet, Options::default(), true)
            .await
            .unwrap();
        opened.agent.close().await.unwrap();
    }

    #[tokio::test]
    async fn create_named_refuses_an_existing_or_invalid_id_and_bad_options_create_nothing() {
        let temp = tempfile::tempdir().unwrap();
        let store = dir_store(temp.path()).await;
        let id = fresh_session_id();
        let made = store
            .create_named(&id, Quiet, Options::default())
            .await
            .unwrap();
        assert_eq!(made.session_id, id);
        made.agent
            .followup(Message::user("m1", "hi"))
            .await
            .unwrap();
        made.agent.when_idle().await.unwrap();
        made.agent.close().await.unwrap();
        let path = temp.path().join(format!("{id}.jsonl"));
        let before = std::fs::read(&path).unwrap();
        let text = failed(
            store
                .create_named(&id, Quiet, Options::default())
                .await
                .unwrap_err(),
        );
        assert_eq!(
            text,
            format!("session {id} already exists: {}", path.display())
        );
        assert_eq!(std::fs::read(&path).unwrap(), before);
        assert_eq!(
            failed(
                store
                    .create_named("../x", Quiet, Options::default())
                    .await
                    .unwrap_err()
            ),
            "invalid session id `../x`: a session id is `s-` then 32 lowercase hex digits"
        );
        let mut bad = Options::default();
        bad.redelivery = 1001;
        let text = failed(store.create(Quiet, bad.clone()).await.unwrap_err());
        assert!(text.starts_with("invalid options: "), "{text}");
        assert!(text.contains("1001"), "{text}");
        assert_eq!(std::fs::read_dir(temp.path()).unwrap().count(), 1);
        let text = failed(store.open(&id, Quiet, bad, true).await.unwrap_err());
        assert!(text.starts_with("invalid options: "), "{text}");
    }

    #[tokio::test]
    async fn a_corrupt_log_fails_naming_the_session_and_is_left_as_it_was() {
        let temp = tempfile::tempdir().unwrap();
        let store = dir_store(temp.path()).await;
        let id = fresh_session_id();
        let path = temp.path().join(format!("{id}.jsonl"));
        let content = "{\"seq\":1,\"type\":\"turn/start\",\"data\":{\"turn\":1}}\nnot json\n";
        std::fs::write(&path, content).unwrap();
        let error = store
            .open(&id, Quiet, Options::default(), true)
            .await
            .unwrap_err();
        assert_eq!(error.kind(), "failed");
        assert_eq!(
            error.to_string(),
            format!(
                "session {id}: {}: corrupt log: line 2: not JSON: expected ident at line 1 column 2",
                path.display()
            )
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), content);
    }

    /// PostgreSQL: `close` has released the lease when it returns (another store opens the
    /// session at once, no retry); `records_after` reads the records table; a session row
    /// that holds no record is what a failed `create_named` discards.
    #[test]
    fn postgres_close_releases_the_lease_before_returning_and_records_after_reads_a_slice() {
        let cluster = match coxswain_postgres_tests::TempCluster::for_tests() {
            Ok(Some(cluster)) => cluster,
            Ok(None) => return,
            Err(error) => panic!("the PostgreSQL test cluster did not start: {error}"),
        };
        let url = cluster.url();
        // A session closed on a runtime that ends right after (as `serve`'s does once the
        // client hung up): the release happened inside `close`, not in a task the runtime's
        // end would cancel.
        let short = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let closed = short.block_on(async {
            let store = SessionStore::connect(Storage::Postgres(url.clone()))
                .await
                .unwrap();
            let made = one_turn(&store).await;
            store.close(&made.session_id, &made.agent).await.unwrap();
            made.session_id.clone()
        });
        drop(short);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let other = SessionStore::connect(Storage::Postgres(url.clone()))
                .await
                .unwrap();
            let reopened = other
                .open(&closed, Quiet, Options::default(), false)
                .await
                .unwrap();
            other.close(&closed, &reopened.agent).await.unwrap();

            let first = SessionStore::connect(Storage::Postgres(url.clone()))
                .await
                .unwrap();
            let second = SessionStore::connect(Storage::Postgres(url.clone()))
                .await
                .unwrap();
            let made = one_turn(&first).await;
            let id = made.session_id.clone();
            assert_eq!(
                lines(&first.records_after(&id, 0, 100).await.unwrap()),
                ONE_TURN
            );
            assert_eq!(
                lines(&first.records_after(&id, 4, 2).await.unwrap()),
                ONE_TURN[4..6]
            );
            assert_eq!(first.records_after(&id, 7, 10).await.unwrap(), vec![]);
            assert_eq!(first.records_after(&id, 0, 0).await.unwrap(), vec![]);
            let unknown = fresh_session_id();
            assert_eq!(
                first
                    .records_after(&unknown, 0, 10)
                    .await
                    .unwrap_err()
                    .to_string(),
                format!("unknown session {unknown}")
            );

            // Closed: released before `close` returns, so the other store takes it at once,
            // and this store may open it again right after the other closes it.
            first.close(&id, &made.agent).await.unwrap();
            let taken = second
                .open(&id, Quiet, Options::default(), false)
                .await
                .unwrap();
            assert_eq!(taken.recovery.records, 7);
            assert_eq!(taken.history, vec![]);
            // Read by the other store while this one holds it.
            assert_eq!(
                lines(&first.records_after(&id, 6, 10).await.unwrap()),
                ONE_TURN[6..]
            );
            second.close(&id, &taken.agent).await.unwrap();
            let again = first
                .open(&id, Quiet, Options::default(), true)
                .await
                .unwrap();
            assert_eq!(lines(&again.history), ONE_TURN);
            first.close(&id, &again.agent).await.unwrap();

            // A failed create's cleanup: an empty session row goes, one with records stays.
            let pg = first.pg.as_ref().unwrap();
            let empty = fresh_session_id();
            drop(pg.open(&empty).await.unwrap());
            assert!(discard_empty_session(pg, &empty).await.unwrap());
            assert!(matches!(
                pg.open_read_only(&empty).await,
                Err(PgError::NoSession(_))
            ));
            assert!(!discard_empty_session(pg, &id).await.unwrap());
            assert_eq!(first.records_after(&id, 0, 100).await.unwrap().len(), 7);
        });
    }

    /// The PostgreSQL storage, against a throwaway cluster (skipped, with the harness's loud
    /// `SKIPPED` line, without PostgreSQL's server binaries; failed with `CI=true`).
    #[test]
    fn postgres_sessions_create_open_lock_and_replay_their_history() {
        let cluster = match coxswain_postgres_tests::TempCluster::for_tests() {
            Ok(Some(cluster)) => cluster,
            Ok(None) => return,
            Err(error) => panic!("the PostgreSQL test cluster did not start: {error}"),
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let url = cluster.url();
            let store = SessionStore::connect(Storage::Postgres(url.clone()))
                .await
                .unwrap();
            assert_eq!(store.storage(), &Storage::Postgres(url.clone()));
            let made = store.create(Quiet, Options::default()).await.unwrap();
            assert!(is_session_id(&made.session_id));
            assert_eq!(made.history, vec![]);
            let id = made.session_id.clone();
            made.agent.followup(Message::user("m1", "hi")).await.unwrap();
            made.agent.when_idle().await.unwrap();

            // The same process again: locked, not taken over from itself.
            let error = store.open(&id, Quiet, Options::default(), true).await.unwrap_err();
            assert_eq!(
                error.to_string(),
                format!("session {id} is locked by another process: session {id} is already open in this process")
            );
            // Another process (another owner) while the session is held: locked.
            let other = SessionStore::connect(Storage::Postgres(url.clone()))
                .await
                .unwrap();
            let error = other.open(&id, Quiet, Options::default(), true).await.unwrap_err();
            assert_eq!(error.kind(), "locked", "{error}");
            let prefix = format!("session {id} is locked by another process: session {id} is held by ");
            assert!(error.to_string().starts_with(&prefix), "{error}");

            // Closed: the lease is given up, so the other process takes it (within the
            // release's round trip), restoring the history.
            made.agent.close().await.unwrap();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            let reopened = loop {
                match other.open(&id, Quiet, Options::default(), true).await {
                    Ok(opened) => break opened,
                    Err(StoreError::Locked { .. }) if std::time::Instant::now() < deadline => {
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    }
                    Err(error) => panic!("{error}"),
                }
            };
            assert_eq!(reopened.recovery.records, 7);
            assert_eq!(
                lines(&reopened.history),
                ONE_TURN
            );
            reopened.agent.close().await.unwrap();

            // Unknown and malformed ids.
            for unknown in [fresh_session_id(), "../x".to_owned()] {
                let error = store.open(&unknown, Quiet, Options::default(), true).await.unwrap_err();
                assert_eq!(error.to_string(), format!("unknown session {unknown}"));
            }
            // create_named refuses a session that exists.
            assert_eq!(
                failed(store.create_named(&id, Quiet, Options::default()).await.unwrap_err()),
                format!("session {id} already exists")
            );

            // A refused connection names the URL, its password hidden.
            let wrong = cluster.url_for(coxswain_postgres_tests::PASSWORD_ROLE, Some("wrong-pw"));
            let text = failed(
                SessionStore::connect(Storage::Postgres(wrong))
                    .await
                    .unwrap_err(),
            );
            assert!(text.starts_with("PostgreSQL postgres://coxswain_pw:***@"), "{text}");
            assert!(!text.contains("wrong-pw"), "{text}");
        });
    }
}
