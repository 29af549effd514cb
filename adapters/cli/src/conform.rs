//! `coxswain conform FILE...`: one line per trace, non-zero exit if any fails.

use std::path::PathBuf;
use std::process::ExitCode;

use coxswain_conformance::replay_file;

pub(crate) fn run(files: &[PathBuf]) -> ExitCode {
    let mut failed = 0usize;
    for file in files {
        match replay_file(file) {
            Ok(summary) => println!("ok   {} ({summary})", file.display()),
            Err(error) => {
                failed += 1;
                println!("FAIL {}: {error}", file.display());
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
