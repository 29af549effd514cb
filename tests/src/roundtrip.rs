//! Round trips: every wire type serializes and parses back equal (as JSON, as a trace line, as a
//! log record), and a durable log the core wrote — as JSON lines with host events interleaved,
//! read back whole or cut at any byte — restores to the live machine's lists and turn number
//! (S46–S50).

use std::sync::Arc;

use coxswain_conformance::{Line, Trace};
use coxswain_core::{
    Abort, Batch, CancelCause, Effect, ErrorInfo, Event, Expect, Input, MaintenanceInput, Message,
    Notification, Output, PreStepAnswer, Request, SharedMessage, Splice, SpliceOutcome, Status,
    StepAnswer, Target, TurnEndReason, TurnStoppingAnswer,
};
use coxswain_log::{encode, parse, repair, Entry, HostEvent};
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::harness::{pending_messages, Checks, Session};
use crate::proptests::{cases, choices};

// ----- strategies for the wire types -----

fn json_value() -> impl Strategy<Value = Value> {
    // FORMAT.md: numbers are integers (serde_json would not round-trip every float exactly).
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map(any::<String>(), inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Any message: any string id, and any other fields (usually `source` and `content`).
fn message() -> impl Strategy<Value = SharedMessage> {
    (
        any::<String>(),
        any::<String>(),
        json_value(),
        btree_map("[a-z]{1,6}", json_value(), 0..2),
    )
        .prop_map(|(id, kind, content, extra)| {
            let mut fields: Map<String, Value> = extra.into_iter().collect();
            fields.insert("source".into(), json!({ "kind": kind }));
            fields.insert("content".into(), content);
            Arc::new(Message::from_fields(id, fields))
        })
}

fn batch() -> impl Strategy<Value = Batch> {
    // Past the inline capacity too, so spilled batches round-trip.
    vec(message(), 0..7).prop_map(Batch::from)
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![Just(Target::NextTurn), Just(Target::NextStep)]
}

fn cause() -> impl Strategy<Value = CancelCause> {
    prop_oneof![
        Just(CancelCause::User),
        Just(CancelCause::Parent),
        any::<String>().prop_map(|reason| CancelCause::Hook {
            reason: reason.into()
        }),
        Just(CancelCause::Disposed),
    ]
}

fn error_info() -> impl Strategy<Value = ErrorInfo> {
    (any::<String>(), any::<String>()).prop_map(|(message, code)| ErrorInfo::new(message, code))
}

/// No guard, or either S54 guard with any turn number.
fn expect() -> impl Strategy<Value = Option<Expect>> {
    prop_oneof![
        Just(None),
        any::<u64>().prop_map(|turn| Some(Expect::Turn(turn))),
        any::<u64>().prop_map(|turn| Some(Expect::IdleAfter(turn))),
    ]
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        (message(), target(), any::<bool>(), expect()).prop_map(
            |(message, target, wakeup, expect)| Input::Send {
                message,
                target,
                wakeup,
                expect,
            }
        ),
        message().prop_map(Input::Followup),
        message().prop_map(Input::Steer),
        message().prop_map(Input::Inject),
        any::<String>().prop_map(|id| Input::Remove(id.into())),
        (any::<String>(), message()).prop_map(|(id, message)| Input::Replace {
            id: id.into(),
            message
        }),
        (target(), message()).prop_map(|(target, message)| Input::Prepend { target, message }),
        Just(Input::Clear {}),
        (cause(), any::<bool>())
            .prop_map(|(cause, keep_inbox)| Input::Cancel { cause, keep_inbox }),
        Just(Input::Maintenance(MaintenanceInput::Begin)),
        Just(Input::Maintenance(MaintenanceInput::End)),
        Just(Input::Dispose {}),
        batch().prop_map(|batch| Input::PreStep(PreStepAnswer::Enter(batch))),
        Just(Input::PreStep(PreStepAnswer::Reject)),
        error_info().prop_map(|e| Input::PreStep(PreStepAnswer::Fail(e))),
        Just(Input::Step(StepAnswer::Completed)),
        Just(Input::Step(StepAnswer::MaxTokens)),
        Just(Input::Step(StepAnswer::Continue)),
        error_info().prop_map(|e| Input::Step(StepAnswer::Fail(e))),
        Just(Input::TurnStopping(TurnStoppingAnswer::Done)),
        error_info().prop_map(|e| Input::TurnStopping(TurnStoppingAnswer::Fail(e))),
    ]
}

fn reason() -> impl Strategy<Value = TurnEndReason> {
    prop_oneof![
        Just(TurnEndReason::Completed),
        Just(TurnEndReason::MaxTokens),
        Just(TurnEndReason::Blocked),
        cause().prop_map(|reason| TurnEndReason::Aborted { reason }),
        error_info().prop_map(|error| TurnEndReason::Error { error }),
        Just(TurnEndReason::Interrupted),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    let splice = (
        target(),
        0..1_000_000usize,
        prop_oneof![Just(0usize), 0..1_000_000usize],
        vec(message(), 0..3),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(target, start, removed_count, inserted, canceled, wakeup)| {
                Event::Spliced(Splice {
                    target,
                    start,
                    removed_count,
                    inserted: inserted.into_iter().collect(),
                    outcome: canceled.then_some(SpliceOutcome::Canceled),
                    wakeup,
                    redelivery: None,
                })
            },
        );
    prop_oneof![
        splice,
        any::<u64>().prop_map(|turn| Event::TurnStart { turn }),
        (any::<u64>(), any::<u64>()).prop_map(|(turn, step)| Event::StepStart { turn, step }),
        message().prop_map(Event::UserMessage),
        (any::<u64>(), any::<u64>()).prop_map(|(turn, step)| Event::StepEnd { turn, step }),
        (any::<u64>(), reason()).prop_map(|(turn, reason)| Event::TurnEnd { turn, reason }),
    ]
}

fn output() -> impl Strategy<Value = Output> {
    prop_oneof![
        event().prop_map(Output::Event),
        message()
            .prop_map(|message| Output::Effect(Effect::Notify(Notification::Inserted { message }))),
        message().prop_map(
            |message| Output::Effect(Effect::Notify(Notification::Discarded { message }))
        ),
        (message(), any::<u64>()).prop_map(|(message, turn)| Output::Effect(Effect::Notify(
            Notification::Claimed { message, turn }
        ))),
        prop_oneof![Just(Status::Idle), Just(Status::Running)]
            .prop_map(|status| Output::Effect(Effect::Notify(Notification::Status { status }))),
        (any::<u64>(), any::<u64>(), error_info()).prop_map(|(turn, step, error)| {
            Output::Effect(Effect::Notify(Notification::Error { turn, step, error }))
        }),
        (any::<u64>(), any::<u64>(), batch()).prop_map(|(turn, step, messages)| {
            Output::Effect(Effect::Request(Request::PreStep {
                turn,
                step,
                messages,
            }))
        }),
        (any::<u64>(), any::<u64>())
            .prop_map(|(turn, step)| Output::Effect(Effect::Request(Request::Step { turn, step }))),
        any::<u64>()
            .prop_map(|turn| Output::Effect(Effect::Request(Request::TurnStopping { turn }))),
        cause().prop_map(|cause| Output::Effect(Effect::Abort(Abort { cause }))),
        Just(Output::Effect(Effect::Disposed)),
    ]
}

/// Serializes, parses back, and checks both the value and its JSON survive.
fn round_trip<T>(value: &T) -> Result<(), TestCaseError>
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let text = serde_json::to_string(value).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let back: T = serde_json::from_str(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&back, value, "{}", text);
    let again = serde_json::to_value(&back).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let first: Value =
        serde_json::from_str(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(again, first);
    Ok(())
}

fn config(default_cases: u32) -> Config {
    Config {
        cases: cases(default_cases),
        source_file: Some(file!()),
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn s6_s8_messages_round_trip_verbatim(message in message()) {
        round_trip(&*message)?;
        let value = serde_json::to_value(&*message).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(Message::from_json(&value), Some((*message).clone()));
    }

    #[test]
    fn format_md_inputs_round_trip_as_json_and_as_in_lines(input in input()) {
        round_trip(&input)?;
        let line = json!({ "in": input }).to_string();
        let trace = Trace::parse(&line).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&trace.lines, &vec![(1, Line::In(input))]);
    }

    #[test]
    fn format_md_outputs_round_trip_as_json(output in output()) {
        round_trip(&output)?;
    }

    #[test]
    fn s46_events_round_trip_as_log_records(event in event(), seq in 1..u64::MAX) {
        round_trip(&event)?;
        let mut bytes = Vec::new();
        encode(seq, &Entry::Machine(event.clone()), &mut bytes)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let parsed = parse(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(parsed.records.len(), 1);
        prop_assert_eq!(parsed.records[0].seq, Some(seq));
        let back: Event = serde_json::from_value(parsed.records[0].event.clone())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(back, event);
    }
}

// ----- logs the core wrote -----

/// Runs a random session and writes its log as JSON lines (`seq` from 1), with host events (model
/// output, a tool call) inside every step, as a host would.
fn session_bytes(choices: &[crate::harness::Choice]) -> (Session, Vec<u8>) {
    let checks = Checks {
        invariants: false,
        differential: false,
    };
    let mut session = Session::new(checks);
    // With no checks a session cannot fail.
    let _ = session.run(choices);
    let mut bytes = Vec::new();
    let mut seq = 0;
    let mut append = |entry: Entry, bytes: &mut Vec<u8>| {
        seq += 1;
        encode(seq, &entry, bytes).expect("every entry encodes");
    };
    for value in session.log() {
        let event: Event = serde_json::from_value(value.clone()).expect("the core's events parse");
        let step = matches!(event, Event::StepStart { .. });
        append(Entry::Machine(event), &mut bytes);
        if step {
            for (n, kind) in ["model/output", "tool/call"].into_iter().enumerate() {
                let host = HostEvent::new(kind, json!({"text": "…", "n": n})).expect("host type");
                append(Entry::Host(host), &mut bytes);
            }
        }
    }
    (session, bytes)
}

proptest! {
    #![proptest_config(config(128))]

    /// S46–S50: a log the core wrote, read back as JSON lines with the host's events in it and
    /// repaired, restores the live lists (message values and waking flags) and `lastTurn`.
    #[test]
    fn s49_s50_a_log_written_by_the_core_restores_the_live_state(choices in choices()) {
        let (session, bytes) = session_bytes(&choices);
        let parsed = parse(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(parsed.torn, None);
        prop_assert_eq!(parsed.complete_len, bytes.len());
        let repaired = repair(&parsed.records).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let closers: Vec<Value> = repaired
            .closers
            .iter()
            .map(|event| serde_json::to_value(event).expect("closers serialize"))
            .collect();
        prop_assert_eq!(&closers, &session.closers());
        let live = session.machine();
        prop_assert_eq!(pending_messages(&repaired.machine), pending_messages(live));
        if live.is_quiescent() {
            prop_assert_eq!(repaired.machine.last_turn(), live.last_turn());
        }
        // The same log restored straight from its JSON (S46 ignores `seq` and host events).
        let mut events: Vec<Value> = parsed.records.iter().map(|r| r.event.clone()).collect();
        events.extend(closers);
        let restored = coxswain_core::Machine::restore(&events, 0)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(restored, repaired.machine);
    }

    /// S50: a crash may cut the log at any byte. What is read back is every complete record and
    /// at most a torn tail, and it repairs and restores like the log of those records.
    #[test]
    fn s50_a_log_cut_at_any_byte_reads_back_and_repairs(choices in choices(), cut in any::<prop::sample::Index>()) {
        let (_, bytes) = session_bytes(&choices);
        let cut = cut.index(bytes.len() + 1);
        let parsed = parse(&bytes[..cut]).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let complete = bytes[..cut].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        // A cut just before a line's `\n` leaves a whole record: it is kept (unterminated).
        let whole = cut < bytes.len() && cut > complete && bytes[cut] == b'\n';
        let lines = bytes[..complete].iter().filter(|&&b| b == b'\n').count();
        prop_assert_eq!(parsed.complete_len, if whole { cut } else { complete });
        prop_assert_eq!(parsed.records.len(), lines + usize::from(whole));
        prop_assert_eq!(parsed.unterminated, whole);
        prop_assert_eq!(parsed.torn.is_some(), cut != complete && !whole);
        let repaired = repair(&parsed.records).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut events: Vec<Value> = parsed.records.iter().map(|r| r.event.clone()).collect();
        events.extend(repaired.closers.iter().map(|e| serde_json::to_value(e).expect("closer")));
        let restored = coxswain_core::Machine::restore(&events, 0)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(restored, repaired.machine);
    }
}
