//! `coxswain-mutants [NAME ...] [--list] [--self-test] [--work-dir DIR] [--verbose]`: runs the
//! source mutants of the core and checks that each is killed (see the crate documentation).
#![forbid(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    coxswain_mutants::main_with_args(std::env::args().skip(1))
}
