//! `coxswain load` as the README runs it: its exact flags (read from the README's "Other things
//! to try" block) with a shorter `--seconds`, and runs far past a list's `max_pending`, which a
//! load of injects alone failed at (`the next-step list is full (10000 items pending)`). On a
//! throwaway PostgreSQL cluster (issue 49): two runs at once on one database, and
//! `--failover`, a kill -9 of one of its worker processes measured.

use std::path::Path;
use std::process::{Command, Output};

fn coxswain(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_coxswain"))
        .args(args)
        .output()
        .unwrap()
}

/// The arguments after `--` of the README's `coxswain load` line.
fn readme_load_args() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let (_, block) = readme.split_once("Other things to try:").unwrap();
    let line = block
        .lines()
        .find(|line| line.contains(" -- load "))
        .expect("a load line in the block");
    let command = line.split(" #").next().unwrap();
    let (cargo, args) = command.split_once(" -- ").unwrap();
    assert_eq!(cargo, "cargo run --release -p coxswain");
    args.split_whitespace().map(str::to_owned).collect()
}

/// `N` of the first line's `…: N deliveries in T s`.
fn deliveries(first: &str) -> u64 {
    let (_, rest) = first.rsplit_once("): ").unwrap();
    rest.split(' ').next().unwrap().parse().unwrap()
}

