//! # coxswain-postgres-tests
//!
//! The PostgreSQL adapter's verification, unpublished: [`TempCluster`] (below), the worker
//! process of the Jepsen-style test (`src/bin/coxswain-pg-worker.rs`), and the adapter's
//! integration tests (`tests/log.rs`, `tests/jepsen.rs`). The published `coxswain-postgres`
//! carries none of it.
//!
//! A private, throwaway PostgreSQL cluster for tests, benches and the Jepsen test: `initdb` and
//! `pg_ctl` into a temp dir, a unix socket only (`listen_addresses = ''`), removed on drop.
//!
//! The server binaries come from Debian's `postgresql` package (`/usr/lib/postgresql/*/bin`,
//! the newest version found; `COXSWAIN_PG_BIN` overrides). PostgreSQL refuses to run as root:
//! as root, every server command runs as `nobody` (`setpriv`), with the temp dir chowned to it.
//!
//! The cluster trusts the superuser `postgres` on its socket and has one role,
//! [`PASSWORD_ROLE`], that must give [`PASSWORD`] (scram-sha-256), to test a wrong password.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod replica;

pub use replica::ReplicatedPair;

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The role that authenticates with a password.
pub const PASSWORD_ROLE: &str = "coxswain_pw";
/// Its password.
pub const PASSWORD: &str = "right-password";

/// Why the cluster could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum HarnessError {
    /// No PostgreSQL server binaries on this machine.
    Missing,
    /// A command failed.
    Command(String),
}

impl fmt::Display for HarnessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HarnessError::Missing => write!(
                f,
                "no PostgreSQL server binaries (initdb, pg_ctl) in /usr/lib/postgresql/*/bin: install the Debian package `postgresql`"
            ),
            HarnessError::Command(text) => write!(f, "{text}"),
        }
    }
}

impl std::error::Error for HarnessError {}

/// A running throwaway cluster; stopped (immediately) and removed on drop.
#[derive(Debug)]
pub struct TempCluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    as_nobody: bool,
}

/// What the PostgreSQL tests need, and whether this machine has it ([`find_bin`]): their
/// binaries run through [`coxswain_test_harness::run`], which reports them ignored without it
/// (failed with `CI=true`).
pub fn needs() -> coxswain_test_harness::Needs {
    coxswain_test_harness::Needs {
        what: "PostgreSQL's server binaries",
        install: "apt-get install postgresql",
        present: find_bin().is_some(),
    }
}

