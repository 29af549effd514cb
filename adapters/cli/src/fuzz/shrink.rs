//! The deterministic shrinker of `coxswain fuzz`: drops inputs (halves, then quarters, … then
//! one at a time), drops sends' expected-turn guards (S54) and simplifies messages (a user
//! source, the content `"hello"`) while the trace the core records for the candidate still fails
//! on the port, until no step helps.

use coxswain_conformance::input_json;
use coxswain_core::Input;
use serde_json::{json, Value};

/// Shrinks `inputs`, which `fails`, to a smaller list that still `fails`; returns it and how
/// many candidates were tried.
pub(crate) fn shrink(
    mut inputs: Vec<Input>,
    mut fails: impl FnMut(&[Input]) -> bool,
) -> (Vec<Input>, usize) {
    let mut tries = 0;
    loop {
        let before = inputs.clone();
        // Drop chunks, largest first.
        let mut size = inputs.len().div_ceil(2);
        while size > 0 {
            let mut start = 0;
            while start < inputs.len() {
                let end = (start + size).min(inputs.len());
                let mut candidate = inputs.clone();
                candidate.drain(start..end);
                tries += 1;
                if !candidate.is_empty() && fails(&candidate) {
                    inputs = candidate;
                } else {
                    start += size;
                }
            }
            size /= 2;
        }
        // Drop each send's guard, then simplify each input's messages.
        for simpler_of in [unguard, simplify] {
            for index in 0..inputs.len() {
                let Some(simpler) = simpler_of(&inputs[index]) else {
                    continue;
                };
                let mut candidate = inputs.clone();
                candidate[index] = simpler;
                tries += 1;
                if fails(&candidate) {
                    inputs = candidate;
                }
            }
        }
        if inputs == before {
            return (inputs, tries);
        }
    }
}

/// A guarded send without its guard (S54), spelled as its preset when it is one, or `None` for
/// any other input.
pub(crate) fn unguard(input: &Input) -> Option<Input> {
    match input {
        Input::Send {
            message,
            target,
            wakeup,
            expect: Some(_),
        } => Some(Input::delivery(message.clone(), *target, *wakeup)),
        _ => None,
    }
}

/// The input with every message made plain (`{"kind":"user"}`, `"hello"`), or `None` when it
/// already is (or has no message).
pub(crate) fn simplify(input: &Input) -> Option<Input> {
    let original = input_json(input);
    let mut value = original.clone();
    plain(&mut value);
    if value == original {
        return None;
    }
    serde_json::from_value(value).ok()
}

fn plain(value: &mut Value) {
    match value {
        Value::Object(object) => {
            if object.contains_key("id")
                && object.contains_key("source")
                && object.contains_key("content")
            {
                object.insert("source".into(), json!({"kind": "user"}));
                object.insert("content".into(), json!("hello"));
            } else {
                object.values_mut().for_each(plain);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(plain),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_conformance::generate::message;
    use coxswain_core::Target;

    #[test]
    fn a_failure_needing_two_inputs_shrinks_to_them() {
        let inputs: Vec<Input> = (0..20)
            .map(|i| Input::delivery(message(i % 4, 1), Target::NextTurn, i % 2 == 0))
            .collect();
        let (a, b) = (inputs[2].clone(), inputs[5].clone());
        let plain = |input: &Input| simplify(input).unwrap_or_else(|| input.clone());
        let (plain_a, plain_b) = (plain(&a), plain(&b));
        // Fails while both messages' ids are sent in this order (any shape).
        let ids = |input: &Input| input_json(input).to_string();
        let id_of = |input: &Input| ids(&plain(input));
        let (want_a, want_b) = (id_of(&a), id_of(&b));
        let (shrunk, tries) = shrink(inputs, |candidate| {
            let found: Vec<String> = candidate.iter().map(id_of).collect();
            let first = found.iter().position(|f| *f == want_a);
            first.is_some_and(|i| found[i + 1..].contains(&want_b))
        });
        assert_eq!(shrunk, vec![plain_a, plain_b]);
        assert!(tries > 0);
    }

    #[test]
    fn s54_a_guard_the_failure_does_not_need_is_dropped() {
        let guarded = |turn| Input::Send {
            message: message(1, 0),
            target: Target::NextStep,
            wakeup: true,
            expect: Some(coxswain_core::Expect::Turn(turn)),
        };
        let unguarded = Input::Steer(message(1, 0));
        assert_eq!(unguard(&guarded(3)), Some(unguarded.clone()));
        assert_eq!(unguard(&unguarded), None);
        let quiet = Input::Send {
            message: message(1, 0),
            target: Target::NextTurn,
            wakeup: false,
            expect: Some(coxswain_core::Expect::IdleAfter(0)),
        };
        assert_eq!(
            unguard(&quiet),
            Some(Input::Send {
                message: message(1, 0),
                target: Target::NextTurn,
                wakeup: false,
                expect: None,
            })
        );
        assert_eq!(unguard(&Input::Clear {}), None);
        // Fails whenever m1 is sent: the guard goes. Fails only with a guard: it stays.
        let (shrunk, _) = shrink(vec![Input::Clear {}, guarded(3)], |c| {
            c.iter()
                .any(|i| matches!(i, Input::Send { .. } | Input::Steer(_)))
        });
        assert_eq!(shrunk, vec![unguarded]);
        let (shrunk, _) = shrink(vec![Input::Clear {}, guarded(3)], |c| {
            c.iter().any(|i| {
                matches!(
                    i,
                    Input::Send {
                        expect: Some(_),
                        ..
                    }
                )
            })
        });
        assert_eq!(shrunk, vec![guarded(3)]);
    }

    #[test]
    fn plain_messages_and_answers_are_left_alone() {
        let hello = Input::delivery(message(1, 0), Target::NextStep, true);
        assert_eq!(simplify(&hello), None);
        assert_eq!(simplify(&Input::Clear {}), None);
        let fancy = Input::delivery(message(1, 2), Target::NextStep, true);
        assert_eq!(simplify(&fancy), Some(hello));
    }
}