fn verify(log: &Path) -> String {
    let output = coxswain(&["verify", log.to_str().unwrap()]);
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn the_readme_load_command_runs_with_its_flags_and_defaults() {
    let args = readme_load_args();
    assert_eq!(
        args,
        [
            "load",
            "--log",
            "/tmp/load",
            "--agents",
            "1",
            "--senders",
            "64"
        ],
        "the README's load command changed: keep this test's expectations in step"
    );
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("load");
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args[2] = log.to_str().unwrap();
    // The same flags and defaults, for 1 s instead of the default 5.
    args.extend(["--seconds", "1"]);
    let output = coxswain(&args);
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // No terminal: no progress bar.
    assert_eq!(String::from_utf8(output.stderr).unwrap(), "");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert!(
        lines[0].starts_with(
            "1 agents × 64 senders for 1 s (replace workload, max batch 64, a log file each): "
        ),
        "{stdout}"
    );
    assert!(lines[1].starts_with("  ") && lines[1].contains(" deliveries/s; acknowledged in p50 "));
    assert!(lines[2].contains(" syncs (") && lines[2].contains(" deliveries per sync), "));
    assert!(lines[3]
        .starts_with("  floor (the same record size, one write + fdatasync per 64 records, "));
    let n = deliveries(lines[0]);
    assert!(n >= 64, "{stdout}");
    // One record per delivery, no turn; the floor's file is gone.
    assert_eq!(
        verify(&log.join("agent-0.jsonl")),
        format!("ok ({n} events, 0 turns)\n")
    );
    assert!(!log.join("floor.bin").exists());
}

#[test]
fn a_load_far_past_max_pending_runs() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().to_str().unwrap();
    // 64 × 200 = 12,800 deliveries to one agent, above the 10,000 a list holds.
    let output = coxswain(&[
        "load",
        "--log",
        log,
        "--senders",
        "64",
        "--messages",
        "200",
        "--json",
    ]);
    assert!(output.status.success(), "{output:?}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["deliveries"], 12_800);
    assert_eq!(report["messages"], 200);
    assert_eq!(report["seconds"], serde_json::Value::Null);
    assert_eq!(report["workload"], "replace");
    assert_eq!(
        verify(&dir.path().join("agent-0.jsonl")),
        "ok (12800 events, 0 turns)\n"
    );
}

#[test]
fn bad_lengths_and_too_many_senders_are_refused_with_exit_2() {
    for (args, message) in [
        (
            &["--senders", "10001"][..],
            "coxswain load: --senders must be within 1..=10000 (each sender keeps one message \
             pending)\n",
        ),
        (
            &["--seconds", "0"][..],
            "coxswain load: --seconds must be above 0 and at most 86400\n",
        ),
        (
            &["--messages", "0"][..],
            "coxswain load: --agents, --senders and --messages must be at least 1\n",
        ),
        (
            &["--failover", "--workers", "2", "--sessions", "4"][..],
            "coxswain load: --failover needs a postgres:// database, --workers of at least 2 \
             (one is killed, the others take its sessions over) and --sessions from --workers \
             to 1000000\n",
        ),
    ] {
        let mut all = vec!["load", "--log", "/nonexistent/never-made"];
        all.extend_from_slice(args);
        let output = coxswain(&all);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert_eq!(String::from_utf8(output.stderr).unwrap(), message);
        assert!(output.stdout.is_empty());
    }
}

/// The throwaway cluster, or `None` (after the SKIPPED line) without the binaries outside CI.
fn cluster() -> Option<coxswain_postgres_tests::TempCluster> {
    match coxswain_postgres_tests::TempCluster::for_tests() {
        Ok(cluster) => cluster,
        Err(error) => panic!("the PostgreSQL test cluster did not start: {error}"),
    }
}

/// Issue 49: two `coxswain load` runs on one database at once each make their own sessions
/// and their own floor rows (a run's floor used to empty a shared table and insert
/// `floor-<c>` rows the other run also inserted: `duplicate key value violates unique
/// constraint "raw_pkey"`), and each prints its report.
#[test]
fn two_loads_at_once_on_one_database_each_report() {
    let Some(cluster) = cluster() else { return };
    let url = cluster.url();
    let args = [
        "load",
        "--log",
        &url,
        "--workers",
        "2",
        "--sessions",
        "4",
        "--senders",
        "2",
        "--messages",
        "30",
        "--json",
    ];
    let start = || {
        Command::new(env!("CARGO_BIN_EXE_coxswain"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let runs = [start(), start()];
    let mut records = 0;
    for run in runs {
        let output = run.wait_with_output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&output.stderr),
            "",
            "{}",
            String::from_utf8_lossy(&output.stdout)
        );
        assert!(output.status.success());
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(report["deliveries"], 4 * 2 * 30);
        assert_eq!(report["workers"], 2);
        assert!(
            report["floor_groups"].as_u64().unwrap() >= 1_000,
            "{report}"
        );
        records += report["records"].as_u64().unwrap();
    }
    // Each run's own 4 sessions, both runs' records; the floor's rows are gone.
    let held = cluster
        .psql(
            "SELECT count(DISTINCT split_part(session, '-', 2)) || '/' || count(*) || '/' ||
                    sum(length) FROM coxswain.sessions WHERE owner IS NULL",
        )
        .unwrap();
    assert_eq!(held, format!("2/8/{records}"));
    assert_eq!(
        cluster
            .psql("SELECT count(*) FROM coxswain_load.raw")
            .unwrap(),
        "0"
    );
}

/// The number before `suffix` at the end of `text`'s word ending with it, e.g. `p99 123 ms`.
fn number_after(text: &str, label: &str) -> f64 {
    let (_, rest) = text
        .split_once(label)
        .unwrap_or_else(|| panic!("{label} in {text}"));
    rest.trim_start()
        .split(|c: char| !c.is_ascii_digit() && c != '.')
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("a number after {label} in {text}"))
}

/// `coxswain load --failover`: 40 sessions on 3 worker processes (14 on worker 0, killed with
/// SIGKILL); each of its sessions served again by a survivor within the lease + 2 s at the
/// 99th percentile, no acknowledged delivery lost or doubled, every session's log verifying;
/// the report's shape pinned. With `--json` on 2 workers, the same in one object.
#[test]
fn a_failover_run_measures_a_killed_worker_s_sessions_served_again() {
    let Some(cluster) = cluster() else { return };
    let url = cluster.url();
    let output = coxswain(&[
        "load",
        "--log",
        &url,
        "--failover",
        "--workers",
        "3",
        "--sessions",
        "40",
    ]);
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8(output.stderr).unwrap(), "");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert!(
        lines[0].starts_with(
            "fail-over: 40 sessions on 3 worker processes, lease 1500 ms; opened and warm in "
        ),
        "{stdout}"
    );
    assert_eq!(
        lines[1],
        "  kill -9 of worker 0 serving 14 sessions: 14 served again by the survivors, 0 not"
    );
    assert!(
        lines[2].starts_with("  served again after p50 ")
            && lines[2].ends_with(" ms from the kill (lease + 2 s = 3500 ms)"),
        "{stdout}"
    );
    let (p50, p99, max) = (
        number_after(lines[2], "p50 "),
        number_after(lines[2], "p99 "),
        number_after(lines[2], "max "),
    );
    // Not before the lease could end (1 s at the earliest: a renewal every third of it, unless
    // a loaded machine delays one), within it + 2 s.
    assert!(
        p50 >= 500.0 && p50 <= p99 && p99 <= max && p99 <= 3_500.0,
        "{stdout}"
    );
    // Each of the 14 taken over once; more only if a loaded machine let a survivor's own lease
    // lapse (its sessions are then claimed again, and served).
    let (acknowledged, takeovers) = lines[3].split_once("; ").unwrap();
    assert_eq!(
        acknowledged,
        "  54 deliveries acknowledged: 0 lost, 0 doubled"
    );
    assert!(number_after(takeovers, "") >= 14.0 && takeovers.ends_with(" takeovers"));
    // Every session's log verifies, the killed worker's included (crash repair under the new
    // epoch, S50); every session released. (A survivor stopped while the turn of a last
    // follow-up still ran leaves it open — `Agent::close` does — to be closed `interrupted` by
    // the next open: the audit may then say `needs crash repair`, exit 2, never a violation.)
    let verified = coxswain(&["verify", &url]);
    let text = String::from_utf8(verified.stdout).unwrap();
    assert!(matches!(verified.status.code(), Some(0 | 2)), "{text}");
    assert_eq!(
        text.lines().filter(|line| line.contains(": ok (")).count(),
        40
    );
    assert!(text.ends_with("\n40 sessions\n"), "{text}");
    assert_eq!(
        cluster
            .psql("SELECT count(*) FROM coxswain.sessions WHERE owner IS NOT NULL")
            .unwrap(),
        "0"
    );

    let output = coxswain(&[
        "load",
        "--log",
        &url,
        "--failover",
        "--workers",
        "2",
        "--sessions",
        "6",
        "--lease-ms",
        "1000",
        "--json",
    ]);
    assert!(output.status.success(), "{output:?}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut keys: Vec<&str> = report
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "acknowledged",
            "doubled",
            "killed_sessions",
            "lease_ms",
            "lost",
            "max_ms",
            "p50_ms",
            "p99_ms",
            "run",
            "served_again",
            "sessions",
            "takeovers",
            "unserved",
            "warm_s",
            "workers"
        ]
    );
    assert_eq!(
        (
            &report["killed_sessions"],
            &report["served_again"],
            &report["unserved"],
            &report["lost"],
            &report["doubled"],
            &report["acknowledged"],
        ),
        (
            &3.into(),
            &3.into(),
            &0.into(),
            &0.into(),
            &0.into(),
            &9.into()
        )
    );
    assert_eq!(report["lease_ms"], 1000);
    assert!(report["p99_ms"].as_f64().unwrap() <= 3_000.0, "{report}");
    assert!(report["run"].as_str().unwrap().starts_with("load-"));
}

/// A failover run that cannot reach its database says so, typed, and exits 1 (its workers
/// never start).
#[test]
fn a_failover_run_on_an_unreachable_database_fails_with_the_reason() {
    let output = coxswain(&[
        "load",
        "--log",
        "postgres://nobody@localhost/db?host=/nonexistent-coxswain-socket&connect_timeout=2",
        "--failover",
        "--workers",
        "2",
        "--sessions",
        "2",
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.starts_with("coxswain load: PostgreSQL: cannot reach the PostgreSQL server: "),
        "{stderr}"
    );
}
