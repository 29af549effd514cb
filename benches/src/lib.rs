//! # coxswain-benches
//!
//! Workloads shared by the criterion benches (`benches/*.rs`), the allocation test
//! (`tests/alloc.rs`) and the report tools (`src/bin/*.rs`): the full follow-up cycle, a steering
//! burst, queue edits in a long queue, durable logs to restore, and the same-run baselines the
//! benches compare against. Keeping them here means the bench that times a cycle and the test
//! that counts its allocations drive exactly the same code.

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use coxswain_core::{
    Batch, Config, Effect, Event, Input, Machine, Message, MessageId, PreStepAnswer, Request,
    StepAnswer, Target, Transition, TurnStoppingAnswer,
};
use coxswain_log::{EncodeError, Entry, TooDeep, MAX_DEPTH, MAX_LINE_BYTES};
use coxswain_session::{Release, Session};

pub mod alloc;
pub mod hashdos;
pub mod report_file;

/// A user message `{ id: "m<i>", source: { kind: "user" }, content: "hello" }`, shared.
pub fn message(i: usize) -> Arc<Message> {
    Arc::new(Message::user(format!("m{i}"), "hello"))
}

/// `n` distinct messages `m0`, `m1`, …
pub fn messages(n: usize) -> Vec<Arc<Message>> {
    (0..n).map(message).collect()
}

/// Settles a transition as a host does (the drain contract): touches each durable event, then
/// each effect. Returns how many there were.
pub fn settle(transition: Transition<'_>) -> usize {
    let mut count = 0;
    for event in transition.events() {
        black_box(event);
        count += 1;
    }
    for effect in transition.persisted() {
        black_box(&effect);
        count += 1;
    }
    count
}

/// Settles a transition and returns the batch of the `preStep` request among its effects.
fn settle_pre_step(transition: Transition<'_>) -> Batch {
    black_box(transition.events().len());
    let mut batch = Batch::new();
    for effect in transition.persisted() {
        match effect {
            Effect::Request(Request::PreStep { messages, .. }) => batch = messages,
            other => {
                black_box(&other);
            }
        }
    }
    batch
}

/// Events and effects of one [`followup_cycle`]: the 14 wire outputs and the turn's
/// `Begin`.
pub const CYCLE_OUTPUTS: usize = 15;

/// One full follow-up cycle on an idle machine, outputs drained after every input: `followup` →
/// `turn/start` → claim → `preStep` answered `enter` → `step/start` → `user/message` → step
/// answered `completed` → `step/end` → `turnStopping` answered `done` → `turn/end`. Returns the
/// number of outputs drained ([`CYCLE_OUTPUTS`]); the machine is idle again afterwards.
///
/// # Panics
/// If the machine rejects an input: the caller handed in a machine that was not idle, or a
/// message whose id is pending.
pub fn followup_cycle(machine: &mut Machine, message: Arc<Message>) -> usize {
    let mut outputs = 8;
    let batch = settle_pre_step(machine.followup(message).expect("followup accepted"));
    outputs += settle(
        machine
            .answer_pre_step(PreStepAnswer::Enter(batch))
            .expect("pre-step answer accepted"),
    );
    outputs += settle(
        machine
            .answer_step(StepAnswer::Completed)
            .expect("step answer accepted"),
    );
    outputs += settle(
        machine
            .answer_turn_stopping(TurnStoppingAnswer::Done)
            .expect("turn-stopping answer accepted"),
    );
    outputs
}

