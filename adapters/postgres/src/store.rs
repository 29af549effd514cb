//! [`Store`]: a pool of connections to one database, and the session table's operations —
//! take a session under a new epoch, claim expired ones, renew and release leases, list.
//!
//! A session is held one of two ways (schema version 2): by a writer of its own, which renews
//! the session's `lease_until` ([`Store::open`], [`Store::claim_expired`]: the CLI, tests, a
//! single session), or by a worker, whose one row of `coxswain.workers` is renewed for all of
//! its sessions at once (`sessions.worker`; [`Worker`](crate::Worker)). Either way it is free
//! to take once nobody holds it ([`free`]), and every take bumps the epoch that fences the
//! previous writer.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use coxswain_core::{Fate, MessageId};
use coxswain_session::{ResumeOptions, ResumePlan, Resuming};
use coxswain_tokio::DurableLog;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use crate::committer::Committer;
use crate::log::{Mode, PgLog};
use crate::stats::{Counters, Sent};
use crate::{schema, PgError, StoreStats};

/// How a [`Store`] connects and leases.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct StoreOptions {
    /// Who takes sessions: written to `sessions.owner`. Must be unique per process (a process
    /// that opens a session it already owns takes it over, fencing its own older writer).
    pub owner: String,
    /// How long a lease lasts past its last renewal, by the database's clock.
    pub lease: Duration,
    /// How many connections the pool keeps at most.
    pub pool_size: usize,
    /// How long a connection attempt may take.
    pub connect_timeout: Duration,
    /// Only check the schema's version, never create or migrate it (for read-only tools).
    pub read_only: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            owner: default_owner(),
            lease: Duration::from_secs(10),
            pool_size: 16,
            connect_timeout: Duration::from_secs(5),
            read_only: false,
        }
    }
}

impl StoreOptions {
    /// The defaults, with `owner`.
    pub fn owned_by(owner: impl Into<String>) -> Self {
        StoreOptions {
            owner: owner.into(),
            ..StoreOptions::default()
        }
    }
}

/// `host:pid:nanos`: unique per process start.
fn default_owner() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_else(|_| "host".to_owned());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos());
    format!("{host}:{}:{nanos:08x}", std::process::id())
}

/// One row of `coxswain.sessions`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionInfo {
    /// The session id.
    pub session: String,
    /// Its epoch: bumped by every takeover.
    pub epoch: i64,
    /// Its owner, if any (`None` once released).
    pub owner: Option<String>,
    /// When the owner's lease ends (the database's clock, as text).
    pub lease_until: Option<String>,
    /// Whether the lease is live now (by the database's clock).
    pub live: bool,
    /// The worker whose lease covers the session (`None`: its own lease, or none).
    pub worker: Option<String>,
    /// How many records the session holds.
    pub length: i64,
}

/// A connection pool to one database whose schema is migrated to [`schema::VERSION`].
#[derive(Clone, Debug)]
pub struct Store {
    pub(crate) pool: Pool,
    options: StoreOptions,
    role: String,
    counters: Arc<Counters>,
}

impl Store {
    /// Connects to `url` (`postgres://…` or `host=… user=…`), checks that the server answers and
    /// accepts the credentials, and migrates the schema (refusing a newer one; with
    /// [`StoreOptions::read_only`] it only checks the version).
    pub async fn connect(url: &str, options: StoreOptions) -> Result<Store, PgError> {
        let mut config = tokio_postgres::Config::from_str(url)
            .map_err(|error| PgError::Config(crate::error::chain(&error)))?;
        config.connect_timeout(options.connect_timeout);
        if config.get_application_name().is_none() {
            config.application_name("coxswain");
        }
        let role = config.get_user().unwrap_or("(default role)").to_owned();
        // The first connection, made here so its error is the typed one.
        let (mut client, connection) = config
            .connect(NoTls)
            .await
            .map_err(|error| PgError::connect(&error, &role))?;
        let task = tokio::spawn(connection);
        let migrated = if options.read_only {
            schema::check(&client).await
        } else {
            schema::migrate(&mut client).await.map(drop)
        };
        drop(client);
        let _ = task.await;
        migrated?;
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .build()
            .map_err(|error| PgError::Db(error.to_string()))?;
        Ok(Store {
            pool,
            options,
            role,
            counters: Arc::default(),
        })
    }

