//! Bench 7: many agents. 10k agents on one multi-threaded tokio runtime, a no-op host and an
//! in-memory log each, every agent processing follow-ups; deliveries per second end to end (from
//! the first `followup` call to the last agent idle again, every turn run to its end).
//!
//! Baselines in the same run: the same number of request/acknowledge round trips through one
//! channel-fed task per agent (the floor of any task-per-agent design); the same number of
//! follow-up cycles on bare machines on one thread (the core alone); the same inputs through the
//! session layer on one thread, each input a batch of its own (feed, seal, persisted: the session
//! alone); and the same again with each sealed batch's records encoded as the in-memory log
//! encodes them (the session and its records). The agents' time is then the driver's, on top.
//!
//! Not criterion: one timed round is already 10⁵ deliveries over 10k tasks. The median of
//! [`ROUNDS`] interleaved rounds is reported. A smoke run (`cargo test --benches`) uses 100 agents
//! and writes nothing.
//!
//! Profiling one part alone (say under `valgrind --tool=callgrind`):
//! `COXSWAIN_AGENTS_ONLY=<agents|echo|core|session|records>,<agents>,<per agent>[,<workers>]`
//! runs that part once at that size and prints nothing but its time.

use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use coxswain_benches::report_file::{full_run, save};
use coxswain_benches::{followup_cycle, message, session_cycle};
use coxswain_core::{
    Config, Effect, Input, Machine, Message, PreStepAnswer, Request, StepAnswer, TurnStoppingAnswer,
};
use coxswain_session::{Release, Session};
use coxswain_tokio::{Agent, Hooks, Host, MemoryLog, Options, StepContext};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

const ROUNDS: usize = 3;

/// A host that does nothing: every step completes at once (the default pre-step enters the
/// claimed batch, the default turn-stopping hooks do nothing).
struct Noop;

impl Host for Noop {
    async fn step(&self, _cx: StepContext) -> StepAnswer {
        StepAnswer::Completed
    }
}

/// Opens `agents` agents, then times every agent taking `per_agent` follow-ups (sent one after
/// the other, each resolving once durable) and running all their turns.
/// [`Noop`] declaring that it wrote only `step` ([`Hooks::NONE`]): the session answers the
/// pre-step and turn-stopping hooks itself, a turn takes 2 appends instead of 4.
struct StepOnly;

impl Host for StepOnly {
    fn hooks(&self) -> Hooks {
        Hooks::NONE
    }

    async fn step(&self, _cx: StepContext) -> StepAnswer {
        StepAnswer::Completed
    }
}

async fn agents_round(agents: usize, per_agent: usize) -> Duration {
    hosted_round(agents, per_agent, || Noop).await
}

