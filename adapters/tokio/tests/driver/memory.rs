//! The peak memory of opening a 1M-record log (item 10): ignored tests that print the figure.
//! Run each in its own process:
//!
//! ```text
//! cargo test -p coxswain-tokio --test driver -- --ignored --exact memory::open_streams_a_million_records
//! cargo test -p coxswain-tokio --test driver -- --ignored --exact memory::the_whole_file_way_for_comparison
//! ```

use std::io::Write;
use std::path::Path;

use coxswain_tokio::coxswain_log::{parse, repair};
use coxswain_tokio::{Agent, FileLog, SyncPolicy};

use crate::support::*;

const TURNS: usize = 125_000; // 8 records a turn: 1,000,000 records

/// A session of `TURNS` completed turns, written line by line (little memory).
fn write_session(path: &Path) -> u64 {
    let file = std::fs::File::create(path).unwrap();
    let mut out = std::io::BufWriter::new(file);
    let mut seq = 0u64;
    let mut line = |text: String| {
        seq += 1;
        writeln!(out, "{{\"seq\":{seq},{text}}}").unwrap();
    };
    for turn in 1..=TURNS {
        let id = format!("m{turn}");
        line(format!("\"type\":\"agent/inbox/spliced\",\"data\":{{\"target\":\"next-turn\",\"start\":0,\"inserted\":[{{\"id\":\"{id}\",\"content\":\"hello there\",\"source\":{{\"kind\":\"user\"}}}}],\"wakeup\":true}}"));
        line(format!(
            "\"type\":\"turn/start\",\"data\":{{\"turn\":{turn}}}"
        ));
        line("\"type\":\"agent/inbox/spliced\",\"data\":{\"target\":\"next-turn\",\"start\":0,\"removedCount\":1,\"inserted\":[]}".to_owned());
        line(format!(
            "\"type\":\"step/start\",\"data\":{{\"turn\":{turn},\"step\":1}}"
        ));
        line(format!("\"type\":\"user/message\",\"data\":{{\"id\":\"{id}\",\"content\":\"hello there\",\"source\":{{\"kind\":\"user\"}}}}"));
        line("\"type\":\"model/output\",\"data\":{\"text\":\"a reply of a few words\"}".to_owned());
        line(format!(
            "\"type\":\"step/end\",\"data\":{{\"turn\":{turn},\"step\":1}}"
        ));
        line(format!("\"type\":\"turn/end\",\"data\":{{\"turn\":{turn},\"reason\":{{\"kind\":\"completed\"}}}}"));
    }
    out.flush().unwrap();
    drop(out);
    std::fs::metadata(path).unwrap().len()
}

fn status_kib(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Resets the peak (VmHWM) to the current RSS and returns that RSS.
fn reset_peak() -> u64 {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    status_kib("VmRSS:")
}

fn report(way: &str, bytes: u64, base: u64) {
    let peak = status_kib("VmHWM:");
    println!(
        "{way}: a log of 1,000,000 records ({:.1} MiB): peak RSS {:.1} MiB above the {:.1} MiB before opening",
        bytes as f64 / (1 << 20) as f64,
        (peak.saturating_sub(base)) as f64 / 1024.0,
        base as f64 / 1024.0
    );
}

#[tokio::test]
#[ignore = "writes a 1M-record log and measures; run alone"]
async fn open_streams_a_million_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    let bytes = write_session(&path);
    let base = reset_peak();
    let log = FileLog::open_with(&path, SyncPolicy::Never).await.unwrap();
    let (agent, recovery) = Agent::open(FakeHost::new(), log).await.unwrap();
    report("streamed open (FileLog + Agent::open)", bytes, base);
    assert_eq!(recovery.records, 8 * TURNS);
    assert_eq!(recovery.last_turn, TURNS as u64);
    agent.close().await.unwrap();
}

/// What opening did before the streaming read: the whole file read, parsed into records, then
/// repaired from the records.
#[tokio::test]
#[ignore = "writes a 1M-record log and measures; run alone"]
async fn the_whole_file_way_for_comparison() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    let bytes = write_session(&path);
    let base = reset_peak();
    let content = std::fs::read(&path).unwrap();
    let parsed = parse(&content).unwrap();
    let repaired = repair(&parsed.records).unwrap();
    report("whole-file open (read, parse, repair)", bytes, base);
    assert_eq!(parsed.records.len(), 8 * TURNS);
    assert_eq!(repaired.machine.last_turn(), TURNS as u64);
}
