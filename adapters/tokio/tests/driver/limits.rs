//! The limits (`Options::max_message_bytes`, `max_id_bytes`, `max_pending`): each refuses with
//! its typed error before anything is persisted, and leaves the log and the lists as they were.
//! `max_pending` is the core's admission bound (S55): the core refuses, on the list the
//! delivery resolves to (`guards.rs` pins its S18 retargeting and a restored longer list).

use coxswain_tokio::coxswain_core::{Message, Target};
use coxswain_tokio::{Agent, AgentError, MemoryLog, Options};
use serde_json::json;

use crate::support::*;

fn limits(message: usize, id: usize, pending: usize) -> Options {
    let mut options = Options::default();
    options.max_message_bytes = message;
    options.max_id_bytes = id;
    options.max_pending = pending;
    options
}

/// An agent nothing runs on (maintenance never starts; sends only queue).
async fn agent(options: Options) -> (Agent, MemoryLog) {
    let log = MemoryLog::new();
    let host = FakeHost::new().on_pre_step(|_cx| std::future::pending());
    let (agent, _) = Agent::open_with(options, host, log.clone()).await.unwrap();
    (agent, log)
}

#[tokio::test(start_paused = true)]
async fn a_message_over_max_message_bytes_is_refused_with_its_size() {
    // `{"id":"a","source":{"kind":"user"},"content":"xxxx"}` is 52 bytes with 4 x's.
    let message = |id: &str, n: usize| Message::user(id, "x".repeat(n));
    let size = serde_json::to_vec(&message("a", 4)).unwrap().len();
    assert_eq!(size, 52);
    let (agent, log) = agent(limits(52, 8, 10)).await;
    agent.inject(message("a", 4)).await.unwrap();
    let before = log.bytes();
    let error = agent.inject(message("b", 5)).await.unwrap_err();
    assert!(
        matches!(&error, AgentError::MessageTooLarge { id, bytes: 53, max: 52 } if id.as_str() == "b"),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "rejected: message `b` is 53 bytes encoded, above the limit of 52"
    );
    for error in [
        agent.replace("a", message("c", 5)).await.unwrap_err(),
        agent
            .prepend(Target::NextTurn, message("c", 5))
            .await
            .unwrap_err(),
        agent
            .send(message("c", 5), Target::NextTurn, true)
            .await
            .unwrap_err(),
    ] {
        assert!(
            matches!(
                &error,
                AgentError::MessageTooLarge {
                    bytes: 53,
                    max: 52,
                    ..
                }
            ),
            "{error:?}"
        );
    }
    assert_eq!(log.bytes(), before);
    assert_eq!(pending(&agent).await, (vec![], vec![("a".into(), false)]));
}

#[tokio::test(start_paused = true)]
async fn an_id_over_max_id_bytes_is_refused_by_every_call_naming_one() {
    let (agent, log) = agent(limits(1 << 20, 4, 10)).await;
    agent.followup(user("abcd")).await.unwrap();
    let before = log.bytes();
    let long = || user("abcde");
    let errors = [
        agent.followup(long()).await.unwrap_err(),
        agent.prepend(Target::NextStep, long()).await.unwrap_err(),
        agent.replace("abcd", long()).await.unwrap_err(),
        agent.replace("abcde", user("z")).await.unwrap_err(),
        agent.remove("abcde").await.unwrap_err(),
    ];
    for error in &errors {
        assert!(
            matches!(error, AgentError::IdTooLong { bytes: 5, max: 4 }),
            "{error:?}"
        );
    }
    assert_eq!(
        errors[0].to_string(),
        "rejected: a message id of 5 bytes is above the limit of 4"
    );
    assert_eq!(log.bytes(), before);
    assert_eq!(pending(&agent).await.1, vec![]);
}

#[tokio::test(start_paused = true)]
async fn a_full_list_refuses_the_next_item_and_takes_one_again_once_there_is_room() {
    let (agent, log) = agent(limits(1 << 20, 8, 2)).await;
    // NT: a waking follow-up starts a turn (it is claimed by the pre-step, which never
    // answers), so use quiet sends to fill NT.
    agent
        .send(user("t1"), Target::NextTurn, false)
        .await
        .unwrap();
    agent
        .send(user("t2"), Target::NextTurn, false)
        .await
        .unwrap();
    agent.inject(user("s1")).await.unwrap();
    let before = log.bytes();
    let full = |target| move |error: &AgentError| matches!(error, AgentError::Full { target: t, max: 2 } if *t == target);
    let error = agent
        .send(user("t3"), Target::NextTurn, false)
        .await
        .unwrap_err();
    assert!(full(Target::NextTurn)(&error), "{error:?}");
    assert_eq!(
        error.to_string(),
        "rejected: the next-turn list is full (2 items pending)"
    );
    let error = agent
        .prepend(Target::NextTurn, user("t3"))
        .await
        .unwrap_err();
    assert!(full(Target::NextTurn)(&error), "{error:?}");
    // S55 counts the list the core resolves a send to: a waking NT send is refused too (here
    // before it could wake), and it is not an identity error (S54's order: identity first).
    let error = agent.followup(user("t4")).await.unwrap_err();
    assert!(full(Target::NextTurn)(&error), "{error:?}");
    assert!(!error.was_delivered());
    let error = agent.followup(user("t1")).await.unwrap_err();
    assert!(error.was_delivered(), "{error:?}");
    assert_eq!(log.bytes(), before);
    // A quiet NS item still fits; then NS is full too.
    agent.inject(user("s2")).await.unwrap();
    let error = agent.inject(user("s3")).await.unwrap_err();
    assert!(full(Target::NextStep)(&error), "{error:?}");
    // Replacing does not add an item.
    assert!(agent.replace("t1", user("t9")).await.unwrap());
    // Room again after a removal; the refused id was never delivered, so it may come now.
    assert!(agent.remove("t2").await.unwrap());
    agent
        .send(user("t3"), Target::NextTurn, false)
        .await
        .unwrap();
    assert_eq!(
        brief(&log),
        [
            "NT 0 +[t1]",
            "NT 1 +[t2]",
            "NS 0 +[s1]",
            "NS 1 +[s2]",
            "NT 0 -1 +[t9] canceled",
            "NT 1 -1 canceled",
            "NT 1 +[t3]"
        ]
    );
}

#[tokio::test]
async fn a_zero_limit_is_refused_when_opening() {
    let error = Agent::open_with(limits(1, 1, 0), FakeHost::new(), MemoryLog::new())
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid options: max_pending is 0: nothing could be delivered"
    );
    let _ = json!(null);
}
