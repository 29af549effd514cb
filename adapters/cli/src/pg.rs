//! The PostgreSQL side of the CLI: `coxswain sessions URL`, `coxswain verify URL [--session
//! ID]`, `coxswain log copy FROM TO --session ID`, and the log target of `coxswain run --log
//! URL --session ID`.
//!
//! A log is named by a path (a JSON-lines file) or by a `postgres://` / `postgresql://` URL plus
//! a session id.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use coxswain_core::Event;
use coxswain_log::{Entry, HostEvent, Record};
use coxswain_postgres::{redact, PgError, PgLog, Store, StoreOptions};
use coxswain_tokio::{DurableLog, FileLog, LogError};

use crate::verify::{verify_records, Verdict};

/// Whether `log` names a PostgreSQL database.
pub(crate) fn is_postgres(log: &Path) -> bool {
    log.to_str()
        .is_some_and(|log| log.starts_with("postgres://") || log.starts_with("postgresql://"))
}

/// Where a log lives.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    /// A JSON-lines file.
    File(PathBuf),
    /// A session in a PostgreSQL database.
    Postgres { url: String, session: String },
}

impl Target {
    /// The target `log` names; a database needs `session`.
    pub(crate) fn new(log: &Path, session: Option<&str>) -> Result<Target, String> {
        if is_postgres(log) {
            let url = log.to_str().unwrap_or_default().to_owned();
            let session = session
                .ok_or("a postgres:// log needs --session ID (the session to run or copy)")?;
            Ok(Target::Postgres {
                url,
                session: session.to_owned(),
            })
        } else {
            Ok(Target::File(log.to_owned()))
        }
    }

    /// How the target is shown: the path, or `URL (session ID)` without a password.
    pub(crate) fn describe(&self) -> String {
        match self {
            Target::File(path) => path.display().to_string(),
            Target::Postgres { url, session } => format!("{} (session {session})", redact(url)),
        }
    }

    /// Every record of the log, read-only.
    pub(crate) async fn records(&self) -> Result<Vec<Record>, String> {
        match self {
            Target::File(path) => {
                let owned = path.clone();
                let bytes = tokio::task::spawn_blocking(move || crate::logfile::read(&owned))
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?;
                let parsed = coxswain_log::parse(&bytes)
                    .map_err(|e| format!("{}: not a record: {e}", path.display()))?;
                Ok(parsed.records)
            }
            Target::Postgres { url, session } => {
                let store = read_store(url).await?;
                let mut log = store
                    .open_read_only(session)
                    .await
                    .map_err(|e| e.to_string())?;
                read_all(&mut log).await.map_err(|e| e.to_string())
            }
        }
    }
}

/// Why a file log could not be opened: an error that names the path already is shown alone.
pub(crate) fn cannot_open(path: &Path, error: &LogError) -> String {
    match error {
        LogError::NotRegular(_) | LogError::LineTooLong { .. } | LogError::Locked { .. } => {
            error.to_string()
        }
        _ => format!("cannot open {}: {error}", path.display()),
    }
}

/// A store for reading: checks the schema's version, migrates nothing.
pub(crate) async fn read_store(url: &str) -> Result<Store, String> {
    let mut options = StoreOptions::owned_by(format!("coxswain-cli:{}", std::process::id()));
    options.read_only = true;
    Store::connect(url, options)
        .await
        .map_err(|e| e.to_string())
}

/// A store for writing (migrates the schema).
pub(crate) async fn write_store(url: &str) -> Result<Store, PgError> {
    Store::connect(url, StoreOptions::default()).await
}

async fn read_all(log: &mut impl DurableLog) -> Result<Vec<Record>, LogError> {
    let mut records = Vec::new();
    log.read_back(&mut |record| {
        records.push(record);
        ControlFlow::Continue(())
    })
    .await?;
    Ok(records)
}

/// The records of `log` (a file, or a `postgres://…` session opened read-only), and how the
/// log is named: what `coxswain view` shows for a database session.
pub(crate) fn read_records(
    log: &Path,
    session: Option<&str>,
) -> Result<(String, Vec<Record>), String> {
    let target = Target::new(log, session)?;
    let records = runtime()?.block_on(target.records())?;
    Ok((target.describe(), records))
}

