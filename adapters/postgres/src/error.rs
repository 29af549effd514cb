//! The typed errors of the PostgreSQL log, and how a driver error maps onto [`LogError`].

use std::io;
use std::sync::Arc;

use coxswain_log::RepairError;
use coxswain_session::RedeliveryTooLarge;
use coxswain_tokio::LogError;
use tokio_postgres::error::{DbError, Severity, SqlState};

/// Why opening, reading or managing a PostgreSQL log failed.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgError {
    /// The connection string does not parse.
    #[error("bad PostgreSQL connection string: {0}")]
    Config(String),
    /// No connection could be made (the server is down, the socket or host is wrong, a
    /// timeout).
    #[error("cannot reach the PostgreSQL server: {0}")]
    Unreachable(String),
    /// The server refused the role's credentials.
    #[error("PostgreSQL refused the credentials of role `{role}`: {message}")]
    Auth {
        /// The role that connected.
        role: String,
        /// The server's message.
        message: String,
    },
    /// The database holds a schema that a newer version of this crate wrote.
    #[error("the database's coxswain schema is version {found}, newer than this code's {supported}: upgrade coxswain before using this database")]
    SchemaTooNew {
        /// The version found in `coxswain.schema_version`.
        found: i32,
        /// The newest version this code knows.
        supported: i32,
    },
    /// A read-only open found no coxswain schema, or an older one (a writer migrates it).
    #[error("the database holds coxswain schema version {found}, not {supported}: nothing to read (a writer creates or upgrades it)")]
    SchemaMissing {
        /// The version found (0: none).
        found: i32,
        /// The version this code reads.
        supported: i32,
    },
    /// The session has a live writer: its lease has not expired.
    #[error("session {session} is held by {owner} (epoch {epoch}) until {lease_until}")]
    Held {
        /// The session.
        session: String,
        /// The live owner.
        owner: String,
        /// Its epoch.
        epoch: i64,
        /// When its lease ends, by the database's clock.
        lease_until: String,
    },
    /// No such session in the database.
    #[error("no session {0} in the database")]
    NoSession(String),
    /// A session id PostgreSQL cannot store (empty, or holding a NUL).
    #[error("invalid session id {0:?}: it must be non-empty and hold no NUL")]
    BadSession(String),
    /// Any other error of the server or the connection.
    #[error("PostgreSQL: {0}")]
    Db(String),
    /// Reading the session's records failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// A redelivery allowance above [`MAX_REDELIVERY`](coxswain_session::MAX_REDELIVERY)
    /// (S59), refused before anything is read or written: the session layer's own check and
    /// text.
    #[error(transparent)]
    Redelivery(#[from] RedeliveryTooLarge),
    /// The session's records do not restore (S46, S47): a read-only restore
    /// ([`Store::restore_read_only`](crate::Store::restore_read_only)) changed nothing.
    #[error("session {session}: the log cannot be restored: {error}")]
    Restore {
        /// The session.
        session: String,
        /// What the core refused, naming the record.
        error: RepairError,
    },
}

impl PgError {
    /// Classifies an error of a connection attempt.
    pub(crate) fn connect(error: &tokio_postgres::Error, role: &str) -> PgError {
        match error.as_db_error() {
            Some(db)
                if db.code() == &SqlState::INVALID_PASSWORD
                    || db.code() == &SqlState::INVALID_AUTHORIZATION_SPECIFICATION =>
            {
                PgError::Auth {
                    role: role.to_owned(),
                    message: db.message().to_owned(),
                }
            }
            Some(db) => PgError::Db(describe_db(db)),
            None => PgError::Unreachable(chain(error)),
        }
    }
}

impl From<tokio_postgres::Error> for PgError {
    fn from(error: tokio_postgres::Error) -> Self {
        match error.as_db_error() {
            Some(db) => PgError::Db(describe_db(db)),
            None => PgError::Db(chain(&error)),
        }
    }
}

/// The error and its sources, one line.
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(next) = source {
        let more = next.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = next.source();
    }
    text
}

fn describe_db(db: &DbError) -> String {
    format!("{} ({}): {}", db.severity(), db.code().code(), db.message())
}

/// What an append's failure means for the batch.
///
/// Only an `ERROR` the server answered the statement with says the statement's transaction
/// rolled back: the batch is not in the log ([`LogError::Io`]). Anything else — the connection
/// closed, a `FATAL` (the backend was terminated, the server shut down), a timeout — may have
/// come after the commit: [`LogError::Indeterminate`].
pub(crate) fn append_error(error: &tokio_postgres::Error) -> LogError {
    match error.as_db_error() {
        Some(db) if db.parsed_severity() == Some(Severity::Error) => other(describe_db(db)),
        _ => indeterminate(chain(error)),
    }
}

/// An append that failed before its statement was sent (no connection): not in the log.
pub(crate) fn not_sent(text: String) -> LogError {
    other(format!("no connection, nothing sent: {text}"))
}

pub(crate) fn other(text: String) -> LogError {
    LogError::Io(Arc::new(io::Error::other(text)))
}

pub(crate) fn indeterminate(text: String) -> LogError {
    LogError::Indeterminate {
        error: Arc::new(io::Error::other(text)),
        undo: Arc::new(io::Error::other(
            "a transaction's outcome is unknown when its connection fails before the answer",
        )),
    }
}
