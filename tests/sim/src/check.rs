//! The checks on a log image: it parses (a torn final line aside), the Auditor passes (I1–I11,
//! the splice rules), every acknowledged message is in it and no message reported failed is;
//! and on each crash repair: it appends exactly what S50 and S59 call for.

use std::collections::BTreeSet;

use coxswain_core::Config;
use coxswain_log::{parse, Auditor, Record};
use serde_json::{json, Value};

use crate::ledger::{Ledger, Outcome};
use crate::story::{Repair, Story};

/// What one check of an image found.
#[derive(Debug, Default)]
pub struct Findings {
    /// Acknowledged ids missing from the image.
    pub lost: Vec<String>,
    /// Ids reported failed that the image holds.
    pub phantom: Vec<String>,
    /// Anything else wrong (corrupt, audit failure).
    pub violations: Vec<String>,
}

/// The ids every splice of the image inserted, and the audit's verdict.
pub fn check_image(bytes: &[u8], ledger: &Ledger, delivery_memory: usize, when: &str) -> Findings {
    match parse(bytes) {
        Ok(parsed) => check_records(&parsed.records, ledger, delivery_memory, when),
        Err(error) => Findings {
            violations: vec![format!("{when}: the log is corrupt: {error}")],
            ..Findings::default()
        },
    }
}

/// [`check_image`] of an image already parsed.
pub fn check_records(
    records: &[Record],
    ledger: &Ledger,
    delivery_memory: usize,
    when: &str,
) -> Findings {
    let mut findings = Findings::default();
    let mut auditor = Auditor::with_config(Config::new().with_delivery_memory(delivery_memory));
    let mut inserted = BTreeSet::new();
    for record in records {
        if let Err(error) = auditor.push_json(&record.event) {
            findings.violations.push(format!(
                "{when}: the Auditor rejects line {}: {error}",
                record.line
            ));
            break;
        }
        if record.event["type"] == "agent/inbox/spliced" {
            if let Some(messages) = record.event["data"]["inserted"].as_array() {
                for message in messages {
                    if let Some(id) = message["id"].as_str() {
                        inserted.insert(id.to_owned());
                    }
                }
            }
        }
    }
    for (id, outcome) in ledger.outcomes() {
        match outcome {
            Outcome::Acked if !inserted.contains(&id) => findings.lost.push(id),
            Outcome::Failed if inserted.contains(&id) => findings.phantom.push(id),
            _ => {}
        }
    }
    findings
}

/// What one crash repair did, as the simulator reads it.
#[derive(Debug)]
pub struct Repaired {
    /// What [`Story::repair`] expected (and, without violations, what was appended).
    pub repair: Repair,
    /// The repaired log breaks S50 or S59.
    pub violations: Vec<String>,
    /// The simulator's reading of the whole repaired log.
    pub story: Story,
}

fn event(record: &Record) -> Value {
    json!({"type": record.event["type"], "data": record.event["data"]})
}

/// A log image: its bytes and the records they hold.
#[derive(Clone, Copy, Debug)]
pub struct Image<'a> {
    /// The bytes.
    pub bytes: &'a [u8],
    /// Their records.
    pub records: &'a [Record],
}

/// The repair an open made (S50, S59): `after` keeps every complete record of `before` and
/// appends exactly what the simulator's own reading of `before` expects from crash repair with
/// allowance `allowance` ([`Story::repair`]): the closers of the interrupted turn, then one
/// splice per message it claimed after its last `step/start` (I16), none for a balanced log.
/// With `resumed` (the open sent `resume`, S57) the records of what that started may follow.
pub fn check_repair(
    before: Image<'_>,
    after: Image<'_>,
    delivery_memory: usize,
    allowance: u64,
    resumed: bool,
    when: &str,
) -> Repaired {
    let complete = before
        .bytes
        .iter()
        .rposition(|byte| *byte == b'\n')
        .map_or(0, |at| at + 1);
    let kept = after.records.len() >= before.records.len()
        && after.bytes.starts_with(&before.bytes[..complete]);
    let (before, after) = (before.records, after.records);
    let mut story = Story::for_repair(delivery_memory);
    for record in before {
        story.read(&record.event);
    }
    let repair = story.repair(allowance);
    let mut violations = Vec::new();
    let mut appended: Vec<Value> = after.iter().skip(before.len()).map(event).collect();
    if resumed {
        appended.truncate(repair.events.len());
    }
    if !kept {
        violations.push(format!(
            "{when}: crash repair did not keep the {} records of the log",
            before.len()
        ));
        story = story_of(after, delivery_memory);
    } else {
        if appended != repair.events {
            let lines = |events: &[Value]| {
                let lines: Vec<String> = events.iter().map(Value::to_string).collect();
                format!("[{}]", lines.join(", "))
            };
            violations.push(format!(
                "{when}: crash repair (S50, S59 with A = {allowance}) appended {} where the \
                 log calls for {}",
                lines(&appended),
                lines(&repair.events)
            ));
        }
        for record in after.iter().skip(before.len()) {
            story.read(&record.event);
        }
    }
    Repaired {
        repair,
        violations,
        story,
    }
}

/// The simulator's reading of `records`.
pub fn story_of(records: &[Record], delivery_memory: usize) -> Story {
    let mut story = Story::new(delivery_memory);
    for record in records {
        story.read(&record.event);
    }
    story
}

/// The fate of each of `ids` (S58) in the simulator's reading of `bytes` cut to each of
/// `lengths` (whole records only): one list per length, in the order given.
pub fn fates_at(
    bytes: &[u8],
    delivery_memory: usize,
    lengths: &[usize],
    ids: &[String],
) -> Result<Vec<Vec<Value>>, String> {
    let parsed = parse(bytes).map_err(|error| format!("the log is corrupt: {error}"))?;
    let ends: Vec<usize> = bytes
        .iter()
        .enumerate()
        .filter(|(_, byte)| **byte == b'\n')
        .map(|(at, _)| at + 1)
        .collect();
    let mut story = Story::new(delivery_memory);
    let mut read = 0;
    let mut at: Vec<(usize, usize)> = lengths
        .iter()
        .enumerate()
        .map(|(index, &length)| (ends.partition_point(|&end| end <= length), index))
        .collect();
    at.sort_unstable();
    let mut fates = vec![Vec::new(); lengths.len()];
    for (records, index) in at {
        while read < records.min(parsed.records.len()) {
            story.read(&parsed.records[read].event);
            read += 1;
        }
        fates[index] = ids.iter().map(|id| story.fate(id)).collect();
    }
    Ok(fates)
}