/// `coxswain fate postgres://… ID --session S`: the fate of `id` in the session's stored
/// records, restored read-only (S58; `Store::fate`: no takeover, nothing written).
pub(crate) fn fate(
    log: &Path,
    session: Option<&str>,
    id: &str,
    options: coxswain_session::ResumeOptions,
) -> Result<coxswain_core::Fate, String> {
    let target = Target::new(log, session)?;
    let Target::Postgres { url, session } = &target else {
        return Err(format!("{}: not a postgres:// URL", target.describe()));
    };
    runtime()?.block_on(async {
        let store = read_store(url).await?;
        let id = coxswain_core::MessageId::new(id);
        store
            .fate(session, &id, options)
            .await
            .map_err(|e| format!("{}: {e}", target.describe()))
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the tokio runtime: {e}"))
}

/// `coxswain sessions URL`: one line per session: id, epoch, owner, lease, length.
pub(crate) fn sessions(url: &str) -> ExitCode {
    let listed = runtime().and_then(|rt| {
        rt.block_on(async {
            let store = read_store(url).await?;
            store.sessions().await.map_err(|e| e.to_string())
        })
    });
    match listed {
        Ok(sessions) => {
            println!("session\tepoch\towner\tlease\tlength");
            for info in &sessions {
                let lease = match (&info.lease_until, info.live) {
                    (Some(until), true) => format!("live until {until}"),
                    (Some(until), false) => format!("expired at {until}"),
                    (None, _) => "released".to_owned(),
                };
                println!(
                    "{}\t{}\t{}\t{lease}\t{}",
                    info.session,
                    info.epoch,
                    info.owner.as_deref().unwrap_or("-"),
                    info.length
                );
            }
            println!("{} sessions", sessions.len());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

/// `coxswain verify URL [--session ID]`: audits one session, or every session (one line each);
/// exit status as for a file: 0 ok, 1 a violation, 2 needs crash repair.
pub(crate) fn verify(url: &str, session: Option<&str>) -> ExitCode {
    let verdicts = runtime().and_then(|rt| {
        rt.block_on(async {
            let store = read_store(url).await?;
            let ids = match session {
                Some(session) => vec![session.to_owned()],
                None => store
                    .sessions()
                    .await
                    .map_err(|e| e.to_string())?
                    .into_iter()
                    .map(|info| info.session)
                    .collect(),
            };
            let mut verdicts = Vec::new();
            for id in ids {
                let verdict = match store.open_read_only(&id).await {
                    Ok(mut log) => match read_all(&mut log).await {
                        Ok(records) => verify_records(&records, None),
                        Err(LogError::Corrupt(corrupt)) => Verdict::Violation {
                            line: corrupt.line,
                            message: format!("not a record: {}", corrupt.problem),
                        },
                        Err(error) => return Err(format!("session {id}: {error}")),
                    },
                    Err(error) => return Err(error.to_string()),
                };
                verdicts.push((id, verdict));
            }
            Ok(verdicts)
        })
    });
    match verdicts {
        Ok(verdicts) => {
            let worst = verdicts
                .iter()
                .map(|(id, verdict)| {
                    let prefix = if session.is_some() {
                        String::new()
                    } else {
                        format!("session {id}: ")
                    };
                    crate::verify::report(&prefix, verdict)
                })
                .fold(0, |worst, code| match (worst, code) {
                    (1, _) | (_, 1) => 1,
                    (2, _) | (_, 2) => 2,
                    _ => 0,
                });
            if session.is_none() {
                println!("{} sessions", verdicts.len());
            }
            ExitCode::from(worst)
        }
        Err(error) => {
            println!("{error}");
            ExitCode::FAILURE
        }
    }
}

/// A record read back (`{seq?, type, data}`) as the entry it was appended as.
fn entry_of(record: &Record) -> Result<Entry, String> {
    let event = &record.event;
    let kind = event
        .get("type")
        .and_then(|kind| kind.as_str())
        .ok_or_else(|| format!("record {}: no `type` string", record.line))?;
    let data = event.get("data").cloned().unwrap_or_default();
    if Event::TYPES.contains(&kind) {
        let event = serde_json::json!({"type": kind, "data": data});
        serde_json::from_value(event)
            .map(Entry::Machine)
            .map_err(|e| format!("record {}: not a `{kind}` event: {e}", record.line))
    } else {
        HostEvent::new(kind, data)
            .map(Entry::Host)
            .map_err(|e| format!("record {}: {e}", record.line))
    }
}

/// Appends `entries` to an empty log, in batches.
async fn fill(log: &mut impl DurableLog, entries: &[Entry], name: &str) -> Result<(), String> {
    let existing = read_all(log)
        .await
        .map_err(|e| format!("{name}: {e}"))?
        .len();
    if existing > 0 {
        return Err(format!(
            "{name} already holds {existing} records: copy only into an empty log"
        ));
    }
    log.repair_tail()
        .await
        .map_err(|e| format!("{name}: {e}"))?;
    for chunk in entries.chunks(1000) {
        log.append(chunk)
            .await
            .map_err(|e| format!("{name}: {e}"))?;
    }
    log.sync().await.map_err(|e| format!("{name}: {e}"))
}

/// `coxswain log copy FROM TO [--session ID]`: copies a session's records between a JSON-lines
/// file and PostgreSQL (either way; file to file and database to database too). The target must
/// be empty; a database target is taken under a new epoch and released after.
pub(crate) fn copy(from: &Path, to: &Path, session: Option<&str>) -> ExitCode {
    let done = runtime().and_then(|rt| rt.block_on(copy_async(from, to, session)));
    match done {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

async fn copy_async(from: &Path, to: &Path, session: Option<&str>) -> Result<String, String> {
    let source = Target::new(from, session)?;
    let sink = Target::new(to, session)?;
    let records = source.records().await?;
    let entries = records
        .iter()
        .map(entry_of)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", source.describe()))?;
    match &sink {
        Target::File(path) => {
            let mut log = FileLog::open(path)
                .await
                .map_err(|e| cannot_open(path, &e))?;
            fill(&mut log, &entries, &sink.describe()).await?;
        }
        Target::Postgres { url, session } => {
            let store = write_store(url).await.map_err(|e| e.to_string())?;
            let mut log: PgLog = store.open(session).await.map_err(|e| e.to_string())?;
            let epoch = log.epoch().unwrap_or(0);
            let filled = fill(&mut log, &entries, &sink.describe()).await;
            drop(log);
            let _ = store.release(session, epoch).await;
            filled?;
        }
    }
    Ok(format!(
        "copied {} records from {} to {}",
        entries.len(),
        source.describe(),
        sink.describe()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_told_from_a_path_and_its_password_is_hidden() {
        assert!(is_postgres(Path::new("postgres://u@h/db")));
        assert!(is_postgres(Path::new("postgresql://u@h/db")));
        assert!(!is_postgres(Path::new("log.jsonl")));
        assert_eq!(redact("postgres://u:secret@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        let error = Target::new(Path::new("postgres://u@h/db"), None).unwrap_err();
        assert_eq!(
            error,
            "a postgres:// log needs --session ID (the session to run or copy)"
        );
    }
}
