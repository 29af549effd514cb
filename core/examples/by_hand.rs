//! Driving the core by hand: deliver, drain outputs, answer requests.
use coxswain_core::{
    Machine, Message, Output, PreStepAnswer, Request, StepAnswer, TurnStoppingAnswer,
};

fn main() -> Result<(), coxswain_core::Rejected> {
    let mut machine = Machine::new();
    let context = Message::new(
        "ctx1",
        serde_json::json!({"kind": "plugin"}),
        "README.md".into(),
    );
    machine.inject(context)?; // queued quietly: opens no turn
    machine.followup(Message::user("m1", "What changed in the spec?"))?; // wakes the machine
    let mut batch = None;
    while let Some(output) = machine.poll_output() {
        match output {
            Output::Event(event) => println!("append {}", serde_json::to_string(&event).unwrap()),
            Output::Notify(note) => println!("notify {note:?}"),
            Output::Request(Request::PreStep { messages, .. }) => batch = Some(messages),
            Output::Request(other) => println!("request {other:?}"),
            Output::Disposed => return Ok(()),
        }
    }
    // The host's pre-step hooks keep the claimed batch: ctx1 (all of NS), then m1.
    machine.answer_pre_step(PreStepAnswer::Enter(batch.unwrap_or_default()))?;
    machine.answer_step(StepAnswer::Completed)?; // the model answered without tools
    machine.answer_turn_stopping(TurnStoppingAnswer::Done)?;
    let drained: Vec<Output> = std::iter::from_fn(|| machine.poll_output()).collect();
    println!(
        "{} more outputs; quiescent: {}",
        drained.len(),
        machine.is_quiescent()
    );
    Ok(())
}
