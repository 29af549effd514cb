//! The schema, created by embedded, versioned migrations.
//!
//! Every table lives in the PostgreSQL schema `coxswain`. `coxswain.schema_version` holds one
//! row per applied migration; [`migrate`] applies the missing ones in one transaction under an
//! advisory lock (so processes starting together do not race) and refuses a database whose
//! version is newer than [`VERSION`] ([`PgError::SchemaTooNew`]).

use tokio_postgres::Client;

use crate::PgError;

/// The migrations, in order: `(version, SQL)`. Never edit one that shipped; add the next.
pub const MIGRATIONS: &[(i32, &str)] = &[(1, V1), (2, V2)];

/// The newest schema version this code knows.
pub const VERSION: i32 = 2;

/// Version 1: sessions (the fence and the lease) and their records.
pub const V1: &str = "
CREATE TABLE coxswain.sessions (
    session     text        PRIMARY KEY,
    epoch       bigint      NOT NULL,
    owner       text,
    lease_until timestamptz,
    length      bigint      NOT NULL DEFAULT 0
);
CREATE TABLE coxswain.records (
    session text   NOT NULL REFERENCES coxswain.sessions (session),
    seq     bigint NOT NULL,
    epoch   bigint NOT NULL,
    type    text   NOT NULL,
    data    jsonb,
    PRIMARY KEY (session, seq)
);
CREATE INDEX sessions_lease ON coxswain.sessions (lease_until);
";

/// Version 2: worker leases. A worker (a process serving sessions, [`Worker`](crate::Worker))
/// holds one row of `coxswain.workers`, renewed by one statement per period whatever the number
/// of its sessions; a session it serves names it in `sessions.worker` (with `owner` the same id
/// and no `lease_until` of its own) and is live while the worker's lease is. A session taken
/// one by one ([`Store::open`](crate::Store::open)) keeps its own `lease_until`, as in
/// version 1, with no `worker`. Fencing stays per session: the epoch check in every append.
pub const V2: &str = "
CREATE TABLE coxswain.workers (
    worker      text        PRIMARY KEY,
    lease_until timestamptz NOT NULL
);
ALTER TABLE coxswain.sessions ADD COLUMN worker text;
CREATE INDEX sessions_worker ON coxswain.sessions (worker);
";

/// The advisory lock key that serialises migrations ("coxswain" in ASCII, truncated).
const LOCK: i64 = 0x636f_7873_7761_696e;

/// Brings the database's schema to [`VERSION`]; returns the version it found before.
pub async fn migrate(client: &mut Client) -> Result<i32, PgError> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK])
        .await?;
    tx.batch_execute(
        "CREATE SCHEMA IF NOT EXISTS coxswain;
         CREATE TABLE IF NOT EXISTS coxswain.schema_version (
             version    integer     PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now()
         );",
    )
    .await?;
    let row = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM coxswain.schema_version",
            &[],
        )
        .await?;
    let found: i32 = row.get(0);
    if found > VERSION {
        return Err(PgError::SchemaTooNew {
            found,
            supported: VERSION,
        });
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(version, _)| *version > found) {
        tx.batch_execute(sql).await?;
        tx.execute(
            "INSERT INTO coxswain.schema_version (version) VALUES ($1)",
            &[version],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(found)
}

/// Checks, without changing anything, that the database holds the schema at [`VERSION`]: for
/// read-only tools. A newer schema is [`PgError::SchemaTooNew`]; none or an older one is
/// [`PgError::SchemaMissing`].
pub async fn check(client: &Client) -> Result<(), PgError> {
    let row = client
        .query_one(
            "SELECT to_regclass('coxswain.schema_version') IS NOT NULL",
            &[],
        )
        .await?;
    let exists: bool = row.get(0);
    let found: i32 = if exists {
        client
            .query_one(
                "SELECT coalesce(max(version), 0) FROM coxswain.schema_version",
                &[],
            )
            .await?
            .get(0)
    } else {
        0
    };
    match found {
        found if found > VERSION => Err(PgError::SchemaTooNew {
            found,
            supported: VERSION,
        }),
        VERSION => Ok(()),
        found => Err(PgError::SchemaMissing {
            found,
            supported: VERSION,
        }),
    }
}
