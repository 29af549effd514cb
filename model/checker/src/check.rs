//! Running the model checker and reporting what it proved.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use coxswain_conformance::Recorder;
use serde_json::Value;
use stateright::{Checker, Expectation, HasDiscoveries, Model, Path};

use crate::model::{Action, DeliveryModel, State};

/// What a property's check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// `always` / `eventually`: no counterexample in the whole bound.
    Holds,
    /// `always` / `eventually`: a counterexample.
    Fails(Counterexample),
    /// `sometimes`: an example was found.
    Reached,
    /// `sometimes`: the bound never reaches it (the property is vacuous here).
    Unreached,
}

/// A path that breaks a property, as the checker found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counterexample {
    /// The environment's choices, in order.
    pub actions: Vec<Action>,
    /// The monitor's account of the violation, or the spec's disagreement (for `always`
    /// properties).
    pub detail: Option<String>,
    /// When the core and the spec disagree: the failing input with the core's and the spec's
    /// outputs and observable state side by side.
    pub side_by_side: Option<String>,
    /// The path as a conformance trace (FORMAT.md) that `coxswain conform` replays.
    pub trace: String,
}

/// One property and its verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PropertyReport {
    /// The property's name.
    pub name: &'static str,
    /// `always`, `eventually` or `sometimes`.
    pub expectation: &'static str,
    /// What the check found.
    pub verdict: Verdict,
}

/// The outcome of a model-checking run.
#[derive(Clone, Debug)]
pub struct CheckReport {
    /// Distinct states explored.
    pub unique_states: usize,
    /// States generated, repeats included.
    pub total_states: usize,
    /// The deepest path explored.
    pub max_depth: usize,
    /// Wall-clock time.
    pub elapsed: Duration,
    /// Whether every reachable state was explored (false if stopped at a discovery).
    pub exhaustive: bool,
    /// Every property with its verdict.
    pub properties: Vec<PropertyReport>,
}

impl CheckReport {
    /// Every safety and liveness property holds and every `sometimes` property was reached.
    pub fn passed(&self) -> bool {
        self.exhaustive
            && self
                .properties
                .iter()
                .all(|p| matches!(p.verdict, Verdict::Holds | Verdict::Reached))
    }

    /// The report of one property.
    pub fn property(&self, name: &str) -> Option<&PropertyReport> {
        self.properties.iter().find(|p| p.name == name)
    }
}

/// Progress while the checker runs.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Distinct states so far.
    pub unique_states: usize,
    /// Deepest path so far.
    pub max_depth: usize,
    /// Time so far.
    pub elapsed: Duration,
}

/// Checks the model exhaustively with breadth-first search (depth-first with symmetry reduction,
/// see [`DeliveryModel::with_symmetry`]) on `threads` threads, calling
/// `progress` about every `interval`. With `stop_at`, stops as soon as any of those properties
/// has a discovery (used to prove seeded bugs are caught quickly); the run is then not
/// exhaustive.
pub fn check(
    model: DeliveryModel,
    threads: usize,
    stop_at: Option<BTreeSet<&'static str>>,
    interval: Duration,
    progress: impl FnMut(Progress),
) -> CheckReport {
    let start = Instant::now();
    let mut builder = model.clone().checker().threads(threads.max(1));
    if let Some(names) = stop_at.clone() {
        builder = builder.finish_when(HasDiscoveries::AnyOf(names));
    }
    if model.symmetry() {
        let checker = builder.symmetry().spawn_dfs();
        report(model, checker, stop_at, start, interval, progress)
    } else {
        let checker = builder.spawn_bfs();
        report(model, checker, stop_at, start, interval, progress)
    }
}

/// Waits for a spawned checker, reporting progress, and reports what it proved.
fn report(
    model: DeliveryModel,
    checker: impl Checker<DeliveryModel>,
    stop_at: Option<BTreeSet<&'static str>>,
    start: Instant,
    interval: Duration,
    mut progress: impl FnMut(Progress),
) -> CheckReport {
    while !checker.is_done() {
        progress(Progress {
            unique_states: checker.unique_state_count(),
            max_depth: checker.max_depth(),
            elapsed: start.elapsed(),
        });
        std::thread::sleep(interval);
    }
    let checker = checker.join();
    let elapsed = start.elapsed();
    let discoveries = checker.discoveries();
    let properties = model
        .properties()
        .into_iter()
        .map(|property| {
            let found = discoveries.get(property.name);
            let verdict = match (&property.expectation, found) {
                (Expectation::Sometimes, Some(_)) => Verdict::Reached,
                (Expectation::Sometimes, None) => Verdict::Unreached,
                (_, None) => Verdict::Holds,
                (_, Some(path)) => Verdict::Fails(counterexample(&model, path.clone())),
            };
            PropertyReport {
                name: property.name,
                expectation: match property.expectation {
                    Expectation::Always => "always",
                    Expectation::Eventually => "eventually",
                    Expectation::Sometimes => "sometimes",
                },
                verdict,
            }
        })
        .collect();
    let stopped_early =
        stop_at.is_some_and(|names| names.iter().any(|n| discoveries.contains_key(n)));
    CheckReport {
        unique_states: checker.unique_state_count(),
        total_states: checker.state_count(),
        max_depth: checker.max_depth(),
        elapsed,
        exhaustive: !stopped_early,
        properties,
    }
}

