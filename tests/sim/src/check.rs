//! The checks on a log image: it parses (a torn final line aside), the Auditor passes (I1–I11,
//! the splice rules), every acknowledged message is in it and no message reported failed is.

use std::collections::BTreeSet;

use coxswain_core::Config;
use coxswain_log::{parse, Auditor};

use crate::ledger::{Ledger, Outcome};

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
    let mut findings = Findings::default();
    let parsed = match parse(bytes) {
        Ok(parsed) => parsed,
        Err(error) => {
            findings
                .violations
                .push(format!("{when}: the log is corrupt: {error}"));
            return findings;
        }
    };
    let mut auditor = Auditor::with_config(Config::new().with_delivery_memory(delivery_memory));
    let mut inserted = BTreeSet::new();
    for record in &parsed.records {
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
