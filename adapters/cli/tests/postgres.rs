//! The CLI against a real, throwaway PostgreSQL server: `run --log postgres://… --session`,
//! `verify`, `sessions`, `log copy` both ways, and `run --redelivery N --resume-on-open` on a
//! session whose turn crashed (SPEC §13).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use coxswain_postgres_tests::TempCluster;
use coxswain_test_harness::Test;

/// The tests of this binary, through the harness: ignored without PostgreSQL's server binaries
/// (failed with `CI=true`).
fn main() -> std::process::ExitCode {
    coxswain_test_harness::run(
        &coxswain_postgres_tests::needs(),
        &[
            Test::new(
                "the_cli_runs_verifies_lists_and_copies_postgres_logs",
                the_cli_runs_verifies_lists_and_copies_postgres_logs,
            ),
            Test::new(
                "load_runs_turns_on_postgres_workers",
                load_runs_turns_on_postgres_workers,
            ),
            Test::new(
                "run_redelivers_and_resumes_a_crashed_postgres_session",
                run_redelivers_and_resumes_a_crashed_postgres_session,
            ),
        ],
    )
}

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn coxswain(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_coxswain"))
        .args(args)
        .output()
        .unwrap()
}

/// The throwaway cluster, or `None` (after the SKIPPED line) without the binaries outside CI.
fn cluster() -> Option<TempCluster> {
    match TempCluster::for_tests() {
        Ok(cluster) => cluster,
        Err(error) => panic!("the PostgreSQL test cluster did not start: {error}"),
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn the_cli_runs_verifies_lists_and_copies_postgres_logs() {
    let Some(cluster) = cluster() else { return };
    let url = cluster.url();
    let dir = tempfile::tempdir().unwrap();
    let script = examples_dir().join("quickstart.json");
    let script = script.to_str().unwrap();

    // The quickstart into PostgreSQL, and into a file.
    let run = coxswain(&["run", script, "--log", &url, "--session", "qs"]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = stdout(&run);
    let file = dir.path().join("qs.jsonl");
    let file = file.to_str().unwrap();
    let file_run = coxswain(&["run", script, "--log", file]);
    assert!(file_run.status.success());
    let verified = text
        .lines()
        .find(|line| line.contains("verified: ok"))
        .unwrap()
        .to_owned();
    let events: usize = std::fs::read_to_string(file).unwrap().lines().count();
    assert!(
        verified.ends_with(&format!(
            "(session qs) ({events} records) verified: ok ({events} events, 2 turns)"
        )),
        "{verified}"
    );

    // verify: every session, then one.
    let all = coxswain(&["verify", &url]);
    assert_eq!(all.status.code(), Some(0));
    assert_eq!(
        stdout(&all),
        format!("session qs: ok ({events} events, 2 turns)\n1 sessions\n")
    );
    let one = coxswain(&["verify", &url, "--session", "qs"]);
    assert_eq!(stdout(&one), format!("ok ({events} events, 2 turns)\n"));

    // sessions: the run released its session.
    let listed = coxswain(&["sessions", &url]);
    assert_eq!(
        stdout(&listed),
        format!("session\tepoch\towner\tlease\tlength\nqs\t1\t-\treleased\t{events}\n1 sessions\n")
    );

    // copy the database's session to a file: the same bytes the file run wrote.
    let back = dir.path().join("back.jsonl");
    let back = back.to_str().unwrap();
    let copied = coxswain(&["log", "copy", &url, back, "--session", "qs"]);
    assert!(
        copied.status.success(),
        "{}",
        String::from_utf8_lossy(&copied.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(back).unwrap(),
        std::fs::read_to_string(file).unwrap()
    );
    // view: a database session's page is the file's page but for the log's name (issue 14).
    let db_page = dir.path().join("db.html");
    let file_page = dir.path().join("file.html");
    let db_page = db_page.to_str().unwrap();
    let file_page = file_page.to_str().unwrap();
    let viewed = coxswain(&["view", &url, "--session", "qs", "-o", db_page]);
    assert!(
        viewed.status.success(),
        "{}",
        String::from_utf8_lossy(&viewed.stderr)
    );
    assert!(
        stdout(&viewed).starts_with(&format!("wrote {db_page} ({events} records, ")),
        "{}",
        stdout(&viewed)
    );
    assert!(coxswain(&["view", back, "-o", file_page]).status.success());
    let title = |html: &str| {
        html.split("<title>coxswain view · ")
            .nth(1)
            .and_then(|rest| rest.split("</title>").next())
            .unwrap()
            .to_owned()
    };
    let db_html = std::fs::read_to_string(db_page).unwrap();
    let file_html = std::fs::read_to_string(file_page).unwrap();
    let (db_title, file_title) = (title(&db_html), title(&file_html));
    assert!(db_title.ends_with(" (session qs)"), "{db_title}");
    assert_eq!(file_title, "back.jsonl");
    assert_eq!(
        db_html.replace(&db_title, "NAME"),
        file_html.replace(&file_title, "NAME")
    );

    // And the file into the database, as a new session; not into a session that has records.
    let copied = coxswain(&["log", "copy", file, &url, "--session", "from-file"]);
    assert!(copied.status.success());
    assert!(stdout(&copied).starts_with(&format!("copied {events} records from ")));
    let refused = coxswain(&["log", "copy", file, &url, "--session", "from-file"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).ends_with(&format!(
        "(session from-file) already holds {events} records: copy only into an empty log\n"
    )));
    let one = coxswain(&["verify", &url, "--session", "from-file"]);
    assert_eq!(stdout(&one), format!("ok ({events} events, 2 turns)\n"));

    // A resumed run takes the session under epoch 2.
    let again = coxswain(&["run", script, "--log", &url, "--session", "qs"]);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let listed = stdout(&coxswain(&["sessions", &url]));
    assert!(listed.contains("\nqs\t2\t-\treleased\t"), "{listed}");

    // Bad input: no --session; an unreachable server; a database without the schema.
    let missing = coxswain(&["run", script, "--log", &url]);
    assert_eq!(
        String::from_utf8_lossy(&missing.stderr),
        "a postgres:// log needs --session ID (the session to run or copy)\n"
    );
    let down = coxswain(&["sessions", "postgres://postgres@%2Fnonexistent/postgres"]);
    assert_eq!(down.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&down.stderr).starts_with("cannot reach the PostgreSQL server: ")
    );
    let empty = cluster.database("empty").unwrap();
    let none = coxswain(&["verify", &empty]);
    assert_eq!(
        stdout(&none),
        "the database holds coxswain schema version 0, not 2: nothing to read (a writer creates or upgrades it)\n"
    );
}

/// `coxswain load` on PostgreSQL: sessions over workers, turns run, every figure reported, the
/// statements the workers sent counted, the raw-`INSERT` floor beside it; and the text report's
/// PostgreSQL lines.
fn load_runs_turns_on_postgres_workers() {
    let Some(cluster) = cluster() else { return };
    let url = cluster.url();
    let args = [
        "load",
        "--log",
        &url,
        "--sessions",
        "4",
        "--workers",
        "2",
        "--senders",
        "2",
        "--messages",
        "6",
        "--workload",
        "turns",
        "--step-ms",
        "1",
        "--cancel-every",
        "0",
    ];
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let output = coxswain(&json_args);
    assert!(output.status.success(), "{output:?}");
    let report: serde_json::Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(report["deliveries"], 48);
    assert_eq!(report["workers"], 2);
    assert_eq!(report["workload"], "turns");
    // The 4th call of each sender is a steer: 8 senders, one steer each.
    assert_eq!(report["steers"], 8);
    assert!(report["turns"].as_u64().unwrap() >= 4, "{report}");
    assert!(report["statements"].as_u64().unwrap() >= report["syncs"].as_u64().unwrap());
    assert!(report["floor_per_s"].as_f64().unwrap() > 0.0);
    assert_eq!(report["floor_concurrency"], 8);
    let text = coxswain(&args);
    assert!(text.status.success(), "{text:?}");
    let lines: Vec<String> = stdout(&text).lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 6, "{lines:?}");
    assert!(lines[0].starts_with(
        "4 agents × 2 senders × 6 calls (turns workload, max batch 64, PostgreSQL, 2 workers): 48 deliveries in "
    ), "{lines:?}");
    assert!(lines[2].contains(" steers, 0 cancels"), "{lines:?}");
    assert!(
        lines[4].contains(" statements (") && lines[4].contains(" lease renewals ("),
        "{lines:?}"
    );
    assert!(
        lines[5]
            .starts_with("  floor (the same rows, one INSERT transaction each on 8 connections, "),
        "{lines:?}"
    );
}

/// A session whose owner crashed with turn 1's pre-step request outstanding: it had claimed `i1`
/// (an inject) and `f1` (a follow-up), which no model call saw; `f2` was queued behind.
const CRASHED: &str = r#"{"seq":1,"type":"agent/inbox/spliced","data":{"target":"next-step","start":0,"inserted":[{"id":"i1","source":{"kind":"user"},"content":"context"}]}}
{"seq":2,"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"wakeup":true,"inserted":[{"id":"f1","source":{"kind":"user"},"content":"first"}]}}
{"seq":3,"type":"turn/start","data":{"turn":1}}
{"seq":4,"type":"agent/inbox/spliced","data":{"target":"next-step","start":0,"inserted":[],"removedCount":1}}
{"seq":5,"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"inserted":[],"removedCount":1}}
{"seq":6,"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"wakeup":true,"inserted":[{"id":"f2","source":{"kind":"user"},"content":"second"}]}}
"#;

/// `coxswain run --log postgres://… --redelivery N --resume-on-open` (S57, S59): an allowance
/// above 1000 is refused before the session is taken; `--redelivery 1` writes the redelivery
/// splices under the run's epoch and `--resume-on-open` runs every message once, no send in the
/// script.
fn run_redelivers_and_resumes_a_crashed_postgres_session() {
    let Some(cluster) = cluster() else { return };
    let url = cluster.url();
    let dir = tempfile::tempdir().unwrap();
    let crashed = dir.path().join("crashed.jsonl");
    std::fs::write(&crashed, CRASHED).unwrap();
    let crashed = crashed.to_str().unwrap();
    let script = dir.path().join("idle.json");
    std::fs::write(&script, r#"{"stepMs": 20, "actions": []}"#).unwrap();
    let script = script.to_str().unwrap();
    let copied = coxswain(&["log", "copy", crashed, &url, "--session", "c1"]);
    assert!(
        copied.status.success(),
        "{}",
        String::from_utf8_lossy(&copied.stderr)
    );
    let row = || {
        cluster
            .psql_in(
                "postgres",
                "SELECT epoch || ' ' || coalesce(owner, '-') || ' ' || length
                 FROM coxswain.sessions WHERE session = 'c1'",
            )
            .unwrap()
    };
    assert_eq!(row(), "1 - 6");
    // `coxswain fate` reads the stored records without taking the session over (S58): as
    // repair would leave them, with the default allowance and with 1 (S59).
    let fate = |id: &str, extra: &[&str]| {
        let out = coxswain(&[&["fate", &url, id, "--session", "c1"], extra].concat());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout(&out)
    };
    assert_eq!(
        fate("f1", &[]),
        "{\"claimed\":{\"end\":\"interrupted\",\"turn\":1}}\n"
    );
    assert_eq!(
        fate("f1", &["--redelivery", "1"]),
        "{\"pending\":\"next-turn\"}\n"
    );
    assert_eq!(fate("f2", &[]), "{\"pending\":\"next-turn\"}\n");
    assert_eq!(fate("nope", &[]), "\"unknown\"\n");
    assert_eq!(row(), "1 - 6");
    // Refused before anything is opened: the session is not taken (same epoch, no owner).
    let refused = coxswain(&[
        "run",
        script,
        "--log",
        &url,
        "--session",
        "c1",
        "--redelivery",
        "1001",
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("the redelivery allowance 1001 is above 1000 (S59)"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert_eq!(row(), "1 - 6");
    let run = coxswain(&[
        "run",
        script,
        "--log",
        &url,
        "--session",
        "c1",
        "--redelivery",
        "1",
        "--resume-on-open",
    ]);
    assert!(
        run.status.success(),
        "{}{}",
        stdout(&run),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        stdout(&run).contains("2 claimed unseen, redelivered (S59)"),
        "{}",
        stdout(&run)
    );
    // The closer and the two redelivery splices under the run's epoch 2, then turn 2 runs i1
    // and f1 and turn 3 runs f2: each message entered once.
    assert_eq!(
        cluster
            .psql_in(
                "postgres",
                "SELECT string_agg(type || coalesce(' ' || (data->>'redelivery'), '') || ' @' || epoch,
                                   ', ' ORDER BY seq)
                 FROM coxswain.records WHERE session = 'c1' AND seq BETWEEN 7 AND 9",
            )
            .unwrap(),
        "turn/end @2, agent/inbox/spliced 1 @2, agent/inbox/spliced 1 @2"
    );
    assert_eq!(
        cluster
            .psql_in(
                "postgres",
                "SELECT string_agg(CASE type WHEN 'turn/start' THEN 'turn ' || (data->>'turn')
                                             ELSE data->>'id' END, ' ' ORDER BY seq)
                 FROM coxswain.records WHERE session = 'c1'
                   AND type IN ('turn/start', 'user/message')",
            )
            .unwrap(),
        "turn 1 turn 2 i1 f1 turn 3 f2"
    );
    let verified = coxswain(&["verify", &url, "--session", "c1"]);
    assert_eq!(verified.status.code(), Some(0), "{}", stdout(&verified));
    assert_eq!(
        fate("f1", &[]),
        "{\"claimed\":{\"end\":\"completed\",\"step\":1,\"turn\":2}}\n"
    );
}
