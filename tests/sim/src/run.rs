//! Runs one seed: lives of an agent on a fault-injecting disk, each in a fresh current-thread
//! tokio runtime with paused time, ended by a crash (the runtime dropped mid-await), dispose,
//! close or dropped handles; after each, the power cut and the checks; at the end a clean
//! restore. Every open repairs the log with the redelivery allowance `A = 1` (S59), checks the
//! repair and every id's `fate` against the simulator's own reading of the log (S58), then
//! sends `resume` (S57), by a call or on open.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use coxswain_core::Message;
use coxswain_log::{parse, Record};
use coxswain_tokio::{Agent, AgentError, Options};

use crate::check::{check_image, check_records, check_repair, fates_at, Image, Repaired};
use crate::disk::{Disk, LogFaults};
use crate::faults::{Counts, Tally};
use crate::host::{HostSabotage, SimHost};
use crate::ledger::{Ledger, Outcome};
use crate::rng::{Rng, SharedRng};
use crate::schedule::{End, Life, Op};
use crate::story::{Afterwards, Story};

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
    /// `Options::redelivery` of every open: crash repair's allowance `A` (S59). The checker
    /// always expects `A = 1` (CI); another value here shows that it bites.
    pub redelivery: u64,
    /// A deliberately broken host ([`HostSabotage::None`] in earnest).
    pub host: HostSabotage,
    /// Opens every agent with a delivery memory this much larger than the one the checker reads
    /// the log with (0 in earnest): a host that passes another capacity at a reopen (S51),
    /// which the `fate` check catches.
    pub memory_skew: usize,
}

/// The allowance the checker expects every crash repair to use (S59).
pub const ALLOWANCE: u64 = 1;

/// How many minted ids, drawn at random, each open asks `fate` of besides those its repair put
/// back and one never sent.
const SWEEP: usize = 6;

/// How long the final restore lets the work its `resume` started run.
const FINAL_RUN: Duration = Duration::from_secs(600);

impl Default for Settings {
    fn default() -> Self {
        Settings {
            log: LogFaults::DEFAULT,
            abort_grace: Duration::from_secs(5),
            max_pending: 6,
            max_message_bytes: 256,
            max_id_bytes: 16,
            deadlock_after: Duration::from_secs(3_600),
            redelivery: ALLOWANCE,
            host: HostSabotage::None,
            memory_skew: 0,
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
    /// What crash repair, `resume` and `fate` did (§13).
    pub resumes: Resumes,
}

/// What §13 did in a seed (or a range): crash repairs with redelivery (S59), what became of
/// the messages they put back, the `resume`s sent (S57), the `fate` answers checked (S58).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resumes {
    /// Opens whose repair closed an interrupted turn (S50).
    pub interrupted: u64,
    /// Messages crash repair put back (S59).
    pub redelivered: u64,
    /// Messages it did not: their id was already redelivered `A` times.
    pub exhausted: u64,
    /// Messages it did not: their id was pending again at the end of the log.
    pub reused: u64,
    /// What became of the redelivered messages, by the end of the seed.
    pub afterwards: BTreeMap<Afterwards, u64>,
    /// `resume` sent: by a call after the open, or with `resume_on_open`.
    pub resumes: u64,
    /// `fate` answers that matched the simulator's reading of the log.
    pub fates_checked: u64,
    /// `fate` answers left unchecked: an append of that life was indeterminate, so the
    /// machine may hold what the log lost.
    pub fates_unchecked: u64,
}

impl Resumes {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &Resumes) {
        self.interrupted += other.interrupted;
        self.redelivered += other.redelivered;
        self.exhausted += other.exhausted;
        self.reused += other.reused;
        for (afterwards, n) in &other.afterwards {
            *self.afterwards.entry(*afterwards).or_default() += n;
        }
        self.resumes += other.resumes;
        self.fates_checked += other.fates_checked;
        self.fates_unchecked += other.fates_unchecked;
    }