    /// This store's owner id.
    pub fn owner(&self) -> &str {
        &self.options.owner
    }

    /// The lease length.
    pub fn lease(&self) -> Duration {
        self.options.lease
    }

    /// What this store (its logs, worker and committer) sent since it connected.
    pub fn stats(&self) -> StoreStats {
        self.counters.get()
    }

    /// Counts one statement about to be sent.
    pub(crate) fn sent(&self, sent: Sent) {
        self.counters.sent(sent);
    }

    /// A pooled connection, for a tool's own queries beside the log (e.g. a request table in
    /// the same database).
    pub async fn client_for_tools(&self) -> Result<deadpool_postgres::Object, PgError> {
        self.client().await
    }

    pub(crate) async fn client(&self) -> Result<deadpool_postgres::Object, PgError> {
        self.pool.get().await.map_err(|error| match error {
            deadpool_postgres::PoolError::Backend(error) => PgError::connect(&error, &self.role),
            other => PgError::Unreachable(other.to_string()),
        })
    }

    /// Takes `session` for writing under a new epoch, creating it if it does not exist. Fails
    /// with [`PgError::Held`] while another owner's lease is live. Read the log back (open an
    /// agent on it) before appending: [`Agent::open`](coxswain_tokio::Agent::open) does.
    pub async fn open(&self, session: &str) -> Result<PgLog, PgError> {
        check_session(session)?;
        let client = self.client().await?;
        self.sent(Sent::Other);
        let statement = client
            .prepare_cached(&format!(
                "INSERT INTO coxswain.sessions AS s (session, epoch, owner, lease_until, length)
                 VALUES ($1, 1, $2, now() + make_interval(secs => $3), 0)
                 ON CONFLICT (session) DO UPDATE
                 SET epoch = s.epoch + 1, owner = $2, worker = NULL,
                     lease_until = now() + make_interval(secs => $3)
                 WHERE {} OR s.owner = $2
                 RETURNING epoch",
                free("s")
            ))
            .await?;
        let rows = client
            .query(&statement, &[&session, &self.owner(), &self.lease_secs()])
            .await?;
        match rows.first() {
            Some(row) => Ok(PgLog::new(self.clone(), session, Mode::Writer(row.get(0)))),
            None => Err(self.held(session).await),
        }
    }

    /// Opens `session` read-only: it reads back, and refuses to append. Fails with
    /// [`PgError::NoSession`] if the session does not exist.
    pub async fn open_read_only(&self, session: &str) -> Result<PgLog, PgError> {
        let client = self.client().await?;
        self.sent(Sent::Other);
        let row = client
            .query_opt(
                "SELECT 1 FROM coxswain.sessions WHERE session = $1",
                &[&session],
            )
            .await?;
        match row {
            Some(_) => Ok(PgLog::new(self.clone(), session, Mode::ReadOnly)),
            None => Err(PgError::NoSession(session.to_owned())),
        }
    }

    /// Restores `session` from its stored records **read-only**, as a takeover's resume would
    /// (S46–S48, S53; a log ending inside a turn is planned closed `interrupted`, S50, with
    /// `options.redelivery`'s redelivery splices, S59), without taking the session, bumping its
    /// epoch or writing anything: the plan's closers are only planned. The records are read in
    /// one snapshot, streamed (one page of rows at a time) into the plan.
    ///
    /// `options.config` is the restored machine's: pass the serving agents' delivery memory
    /// (S51) to answer as they would, or an unbounded one to answer for every id the log
    /// records.
    ///
    /// # Errors
    ///
    /// [`PgError::Redelivery`] for an allowance above
    /// [`MAX_REDELIVERY`](coxswain_session::MAX_REDELIVERY) (before anything is read);
    /// [`PgError::NoSession`]; [`PgError::Log`] when reading fails or a row is not a record;
    /// [`PgError::Restore`] when the records do not restore.
    pub async fn restore_read_only(
        &self,
        session: &str,
        options: ResumeOptions,
    ) -> Result<ResumePlan, PgError> {
        let options = options.try_with_redelivery(options.redelivery)?;
        let mut log = self.open_read_only(session).await?;
        let mut resuming = Resuming::with_options(options);
        log.read_back(&mut |record| resuming.offer(&record)).await?;
        resuming.finish_read().map_err(|error| PgError::Restore {
            session: session.to_owned(),
            error,
        })
    }

