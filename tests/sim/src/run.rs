//! Runs one seed: lives of an agent on a fault-injecting disk, each in a fresh current-thread
//! tokio runtime with paused time, ended by a crash (the runtime dropped mid-await), dispose,
//! close or dropped handles; after each, the power cut and the checks; at the end a clean
//! restore.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use coxswain_core::Message;
use coxswain_tokio::{Agent, AgentError, Options};

use crate::check::check_image;
use crate::disk::{Disk, LogFaults};
use crate::faults::{Counts, Tally};
use crate::host::SimHost;
use crate::ledger::{Ledger, Outcome};
use crate::rng::{Rng, SharedRng};
use crate::schedule::{End, Life, Op};

/// The knobs of a run (the CI's are [`Settings::default`]).
#[derive(Clone, Debug)]
pub struct Settings {
    /// Log fault rates.
    pub log: LogFaults,
    /// `Options::abort_grace` of every agent.
    pub abort_grace: Duration,
    /// `Options::max_pending` (small, so the limit is hit).
    pub max_pending: usize,
    /// `Options::max_message_bytes`.
    pub max_message_bytes: usize,
    /// `Options::max_id_bytes`.
    pub max_id_bytes: usize,
    /// A client call that has not returned after this much virtual time is a deadlock.
    pub deadlock_after: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            log: LogFaults::DEFAULT,
            abort_grace: Duration::from_secs(5),
            max_pending: 6,
            max_message_bytes: 256,
            max_id_bytes: 16,
            deadlock_after: Duration::from_secs(3_600),
        }
    }
}

/// What one seed did and found.
#[derive(Clone, Debug, Default)]
pub struct SeedReport {
    /// The seed.
    pub seed: u64,
    /// Lives run (opens of the agent before the final restore).
    pub lives: u64,
    /// Faults injected, by kind.
    pub faults: Counts,
    /// Deliveries acknowledged.
    pub acked: u64,
    /// Deliveries reported failed.
    pub failed: u64,
    /// Deliveries with an unknown outcome (indeterminate, or cut short by a crash).
    pub unknown: u64,
    /// Acknowledged ids missing from a restored log (must be empty).
    pub lost: Vec<String>,
    /// Ids reported failed found in a log (must be empty).
    pub phantom: Vec<String>,
    /// Every other violation: deadlocks, audit failures, limits exceeded, opens refused.
    pub violations: Vec<String>,
    /// Failed and unknown deliveries by error variant.
    pub reasons: std::collections::BTreeMap<String, u64>,
    /// Failed appends the agent survived: deliveries failed `Persistence` after which a later
    /// delivery of the same life was acknowledged.
    pub survived: u64,
    /// Records in the final log.
    pub records: u64,
    /// FNV-1a of the final log, every answer in order, and the fault counts: equal for equal
    /// seeds.
    pub digest: u64,
}

impl SeedReport {
    /// True when every check held.
    pub fn passed(&self) -> bool {
        self.lost.is_empty() && self.phantom.is_empty() && self.violations.is_empty()
    }
}

#[derive(Clone, Debug, Default)]
struct Violations(Arc<Mutex<Vec<String>>>);

