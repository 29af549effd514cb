//! A replicated pair on this machine: a primary and a synchronous streaming standby, each a
//! [`TempCluster`] of its own (its own temp dir and socket), as PostgreSQL users who need the
//! tier run it: `synchronous_commit = on` with the standby named in
//! `synchronous_standby_names`, so a commit is acknowledged once the standby has it. Workers
//! find whichever is the primary through a connection string with both hosts and
//! `target_session_attrs=read-write` ([`ReplicatedPair::url`]).

use crate::{path_str, skip_when_missing, HarnessError, TempCluster};

/// The standby's `application_name`, which `synchronous_standby_names` names.
const STANDBY: &str = "standby";

/// A primary and its synchronous standby; both stopped and removed on drop.
#[derive(Debug)]
pub struct ReplicatedPair {
    /// The primary (until [`promote_standby`](ReplicatedPair::promote_standby)).
    pub primary: TempCluster,
    /// The synchronous standby (the primary once promoted).
    pub standby: TempCluster,
}

impl ReplicatedPair {
    /// For tests: the pair, or `None` after one loud `SKIPPED` line when the binaries are
    /// missing. With `CI=true` missing binaries are an error (`Err`), never a skip.
    pub fn for_tests() -> Result<Option<ReplicatedPair>, HarnessError> {
        skip_when_missing(ReplicatedPair::start(), "PostgreSQL tests need")
    }

    /// Starts the primary (`wal_level = replica`, the standby synchronous), copies it with
    /// `pg_basebackup -R` into the standby's dir, starts the standby streaming from it, and
    /// waits until the primary reports it `sync`.
    pub fn start() -> Result<ReplicatedPair, HarnessError> {
        // Synchronous only once the standby streams: before, every commit (the harness's own
        // setup included) would wait for it.
        let primary = TempCluster::start_configured(
            false,
            "wal_level = replica\nmax_wal_senders = 4\nsynchronous_commit = on\n",
            "local replication all trust\n",
        )?;
        let standby = TempCluster::empty()?;
        let data = standby.data();
        let primary_dir = primary.socket_dir().display().to_string();
        standby.server(
            "pg_basebackup",
            &[
                "-h",
                &primary_dir,
                "-U",
                "postgres",
                "-D",
                path_str(&data)?,
                "-R",
                "--no-sync",
                "-X",
                "stream",
            ],
        )?;
        // Its own socket, and a name the primary's synchronous_standby_names knows. Once
        // promoted it has no standby of its own, so it must not wait for one: it commits alone
        // (a real cluster's manager, Patroni say, attaches the old primary back as its standby).
        let conf = format!(
            "unix_socket_directories = '{}'\nprimary_conninfo = 'host={primary_dir} user=postgres application_name={STANDBY}'\nsynchronous_standby_names = ''\n",
            standby.socket_dir().display()
        );
        let auto = data.join("postgresql.auto.conf");
        let mut existing = std::fs::read_to_string(&auto).unwrap_or_default();
        existing.push_str(&conf);
        std::fs::write(&auto, existing)
            .map_err(|error| HarnessError::Command(format!("postgresql.auto.conf: {error}")))?;
        standby.pg_ctl_start()?;
        let pair = ReplicatedPair { primary, standby };
        pair.wait_for_standby(&["async", "sync"])?;
        pair.primary.psql(&format!(
            "ALTER SYSTEM SET synchronous_standby_names = '{STANDBY}'"
        ))?;
        pair.primary.psql("SELECT pg_reload_conf()")?;
        pair.wait_for_standby(&["sync"])?;
        Ok(pair)
    }

    /// Waits (30 s at most) until the primary reports the standby streaming in one of `states`.
    fn wait_for_standby(&self, states: &[&str]) -> Result<(), HarnessError> {
        for _ in 0..600 {
            let state = self.primary.psql(&format!(
                "SELECT sync_state FROM pg_stat_replication WHERE application_name = '{STANDBY}'"
            ))?;
            if states.contains(&state.as_str()) {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Err(HarnessError::Command(format!(
            "the standby was not streaming ({}) within 30 s",
            states.join(" or ")
        )))
    }

    /// A connection string naming both hosts, primary first, that connects only to the one
    /// that accepts writes (`target_session_attrs=read-write`): after a promotion, new
    /// connections find the new primary.
    pub fn url(&self, database: &str) -> String {
        format!(
            "host={},{} user=postgres dbname={database} target_session_attrs=read-write",
            self.primary.socket_dir().display(),
            self.standby.socket_dir().display()
        )
    }

    /// Creates database `name` on the primary (the standby replicates it).
    pub fn database(&self, name: &str) -> Result<String, HarnessError> {
        self.primary.database(name)?;
        Ok(self.url(name))
    }

    /// Kills the primary as a crash would (`pg_ctl stop -m immediate`: no shutdown
    /// checkpoint, its connections cut).
    pub fn kill_primary(&self) -> Result<(), HarnessError> {
        let data = self.primary.data();
        self.primary
            .server(
                "pg_ctl",
                &["-D", path_str(&data)?, "-m", "immediate", "-w", "stop"],
            )
            .map(drop)
    }

    /// Promotes the standby (`pg_ctl promote`, waiting until it accepts writes).
    pub fn promote_standby(&self) -> Result<(), HarnessError> {
        let data = self.standby.data();
        self.standby
            .server("pg_ctl", &["-D", path_str(&data)?, "-w", "promote"])
            .map(drop)
    }
}
