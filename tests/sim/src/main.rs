//! `coxswain-driver-sim`: the deterministic simulation of the tokio adapter over a range of seeds
//! (faults injected into the log and the host, crashes at any await point, each followed by
//! crash repair with redelivery and a `resume`, SPEC §13) and its totals. A
//! verification tool beside the project (`cargo run -p coxswain-driver-sim -- --seeds 0-4999`), not
//! part of the shipped `coxswain` binary.

use std::process::ExitCode;

use clap::Parser;
use coxswain_driver_sim::{parse_seeds, run_range, Settings};

/// Runs the simulation over a range of seeds and prints its totals; exit status 1 if any seed
/// fails, 2 for a bad range.
#[derive(Parser, Debug)]
#[command(name = "coxswain-driver-sim", version)]
struct SimArgs {
    /// The seeds to run: `A-B` (inclusive) or one seed `N`.
    #[arg(long, default_value = "0-1999")]
    seeds: String,
    /// Print one line per seed (its digest, deliveries and faults).
    #[arg(long)]
    verbose: bool,
    /// Run the seeds on the threads driver (`coxswain-threads`) instead of the tokio one:
    /// seeded faults and calls, on OS threads and the wall clock (not schedule-deterministic).
    #[arg(long)]
    threads: bool,
}

fn main() -> ExitCode {
    run(&SimArgs::parse())
}

fn run(args: &SimArgs) -> ExitCode {
    let seeds = match parse_seeds(&args.seeds) {
        Ok(seeds) => seeds,
        Err(error) => {
            eprintln!("coxswain-driver-sim: {error}");
            return ExitCode::from(2);
        }
    };
    let driver = if args.threads {
        " (threads driver)"
    } else {
        ""
    };
    println!(
        "coxswain-driver-sim: seeds {}-{}{driver}",
        seeds.start(),
        seeds.end()
    );
    let started = std::time::Instant::now();
    let each = |report: &coxswain_driver_sim::SeedReport| {
        if args.verbose || !report.passed() {
            println!(
                "seed {} digest {:016x} lives {} records {} acked {} failed {} unknown {} faults {} \
                 redelivered {} fates {}{}",
                report.seed,
                report.digest,
                report.lives,
                report.records,
                report.acked,
                report.failed,
                report.unknown,
                report.faults.total(),
                report.resumes.redelivered,
                report.resumes.fates_checked,
                if report.passed() { "" } else { " FAILED" }
            );
            for finding in report
                .lost
                .iter()
                .map(|id| format!("acknowledged `{id}` lost"))
                .chain(
                    report
                        .phantom
                        .iter()
                        .map(|id| format!("failed `{id}` in the log")),
                )
                .chain(report.violations.iter().cloned())
            {
                println!("  {finding}");
            }
        }
    };
    let totals = if args.threads {
        coxswain_driver_sim::quiet_injected_panics();
        let mut totals = coxswain_driver_sim::Totals::default();
        for seed in seeds {
            let report = coxswain_driver_sim::threads::run_threads_seed(seed);
            each(&report);
            totals.add(&report);
        }
        totals
    } else {
        run_range(seeds, &Settings::default(), each)
    };
    println!("{totals}");
    println!("wall time: {:.1}s", started.elapsed().as_secs_f64());
    if totals.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
