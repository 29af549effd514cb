//! The session layer's fault handling on the second Rust driver, `coxswain-threads`: seeded
//! clients, a seeded fault-injecting blocking log and a seeded host, over 1–3 lives of one
//! session, each resumed from the log through `ResumePlan` with the redelivery allowance
//! `A = 1` (S59) and then sent `resume` (S57), with the same checker as the tokio runs
//! ([`check_image`]): every acknowledged delivery is in the log after every life, none
//! reported failed is, the Auditor passes; each repair appends exactly what the simulator's
//! reading of the log calls for ([`check_repair`]), every id's `fate` after it is the log's
//! (S58), and no message runs twice. The driver runs on OS threads and the wall clock, so
//! a seed fixes the faults and the calls but not how host answers interleave with them: the run
//! is seeded, not schedule-deterministic (the tokio runs are both).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use coxswain_core::{
    CancelCause, Config, Input, Machine, Message, PreStepAnswer, Target, TurnStoppingAnswer,
};
use coxswain_log::{encode, parse, Entry};
use coxswain_session::{Options, ResumeOptions, ResumePlan};
use coxswain_threads::{Agent, AgentError, Host, Log, LogError};

use crate::check::{check_image, check_repair, story_of, Image};
use crate::faults::Tally;
use crate::ledger::{kind_of, Ledger, Outcome};
use crate::rng::{Rng, SharedRng};
use crate::story::Story;
use crate::{SeedReport, ALLOWANCE};

/// The abort grace of the threads runs.
const GRACE: Duration = Duration::from_millis(20);

/// The disk of one seed: the log's bytes, which survive the lives.
#[derive(Clone, Default)]
struct Disk(Arc<Mutex<Vec<u8>>>);

