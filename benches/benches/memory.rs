//! Benches 5 and 6: allocations per cycle, and memory. The size of an idle machine (inline and heap), the heap a machine holds per
//! pending message, and the resident memory of 100k idle agents on one tokio runtime.
//!
//! Not criterion: sizes are counted, not timed. Heap is counted with the counting allocator on
//! this thread; resident memory is read from `/proc/self/statm`. A smoke run (`cargo test
//! --benches`) uses small sizes and writes nothing.

use coxswain_benches::alloc::Counting;
use coxswain_benches::report_file::{full_run, save};
use coxswain_benches::{followup_cycle, machine_with_memory, messages, resident_bytes, settle};
use coxswain_core::{Machine, Output, StepAnswer, Target};
use coxswain_tokio::{Agent, Host, MemoryLog, Options, StepContext};
use serde_json::json;

#[global_allocator]
static ALLOC: Counting = Counting::new();

/// A host that does nothing: every step completes at once.
struct Noop;

impl Host for Noop {
    async fn step(&self, _cx: StepContext) -> StepAnswer {
        StepAnswer::Completed
    }
}

/// Heap bytes the machine holds with `n` messages pending (half in NT, half in NS, all quiet),
/// the messages themselves not counted (they belong to the caller and are created first).
fn heap_with_pending(n: usize) -> i64 {
    let pool = messages(n);
    let before = ALLOC.snapshot();
    let mut machine = Machine::new();
    for (i, message) in pool.iter().enumerate() {
        let target = if i % 2 == 0 {
            Target::NextTurn
        } else {
            Target::NextStep
        };
        settle(
            machine
                .send(message.clone(), target, false, None)
                .expect("send accepted"),
        );
    }
    let held = ALLOC.snapshot().since(&before).net_bytes();
    drop(machine);
    held
}

/// Heap bytes a machine holds with a full delivery memory of `w` ids and nothing pending; the
/// messages are gone, so what is left is the memory and the ids it keeps alive.
fn heap_with_memory(w: usize) -> i64 {
    let before = ALLOC.snapshot();
    let machine = machine_with_memory(&messages(w));
    let held = ALLOC.snapshot().since(&before).net_bytes();
    drop(machine);
    held
}

fn main() {
    if let Ok(spec) = std::env::var("COXSWAIN_IDLE_AGENTS") {
        // `agents,update_capacity[,channel_capacity]`
        let fields: Vec<usize> = spec
            .split(',')
            .map(|field| field.parse().expect("a number"))
            .collect();
        let rss = idle_agents(fields[0], fields[1], fields.get(2).copied());
        println!("{rss}");
        return;
    }
    let full = full_run();
    let mut figures = serde_json::Map::new();

    let inline = std::mem::size_of::<Machine>();
    let before = ALLOC.snapshot();
    let machine = Machine::new();
    let fresh_heap = ALLOC.snapshot().since(&before).net_bytes();
    drop(machine);
    println!("idle machine: {inline} B inline + {fresh_heap} B heap (goal <= 256 B)");
    println!("output: {} B", std::mem::size_of::<Output>());
    figures.insert("machine_inline_bytes".into(), json!(inline));
    figures.insert("machine_fresh_heap_bytes".into(), json!(fresh_heap));
    figures.insert("output_bytes".into(), json!(std::mem::size_of::<Output>()));

    // Bench 5 (also asserted by `tests/alloc.rs`): allocations per follow-up cycle once warm.
    let cycles = 10_000;
    let pool = messages(cycles + 1);
    let mut machine = Machine::new();
    followup_cycle(&mut machine, pool[cycles].clone());
    let before = ALLOC.snapshot();
    for message in &pool[..cycles] {
        followup_cycle(&mut machine, message.clone());
    }
    let counted = ALLOC.snapshot().since(&before);
    let per_cycle = (counted.allocations + counted.reallocations) as f64 / cycles as f64;
    println!("allocations per follow-up cycle once warm: {per_cycle} ({counted:?} over {cycles})");
    figures.insert("allocations_per_cycle".into(), json!(per_cycle));
    drop(machine);

    let sizes: &[usize] = if full {
        &[1, 10, 1_000, 100_000]
    } else {
        &[1, 10]
    };
    let mut pending = Vec::new();
    for &n in sizes {
        let held = heap_with_pending(n);
        let per = held as f64 / n as f64;
        println!("machine with {n} pending: {held} B heap ({per:.1} B per message)");
        pending.push(json!({"pending": n, "heap_bytes": held, "per_message": per}));
    }
    figures.insert("pending".into(), json!(pending));

    // The delivery memory (S51): heap per held id, the ids themselves counted (a held id keeps
    // its string alive after its message is gone).
    let memories: &[usize] = if full { &[256, 1_000, 100_000] } else { &[10] };
    let mut held_figures = Vec::new();
    for &w in memories {
        let held = heap_with_memory(w);
        let per = held as f64 / w as f64;
        println!("machine holding {w} delivered ids: {held} B heap ({per:.1} B per held id)");
        held_figures.push(json!({"held": w, "heap_bytes": held, "per_id": per}));
    }
    figures.insert("delivery_memory".into(), json!(held_figures));

    // What an idle agent holds on the heap, counted (a current-thread runtime, so the driver
    // tasks allocate on this thread), and the parts of it that can be built alone: its log
    // handle, a command channel of boxed calls, a watch channel. The rest is the task (the
    // driver's future, ~1.5 kB, the session layer's loop and the machine inline in it), the
    // cancellation tokens, the handle's shared parts and the update channel's header.
    let counted_agents = if full { 1_000 } else { 10 };
    let heap = idle_agent_heap(counted_agents);
    let log = heap_of(|| Box::new(MemoryLog::new()));
    let channel = heap_of(|| Box::new(tokio::sync::mpsc::channel::<Box<u8>>(64)));
    let watch = heap_of(|| Box::new(tokio::sync::watch::channel([0u64; 4])));
    println!(
        "idle agent heap (counted, {counted_agents} agents): {heap:.0} B per agent; of it: \
         the in-memory log {log} B, a command channel {channel} B, a watch channel {watch} B"
    );
    figures.insert(
        "idle_agent_heap".into(),
        json!({"agents": counted_agents, "per_agent": heap, "memory_log": log,
               "command_channel": channel, "watch_channel": watch}),
    );

    // Each configuration runs in a child process of its own: memory freed by one would be reused
    // by the next and hide its growth. The update buffer is allocated at the first subscribe, so
    // default options cost no buffer for agents nobody watches.
    let runs: &[(&str, usize, usize)] = if full {
        &[("default", 100_000, 1024)]
    } else {
        &[("default", 1_000, 1024)]
    };
    for &(label, agents, capacity) in runs {
        let child = std::process::Command::new(std::env::current_exe().expect("own path"))
            .env("COXSWAIN_IDLE_AGENTS", format!("{agents},{capacity}"))
            .output()
            .expect("child runs");
        let rss: u64 = String::from_utf8_lossy(&child.stdout)
            .trim()
            .parse()
            .expect("child prints its resident bytes");
        println!(
            "{agents} idle agents (update_capacity {capacity}): {:.1} MiB resident, {:.0} B per agent",
            rss as f64 / (1 << 20) as f64,
            rss as f64 / agents as f64
        );
        figures.insert(
            format!("idle_agents_{label}"),
            json!({"agents": agents, "update_capacity": capacity, "resident_bytes": rss,
                   "per_agent": rss as f64 / agents as f64}),
        );
    }
    if full {
        save("memory", &serde_json::Value::Object(figures));
    }
}

