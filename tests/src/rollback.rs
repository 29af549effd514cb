//! Group commit on the core (`Machine::begin_batch` and its closers) over random sessions: a
//! rolled-back batch leaves the machine equal to the machine before it and behaving the same
//! from then on (S5 extended to a failed persistence), and a committed batch is the inputs fed
//! without one. Sessions are the property tests' (`coxswain_conformance::generate`): random
//! delivery memories (S51), admission bounds (S55), guards (S54) and reused ids (S56).

use std::num::NonZeroUsize;

use coxswain_conformance::generate::{input, Choice};
use coxswain_core::{Batch, BatchError, Config, Effect, Machine, Output, Request};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestRunner};

use crate::proptests::{cases, choices, max_pending, memory};

/// A machine and what its host holds to answer the next `preStep` (the last claimed batch).
#[derive(Clone)]
struct Host {
    machine: Machine,
    claimed: Batch,
}

impl Host {
    fn new(config: Config) -> Self {
        Host {
            machine: Machine::with_config(config),
            claimed: Batch::new(),
        }
    }

    /// Feeds one choice (restores and crashes are not inputs here: skipped) and returns its
    /// outputs, or the rejection's kind.
    fn feed(&mut self, choice: Choice) -> Result<Vec<Output>, &'static str> {
        if matches!(choice, Choice::CheckRestore | Choice::Crash) {
            return Ok(Vec::new());
        }
        let input = input(choice, &self.machine, &self.claimed);
        let outputs: Vec<Output> = match self.machine.handle(input) {
            Ok(transition) => transition.into_outputs().collect(),
            Err(rejected) => return Err(rejected.kind()),
        };
        for output in &outputs {
            if let Output::Effect(Effect::Request(Request::PreStep { messages, .. })) = output {
                self.claimed = messages.clone();
            }
        }
        Ok(outputs)
    }
}

fn config(memory: usize, max_pending: Option<NonZeroUsize>) -> Config {
    let config = Config::new().with_delivery_memory(memory);
    match max_pending {
        Some(limit) => config.with_max_pending(limit),
        None => config,
    }
}

/// Runs `prefix`, then `batch` inside a batch that is rolled back, then `suffix`; and the same
/// prefix and suffix on a machine that never saw the batch. Both must agree at every step.
fn rolled_back(
    config: Config,
    prefix: &[Choice],
    batch: &[Choice],
    suffix: &[Choice],
) -> Result<(), TestCaseError> {
    let mut host = Host::new(config);
    for &choice in prefix {
        let _ = host.feed(choice);
    }
    let reference = host.clone();
    prop_assert_eq!(host.machine.begin_batch(), Ok(()));
    prop_assert_eq!(host.machine.begin_batch(), Err(BatchError::AlreadyOpen));
    for &choice in batch {
        let _ = host.feed(choice);
    }
    prop_assert_eq!(host.machine.roll_back_batch(), Ok(()));
    prop_assert!(!host.machine.is_batch_open());
    prop_assert_eq!(&host.machine, &reference.machine, "after the rollback");
    prop_assert_eq!(
        host.machine.delivered().collect::<Vec<_>>(),
        reference.machine.delivered().collect::<Vec<_>>()
    );
    // The host's claimed batch belongs to the host, not the machine: it goes back with it.
    host.claimed = reference.claimed.clone();
    let mut reference = reference;
    for (at, &choice) in suffix.iter().enumerate() {
        let ours = host.feed(choice);
        let theirs = reference.feed(choice);
        prop_assert_eq!(&ours, &theirs, "suffix step {} ({:?})", at, choice);
        prop_assert_eq!(&host.machine, &reference.machine, "suffix step {}", at);
    }
    Ok(())
}

/// `batch` fed inside a committed batch is `batch` fed without one.
fn committed(config: Config, prefix: &[Choice], batch: &[Choice]) -> Result<(), TestCaseError> {
    let mut host = Host::new(config);
    for &choice in prefix {
        let _ = host.feed(choice);
    }
    let mut reference = host.clone();
    prop_assert_eq!(host.machine.begin_batch(), Ok(()));
    for (at, &choice) in batch.iter().enumerate() {
        prop_assert_eq!(
            host.feed(choice),
            reference.feed(choice),
            "batch step {}",
            at
        );
    }
    prop_assert_eq!(host.machine.commit_batch(), Ok(()));
    prop_assert_eq!(host.machine.commit_batch(), Err(BatchError::NotOpen));
    prop_assert_eq!(&host.machine, &reference.machine);
    Ok(())
}

#[test]
fn s5_a_rolled_back_batch_leaves_the_machine_as_it_was_and_a_committed_one_as_fed() {
    let mut runner = TestRunner::new(RunnerConfig {
        cases: cases(500),
        failure_persistence: None,
        ..RunnerConfig::default()
    });
    let strategy = (memory(), max_pending(), choices(), 0..=100usize, 1..=8usize);
    let result = runner.run(&strategy, |(memory, max_pending, choices, cut, length)| {
        let config = config(memory, max_pending);
        let cut = cut.min(choices.len());
        let end = (cut + length).min(choices.len());
        let (prefix, rest) = choices.split_at(cut);
        let (batch, suffix) = rest.split_at(end - cut);
        rolled_back(config, prefix, batch, suffix)?;
        committed(config, prefix, batch)
    });
    if let Err(error) = result {
        panic!("{error}");
    }
}

#[test]
fn a_batch_cannot_open_over_undrained_outputs_and_closers_need_one_open() {
    let mut machine = Machine::new();
    assert_eq!(machine.commit_batch(), Err(BatchError::NotOpen));
    assert_eq!(machine.roll_back_batch(), Err(BatchError::NotOpen));
    drop(machine.followup(coxswain_core::Message::user("m1", "hi")));
    let before = machine.clone();
    assert_eq!(machine.begin_batch(), Err(BatchError::Undrained));
    assert_eq!(machine, before, "a refused batch call changed nothing");
    machine.drain().persisted().for_each(drop);
    assert_eq!(machine.begin_batch(), Ok(()));
    // Outputs left queued by a transition of the batch go with the rollback.
    drop(machine.steer(coxswain_core::Message::user("m2", "hi")));
    assert_eq!(machine.roll_back_batch(), Ok(()));
    assert!(machine.drain().is_empty());
    assert_eq!(machine.pending(coxswain_core::Target::NextStep).len(), 0);
}