    /// Counts a repair.
    pub fn repaired(&mut self, repaired: &Repaired) {
        let repair = &repaired.repair;
        self.interrupted += u64::from(!repair.events.is_empty());
        self.redelivered += repair.redelivered;
        self.exhausted += repair.exhausted;
        self.reused += repair.reused;
    }
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

/// A log image's bytes and its records.
type Parsed = (Vec<u8>, Vec<Record>);

/// Everything a life's tasks share.
#[derive(Clone)]
struct World {
    settings: Settings,
    disk: Disk,
    ledger: Ledger,
    tally: Tally,
    host_rng: SharedRng,
    client_rng: SharedRng,
    /// Which ids an open asks `fate` of.
    fate_rng: SharedRng,
    violations: Violations,
    delivery_memory: usize,
    resumes: Arc<Mutex<Resumes>>,
    /// The most items each list (NT, NS) may hold this life: `max_pending`, or more when the
    /// restored log held more (S55).
    bounds: Arc<Mutex<[usize; 2]>>,
    /// The image a power cut left and its records, parsed once for its checks and the open
    /// that repairs it.
    image: Arc<Mutex<Option<Parsed>>>,
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
        fate_rng: SharedRng::new(Rng::new(seed, 5)),
        violations: Violations::default(),
        // 4 stands for a memory that forgets nothing a seed sends (S58's `unbounded`).
        delivery_memory: match schedule.below(5) {
            4 => Options::MAX_CAPACITY,
            w => w as usize,
        },
        resumes: Arc::default(),
        bounds: Arc::new(Mutex::new([settings.max_pending; 2])),
        image: Arc::default(),
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
        let image = world.disk.bytes();
        let findings = match parse(&image) {
            Ok(parsed) => {
                let findings = check_records(
                    &parsed.records,
                    &world.ledger,
                    world.delivery_memory,
                    &format!("after life {n}"),
                );
                // The next open repairs this image: its records, read once.
                *world.lock_image() = Some((image, parsed.records));
                findings
            }
            Err(_) => check_image(
                &image,
                &world.ledger,
                world.delivery_memory,
                &format!("after life {n}"),
            ),
        };
        report.lost.extend(findings.lost);
        report.phantom.extend(findings.phantom);
        report.violations.extend(findings.violations);
    }
    report.lives = lives;
    // The final restore: the log opens cleanly and audits after its repair.
    run_in_runtime(&world, restore(world.clone()));
    report.violations.extend(world.violations.take());
    // The whole history: it audits after the final run, and, as the simulator reads it, what
    // became of every redelivered message, and no message ran twice.
    let mut story = Story::new(world.delivery_memory);
    match parse(&world.disk.bytes()) {
        Ok(parsed) => {
            let findings = check_records(
                &parsed.records,
                &world.ledger,
                world.delivery_memory,
                "the final log",
            );
            report.lost.extend(findings.lost);
            report.phantom.extend(findings.phantom);
            report.violations.extend(findings.violations);
            for record in &parsed.records {
                story.read(&record.event);
            }
        }
        Err(error) => report
            .violations
            .push(format!("the final log is corrupt: {error}")),
    }
    let (afterwards, findings) = story.finish();
    report.violations.extend(
        findings
            .into_iter()
            .map(|finding| format!("final log: {finding}")),
    );
    report.resumes = world.lock_resumes().clone();
    report.resumes.afterwards = afterwards;
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

impl World {
    /// The delivery memory the agents open with.
    fn agent_memory(&self) -> usize {
        (self
            .delivery_memory
            .saturating_add(self.settings.memory_skew))
        .min(Options::MAX_CAPACITY)
    }

    fn lock_resumes(&self) -> std::sync::MutexGuard<'_, Resumes> {
        self.resumes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_image(&self) -> std::sync::MutexGuard<'_, Option<Parsed>> {
        self.image.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_bounds(&self) -> std::sync::MutexGuard<'_, [usize; 2]> {
        self.bounds.lock().unwrap_or_else(PoisonError::into_inner)
    }
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
    options.delivery_memory = world.agent_memory();
    options.abort_grace = world.settings.abort_grace;
    options.max_pending = world.settings.max_pending;
    options.max_message_bytes = world.settings.max_message_bytes;
    options.max_id_bytes = world.settings.max_id_bytes;
    options.redelivery = world.settings.redelivery;
    options.resume_on_open = plan.resume_on_open;
    options
}

