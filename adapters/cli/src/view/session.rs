//! Where a page's records come from: a list of records plus a name and what was torn off.

use std::fmt;
use std::path::Path;

use coxswain_log::{is_segment, parse, split_segment, Record, TornTail};

/// One session's records, in log order, whatever their source.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    /// What the page calls it (a file name, a session id).
    pub(crate) name: String,
    /// The records.
    pub(crate) records: Vec<Record>,
    /// A torn final line the reader dropped (crash repair drops it too, S50).
    pub(crate) torn: Option<TornTail>,
}

/// A log that cannot be shown.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SessionError {
    /// The file cannot be read.
    Read(String),
    /// A line is not a record.
    Corrupt { line: usize, problem: String },
    /// A segment log without `--session`, or a session it does not hold.
    Session(String),
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::Read(error) => write!(f, "{error}"),
            SessionError::Corrupt { line, problem } => {
                write!(f, "line {line} is not a record: {problem}")
            }
            SessionError::Session(why) => write!(f, "{why}"),
        }
    }
}

impl Session {
    /// A session from records another source read.
    pub(crate) fn from_records(name: impl Into<String>, records: Vec<Record>) -> Self {
        Session {
            name: name.into(),
            records,
            torn: None,
        }
    }

    /// The session of a JSON-lines file: a session's log, or `session` of a segment log.
    pub(crate) fn from_file(path: &Path, session: Option<&str>) -> Result<Self, SessionError> {
        let bytes = crate::logfile::read(path).map_err(|e| SessionError::Read(e.to_string()))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Session::from_bytes(name, &bytes, session)
    }

    /// The session of a file's bytes.
    pub(crate) fn from_bytes(
        name: String,
        bytes: &[u8],
        session: Option<&str>,
    ) -> Result<Self, SessionError> {
        let corrupt = |line, problem: String| SessionError::Corrupt { line, problem };
        if !is_segment(bytes) {
            if session.is_some() {
                return Err(SessionError::Session(format!(
                    "{name} is not a segment log (its lines name no `session`)"
                )));
            }
            let parsed = parse(bytes).map_err(|c| corrupt(c.line, c.problem.to_string()))?;
            return Ok(Session {
                torn: parsed.torn,
                ..Session::from_records(name, parsed.records)
            });
        }
        let mut parsed =
            split_segment(bytes).map_err(|c| corrupt(c.line, c.problem.to_string()))?;
        let names: Vec<&str> = parsed.sessions.keys().map(String::as_str).collect();
        let Some(wanted) = session else {
            return Err(SessionError::Session(format!(
                "{name} is a shared segment log: pick a session with --session ({})",
                names.join(", ")
            )));
        };
        let Some(records) = parsed.sessions.remove(wanted) else {
            return Err(SessionError::Session(format!(
                "no session {wanted} in {name}"
            )));
        };
        Ok(Session {
            name: format!("{name} · session {wanted}"),
            records,
            torn: parsed.torn,
        })
    }
}
