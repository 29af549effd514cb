//! Bench 8: the durable path. Agents on `FileLog`s with `SyncPolicy::EveryAppend` (every
//! acknowledged delivery fsynced), fed by concurrent senders (quiet deliveries: each sender's
//! first message an `inject`, each later one `replace`s its previous one, so the lists stay
//! bounded; `coxswain load`'s `replace` workload), each
//! case beside its fsync floor measured in the same run (the same bytes, one `write` +
//! `fdatasync` per group of `min(agents × senders, max_batch)` deliveries, no agent), with the
//! p50 and p99 acknowledgement latency. The engine is `coxswain load`'s
//! (`coxswain_load`).
//!
//! Cases: one agent with 1, 16 and 64 senders with group commit; the same one agent with 1 and
//! 64 senders and `max_batch` 1 (one append and one sync per input: the driver before group
//! commit, the baseline of the 20× goal); 1000 agents × 1 sender, each on its own file (the
//! multi-tenant case), and the same 1000 agents each a session of one shared segment log
//! (`SegmentLog`: one sync for many sessions).
//!
//! `COXSWAIN_BENCH_SYNC` picks the file logs' sync policy by its name (`every-append`, the
//! default; `per-turn`; `never`: the cost of the log without the disk's `fdatasync`).
//!
//! The logs go in `$COXSWAIN_BENCH_DIR` (default: a temporary directory under the target
//! directory, i.e. the build's disk). Every case runs [`ROUNDS`] times, interleaved; medians are
//! reported. A smoke run (`cargo test --benches`) uses tiny sizes and
//! writes no figures.

use std::sync::Arc;

use coxswain_benches::report_file::{full_run, results_dir, save};
use coxswain_load::{run, Length, Load, LoadReport, Progress, Target, Workload};
use coxswain_tokio::SyncPolicy;
use serde_json::{json, Value};

/// Rounds of every case (interleaved, since the disk is shared and noisy); the figures are the
/// medians: of the run's rate and of its latencies over rounds, and of the floor.
const ROUNDS: usize = 3;

/// The round with the median rate, with the median floor and latencies of all rounds.
fn median(mut reports: Vec<LoadReport>) -> LoadReport {
    let middle = reports.len() / 2;
    let mut floors: Vec<f64> = reports.iter().map(|r| r.floor_per_s).collect();
    floors.sort_by(f64::total_cmp);
    let mut p50s: Vec<_> = reports.iter().map(|r| r.p50).collect();
    p50s.sort();
    let mut p99s: Vec<_> = reports.iter().map(|r| r.p99).collect();
    p99s.sort();
    reports.sort_by(|a, b| a.deliveries_per_s.total_cmp(&b.deliveries_per_s));
    let mut report = reports.swap_remove(middle);
    report.floor_per_s = floors[middle];
    report.p50 = p50s[middle];
    report.p99 = p99s[middle];
    report
}

struct Case {
    name: &'static str,
    agents: usize,
    senders: usize,
    messages: usize,
    max_batch: usize,
    shared: bool,
}

/// The cases, at full size or the smoke run's.
fn cases(full: bool) -> [Case; 7] {
    let scale = |n: usize| if full { n } else { (n / 100).max(2) };
    [
        Case {
            name: "1x1_unbatched",
            agents: 1,
            senders: 1,
            messages: scale(3000),
            max_batch: 1,
            shared: false,
        },
        Case {
            name: "1x64_unbatched",
            agents: 1,
            senders: 64,
            messages: scale(50),
            max_batch: 1,
            shared: false,
        },
        Case {
            name: "1x1",
            agents: 1,
            senders: 1,
            messages: scale(3000),
            max_batch: 64,
            shared: false,
        },
        Case {
            name: "1x16",
            agents: 1,
            senders: 16,
            messages: scale(1000),
            max_batch: 64,
            shared: false,
        },
        Case {
            name: "1x64",
            agents: 1,
            senders: 64,
            messages: scale(1000),
            max_batch: 64,
            shared: false,
        },
        Case {
            name: "1000x1",
            agents: if full { 1000 } else { 10 },
            senders: 1,
            messages: scale(20),
            max_batch: 64,
            shared: false,
        },
        Case {
            name: "1000x1_shared",
            agents: if full { 1000 } else { 10 },
            senders: 1,
            messages: scale(20),
            max_batch: 64,
            shared: true,
        },
    ]
}

fn main() {
    let full = full_run();
    let cases = cases(full);
    let base = std::env::var_os("COXSWAIN_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| results_dir().join("durable-tmp"));
    std::fs::create_dir_all(&base).expect("the bench directory");
    let dir = tempfile::tempdir_in(&base).expect("a temporary directory");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let policy = match std::env::var("COXSWAIN_BENCH_SYNC").as_deref() {
        Ok("never") => SyncPolicy::Never,
        Ok("per-turn") => SyncPolicy::PerTurn,
        Ok("every-append") | Err(_) => SyncPolicy::EveryAppend,
        Ok(other) => panic!("COXSWAIN_BENCH_SYNC={other}: not every-append, per-turn or never"),
    };
    println!("sync policy: {policy:?}");
    let rounds = if full { ROUNDS } else { 1 };
    let mut reports: Vec<Vec<LoadReport>> = cases.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for (case, reports) in cases.iter().zip(&mut reports) {
            let load = Load {
                target: Target::Files {
                    dir: dir.path().join(case.name),
                    policy,
                    shared: case.shared,
                },
                agents: case.agents,
                senders: case.senders,
                length: Length::Messages(case.messages),
                workload: Workload::Replace,
                max_batch: case.max_batch,
            };
            let report = runtime
                .block_on(run(&load, Arc::new(Progress::default())))
                .expect("the load runs");
            print!("round {round} ");
            print(case, &report);
            reports.push(report);
        }
    }
    let mut figures = serde_json::Map::new();
    for (case, reports) in cases.iter().zip(reports) {
        let report = median(reports);
        print!("median  ");
        print(case, &report);
        figures.insert(case.name.to_owned(), figure(case, &report));
    }
    if full {
        save("durable", &Value::Object(figures));
    }
}

fn figure(case: &Case, report: &LoadReport) -> Value {
    json!({
        "agents": case.agents,
        "senders": case.senders,
        "messages": case.messages,
        "max_batch": case.max_batch,
        "shared": case.shared,
        "deliveries": report.deliveries,
        "deliveries_per_s": report.deliveries_per_s,
        "p50_ms": report.p50.as_secs_f64() * 1e3,
        "p99_ms": report.p99.as_secs_f64() * 1e3,
        "syncs": report.syncs,
        "bytes": report.bytes,
        "floor_group": report.floor_group,
        "floor_per_s": report.floor_per_s,
    })
}

fn print(case: &Case, report: &LoadReport) {
    println!(
        "{:>15}: {} agents × {} senders, max batch {}: {:.0} deliveries/s, p50 {:.3} ms, p99 {:.3} ms, \
         {:.1} deliveries/sync; floor ({} per sync) {:.0}/s ({:.2}× the run)",
        case.name,
        case.agents,
        case.senders,
        case.max_batch,
        report.deliveries_per_s,
        report.p50.as_secs_f64() * 1e3,
        report.p99.as_secs_f64() * 1e3,
        report.deliveries as f64 / report.syncs.max(1) as f64,
        report.floor_group,
        report.floor_per_s,
        report.floor_per_s / report.deliveries_per_s
    );
}
