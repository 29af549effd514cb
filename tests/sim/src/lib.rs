//! # coxswain-driver-sim
//!
//! Deterministic simulation of the tokio adapter. A seed fixes everything: the schedule of
//! clients (every kind of send, queue edits, cancels, maintenance, dispose, retries, limit
//! breakers), the faults of the log ([`disk::SimLog`]: EIO and ENOSPC on write and sync, short
//! and torn writes, latency spikes, crashes at any await point that keep only what was synced
//! and a random prefix of the rest) and of the host ([`host::SimHost`]: panics, hangs that
//! ignore the cancellation token, slow answers, answers after the abort), and the crashes at
//! virtual instants. Each life of the agent runs in a fresh current-thread runtime with paused
//! time, so hours of virtual time take milliseconds and nothing depends on the wall clock; a
//! crash drops the runtime with every task mid-await.
//!
//! The checker, per seed: every acknowledged delivery is in the log after every restore; no
//! delivery reported failed is ever in it (an indeterminate one is neither); the Auditor passes
//! on every image and after every repair; every client call returns or errors within an hour of
//! virtual time (else a deadlock); the pending lists stay within `max_pending` (the memory
//! bound, or what a restored log held). SPEC §13: every open repairs with the redelivery
//! allowance `A = 1` and sends `resume`; each repair appends exactly what the simulator's own
//! reading of the log ([`story`]) calls for (S59, I16); every claimed message runs in the next
//! step of its turn unless that turn ends first, and nothing runs twice; every `fate` answer is
//! that reading's (S58). A failing seed reproduces by its number: `cargo run -p coxswain-driver-sim -- --seeds N-N`.
//!
//! [`file_faults`] injects the faults of a real log file into coxswain-tokio's `FileLog` and
//! `SegmentLog` through their `LogFile` seam, for the tokio driver's own tests.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod check;
pub mod disk;
pub mod faults;
pub mod file_faults;
pub mod flood;
pub mod host;
pub mod ledger;
pub mod rng;
mod run;
pub mod schedule;
pub mod story;
pub mod threads;

use std::fmt;
use std::ops::RangeInclusive;
use std::sync::Once;

pub use run::{run_seed, Resumes, SeedReport, Settings, ALLOWANCE};

use crate::faults::Counts;

/// The totals of a range of seeds.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    /// Seeds run.
    pub seeds: u64,
    /// Lives (agent opens) run.
    pub lives: u64,
    /// Faults injected, by kind.
    pub faults: Counts,
    /// Deliveries acknowledged.
    pub acked: u64,
    /// Deliveries reported failed.
    pub failed: u64,
    /// Deliveries with an unknown outcome.
    pub unknown: u64,
    /// Failed and unknown deliveries by error variant.
    pub reasons: std::collections::BTreeMap<String, u64>,
    /// Failed appends the agent survived (a later delivery of the same life acknowledged).
    pub survived: u64,
    /// Acknowledged deliveries lost: must be 0.
    pub lost: u64,
    /// Failed deliveries found in a log: must be 0.
    pub phantom: u64,
    /// Other violations.
    pub violations: u64,
    /// The failing seeds, each with its first finding.
    pub failing: Vec<(u64, String)>,
    /// Crash repair with redelivery, `resume` and `fate` (§13).
    pub resumes: Resumes,
}

impl Totals {
    /// Adds one seed's report.
    pub fn add(&mut self, report: &SeedReport) {
        self.seeds += 1;
        self.lives += report.lives;
        self.faults.add(&report.faults);
        self.acked += report.acked;
        self.failed += report.failed;
        self.unknown += report.unknown;
        self.survived += report.survived;
        for (reason, n) in &report.reasons {
            *self.reasons.entry(reason.clone()).or_default() += n;
        }
        self.lost += report.lost.len() as u64;
        self.phantom += report.phantom.len() as u64;
        self.violations += report.violations.len() as u64;
        self.resumes.add(&report.resumes);
        if !report.passed() {
            let first = report
                .lost
                .first()
                .map(|id| format!("acknowledged `{id}` lost"))
                .or_else(|| {
                    report
                        .phantom
                        .first()
                        .map(|id| format!("failed `{id}` is in the log"))
                })
                .or_else(|| report.violations.first().cloned())
                .unwrap_or_default();
            self.failing.push((report.seed, first));
        }
    }

    /// True when no seed failed.
    pub fn passed(&self) -> bool {
        self.failing.is_empty()
    }
}

impl fmt::Display for Totals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "seeds: {} (lives: {})", self.seeds, self.lives)?;
        writeln!(
            f,
            "faults injected: {} ({})",
            self.faults.total(),
            self.faults
        )?;
        writeln!(
            f,
            "deliveries: {} acknowledged, {} failed, {} unknown",
            self.acked, self.failed, self.unknown
        )?;
        let reasons: Vec<String> = self
            .reasons
            .iter()
            .map(|(reason, n)| format!("{reason}={n}"))
            .collect();
        writeln!(f, "errors by kind: {}", reasons.join(" "))?;
        writeln!(
            f,
            "failed appends survived: {} (a later delivery of the same life acknowledged)",
            self.survived
        )?;
        let resumes = &self.resumes;
        writeln!(
            f,
            "crash repairs (A = {ALLOWANCE}): {} interrupted turns closed, {} messages \
             redelivered, {} not (allowance spent), {} not (id pending again)",
            resumes.interrupted, resumes.redelivered, resumes.exhausted, resumes.reused
        )?;
        let afterwards: Vec<String> = story::Afterwards::ALL
            .iter()
            .map(|kind| {
                let n = resumes.afterwards.get(kind).copied().unwrap_or(0);
                format!("{n} {}", kind.name())
            })
            .collect();
        writeln!(f, "redelivered messages: {}", afterwards.join(", "))?;
        writeln!(
            f,
            "resume sent: {}; fate answers checked: {} ({} unchecked after an indeterminate \
             append)",
            resumes.resumes, resumes.fates_checked, resumes.fates_unchecked
        )?;
        writeln!(f, "acknowledged inputs lost: {}", self.lost)?;
        writeln!(f, "failed inputs found in the log: {}", self.phantom)?;
        write!(f, "other violations: {}", self.violations)?;
        for (seed, finding) in &self.failing {
            write!(f, "\nFAILED seed {seed}: {finding}")?;
        }
        Ok(())
    }
}

/// Runs every seed of `seeds`, calling `each` after each one.
pub fn run_range(
    seeds: RangeInclusive<u64>,
    settings: &Settings,
    mut each: impl FnMut(&SeedReport),
) -> Totals {
    quiet_injected_panics();
    let mut totals = Totals::default();
    for seed in seeds {
        let report = run_seed(seed, settings);
        each(&report);
        totals.add(&report);
    }
    totals
}

/// Keeps the injected host panics off stderr (every other panic still prints).
pub fn quiet_injected_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let injected = info
                .payload()
                .downcast_ref::<&str>()
                .is_some_and(|message| *message == host::INJECTED_PANIC);
            if !injected {
                previous(info);
            }
        }));
    });
}

/// Parses `A-B` (or `N`) into a range of seeds.
pub fn parse_seeds(text: &str) -> Result<RangeInclusive<u64>, String> {
    let number = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|e| format!("`{s}` is not a seed number: {e}"))
    };
    let (a, b) = match text.split_once('-') {
        Some((a, b)) => (number(a)?, number(b)?),
        None => {
            let n = number(text)?;
            (n, n)
        }
    };
    if a > b {
        return Err(format!("the range {a}-{b} is empty"));
    }
    Ok(a..=b)
}
