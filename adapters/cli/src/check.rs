//! `coxswain check`: model-check the real core at a bound and print what it proved.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use coxswain_checker::stateright::Model;
use coxswain_checker::{check, Bound, CheckReport, DeliveryModel, Verdict};
use indicatif::{ProgressBar, ProgressStyle};

/// Flags of `coxswain check`.
#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
    /// Message ids in the pool [default: the CI bound's].
    #[arg(long)]
    messages: Option<u8>,
    /// Environment operations per path (deliveries, edits, cancels, maintenance, dispose,
    /// crash-restore) [default: the CI bound's].
    #[arg(long)]
    operations: Option<u8>,
    /// `continue` answers per path [default: the CI bound's].
    #[arg(long)]
    tool_steps: Option<u8>,
    /// Leave crash-and-restore out of the environment.
    #[arg(long)]
    no_crashes: bool,
    /// The delivery memory's capacity W (S51; 0 is plain S9) [default: the CI bound's, 0].
    #[arg(long)]
    memory: Option<u8>,
    /// The admission bound P (S55; 0 is unbounded) [default: the CI bound's, 0].
    #[arg(long)]
    max_pending: Option<u8>,
    /// Start from the bigger documented bound instead of the CI bound.
    #[arg(long)]
    deep: bool,
    /// Search breadth-first without symmetry reduction (every renaming of the ids is a state of
    /// its own; counterexamples are then the shortest).
    #[arg(long)]
    no_symmetry: bool,
    /// Checker threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Serve stateright's Explorer web UI on this address (e.g. localhost:3000) instead of
    /// checking; blocks until interrupted.
    #[arg(long, value_name = "ADDR")]
    explore: Option<String>,
}

pub(crate) fn run(args: &CheckArgs) -> ExitCode {
    let bound = bound_of(args);
    let model = if args.no_symmetry {
        DeliveryModel::new(bound)
    } else {
        DeliveryModel::new(bound).with_symmetry()
    };
    print_header(args, &bound);
    if let Some(address) = &args.explore {
        println!("  serving the Explorer on http://{address} (Ctrl-C to stop)");
        println!(
            "  click `Init 0` to load the initial state; each state shows the phase, both lists \
             with their waking flags, the request, the latch, the cancel and the last turn, and \
             each transition is named by its input"
        );
        model
            .checker()
            .threads(args.threads)
            .serve(address.as_str());
        return ExitCode::SUCCESS;
    }
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("  {spinner} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let report = check(model, args.threads, None, Duration::from_millis(200), |p| {
        let rate = p.unique_states as f64 / p.elapsed.as_secs_f64().max(1e-3);
        bar.set_message(format!(
            "{} states, depth {}, {:.1?} ({:.0} states/s)",
            p.unique_states, p.max_depth, p.elapsed, rate
        ));
        bar.tick();
    });
    bar.finish_and_clear();
    print_report(&report)
}

/// The bound the flags ask for: CI's or the deep one, each field overridable.
fn bound_of(args: &CheckArgs) -> Bound {
    let base = if args.deep { Bound::DEEP } else { Bound::CI };
    Bound {
        messages: args.messages.unwrap_or(base.messages),
        operations: args.operations.unwrap_or(base.operations),
        tool_steps: args.tool_steps.unwrap_or(base.tool_steps),
        crashes: base.crashes && !args.no_crashes,
        memory: args.memory.unwrap_or(base.memory),
        max_pending: args.max_pending.unwrap_or(base.max_pending),
    }
}

/// What is checked, and how.
fn print_header(args: &CheckArgs, bound: &Bound) {
    println!("coxswain check: the real core under every environment of the bound");
    println!(
        "  bound: {} message ids, {} operations per path, {} tool steps, crash-restore {}, \
         delivery memory {}, admission bound {}",
        bound.messages,
        bound.operations,
        bound.tool_steps,
        if bound.crashes { "on" } else { "off" },
        bound.memory,
        match bound.max_pending {
            0 => "none".to_owned(),
            p => p.to_string(),
        }
    );
    println!(
        "  threads: {}, {}",
        args.threads,
        if args.no_symmetry {
            "breadth-first, every renaming of the ids a state of its own"
        } else {
            "depth-first, one state per renaming of the ids (symmetry)"
        }
    );
}

/// The verdicts, every counterexample, and the exit status: success iff everything passed.
fn print_report(report: &CheckReport) -> ExitCode {
    let seconds = report.elapsed.as_secs_f64();
    println!(
        "  explored: {} unique states ({} generated), max depth {}, {:.1} s, {:.0} states/s, {}",
        report.unique_states,
        report.total_states,
        report.max_depth,
        seconds,
        report.unique_states as f64 / seconds.max(1e-3),
        if report.exhaustive {
            "exhaustive"
        } else {
            "stopped early"
        }
    );
    println!();
    let mut counterexamples = Vec::new();
    for property in &report.properties {
        let (mark, verdict) = match &property.verdict {
            Verdict::Holds => ("ok  ", "holds"),
            Verdict::Reached => ("ok  ", "reached"),
            Verdict::Unreached => ("FAIL", "never reached (vacuous at this bound)"),
            Verdict::Fails(counterexample) => {
                counterexamples.push((property.name, counterexample));
                ("FAIL", "counterexample below")
            }
        };
        println!(
            "  {mark} {:<10} {:<55} {verdict}",
            property.expectation, property.name
        );
    }
    for (name, counterexample) in counterexamples {
        println!();
        println!("counterexample for {name}:");
        if let Some(detail) = &counterexample.detail {
            println!("  {detail}");
        }
        println!("  actions: {:?}", counterexample.actions);
        println!("  trace (replay with `cargo run -p coxswain -- conform FILE`):");
        print!("{}", counterexample.trace);
        if let Some(side_by_side) = &counterexample.side_by_side {
            println!("  the last input on the core and on the spec (coxswain-spec), side by side:");
            print!("{side_by_side}");
        }
    }
    println!();
    if report.passed() {
        println!(
            "PASS: every invariant holds and every situation is reached in all {} states",
            report.unique_states
        );
        ExitCode::SUCCESS
    } else {
        println!("FAIL");
        ExitCode::FAILURE
    }
}
