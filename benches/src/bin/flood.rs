//! `cargo run --release -p coxswain-benches --bin coxswain-flood [N]`: the memory of a flood of `N`
//! (default 1,000,000) sends against one agent, beside baselines of 10k and 100k sends measured
//! in the same run: the peak of live heap bytes (a counting allocator, sampled every 1,024
//! answers) and the peak resident set (VmHWM). Bounded memory: the 1M peak is the 100k peak.

use coxswain_benches::alloc::Counting;
use coxswain_driver_sim::flood::flood;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

#[global_allocator]
static ALLOC: Counting = Counting::new();

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmHWM:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(1_000_000);
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    else {
        eprintln!("coxswain-flood: cannot build a runtime");
        std::process::exit(1);
    };
    println!("sends\tacked\tpending-full\tother\tpeak live heap (KiB)\tVmHWM (KiB)\tseconds");
    let mut peaks = Vec::new();
    for size in [10_000, 100_000, n] {
        let start = ALLOC.snapshot();
        let peak = Arc::new(AtomicI64::new(0));
        let watch = Arc::clone(&peak);
        let began = std::time::Instant::now();
        let flooded = runtime.block_on(flood(size, 64, move || {
            let live = ALLOC.snapshot().since(&start).net_bytes();
            watch.fetch_max(live, Ordering::Relaxed);
        }));
        let peak = peak.load(Ordering::Relaxed) / 1024;
        peaks.push(peak);
        println!(
            "{size}\t{}\t{}\t{}\t{peak}\t{}\t{:.2}",
            flooded.acked,
            flooded.full,
            flooded.other,
            vm_hwm_kib(),
            began.elapsed().as_secs_f64()
        );
    }
    if let [_, base, big] = peaks[..] {
        println!(
            "peak live heap, {n} sends / 100,000 sends: {:.2}",
            big as f64 / base.max(1) as f64
        );
    }
}
