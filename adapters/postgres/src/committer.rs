//! The worker's committer: every waiting session's batch in one transaction.
//!
//! A [`PgLog`](crate::PgLog) a [`Worker`](crate::Worker) serves hands its append to the
//! worker's committer instead of writing it itself. The committer takes every append waiting
//! when it is free (at most [`MAX_ROUND`]) and writes them all with **one statement**, so one
//! transaction and one round trip, however many sessions wait:
//!
//! ```sql
//! WITH grown AS (UPDATE coxswain.sessions SET length = length + b.n
//!                FROM unnest($sessions, $epochs, $counts, $expected) AS b
//!                WHERE session = b.session AND epoch = b.epoch AND length = b.expected
//!                RETURNING session),
//!      written AS (INSERT INTO coxswain.records SELECT … FROM unnest($records…) AS r
//!                  WHERE r.session IN (SELECT session FROM grown))
//! SELECT session FROM grown
//! ```
//!
//! Each session's epoch and length are checked inside it, under the session row's lock as in
//! the one-session append: a session another writer took over (or whose length moved) is not
//! in `grown`, so its records (numbered from the length the writer expects, which is the length
//! `grown` checked) are not inserted and it alone is told
//! [`LogError::Fenced`](coxswain_tokio::LogError::Fenced), while the others commit. A statement
//! that fails fails every batch in it, each as the one-session append would
//! ([`append_error`]). Up to [`MAX_IN_FLIGHT`] rounds are written at once, each on its own
//! connection; while they are, the next appends wait, and the next round takes them all: the
//! committer is the group commit of the whole worker. A session has one append in flight at a
//! time (its log awaits each), so two rounds never hold the same session.

use std::collections::HashSet;
use std::sync::Arc;

use coxswain_tokio::LogError;
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::error::{append_error, chain, not_sent};
use crate::stats::Sent;
use crate::Store;

/// The most appends one round writes.
pub(crate) const MAX_ROUND: usize = 1024;

/// The most rounds in flight at once (each on a connection of its own): while they are, the
/// next appends wait and gather into the next round.
pub(crate) const MAX_IN_FLIGHT: usize = 2;

const COMMIT: &str = "WITH grown AS (
        UPDATE coxswain.sessions AS s SET length = s.length + b.n
        FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[])
            AS b(session, epoch, n, expected)
        WHERE s.session = b.session AND s.epoch = b.epoch AND s.length = b.expected
        RETURNING s.session),
    written AS (
        INSERT INTO coxswain.records (session, seq, epoch, type, data)
        SELECT r.session, r.seq, r.epoch, r.type, r.data::jsonb
        FROM unnest($5::text[], $6::bigint[], $7::bigint[], $8::text[], $9::text[])
            AS r(session, seq, epoch, type, data)
        WHERE r.session IN (SELECT g.session FROM grown AS g)
        RETURNING 1)
    SELECT g.session FROM grown AS g";

/// One session's batch, encoded as the one-session append encodes it.
pub(crate) struct Batch {
    pub(crate) session: Arc<str>,
    pub(crate) epoch: i64,
    /// The session's length before the batch.
    pub(crate) expected: i64,
    pub(crate) types: Vec<String>,
    pub(crate) datas: Vec<Option<String>>,
}

/// A batch waiting for its round, and where its outcome goes.
struct Append {
    batch: Batch,
    done: oneshot::Sender<Committed>,
}

/// What became of one [`Append`].
#[derive(Debug)]
pub(crate) enum Committed {
    /// In the log.
    Written,
    /// Not written: the session's epoch (or length) was no longer this writer's.
    Fenced,
    /// Not written, or of unknown outcome: the round's statement failed.
    Failed(LogError),
}

/// The handle a worker's logs send their appends to; the task ends when every handle is gone.
#[derive(Clone, Debug)]
pub(crate) struct Committer {
    appends: mpsc::UnboundedSender<Append>,
}

