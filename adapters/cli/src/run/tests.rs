//! Unit tests of the script parser (the examples run end to end in `tests/examples.rs`).

use coxswain_core::{CancelCause, Preset, Target};

use super::cue::Cue;
use super::script::{parse_script, Action, Trigger};

#[test]
fn every_action_and_trigger_parses() {
    let script = parse_script(
        r#"{"actions": [
            {"at": 0, "followup": {"id": "a", "content": "x"}},
            {"when": "step 1.1 starts", "steer": {"id": "b", "content": "x", "source": {"kind": "plugin"}}},
            {"inject": {"id": "c", "content": "x"}},
            {"at": 0, "send": {"message": {"id": "d"}, "target": "next-turn", "wakeup": false}},
            {"when": "a is claimed", "remove": "a"},
            {"when": "tool/call in step 1.1", "replace": {"id": "b", "message": {"id": "b2"}}},
            {"at": 0, "prepend": {"target": "next-step", "message": {"id": "e"}}},
            {"at": 0, "clear": {}, "note": "a comment"},
            {"at": 0, "cancel": {"cause": {"kind": "hook", "reason": "r"}, "keepInbox": true}},
            {"when": "turn 1 ends", "cancel": {}},
            {"at": 0, "maintenance": {"ms": 5}},
            {"when": "step 2.1 ends", "waitIdle": {}},
            {"at": 0, "reopen": {}},
            {"at": 0, "dispose": {}}
        ], "host": {
            "preStep": {"1.1": {"answer": "enter"}, "2.1": {"answer": "reject"},
                        "3.1": {"answer": {"enter": [{"id": "z"}]}}},
            "step": {"1.1": {"ms": 10, "answer": "max-tokens", "cleanupMs": 3,
                             "during": [{"at": 5, "record": {"type": "tool/call"}}]}},
            "turnStopping": {"1": {"answer": {"fail": {"message": "m", "code": "c"}}}}
        }}"#,
    )
    .unwrap();
    let triggers: Vec<Trigger> = script.actions.iter().map(|a| a.trigger.clone()).collect();
    assert_eq!(
        triggers,
        [
            Trigger::At(0),
            Trigger::When(Cue::StepStarts(1, 1)),
            Trigger::Next,
            Trigger::At(0),
            Trigger::When(Cue::Claimed("a".into())),
            Trigger::When(Cue::Recorded {
                kind: "tool/call".into(),
                turn: 1,
                step: 1
            }),
            Trigger::At(0),
            Trigger::At(0),
            Trigger::At(0),
            Trigger::When(Cue::TurnEnds(1)),
            Trigger::At(0),
            Trigger::When(Cue::StepEnds(2, 1)),
            Trigger::At(0),
            Trigger::At(0),
        ]
    );
    let presets: Vec<Preset> = script
        .actions
        .iter()
        .filter_map(|a| match a.action {
            Action::Deliver { preset, .. } => Some(preset),
            _ => None,
        })
        .collect();
    assert_eq!(presets, Preset::ALL);
    assert!(matches!(
        &script.actions[3].action,
        Action::Send { target: Target::NextTurn, wakeup: false, message } if message.id().as_str() == "d"
    ));
    assert!(matches!(
        &script.actions[9].action,
        Action::Cancel {
            cause: CancelCause::User,
            keep_inbox: false
        }
    ));
    assert_eq!(script.step_ms, 200);
    assert_eq!(script.host.step[&(1, 1)].during[0].at, 5);
}

#[test]
fn scripts_that_cannot_run_are_refused_with_the_reason() {
    for (text, error) in [
        (
            r#"{"actions": [{"at": 0, "record": {"type": "x"}}]}"#,
            "actions[0]: `record` is a host event: only in a step's `during`",
        ),
        (
            r#"{"actions": [{"at": 0, "followup": {"content": "x"}}]}"#,
            r#"actions[0]: `followup`: a message needs a string `id`: {"content":"x"}"#,
        ),
        (
            r#"{"actions": [{"when": "step 2.1 begins", "clear": {}}]}"#,
            "actions[0]: unknown event `step 2.1 begins`: expected `turn T starts`, \
             `turn T ends`, `step T.S starts`, `step T.S ends`, `ID is claimed` or \
             `TYPE in step T.S`",
        ),
        (
            r#"{"actions": [{"at": 1, "when": "turn 1 ends", "clear": {}}]}"#,
            "actions[0]: an action has one trigger: `at` or `when`, not both",
        ),
        (
            r#"{"actions": [{"at": "soon", "clear": {}}]}"#,
            r#"actions[0]: `at` is a number of milliseconds, not "soon""#,
        ),
        (
            r#"{"actions": [{"at": 0, "wen": "turn 1 ends", "clear": {}}]}"#,
            "actions[0]: an action has exactly one action key, found 2: [clear, wen]",
        ),
        (
            r#"{"actions": [{"at": 0}]}"#,
            "actions[0]: an action has exactly one action key, found 0: []",
        ),
        (
            r#"{"actions": [{"nudge": {"id": "a"}}]}"#,
            "actions[0]: `nudge`: unknown action (the actions: followup, steer, inject, send, \
             remove, replace, prepend, clear, cancel, maintenance, waitIdle, reopen, dispose, \
             record)",
        ),
        (
            r#"{"actions": [{"send": {"message": {"id": "a"}, "target": "next_turn"}}]}"#,
            "actions[0]: `send`: unknown target `next_turn`",
        ),
        (
            r#"{"actions": [{"clear": {"all": true}}]}"#,
            "actions[0]: `clear`: unknown field `all`, there are no fields",
        ),
        (
            r#"{"host": {"step": {"1": {}}}}"#,
            "host.step key `1` is not TURN.STEP",
        ),
        (
            r#"{"host": {"turnStopping": {"1.1": {}}}}"#,
            "host.turnStopping key `1.1` is not TURN",
        ),
        (
            r#"{"host": {"step": {"1.1": {"during": [{"at": 0, "waitIdle": {}}]}}}}"#,
            "host.step.1.1.during[0]: this action waits for the host call that would run it",
        ),
        (
            r#"{"host": {"step": {"1.1": {"during": [{"when": "turn 1 starts", "clear": {}}]}}}}"#,
            "host.step.1.1.during[0]: an action in `during` runs at `at` MS after the call \
             began: give its `at`",
        ),
        (
            r#"{"host": {"step": {"1.1": {"during": [{"at": 0, "record": {"type": "turn/end"}}]}}}}"#,
            "host.step.1.1.during[0]: `record`: `turn/end` is the machine's own record type, \
             not a host event",
        ),
        (
            r#"{"host": {"step": {"1.1": {"ms": 5, "during": [{"at": 9, "clear": {}}]}}}}"#,
            "host.step.1.1: an action at 9 ms after the answer",
        ),
        (
            r#"{"host": {"preStep": {"1.1": {"answer": "go"}}}}"#,
            "host.preStep.1.1: unknown answer `go`",
        ),
    ] {
        assert_eq!(parse_script(text).err().as_deref(), Some(error), "{text}");
    }
    let unknown_field = parse_script(r#"{"actions": [], "bogus": 1}"#).unwrap_err();
    assert!(
        unknown_field.starts_with("unknown field `bogus`, expected one of"),
        "{unknown_field}"
    );
}
