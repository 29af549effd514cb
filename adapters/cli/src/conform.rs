//! `coxswain conform FILE...`: one line per trace, non-zero exit if any fails; with
//! `--exec CMD`, the traces replay on a port over PORTS.md's line protocol instead of the core.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use coxswain_conformance::{replay_file, replay_on, Replayed, Trace, TraceError};

use crate::exec::Exec;

pub(crate) fn run(files: &[PathBuf]) -> ExitCode {
    report(files, |file| {
        // A FIFO would block the read for ever: refused before it is opened.
        Ok(crate::logfile::check_regular(file)
            .map_err(|e| TraceError::Io(e.to_string()))
            .and_then(|()| replay_file(file)))
    })
}

/// `coxswain conform --exec CMD FILE...`: the same report, on the port. A protocol mismatch
/// stops the run.
pub(crate) fn run_exec(command: &str, timeout: Duration, files: &[PathBuf]) -> ExitCode {
    let mut exec = match Exec::start(command, timeout) {
        Ok(exec) => exec,
        Err(error) => {
            println!("{error}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "port {} (protocol {})",
        exec.describe(),
        crate::exec::PROTOCOL
    );
    let code = report(files, |file| {
        let result = replay_exec(&mut exec, file);
        match exec.mismatch() {
            Some(mismatch) => Err(mismatch.to_owned()),
            None => Ok(result),
        }
    });
    let status = exec.finish();
    match status.as_deref() {
        None | Some("exit status: 0") => code,
        Some(status) => {
            println!("FAIL end of session: port exited ({status}) after stdin closed");
            ExitCode::FAILURE
        }
    }
}

/// One trace on the port: `begin`, every input, then `end` (only after a pass; a failed trace's
/// machine is discarded by the next `begin`).
fn replay_exec(exec: &mut Exec, file: &Path) -> Result<Replayed, TraceError> {
    crate::logfile::check_regular(file).map_err(|e| TraceError::Io(e.to_string()))?;
    let text = std::fs::read_to_string(file).map_err(|e| TraceError::Io(e.to_string()))?;
    let trace = Trace::parse(&text)?;
    let name = file.file_name().map_or_else(
        || file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    exec.name_next(&name);
    let replayed = replay_on(&trace, exec)?;
    let last = trace.lines.last().map_or(1, |(line, _)| *line);
    exec.end().map_err(|failure| TraceError::Failed {
        line: last,
        failure: failure.what,
        tail: failure.tail,
    })?;
    Ok(replayed)
}

/// Runs `replay` on every file and prints one line per trace and a summary; `replay` stops the
/// run with `Err(reason)`.
fn report(
    files: &[PathBuf],
    mut replay: impl FnMut(&Path) -> Result<Result<Replayed, TraceError>, String>,
) -> ExitCode {
    let mut failed = 0usize;
    for file in files {
        match replay(file) {
            Ok(Ok(summary)) => println!("ok   {} ({summary})", file.display()),
            Ok(Err(error)) => {
                failed += 1;
                println!("FAIL {}: {error}", file.display());
            }
            Err(reason) => {
                println!("{reason}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!(
        "{} traces, {} passed, {failed} failed",
        files.len(),
        files.len() - failed
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `--timeout` in seconds (fractions allowed), as a duration.
pub(crate) fn parse_timeout(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("`{text}`: the timeout must be a positive number of seconds"))
}
