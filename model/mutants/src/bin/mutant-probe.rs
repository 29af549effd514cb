//! `mutant-probe PROPERTY [MESSAGES OPERATIONS TOOL_STEPS]`: the model-check killer of the mutant
//! runner. It is built inside the mutated copy of the workspace, so the core it checks is the
//! mutant; it model-checks at the CI bound (or the one given), stopping at the first
//! counterexample to `PROPERTY`, and prints one JSON object on stdout for the runner, which
//! replays the counterexample's trace on the real core.
#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::time::Duration;

use coxswain_checker::stateright::Model;
use coxswain_checker::{
    check, check_agent, check_session, Action, AgentBound, AgentProperty, Bound, DeliveryModel,
    ModelReport, SessionBound, SessionProperty, Verdict,
};
use serde_json::json;

/// Takes `FLAG N` out of `args`: `Some(0)` when absent, `None` (after saying why) when `N` is not
/// a small number.
fn take_setting(args: &mut Vec<String>, flag: &str) -> Option<u8> {
    let Some(at) = args.iter().position(|arg| arg == flag) else {
        return Some(0);
    };
    let value = args.get(at + 1).and_then(|n| n.parse().ok());
    if value.is_none() {
        eprintln!("mutant-probe: {flag} needs a small number");
        return None;
    }
    args.drain(at..at + 2);
    value
}

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(memory), Some(max_pending)) = (
        take_setting(&mut args, "--memory"),
        take_setting(&mut args, "--max-pending"),
    ) else {
        return ExitCode::from(2);
    };
    let Some(wanted) = args.first() else {
        eprintln!(
            "usage: mutant-probe PROPERTY [MESSAGES OPERATIONS TOOL_STEPS] [--memory W] \
             [--max-pending P]"
        );
        return ExitCode::from(2);
    };
    if let Some(session) = SessionProperty::named(wanted) {
        return probe_session(session);
    }
    if let Some(agent) = AgentProperty::named(wanted) {
        return probe_agent(agent);
    }
    let mut bound = Bound::CI.with_memory(memory).with_max_pending(max_pending);
    if let [_, messages, operations, tool_steps] = args.as_slice() {
        match (messages.parse(), operations.parse(), tool_steps.parse()) {
            (Ok(m), Ok(o), Ok(t)) => {
                bound.messages = m;
                bound.operations = o;
                bound.tool_steps = t;
            }
            _ => {
                eprintln!("mutant-probe: the bound must be three small numbers");
                return ExitCode::from(2);
            }
        }
    }
    let model = DeliveryModel::new(bound).with_symmetry();
    let Some(property) = model
        .properties()
        .iter()
        .map(|p| p.name)
        .find(|name| name == wanted)
    else {
        eprintln!("mutant-probe: no property {wanted:?}");
        return ExitCode::from(2);
    };
    let report = check(
        model,
        2,
        Some(BTreeSet::from([property])),
        Duration::from_millis(5),
        |_| {},
    );
    let failing: Vec<&str> = report
        .properties
        .iter()
        .filter(|p| matches!(p.verdict, Verdict::Fails(_)))
        .map(|p| p.name)
        .collect();
    let counterexample = report.property(property).and_then(|p| match &p.verdict {
        Verdict::Fails(counterexample) => Some(counterexample),
        _ => None,
    });
    let out = json!({
        "property": property,
        "failing": failing,
        "exhaustive": report.exhaustive,
        "unique_states": report.unique_states,
        "elapsed_ms": report.elapsed.as_millis() as u64,
        "detail": counterexample.and_then(|c| c.detail.clone()),
        "crash_restore": counterexample
            .is_some_and(|c| c.actions.contains(&Action::CrashRestore)),
        "trace": counterexample.map(|c| c.trace.clone()),
    });
    println!("{out}");
    ExitCode::SUCCESS
}

/// The session layer's killer: its model at its CI bound, stopping at the first counterexample
/// to `property`. Its counterexamples are session paths, not FORMAT.md traces (no `trace`).
fn probe_session(property: SessionProperty) -> ExitCode {
    let report = check_session(SessionBound::CI, 2, Some(property.name()));
    print_path_report(property.name(), &report, |(actions, detail)| {
        format!("{detail} (after {actions:?})")
    })
}

/// The agent loop's killer: its model at its CI bound, stopping at the first counterexample to
/// `property`. Its counterexamples are agent-loop paths, not FORMAT.md traces (no `trace`).
fn probe_agent(property: AgentProperty) -> ExitCode {
    let report = check_agent(AgentBound::CI, 2, Some(property.name()));
    print_path_report(property.name(), &report, |(hooks, actions, detail)| {
        format!("{detail} (hooks {hooks:?}, after {actions:?})")
    })
}

/// Prints a session- or agent-model run as the runner reads it: `shown` spells the
/// counterexample of `property`.
fn print_path_report<C>(
    property: &str,
    report: &ModelReport<C>,
    shown: impl Fn(&C) -> String,
) -> ExitCode {
    let failing: Vec<&str> = report
        .properties
        .iter()
        .filter(|p| p.counterexample.is_some())
        .map(|p| p.name)
        .collect();
    let detail = report
        .properties
        .iter()
        .find(|p| p.name == property)
        .and_then(|p| p.counterexample.as_ref())
        .map(shown);
    let out = json!({
        "property": property,
        "failing": failing,
        "exhaustive": report.exhaustive,
        "unique_states": report.unique_states,
        "elapsed_ms": 0,
        "detail": detail,
        "crash_restore": false,
        "trace": null,
    });
    println!("{out}");
    ExitCode::SUCCESS
}