/// Turns a checker path into a counterexample with its conformance trace.
pub fn counterexample(model: &DeliveryModel, path: Path<State, Action>) -> Counterexample {
    let last = path.last_state();
    let mismatch = last.mismatch.clone();
    let details: Vec<String> = last
        .monitor
        .violation()
        .map(ToString::to_string)
        .into_iter()
        .chain(mismatch.as_ref().map(ToString::to_string))
        .collect();
    let detail = (!details.is_empty()).then(|| details.join("; "));
    let steps: Vec<(State, Option<Action>)> = path.into();
    let actions: Vec<Action> = steps.iter().filter_map(|(_, action)| *action).collect();
    Counterexample {
        trace: trace(model, &steps, detail.as_deref()),
        actions,
        detail,
        side_by_side: mismatch.map(|m| m.side_by_side()),
    }
}

/// Records the inputs of a path as a FORMAT.md trace. A crash-restore starts the trace over
/// from the repaired log (a `given` line), since a trace has one machine.
fn trace(model: &DeliveryModel, steps: &[(State, Option<Action>)], detail: Option<&str>) -> String {
    let note = format!(
        "model-checker counterexample ({:?}){}",
        model.bound(),
        detail.map(|d| format!(": {d}")).unwrap_or_default()
    );
    let mut recorder = Recorder::with_config(&note, model.config());
    for (state, action) in steps {
        let Some(action) = *action else { continue };
        if action == Action::CrashRestore {
            let mut log: Vec<Value> = recorder.log().to_vec();
            log.extend(
                state
                    .monitor
                    .auditor()
                    .restorer()
                    .repair(crate::monitor::REDELIVERY)
                    .iter()
                    .filter_map(|event| serde_json::to_value(event).ok()),
            );
            match Recorder::restored(&note, model.config(), &log, 0) {
                Ok(restored) => recorder = restored,
                Err(_) => break,
            }
            continue;
        }
        if let Some(input) = model.input(state, action) {
            // Rejections are recorded as `rejected` lines.
            let _ = recorder.input(input);
        }
    }
    recorder.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Bound;

    #[test]
    fn a_small_bound_is_exhaustive_and_safe() {
        let bound = Bound {
            messages: 2,
            operations: 2,
            tool_steps: 1,
            crashes: true,
            memory: 0,
            max_pending: 0,
        };
        let report = check(
            DeliveryModel::new(bound),
            1,
            None,
            Duration::from_millis(1),
            |_| {},
        );
        assert!(report.exhaustive);
        // 765 before SPEC §13 (`resume`, and a crash's repair redelivering with A = 1).
        assert_eq!(
            report.unique_states, 813,
            "pinned: a truncated run would differ"
        );
        for property in &report.properties {
            match (property.expectation, &property.verdict) {
                ("sometimes", _) | (_, Verdict::Holds) => {}
                (_, verdict) => panic!("{}: {verdict:?}", property.name),
            }
        }
        // Too small to reach everything: `passed` needs every situation reached.
        assert!(!report.passed());
        assert_eq!(
            report
                .property("reach: steer after cancel retargeted")
                .map(|p| &p.verdict),
            Some(&Verdict::Unreached)
        );
    }

    /// Symmetry reduction is sound here: at a bound small enough to search whole both ways, it
    /// visits fewer states and every property gets the same verdict (holds, reached or not).
    #[test]
    fn symmetry_keeps_every_verdict_and_visits_fewer_states() {
        let bound = Bound {
            messages: 3,
            operations: 3,
            tool_steps: 1,
            crashes: true,
            memory: 1,
            max_pending: 0,
        };
        let run = |model: DeliveryModel| check(model, 2, None, Duration::from_millis(1), |_| {});
        let whole = run(DeliveryModel::new(bound));
        let reduced = run(DeliveryModel::new(bound).with_symmetry());
        assert!(whole.exhaustive && reduced.exhaustive);
        let verdicts = |report: &CheckReport| -> Vec<(&'static str, &'static str)> {
            report
                .properties
                .iter()
                .map(|p| {
                    let verdict = match p.verdict {
                        Verdict::Holds => "holds",
                        Verdict::Reached => "reached",
                        Verdict::Unreached => "unreached",
                        Verdict::Fails(_) => "fails",
                    };
                    (p.name, verdict)
                })
                .collect()
        };
        assert_eq!(verdicts(&whole), verdicts(&reduced));
        assert!(
            reduced.unique_states * 2 < whole.unique_states,
            "{} of {}",
            reduced.unique_states,
            whole.unique_states
        );
    }
}
