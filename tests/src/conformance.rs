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
}

impl Subject for SpecSubject {
    fn begin(&mut self, given: Option<&Given<'_>>) -> Result<Result<(), Rejection>, Failure> {
        let Some(given) = given else {
            self.spec = Spec::new();
            return Ok(Ok(()));
        };
        let config = coxswain_spec::Config {
            memory: given.memory,
            max_pending: given.max_pending,
        };
        Ok(
            match Spec::restore_with_config(given.log, given.seed_length, config) {
                Ok(spec) => {
                    self.spec = spec;
                    Ok(())
                }
                Err(error) => Err(Rejection {
                    kind: "invalid-log".into(),
                    detail: Some(error),
                }),
            },
        )
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

fn corpus() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("conformance");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the conformance corpus exists")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    files.sort();
    files
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
    assert_eq!(files.len(), 184, "the corpus changed size");
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
