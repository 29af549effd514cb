//! The conformance corpus (`tests/conformance/*.jsonl`) replayed through the same code path as
//! `coxswain conform`, on the core and on the executable spec: one replayer
//! (`coxswain_conformance::replay_on`), two [`Subject`]s.

use std::path::{Path, PathBuf};

use coxswain_conformance::{
    input_json, replay_on, CoreSubject, Failure, Given, Rejection, Replayed, Subject, Trace,
    TraceError,
};
use coxswain_core::Input;
use coxswain_spec::Spec;
use serde_json::Value;

/// The executable spec (`coxswain-spec`) as a subject of the conformance kit: the spec stays
/// independent of the core, so it is wired to the kit here, where both are visible. Its
/// rejections carry only their kind, like a port's.
#[derive(Clone, Debug, Default)]
struct SpecSubject {
    spec: Spec,
    /// What the last `begin`'s crash repair appended (S50, S59), as `"out"` values.
    repaired: Vec<Value>,
}

impl Subject for SpecSubject {
    fn begin(&mut self, given: Option<&Given<'_>>) -> Result<Result<(), Rejection>, Failure> {
        self.repaired.clear();
        let Some(given) = given else {
            self.spec = Spec::new();
            return Ok(Ok(()));
        };
        // `given.memory` is the core's `usize::MAX` for "unbounded", which is the spec's too.
        let config = coxswain_spec::Config {
            memory: given.memory,
            max_pending: given.max_pending,
        };
        let restored = match given.repair {
            Some(allowance) => {
                Spec::restore_repaired(given.log, given.seed_length, config, allowance)
            }
            None => Spec::restore_with_config(given.log, given.seed_length, config)
                .map(|spec| (spec, Vec::new())),
        };
        Ok(match restored {
            Ok((spec, repaired)) => {
                self.spec = spec;
                self.repaired = repaired
                    .into_iter()
                    .map(|event| serde_json::json!({ "event": event }))
                    .collect();
                Ok(())
            }
            Err(error) => Err(Rejection {
                kind: "invalid-log".into(),
                detail: Some(error),
            }),
        })
    }

    fn fate(&mut self, id: &str) -> Result<Value, Failure> {
        Ok(self.spec.fate(id))
    }

    fn repaired(&mut self) -> Result<Vec<Value>, Failure> {
        Ok(self.repaired.clone())
    }

    fn input(&mut self, input: &Input) -> Result<Result<Vec<Value>, Rejection>, Failure> {
        Ok(self
            .spec
            .apply(&input_json(input))
            .map_err(|kind| Rejection {
                kind: kind.into(),
                detail: None,
            }))
    }
}

/// The traces of one directory of the corpus, by name.
fn traces_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the conformance corpus exists")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    files.sort();
    files
}

/// The whole corpus: `tests/conformance/*.jsonl`, which every port replays (SPEC §13's 64
/// traces among them: `resume`, the `fate` line, `given.repair`).
fn corpus() -> Vec<PathBuf> {
    traces_in(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("conformance"))
}

/// Replays one trace file on `subject`.
fn replay_file_on(path: &Path, subject: &mut dyn Subject) -> Result<Replayed, TraceError> {
    let text = std::fs::read_to_string(path).map_err(|e| TraceError::Io(e.to_string()))?;
    replay_on(&Trace::parse(&text)?, subject)
}

/// Every trace of the corpus on `subject`: the failures, one line each.
fn corpus_failures(subject: &mut dyn Subject) -> Vec<String> {
    corpus()
        .iter()
        .filter_map(|file| {
            replay_file_on(file, subject)
                .err()
                .map(|error| format!("{}: {error}", file.display()))
        })
        .collect()
}