/// [`followup_cycle`] through the session layer, each input a batch of its own as a driver
/// with nothing else waiting commits it: feed, seal, persisted (group commit with rollback
/// armed, S5). Returns the releases (effects and acknowledgements) carried out.
///
/// # Panics
/// Never on a session that is idle between cycles.
pub fn session_cycle(session: &mut Session, message: Arc<Message>) -> usize {
    let mut released = 0;
    // Carries each release out as a driver does (here: looks at it), and keeps the pre-step
    // request's batch.
    let mut commit = |session: &mut Session| {
        let batch = session.seal().expect("one staged input").batch;
        let mut claimed = None;
        for release in session
            .persisted(batch, Duration::ZERO)
            .expect("the sealed batch")
        {
            released += 1;
            match release {
                Release::Effect(Effect::Request(Request::PreStep { messages, .. })) => {
                    claimed = Some(messages)
                }
                other => {
                    black_box(&other);
                }
            }
        }
        claimed
    };
    session
        .feed(Input::Followup(message))
        .expect("followup accepted");
    let claimed = commit(session).expect("a pre-step request");
    session
        .feed(Input::PreStep(PreStepAnswer::Enter(claimed)))
        .expect("pre-step answer accepted");
    commit(session);
    session
        .feed(Input::Step(StepAnswer::Completed))
        .expect("step answer accepted");
    commit(session);
    session
        .feed(Input::TurnStopping(TurnStoppingAnswer::Done))
        .expect("turn-stopping answer accepted");
    commit(session);
    released
}

/// A machine parked inside a step of a running turn (awaiting the `step` answer), outputs drained:
/// the state a steering burst meets.
///
/// # Panics
/// Never on a fresh machine.
pub fn machine_in_step() -> Machine {
    let mut machine = Machine::new();
    let batch = settle_pre_step(
        machine
            .followup(Message::user("start", "go"))
            .expect("followup accepted"),
    );
    settle(
        machine
            .answer_pre_step(PreStepAnswer::Enter(batch))
            .expect("pre-step answer accepted"),
    );
    machine
}

/// A steering burst on a machine inside a step ([`machine_in_step`]): every message is steered
/// during the step, the step answers `continue`, the next boundary claims them all at once and the
/// next step enters them. Leaves the machine inside the next step. Returns the outputs drained
/// (`4 × burst + 5`).
///
/// # Panics
/// If the machine was not inside a step, or an id is pending.
pub fn steer_burst(machine: &mut Machine, burst: &[Arc<Message>]) -> usize {
    let mut outputs = 0;
    for message in burst {
        outputs += settle(machine.steer(message.clone()).expect("steer accepted"));
    }
    let batch = settle_pre_step(
        machine
            .answer_step(StepAnswer::Continue)
            .expect("step answer accepted"),
    );
    outputs += 3 + batch.len();
    outputs += settle(
        machine
            .answer_pre_step(PreStepAnswer::Enter(batch))
            .expect("pre-step answer accepted"),
    );
    outputs
}

/// An idle machine with `queue` quiet items `m0…` pending in NT (queued without waking, so no
/// turn runs), outputs drained.
///
/// # Panics
/// Never.
pub fn machine_with_queue(queue: &[Arc<Message>]) -> Machine {
    let mut machine = Machine::new();
    for message in queue {
        settle(
            machine
                .send(message.clone(), Target::NextTurn, false, None)
                .expect("send accepted"),
        );
    }
    machine
}

/// Removes `id` (pending in NT) and queues it again at the end, outputs drained: one edit that
/// keeps the queue at its length. Removing the middle ids in order (`n/2`, `n/2 + 1`, …, `n - 1`,
/// then again from `n/2`) always finds the removed id at position `n/2`.
///
/// # Panics
/// If `message` is not pending.
pub fn remove_and_requeue(machine: &mut Machine, message: &Arc<Message>) -> usize {
    let removed = machine.remove(message.id()).expect("remove accepted");
    let removed = removed.unwrap_or_else(|| panic!("{} was pending", message.id()));
    let mut outputs = settle(removed);
    outputs += settle(
        machine
            .send(message.clone(), Target::NextTurn, false, None)
            .expect("send accepted"),
    );
    outputs
}

/// An idle machine whose delivery memory (S51) has capacity `held.len()` and holds every id of
/// `held`: each was queued quietly and removed.
///
/// # Panics
/// If two messages share an id.
pub fn machine_with_memory(held: &[Arc<Message>]) -> Machine {
    let mut machine = Machine::with_config(Config::new().with_delivery_memory(held.len()));
    for message in held {
        settle(
            machine
                .send(message.clone(), Target::NextTurn, false, None)
                .expect("send accepted"),
        );
        if let Some(removal) = machine.remove(message.id()).expect("remove accepted") {
            settle(removal);
        }
    }
    machine
}

