//! [`Worker`]: a process's share of the sessions — claim the ones whose lease expired, restore
//! and serve them under one lease for all of them, release them on shutdown.

use std::collections::BTreeMap;

use tokio::task::JoinHandle;

use coxswain_tokio::{Agent, Ending, Host, OpenError, Options, Recovery};

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
        }
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Takes `session` now (creating it if new) and serves it; [`PgError::Held`] while another
    /// owner's lease is live.
    pub async fn open(&mut self, session: &str) -> Result<Recovery, WorkerError> {
        let committer = self.committer();
        let log = self.store.open_for_worker(session, &committer).await?;
        self.renew_in_background();
        self.serve(log).await
    }

    /// Claims up to `max` sessions whose lease expired (or that have no owner), restores them
    /// all at once (each reads its log back and crash repair writes its closers under the new
    /// epoch, S50; their closers share the committer's rounds) and serves them. A session whose
    /// log cannot be restored is released again and reported.
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
