//! Resume (S46–S48) after a simulated crash, torn tails (S50), corrupt logs (S47).

use coxswain_tokio::coxswain_core::{LogViolation, Status, StepAnswer};
use coxswain_tokio::coxswain_log::{CorruptLine, TornTail};
use coxswain_tokio::{Agent, FileLog, LogError, MemoryLog, OpenError, Recovery};

use crate::support::*;

type Facts = (
    usize,
    Option<TornTail>,
    Option<u64>,
    usize,
    u64,
    usize,
    usize,
);

fn recovery_facts(r: &Recovery) -> Facts {
    (
        r.records,
        r.torn_tail,
        r.interrupted_turn,
        r.closers,
        r.last_turn,
        r.pending_next_turn,
        r.pending_next_step,
    )
}

#[tokio::test(start_paused = true)]
async fn s50_s48_resume_after_a_crash_mid_step_closes_the_turn_and_parks_items() {
    let (crashed, log) = open(FakeHost::new()).await;
    crashed.followup(user("a")).await.unwrap();
    sleep(1).await;
    crashed.followup(user("b")).await.unwrap();
    crashed.inject(user("c")).await.unwrap();
    sleep(50).await;
    let image = log.bytes();
    crashed.close().await.unwrap();

    let host = FakeHost::new();
    let (agent, log, recovery) = reopen(host.clone(), image).await;
    assert_eq!(recovery_facts(&recovery), (7, None, Some(1), 2, 1, 1, 1));
    assert_eq!(
        brief(&log),
        [
            "NT 0 +[a] wakeup",
            "turn 1",
            "NT 0 -1",
            "step 1.1",
            "msg a",
            "NT 0 +[b] wakeup",
            "NS 0 +[c]",
            "/step 1.1",
            "end 1 interrupted"
        ]
    );
    sleep(1_000).await;
    assert!(host.calls().is_empty(), "S48: restoring wakes nothing");
    assert_eq!(agent.status(), Status::Idle);
    assert_eq!(
        pending(&agent).await,
        (nt(&["b"]), vec![("c".into(), false)])
    );
    agent.followup(user("d")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(
        brief(&log)[9..],
        [
            "NT 1 +[d] wakeup",
            "turn 2",
            "NS 0 -1",
            "NT 0 -1",
            "step 2.1",
            "msg c",
            "msg b",
            "/step 2.1",
            "end 2 completed",
            "turn 3",
            "NT 0 -1",
            "step 3.1",
            "msg d",
            "/step 3.1",
            "end 3 completed"
        ]
    );
    audit(&log.records().unwrap());
}

#[tokio::test]
async fn s50_a_file_with_a_torn_tail_is_cut_and_continued() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let quick = || FakeHost::new().on_step(|_| async { StepAnswer::Completed });
    let (agent, _) = Agent::open(quick(), FileLog::open(&path).await.unwrap())
        .await
        .unwrap();
    agent.followup(user("a")).await.unwrap();
    agent.when_idle().await.unwrap();
    agent.close().await.unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let complete = bytes.len();
    bytes.extend_from_slice(b"{\"seq\":8,\"type\":\"turn/st");
    std::fs::write(&path, &bytes).unwrap();

    let (agent, recovery) = Agent::open(quick(), FileLog::open(&path).await.unwrap())
        .await
        .unwrap();
    assert_eq!(recovery.torn_tail, Some(TornTail { line: 8, bytes: 24 }));
    assert_eq!(recovery.records, 7);
    assert_eq!(recovery.interrupted_turn, None);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), complete as u64);
    agent.followup(user("b")).await.unwrap();
    agent.when_idle().await.unwrap();
    agent.dispose().await.unwrap();
    let log = MemoryLog::from_bytes(std::fs::read(&path).unwrap());
    let records = log.records().unwrap();
    assert_eq!(records.len(), 14);
    check_seq(&records);
    audit(&records);
    assert_eq!(brief(&log)[13], "end 2 completed");
}

#[tokio::test]
async fn s47_a_log_corrupt_before_its_end_is_rejected_naming_the_line() {
    let bytes = b"{\"seq\":1,\"type\":\"turn/start\",\"data\":{\"turn\":1}}\n\
{\"seq\":2,\"type\":\"turn/end\",\"data\":{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}}\n\
{\"seq\":3,\"type\":\"agent/inbox/spliced\",\"data\":{\"target\":\"next-turn\",\"start\":1,\"inserted\":[]}}\n\
{\"seq\":4,\"type\":\"turn/start\",\"data\":{\"turn\":2}}\n"
        .to_vec();
    match Agent::open(FakeHost::new(), MemoryLog::from_bytes(bytes)).await {
        Err(OpenError::Corrupt(error)) => {
            assert_eq!(error.line(), 3);
            assert_eq!(error.error.violation, LogViolation::SpliceStart);
        }
        other => panic!("{:?}", other.map(|(_, r)| r)),
    }
    let bytes = b"{\"seq\":1,\"type\":\"x\"}\n{oops\n{\"seq\":3,\"type\":\"x\"}\n".to_vec();
    match Agent::open(FakeHost::new(), MemoryLog::from_bytes(bytes)).await {
        Err(OpenError::Log(LogError::Corrupt(CorruptLine { line: 2, .. }))) => {}
        other => panic!("{:?}", other.map(|(_, r)| r)),
    }
}