impl Violations {
    fn push(&self, violation: String) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(violation);
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Everything a life's tasks share.
#[derive(Clone)]
struct World {
    settings: Settings,
    disk: Disk,
    ledger: Ledger,
    tally: Tally,
    host_rng: SharedRng,
    client_rng: SharedRng,
    violations: Violations,
    delivery_memory: usize,
}

/// Runs seed `seed`.
pub fn run_seed(seed: u64, settings: &Settings) -> SeedReport {
    let tally = Tally::default();
    let mut schedule = Rng::new(seed, 3);
    let world = World {
        settings: settings.clone(),
        disk: Disk::new(Rng::new(seed, 1), settings.log, tally.clone()),
        ledger: Ledger::default(),
        tally,
        host_rng: SharedRng::new(Rng::new(seed, 2)),
        client_rng: SharedRng::new(Rng::new(seed, 4)),
        violations: Violations::default(),
        delivery_memory: schedule.below(5) as usize,
    };
    let mut report = SeedReport {
        seed,
        ..SeedReport::default()
    };
    let lives = schedule.range(1, 4);
    for n in 0..lives {
        let plan = Life::roll(&mut schedule);
        if n > 0 {
            world.tally.note("reopen");
        }
        world.ledger.new_life();
        run_in_runtime(&world, life(world.clone(), n as u32, plan));
        world.disk.power_cut();
        let findings = check_image(
            &world.disk.bytes(),
            &world.ledger,
            world.delivery_memory,
            &format!("after life {n}"),
        );
        report.lost.extend(findings.lost);
        report.phantom.extend(findings.phantom);
        report.violations.extend(findings.violations);
    }
    report.lives = lives;
    // The final restore: the log opens cleanly and audits after its repair.
    run_in_runtime(&world, restore(world.clone()));
    report.violations.extend(world.violations.take());
    report.lost.sort();
    report.lost.dedup();
    report.phantom.sort();
    report.phantom.dedup();
    for outcome in world.ledger.outcomes().values() {
        match outcome {
            Outcome::Acked => report.acked += 1,
            Outcome::Failed => report.failed += 1,
            Outcome::Unknown | Outcome::InFlight => report.unknown += 1,
        }
    }
    report.faults = world.tally.counts();
    report.reasons = world.ledger.reasons();
    report.survived = world.ledger.survived();
    let bytes = world.disk.bytes();
    report.records = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
    let mut digest = Fnv::new();
    digest.write(&bytes);
    for line in world.ledger.trace() {
        digest.write(line.as_bytes());
    }
    digest.write(report.faults.to_string().as_bytes());
    for violation in &report.violations {
        digest.write(violation.as_bytes());
    }
    report.digest = digest.0;
    report
}

/// Runs `future` in a fresh current-thread runtime with paused time; dropping the runtime
/// afterwards drops every task mid-await (a crash, when the life crashed).
fn run_in_runtime(world: &World, future: impl Future<Output = ()>) {
    match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
    {
        Ok(runtime) => runtime.block_on(future),
        Err(error) => world
            .violations
            .push(format!("cannot build a runtime: {error}")),
    }
}

fn options(world: &World, plan: &Life) -> Options {
    let mut options = Options::named("sim");
    options.channel_capacity = plan.channel_capacity;
    options.max_batch = plan.max_batch;
    options.delivery_memory = world.delivery_memory;
    options.abort_grace = world.settings.abort_grace;
    options.max_pending = world.settings.max_pending;
    options.max_message_bytes = world.settings.max_message_bytes;
    options.max_id_bytes = world.settings.max_id_bytes;
    options
}

/// Opens the agent with faults off (a refusal is a violation), audits the repaired log, and
/// checks the restored lists against the limit.
async fn open(world: &World, life: u32, options: Options) -> Option<Agent> {
    world.disk.arm(false);
    let host = SimHost {
        rng: world.host_rng.clone(),
        tally: world.tally.clone(),
        ledger: world.ledger.clone(),
        life,
    };
    let opened = tokio::time::timeout(
        world.settings.deadlock_after,
        Agent::open_with(options, host, world.disk.log()),
    )
    .await;
    let (agent, recovery) = match opened {
        Ok(Ok(opened)) => opened,
        Ok(Err(error)) => {
            world
                .violations
                .push(format!("life {life}: the log cannot be opened: {error}"));
            return None;
        }
        Err(_) => {
            world
                .violations
                .push(format!("life {life}: the open hangs"));
            return None;
        }
    };
    let findings = check_image(
        &world.disk.bytes(),
        &world.ledger,
        world.delivery_memory,
        &format!("opening life {life}"),
    );
    for violation in findings.violations {
        world.violations.push(violation);
    }
    let max = world.settings.max_pending;
    for (list, n) in [
        ("NT", recovery.pending_next_turn),
        ("NS", recovery.pending_next_step),
    ] {
        if n > max {
            world.violations.push(format!(
                "life {life}: the restored {list} holds {n} items, above max_pending {max}"
            ));
        }
    }
    Some(agent)
}

/// One life: open, run the clients, end; or crash at any await point.
async fn life(world: World, n: u32, plan: Life) {
    let Some(agent) = open(&world, n, options(&world, &plan)).await else {
        return;
    };
    world.disk.arm(true);
    let clients: Vec<_> = plan
        .clients
        .iter()
        .cloned()
        .map(|ops| tokio::spawn(client(world.clone(), agent.clone(), n, ops)))
        .collect();
    let body = {
        let world = world.clone();
        async move {
            for client in clients {
                if client.await.is_err() {
                    world
                        .violations
                        .push(format!("life {n}: a client panicked"));
                }
            }
            end(&world, agent, n, plan.end).await;
        }
    };
    let crash_at = plan.crash_at;
    let timer = async move {
        match crash_at {
            Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        () = world.disk.crashed() => {}
        () = timer => {
            world.tally.note("crash-at-time");
            world.disk.crash_now();
        }
        () = body => {}
    }
}

/// Ends a life that did not crash, checking that the end returns.
async fn end(world: &World, agent: Agent, n: u32, end: End) {
    let deadline = world.settings.deadlock_after;
    pending_within_limit(world, &agent, n).await;
    let ended = match end {
        End::Dispose => {
            world.tally.note("dispose");
            tokio::time::timeout(deadline, agent.dispose())
                .await
                .map(|r| format!("dispose {r:?}"))
        }
        End::Close => {
            world.tally.note("close");
            tokio::time::timeout(deadline, agent.close())
                .await
                .map(|r| format!("close {r:?}"))
        }
        End::Drop => {
            let finished = agent.finished();
            drop(agent);
            tokio::time::timeout(deadline, finished)
                .await
                .map(|ending| format!("dropped {ending:?}"))
        }
    };
    match ended {
        Ok(line) => world.ledger.note(line),
        Err(_) => world.violations.push(format!(
            "life {n}: {end:?} did not return within {deadline:?} (deadlock)"
        )),
    }
}

/// Both pending lists within `max_pending` (the memory bound).
async fn pending_within_limit(world: &World, agent: &Agent, n: u32) {
    if let Ok(Ok(snapshot)) =
        tokio::time::timeout(world.settings.deadlock_after, agent.pending()).await
    {
        let max = world.settings.max_pending;
        for (list, len) in [
            ("NT", snapshot.next_turn.len()),
            ("NS", snapshot.next_step.len()),
        ] {
            if len > max {
                world.violations.push(format!(
                    "life {n}: {list} holds {len} items, above max_pending {max}"
                ));
            }
        }
    }
}

/// One client: its calls in order, each bounded by the deadlock timeout.
async fn client(world: World, agent: Agent, n: u32, ops: Vec<(u64, Op)>) {
    for (pause, op) in ops {
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let name = format!("{op:?}");
        let call = call(&world, &agent, n, op);
        if tokio::time::timeout(world.settings.deadlock_after, call)
            .await
            .is_err()
        {
            world.violations.push(format!(
                "life {n}: `{name}` did not return within {:?} (deadlock)",
                world.settings.deadlock_after
            ));
            return;
        }
    }
}

fn message(id: &str) -> Message {
    Message::user(id, format!("text of {id}"))
}

/// One client call, its answer recorded in the ledger.
async fn call(world: &World, agent: &Agent, n: u32, op: Op) {
    let ledger = &world.ledger;
    let prefix = format!("m{n}");
    let deliver = |id: String| (message(&id), id);
    match op {
        Op::Followup | Op::Steer | Op::Inject | Op::Send { .. } | Op::Prepend(_) => {
            let (message, id) = deliver(ledger.mint(&prefix));
            let result = match op {
                Op::Followup => agent.followup(message).await,
                Op::Steer => agent.steer(message).await,
                Op::Inject => agent.inject(message).await,
                Op::Send { target, wakeup } => agent.send(message, target, wakeup).await,
                Op::Prepend(target) => agent.prepend(target, message).await,
                _ => Ok(()),
            };
            ledger.settle(&id, &result);
        }
        Op::Replace => {
            let old = pick(world, false);
            let (message, id) = deliver(ledger.mint(&prefix));
            let result = agent.replace(old.as_str(), message).await;
            ledger.settle_replace(&id, &result);
        }
        Op::Remove => {
            let old = pick(world, false);
            let result = agent.remove(old.as_str()).await;
            ledger.note(format!("remove {old} {}", brief(&result)));
        }
        Op::Clear => {
            let result = agent.clear().await;
            ledger.note(format!("clear {}", brief(&result)));
        }
        Op::Cancel { cause, keep_inbox } => {
            let result = agent.cancel(cause, keep_inbox).await;
            ledger.note(format!("cancel {}", brief(&result)));
        }
        Op::Maintenance { ms, obeys } => {
            let result = agent
                .run_maintenance(move |token| async move {
                    let pause = tokio::time::sleep(Duration::from_millis(ms));
                    if obeys {
                        tokio::select! {
                            biased;
                            () = token.cancelled() => {}
                            () = pause => {}
                        }
                    } else {
                        pause.await;
                    }
                })
                .await;
            ledger.note(format!("maintenance {}", brief(&result)));
        }
        Op::Resend => {
            let old = pick(world, true);
            if !old.is_empty() {
                let result = agent.followup(message(&old)).await;
                ledger.note(format!("resend {old} {}", brief(&result)));
            }
        }
        Op::Oversize => {
            let id = ledger.mint(&prefix);
            let big = Message::user(id.as_str(), "x".repeat(world.settings.max_message_bytes));
            let result = agent.inject(big).await;
            expect_limit(world, n, &id, &result, "MessageTooLarge");
            ledger.settle(&id, &result);
        }
        Op::LongId => {
            let long = format!("{prefix}-{}", "x".repeat(world.settings.max_id_bytes));
            let id = ledger.mint(&long);
            let result = agent.followup(message(&id)).await;
            expect_limit(world, n, &id, &result, "IdTooLong");
            ledger.settle(&id, &result);
        }
        Op::Pending => pending_within_limit(world, agent, n).await,
        Op::Dispose => {
            world.tally.note("dispose");
            let result = agent.dispose().await;
            ledger.note(format!("dispose {}", brief(&result)));
        }
    }
}

/// A limit refuses before the core, whatever state a running agent is in (the session layer's
/// admission); an agent that has ended answers how it ended instead. Never acknowledged.
fn expect_limit(world: &World, n: u32, id: &str, result: &Result<(), AgentError>, want: &str) {
    let ok = match result {
        Err(AgentError::MessageTooLarge { .. }) => want == "MessageTooLarge",
        Err(AgentError::IdTooLong { .. }) => want == "IdTooLong",
        Err(
            AgentError::Closed
            | AgentError::Stopped
            | AgentError::Rejected(coxswain_core::Rejected::AfterDisposal),
        ) => true,
        _ => false,
    };
    if !ok {
        world.violations.push(format!(
            "life {n}: `{id}` should fail {want}, got {result:?}"
        ));
    }
}

fn brief<T: std::fmt::Debug>(result: &Result<T, AgentError>) -> String {
    match result {
        Ok(value) => format!("ok {value:?}"),
        Err(error) => format!("err {error}"),
    }
}

/// A minted id (acknowledged ones only when `acked`), or "" when there is none.
fn pick(world: &World, acked: bool) -> String {
    let ids: Vec<String> = world
        .ledger
        .outcomes()
        .into_iter()
        .filter(|(id, outcome)| {
            id.len() <= world.settings.max_id_bytes && (!acked || *outcome == Outcome::Acked)
        })
        .map(|(id, _)| id)
        .collect();
    world
        .client_rng
        .with(|rng| rng.pick(&ids).cloned())
        .unwrap_or_default()
}

/// The final restore: the log opens (faults off), audits after its repair, and closes.
async fn restore(world: World) {
    let mut options = Options::named("sim-restore");
    options.delivery_memory = world.delivery_memory;
    options.max_pending = world.settings.max_pending;
    if let Some(agent) = open(&world, u32::MAX, options).await {
        if tokio::time::timeout(world.settings.deadlock_after, agent.close())
            .await
            .is_err()
        {
            world
                .violations
                .push("final restore: close hangs".to_owned());
        }
    }
}

/// FNV-1a, 64 bits: the digest of a seed's outcome.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 ^= 0xff;
        self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
    }
}
