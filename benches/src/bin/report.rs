//! Prints the results table of docs/performance.md from the latest bench run: criterion's
//! estimates (`<target>/criterion/<group>/<id>/new/estimates.json`) and the figures the custom
//! benches saved (`<target>/criterion/coxswain/*.json`). Every ratio compares two measurements
//! of the same run.
//!
//! ```text
//! cargo bench -p coxswain-benches && cargo run --release -p coxswain-benches --bin report
//! ```

use std::path::{Path, PathBuf};

use coxswain_benches::report_file::results_dir;
use serde_json::Value;

/// `<target>/criterion`.
fn criterion_dir() -> PathBuf {
    results_dir()
        .parent()
        .map_or_else(|| PathBuf::from("target/criterion"), Path::to_path_buf)
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Median time per element (ns) of one criterion benchmark: the median time per iteration over
/// the elements of its throughput (1 without one).
fn per_element(group: &str, id: &str) -> Option<f64> {
    let dir = criterion_dir().join(group).join(id).join("new");
    let estimates = read_json(&dir.join("estimates.json"))?;
    let median = estimates.pointer("/median/point_estimate")?.as_f64()?;
    let elements = read_json(&dir.join("benchmark.json"))
        .and_then(|b| b.pointer("/throughput/Elements").and_then(Value::as_f64))
        .unwrap_or(1.0);
    Some(median / elements)
}

fn time(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.1} ns")
    }
}

fn cell(value: Option<f64>, show: impl Fn(f64) -> String) -> String {
    value.map_or_else(|| "—".to_owned(), show)
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? / b?)
}

fn machine_note() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name")?.split_once(':'))
        .map_or("unknown CPU", |(_, model)| model.trim());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cpus} × {model}")
}

fn main() {
    println!(
        "Machine: {} (shared; other builds ran meanwhile).",
        machine_note()
    );
    println!("Times are criterion medians; every ratio compares two measurements of the same run.");
    println!();
    println!("| Bench | Case | Per op | Baseline (same run) | Ratio | Goal |");
    println!("| --- | --- | --- | --- | --- | --- |");
    cycle_rows();
    steer_burst_rows();
    queue_edit_rows();
    restore_rows();
    memory_rows();
    delivery_memory_rows();
    many_agents_row();
    durable_rows();
    hostile_id_rows();
    postgres_rows();
}

/// Bench 1: the follow-up cycle, against a bare queue, the S8 floor, and through `Session`.
fn cycle_rows() {
    // 1. Full follow-up cycle.
    let cycle = per_element("cycle", "machine");
    let base = per_element("cycle", "baseline");
    let shared = per_element("cycle", "baseline_shared");
    println!(
        "| 1 follow-up cycle | 15 events and effects settled | {} / cycle | {} (`VecDeque`, 15 push+pop) | {} | ≤ 2× |",
        cell(cycle, time),
        cell(base, time),
        cell(ratio(cycle, base), |r| format!("{r:.2}×"))
    );
    println!(
        "| 1 follow-up cycle | vs the S8 floor | {} / cycle | {} (same queue, the message shared by 4 outputs) | {} | — |",
        cell(cycle, time),
        cell(shared, time),
        cell(ratio(cycle, shared), |r| format!("{r:.2}×"))
    );

    let session = per_element("cycle", "session");
    println!(
        "| 1 follow-up cycle | through `Session`, one batch per input: feed, seal, persisted | {} / cycle | {} (`cycle/machine`, same run) | {} | — |",
        cell(session, time),
        cell(cycle, time),
        cell(ratio(session, cycle), |r| format!("{r:.2}×"))
    );
}

/// Bench 2: steering bursts, per message, against burst 1 and the bare queue.
fn steer_burst_rows() {
    // 2. Steering burst: per message, against burst 1 (and the bare queue of the same outputs).
    let one = per_element("steer_burst", "machine/1");
    for burst in [1, 16, 256] {
        let machine = per_element("steer_burst", &format!("machine/{burst}"));
        let queue = per_element("steer_burst", &format!("baseline/{burst}"));
        println!(
            "| 2 steering burst | {burst} steers | {} / message | {} (burst 1); queue of the same outputs {} | {} vs burst 1 ({} vs queue) | flat |",
            cell(machine, time),
            cell(one, time),
            cell(queue, time),
            cell(ratio(machine, one), |r| format!("{r:.2}×")),
            cell(ratio(machine, queue), |r| format!("{r:.1}×"))
        );
    }
}

