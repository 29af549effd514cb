//! `coxswain run SCRIPT [--log PATH]`: a real agent session on the tokio adapter, with a scripted
//! host instead of a model service. It writes the session's JSON-lines log (to `PATH`, or to a
//! new temp dir removed when the run ends; an existing log is resumed, and the run says so
//! first: `resuming PATH: N records already there (S46)`), prints a timeline of turns, steps,
//! host events and inbox changes as they happen, checks the log with `verify`, and ends with a
//! summary. Every open of the log (the first, and each `reopen`) repairs a turn left open with
//! crash repair's redelivery allowance `--redelivery N` (S59; default 0, at most 1000: what the
//! turn claimed unseen is put back and the resume line says how many), and with
//! `--resume-on-open` sends `resume` (S57) once the timeline watches, before any action, so
//! parked work runs at once (shown as `> resume (S57): start the parked work`).
//!
//! # Session script (JSON)
//!
//! ```text
//! {
//!   "note":   "free text, printed first",
//!   "stepMs": 200,                      // how long an unscripted step takes (default 200)
//!   "memory": 256,                      // the delivery memory's capacity (S51; default 256)
//!   "actions": [ {TRIGGER, "note": "…", ACTION}, … ],    // run one at a time, in this order
//!   "host": {                           // the scripted host's answers; unscripted calls get
//!     "preStep":      {"T.S": REPLY},   //   enter the claimed batch at once,
//!     "step":         {"T.S": REPLY},   //   completed after stepMs,
//!     "turnStopping": {"T":   REPLY}    //   done at once
//!   }
//! }
//! TRIGGER = "at": MS          MS after the run began (at once if that is past)
//!         | "when": EVENT     once EVENT happened in this run (at once if it already did)
//!         | (neither)         right after the previous action
//! EVENT   = "turn T starts" | "turn T ends" | "step T.S starts" | "step T.S ends"
//!         | "ID is claimed"                 a turn claimed message ID
//!         | "TYPE in step T.S"              the host recorded an event of TYPE in that step
//!           An EVENT that can no longer happen (the agent went idle or ended without it) skips
//!           its action. Turn numbers go on across a resume, as the log's do.
//! REPLY  = {"ms": MS, "answer": ANSWER, "cleanupMs": MS, "during": [{"at": MS, ACTION}, …]}
//!          `ms`: how long the call takes; `during`: actions at MS after the call began; when
//!          the turn's token trips, the call stops, waits `cleanupMs`, and answers (S40).
//! ANSWER = preStep: "enter" (the claimed batch) | {"enter": [MESSAGE…]} | "reject" | {"fail": ERR}
//!          step: "completed" | "max-tokens" | "continue" | {"fail": ERR}
//!          turnStopping: "done" | {"fail": ERR}          ERR = {"message": "…", "code": "…"}
//! ACTION = {"followup": MESSAGE} | {"steer": MESSAGE} | {"inject": MESSAGE}
//!        | {"send": {"message": MESSAGE, "target": "next-turn"|"next-step", "wakeup": BOOL}}
//!        | {"remove": "ID"} | {"replace": {"id": "ID", "message": MESSAGE}}
//!        | {"prepend": {"target": TARGET, "message": MESSAGE}} | {"clear": {}}
//!        | {"cancel": {"cause": {"kind": "user"|"parent"|"disposed"} | {"kind": "hook",
//!                      "reason": "…"}, "keepInbox": BOOL}}
//!        | {"maintenance": {"ms": MS}}     a job of MS (stops early when cancelled); the next
//!                                          action runs once the job has begun
//!        | {"waitIdle": {}}                wait until no turn or maintenance runs
//!        | {"reopen": {}}                  close the agent and open its log again (resume)
//!        | {"dispose": {}}
//!        | {"record": {"type": "…", "data": …}}   a host event (only in a step's `during`)
//! MESSAGE = {"id": "…", "content": …, "source": {"kind": "…"}}  (source defaults to user)
//! ```
//!
//! Inside a host reply's `during`, every action needs its `at`, and `maintenance`, `waitIdle`,
//! `reopen` and `dispose` are not allowed (they wait for the very call that runs them). The
//! runner decides nothing: every action is one call on the [`Agent`](coxswain_tokio::Agent), and
//! every answer is the script's.
//!
//! The modules: [`script`] and [`script_entry`] (the grammar above, parsed strictly), [`cue`]
//! (the EVENTs), [`timeline`] (what is printed, and what has happened), [`host`] (the scripted
//! host), [`actions`] (one action, one call), [`runner`] (the session) and [`summary`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod actions;
mod cue;
mod host;
mod runner;
mod script;
mod script_entry;
mod summary;
mod timeline;

