//! Bench 7: many agents. 10k agents on one multi-threaded tokio runtime, a no-op host and an
//! in-memory log each, every agent processing follow-ups; deliveries per second end to end (from
//! the first `followup` call to the last agent idle again, every turn run to its end).
//!
//! Baselines in the same run: the same number of request/acknowledge round trips through one
//! channel-fed task per agent (the floor of any task-per-agent design), and the same number of
//! follow-up cycles on bare machines on one thread (the core alone).
//!
//! Not criterion: one timed round is already 10⁵ deliveries over 10k tasks. The median of
//! [`ROUNDS`] rounds is reported. A smoke run (`cargo test --benches`) uses 100 agents and writes
//! nothing.

use std::time::{Duration, Instant};

use coxswain_benches::report_file::{full_run, save};
use coxswain_benches::{followup_cycle, message};
use coxswain_core::{Machine, Message, StepAnswer};
use coxswain_tokio::{Agent, Host, MemoryLog, Options, StepContext};
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
async fn agents_round(agents: usize, per_agent: usize) -> Duration {
    let mut handles = Vec::with_capacity(agents);
    for i in 0..agents {
        let (agent, _) = Agent::open_with(Options::named(format!("a{i}")), Noop, MemoryLog::new())
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

/// The core alone: the same number of follow-up cycles on bare machines, one thread, messages
/// built in the loop as the agents' callers do.
fn core_round(agents: usize, per_agent: usize) -> Duration {
    let mut machines: Vec<Machine> = (0..agents).map(|_| Machine::new()).collect();
    let start = Instant::now();
    for j in 0..per_agent {
        for (i, machine) in machines.iter_mut().enumerate() {
            let m = std::sync::Arc::new(Message::user(format!("a{i}m{j}"), "hello"));
            followup_cycle(machine, m);
        }
    }
    start.elapsed()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let full = full_run();
    let (agents, per_agent) = if full { (10_000, 10) } else { (100, 2) };
    let rounds = if full { ROUNDS } else { 1 };
    let deliveries = (agents * per_agent) as f64;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("a runtime");
    let _ = message(0);
    let (mut agent_rates, mut echo_rates, mut core_rates) = (vec![], vec![], vec![]);
    for round in 0..rounds {
        let agent = runtime.block_on(agents_round(agents, per_agent));
        let echo = runtime.block_on(echo_round(agents, per_agent));
        let core = core_round(agents, per_agent);
        let rate = |d: Duration| deliveries / d.as_secs_f64();
        println!(
            "round {round}: agents {:.0}/s, echo floor {:.0}/s, core alone {:.0}/s",
            rate(agent),
            rate(echo),
            rate(core)
        );
        agent_rates.push(rate(agent));
        echo_rates.push(rate(echo));
        core_rates.push(rate(core));
    }
    let (agent, echo, core) = (median(agent_rates), median(echo_rates), median(core_rates));
    println!(
        "{agents} agents × {per_agent} follow-ups on {threads} worker threads: \
         {agent:.0} deliveries/s end to end ({:.2} µs each); echo floor {echo:.0}/s \
         (agents take {:.1}× as long); core alone {core:.0}/s (agents take {:.1}× as long)",
        1e6 / agent,
        echo / agent,
        core / agent
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
            }),
        );
    }
}