/// Opens the agent with faults off (a refusal is a violation), checks its crash repair (S50,
/// S59) and audits the repaired log, checks the restored lists against the limit and every
/// id's `fate` against the log (S58; I16: what repair put back is pending), then sends
/// `resume` (S57) unless `resume_on_open` did or `resume` is false.
async fn open(world: &World, life: u32, options: Options, resume: bool) -> Option<Agent> {
    world.disk.arm(false);
    let when = match life {
        u32::MAX => "the final restore".to_owned(),
        n => format!("opening life {n}"),
    };
    let before = world.disk.bytes();
    let on_open = options.resume_on_open;
    let host = SimHost {
        rng: world.host_rng.clone(),
        tally: world.tally.clone(),
        ledger: world.ledger.clone(),
        life,
        sabotage: world.settings.host,
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
    let after_bytes = world.disk.bytes();
    let image = world.lock_image().take();
    let before_records = match image {
        Some((bytes, records)) if bytes == before => Ok(records),
        _ => parse(&before).map(|parsed| parsed.records),
    };
    let (before_records, after) = match (before_records, parse(&after_bytes)) {
        (Ok(before_records), Ok(after)) => (before_records, after.records),
        (Err(error), _) | (_, Err(error)) => {
            world
                .violations
                .push(format!("{when}: the log is corrupt: {error}"));
            return Some(agent);
        }
    };
    let repaired = check_repair(
        Image {
            bytes: &before,
            records: &before_records,
        },
        Image {
            bytes: &after_bytes,
            records: &after,
        },
        world.delivery_memory,
        ALLOWANCE,
        on_open,
        &when,
    );
    if repaired.violations.is_empty() && recovery.redelivered as u64 != repaired.repair.redelivered
    {
        world.violations.push(format!(
            "{when}: the open reports {} messages redelivered, the repair appended {}",
            recovery.redelivered, repaired.repair.redelivered
        ));
    }
    world.lock_resumes().repaired(&repaired);
    for violation in &repaired.violations {
        world.violations.push(violation.clone());
    }
    let findings = check_records(
        &after,
        &world.ledger,
        world.delivery_memory,
        &format!("opening life {life}"),
    );
    for violation in findings.violations {
        world.violations.push(violation);
    }
    // A list holds at most `max_pending` items, or what its restored log held (S55); crash
    // repair may put back what the interrupted turn had claimed from it (S59).
    let max = world.settings.max_pending;
    let back = repaired.repair.put_back();
    let restored = [recovery.pending_next_turn, recovery.pending_next_step];
    let bounds = *world.lock_bounds();
    let mut next = bounds;
    for (at, list) in ["NT", "NS"].into_iter().enumerate() {
        let (n, allowed) = (restored[at], bounds[at] + back[at]);
        if n > allowed {
            world.violations.push(format!(
                "life {life}: the restored {list} holds {n} items, above max_pending {max} \
                 (or the {allowed} the log can hold)"
            ));
        }
        next[at] = n.max(max);
    }
    *world.lock_bounds() = next;
    if on_open {
        world.lock_resumes().resumes += 1;
    }
    // What the repair put back (I16: pending again), a few other ids the seed minted, and one
    // it never sent.
    let mut ids: Vec<String> = repaired.repair.ids();
    let minted = world.ledger.len() as u64;
    if minted > 0 {
        let at: Vec<usize> = (0..SWEEP)
            .map(|_| world.fate_rng.with(|rng| rng.below(minted)) as usize)
            .collect();
        ids.extend(world.ledger.ids_at(&at));
    }
    ids.push(format!("never-{life}"));
    let now = (after_bytes.len(), &repaired.story);
    check_fates(world, &agent, &ids, &when, Some(now)).await;
    if resume && !on_open {
        match tokio::time::timeout(world.settings.deadlock_after, agent.resume()).await {
            Ok(Ok(())) => world.lock_resumes().resumes += 1,
            Ok(Err(error)) => world
                .violations
                .push(format!("{when}: resume failed: {error}")),
            Err(_) => world
                .violations
                .push(format!("{when}: resume hangs (deadlock)")),
        }
    }
    Some(agent)
}

/// Asks `fate` of each id (S58) and holds every answer to the simulator's own reading of the
/// log as it stood when the driver answered: the log at the call, or once one of the appends
/// made meanwhile returned (the driver answers between its appends, from a machine that is
/// exactly its log then). After an indeterminate append the machine may hold what the log
/// lost: the answers are counted unchecked.
async fn check_fates(
    world: &World,
    agent: &Agent,
    ids: &[String],
    when: &str,
    now: Option<(usize, &Story)>,
) {
    let (start, from) = world.disk.position();
    let mut answers = Vec::with_capacity(ids.len());
    for id in ids {
        match tokio::time::timeout(world.settings.deadlock_after, agent.fate(id.as_str())).await {
            Ok(fate) => answers.push(fate.to_json()),
            Err(_) => {
                return world
                    .violations
                    .push(format!("{when}: fate(`{id}`) hangs (deadlock)"));
            }
        }
    }
    for (id, answer) in ids.iter().zip(&answers) {
        world.ledger.note(format!("fate {id} {answer}"));
    }
    let (marks, indeterminate) = world.disk.marks_since(from);
    if indeterminate {
        world.lock_resumes().fates_unchecked += ids.len() as u64;
        return;
    }
    let fates = match now {
        // Nothing was appended since `story` was read: the log is the one it read.
        Some((len, story)) if marks.is_empty() && len == start => {
            vec![ids.iter().map(|id| story.fate(id)).collect()]
        }
        _ => {
            let mut lengths = vec![start];
            lengths.extend(marks);
            match fates_at(&world.disk.bytes(), world.delivery_memory, &lengths, ids) {
                Ok(fates) => fates,
                Err(error) => return world.violations.push(format!("{when}: {error}")),
            }
        }
    };
    let mut checked = 0;
    for (at, (id, answer)) in ids.iter().zip(&answers).enumerate() {
        if fates.iter().any(|fates| fates[at] == *answer) {
            checked += 1;
            continue;
        }
        let mut expected: Vec<String> = fates.iter().map(|fates| fates[at].to_string()).collect();
        expected.dedup();
        world.violations.push(format!(
            "{when}: fate(`{id}`) answered {answer}, the log says {}",
            expected.join(" or ")
        ));
    }
    world.lock_resumes().fates_checked += checked;
}

/// One life: open, run the clients, end; or crash at any await point.
async fn life(world: World, n: u32, plan: Life) {
    let Some(agent) = open(&world, n, options(&world, &plan), true).await else {
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

/// Both pending lists within `max_pending` (the memory bound), or what the restored log held
/// (S55).
async fn pending_within_limit(world: &World, agent: &Agent, n: u32) {
    if let Ok(Ok(snapshot)) =
        tokio::time::timeout(world.settings.deadlock_after, agent.pending()).await
    {
        let max = world.settings.max_pending;
        let bounds = *world.lock_bounds();
        for ((list, len), bound) in [
            ("NT", snapshot.next_turn.len()),
            ("NS", snapshot.next_step.len()),
        ]
        .into_iter()
        .zip(bounds)
        {
            if len > bound {
                world.violations.push(format!(
                    "life {n}: {list} holds {len} items, above max_pending {max} (or the \
                     {bound} its restored log held)"
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
        Op::Fate(count) => {
            let mut ids: Vec<String> = (0..count).map(|_| pick(world, false)).collect();
            for id in &mut ids {
                if id.is_empty() {
                    *id = format!("never-{n}");
                }
            }
            check_fates(world, agent, &ids, &format!("life {n}"), None).await;
        }
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

/// The final restore: the log opens (faults off), audits after its repair, resumes (S57), runs
/// until idle (at most [`FINAL_RUN`] of virtual time), and closes.
async fn restore(world: World) {
    let mut options = Options::named("sim-restore");
    options.delivery_memory = world.agent_memory();
    options.max_pending = world.settings.max_pending;
    options.redelivery = world.settings.redelivery;
    if let Some(agent) = open(&world, u32::MAX, options, true).await {
        // What the resume started runs (the host's faults still apply, the log's do not): the
        // messages the last repair put back get their model call. A host that hangs for ever
        // is left to `close`.
        let _ = tokio::time::timeout(FINAL_RUN, agent.when_idle()).await;
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
