//! The tally of injected faults, by kind.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

/// Every kind of fault the simulator injects (the report lists them in this order).
pub const KINDS: [&str; 17] = [
    "write-eio",
    "write-enospc",
    "short-write",
    "torn-write",
    "sync-eio-append",
    "sync-eio-final",
    "log-latency",
    "crash-in-log",
    "crash-at-time",
    "host-panic",
    "host-hang",
    "host-slow",
    "host-late-answer",
    "host-fail",
    "dispose",
    "close",
    "reopen",
];

/// Counts per fault kind, shared by the log, the host and the runner of one seed.
#[derive(Clone, Debug, Default)]
pub struct Tally(Arc<Mutex<BTreeMap<&'static str, u64>>>);

impl Tally {
    /// Counts one `kind`.
    pub fn note(&self, kind: &'static str) {
        *self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(kind)
            .or_default() += 1;
    }

    /// The counts so far.
    pub fn counts(&self) -> Counts {
        Counts(
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        )
    }
}

/// Fault counts by kind (kinds never injected are absent).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts(pub BTreeMap<&'static str, u64>);

impl Counts {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &Counts) {
        for (kind, n) in &other.0 {
            *self.0.entry(kind).or_default() += n;
        }
    }

    /// The count of `kind`.
    pub fn get(&self, kind: &str) -> u64 {
        self.0.get(kind).copied().unwrap_or(0)
    }

    /// The total over every kind.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }
}

impl fmt::Display for Counts {
    /// `kind=n` for every kind, in [`KINDS`] order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = KINDS
            .iter()
            .map(|kind| format!("{kind}={}", self.get(kind)))
            .collect();
        f.write_str(&parts.join(" "))
    }
}
