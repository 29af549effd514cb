//! The conformance corpus (`tests/conformance/*.jsonl`) replayed through the same code path as
//! `coxswain conform`.

use std::path::PathBuf;

use coxswain_conformance::replay_file;

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

#[test]
fn every_trace_of_the_corpus_replays() {
    let files = corpus();
    assert!(
        files.len() >= 60,
        "the corpus shrank to {} traces",
        files.len()
    );
    let failures: Vec<String> = files
        .iter()
        .filter_map(|file| {
            replay_file(file)
                .err()
                .map(|error| format!("{}: {error}", file.display()))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
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
