//! SPEC §13 on the tokio driver, beyond the driver suite (`tests/drivers`): the redelivery
//! allowance on a shared segment log's session (every `DurableLog` gets it, S59), `resume` at
//! open on a log whose append fails (`OpenError::Resume`, S57), and `fate` after `close` (S58).

use coxswain_tokio::coxswain_core::{
    Config, Fate, Machine, PreStepAnswer, StepAnswer, Target, Transition, TurnEndKind,
};
use coxswain_tokio::coxswain_log::{encode, split_segment, Entry};
use coxswain_tokio::{Agent, AgentError, MemoryLog, OpenError, Options, SegmentLog};

use crate::support::*;

/// A log that crashed inside turn 1: `m1` ran step 1; steer `s1` and follow-up `m2` arrived
/// during it; the step answered `continue`; the boundary claimed `s1` and the process died while
/// that pre-step request was outstanding (no model call saw `s1`, S59). `m2` waits in NT.
fn crashed_log() -> Vec<u8> {
    fn write(transition: Transition<'_>, bytes: &mut Vec<u8>, seq: &mut u64) {
        for event in transition.events().to_vec() {
            encode(*seq, &Entry::Machine(event), bytes).unwrap();
            *seq += 1;
        }
        transition.persisted().for_each(drop);
    }
    let mut machine = Machine::with_config(Config::new().with_delivery_memory(256));
    let (mut bytes, mut seq) = (Vec::new(), 1);
    write(machine.followup(user("m1")).unwrap(), &mut bytes, &mut seq);
    let entered = PreStepAnswer::Enter([user("m1")].into_iter().collect());
    write(
        machine.answer_pre_step(entered).unwrap(),
        &mut bytes,
        &mut seq,
    );
    write(machine.steer(user("s1")).unwrap(), &mut bytes, &mut seq);
    write(machine.followup(user("m2")).unwrap(), &mut bytes, &mut seq);
    let step = StepAnswer::Continue;
    write(machine.answer_step(step).unwrap(), &mut bytes, &mut seq);
    bytes
}

fn options(redelivery: u64, resume_on_open: bool) -> Options {
    let mut options = Options::default();
    options.redelivery = redelivery;
    options.resume_on_open = resume_on_open;
    options
}

/// S59 on a segment log's session: repair appends the closer and the redelivery splice to that
/// session's stream (the other session untouched), `resume_on_open` runs `s1` and `m2` as turn
/// 2, and the fates say so (S58).
#[tokio::test]
async fn s59_a_segment_sessions_repair_redelivers_and_resume_on_open_runs_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segment.jsonl");
    let text = String::from_utf8(crashed_log()).unwrap();
    let mut segment = String::new();
    for line in text.lines() {
        segment += &line.replacen(r#""type""#, r#""session":"a","type""#, 1);
        segment += "\n";
    }
    segment += r#"{"seq":1,"session":"b","type":"agent/inbox/spliced","data":{"target":"next-step","start":0,"inserted":[{"id":"b1","content":"b1","source":{"kind":"user"}}]}}"#;
    segment += "\n";
    std::fs::write(&path, &segment).unwrap();
    let log = SegmentLog::open(&path).await.unwrap();
    let host = FakeHost::new();
    let opened = Agent::open_with(options(1, true), host, log.session("a").unwrap()).await;
    let (agent, recovery) = opened.unwrap();
    assert_eq!((recovery.interrupted_turn, recovery.closers), (Some(1), 2));
    assert_eq!(recovery.redelivered, 1);
    agent.when_idle().await.unwrap();
    let completed = Fate::Claimed {
        turn: 2,
        step: Some(1),
        end: Some(TurnEndKind::Completed),
    };
    assert_eq!(agent.fate("s1").await, completed);
    assert_eq!(agent.fate("m2").await, completed);
    agent.close().await.unwrap();
    drop(log);
    let bytes = std::fs::read(&path).unwrap();
    let parsed = split_segment(&bytes).unwrap();
    let a = &parsed.sessions["a"];
    assert_eq!(
        a[10].event.to_string(),
        r#"{"data":{"inserted":[{"content":"s1","id":"s1","source":{"kind":"user"}}],"redelivery":1,"start":0,"target":"next-step","wakeup":true},"seq":11,"type":"agent/inbox/spliced"}"#
    );
    assert_eq!(
        briefs_of(a)[9..13],
        [
            "end 1 interrupted",
            "NS 0 +[s1] wakeup",
            "turn 2",
            "NS 0 -1"
        ]
    );
    assert_eq!(parsed.sessions["b"].len(), 1);
}

fn briefs_of(records: &[coxswain_tokio::coxswain_log::Record]) -> Vec<String> {
    records.iter().map(|r| brief_event(&r.event)).collect()
}

/// S57 at open: the `resume` whose append fails fails the open (`OpenError::Resume`), after the
/// repair (which any open makes) and with nothing of the resume in the log.
#[tokio::test]
async fn s57_a_resume_at_open_that_is_not_persisted_fails_the_open() {
    let memory = MemoryLog::from_bytes(crashed_log());
    // Append 0: the closer (S50); append 1: the resume's wake (fails).
    let log = FailingLog::failing(memory.clone(), 1..2);
    let opened = Agent::open_with(options(0, true), FakeHost::new(), log).await;
    let Err(OpenError::Resume(AgentError::Persistence(error))) = opened else {
        panic!("the open succeeded or failed otherwise: {opened:?}");
    };
    assert_eq!(error.to_string(), "log i/o failed: disk full (injected)");
    let briefs = brief(&memory);
    assert_eq!(briefs.len(), 10);
    assert_eq!(briefs[9], "end 1 interrupted");
}

/// S58: `fate` is answered after `close` (the driver gone), from the machine it left; a
/// parked item is still pending there.
#[tokio::test]
async fn s58_fate_is_answered_after_close() {
    let (agent, _, _) = reopen(FakeHost::new(), crashed_log()).await;
    agent.close().await.unwrap();
    let pending = Fate::Pending {
        target: Target::NextTurn,
    };
    assert_eq!(agent.fate("m2").await, pending);
    let interrupted = Fate::Claimed {
        turn: 1,
        step: None,
        end: Some(TurnEndKind::Interrupted),
    };
    assert_eq!(agent.fate("s1").await, interrupted);
}