/// One delivery through the memory check (S52): a quiet send of a fresh message, then its
/// removal, which puts its id in the memory and, once full, forgets the oldest. Returns the
/// outputs settled.
///
/// # Panics
/// If `message` is pending or held.
pub fn send_and_forget(machine: &mut Machine, message: &Arc<Message>) -> usize {
    let sent = machine.send(message.clone(), Target::NextTurn, false, None);
    let mut outputs = settle(sent.expect("send accepted"));
    outputs += machine
        .remove(message.id())
        .expect("remove accepted")
        .map_or(0, settle);
    outputs
}

/// Replaces the pending message `message.id()` with `message` itself (same id, same place),
/// outputs drained.
///
/// # Panics
/// If it is not pending.
pub fn replace_in_place(machine: &mut Machine, message: &Arc<Message>) -> usize {
    let replaced = machine
        .replace(message.id(), message.clone())
        .expect("replace accepted");
    settle(replaced.unwrap_or_else(|| panic!("{} was pending", message.id())))
}

/// A stand-in for [`Output`](coxswain_core::Output) of the same size, for the baseline: a queue of outputs that does
/// nothing else.
#[derive(Clone, Debug)]
pub enum FakeOutput {
    /// A small output (a notification, a `step/end`).
    Small(u64),
    /// A large one (a splice, a `preStep` request).
    Large([u64; FAKE_WORDS]),
    /// One that carries a shared message (a splice, a notification, a `user/message`).
    Message(Arc<Message>),
}

/// Words in [`FakeOutput::Large`]: chosen so that `FakeOutput` is exactly as large as an
/// [`Output`](coxswain_core::Output).
pub const FAKE_WORDS: usize = std::mem::size_of::<coxswain_core::Output>() / 8 - 1;

const _: () =
    assert!(std::mem::size_of::<FakeOutput>() == std::mem::size_of::<coxswain_core::Output>());

/// The baseline of one follow-up cycle: a bare `VecDeque` doing the same pushes and pops as
/// [`followup_cycle`] (8, 3, 2 and 2 outputs per input, each drained before the next input).
pub fn baseline_cycle(queue: &mut VecDeque<FakeOutput>) -> usize {
    let mut outputs = 0;
    for (round, &count) in [8u64, 3, 2, 2].iter().enumerate() {
        for i in 0..count {
            let value = black_box(round as u64 * 8 + i);
            queue.push_back(if i % 2 == 0 {
                FakeOutput::Large([value; FAKE_WORDS])
            } else {
                FakeOutput::Small(value)
            });
        }
        while let Some(output) = queue.pop_front() {
            black_box(&output);
            outputs += 1;
        }
    }
    outputs
}

/// The baseline of one follow-up cycle under S8 (one shared message travels through the splice,
/// the pending list, the notifications and the `user/message` event): [`baseline_cycle`]'s pushes
/// and pops, where the four outputs that carry the message (insert splice, `inserted`, `claimed`,
/// `user/message`) hold it: `message` moved into one, cloned into three. These are the reference
/// count updates any implementation of S8 pays; the machine pays them plus its own.
pub fn baseline_shared_cycle(queue: &mut VecDeque<FakeOutput>, message: Arc<Message>) -> usize {
    fn drain_fake(queue: &mut VecDeque<FakeOutput>) -> usize {
        let mut outputs = 0;
        while let Some(output) = queue.pop_front() {
            black_box(&output);
            outputs += 1;
        }
        outputs
    }
    let large = |i: u64| FakeOutput::Large([black_box(i); FAKE_WORDS]);
    let small = |i: u64| FakeOutput::Small(black_box(i));
    // followup: splice, inserted, status, turn/start, begin, claim splice, claimed, preStep.
    queue.push_back(FakeOutput::Message(message.clone()));
    queue.push_back(FakeOutput::Message(message.clone()));
    queue.push_back(small(2));
    queue.push_back(small(3));
    queue.push_back(small(4));
    queue.push_back(large(4));
    queue.push_back(FakeOutput::Message(message.clone()));
    queue.push_back(large(6));
    let mut outputs = drain_fake(queue);
    // enter: step/start, user/message, step.
    queue.push_back(small(7));
    queue.push_back(FakeOutput::Message(message));
    queue.push_back(small(9));
    outputs += drain_fake(queue);
    // completed: step/end, turnStopping; done: turn/end, status.
    queue.push_back(small(10));
    queue.push_back(small(11));
    outputs += drain_fake(queue);
    queue.push_back(large(12));
    queue.push_back(small(13));
    outputs += drain_fake(queue);
    outputs
}

