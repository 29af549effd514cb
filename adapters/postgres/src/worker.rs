//! [`Worker`]: a process's share of the sessions — claim the ones whose lease expired, restore
//! and serve them under one lease for all of them, release them on shutdown.

use std::collections::BTreeMap;

use tokio::task::JoinHandle;

use coxswain_core::{Config, Fate, MessageId};
use coxswain_session::ResumeOptions;
use coxswain_tokio::{Agent, Ending, Host, InvalidOptions, OpenError, Options, Recovery};

use crate::committer::Committer;
use crate::{PgError, PgLog, SessionInfo, Store};

/// Why a [`Worker`] could not take or serve a session.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// The database refused or failed.
    #[error(transparent)]
    Store(#[from] PgError),
    /// The session's log could not be restored (read back, repaired, closed, restored).
    #[error("session {session}: {error}")]
    Open {
        /// The session.
        session: String,
        /// Why.
        error: OpenError,
    },
    /// The worker's [`Options`] are out of bounds (e.g. a redelivery allowance above
    /// [`MAX_REDELIVERY`](coxswain_session::MAX_REDELIVERY), S59): refused before any session
    /// is taken, read or written.
    #[error("invalid options: {0}")]
    Options(#[from] InvalidOptions),
}

struct Served {
    agent: Agent,
    epoch: i64,
}

/// Serves sessions of one [`Store`]: each session it holds runs as an [`Agent`] over a
/// [`PgLog`] it took under a new epoch.
///
/// The worker holds one lease (a row of `coxswain.workers`, named by the store's
/// [`owner`](crate::StoreOptions::owner)) for all of its sessions, started by its first
/// [`open`](Worker::open) or [`claim_expired`](Worker::claim_expired) and renewed by one
/// statement every third of [`StoreOptions::lease`](crate::StoreOptions::lease), however many
/// sessions it serves. A worker that stops renewing (its process died, or cannot reach the
/// database) loses all of its sessions at once when that lease ends: other workers claim them
/// (in batches of their `max`) and restore them; each append still checks its session's epoch,
/// so a writer that was taken over is fenced.
///
/// A session it takes over ([`claim_expired`](Worker::claim_expired)) is restored with
/// [`Options::redelivery`] (S59: what the interrupted turn claimed and no model saw is pending
/// again) and, by default, sent `resume` (S57) at once: restored waking work runs without a
/// caller ([`resume_after_takeover`](Worker::resume_after_takeover)). [`fate`](Worker::fate)
/// answers what became of a message in any session, served here or not (S58).
pub struct Worker<H: Host> {
    store: Store,
    make_host: Box<dyn Fn(&str) -> H + Send + Sync>,
    options: Options,
    served: BTreeMap<String, Served>,
    /// The task renewing the worker's lease, once it holds one.
    renewal: Option<JoinHandle<()>>,
    /// The worker's committer (started with its first session): every waiting session's
    /// append in one transaction.
    committer: Option<Committer>,
    /// Sessions reaped whose release the database did not take yet, with their epoch.
    unreleased: Vec<(String, i64)>,
    /// Whether a session taken over is sent `resume` (S57) once restored.
    resume_after_takeover: bool,
}

impl<H: Host> Worker<H> {
    /// A worker on `store` whose agents get their host from `make_host(session)` and run with
    /// `options` (the same [`Options::delivery_memory`] everywhere, S51).
    pub fn new(
        store: Store,
        options: Options,
        make_host: impl Fn(&str) -> H + Send + Sync + 'static,
    ) -> Self {
        Worker {
            store,
            make_host: Box::new(make_host),
            options,
            served: BTreeMap::new(),
            renewal: None,
            committer: None,
            unreleased: Vec::new(),
            resume_after_takeover: true,
        }
    }

    /// Whether a session this worker takes over ([`claim_expired`](Worker::claim_expired),
    /// [`claim_expired_under`](Worker::claim_expired_under)) is sent `resume` (S57) as soon as
    /// it is restored, before any delivery reaches it (as [`Options::resume_on_open`] does):
    /// restored waking work (queued follow-ups, a redelivered message, S59) runs without a
    /// caller, its events written like any input's. Default `true`: nobody else will wake a
    /// session whose owner died. `false`: restored work parks until a waking send or
    /// [`Agent::resume`] (S48), unless [`Options::resume_on_open`] is set.
    /// [`open`](Worker::open) never adds it: its caller is there to send or resume.
    #[must_use]
    pub fn resume_after_takeover(mut self, resume: bool) -> Self {
        self.resume_after_takeover = resume;
        self
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Takes `session` now (creating it if new) and serves it; [`PgError::Held`] while another
    /// owner's lease is live.
    pub async fn open(&mut self, session: &str) -> Result<Recovery, WorkerError> {
        self.options.validate()?;
        let committer = self.committer();
        let log = self.store.open_for_worker(session, &committer).await?;
        self.renew_in_background();
        self.serve(log).await
    }

    /// Claims up to `max` sessions whose lease expired (or that have no owner), restores them
    /// all at once (each reads its log back and crash repair writes its closers under the new
    /// epoch, S50, then the redelivery splices of [`Options::redelivery`], S59; their records
    /// share the committer's rounds), sends each `resume` (S57) unless
    /// [`resume_after_takeover`](Worker::resume_after_takeover) is off, and serves them. A
    /// session whose log cannot be restored (or whose `resume` was not written) is released
    /// again and reported. Options out of bounds ([`WorkerError::Options`]) take nothing.
    pub async fn claim_expired(
        &mut self,
        max: usize,
    ) -> Result<Vec<(String, Result<Recovery, WorkerError>)>, WorkerError> {
        self.claim_expired_under("", max).await
    }

    /// [`claim_expired`](Worker::claim_expired) among the sessions whose id starts with
    /// `prefix` only (`""`: any), for workers that share a database with other sessions
    /// they must leave alone (e.g. one `coxswain load` run's workers beside another's).
    pub async fn claim_expired_under(
        &mut self,
        prefix: &str,
        max: usize,
    ) -> Result<Vec<(String, Result<Recovery, WorkerError>)>, WorkerError> {
        self.options.validate()?;
        let committer = self.committer();
        let logs = self.store.claim_for_worker(max, prefix, &committer).await?;
        self.renew_in_background();
        let mut taken: BTreeMap<String, i64> = logs
            .iter()
            .map(|log| (log.session().to_owned(), log.epoch().unwrap_or(0)))
            .collect();
        let mut restores = tokio::task::JoinSet::new();
        for log in logs {
            let host = (self.make_host)(log.session());
            let mut options = self.options.clone();
            options.name = log.session().to_owned();
            options.resume_on_open |= self.resume_after_takeover;
            restores.spawn(async move {
                let session = log.session().to_owned();
                let epoch = log.epoch().unwrap_or(0);
                let opened = Agent::open_with(options, host, log).await;
                (session, epoch, opened)
            });
        }
        let mut claimed = Vec::with_capacity(restores.len());
        while let Some(restored) = restores.join_next().await {
            let Ok((session, epoch, opened)) = restored else {
                continue;
            };
            taken.remove(&session);
            let result = match opened {
                Ok((agent, recovery)) => {
                    self.insert(session.clone(), Served { agent, epoch }).await;
                    Ok(recovery)
                }
                Err(error) => {
                    let _ = self.store.release(&session, epoch).await;
                    Err(WorkerError::Open {
                        session: session.clone(),
                        error,
                    })
                }
            };
            claimed.push((session, result));
        }
        // A restore whose task ended without an answer (it panicked) is not served: released.
        for (session, epoch) in taken {
            let _ = self.store.release(&session, epoch).await;
        }
        claimed.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(claimed)
    }

    /// The worker's committer, started if it was not.
    fn committer(&mut self) -> Committer {
        let store = &self.store;
        self.committer
            .get_or_insert_with(|| Committer::start(store.clone()))
            .clone()
    }

    /// Starts the task renewing the worker's lease (the statement that took the first session
    /// started the lease), unless it runs.
    fn renew_in_background(&mut self) {
        if self.renewal.is_none() {
            self.renewal = Some(tokio::spawn(renew(self.store.clone())));
        }
    }

    async fn serve(&mut self, log: PgLog) -> Result<Recovery, WorkerError> {
        let session = log.session().to_owned();
        let epoch = log.epoch().unwrap_or(0);
        let host = (self.make_host)(&session);
        let mut options = self.options.clone();
        options.name = session.clone();
        let (agent, recovery) = Agent::open_with(options, host, log)
            .await
            .map_err(|error| WorkerError::Open {
                session: session.clone(),
                error,
            })?;
        self.insert(session, Served { agent, epoch }).await;
        Ok(recovery)
    }

    /// Serves `session` by `served`, closing the agent that served it before, if any.
    async fn insert(&mut self, session: String, served: Served) {
        if let Some(old) = self.served.insert(session, served) {
            let _ = old.agent.close().await;
        }
    }

    /// The agent serving `session`, if this worker serves it.
    pub fn agent(&self, session: &str) -> Option<&Agent> {
        self.served.get(session).map(|served| &served.agent)
    }

    /// What became of message `id` in `session` (S58), whoever holds the session, taking
    /// nothing over and writing nothing:
    ///
    /// * a session this worker serves (its agent not ended) answers from its agent's machine
    ///   ([`Agent::fate`]);
    /// * any other session (another worker's, a released one, one whose agent here ended)
    ///   answers from its stored records restored read-only as this worker's takeover would
    ///   restore them ([`Store::restore_read_only`]): with this worker's
    ///   [`Options::delivery_memory`] (the `W` every worker of a deployment shares, S51, so an
    ///   id the serving agent forgot is `unknown` here too) and [`Options::redelivery`]. Once
    ///   the serving agent is idle the two answers are equal for every id (I15); while a turn
    ///   is open the stored answer is what a takeover would leave (S58).
    ///
    /// # Errors
    ///
    /// [`WorkerError::Options`] for options out of bounds; [`WorkerError::Store`] when the
    /// session does not exist or its records cannot be read or restored.
    pub async fn fate(&self, session: &str, id: &MessageId) -> Result<Fate, WorkerError> {
        let options = self.resume_options()?;
        if let Some(served) = self.served.get(session) {
            if served.agent.ending().is_none() {
                return Ok(served.agent.fate(id.clone()).await);
            }
        }
        Ok(self.store.fate(session, id, options).await?)
    }

    /// The restore options of [`fate`](Worker::fate): the agents' delivery memory and bound,
    /// and the redelivery allowance, checked.
    fn resume_options(&self) -> Result<ResumeOptions, InvalidOptions> {
        self.options.validate()?;
        let mut config = Config::new().with_delivery_memory(self.options.delivery_memory);
        if let Some(limit) = std::num::NonZeroUsize::new(self.options.max_pending) {
            config = config.with_max_pending(limit);
        }
        Ok(ResumeOptions::from(config).try_with_redelivery(self.options.redelivery)?)
    }

    /// The sessions this worker serves, with the epoch it holds each under.
    pub fn serving(&self) -> impl Iterator<Item = (&str, i64)> + '_ {
        self.served
            .iter()
            .map(|(session, served)| (session.as_str(), served.epoch))
    }

    /// Drops the sessions whose agent ended (fenced, a failed append of unknown outcome,
    /// disposed) and returns them with their ending. Each is released at the epoch it was
    /// served under, so it is free to claim at once (this worker's next
    /// [`claim_expired`](Worker::claim_expired) restores it, or another's): under the worker's
    /// lease it would otherwise stay held, and unserved, for as long as the worker lives. A
    /// fenced session is some other worker's already (its release changes nothing); a release
    /// the database did not take is tried again at the next reap.
    pub async fn reap(&mut self) -> Vec<(String, Ending)> {
        let ended: Vec<String> = self
            .served
            .iter()
            .filter(|(_, served)| served.agent.ending().is_some())
            .map(|(session, _)| session.clone())
            .collect();
        let reaped: Vec<(String, Ending)> = ended
            .into_iter()
            .filter_map(|session| {
                let served = self.served.remove(&session)?;
                let ending = served.agent.ending()?;
                self.unreleased.push((session.clone(), served.epoch));
                Some((session, ending))
            })
            .collect();
        let mut still = Vec::new();
        for (session, epoch) in std::mem::take(&mut self.unreleased) {
            if self.store.release(&session, epoch).await.is_err() {
                still.push((session, epoch));
            }
        }
        self.unreleased = still;
        reaped
    }

    /// Every session in the database: owner, epoch, lease, length.
    pub async fn sessions(&self) -> Result<Vec<SessionInfo>, PgError> {
        self.store.sessions().await
    }

    /// Opens `session` read-only (any session, served here or not).
    pub async fn read_only(&self, session: &str) -> Result<PgLog, PgError> {
        self.store.open_read_only(session).await
    }

    /// Closes every agent (each ends after what it was doing is durable) and releases its
    /// session, so another worker may claim it at once, then ends the worker's lease. Returns
    /// how many sessions were released.
    pub async fn shutdown(mut self) -> usize {
        let mut released = 0;
        for (session, served) in std::mem::take(&mut self.served) {
            let _ = served.agent.close().await;
            let _ = served.agent.finished().await;
            if matches!(self.store.release(&session, served.epoch).await, Ok(true)) {
                released += 1;
            }
        }
        if let Some(renewal) = self.renewal.take() {
            renewal.abort();
            let _ = self.store.end_worker().await;
        }
        released
    }
}

impl<H: Host> Drop for Worker<H> {
    /// A worker dropped without [`shutdown`](Worker::shutdown) stops renewing: its sessions are
    /// free to claim once its lease ends.
    fn drop(&mut self) {
        if let Some(renewal) = self.renewal.take() {
            renewal.abort();
        }
    }
}

/// Renews the worker's lease every third of its length, for as long as the task lives.
async fn renew(store: Store) {
    let period = store.lease() / 3;
    loop {
        tokio::time::sleep(period).await;
        if let Err(error) = store.renew_worker().await {
            tracing::warn!(worker = store.owner(), %error, "worker lease renewal failed");
        }
    }
}
