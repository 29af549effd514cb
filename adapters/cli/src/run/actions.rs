//! One delivery, edit, cancel or host event: a single call on the agent, and its lines.

use coxswain_core::ShownId;
use coxswain_tokio::{Agent, AgentError, StepContext};

use super::script::Action;
use super::timeline::{cause, describe_message, Timeline};

/// Performs `action` on `agent`; `who` prefixes its lines (`> ` for the runner, `  host > ` for
/// a host reply's `during`); `step` is the step a `record` lands in. The runner's own actions
/// (maintenance, waits, reopen, dispose) are the runner's business: here they are refused.
pub(crate) async fn perform(
    timeline: &Timeline,
    agent: &Agent,
    step: Option<&StepContext>,
    who: &str,
    action: &Action,
) {
    let (label, result): (String, Result<Option<&str>, String>) = match action {
        Action::Deliver { preset, message } => {
            let label = format!("{preset} {}", describe_message(message));
            timeline.say(format!("{who}{label}")).await;
            let result = agent
                .send(message.clone(), preset.target(), preset.wakeup())
                .await;
            (label, done(result))
        }
        Action::Send {
            message,
            target,
            wakeup,
        } => {
            let how = if *wakeup { "waking" } else { "quiet" };
            let label = format!("send {} to {target} ({how})", describe_message(message));
            timeline.say(format!("{who}{label}")).await;
            let result = agent.send(message.clone(), *target, *wakeup).await;
            (label, done(result))
        }
        Action::Remove(id) => {
            let label = format!("remove {}", ShownId::bare(id.as_str()));
            timeline.say(format!("{who}{label}")).await;
            let result = agent.remove(id.as_str()).await;
            (label, not_pending(result))
        }
        Action::Replace { id, message } => {
            let label = format!(
                "replace {} with {}",
                ShownId::bare(id.as_str()),
                describe_message(message)
            );
            timeline.say(format!("{who}{label}")).await;
            let result = agent.replace(id.as_str(), message.clone()).await;
            (label, not_pending(result))
        }
        Action::Prepend { target, message } => {
            let label = format!("prepend {} to {target}", describe_message(message));
            timeline.say(format!("{who}{label}")).await;
            let result = agent.prepend(*target, message.clone()).await;
            (label, done(result))
        }
        Action::Clear => {
            timeline.say(format!("{who}clear")).await;
            ("clear".into(), done(agent.clear().await))
        }
        Action::Cancel {
            cause: c,
            keep_inbox,
        } => {
            let keep = if *keep_inbox { ", keep inbox" } else { "" };
            let label = format!("cancel ({}){keep}", cause(c));
            timeline.say(format!("{who}{label}")).await;
            let result = agent.cancel(c.clone(), *keep_inbox).await;
            (label, done(result))
        }
        Action::Record { kind, data } => {
            let label = format!("record {kind}");
            let result = match step {
                Some(cx) => cx.record(kind.clone(), data.clone()).await,
                None => Err(AgentError::StepClosed),
            };
            (label, done(result))
        }
        Action::Maintenance { .. } | Action::WaitIdle | Action::Reopen | Action::Dispose => {
            ("(runner action)".into(), Err("not allowed here".into()))
        }
    };
    match result {
        Ok(None) => {}
        Ok(Some(note)) => timeline.say(format!("{who}{label}: {note}")).await,
        Err(error) => {
            timeline.stats().rejected += 1;
            timeline.say(refusal(who, &label, &error)).await;
        }
    }
}

/// A delivery refused as already delivered (S52) or still pending (S13) is a retry that is done:
/// not a rejection.
fn done(result: Result<(), AgentError>) -> Result<Option<&'static str>, String> {
    match result {
        Ok(()) => Ok(None),
        Err(AgentError::AlreadyDelivered(_)) => Ok(Some(
            "already delivered (S52): the retry is done, nothing runs twice",
        )),
        Err(error) if error.was_delivered() => Ok(Some(
            "still pending (S13): the retry is done, nothing runs twice",
        )),
        Err(error) => Err(error.to_string()),
    }
}

fn not_pending(result: Result<bool, AgentError>) -> Result<Option<&'static str>, String> {
    match result {
        Ok(true) => Ok(None),
        Ok(false) => Ok(Some("not pending, nothing to do")),
        Err(error) => Err(error.to_string()),
    }
}

/// The line of a refused action: `rejected:` once, whether or not the agent's error says it.
pub(crate) fn refusal(who: &str, label: &str, error: &str) -> String {
    let error = error.strip_prefix("rejected: ").unwrap_or(error);
    format!("{who}{label}: rejected: {error}")
}
