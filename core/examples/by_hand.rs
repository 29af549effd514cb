//! Driving the core by hand: deliver, drain outputs, answer requests.
use coxswain_core::{Machine, Message, Output, PreStepAnswer, Request};
use coxswain_core::{Rejected, StepAnswer, TurnStoppingAnswer};
use serde_json::json;

fn main() -> Result<(), Rejected> {
    let mut machine = Machine::new();
    let context = Message::new("c1", json!({"kind": "plugin"}), json!("notes"));
    machine.inject(context)?; // quiet: opens no turn
    machine.followup(Message::user("m1", "What changed in the spec?"))?; // wakes: turn 1
    let mut batch = None;
    while let Some(output) = machine.poll_output() {
        match output {
            Output::Event(event) => println!("append {}", json!(event)), // durable: log it
            Output::Notify(note) => println!("notify {note:?}"),         // live: publish it
            Output::Request(Request::PreStep { messages, .. }) => batch = Some(messages),
            Output::Request(other) => println!("request {other:?}"),
            Output::Disposed => return Ok(()),
        }
    }
    // The host's pre-step hooks keep the claimed batch: c1 (all of NS), then m1.
    machine.answer_pre_step(PreStepAnswer::Enter(batch.unwrap_or_default()))?;
    machine.answer_step(StepAnswer::Completed)?; // the model answered without tools
    machine.answer_turn_stopping(TurnStoppingAnswer::Done)?;
    let rest = std::iter::from_fn(|| machine.poll_output()).count(); // turn/end, status idle…
    println!("{rest} more outputs, quiescent: {}", machine.is_quiescent());
    Ok(())
}