/// Bench 3: queue edits by id at 10, 1,000 and 100,000 pending.
fn queue_edit_rows() {
    // 3. Queue edits by id.
    for edit in ["remove", "replace"] {
        let small = per_element("queue_edit", &format!("{edit}/10"));
        for n in [10, 1_000, 100_000] {
            let t = per_element("queue_edit", &format!("{edit}/{n}"));
            let what = if edit == "remove" {
                "remove middle + requeue"
            } else {
                "replace in place"
            };
            println!(
                "| 3 queue edit | {what}, {n} pending | {} | {} (10 pending) | {} | sensible at 100k |",
                cell(t, time),
                cell(small, time),
                cell(ratio(t, small), |r| format!("{r:.2}×"))
            );
        }
    }
}

/// Bench 4: restore, typed and from JSON lines, against 1,000 events.
fn restore_rows() {
    // 4. Restore.
    for (kind, label) in [("typed", "typed events"), ("json_lines", "JSON lines")] {
        let small = per_element("restore", &format!("{kind}/1000"));
        for n in [1_000, 10_000, 100_000, 1_000_000] {
            let t = per_element("restore", &format!("{kind}/{n}"));
            let floor = if kind == "typed" {
                let read = per_element("restore", &format!("typed_read/{n}"));
                let read_small = per_element("restore", "typed_read/1000");
                format!(
                    "; reading the log alone {} ({} vs 1e3)",
                    cell(read, time),
                    cell(ratio(read, read_small), |r| format!("{r:.1}×"))
                )
            } else if kind == "json_lines" {
                let parse = per_element("restore", &format!("parse_only/{n}"));
                format!(
                    "; parsing alone {} ({} of it)",
                    cell(parse, time),
                    cell(ratio(parse, t), |r| format!("{:.0} %", r * 100.0))
                )
            } else {
                String::new()
            };
            println!(
                "| 4 restore | {label}, {n} events | {} / event | {} (1e3 events){floor} | {} | ≤ 1.3× |",
                cell(t, time),
                cell(small, time),
                cell(ratio(t, small), |r| format!("{r:.2}×"))
            );
        }
    }
}

/// Benches 5 and 6: allocations per cycle and memory (machine, pending, idle agents, delivery memory).
fn memory_rows() {
    // 5, 6. Allocations and memory.
    let memory = read_json(&results_dir().join("memory.json"));
    let get = |path: &str| {
        memory
            .as_ref()
            .and_then(|m| m.pointer(path))
            .and_then(Value::as_f64)
    };
    println!(
        "| 5 allocations | follow-up cycle once warm | {} / cycle | — | — | 0 |",
        cell(get("/allocations_per_cycle"), |a| format!("{a}"))
    );
    println!(
        "| 6 memory | idle machine | {} B inline + {} B heap | — | — | ≤ 256 B |",
        cell(get("/machine_inline_bytes"), |b| format!("{b:.0}")),
        cell(get("/machine_fresh_heap_bytes"), |b| format!("{b:.0}"))
    );
    if let Some(pending) = memory
        .as_ref()
        .and_then(|m| m.get("pending"))
        .and_then(Value::as_array)
    {
        for row in pending {
            let n = row.get("pending").and_then(Value::as_u64).unwrap_or(0);
            let heap = row.get("heap_bytes").and_then(Value::as_f64).unwrap_or(0.0);
            let per = row
                .get("per_message")
                .and_then(Value::as_f64)
                .unwrap_or(0.0);
            println!(
                "| 6 memory | machine with {n} pending | {heap:.0} B heap ({per:.0} B / message) | — | — | — |"
            );
        }
    }
    {
        let base = "/idle_agents_default";
        let agents = get(&format!("{base}/agents"));
        let capacity = get(&format!("{base}/update_capacity"));
        let rss = get(&format!("{base}/resident_bytes"));
        let per = get(&format!("{base}/per_agent"));
        println!(
            "| 6 memory | {} idle agents, tokio, default options (`update_capacity` {}, allocated at the first subscribe) | {} resident ({} / agent) | — | — | — |",
            cell(agents, |a| format!("{a:.0}")),
            cell(capacity, |c| format!("{c:.0}")),
            cell(rss, |b| format!("{:.0} MiB", b / (1u64 << 20) as f64)),
            cell(per, |b| format!("{:.1} kB", b / 1e3))
        );
    }

    if let Some(held) = memory
        .as_ref()
        .and_then(|m| m.get("delivery_memory"))
        .and_then(Value::as_array)
    {
        for row in held {
            let n = row.get("held").and_then(Value::as_u64).unwrap_or(0);
            let heap = row.get("heap_bytes").and_then(Value::as_f64).unwrap_or(0.0);
            let per = row.get("per_id").and_then(Value::as_f64).unwrap_or(0.0);
            let default = if n == 256 { " (the tokio default)" } else { "" };
            println!(
                "| 6 memory | a full delivery memory of {n} ids{default} | {heap:.0} B heap ({per:.0} B / held id) | — | — | — |"
            );
        }
    }
}

