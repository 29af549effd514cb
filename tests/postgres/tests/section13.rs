//! SPEC §13 on PostgreSQL, against a real, throwaway server: a worker takes over a session whose
//! owner crashed while its turn's pre-step request was outstanding (S59: the turn had claimed
//! an inject and a follow-up that no model call saw, and a second follow-up was queued).
//!
//! * With `redelivery: 1` the takeover writes exactly the closer and the two redelivery
//!   splices under its epoch, and (`resume_after_takeover`, default on, S57) runs each
//!   follow-up once without any caller.
//! * With `resume_after_takeover(false)` nothing runs (S48): the redelivered and queued work
//!   parks until a `resume`.
//! * With the default allowance 0 the claimed messages stay lost (S50 unchanged: their fate is
//!   `claimed … interrupted`), and the queued follow-up still runs after the takeover.
//! * `fate` (S58) answered from a second connection without taking the session over agrees
//!   with the serving agent's once it is idle, for every id (I15), and writes nothing.
//! * An allowance above 1000 is refused with the session layer's text, before anything is
//!   taken, read or written.

mod support;

use coxswain_test_harness::Test;
use std::time::{Duration, Instant};

use coxswain_core::{
    Config, Fate, Message, MessageId, PreStepAnswer, StepAnswer, Target, TurnEndKind,
};
use coxswain_postgres::{PgError, Store, Worker, WorkerError};
use coxswain_postgres_tests::TempCluster;
use coxswain_session::ResumeOptions;
use coxswain_tokio::{Agent, Host, Options, PreStepContext, Recovery, StepContext};

use serde_json::json;
use support::{cluster, opts, runtime, Echo};

/// The tests of this binary, through the harness: ignored without PostgreSQL's server binaries
/// (failed with `CI=true`).
fn main() -> std::process::ExitCode {
    coxswain_test_harness::run(
        &coxswain_postgres_tests::needs(),
        &[Test::new("section_13_on_postgres", section_13_on_postgres)],
    )
}

fn section_13_on_postgres() {
    let Some(cluster) = cluster() else { return };
    let rt = runtime();
    rt.block_on(async {
        a_takeover_redelivers_what_no_model_saw_and_runs_it_once(&cluster).await;
        without_resume_after_takeover_nothing_runs(&cluster).await;
        the_default_allowance_loses_the_claims_and_runs_the_queue(&cluster).await;
        an_allowance_above_1000_is_refused_before_anything_is_touched(&cluster).await;
    });
}

/// The crashed owner's host: its pre-step decision never comes (until cancelled), so the
/// messages its turn claimed are seen by no model call.
struct PreStepHangs;

impl Host for PreStepHangs {
    async fn pre_step(&self, cx: PreStepContext) -> PreStepAnswer {
        cx.cancel.cancelled().await;
        PreStepAnswer::Enter(cx.messages)
    }

    async fn step(&self, _cx: StepContext) -> StepAnswer {
        StepAnswer::Completed
    }
}

const LEASE_MS: u64 = 800;
const IDS: [&str; 4] = ["i1", "f1", "f2", "never-sent"];

/// Session `s1` in database `db`, whose owner (worker `owner-<db>`) crashed with turn 1 open: it
/// claimed `i1` (an inject, quiet) and `f1` (a follow-up) and its pre-step request was
/// outstanding; `f2` (a follow-up) was queued behind it. Returns the URL and how many records
/// the owner wrote.
async fn crashed_owner(cluster: &TempCluster, db: &str) -> (String, usize) {
    let url = cluster.database(db).unwrap();
    let store = Store::connect(&url, opts(&format!("owner-{db}"), LEASE_MS))
        .await
        .unwrap();
    let mut owner = Worker::new(store, Options::default(), |_| PreStepHangs);
    owner.open("s1").await.unwrap();
    let agent = owner.agent("s1").unwrap().clone();
    agent.inject(Message::user("i1", "context")).await.unwrap();
    agent.followup(Message::user("f1", "first")).await.unwrap();
    agent.followup(Message::user("f2", "second")).await.unwrap();
    // The worker answers from its agent, turn 1 still open (not from the stored records, which
    // a takeover would close `interrupted`, S58).
    assert_eq!(
        owner.fate("s1", &MessageId::new("f1")).await.unwrap(),
        Fate::Claimed {
            turn: 1,
            step: None,
            end: None
        }
    );
    assert_eq!(
        agent.fate(MessageId::new("f2")).await,
        Fate::Pending {
            target: Target::NextTurn
        }
    );
    // The crash: the worker stops renewing, its agent is dropped without closing its turn.
    drop(agent);
    drop(owner);
    let written = records(cluster, db, "seq > 0").lines().count();
    (url, written)
}