async fn hosted_round<H: Host>(agents: usize, per_agent: usize, host: impl Fn() -> H) -> Duration {
    let mut handles = Vec::with_capacity(agents);
    for i in 0..agents {
        let (agent, _) =
            Agent::open_with(Options::named(format!("a{i}")), host(), MemoryLog::new())
                .await
                .expect("agent opens");
        handles.push(agent);
    }
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, agent) in handles.iter().cloned().enumerate() {
        tasks.spawn(async move {
            for j in 0..per_agent {
                agent
                    .followup(Message::user(format!("a{i}m{j}"), "hello"))
                    .await
                    .expect("delivered");
            }
            agent.when_idle().await.expect("idle");
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("agent task");
    }
    let elapsed = start.elapsed();
    for agent in &handles {
        agent.close().await.expect("closes");
    }
    elapsed
}

/// The floor: one task per agent fed by a channel, each request acknowledged on a oneshot.
async fn echo_round(agents: usize, per_agent: usize) -> Duration {
    type Request = (Message, oneshot::Sender<()>);
    let mut senders = Vec::with_capacity(agents);
    for _ in 0..agents {
        let (tx, mut rx) = mpsc::channel::<Request>(64);
        tokio::spawn(async move {
            while let Some((message, ack)) = rx.recv().await {
                std::hint::black_box(&message);
                let _ = ack.send(());
            }
        });
        senders.push(tx);
    }
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, tx) in senders.iter().cloned().enumerate() {
        tasks.spawn(async move {
            for j in 0..per_agent {
                let (ack, acked) = oneshot::channel();
                tx.send((Message::user(format!("a{i}m{j}"), "hello"), ack))
                    .await
                    .expect("sent");
                acked.await.expect("acked");
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("echo task");
    }
    start.elapsed()
}

/// A machine configured as an agent's with default [`Options`]: its delivery memory, its
/// admission bound and a hash seed of its own.
fn agent_machine(i: usize) -> Machine {
    let config = Config::new()
        .with_delivery_memory(Options::DEFAULT_DELIVERY_MEMORY)
        .with_hash_seed(0x9e37_79b9_7f4a_7c15 ^ i as u64)
        .with_max_pending(NonZeroUsize::new(Options::DEFAULT_MAX_PENDING).expect("not 0"));
    Machine::with_config(config)
}

/// A session configured as an agent's with default [`Options`] and a host that writes every
/// hook ([`Noop`] declares none: [`Hooks::ALL`](coxswain_session::Hooks::ALL)).
fn agent_session(i: usize) -> Session {
    let options = coxswain_session::Options {
        max_batch: Options::DEFAULT_MAX_BATCH,
        ..coxswain_session::Options::default()
    };
    Session::new(agent_machine(i), options)
}

/// The core alone: the same number of follow-up cycles on bare machines configured as the
/// agents' are, one thread, messages built in the loop as the agents' callers do.
fn core_round(agents: usize, per_agent: usize) -> Duration {
    let mut machines: Vec<Machine> = (0..agents).map(agent_machine).collect();
    let start = Instant::now();
    for j in 0..per_agent {
        for (i, machine) in machines.iter_mut().enumerate() {
            let m = std::sync::Arc::new(Message::user(format!("a{i}m{j}"), "hello"));
            followup_cycle(machine, m);
        }
    }
    start.elapsed()
}

/// The session alone: the same follow-up cycles through [`Session`] (feed, seal, persisted, one
/// batch per input as a driver with nothing else waiting commits it), one session per agent, one
/// thread.
fn session_round(agents: usize, per_agent: usize) -> Duration {
    let mut sessions: Vec<Session> = (0..agents).map(agent_session).collect();
    let start = Instant::now();
    for j in 0..per_agent {
        for (i, session) in sessions.iter_mut().enumerate() {
            let m = std::sync::Arc::new(Message::user(format!("a{i}m{j}"), "hello"));
            std::hint::black_box(session_cycle(session, m));
        }
    }
    start.elapsed()
}

/// The session and its records: [`session_round`] with every sealed batch's records encoded as
/// JSON lines, as the in-memory log does (into one buffer per agent, cleared when it would
/// outgrow a page: the log's growth is not what is measured).
fn records_round(agents: usize, per_agent: usize) -> Duration {
    let mut sessions: Vec<(Session, Vec<u8>, u64)> = (0..agents)
        .map(|i| (agent_session(i), Vec::with_capacity(8192), 1))
        .collect();
    let start = Instant::now();
    for j in 0..per_agent {
        for (i, (session, bytes, seq)) in sessions.iter_mut().enumerate() {
            let m = std::sync::Arc::new(Message::user(format!("a{i}m{j}"), "hello"));
            let mut commit = |session: &mut Session| {
                let append = session.seal().expect("one staged input");
                let batch = append.batch;
                if bytes.len() > 4096 {
                    bytes.clear();
                }
                for entry in append.entries {
                    coxswain_tokio::coxswain_log::encode(*seq, entry, bytes).expect("encodes");
                    *seq += 1;
                }
                let releases = session
                    .persisted(batch, Duration::ZERO)
                    .expect("the sealed batch");
                releases
                    .filter_map(|release| match release {
                        Release::Effect(Effect::Request(Request::PreStep { messages, .. })) => {
                            Some(messages)
                        }
                        _ => None,
                    })
                    .last()
            };
            session.feed(Input::Followup(m)).expect("followup accepted");
            let claimed = commit(session).expect("a pre-step request");
            let answer = Input::PreStep(PreStepAnswer::Enter(claimed));
            session.feed(answer).expect("pre-step answer accepted");
            commit(session);
            let answer = Input::Step(StepAnswer::Completed);
            session.feed(answer).expect("step answer accepted");
            commit(session);
            let answer = Input::TurnStopping(TurnStoppingAnswer::Done);
            session.feed(answer).expect("turn-stopping answer accepted");
            commit(session);
        }
    }
    std::hint::black_box(&sessions);
    start.elapsed()
}

fn runtime(threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// `COXSWAIN_AGENTS_ONLY`: one part alone, once, at the size given (for a profiler).
fn only(spec: &str) {
    let fields: Vec<&str> = spec.split(',').collect();
    let number = |i: usize, default: usize| {
        fields
            .get(i)
            .map_or(default, |f| f.parse().expect("a number"))
    };
    let (agents, per_agent) = (number(1, 1_000), number(2, 10));
    let threads = number(3, 2);
    let elapsed = match fields[0] {
        "agents" => runtime(threads).block_on(agents_round(agents, per_agent)),
        "step-only" => runtime(threads).block_on(hosted_round(agents, per_agent, || StepOnly)),
        "echo" => runtime(threads).block_on(echo_round(agents, per_agent)),
        "core" => core_round(agents, per_agent),
        "session" => session_round(agents, per_agent),
        "records" => records_round(agents, per_agent),
        other => panic!("no part {other:?}: agents, echo, core, session or records"),
    };
    println!("{} {agents}x{per_agent}: {elapsed:?}", fields[0]);
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    if let Ok(spec) = std::env::var("COXSWAIN_AGENTS_ONLY") {
        return only(&spec);
    }
    let full = full_run();
    let (agents, per_agent) = if full { (10_000, 10) } else { (100, 2) };
    let rounds = if full { ROUNDS } else { 1 };
    let deliveries = (agents * per_agent) as f64;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let runtime = runtime(threads);
    let _ = message(0);
    let mut rates: [Vec<f64>; 6] = Default::default();
    for round in 0..rounds {
        let times = [
            runtime.block_on(agents_round(agents, per_agent)),
            runtime.block_on(echo_round(agents, per_agent)),
            core_round(agents, per_agent),
            session_round(agents, per_agent),
            records_round(agents, per_agent),
            runtime.block_on(hosted_round(agents, per_agent, || StepOnly)),
        ];
        let rate = |d: &Duration| deliveries / d.as_secs_f64();
        println!(
            "round {round}: agents {:.0}/s, echo floor {:.0}/s, core alone {:.0}/s, \
             session alone {:.0}/s, session and records {:.0}/s, step-only agents {:.0}/s",
            rate(&times[0]),
            rate(&times[1]),
            rate(&times[2]),
            rate(&times[3]),
            rate(&times[4]),
            rate(&times[5]),
        );
        for (rates, time) in rates.iter_mut().zip(&times) {
            rates.push(rate(time));
        }
    }
    let [agent, echo, core, session, records, step_only] = rates.map(median);
    let us = |rate: f64| 1e6 / rate;
    println!(
        "{agents} agents × {per_agent} follow-ups on {threads} worker threads, medians of \
         {rounds} interleaved rounds:"
    );
    for (name, rate) in [
        ("echo floor", echo),
        ("core alone (1 thread)", core),
        ("session alone (1 thread)", session),
        ("session and records (1 thread)", records),
        ("agents, end to end", agent),
        ("agents, host of step only", step_only),
    ] {
        println!(
            "  {name:<32} {rate:>10.0}/s  {:>6.2} µs each  {:>5.2}× the echo",
            us(rate),
            echo / rate
        );
    }
    println!(
        "  shares of an agent's delivery: core {:.0} %, session layer {:.0} %, records {:.0} %, \
         driver and runtime {:.0} %",
        100.0 * agent / core,
        100.0 * (agent / session - agent / core),
        100.0 * (agent / records - agent / session),
        100.0 * (1.0 - agent / records)
    );
    if full {
        save(
            "agents",
            &json!({
                "agents": agents,
                "per_agent": per_agent,
                "worker_threads": threads,
                "deliveries_per_s": agent,
                "echo_per_s": echo,
                "core_cycles_per_s": core,
                "session_cycles_per_s": session,
                "session_records_cycles_per_s": records,
                "step_only_deliveries_per_s": step_only,
            }),
        );
    }
}