/// Bench 9: deliveries through the delivery memory (S52), flat in the number of held ids.
fn delivery_memory_rows() {
    // 9. Deliveries through the delivery memory (S52): flat in the number of held ids.
    let send0 = per_element("delivery_memory", "send/0");
    for w in [0u64, 1_000, 100_000] {
        let send = per_element("delivery_memory", &format!("send/{w}"));
        println!(
            "| 9 delivery memory | send + remove, {w} ids held | {} | {} (0 held) | {} | flat |",
            cell(send, time),
            cell(send0, time),
            cell(ratio(send, send0), |r| format!("{r:.2}×"))
        );
    }
    let refused1k = per_element("delivery_memory", "refused-retry/1000");
    for (row, what) in [
        (
            "refused-retry",
            "an equal retry refused `already-delivered`",
        ),
        (
            "refused-conflict",
            "another message under the id refused `conflict` (S56)",
        ),
    ] {
        for w in [1_000u64, 100_000] {
            let refused = per_element("delivery_memory", &format!("{row}/{w}"));
            println!(
                "| 9 delivery memory | {what}, {w} ids held | {} | {} (retry, 1000 held) | {} | flat |",
                cell(refused, time),
                cell(refused1k, time),
                cell(ratio(refused, refused1k), |r| format!("{r:.2}×"))
            );
        }
    }
}

/// Bench 7: many agents, against a channel echo and the core alone.
fn many_agents_row() {
    // 7. Many agents.
    let agents = read_json(&results_dir().join("agents.json"));
    let get = |key: &str| {
        agents
            .as_ref()
            .and_then(|a| a.get(key))
            .and_then(Value::as_f64)
    };
    let rate = get("deliveries_per_s");
    let echo = get("echo_per_s");
    let core = get("core_cycles_per_s");
    println!(
        "| 7 many agents | {} agents × {} follow-ups, {} workers | {} deliveries/s ({} each) | channel echo {}/s; core alone {}/s | {} of echo time ({} of core) | — |",
        cell(get("agents"), |a| format!("{a:.0}")),
        cell(get("per_agent"), |a| format!("{a:.0}")),
        cell(get("worker_threads"), |a| format!("{a:.0}")),
        cell(rate, |r| format!("{r:.0}")),
        cell(rate, |r| time(1e9 / r)),
        cell(echo, |r| format!("{r:.0}")),
        cell(core, |r| format!("{r:.0}")),
        cell(ratio(echo, rate), |r| format!("{r:.1}×")),
        cell(ratio(core, rate), |r| format!("{r:.1}×"))
    );
}