#[test]
fn every_trace_of_the_corpus_replays() {
    let files = corpus();
    assert_eq!(files.len(), 248, "the corpus changed size");
    let failures: Vec<String> = files
        .iter()
        .filter_map(|file| {
            coxswain_conformance::replay_file(file)
                .err()
                .map(|error| format!("{}: {error}", file.display()))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The corpus pins the spec's behaviour: every trace replays on it through the same replayer.
#[test]
fn every_trace_of_the_corpus_replays_on_the_spec() {
    let failures = corpus_failures(&mut SpecSubject::default());
    assert!(
        failures.is_empty(),
        "{} of {} trace(s) disagree with the spec:\n{}",
        failures.len(),
        corpus().len(),
        failures.join("\n")
    );
}

/// The example of `docs/FORMAT.md` ("Example: an idle follow-up, one text step"), read from the
/// document itself: the first fenced block after the heading.
fn format_md_example() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/FORMAT.md");
    let text = std::fs::read_to_string(&path).expect("docs/FORMAT.md is readable");
    let after = text
        .split_once("## Example: an idle follow-up, one text step")
        .map(|(_, after)| after)
        .expect("FORMAT.md has its example section");
    let block = after
        .split("```")
        .nth(1)
        .expect("the example section holds a fenced block");
    block.trim_start_matches('\n').to_owned()
}

/// Starts a subject afresh.
type NewSubject = fn() -> Box<dyn Subject>;

/// FORMAT.md's example replays on the core and on the spec, exactly: 4 inputs, 14 outputs; a
/// changed expectation fails both at its line; a rejection after it and an invalid given log
/// are checked by kind on both.
#[test]
fn format_md_example_replays_on_the_core_and_the_spec() {
    let example = format_md_example();
    assert_eq!(example.lines().count(), 18, "{example}");
    let subjects: [(&str, NewSubject); 2] = [
        ("core", || Box::new(CoreSubject::default())),
        ("spec", || Box::new(SpecSubject::default())),
    ];
    for (name, subject) in subjects {
        let replay = |text: &str| replay_on(&Trace::parse(text)?, subject().as_mut());
        assert_eq!(
            replay(&example),
            Ok(Replayed {
                inputs: 4,
                outputs: 14,
                rejections: 0
            }),
            "{name}"
        );
        let broken = example.replace(r#""status":"idle""#, r#""status":"running""#);
        assert!(
            matches!(replay(&broken), Err(TraceError::Mismatch { line: 18, .. })),
            "{name}"
        );
        let then_rejected = format!(
            "{example}{}\n{}\n",
            r#"{"in":{"maintenance":"end"}}"#, r#"{"rejected":"unexpected-completion"}"#
        );
        assert_eq!(
            replay(&then_rejected).map(|r| (r.inputs, r.rejections)),
            Ok((5, 1)),
            "{name}"
        );
        let invalid = r#"{"given":{"log":[{"type":"turn/start","data":{"turn":1}}]}}
{"rejected":"invalid-log"}"#;
        assert_eq!(replay(invalid).map(|r| r.rejections), Ok(1), "{name}");
    }
}

#[test]
fn every_trace_cites_its_rules_in_a_leading_note() {
    for file in corpus() {
        let text = std::fs::read_to_string(&file).unwrap();
        let first = text.lines().next().unwrap_or_default();
        let note: serde_json::Value = serde_json::from_str(first).unwrap();
        let note = note
            .get("note")
            .and_then(|n| n.as_str())
            .unwrap_or_default();
        assert!(
            note.contains('S') && note.chars().any(|c| c.is_ascii_digit()),
            "{} does not open with a note citing rules",
            file.display()
        );
    }
}

/// I15 (S58, S49) over the corpus: at every point where the live core is quiescent, a machine
/// restored from the durable log so far (the trace's given log, after crash repair if it asks
/// for one, then every event emitted since) holds the same ids in the same order and answers
/// `fate` for each of them, and for every pending id, exactly as the live one.
#[test]
fn i15_a_restored_machine_answers_every_fate_as_the_live_one_once_idle() {
    use coxswain_conformance::Line;
    use coxswain_core::{Config, Machine, MessageId, Output, Restorer, Target};

    let mut checked = 0;
    for file in corpus() {
        let text = std::fs::read_to_string(&file).expect("a readable trace");
        let trace = Trace::parse(&text).expect("a valid trace");
        let mut config = Config::new();
        let mut log: Vec<Value> = Vec::new();
        let mut seed = 0;
        let mut machine = Machine::new();
        let mut inputs = Vec::new();
        for (_, line) in &trace.lines {
            match line {
                Line::Given {
                    log: given,
                    seed_length,
                    memory,
                    max_pending,
                    repair,
                } => {
                    config = Config::new().with_delivery_memory(*memory);
                    if let Some(limit) = max_pending {
                        config = config.with_max_pending(*limit);
                    }
                    seed = *seed_length;
                    let mut restorer = Restorer::with_config(config, seed);
                    let restored = given.iter().try_for_each(|e| restorer.push_json(e));
                    if restored.is_err() {
                        break;
                    }
                    log = given.clone();
                    for event in restorer.repair(repair.unwrap_or(0)) {
                        log.push(serde_json::to_value(&event).expect("an event serializes"));
                        restorer
                            .push_event(&event)
                            .expect("repair's events restore");
                    }
                    match restorer.finish() {
                        Ok(restored) => machine = restored,
                        Err(_) => break,
                    }
                }
                Line::In(input) => inputs.push(input.clone()),
                _ => {}
            }
        }
        for input in inputs {
            let Ok(transition) = machine.handle(input) else {
                continue;
            };
            for output in transition.into_outputs().collect::<Vec<_>>() {
                if let Output::Event(event) = output {
                    log.push(serde_json::to_value(&event).expect("an event serializes"));
                }
            }
            if !machine.is_quiescent() {
                continue;
            }
            let restored = match Machine::restore_with(config, &log, seed) {
                Ok(restored) => restored,
                // A live turn past 2^53 - 2 is not restorable by design (S46's bound).
                Err(e) if e.violation == coxswain_core::LogViolation::TurnWithoutNumber => continue,
                Err(e) => panic!("{}: the log so far restores: {e}", file.display()),
            };
            let held: Vec<&MessageId> = machine.delivered().collect();
            assert_eq!(
                restored.delivered().collect::<Vec<_>>(),
                held,
                "{}",
                file.display()
            );
            let pending = [Target::NextTurn, Target::NextStep]
                .into_iter()
                .flat_map(|target| machine.pending(target).map(|p| p.message().id()));
            for id in held.iter().copied().chain(pending) {
                assert_eq!(
                    restored.fate(id),
                    machine.fate(id),
                    "{}: fate of {id}",
                    file.display()
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 500, "only {checked} fates compared");
}