/// `seq type data` of the records of `s1` matching `filter`, one line each.
fn records(cluster: &TempCluster, db: &str, filter: &str) -> String {
    cluster
        .psql_in(
            db,
            &format!(
                "SELECT string_agg(seq || ' ' || type || coalesce(' ' || data::text, '') || ' @' || epoch,
                                   E'\\n' ORDER BY seq)
                 FROM coxswain.records WHERE session = 's1' AND {filter}"
            ),
        )
        .unwrap()
}

/// A worker on `url` named `name`, whose agents echo, with `options` and `resume_after_takeover`
/// set to `resume` (`None`: the default); it claims `s1` once the crashed owner's lease ended.
async fn take_over(
    url: &str,
    name: &str,
    options: Options,
    resume: Option<bool>,
) -> (Worker<Echo>, Recovery) {
    let store = Store::connect(url, opts(name, 5_000)).await.unwrap();
    let mut worker = Worker::new(store, options, |_| Echo);
    if let Some(resume) = resume {
        worker = worker.resume_after_takeover(resume);
    }
    let deadline = Instant::now() + Duration::from_millis(LEASE_MS) + Duration::from_secs(5);
    loop {
        let mut claimed = worker.claim_expired(10).await.unwrap();
        if let Some((session, recovery)) = claimed.pop() {
            assert_eq!(session, "s1");
            return (worker, recovery.unwrap());
        }
        assert!(Instant::now() < deadline, "s1 was never free to claim");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `agent` is idle with `last_turn` turns behind it.
async fn idle_after(agent: &Agent, last_turn: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while agent.last_turn() < last_turn || agent.status() != coxswain_core::Status::Idle {
        assert!(
            Instant::now() < deadline,
            "turn {} of {last_turn}",
            agent.last_turn()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    agent.when_idle().await.unwrap();
}

/// The fate of every id in [`IDS`], as JSON (FORMAT.md's `F`, `Fate::to_json`).
async fn fates_of(agent: &Agent) -> Vec<serde_json::Value> {
    let mut fates = Vec::new();
    for id in IDS {
        fates.push(agent.fate(MessageId::new(id)).await.to_json());
    }
    fates
}

/// The fate of every id in [`IDS`] from `store`, read-only, with `options`.
async fn stored_fates(store: &Store, options: ResumeOptions) -> Vec<serde_json::Value> {
    let mut fates = Vec::new();
    for id in IDS {
        let fate = store
            .fate("s1", &MessageId::new(id), options)
            .await
            .unwrap();
        fates.push(fate.to_json());
    }
    fates
}

/// The session row and the record count: what a read must leave as it was.
fn untouched(cluster: &TempCluster, db: &str) -> String {
    cluster
        .psql_in(
            db,
            "SELECT s.epoch || ' ' || coalesce(s.owner, '-') || ' ' || s.length || ' '
                    || (SELECT count(*) FROM coxswain.records)
                    || ' ' || (SELECT count(*) FROM coxswain.workers)
             FROM coxswain.sessions AS s WHERE s.session = 's1'",
        )
        .unwrap()
}

/// The read-only restore options of the agents' default delivery memory (S51; A = 0).
fn agents_memory() -> ResumeOptions {
    ResumeOptions::from(Config::new().with_delivery_memory(Options::DEFAULT_DELIVERY_MEMORY))
}

fn with_redelivery(allowance: u64) -> Options {
    let mut options = Options::default();
    options.redelivery = allowance;
    options
}

/// The owner's records: the inject, turn 1's wake claiming `i1` and `f1` (its pre-step request
/// is not a record), and the queued `f2`, all under epoch 1.
const OWNER: &str = r#"1 agent/inbox/spliced {"start": 0, "target": "next-step", "inserted": [{"id": "i1", "source": {"kind": "user"}, "content": "context"}]} @1
2 agent/inbox/spliced {"start": 0, "target": "next-turn", "wakeup": true, "inserted": [{"id": "f1", "source": {"kind": "user"}, "content": "first"}]} @1
3 turn/start {"turn": 1} @1
4 agent/inbox/spliced {"start": 0, "target": "next-step", "inserted": [], "removedCount": 1} @1
5 agent/inbox/spliced {"start": 0, "target": "next-turn", "inserted": [], "removedCount": 1} @1
6 agent/inbox/spliced {"start": 0, "target": "next-turn", "wakeup": true, "inserted": [{"id": "f2", "source": {"kind": "user"}, "content": "second"}]} @1"#;

async fn a_takeover_redelivers_what_no_model_saw_and_runs_it_once(cluster: &TempCluster) {
    let db = "redeliver";
    let (url, written) = crashed_owner(cluster, db).await;
    assert_eq!(records(cluster, db, "true"), OWNER);
    assert_eq!(written, 6);
    let (worker, recovery) = take_over(&url, "taker", with_redelivery(1), None).await;
    assert_eq!(
        (
            recovery.interrupted_turn,
            recovery.closers,
            recovery.redelivered
        ),
        (Some(1), 3, 2)
    );
    // S50 + S59: the closer, then one splice per message the turn claimed after its last
    // `step/start` (it had none), in claim order (NS item, then the NT item), each at the front
    // of its list, `redelivery: 1`, `wakeup` as it was claimed; under the taker's epoch 2.
    assert_eq!(
        records(cluster, db, "seq BETWEEN 7 AND 9"),
        r#"7 turn/end {"turn": 1, "reason": {"kind": "interrupted"}} @2
8 agent/inbox/spliced {"start": 0, "target": "next-step", "inserted": [{"id": "i1", "source": {"kind": "user"}, "content": "context"}], "redelivery": 1} @2
9 agent/inbox/spliced {"start": 0, "target": "next-turn", "wakeup": true, "inserted": [{"id": "f1", "source": {"kind": "user"}, "content": "first"}], "redelivery": 1} @2"#
    );
    // S57: the worker's `resume` woke the parked work with no caller: turn 2 runs i1 and f1,
    // turn 3 runs f2, each message entered once.
    let agent = worker.agent("s1").unwrap().clone();
    idle_after(&agent, 3).await;
    assert_eq!(
        cluster
            .psql_in(
                db,
                "SELECT string_agg(CASE type WHEN 'turn/start' THEN 'turn ' || (data->>'turn')
                                             ELSE data->>'id' END, ' ' ORDER BY seq)
                 FROM coxswain.records WHERE session = 's1'
                   AND type IN ('turn/start', 'user/message')"
            )
            .unwrap(),
        "turn 1 turn 2 i1 f1 turn 3 f2"
    );
    let claimed = |turn| json!({"claimed": {"turn": turn, "step": 1, "end": "completed"}});
    let live = fates_of(&agent).await;
    assert_eq!(live, [claimed(2), claimed(2), claimed(3), json!("unknown")]);
    // I15: answered from the stored records on another connection, taking nothing over, with
    // the serving agents' memory (the worker's answer for a session it does not serve) and
    // with an unbounded one: the same fates; nothing written.
    let before = untouched(cluster, db);
    let reader = Store::connect(&url, opts("reader", 5_000)).await.unwrap();
    let other = Worker::new(reader.clone(), with_redelivery(1), |_| Echo);
    let mut from_other = Vec::new();
    for id in IDS {
        let fate = other.fate("s1", &MessageId::new(id)).await.unwrap();
        from_other.push(fate.to_json());
    }
    assert_eq!(from_other, live);
    let unbounded = ResumeOptions::from(Config::new().with_unbounded_delivery_memory());
    assert_eq!(stored_fates(&reader, unbounded).await, live);
    // The serving worker answers from its agent.
    let served = worker.fate("s1", &MessageId::new("f2")).await.unwrap();
    assert_eq!(
        served,
        Fate::Claimed {
            turn: 3,
            step: Some(1),
            end: Some(TurnEndKind::Completed)
        }
    );
    // The worker's own delivery memory answers: W = 0 holds no record (S51).
    let mut forgetful = Options::default();
    forgetful.delivery_memory = 0;
    let forgetful = Worker::new(reader.clone(), forgetful, |_| Echo);
    let fate = forgetful.fate("s1", &MessageId::new("f1")).await.unwrap();
    assert_eq!(fate, Fate::Unknown);
    assert_eq!(untouched(cluster, db), before);
    assert_eq!(before, "2 taker 25 25 2");
    // A session that does not exist: a typed error, nothing created.
    let error = reader
        .fate("nope", &MessageId::new("f1"), unbounded)
        .await
        .unwrap_err();
    assert_eq!(error.to_string(), "no session nope in the database");
    worker.shutdown().await;
}

async fn without_resume_after_takeover_nothing_runs(cluster: &TempCluster) {
    let db = "parked";
    let (url, _) = crashed_owner(cluster, db).await;
    // Before the takeover, a worker that does not serve the session answers what its takeover
    // would leave (its allowance 1: the claims pending again), taking nothing.
    let before = untouched(cluster, db);
    let reader = Store::connect(&url, opts("reader", 5_000)).await.unwrap();
    let other = Worker::new(reader.clone(), with_redelivery(1), |_| Echo);
    let fate = other.fate("s1", &MessageId::new("f1")).await.unwrap();
    assert_eq!(fate.to_json(), json!({"pending": "next-turn"}));
    assert_eq!(untouched(cluster, db), before);
    let (worker, recovery) = take_over(&url, "taker", with_redelivery(1), Some(false)).await;
    assert_eq!(
        (
            recovery.closers,
            recovery.redelivered,
            recovery.pending_next_turn,
            recovery.pending_next_step
        ),
        (3, 2, 2, 1)
    );
    // S48: nothing wakes. No record follows the repair's three.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        records(cluster, db, "seq > 6")
            .lines()
            .map(|line| line.split(' ').nth(1).unwrap_or_default())
            .collect::<Vec<_>>(),
        ["turn/end", "agent/inbox/spliced", "agent/inbox/spliced"]
    );
    let agent = worker.agent("s1").unwrap().clone();
    assert_eq!(agent.last_turn(), 1);
    let pending = |target: &str| json!({ "pending": target });
    let parked = [
        pending("next-step"),
        pending("next-turn"),
        pending("next-turn"),
        json!("unknown"),
    ];
    assert_eq!(fates_of(&agent).await, parked);
    // Read-only from another connection: the same, while the agent is idle (I15).
    let options = ResumeOptions::from(Config::new()).with_redelivery(1);
    assert_eq!(stored_fates(&reader, options).await, parked);
    // A `resume` (S57) runs the parked work, as the takeover would have.
    agent.resume().await.unwrap();
    idle_after(&agent, 3).await;
    let claimed = |turn| json!({"claimed": {"turn": turn, "step": 1, "end": "completed"}});
    assert_eq!(
        fates_of(&agent).await,
        [claimed(2), claimed(2), claimed(3), json!("unknown")]
    );
    worker.shutdown().await;
}

async fn the_default_allowance_loses_the_claims_and_runs_the_queue(cluster: &TempCluster) {
    let db = "allowance_zero";
    let (url, _) = crashed_owner(cluster, db).await;
    // Before any takeover, read-only: what a takeover with A = 0 would leave (S50).
    let reader = Store::connect(&url, opts("reader", 5_000)).await.unwrap();
    let interrupted = json!({"claimed": {"turn": 1, "end": "interrupted"}});
    let before = untouched(cluster, db);
    assert_eq!(
        stored_fates(&reader, agents_memory()).await,
        [
            interrupted.clone(),
            interrupted.clone(),
            json!({"pending": "next-turn"}),
            json!("unknown")
        ]
    );
    assert_eq!(untouched(cluster, db), before);
    let (worker, recovery) = take_over(&url, "taker", Options::default(), None).await;
    assert_eq!((recovery.closers, recovery.redelivered), (1, 0));
    // The queued follow-up runs after the takeover (S57); the claimed ones do not (S50).
    let agent = worker.agent("s1").unwrap().clone();
    idle_after(&agent, 2).await;
    assert_eq!(
        cluster
            .psql_in(
                db,
                "SELECT string_agg(type || coalesce(' ' || (data->>'id'), ''), ', ' ORDER BY seq)
                 FROM coxswain.records WHERE session = 's1' AND seq > 6
                   AND type IN ('turn/start', 'turn/end', 'user/message', 'agent/inbox/spliced')"
            )
            .unwrap(),
        "turn/end, turn/start, agent/inbox/spliced, user/message f2, turn/end"
    );
    let done = json!({"claimed": {"turn": 2, "step": 1, "end": "completed"}});
    let live = fates_of(&agent).await;
    assert_eq!(
        live,
        [interrupted.clone(), interrupted, done, json!("unknown")]
    );
    assert_eq!(stored_fates(&reader, agents_memory()).await, live);
    worker.shutdown().await;
}

async fn an_allowance_above_1000_is_refused_before_anything_is_touched(cluster: &TempCluster) {
    let db = "refused";
    let (url, _) = crashed_owner(cluster, db).await;
    tokio::time::sleep(Duration::from_millis(LEASE_MS + 200)).await;
    let before = untouched(cluster, db);
    let store = Store::connect(&url, opts("taker", 5_000)).await.unwrap();
    let sent = store.stats();
    let mut worker = Worker::new(store.clone(), with_redelivery(1_001), |_| Echo);
    let text = "invalid options: the redelivery allowance 1001 is above 1000 (S59)";
    let error = worker.claim_expired(10).await.unwrap_err();
    assert!(matches!(error, WorkerError::Options(_)), "{error:?}");
    assert_eq!(error.to_string(), text);
    let error = worker.open("s1").await.unwrap_err();
    assert_eq!(error.to_string(), text);
    let error = worker.fate("s1", &MessageId::new("f1")).await.unwrap_err();
    assert_eq!(error.to_string(), text);
    let options = ResumeOptions::from(Config::new()).with_redelivery(1_001);
    let error = store
        .fate("s1", &MessageId::new("f1"), options)
        .await
        .unwrap_err();
    assert!(matches!(error, PgError::Redelivery(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "the redelivery allowance 1001 is above 1000 (S59)"
    );
    assert!(worker.serving().next().is_none());
    // Nothing taken (same epoch and owner, no worker row), read or written: not one statement
    // was sent.
    assert_eq!(untouched(cluster, db), before);
    assert_eq!(store.stats(), sent);
    // Records the core does not accept: a typed error naming the session and the record,
    // nothing written.
    cluster
        .psql_in(
            db,
            r#"INSERT INTO coxswain.sessions (session, epoch, owner, lease_until, length)
                   VALUES ('bad', 1, NULL, NULL, 1);
               INSERT INTO coxswain.records (session, seq, epoch, type, data)
                   VALUES ('bad', 1, 1, 'agent/inbox/spliced',
                           '{"target": "next-turn", "start": 0, "inserted": [], "removedCount": 1}');"#,
        )
        .unwrap();
    let error = store
        .fate("bad", &MessageId::new("f1"), agents_memory())
        .await
        .unwrap_err();
    assert!(matches!(error, PgError::Restore { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "session bad: the log cannot be restored: line 1: invalid log: event 0: splice \
         `removedCount` is not an integer in range (S11, S46)"
    );
    // 1000 is the bound itself: accepted.
    let mut worker = Worker::new(store, with_redelivery(1_000), |_| Echo);
    let claimed = worker.claim_expired_under("s1", 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert!(claimed[0].1.is_ok(), "{claimed:?}");
    worker.shutdown().await;
}