    /// What became of message `id` in `session` (S58), answered from the stored records
    /// restored read-only ([`restore_read_only`](Store::restore_read_only)): nothing is taken
    /// or written, whoever holds the session. Once the session's agent is idle the answer is
    /// the live agent's for every id (I15) when `options.config` has its delivery memory;
    /// while a turn is open it is what a takeover would leave now (that turn's claims
    /// `interrupted`, or pending again with a redelivery allowance, S59).
    ///
    /// # Errors
    ///
    /// As [`restore_read_only`](Store::restore_read_only).
    pub async fn fate(
        &self,
        session: &str,
        id: &MessageId,
        options: ResumeOptions,
    ) -> Result<Fate, PgError> {
        let plan = self.restore_read_only(session, options).await?;
        Ok(plan.machine.fate(id))
    }

    /// Registers `session` without an owner (epoch 0), so that a worker's
    /// [`claim_expired`](Store::claim_expired) picks it up; an existing session is left alone.
    pub async fn register(&self, session: &str) -> Result<(), PgError> {
        check_session(session)?;
        let client = self.client().await?;
        self.sent(Sent::Other);
        client
            .execute(
                "INSERT INTO coxswain.sessions (session, epoch, owner, lease_until, length)
                 VALUES ($1, 0, NULL, NULL, 0) ON CONFLICT (session) DO NOTHING",
                &[&session],
            )
            .await?;
        Ok(())
    }

    /// Takes up to `max` sessions that nobody holds (no owner, or the lease that held it expired
    /// by the database's clock: its own or its worker's), each under a new epoch and a lease of
    /// its own that its [`PgLog`] renews. Sessions locked by an append in flight are skipped.
    pub async fn claim_expired(&self, max: usize) -> Result<Vec<PgLog>, PgError> {
        let claimed = self.claim(max, "", Holder::Own).await?;
        Ok(claimed
            .into_iter()
            .map(|(session, epoch)| PgLog::new(self.clone(), &session, Mode::Writer(epoch)))
            .collect())
    }

    /// Renews the lease of `session` at `epoch`; `false` when the epoch is no longer the
    /// session's (fenced).
    pub async fn renew(&self, session: &str, epoch: i64) -> Result<bool, PgError> {
        let client = self.client().await?;
        self.sent(Sent::Renewal);
        let statement = client
            .prepare_cached(
                "UPDATE coxswain.sessions SET lease_until = now() + make_interval(secs => $3)
                 WHERE session = $1 AND epoch = $2",
            )
            .await?;
        let rows = client
            .execute(&statement, &[&session, &epoch, &self.lease_secs()])
            .await?;
        Ok(rows == 1)
    }

    /// Gives `session` up (no owner, no lease) if `epoch` still holds it; the epoch stays, so
    /// the next owner's is newer. `false` when it was no longer held at `epoch`.
    pub async fn release(&self, session: &str, epoch: i64) -> Result<bool, PgError> {
        let client = self.client().await?;
        self.sent(Sent::Other);
        let rows = client
            .execute(
                "UPDATE coxswain.sessions SET owner = NULL, worker = NULL, lease_until = NULL
                 WHERE session = $1 AND epoch = $2",
                &[&session, &epoch],
            )
            .await?;
        Ok(rows == 1)
    }

