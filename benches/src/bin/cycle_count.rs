//! Runs bench 1's follow-up cycle `N` times, for instruction counts under
//! `valgrind --tool=callgrind` (stable on a shared machine, where criterion's medians wander):
//! `cargo build --release -p coxswain-benches --bin coxswain-cycle-count`, then
//! `valgrind --tool=callgrind target/release/coxswain-cycle-count machine 10000` (or `session`,
//! `baseline`, `baseline-shared`). Prints the cycles' outputs, so nothing is optimised away.

use std::collections::VecDeque;
use std::hint::black_box;

use coxswain_benches::{
    baseline_cycle, baseline_shared_cycle, followup_cycle, message, session_cycle,
};
use coxswain_core::Machine;
use coxswain_session::{Options, Session};

fn main() {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap_or_else(|| "machine".into());
    if what == "sizes" {
        sizes();
        return;
    }
    let cycles: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let m = message(0);
    let mut total = 0;
    match what.as_str() {
        "machine" => {
            let mut machine = Machine::new();
            for _ in 0..cycles {
                total += followup_cycle(&mut machine, black_box(m.clone()));
            }
        }
        "session" => {
            let mut session = Session::new(Machine::new(), Options::default());
            for _ in 0..cycles {
                total += session_cycle(&mut session, black_box(m.clone()));
            }
        }
        "baseline" => {
            let mut queue = VecDeque::with_capacity(16);
            for _ in 0..cycles {
                total += baseline_cycle(&mut queue);
            }
        }
        "baseline-shared" => {
            let mut queue = VecDeque::with_capacity(16);
            for _ in 0..cycles {
                total += baseline_shared_cycle(&mut queue, black_box(m.clone()));
            }
        }
        other => {
            eprintln!("unknown workload {other:?}: machine, session, baseline or baseline-shared");
            std::process::exit(2);
        }
    }
    println!("{what}: {cycles} cycles, {total} outputs");
}

fn sizes() {
    use std::mem::size_of;
    eprintln!(
        "Event {} Effect {} Release {} Input {} Refused {} Machine {} Session {} Output {}",
        size_of::<coxswain_core::Event>(),
        size_of::<coxswain_core::Effect>(),
        size_of::<coxswain_session::Release>(),
        size_of::<coxswain_core::Input>(),
        size_of::<coxswain_session::Refused>(),
        size_of::<Machine>(),
        size_of::<Session>(),
        size_of::<coxswain_core::Output>(),
    );
}