#[cfg(test)]
mod tests;

use crate::verify::Verdict;

/// Without `--log` the log goes to a new directory under the system temp dir, removed when the
/// run ends (when the returned guard is dropped): only a log the user asked for is kept.
fn temp_log() -> Result<(tempfile::TempDir, PathBuf), String> {
    let dir = tempfile::Builder::new()
        .prefix("coxswain-run-")
        .tempdir()
        .map_err(|e| format!("cannot make a temp dir: {e}"))?;
    let path = dir.path().join("session.jsonl");
    Ok((dir, path))
}

/// How many records an existing log at `path` already holds (`None`: no log there yet, or an
/// empty one; a log that cannot be parsed is left to the open to report). A path that is not a
/// regular file, or a line longer than any record, is refused here, before the run starts.
fn already_there(path: &Path) -> Result<Option<usize>, String> {
    match std::fs::metadata(path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        _ => {}
    }
    let bytes = crate::logfile::read(path).map_err(|e| e.to_string())?;
    if bytes.is_empty() {
        return Ok(None);
    }
    Ok(coxswain_log::parse(&bytes)
        .ok()
        .map(|parsed| parsed.records.len()))
}

/// How every open of the run's log goes (the first and each `reopen`): crash repair's
/// redelivery allowance (S59, `--redelivery N`) and whether `resume` (S57) is sent once open
/// (`--resume-on-open`). The default is S50 and S48 unchanged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Open {
    pub(crate) redelivery: u64,
    pub(crate) resume_on_open: bool,
}

/// `coxswain run`: parses the script, runs it against the log, prints the summary and verdict.
pub(crate) fn run(
    script_path: &Path,
    log: Option<&Path>,
    session: Option<&str>,
    open: Open,
) -> ExitCode {
    let script = match std::fs::read_to_string(script_path)
        .map_err(|e| e.to_string())
        .and_then(|text| script::parse_script(&text))
    {
        Ok(script) => script,
        Err(error) => {
            eprintln!("{}: {error}", script_path.display());
            return ExitCode::FAILURE;
        }
    };
    // `_temp` removes the temp dir (and the log in it) when the run ends, however it ends.
    let (_temp, path) = match log {
        Some(path) => (None, path.to_owned()),
        None => match temp_log() {
            Ok((dir, path)) => (Some(dir), path),
            Err(error) => {
                eprintln!("{error}");
                return ExitCode::FAILURE;
            }
        },
    };
    let kept = _temp.is_none();
    let target = match crate::pg::Target::new(&path, session) {
        Ok(target) => target,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    let shown = target.describe();
    if let Some(note) = &script.note {
        println!("{note}");
    }
    println!("log: {shown}");
    if let crate::pg::Target::File(path) = &target {
        match already_there(path) {
            Ok(Some(records)) => println!(
                "resuming {}: {records} records already there (S46)",
                path.display()
            ),
            Ok(None) => {}
            Err(error) => {
                eprintln!("{error}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cannot start the tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = match runtime.block_on(runner::session(script, &target, open, false)) {
        Ok(outcome) => outcome,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    println!();
    println!("summary: {}", summary::summary(&outcome.stats));
    match outcome.verdict {
        Verdict::Ok {
            events,
            turns,
            repair,
        } => {
            println!(
                "log: {shown} ({events} records) verified: ok ({events} events, {turns} turns)"
            );
            if !repair.is_empty() {
                println!("     a later open will repair it: {}", repair.join("; "));
            }
            match &target {
                crate::pg::Target::File(_) if !kept => {
                    println!("     removed with its temp dir (pass --log PATH to keep it)")
                }
                crate::pg::Target::File(path) => {
                    println!(
                        "     check it again with: cargo run -p coxswain -- verify {}",
                        path.display()
                    )
                }
                crate::pg::Target::Postgres { session, .. } => {
                    println!(
                        "     check it again with: cargo run -p coxswain -- verify URL --session \
                         {session}"
                    )
                }
            }
            ExitCode::SUCCESS
        }
        Verdict::Violation { line, message } => {
            println!("log: {shown}: line {line}: {message}");
            ExitCode::FAILURE
        }
    }
}
