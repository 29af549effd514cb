//! The conformance corpus (`tests/conformance/*.jsonl`) replayed on the spec, which is how
//! the corpus pins the spec's behaviour, and the replayer's own tests.

use std::num::NonZeroUsize;

use serde_json::Value;

use super::{Config, Spec};

/// Replays one trace file's text; returns the first mismatch as text, if any.
fn replay_trace(text: &str) -> Result<(), String> {
    let mut lines: Vec<(usize, String, Value)> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line_no = n + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let v: Value =
            serde_json::from_str(raw).map_err(|e| format!("line {line_no}: not JSON: {e}"))?;
        let obj = v
            .as_object()
            .filter(|o| o.len() == 1)
            .ok_or_else(|| format!("line {line_no}: not a one-key object"))?;
        let (k, val) = obj.iter().next().expect("one key");
        if k == "note" {
            continue;
        }
        lines.push((line_no, k.clone(), val.clone()));
    }
    let mut i = 0;
    let mut model = Spec::new();
    if let Some((line_no, k, given)) = lines.first() {
        if k == "given" {
            // FORMAT.md: `log` may be omitted (a fresh machine); `memory` is W (S51), default 0;
            // `maxPending` is the admission bound P ≥ 1 (S55), omitted: unbounded.
            let log = match given.get("log") {
                None => &Vec::new(),
                Some(log) => log
                    .as_array()
                    .ok_or_else(|| format!("line {line_no}: given.log is not a list"))?,
            };
            let seed = given.get("seedLength").and_then(Value::as_u64).unwrap_or(0) as usize;
            let memory = given.get("memory").and_then(Value::as_u64).unwrap_or(0) as usize;
            let max_pending = match given.get("maxPending") {
                None => None,
                Some(p) => Some(
                    p.as_u64()
                        .and_then(|p| NonZeroUsize::new(p as usize))
                        .ok_or_else(|| {
                            format!("line {line_no}: given.maxPending is not an integer >= 1")
                        })?,
                ),
            };
            let config = Config {
                memory,
                max_pending,
            };
            let expect_invalid = matches!(
                lines.get(1),
                Some((_, k, v)) if k == "rejected" && v == "invalid-log"
            );
            match (Spec::restore_with_config(log, seed, config), expect_invalid) {
                (Ok(_), true) => {
                    return Err(format!(
                        "line {}: expected invalid-log, model restored the log",
                        lines[1].0
                    ))
                }
                (Err(e), false) => {
                    return Err(format!(
                        "line {line_no}: model rejects the given log ({e}), trace expects it valid"
                    ))
                }
                (Err(_), true) => return Ok(()),
                (Ok(r), false) => model = r,
            }
            i = 1;
        }
    }
    while i < lines.len() {
        let (in_line, k, input) = &lines[i];
        if k != "in" {
            return Err(format!("line {in_line}: unexpected {k:?} line"));
        }
        i += 1;
        let mut expected: Vec<(usize, Value)> = Vec::new();
        let mut rejected: Option<(usize, String)> = None;
        while i < lines.len() && lines[i].1 != "in" {
            let (n, k, v) = &lines[i];
            match k.as_str() {
                "out" if rejected.is_none() => expected.push((*n, v.clone())),
                "rejected" if rejected.is_none() && expected.is_empty() => {
                    rejected = Some((*n, v.as_str().unwrap_or("?").to_string()));
                }
                _ => return Err(format!("line {n}: unexpected {k:?} line")),
            }
            i += 1;
        }
        let actual = model.apply(input);
        match (actual, rejected) {
            (Err(kind), Some((n, want))) => {
                if kind != want {
                    return Err(format!(
                        "line {n}: expected rejected {want:?}, model rejected {kind:?} (input line {in_line})"
                    ));
                }
            }
            (Err(kind), None) => {
                return Err(format!(
                    "line {in_line}: model rejected {kind:?}, trace expects outputs {:?}",
                    expected.iter().map(|(_, v)| v).collect::<Vec<_>>()
                ))
            }
            (Ok(outs), Some((n, want))) => {
                return Err(format!(
                    "line {n}: expected rejected {want:?}, model accepted with outputs {outs:?}"
                ))
            }
            (Ok(outs), None) => {
                let len = outs.len().max(expected.len());
                for j in 0..len {
                    let want = expected.get(j);
                    let got = outs.get(j);
                    if want.map(|(_, v)| v) != got {
                        let at = want.map_or_else(
                            || format!("after line {}", expected.last().map_or(*in_line, |e| e.0)),
                            |(n, _)| format!("line {n}"),
                        );
                        return Err(format!(
                            "{at} (input line {in_line}, output #{j}): expected {} / model {}\n      all expected: {:?}\n      all model:    {:?}",
                            want.map_or("<nothing>".to_string(), |(_, v)| v.to_string()),
                            got.map_or("<nothing>".to_string(), Value::to_string),
                            expected.iter().map(|(_, v)| v.to_string()).collect::<Vec<_>>(),
                            outs.iter().map(Value::to_string).collect::<Vec<_>>(),
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

#[test]
fn spec_replays_format_example_as_trace() {
    let trace = r#"
{"note":"FORMAT.md example"}
{"in":{"followup":{"id":"a","source":{"kind":"user"},"content":"hi"}}}
{"out":{"event":{"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"inserted":[{"id":"a","source":{"kind":"user"},"content":"hi"}],"wakeup":true}}}}
{"out":{"notify":{"type":"agent/inbox/inserted","message":{"id":"a","source":{"kind":"user"},"content":"hi"}}}}
{"out":{"notify":{"type":"agent/status","status":"running"}}}
{"out":{"event":{"type":"turn/start","data":{"turn":1}}}}
{"out":{"event":{"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}}}}
{"out":{"notify":{"type":"agent/inbox/claimed","message":{"id":"a","source":{"kind":"user"},"content":"hi"},"turn":1}}}
{"out":{"request":{"preStep":{"turn":1,"step":1,"messages":[{"id":"a","source":{"kind":"user"},"content":"hi"}]}}}}
{"in":{"preStep":{"enter":[{"id":"a","source":{"kind":"user"},"content":"hi"}]}}}
{"out":{"event":{"type":"step/start","data":{"turn":1,"step":1}}}}
{"out":{"event":{"type":"user/message","data":{"id":"a","source":{"kind":"user"},"content":"hi"}}}}
{"out":{"request":{"step":{"turn":1,"step":1}}}}
{"in":{"step":"completed"}}
{"out":{"event":{"type":"step/end","data":{"turn":1,"step":1}}}}
{"out":{"request":{"turnStopping":{"turn":1}}}}
{"in":{"turnStopping":"done"}}
{"out":{"event":{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}}}
{"out":{"notify":{"type":"agent/status","status":"idle"}}}
{"in":{"maintenance":"end"}}
{"rejected":"unexpected-completion"}
"#;
    assert_eq!(replay_trace(trace), Ok(()));
    // The replayer itself notices a wrong expectation.
    let broken = trace.replace(r#""status":"idle""#, r#""status":"running""#);
    assert!(replay_trace(&broken).is_err());
    let invalid = r#"{"given":{"log":[{"type":"turn/start","data":{"turn":1}}]}}
{"rejected":"invalid-log"}"#;
    assert_eq!(replay_trace(invalid), Ok(()));
}

#[test]
fn spec_replays_corpus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance");
    let mut files: Vec<std::path::PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    let mut failures: Vec<String> = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable trace");
        if let Err(e) = replay_trace(&text) {
            let name = path
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            failures.push(format!("{name}: {e}"));
        }
    }
    eprintln!(
        "spec replayed {} trace(s) from {}, {} mismatching",
        files.len(),
        dir.display(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} trace(s) disagree with the spec:\n  {}",
        failures.len(),
        files.len(),
        failures.join("\n  ")
    );
}
