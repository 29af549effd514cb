//! `coxswain fate LOG ID [--memory W] [--redelivery N] [--session S]`: what became of message
//! `ID` (S58), read from a JSON-lines log without writing it.
//!
//! The log is restored read-only through the session layer's [`ResumePlan::from_bytes`], the
//! plan every driver resumes with: a log that ends inside a turn is answered as crash repair
//! would leave it (its turn closed `interrupted`, S50, and with `--redelivery N` what it claimed
//! unseen pending again, S59), but nothing is cut or appended. Prints one JSON line, the core's
//! [`Fate::to_json`](coxswain_core::Fate::to_json) (FORMAT.md's `F`): `{"pending":"next-turn"}`,
//! `"discarded"`, `"unknown"` or `{"claimed":{"turn":1,"step":1,"end":"completed"}}`. An id the
//! log never saw is `"unknown"`, exit 0.
//!
//! The delivery memory: unbounded by default, so every id the log records is answered (the
//! memory is rebuilt from the log's records, S53; it grows by one record per message that left a
//! list, bounded by the log itself). `--memory W` mirrors an agent whose memory holds `W` ids,
//! answering `"unknown"` for what that agent forgot. `--redelivery N` is repair's allowance
//! (default 0; above 1000 refused before the log is read). A shared segment log needs
//! `--session S`, and so does a `postgres://` URL: the session's records are read in one
//! snapshot and restored the same way (`Store::fate`), without taking the session over. Exit status: 0 answered; 1 the log cannot be read or restored (the error names
//! the path); 2 a bad argument.

use std::path::Path;
use std::process::ExitCode;

use coxswain_core::{Config, MessageId};
use coxswain_log::{is_segment, split_segment};
use coxswain_session::{ResumeOptions, ResumePlan};

/// `coxswain fate`'s arguments.
#[derive(clap::Args, Debug)]
pub(crate) struct FateArgs {
    /// The log: a session's JSON-lines log, or a shared segment log (with --session). Read only.
    log: std::path::PathBuf,
    /// The message id.
    id: String,
    /// Mirror an agent's delivery memory of W ids (default: unbounded, every id the log
    /// records is answered).
    #[arg(long, value_name = "W")]
    memory: Option<usize>,
    /// Crash repair's redelivery allowance (S59), 0..=1000, as the agent opens the log with.
    #[arg(long, value_name = "N", default_value = "0", value_parser = parse_redelivery)]
    redelivery: u64,
    /// In a shared segment log: the session.
    #[arg(long)]
    session: Option<String>,
}

/// A redelivery allowance as the command line gives it: an integer, checked by the session
/// layer's [`ResumeOptions::try_with_redelivery`] (the one owner of the bound, S59), so a
/// negative, non-integer or too large value is refused before any log is opened.
pub(crate) fn parse_redelivery(text: &str) -> Result<u64, String> {
    let allowance: u64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a whole number from 0 to 1000"))?;
    ResumeOptions::default()
        .try_with_redelivery(allowance)
        .map(|options| options.redelivery)
        .map_err(|error| error.to_string())
}

/// `coxswain fate`: prints the fate's JSON line, or the error on stderr.
pub(crate) fn run(args: &FateArgs) -> ExitCode {
    match answer(args) {
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

/// The fate of `args.id` as one JSON line.
fn answer(args: &FateArgs) -> Result<String, String> {
    let config = match args.memory {
        Some(capacity) => Config::new().with_delivery_memory(capacity),
        None => Config::new().with_unbounded_delivery_memory(),
    };
    let options = ResumeOptions::from(config)
        .try_with_redelivery(args.redelivery)
        .map_err(|error| error.to_string())?;
    let path = args.log.as_path();
    if crate::pg::is_postgres(path) {
        let fate = crate::pg::fate(path, args.session.as_deref(), &args.id, options)?;
        return Ok(fate.to_json().to_string());
    }
    let bytes = crate::logfile::read(path).map_err(|error| error.to_string())?;
    let plan = restore(path, &bytes, args.session.as_deref(), options)?;
    let fate = plan.machine.fate(&MessageId::new(args.id.as_str()));
    Ok(fate.to_json().to_string())
}

/// The resume plan of the log's bytes (or of one session of a segment log), never carried out.
fn restore(
    path: &Path,
    bytes: &[u8],
    session: Option<&str>,
    options: ResumeOptions,
) -> Result<ResumePlan, String> {
    let shown = path.display();
    let cannot =
        |error: &dyn std::fmt::Display| format!("{shown}: cannot restore the log: {error}");
    if !is_segment(bytes) {
        if let Some(session) = session {
            return Err(format!(
                "{shown}: not a segment log, so it holds no session `{session}`: drop --session"
            ));
        }
        return ResumePlan::from_bytes(bytes, options).map_err(|error| cannot(&error));
    }
    let Some(session) = session else {
        return Err(format!(
            "{shown}: a shared segment log: name the session with --session ID"
        ));
    };
    let parsed = split_segment(bytes).map_err(|error| cannot(&error))?;
    let Some(records) = parsed.sessions.get(session) else {
        return Err(format!(
            "{shown}: no session `{session}` in this segment log"
        ));
    };
    let next_seq = records
        .last()
        .and_then(|record| record.seq)
        .map_or(1, |seq| seq.saturating_add(1));
    ResumePlan::from_records(records, next_seq, options).map_err(|error| cannot(&error))
}