/// Net heap bytes that building `value` leaves allocated (the box itself not counted).
fn heap_of<T>(value: impl FnOnce() -> Box<T>) -> i64 {
    let before = ALLOC.snapshot();
    let value = value();
    let held = ALLOC.snapshot().since(&before).net_bytes() - std::mem::size_of::<T>() as i64;
    drop(value);
    held
}

/// Net heap bytes per idle agent: `agents` agents opened (in-memory log, no-op host) on a
/// current-thread runtime, every driver task started and parked, counted on this thread.
fn idle_agent_heap(agents: usize) -> f64 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        tokio::task::yield_now().await;
        let names: Vec<String> = (0..agents).map(|i| format!("a{i}")).collect();
        let mut handles = Vec::with_capacity(agents);
        let before = ALLOC.snapshot();
        for name in &names {
            let options = Options::named(name.clone());
            let (agent, _) = Agent::open_with(options, Noop, MemoryLog::new())
                .await
                .expect("agent opens");
            handles.push(agent);
        }
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        let held = ALLOC.snapshot().since(&before).net_bytes();
        for agent in &handles {
            agent.close().await.expect("agent closes");
        }
        held as f64 / agents as f64
    })
}

/// Resident memory added by `agents` idle agents (open on an in-memory log, no-op host) on one
/// multi-threaded runtime, measured while they all live.
fn idle_agents(agents: usize, update_capacity: usize, channel_capacity: Option<usize>) -> u64 {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        // Warm the runtime up so its own memory is not counted.
        tokio::task::yield_now().await;
        let before = resident_bytes().unwrap_or(0);
        let mut handles = Vec::with_capacity(agents);
        for i in 0..agents {
            let mut options = Options::named(format!("a{i}"));
            options.update_capacity = update_capacity;
            if let Some(capacity) = channel_capacity {
                options.channel_capacity = capacity;
            }
            let (agent, _) = Agent::open_with(options, Noop, MemoryLog::new())
                .await
                .expect("agent opens");
            handles.push(agent);
        }
        // Let every driver task start and park on its channel.
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let after = resident_bytes().unwrap_or(0);
        for agent in &handles {
            agent.close().await.expect("agent closes");
        }
        after.saturating_sub(before)
    })
}