impl Disk {
    fn bytes(&self) -> Vec<u8> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn with<T>(&self, f: impl FnOnce(&mut Vec<u8>) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// A blocking log on the disk whose appends fail as the seed says: EIO or ENOSPC before the
/// write, a short write cut back (both: the batch is not in the log), or a torn write whose
/// cut-back fails (a prefix stays: indeterminate).
struct SimLog {
    disk: Disk,
    next_seq: u64,
    rng: SharedRng,
    tally: Tally,
}

impl Log for SimLog {
    fn append(&mut self, entries: &[Entry]) -> Result<(), LogError> {
        let mut lines = Vec::new();
        for (seq, entry) in (self.next_seq..).zip(entries) {
            encode(seq, entry, &mut lines)?;
        }
        let roll = self.rng.with(|rng| rng.below(1000));
        let eio = |what: &str| std::io::Error::other(format!("{what} (injected)"));
        match roll {
            0..=29 => {
                self.tally.note("write-eio");
                return Err(eio("write").into());
            }
            30..=49 => {
                self.tally.note("short-write");
                return Err(eio("short write").into()); // written in part, then cut back
            }
            50..=64 if !lines.is_empty() => {
                self.tally.note("torn-write");
                let part = self.rng.with(|rng| rng.range(1, lines.len() as u64)) as usize;
                self.disk
                    .with(|bytes| bytes.extend_from_slice(&lines[..part]));
                return Err(LogError::Indeterminate {
                    error: Arc::new(eio("torn write")),
                    undo: Arc::new(eio("truncate")),
                });
            }
            _ => {}
        }
        self.disk.with(|bytes| bytes.extend_from_slice(&lines));
        self.next_seq += entries.len() as u64;
        Ok(())
    }
}

/// A host whose calls complete, panic, fail, run slow, or ignore their cancellation past the
/// grace, as the seed says.
struct SimHost {
    rng: SharedRng,
    tally: Tally,
}

impl SimHost {
    /// Runs one call's fault; `Err` fails it (`host-raised`).
    #[allow(clippy::panic)] // the injected host panic is the point (the driver must survive it)
    fn call(&self) -> Result<(), String> {
        match self.rng.with(|rng| rng.below(100)) {
            0..=5 => {
                self.tally.note("host-panic");
                std::panic::panic_any(crate::host::INJECTED_PANIC)
            }
            6..=11 => {
                self.tally.note("host-fail");
                Err("the model call failed (injected)".to_owned())
            }
            12..=17 => {
                self.tally.note("host-slow");
                std::thread::sleep(Duration::from_millis(self.rng.with(|rng| rng.range(1, 10))));
                Ok(())
            }
            18..=21 => {
                self.tally.note("host-hang");
                std::thread::sleep(GRACE * 3); // ignores its cancellation
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

impl Host for SimHost {
    fn pre_step(
        &self,
        messages: &coxswain_core::Batch,
        _cancelled: &AtomicBool,
    ) -> Result<PreStepAnswer, String> {
        self.call().map(|()| PreStepAnswer::Enter(messages.clone()))
    }

    fn step(
        &self,
        _turn: u64,
        _step: u64,
        _cancelled: &AtomicBool,
    ) -> Result<coxswain_core::StepAnswer, String> {
        self.call().map(|()| coxswain_core::StepAnswer::Completed)
    }

    fn turn_stopping(&self, _cancelled: &AtomicBool) -> Result<TurnStoppingAnswer, String> {
        self.call().map(|()| TurnStoppingAnswer::Done)
    }
}

fn outcome(result: &Result<bool, AgentError>) -> Outcome {
    match result {
        Ok(_) => Outcome::Acked,
        Err(AgentError::Indeterminate(_)) => Outcome::Unknown,
        Err(_) => Outcome::Failed,
    }
}

/// Runs seed `seed` on the threads driver.
pub fn run_threads_seed(seed: u64) -> SeedReport {
    let (tally, disk, ledger) = (Tally::default(), Disk::default(), Ledger::default());
    let mut schedule = Rng::new(seed, 3);
    let (log_rng, host_rng) = (
        SharedRng::new(Rng::new(seed, 1)),
        SharedRng::new(Rng::new(seed, 2)),
    );
    let mut report = SeedReport {
        seed,
        ..SeedReport::default()
    };
    let lives = schedule.range(1, 4);
    for life in 0..lives {
        ledger.new_life();
        let before = disk.bytes();
        let (machine, next_seq) = match resume(&disk, seed) {
            Ok(resumed) => resumed,
            Err(error) => {
                report.violations.push(format!("life {life}: {error}"));
                break;
            }
        };
        let when = format!("opening life {life}");
        let after = disk.bytes();
        let repaired = match (parse(&before), parse(&after)) {
            (Ok(parsed), Ok(repaired)) => {
                let (before, after) = (
                    Image {
                        bytes: &before,
                        records: &parsed.records,
                    },
                    Image {
                        bytes: &after,
                        records: &repaired.records,
                    },
                );
                let repaired = check_repair(before, after, 0, ALLOWANCE, false, &when);
                report.resumes.repaired(&repaired);
                report
                    .violations
                    .extend(repaired.violations.iter().cloned());
                Some(repaired.story)
            }
            (Err(error), _) | (_, Err(error)) => {
                report
                    .violations
                    .push(format!("{when}: the log is corrupt: {error}"));
                None
            }
        };
        let log = SimLog {
            disk: disk.clone(),
            next_seq,
            rng: log_rng.clone(),
            tally: tally.clone(),
        };
        let host = SimHost {
            rng: host_rng.clone(),
            tally: tally.clone(),
        };
        let options = Options {
            abort_grace: GRACE,
            ..Options::default()
        };
        let agent = Agent::start(host, log, machine, options);
        report.lives += 1;
        // Nothing runs before the resume (S48): every answer is the repaired log's (S58).
        if let Some(story) = repaired {
            check_fates(&agent, &story, &ledger, life, &mut report);
        }
        match agent.resume() {
            Ok(()) => report.resumes.resumes += 1,
            Err(error) => ledger.note(format!("resume {error}")),
        }
        drive(&agent, &mut schedule, &ledger, life);
        agent.close();
        let findings = check_image(&disk.bytes(), &ledger, 0, &format!("life {life}"));
        report.lost.extend(findings.lost);
        report.phantom.extend(findings.phantom);
        report.violations.extend(findings.violations);
    }
    for outcome in ledger.outcomes().values() {
        match outcome {
            Outcome::Acked => report.acked += 1,
            Outcome::Failed => report.failed += 1,
            Outcome::Unknown | Outcome::InFlight => report.unknown += 1,
        }
    }
    report.reasons = ledger.reasons();
    report.survived = ledger.survived();
    report.faults = tally.counts();
    report.records = disk.bytes().iter().filter(|&&b| b == b'\n').count() as u64;
    // The whole history: no message ran twice, and what became of the redelivered ones.
    match parse(&disk.bytes()) {
        Ok(parsed) => {
            let (afterwards, findings) = story_of(&parsed.records, 0).finish();
            report.resumes.afterwards = afterwards;
            report.violations.extend(
                findings
                    .into_iter()
                    .map(|finding| format!("the log: {finding}")),
            );
        }
        Err(error) => report
            .violations
            .push(format!("the log is corrupt: {error}")),
    }
    report
}

/// `fate` of every id the seed minted and one it never sent, held to the simulator's reading of
/// the log (S58; the threads runs keep no delivery memory: pending or unknown).
fn check_fates(agent: &Agent, story: &Story, ledger: &Ledger, life: u64, report: &mut SeedReport) {
    let mut ids: Vec<String> = ledger.outcomes().into_keys().collect();
    ids.push(format!("never-{life}"));
    for id in ids {
        let answer = agent.fate(id.as_str()).to_json();
        let expected = story.fate(&id);
        if answer == expected {
            report.resumes.fates_checked += 1;
        } else {
            report.violations.push(format!(
                "opening life {life}: fate(`{id}`) answered {answer}, the log says {expected}"
            ));
        }
    }
}

/// Resumes the session on `disk` (bytes in memory: the simulated disk, not a file) through the
/// session layer's plan, as the shared file log's `resume` does for a file: the allowance
/// `A = 1`, then its repair carried out (the torn tail cut, the closers appended, S50, and the
/// redelivery splices, S59). The machine and the next `seq`.
fn resume(disk: &Disk, seed: u64) -> Result<(Machine, u64), String> {
    let options = ResumeOptions::from(Config::new().with_hash_seed(seed))
        .try_with_redelivery(ALLOWANCE)
        .map_err(|error| error.to_string())?;
    let plan = ResumePlan::from_bytes(&disk.bytes(), options)
        .map_err(|error| format!("the log does not resume: {error}"))?;
    let repair = plan
        .byte_repair()
        .map_err(|error| format!("the closers do not encode: {error}"))?;
    disk.with(|bytes| {
        if let Some(cut) = repair.cut_to {
            bytes.truncate(cut as usize);
        }
        bytes.extend_from_slice(&repair.append);
    });
    Ok((plan.machine, repair.next_seq))
}

/// One life's seeded clients: sends of every kind and cancels, each outcome in the ledger.
fn drive(agent: &Agent, schedule: &mut Rng, ledger: &Ledger, life: u64) {
    for _ in 0..schedule.range(5, 25) {
        let id = ledger.mint(&format!("t{life}"));
        let message = || Message::user(id.as_str(), "hi").into();
        let input = match schedule.below(10) {
            0..=3 => Input::Followup(message()),
            4..=5 => Input::Steer(message()),
            6..=7 => Input::Inject(message()),
            8 => Input::Send {
                message: message(),
                target: Target::NextTurn,
                wakeup: false,
                expect: None,
            },
            _ => {
                let result = agent.input(Input::Cancel {
                    cause: CancelCause::User,
                    keep_inbox: schedule.chance(500),
                });
                ledger.note(format!("cancel {}", result.is_ok()));
                continue;
            }
        };
        let result = agent.input(input);
        let error = result
            .as_ref()
            .err()
            .map(|error| (kind_of(error), error.to_string()));
        ledger.set_outcome(&id, outcome(&result), error);
        if schedule.chance(200) {
            std::thread::sleep(Duration::from_millis(schedule.range(1, 5)));
        }
    }
}