impl Committer {
    /// Starts the committer of `store`'s worker.
    pub(crate) fn start(store: Store) -> Committer {
        let (appends, waiting) = mpsc::unbounded_channel();
        tokio::spawn(run(store, waiting));
        Committer { appends }
    }

    /// Writes `batch` in the next round; its outcome.
    pub(crate) async fn commit(&self, batch: Batch) -> Committed {
        let (done, outcome) = oneshot::channel();
        if self.appends.send(Append { batch, done }).is_err() {
            return Committed::Failed(not_sent("the worker's committer has ended".to_owned()));
        }
        outcome.await.unwrap_or_else(|_| {
            Committed::Failed(not_sent("the worker's committer has ended".to_owned()))
        })
    }
}

async fn run(store: Store, mut waiting: mpsc::UnboundedReceiver<Append>) {
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let mut next: Vec<Append> = Vec::new();
    loop {
        // A round starts once one of the slots is free, with everything waiting by then.
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        if next.is_empty() {
            match waiting.recv().await {
                Some(append) => next.push(append),
                None => return,
            }
        }
        while next.len() < MAX_ROUND {
            match waiting.try_recv() {
                Ok(append) => next.push(append),
                Err(_) => break,
            }
        }
        let (round, later) = one_per_session(std::mem::take(&mut next));
        next = later;
        let store = store.clone();
        tokio::spawn(async move {
            write(&store, round).await;
            drop(slot);
        });
    }
}

/// The appends of distinct sessions, in arrival order, and the rest (a session's second batch
/// waits for the next round: a statement updates each session row once).
fn one_per_session(appends: Vec<Append>) -> (Vec<Append>, Vec<Append>) {
    let mut seen = HashSet::new();
    appends
        .into_iter()
        .partition(|append| seen.insert(Arc::clone(&append.batch.session)))
}

/// Writes one round and tells every append its outcome.
async fn write(store: &Store, round: Vec<Append>) {
    match execute(store, &round).await {
        Ok(written) => {
            for append in round {
                let outcome = if written.contains(&*append.batch.session) {
                    Committed::Written
                } else {
                    Committed::Fenced
                };
                let _ = append.done.send(outcome);
            }
        }
        Err(error) => {
            for append in round {
                let _ = append.done.send(Committed::Failed(error.clone()));
            }
        }
    }
}

/// The round's statement: the sessions it wrote.
async fn execute(store: &Store, round: &[Append]) -> Result<HashSet<String>, LogError> {
    let records: usize = round.iter().map(|append| append.batch.types.len()).sum();
    let mut sessions = Vec::with_capacity(round.len());
    let mut epochs = Vec::with_capacity(round.len());
    let mut counts = Vec::with_capacity(round.len());
    let mut expected = Vec::with_capacity(round.len());
    let mut record_sessions = Vec::with_capacity(records);
    let mut seqs = Vec::with_capacity(records);
    let mut record_epochs = Vec::with_capacity(records);
    let mut types = Vec::with_capacity(records);
    let mut datas = Vec::with_capacity(records);
    for Append { batch: append, .. } in round {
        sessions.push(&*append.session);
        epochs.push(append.epoch);
        counts.push(append.types.len() as i64);
        expected.push(append.expected);
        for (ord, (kind, data)) in append.types.iter().zip(&append.datas).enumerate() {
            record_sessions.push(&*append.session);
            seqs.push(append.expected + ord as i64 + 1);
            record_epochs.push(append.epoch);
            types.push(kind.as_str());
            datas.push(data.as_deref());
        }
    }
    let client = store
        .client()
        .await
        .map_err(|error| not_sent(error.to_string()))?;
    store.sent(Sent::Append);
    let statement = client
        .prepare_cached(COMMIT)
        .await
        .map_err(|error| not_sent(chain(&error)))?;
    let rows = client
        .query(
            &statement,
            &[
                &sessions,
                &epochs,
                &counts,
                &expected,
                &record_sessions,
                &seqs,
                &record_epochs,
                &types,
                &datas,
            ],
        )
        .await
        .map_err(|error| append_error(&error))?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}