    /// Takes up to `max` free sessions ([`claim_expired`](Store::claim_expired)'s) for the
    /// worker this store's owner names, in one statement that also starts or renews the
    /// worker's lease: each session gets a new epoch, `worker` = the owner, and no lease of its
    /// own. The [`Worker`](crate::Worker) renews the one lease ([`renew_worker`](Store::renew_worker)).
    /// Only sessions whose id starts with `prefix` are taken (`""`: any).
    pub(crate) async fn claim_for_worker(
        &self,
        max: usize,
        prefix: &str,
        committer: &Committer,
    ) -> Result<Vec<PgLog>, PgError> {
        let claimed = self.claim(max, prefix, Holder::Worker).await?;
        Ok(claimed
            .into_iter()
            .map(|(session, epoch)| {
                PgLog::in_worker(self.clone(), &session, epoch, committer.clone())
            })
            .collect())
    }

    /// [`open`](Store::open) for the worker this store's owner names: the session is taken
    /// under a new epoch and the worker's lease (started or renewed in the same statement).
    pub(crate) async fn open_for_worker(
        &self,
        session: &str,
        committer: &Committer,
    ) -> Result<PgLog, PgError> {
        check_session(session)?;
        let client = self.client().await?;
        self.sent(Sent::Other);
        let statement = client
            .prepare_cached(&format!(
                "WITH me AS ({UPSERT_WORKER})
                 INSERT INTO coxswain.sessions AS s (session, epoch, owner, lease_until, length, worker)
                 SELECT $3, 1, me.worker, NULL, 0, me.worker FROM me
                 ON CONFLICT (session) DO UPDATE
                 SET epoch = s.epoch + 1, owner = $1, worker = $1, lease_until = NULL
                 WHERE {} OR s.owner = $1
                 RETURNING epoch",
                free("s")
            ))
            .await?;
        let rows = client
            .query(&statement, &[&self.owner(), &self.lease_secs(), &session])
            .await?;
        match rows.first() {
            Some(row) => Ok(PgLog::in_worker(
                self.clone(),
                session,
                row.get(0),
                committer.clone(),
            )),
            None => Err(self.held(session).await),
        }
    }

    /// Renews the lease of the worker this store's owner names, for every session it serves:
    /// one statement (it starts the lease again if the row is gone).
    pub(crate) async fn renew_worker(&self) -> Result<(), PgError> {
        let client = self.client().await?;
        self.sent(Sent::Renewal);
        let statement = client.prepare_cached(UPSERT_WORKER).await?;
        client
            .execute(&statement, &[&self.owner(), &self.lease_secs()])
            .await?;
        Ok(())
    }

    /// Ends the worker's lease (its sessions, if any are left, are free at once).
    pub(crate) async fn end_worker(&self) -> Result<(), PgError> {
        let client = self.client().await?;
        self.sent(Sent::Other);
        client
            .execute(
                "DELETE FROM coxswain.workers WHERE worker = $1",
                &[&self.owner()],
            )
            .await?;
        Ok(())
    }