/// Bench 8: the durable path, each case beside its fsync floor.
fn durable_rows() {
    // 8. The durable path (FileLog, sync on), each case beside its floor.
    let durable = read_json(&results_dir().join("durable.json"));
    let case = |name: &str, key: &str| {
        durable
            .as_ref()
            .and_then(|d| d.get(name))
            .and_then(|c| c.get(key))
            .and_then(Value::as_f64)
    };
    let today = case("1x1_unbatched", "deliveries_per_s");
    for (name, what, goal) in [
        (
            "1x1_unbatched",
            "1 agent × 1 sender, `max_batch` 1 (before group commit)",
            "—",
        ),
        (
            "1x64_unbatched",
            "1 agent × 64 senders, `max_batch` 1 (before group commit)",
            "—",
        ),
        ("1x1", "1 agent × 1 sender, group commit", "—"),
        ("1x16", "1 agent × 16 senders, group commit", "—"),
        (
            "1x64",
            "1 agent × 64 senders, group commit",
            "≥ 20× before; ≤ 2× floor",
        ),
        (
            "1000x1",
            "1000 agents × 1 sender, a FileLog each",
            "near the floor",
        ),
        (
            "1000x1_shared",
            "1000 agents × 1 sender, one shared segment log",
            "near the floor",
        ),
    ] {
        let rate = case(name, "deliveries_per_s");
        let floor = case(name, "floor_per_s");
        let per_sync = ratio(case(name, "deliveries"), case(name, "syncs"));
        println!(
            "| 8 durable path | {what} | {} deliveries/s (p50 {} ms, p99 {} ms; {} per sync) | floor {}/s ({} per sync); before {}/s | {} of floor; {} before | {goal} |",
            cell(rate, |r| format!("{r:.0}")),
            cell(case(name, "p50_ms"), |v| format!("{v:.2}")),
            cell(case(name, "p99_ms"), |v| format!("{v:.2}")),
            cell(per_sync, |v| format!("{v:.1}")),
            cell(floor, |r| format!("{r:.0}")),
            cell(case(name, "floor_group"), |g| format!("{g:.0}")),
            cell(today, |r| format!("{r:.0}")),
            cell(ratio(floor, rate), |r| format!("{r:.2}×")),
            cell(ratio(rate, today), |r| format!("{r:.1}×")),
        );
    }
}

/// Bench 10: hostile ids (HashDoS), crafted against ordinary ids.
fn hostile_id_rows() {
    // 10. Hostile ids (HashDoS): crafted vs ordinary ids, per id (insert + lookup + remove).
    for (name, what) in [
        ("old_keys", "old fixed keys (`FixedState`), bare `HashMap`"),
        ("machine_default_seed", "core, `Config::new()` (seed 0)"),
        (
            "machine_random_seed",
            "core, random seed (as the tokio adapter)",
        ),
    ] {
        let crafted = per_element("hashdos", &format!("{name}/crafted"));
        let ordinary = per_element("hashdos", &format!("{name}/ordinary"));
        println!(
            "| 10 hostile ids | {what}: 10,240 crafted ids | {} / id | {} (10,240 ordinary ids) | {} | flat with a seed |",
            cell(crafted, time),
            cell(ordinary, time),
            cell(ratio(crafted, ordinary), |r| format!("{r:.2}×"))
        );
    }
}

/// Bench 11: the PostgreSQL log, against raw INSERTs (when its figures exist).
fn postgres_rows() {
    // 11. The PostgreSQL log (present when the server binaries were there for `cargo bench`).
    if let Some(pg) = read_json(&results_dir().join("postgres.json")) {
        let field = |case: &str, key: &str| {
            pg.get(case)
                .and_then(|c| c.get(key))
                .and_then(Value::as_f64)
        };
        for sessions in [1, 16, 64, 1000] {
            let case = format!("sessions_{sessions}");
            let ours = field(&case, "deliveries_per_s");
            let worker = field(&case, "worker_per_s");
            let raw = field(&case, "raw_per_s");
            println!(
                "| 11 PostgreSQL log | {sessions} concurrent sessions, one transaction per batch | {} deliveries/s | raw INSERT of the same rows {}/s | {} | — |",
                cell(ours, |r| format!("{r:.0}")),
                cell(raw, |r| format!("{r:.0}")),
                cell(ratio(raw, ours), |r| format!("{r:.2}×")),
            );
            println!(
                "| 11 PostgreSQL log | {sessions} concurrent sessions through a worker, one transaction for every waiting batch | {} deliveries/s | raw INSERT {}/s; a transaction per batch {}/s | {} of raw; {} the per-session rate | ≥ raw at 64; ≥ 5× per-session at 1000 |",
                cell(worker, |r| format!("{r:.0}")),
                cell(raw, |r| format!("{r:.0}")),
                cell(ours, |r| format!("{r:.0}")),
                cell(ratio(worker, raw), |r| format!("{r:.2}×")),
                cell(ratio(worker, ours), |r| format!("{r:.2}×")),
            );
        }
        println!(
            "| 11 PostgreSQL log | takeover of an expired session ({} records): claim, read back, restore, closers | {} ms | — | — | — |",
            cell(field("takeover", "records"), |r| format!("{r:.0}")),
            cell(field("takeover", "ms"), |r| format!("{r:.1}")),
        );
    }
}