/// The newest `/usr/lib/postgresql/*/bin` holding `initdb` and `pg_ctl`.
pub fn find_bin() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("COXSWAIN_PG_BIN") {
        return Some(PathBuf::from(bin));
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            (bin.join("initdb").exists() && bin.join("pg_ctl").exists()).then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

impl TempCluster {
    /// For tests: the cluster, or `None` after one loud `SKIPPED` line when the binaries are
    /// missing. With `CI=true` missing binaries are an error (`Err`), never a skip.
    pub fn for_tests() -> Result<Option<TempCluster>, HarnessError> {
        skip_when_missing(TempCluster::start(), "PostgreSQL tests need")
    }

    /// Creates and starts a cluster in a new temp dir, with `fsync = off` (tests: a commit is
    /// atomic and visible, not flushed).
    pub fn start() -> Result<TempCluster, HarnessError> {
        TempCluster::start_with(false)
    }

    /// [`TempCluster::for_tests`] with `fsync = on` (benches: every commit flushed, as in
    /// production).
    pub fn for_benches() -> Result<Option<TempCluster>, HarnessError> {
        skip_when_missing(TempCluster::start_with(true), "the PostgreSQL bench needs")
    }

    /// Creates and starts a cluster in a new temp dir; `fsync` on or off.
    pub fn start_with(fsync: bool) -> Result<TempCluster, HarnessError> {
        TempCluster::start_configured(fsync, "", "")
    }

    /// A new temp dir for a cluster (owned by `nobody` when root); nothing in it yet.
    pub(crate) fn empty() -> Result<TempCluster, HarnessError> {
        let bin = find_bin().ok_or(HarnessError::Missing)?;
        let dir = tempfile::Builder::new()
            .prefix("coxswain-pg-")
            .tempdir()
            .map_err(|error| HarnessError::Command(format!("temp dir: {error}")))?;
        let as_nobody = rustix_is_root();
        let cluster = TempCluster {
            bin,
            dir,
            as_nobody,
        };
        if as_nobody {
            run(Command::new("chown")
                .arg("nobody:nogroup")
                .arg(cluster.dir.path()))?;
        }
        Ok(cluster)
    }

    /// [`TempCluster::start_with`], with `conf` appended to `postgresql.conf` and `hba` to the
    /// top of `pg_hba.conf`.
    pub(crate) fn start_configured(
        fsync: bool,
        conf: &str,
        hba: &str,
    ) -> Result<TempCluster, HarnessError> {
        let cluster = TempCluster::empty()?;
        let data = cluster.data();
        cluster.server(
            "initdb",
            &[
                "-D",
                path_str(&data)?,
                "-U",
                "postgres",
                "-A",
                "trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ],
        )?;
        let hba = format!("{hba}local all {PASSWORD_ROLE} scram-sha-256\nlocal all all trust\n");
        std::fs::write(data.join("pg_hba.conf"), hba)
            .map_err(|error| HarnessError::Command(format!("pg_hba.conf: {error}")))?;
        let conf = format!(
            "listen_addresses = ''\nunix_socket_directories = '{}'\nfsync = {}\nmax_connections = 200\npassword_encryption = 'scram-sha-256'\n{conf}",
            cluster.dir.path().display(),
            if fsync { "on" } else { "off" }
        );
        let mut existing =
            std::fs::read_to_string(data.join("postgresql.conf")).unwrap_or_default();
        existing.push_str(&conf);
        std::fs::write(data.join("postgresql.conf"), existing)
            .map_err(|error| HarnessError::Command(format!("postgresql.conf: {error}")))?;
        cluster.pg_ctl_start()?;
        cluster.psql(&format!(
            "CREATE ROLE {PASSWORD_ROLE} LOGIN PASSWORD '{PASSWORD}'; GRANT ALL ON DATABASE postgres TO {PASSWORD_ROLE}; GRANT ALL ON SCHEMA public TO {PASSWORD_ROLE};"
        ))?;
        Ok(cluster)
    }

    pub(crate) fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The socket directory.
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// A connection string for the superuser `postgres` on database `postgres`.
    pub fn url(&self) -> String {
        self.url_for("postgres", None)
    }

    /// A connection string for `role` (with `password`, if any) on database `postgres`.
    pub fn url_for(&self, role: &str, password: Option<&str>) -> String {
        let host = encode(&self.dir.path().display().to_string());
        match password {
            Some(password) => format!("postgres://{role}:{}@{host}/postgres", encode(password)),
            None => format!("postgres://{role}@{host}/postgres"),
        }
    }

    /// Creates database `name` (if new) and returns the superuser's connection string to it.
    pub fn database(&self, name: &str) -> Result<String, HarnessError> {
        let exists = self.psql(&format!(
            "SELECT 1 FROM pg_database WHERE datname = '{name}'"
        ))?;
        if exists.is_empty() {
            self.psql(&format!("CREATE DATABASE \"{name}\""))?;
        }
        let host = encode(&self.dir.path().display().to_string());
        Ok(format!("postgres://postgres@{host}/{}", encode(name)))
    }

    /// Runs SQL as the superuser through `psql` on database `postgres`.
    pub fn psql(&self, sql: &str) -> Result<String, HarnessError> {
        self.psql_in("postgres", sql)
    }

    /// Runs SQL as the superuser through `psql` on database `db`.
    pub fn psql_in(&self, db: &str, sql: &str) -> Result<String, HarnessError> {
        let dir = self.dir.path().display().to_string();
        let out = self.server(
            "psql",
            &[
                "-h",
                &dir,
                "-U",
                "postgres",
                "-d",
                db,
                "-v",
                "ON_ERROR_STOP=1",
                "-qAt",
                "-c",
                sql,
            ],
        )?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Stops the server fast and starts it again (the nemesis' database restart).
    pub fn restart(&self) -> Result<(), HarnessError> {
        let data = self.data();
        self.server(
            "pg_ctl",
            &["-D", path_str(&data)?, "-m", "fast", "-w", "stop"],
        )?;
        self.pg_ctl_start()
    }

    pub(crate) fn pg_ctl_start(&self) -> Result<(), HarnessError> {
        let data = self.data();
        let log = self.dir.path().join("server.log");
        self.server(
            "pg_ctl",
            &[
                "-D",
                path_str(&data)?,
                "-l",
                path_str(&log)?,
                "-w",
                "-t",
                "60",
                "start",
            ],
        )
        .map(drop)
    }

    /// Runs a server binary (as `nobody` when root).
    pub(crate) fn server(&self, name: &str, args: &[&str]) -> Result<Output, HarnessError> {
        let program = self.bin.join(name);
        let mut command = if self.as_nobody {
            let mut command = Command::new("setpriv");
            command
                .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
                .arg(&program);
            command
        } else {
            Command::new(&program)
        };
        command.args(args).current_dir(self.dir.path());
        run(&mut command)
    }
}

impl Drop for TempCluster {
    fn drop(&mut self) {
        let data = self.data();
        if let Some(data) = data.to_str() {
            let _ = self.server("pg_ctl", &["-D", data, "-m", "immediate", "-w", "stop"]);
        }
    }
}

/// `started`, or `None` after one loud `SKIPPED` line (`who` needs the binaries) when the server
/// binaries are missing outside CI; with `CI=true` missing binaries are an error, never a skip.
pub(crate) fn skip_when_missing<T>(
    started: Result<T, HarnessError>,
    who: &str,
) -> Result<Option<T>, HarnessError> {
    match started {
        Err(HarnessError::Missing) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!(
                "SKIPPED: {who} the server binaries: install the Debian package `postgresql` (apt-get install postgresql)"
            );
            Ok(None)
        }
        other => other.map(Some),
    }
}

fn run(command: &mut Command) -> Result<Output, HarnessError> {
    let out = command
        .output()
        .map_err(|error| HarnessError::Command(format!("{command:?}: {error}")))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(HarnessError::Command(format!(
            "{command:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

fn path_str(path: &Path) -> Result<&str, HarnessError> {
    path.to_str()
        .ok_or_else(|| HarnessError::Command(format!("not UTF-8: {}", path.display())))
}

/// Percent-encodes what a URL's host or password may not hold.
fn encode(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn rustix_is_root() -> bool {
    // The uid of this process, without unsafe code: /proc/self/status's `Uid:` line.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Uid:"))
                .and_then(|uids| uids.split_whitespace().next())
                .map(|uid| uid == "0")
        })
        .unwrap_or(false)
}