/// The baseline of `n` outputs: `n` pushes then `n` pops on a bare `VecDeque`.
pub fn baseline_outputs(queue: &mut VecDeque<FakeOutput>, n: usize) -> usize {
    for i in 0..n {
        let value = black_box(i as u64);
        queue.push_back(if i % 2 == 0 {
            FakeOutput::Large([value; FAKE_WORDS])
        } else {
            FakeOutput::Small(value)
        });
    }
    let mut outputs = 0;
    while let Some(output) = queue.pop_front() {
        black_box(&output);
        outputs += 1;
    }
    outputs
}

/// A durable log of at least `events` events as a live machine writes it: follow-ups, some queued
/// behind a running turn, steers and injected tool context during steps, tool steps, and now and
/// then a removal. The lists stay short, as in a real session, so restoring it costs the same per
/// event at every length. Ends between turns (restorable).
///
/// # Panics
/// Never: every input is valid for the state it is given in.
pub fn durable_log(events: usize) -> Vec<Event> {
    let mut machine = Machine::new();
    let mut log = Vec::with_capacity(events + 64);
    let mut next = 0usize;
    let mut fresh = || {
        next += 1;
        Arc::new(Message::user(format!("m{next}"), "a short prompt"))
    };
    let collect = |transition: Transition<'_>, log: &mut Vec<Event>| -> Batch {
        let mut batch = Batch::new();
        for effect in transition.persist_into(log) {
            if let Effect::Request(Request::PreStep { messages, .. }) = effect {
                batch = messages;
            }
        }
        batch
    };
    let mut round = 0usize;
    while log.len() < events {
        round += 1;
        let mut batch = collect(machine.followup(fresh()).expect("followup"), &mut log);
        if round.is_multiple_of(3) {
            // A follow-up queued behind the running turn: its own turn comes next.
            collect(
                machine.followup(fresh()).expect("queued followup"),
                &mut log,
            );
        }
        if round.is_multiple_of(5) {
            let doomed = fresh();
            let quiet = machine.send(doomed.clone(), Target::NextTurn, false, None);
            collect(quiet.expect("quiet send"), &mut log);
            if let Some(removal) = machine.remove(doomed.id()).expect("remove") {
                collect(removal, &mut log);
            }
        }
        while !machine.is_quiescent() {
            let entered = machine.answer_pre_step(PreStepAnswer::Enter(batch));
            collect(entered.expect("enter"), &mut log);
            if round.is_multiple_of(2) {
                // A tool step with injected context and a steer, then the final step.
                collect(machine.inject(fresh()).expect("inject"), &mut log);
                collect(machine.steer(fresh()).expect("steer"), &mut log);
                let next = machine.answer_step(StepAnswer::Continue);
                let next_batch = collect(next.expect("continue"), &mut log);
                let entered = machine.answer_pre_step(PreStepAnswer::Enter(next_batch));
                collect(entered.expect("enter"), &mut log);
            }
            collect(
                machine.answer_step(StepAnswer::Completed).expect("step"),
                &mut log,
            );
            let stopped = machine.answer_turn_stopping(TurnStoppingAnswer::Done);
            batch = collect(stopped.expect("turn stopping"), &mut log);
        }
    }
    log
}

