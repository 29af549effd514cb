//! `coxswain view LOG [-o FILE.html]`: one self-contained HTML page that shows a session.
//!
//! The page is built from a list of records ([`Session`]), whatever their source: a JSON-lines
//! file log today (`FileLog`, `coxswain run --log`), one session of a shared segment log, or any
//! other store that can hand back [`coxswain_log::Record`]s. Every fact the page shows (depths,
//! claims, discards, the verdict) is computed here in Rust, by replaying the records through
//! the core's auditor and restorer; the page's script only draws, searches and pages.

mod facts;
mod page;
mod session;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

pub(crate) use page::render;
pub(crate) use session::Session;

/// Flags of `coxswain view`.
#[derive(Args, Debug)]
pub(crate) struct ViewArgs {
    /// The log: a session's JSON-lines file, a shared segment log (with --session), or a
    /// `postgres://…` URL (with --session; the session is read, never taken over).
    log: PathBuf,
    /// Where to write the page [default: the log's path with `.html`].
    #[arg(short, long, value_name = "FILE.html")]
    output: Option<PathBuf>,
    /// In a shared segment log or a database: the session to show.
    #[arg(long)]
    session: Option<String>,
}

fn default_output(log: &Path, session: Option<&str>) -> PathBuf {
    if crate::pg::is_postgres(log) {
        // A database session's page lands in the working directory, named after the session.
        return PathBuf::from(format!("{}.html", session.unwrap_or("session")));
    }
    let mut name = log.file_name().unwrap_or_default().to_os_string();
    name.push(".html");
    log.with_file_name(name)
}

pub(crate) fn run(args: &ViewArgs) -> ExitCode {
    let session = if crate::pg::is_postgres(&args.log) {
        crate::pg::read_records(&args.log, args.session.as_deref())
            .map(|(name, records)| Session::from_records(name, records))
    } else {
        Session::from_file(&args.log, args.session.as_deref()).map_err(|e| e.to_string())
    };
    let session = match session {
        Ok(session) => session,
        Err(error) => {
            eprintln!("coxswain view: {error}");
            return ExitCode::FAILURE;
        }
    };
    let html = render(&session);
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| default_output(&args.log, args.session.as_deref()));
    if let Err(error) = std::fs::write(&output, html.as_bytes()) {
        eprintln!("coxswain view: cannot write {}: {error}", output.display());
        return ExitCode::FAILURE;
    }
    println!(
        "wrote {} ({} records, {} bytes); open it in any browser (it works offline)",
        output.display(),
        session.records.len(),
        html.len()
    );
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests;