    /// Takes up to `max` free sessions ([`free`]) whose id starts with `prefix` (`""`: any)
    /// under a new epoch each, held by `holder`: the sessions and their epochs. One statement;
    /// sessions locked by an append in flight are skipped.
    async fn claim(
        &self,
        max: usize,
        prefix: &str,
        holder: Holder,
    ) -> Result<Vec<(String, i64)>, PgError> {
        let (with, hold, from) = match holder {
            Holder::Own => (
                String::new(),
                "owner = $1, worker = NULL, lease_until = now() + make_interval(secs => $2)",
                "",
            ),
            Holder::Worker => (
                format!("WITH me AS ({UPSERT_WORKER}) "),
                "owner = me.worker, worker = me.worker, lease_until = NULL",
                "me, ",
            ),
        };
        let sql = format!(
            "{with}UPDATE coxswain.sessions AS s SET epoch = s.epoch + 1, {hold}
             FROM {from}(SELECT c.session FROM coxswain.sessions AS c
                   WHERE starts_with(c.session, $4) AND {}
                   ORDER BY c.session LIMIT $3 FOR UPDATE SKIP LOCKED) AS free
             WHERE s.session = free.session
             RETURNING s.session, s.epoch",
            free("c")
        );
        let client = self.client().await?;
        self.sent(Sent::Other);
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        let rows = client
            .query(&sql, &[&self.owner(), &self.lease_secs(), &max, &prefix])
            .await?;
        Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    /// Every session, by id: owner, epoch, lease, length.
    pub async fn sessions(&self) -> Result<Vec<SessionInfo>, PgError> {
        let client = self.client().await?;
        self.sent(Sent::Other);
        let rows = client
            .query(
                "SELECT s.session, s.epoch, s.owner,
                        coalesce(s.lease_until, w.lease_until)::text,
                        s.owner IS NOT NULL AND coalesce(coalesce(s.lease_until, w.lease_until) > now(), false),
                        s.length, s.worker
                 FROM coxswain.sessions AS s LEFT JOIN coxswain.workers AS w ON w.worker = s.worker
                 ORDER BY s.session",
                &[],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|row| SessionInfo {
                session: row.get(0),
                epoch: row.get(1),
                owner: row.get(2),
                lease_until: row.get(3),
                live: row.get(4),
                length: row.get(5),
                worker: row.get(6),
            })
            .collect())
    }

    fn lease_secs(&self) -> f64 {
        self.options.lease.as_secs_f64()
    }

    /// The [`PgError::Held`] of a session an open could not take.
    async fn held(&self, session: &str) -> PgError {
        self.sent(Sent::Other);
        let Ok(client) = self.client().await else {
            return PgError::Held {
                session: session.to_owned(),
                owner: "(unknown)".to_owned(),
                epoch: 0,
                lease_until: "(unknown)".to_owned(),
            };
        };
        match client
            .query_opt(
                "SELECT coalesce(s.owner, ''), s.epoch,
                        coalesce(coalesce(s.lease_until, w.lease_until)::text, '')
                 FROM coxswain.sessions AS s LEFT JOIN coxswain.workers AS w ON w.worker = s.worker
                 WHERE s.session = $1",
                &[&session],
            )
            .await
        {
            Ok(Some(row)) => PgError::Held {
                session: session.to_owned(),
                owner: row.get(0),
                epoch: row.get(1),
                lease_until: row.get(2),
            },
            Ok(None) => PgError::NoSession(session.to_owned()),
            Err(error) => error.into(),
        }
    }
}

/// Who holds a session a claim takes.
#[derive(Clone, Copy)]
enum Holder {
    /// The claiming writer, under a lease of the session's own that its [`PgLog`] renews.
    Own,
    /// The store owner's worker, under the worker's one lease (started or renewed by the same
    /// statement).
    Worker,
}

/// Starts or renews the lease of worker `$1` for `$2` seconds; returns the worker.
const UPSERT_WORKER: &str = "INSERT INTO coxswain.workers AS w (worker, lease_until)
     VALUES ($1, now() + make_interval(secs => $2))
     ON CONFLICT (worker) DO UPDATE SET lease_until = EXCLUDED.lease_until
     RETURNING w.worker";

/// The condition, on the session row `alias`, that nobody holds it: no owner; or a lease of its
/// own that is over (or none); or a worker whose lease is over (or whose row is gone). By the
/// database's clock.
fn free(alias: &str) -> String {
    format!(
        "({alias}.owner IS NULL
          OR ({alias}.worker IS NULL AND ({alias}.lease_until IS NULL OR {alias}.lease_until < now()))
          OR ({alias}.worker IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM coxswain.workers AS lw
                WHERE lw.worker = {alias}.worker AND lw.lease_until >= now())))"
    )
}

fn check_session(session: &str) -> Result<(), PgError> {
    if session.is_empty() || session.contains('\0') {
        return Err(PgError::BadSession(session.to_owned()));
    }
    Ok(())
}