/// The log as JSON lines, one `{ seq, type, data }` record per line, as a log file holds it.
///
/// # Panics
/// Never: every event serializes.
pub fn json_lines(log: &[Event]) -> String {
    let mut text = String::with_capacity(log.len() * 160);
    for (seq, event) in log.iter().enumerate() {
        let mut record = serde_json::to_value(event).expect("event serializes");
        if let Some(object) = record.as_object_mut() {
            object.insert("seq".to_owned(), seq.into());
        }
        text.push_str(&record.to_string());
        text.push('\n');
    }
    text
}

/// Restores a machine from JSON lines: parses each line and feeds it to the core's restorer.
///
/// # Panics
/// If a line is not JSON or the log is invalid.
pub fn restore_json_lines(text: &str) -> Machine {
    let mut restorer = coxswain_core::Restorer::new(0);
    for line in text.lines() {
        let value: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        restorer.push_json(&value).expect("a valid event");
    }
    restorer.finish().expect("a valid log")
}

/// Parses every line without restoring: the floor under [`restore_json_lines`].
///
/// # Panics
/// If a line is not JSON.
pub fn parse_json_lines(text: &str) -> usize {
    let mut count = 0;
    for line in text.lines() {
        let value: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        black_box(&value);
        count += 1;
    }
    count
}

/// The ids of `messages`, for removal by id.
pub fn ids(messages: &[Arc<Message>]) -> Vec<MessageId> {
    messages.iter().map(|m| m.id().clone()).collect()
}

/// Resident memory of this process in bytes, from `/proc/self/statm` (`None` off Linux).
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// Reads a typed log the way a restore must, without restoring: every event's kind, and the id
/// bytes of every message a splice inserts. The floor under [`Machine::restore_events`]: at a
/// million events the log no longer fits in cache and even this slows down per event.
pub fn read_typed_log(log: &[Event]) -> usize {
    let mut sum = 0usize;
    for event in log {
        match event {
            Event::Spliced(splice) => {
                sum += splice.start + splice.removed_count;
                for message in &splice.inserted {
                    let id = message.id().as_str();
                    sum += id.len() + usize::from(id.as_bytes().first().copied().unwrap_or(0));
                }
            }
            Event::TurnStart { turn } => sum += *turn as usize,
            _ => sum += 1,
        }
    }
    black_box(sum)
}

/// A record's line as `serde_json` writes it, checked as [`coxswain_log::encode`] checks it (the
/// line's length, then its nesting): the path `coxswain-log` took before its own encoder (issue
/// 54), the reference that encoder is pinned against byte for byte (`tests/encode_pin.rs`) and
/// the "before" of the `encode` bench. `session` is the segment log's key.
///
/// # Errors
/// What `encode` refuses, the same way: `SeqExhausted`, `TooLong`, then `TooDeep`; `out` is left
/// as it was.
pub fn serde_json_line(
    seq: u64,
    session: Option<&str>,
    entry: &Entry,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    #[derive(serde::Serialize)]
    struct Line<'a> {
        seq: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        session: Option<&'a str>,
        #[serde(flatten)]
        entry: &'a Entry,
    }
    if seq == u64::MAX {
        return Err(EncodeError::SeqExhausted(seq));
    }
    let line = Line {
        seq,
        session,
        entry,
    };
    let start = out.len();
    if let Err(error) = serde_json::to_writer(&mut *out, &line) {
        out.truncate(start);
        return Err(EncodeError::Json(error.to_string()));
    }
    let bytes = out.len() - start;
    if bytes > MAX_LINE_BYTES {
        out.truncate(start);
        return Err(EncodeError::TooLong {
            bytes,
            max: MAX_LINE_BYTES,
        });
    }
    let depth = coxswain_log::depth_of(&line);
    if depth > MAX_DEPTH {
        out.truncate(start);
        return Err(EncodeError::TooDeep(TooDeep {
            depth,
            max: MAX_DEPTH,
        }));
    }
    out.push(b'\n');
    Ok(())
}
