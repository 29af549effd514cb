//! Driving the core by hand: deliver, persist the events, then carry out the effects.
use coxswain_core::{Effect, Machine, Message, PreStepAnswer, Request, Transition};
use coxswain_core::{Rejected, StepAnswer, TurnStoppingAnswer};
use serde_json::json;

/// Persists a transition's events, then carries out its effects; returns a claimed batch.
fn settle(transition: Transition<'_>) -> Option<coxswain_core::Batch> {
    for event in transition.events() {
        println!("append  {}", json!(event)); // durable: into the log, one batch per input
    }
    let mut batch = None;
    for effect in transition.persisted() {
        match effect {
            Effect::Notify(note) => println!("notify  {note:?}"), // live: publish it
            Effect::Begin(activity) => println!("begin   {activity:?}"), // a cancellation scope
            Effect::Request(Request::PreStep { messages, .. }) => batch = Some(messages),
            Effect::Request(work) => println!("request {work:?}"), // start it, answer later
            Effect::Abort(abort) => println!("abort   {abort:?}"), // trip the scope
            Effect::Disposed => println!("disposed"),
        }
    }
    batch
}

fn main() -> Result<(), Rejected> {
    let mut machine = Machine::new();
    let context = Message::new("c1", json!({"kind": "plugin"}), json!("notes"));
    settle(machine.inject(context)?); // quiet: opens no turn
    let batch = settle(machine.followup(Message::user("m1", "What changed in the spec?"))?);
    // The host's pre-step hooks keep the claimed batch: c1 (all of NS), then m1.
    settle(machine.answer_pre_step(PreStepAnswer::Enter(batch.unwrap_or_default()))?);
    settle(machine.answer_step(StepAnswer::Completed)?); // the model answered without tools
    settle(machine.answer_turn_stopping(TurnStoppingAnswer::Done)?); // turn/end, status idle
    println!("quiescent: {}", machine.is_quiescent());
    Ok(())
}
