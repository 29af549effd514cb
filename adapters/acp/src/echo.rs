//! The deterministic demo host (`coxswain-acp --echo`), scripted by each prompt's text: see
//! `docs/acp.md` ("The demo host"). Helper H2 writes it.
//!
//! # What it does
//!
//! Hooks: `pre_step` and `step` (no `turn_stopping`: the session answers it, S33).
//!
//! * **The pre-step** (S29) keeps the batch it enters for the step (a [`StepContext`] has no
//!   messages) and obeys the driving message's pre-step command: `/sleep-pre N` holds it N ms
//!   before entering the claimed batch (claimed, not inserted meanwhile; a cancel answers at
//!   once), `/refuse` rejects the batch (the turn ends `blocked`). Otherwise it enters the
//!   claimed batch as it is.
//! * **The step** (S32) first obeys `/sleep N` (N ms; a cancel answers at once, writing
//!   nothing), then streams one [`AcpUpdate::AgentText`] per entered message that has text
//!   (message id `a-<turn>-<step>`, the text = the message's `text` blocks joined by `\n`; a
//!   bare string content is its text), then ends: `/max-tokens` → `max-tokens`, `/fail` →
//!   `Fail({message: "echo: /fail", code: "echo-fail"})`, `/tools K` → tool calls (below),
//!   anything else → `completed`.
//! * **`/tools K`**: each step of the turn, while fewer than K tool calls ran, runs the next one,
//!   `k` = 1..=K: records [`AcpUpdate::ToolCall`] (`t-<turn>-<k>`, title `echo <k>`) and
//!   [`AcpUpdate::ToolCallCompleted`] (output `echo <k>`), injects the result as the message
//!   `{id: "t-<turn>-<k>-result", source: {kind: "tool"}, content: [{type: "text", text:
//!   "echo <k>"}]}` (S31) and answers `continue`; the step after the K-th completes (it echoes
//!   the K-th result, entered with it). `/tools 0` completes at once; K is at most
//!   [`MAX_TOOLS`] (1000). A cancel stops the calls, and a `/max-tokens` or `/fail` entered
//!   in a later step of the run (a steer) ends the turn that way.
//!
//! **The driving message** of a step is the first entered message whose first `text` block
//! starts with `/`; its first word is the command, the second its number. An unknown command,
//! or a number that is missing or not a `u64`, drives nothing (the step echoes and completes).
//! Deterministic: no clock but the sleeps, no randomness.

use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use coxswain_tokio::coxswain_core::{Batch, ErrorInfo, Message, PreStepAnswer, StepAnswer};
use coxswain_tokio::{Hooks, Host, PreStepContext, StepContext};
use serde_json::{json, Value};

use crate::updates::{record, AcpUpdate, TOOL_SOURCE};

/// The echo host: one per session.
#[derive(Debug, Default)]
pub struct EchoHost {
    /// The batch the last pre-step entered, for its step: `(turn, step, batch)`. At most one
    /// call runs at a time (S4), so one slot is enough.
    entered: Mutex<Option<(u64, u64, Batch)>>,
    /// The turn's `/tools K` run: `(turn, K, calls done)`.
    tools: Mutex<Option<ToolRun>>,
}

/// A `/tools K` run in a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ToolRun {
    turn: u64,
    total: u64,
    done: u64,
}

/// A command a prompt's text starts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Command {
    /// `/sleep N`: the step runs N ms.
    Sleep(u64),
    /// `/sleep-pre N`: the pre-step holds N ms.
    SleepPre(u64),
    /// `/tools K`: K echo tool calls.
    Tools(u64),
    /// `/max-tokens`.
    MaxTokens,
    /// `/fail`.
    Fail,
    /// `/refuse`.
    Refuse,
}

/// The most tool calls `/tools K` runs: a larger `K` drives nothing (each result is a message
/// the session's unbounded delivery memory keeps, S58).
pub const MAX_TOOLS: u64 = 1000;

/// The `code` of the `/fail` error.
pub const FAIL_CODE: &str = "echo-fail";
/// The `message` of the `/fail` error.
pub const FAIL_MESSAGE: &str = "echo: /fail";

impl EchoHost {
    /// A new echo host (no state carried from any other session).
    pub fn new() -> Self {
        EchoHost::default()
    }

    fn keep_entered(&self, turn: u64, step: u64, batch: Batch) {
        *self.entered.lock().unwrap_or_else(PoisonError::into_inner) = Some((turn, step, batch));
    }

    /// The batch the pre-step of `(turn, step)` entered (empty if none: nothing is echoed).
    fn take_entered(&self, turn: u64, step: u64) -> Batch {
        let mut slot = self.entered.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.take() {
            Some((t, s, batch)) if (t, s) == (turn, step) => batch,
            _ => Batch::new(),
        }
    }

    /// Answers `answer`, ending any `/tools` run.
    fn ended(&self, answer: StepAnswer) -> StepAnswer {
        *self.tools.lock().unwrap_or_else(PoisonError::into_inner) = None;
        answer
    }

    /// The next tool call `k` of turn `turn`, if a `/tools` run there has calls left; counts it.
    fn next_tool(&self, turn: u64, started: Option<u64>) -> Option<u64> {
        let mut tools = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(total) = started {
            *tools = Some(ToolRun {
                turn,
                total,
                done: 0,
            });
        }
        match tools.as_mut() {
            Some(run) if run.turn == turn && run.done < run.total => {
                run.done += 1;
                Some(run.done)
            }
            _ => {
                *tools = None;
                None
            }
        }
    }
}

impl Host for EchoHost {
    fn hooks(&self) -> Hooks {
        Hooks {
            pre_step: true,
            turn_stopping: false,
        }
    }

    async fn pre_step(&self, cx: PreStepContext) -> PreStepAnswer {
        match driving_command(cx.messages.iter().map(|m| &**m)) {
            Some(Command::Refuse) => return PreStepAnswer::Reject,
            // A cancel answers at once: the turn ends `aborted`, nothing is entered.
            Some(Command::SleepPre(ms)) if !sleep_unless(cx.cancel.cancelled(), ms).await => {
                return PreStepAnswer::Reject;
            }
            _ => {}
        }
        self.keep_entered(cx.turn, cx.step, cx.messages.clone());
        PreStepAnswer::Enter(cx.messages)
    }

    async fn step(&self, cx: StepContext) -> StepAnswer {
        let entered = self.take_entered(cx.turn, cx.step);
        let command = driving_command(entered.iter().map(|m| &**m));
        if let Some(Command::Sleep(ms)) = command {
            if !sleep_unless(cx.cancel.cancelled(), ms).await {
                return StepAnswer::Completed; // the turn ends `aborted` all the same (S40)
            }
        }
        let message_id = format!("a-{}-{}", cx.turn, cx.step);
        for message in entered.iter() {
            if let Some(text) = text_of(message) {
                let update = AcpUpdate::AgentText {
                    message_id: message_id.clone(),
                    text,
                };
                if let Err(error) = record(&cx, &update).await {
                    return record_failed(&error);
                }
            }
        }
        // A step's own ending wins over a `/tools` run (a steered `/fail` ends the turn).
        let started = match command {
            Some(Command::MaxTokens) => return self.ended(StepAnswer::MaxTokens),
            Some(Command::Fail) => {
                let error = ErrorInfo::new(FAIL_MESSAGE, FAIL_CODE);
                return self.ended(StepAnswer::Fail(error));
            }
            Some(Command::Tools(total)) => Some(total),
            _ => None,
        };
        if cx.cancel.is_cancelled() {
            return self.ended(StepAnswer::Completed);
        }
        match self.next_tool(cx.turn, started) {
            Some(k) => tool_call(&cx, k).await,
            None => StepAnswer::Completed,
        }
    }
}

/// Tool call `k` of the step's turn: recorded, its result injected, `continue`.
async fn tool_call(cx: &StepContext, k: u64) -> StepAnswer {
    let id = format!("t-{}-{k}", cx.turn);
    let output = format!("echo {k}");
    let started = AcpUpdate::ToolCall {
        tool_call_id: id.clone(),
        title: output.clone(),
    };
    let completed = AcpUpdate::ToolCallCompleted {
        tool_call_id: id.clone(),
        output: output.clone(),
    };
    for update in [started, completed] {
        if let Err(error) = record(cx, &update).await {
            return record_failed(&error);
        }
    }
    let result = Message::new(
        format!("{id}-result"),
        json!({ "kind": TOOL_SOURCE }),
        json!([{ "type": "text", "text": output }]),
    );
    match cx.agent.inject(result).await {
        Ok(()) => StepAnswer::Continue,
        Err(error) => StepAnswer::Fail(ErrorInfo::new(
            format!("echo: the tool result was not injected: {error}"),
            "echo-inject",
        )),
    }
}

fn record_failed(error: &coxswain_tokio::AgentError) -> StepAnswer {
    StepAnswer::Fail(ErrorInfo::new(
        format!("echo: an update was not recorded: {error}"),
        "echo-record",
    ))
}

/// Sleeps `ms` ms unless `cancelled` (the turn's token) resolves first: `false` then, at once.
async fn sleep_unless(cancelled: impl Future<Output = ()>, ms: u64) -> bool {
    tokio::select! {
        biased;
        () = cancelled => false,
        () = tokio::time::sleep(Duration::from_millis(ms)) => true,
    }
}

/// The command of the first message whose first `text` block starts with `/`.
fn driving_command<'a>(messages: impl Iterator<Item = &'a Message>) -> Option<Command> {
    let text = messages
        .filter_map(first_text)
        .find(|text| text.starts_with('/'))?;
    parse_command(text)
}

fn parse_command(text: &str) -> Option<Command> {
    let mut words = text.split_whitespace();
    let name = words.next()?;
    let number = || words.clone().next()?.parse::<u64>().ok();
    match name {
        "/sleep" => number().map(Command::Sleep),
        "/sleep-pre" => number().map(Command::SleepPre),
        "/tools" => number().filter(|&k| k <= MAX_TOOLS).map(Command::Tools),
        "/max-tokens" => Some(Command::MaxTokens),
        "/fail" => Some(Command::Fail),
        "/refuse" => Some(Command::Refuse),
        _ => None,
    }
}

/// The text blocks of a message's content (a bare string content is one).
fn text_blocks(message: &Message) -> Vec<&str> {
    match message.content() {
        Some(Value::String(text)) => vec![text.as_str()],
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect(),
        _ => Vec::new(),
    }
}

/// The message's first text block.
fn first_text(message: &Message) -> Option<&str> {
    text_blocks(message).into_iter().next()
}

/// The message's text blocks joined by `\n`; `None` when it has none.
fn text_of(message: &Message) -> Option<String> {
    let blocks = text_blocks(message);
    (!blocks.is_empty()).then(|| blocks.join("\n"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use std::time::Instant;

    use coxswain_tokio::coxswain_core::CancelCause;
    use coxswain_tokio::{Agent, MemoryLog};

    use super::*;

    fn prompt(id: &str, text: &str) -> Message {
        Message::new(
            id,
            json!({"kind": "user"}),
            json!([{"type": "text", "text": text}]),
        )
    }

    /// The log as `seq type data` lines.
    fn lines(log: &MemoryLog) -> Vec<String> {
        log.records()
            .unwrap()
            .iter()
            .map(|r| {
                format!(
                    "{} {} {}",
                    r.event["seq"],
                    r.event["type"].as_str().unwrap(),
                    r.event["data"]
                )
            })
            .collect()
    }

    async fn open() -> (Agent, MemoryLog) {
        let log = MemoryLog::new();
        let (agent, _) = Agent::open(EchoHost::new(), log.clone()).await.unwrap();
        (agent, log)
    }

    /// Waits (at most 10 s) until the log holds `n` records of type `kind`.
    async fn wait_for(log: &MemoryLog, kind: &str, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let count = log
                .records()
                .unwrap()
                .iter()
                .filter(|r| r.event["type"] == kind)
                .count();
            if count >= n {
                return;
            }
            assert!(Instant::now() < deadline, "no {kind} in {:#?}", lines(log));
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Sends `message` as a follow-up, waits for quiescence, closes: the log's lines.
    async fn run(message: Message) -> Vec<String> {
        let (agent, log) = open().await;
        agent.followup(message).await.unwrap();
        agent.when_idle().await.unwrap();
        agent.close().await.unwrap();
        lines(&log)
    }

    /// The lines of a one-step turn 1 of prompt `p1` = `text`, up to its step's start.
    fn entered(text: &str) -> Vec<String> {
        let message = json!({"id": "p1", "source": {"kind": "user"}, "content": [{"type": "text", "text": text}]});
        vec![
            format!(r#"1 agent/inbox/spliced {{"target":"next-turn","start":0,"inserted":[{message}],"wakeup":true}}"#),
            r#"2 turn/start {"turn":1}"#.into(),
            r#"3 agent/inbox/spliced {"target":"next-turn","start":0,"removedCount":1,"inserted":[]}"#.into(),
            r#"4 step/start {"turn":1,"step":1}"#.into(),
            format!("5 user/message {message}"),
        ]
    }

    fn echoed(seq: u64, id: &str, text: &str) -> String {
        format!(
            "{seq} acp/update {}",
            json!({"kind": "agent_text", "messageId": id, "text": text})
        )
    }

    #[tokio::test]
    async fn s32_a_step_echoes_each_entered_message_then_completes() {
        let (agent, log) = open().await;
        // Context rides along (S20); the follow-up wakes: both entered in step 1.
        agent
            .inject(Message::new(
                "c1",
                json!({"kind": "plugin"}),
                json!("context"),
            ))
            .await
            .unwrap();
        let two = Message::new(
            "p1",
            json!({"kind": "user"}),
            json!([
                {"type": "text", "text": "hello"},
                {"type": "resource_link", "uri": "file:///a", "name": "a"},
                {"type": "text", "text": "world"}
            ]),
        );
        agent.followup(two).await.unwrap();
        // A message with no text block is entered but not echoed.
        agent.when_idle().await.unwrap();
        agent.close().await.unwrap();
        assert_eq!(
            lines(&log),
            [
                r#"1 agent/inbox/spliced {"target":"next-step","start":0,"inserted":[{"id":"c1","source":{"kind":"plugin"},"content":"context"}]}"#,
                r#"2 agent/inbox/spliced {"target":"next-turn","start":0,"inserted":[{"id":"p1","source":{"kind":"user"},"content":[{"type":"text","text":"hello"},{"type":"resource_link","uri":"file:///a","name":"a"},{"type":"text","text":"world"}]}],"wakeup":true}"#,
                r#"3 turn/start {"turn":1}"#,
                r#"4 agent/inbox/spliced {"target":"next-step","start":0,"removedCount":1,"inserted":[]}"#,
                r#"5 agent/inbox/spliced {"target":"next-turn","start":0,"removedCount":1,"inserted":[]}"#,
                r#"6 step/start {"turn":1,"step":1}"#,
                r#"7 user/message {"id":"c1","source":{"kind":"plugin"},"content":"context"}"#,
                r#"8 user/message {"id":"p1","source":{"kind":"user"},"content":[{"type":"text","text":"hello"},{"type":"resource_link","uri":"file:///a","name":"a"},{"type":"text","text":"world"}]}"#,
                &echoed(9, "a-1-1", "context"),
                &echoed(10, "a-1-1", "hello\nworld"),
                r#"11 step/end {"turn":1,"step":1}"#,
                r#"12 turn/end {"turn":1,"reason":{"kind":"completed"}}"#,
            ]
        );
    }

    #[tokio::test]
    async fn the_first_slash_message_drives_and_an_unknown_command_drives_nothing() {
        let (agent, log) = open().await;
        agent.inject(prompt("c1", "plain")).await.unwrap();
        agent.followup(prompt("p1", "/max-tokens")).await.unwrap();
        agent.when_idle().await.unwrap();
        let end = lines(&log).pop().unwrap();
        assert_eq!(
            end,
            r#"12 turn/end {"turn":1,"reason":{"kind":"max-tokens"}}"#
        );
        agent.inject(prompt("c2", "/nope")).await.unwrap();
        agent.followup(prompt("p2", "/fail")).await.unwrap();
        agent.when_idle().await.unwrap();
        agent.close().await.unwrap();
        let all = lines(&log);
        assert_eq!(
            all[all.len() - 4..],
            [
                echoed(21, "a-2-1", "/nope"),
                echoed(22, "a-2-1", "/fail"),
                r#"23 step/end {"turn":2,"step":1}"#.into(),
                r#"24 turn/end {"turn":2,"reason":{"kind":"completed"}}"#.to_string(),
            ]
        );
        // A bad number drives nothing either.
        let mut expected = entered("/sleep soon");
        expected.extend([
            echoed(6, "a-1-1", "/sleep soon"),
            r#"7 step/end {"turn":1,"step":1}"#.into(),
            r#"8 turn/end {"turn":1,"reason":{"kind":"completed"}}"#.into(),
        ]);
        assert_eq!(run(prompt("p1", "/sleep soon")).await, expected);
    }

    #[tokio::test]
    async fn max_tokens_fail_and_refuse_end_the_turn_that_way() {
        let mut expected = entered("/max-tokens");
        expected.extend([
            echoed(6, "a-1-1", "/max-tokens"),
            r#"7 step/end {"turn":1,"step":1}"#.into(),
            r#"8 turn/end {"turn":1,"reason":{"kind":"max-tokens"}}"#.into(),
        ]);
        assert_eq!(run(prompt("p1", "/max-tokens")).await, expected);

        let mut expected = entered("/fail");
        expected.extend([
            echoed(6, "a-1-1", "/fail"),
            r#"7 step/end {"turn":1,"step":1}"#.into(),
            r#"8 turn/end {"turn":1,"reason":{"kind":"error","error":{"message":"echo: /fail","code":"echo-fail"}}}"#.into(),
        ]);
        assert_eq!(run(prompt("p1", "/fail")).await, expected);

        // The pre-step refuses: the prompt is claimed, never entered.
        let mut expected = entered("/refuse");
        expected.truncate(3);
        expected.push(r#"4 turn/end {"turn":1,"reason":{"kind":"blocked"}}"#.into());
        assert_eq!(run(prompt("p1", "/refuse")).await, expected);
    }

    #[tokio::test]
    async fn tools_k_runs_k_echo_tool_calls_one_step_each_then_completes() {
        let lines = run(prompt("p1", "/tools 2")).await;
        let mut expected = entered("/tools 2");
        let result = |k: u64| json!({"id": format!("t-1-{k}-result"), "source": {"kind": "tool"}, "content": [{"type": "text", "text": format!("echo {k}")}]});
        expected.extend([
            echoed(6, "a-1-1", "/tools 2"),
            r#"7 acp/update {"kind":"tool_call","toolCallId":"t-1-1","title":"echo 1"}"#.into(),
            r#"8 acp/update {"kind":"tool_call_completed","toolCallId":"t-1-1","output":"echo 1"}"#.into(),
            format!(r#"9 agent/inbox/spliced {{"target":"next-step","start":0,"inserted":[{}]}}"#, result(1)),
            r#"10 step/end {"turn":1,"step":1}"#.into(),
            r#"11 agent/inbox/spliced {"target":"next-step","start":0,"removedCount":1,"inserted":[]}"#.into(),
            r#"12 step/start {"turn":1,"step":2}"#.into(),
            format!("13 user/message {}", result(1)),
            echoed(14, "a-1-2", "echo 1"),
            r#"15 acp/update {"kind":"tool_call","toolCallId":"t-1-2","title":"echo 2"}"#.into(),
            r#"16 acp/update {"kind":"tool_call_completed","toolCallId":"t-1-2","output":"echo 2"}"#.into(),
            format!(r#"17 agent/inbox/spliced {{"target":"next-step","start":0,"inserted":[{}]}}"#, result(2)),
            r#"18 step/end {"turn":1,"step":2}"#.into(),
            r#"19 agent/inbox/spliced {"target":"next-step","start":0,"removedCount":1,"inserted":[]}"#.into(),
            r#"20 step/start {"turn":1,"step":3}"#.into(),
            format!("21 user/message {}", result(2)),
            echoed(22, "a-1-3", "echo 2"),
            r#"23 step/end {"turn":1,"step":3}"#.into(),
            r#"24 turn/end {"turn":1,"reason":{"kind":"completed"}}"#.into(),
        ]);
        assert_eq!(lines, expected);
        // `/tools 0` completes at once.
        let mut expected = entered("/tools 0");
        expected.extend([
            echoed(6, "a-1-1", "/tools 0"),
            r#"7 step/end {"turn":1,"step":1}"#.into(),
            r#"8 turn/end {"turn":1,"reason":{"kind":"completed"}}"#.into(),
        ]);
        assert_eq!(run(prompt("p1", "/tools 0")).await, expected);
    }

    #[tokio::test]
    async fn a_steered_fail_ends_a_tools_run() {
        let (agent, log) = open().await;
        agent.followup(prompt("p1", "/tools 50")).await.unwrap();
        agent.steer(prompt("s1", "/fail")).await.unwrap();
        agent.when_idle().await.unwrap();
        agent.close().await.unwrap();
        let all = lines(&log);
        let calls = all
            .iter()
            .filter(|line| line.contains("tool_call_completed"))
            .count();
        assert!((1..50).contains(&calls), "{calls} calls: {all:#?}");
        let end = all.last().unwrap();
        assert!(
            end.ends_with(r#"turn/end {"turn":1,"reason":{"kind":"error","error":{"message":"echo: /fail","code":"echo-fail"}}}"#),
            "{end}"
        );
    }

    #[tokio::test]
    async fn sleep_n_holds_the_step_then_echoes_and_a_cancel_ends_it_at_once() {
        let started = Instant::now();
        let mut expected = entered("/sleep 30");
        expected.extend([
            echoed(6, "a-1-1", "/sleep 30"),
            r#"7 step/end {"turn":1,"step":1}"#.into(),
            r#"8 turn/end {"turn":1,"reason":{"kind":"completed"}}"#.into(),
        ]);
        assert_eq!(run(prompt("p1", "/sleep 30")).await, expected);
        assert!(started.elapsed() >= Duration::from_millis(30));

        let (agent, log) = open().await;
        agent.followup(prompt("p1", "/sleep 600000")).await.unwrap();
        wait_for(&log, "user/message", 1).await;
        let cancelled = Instant::now();
        agent.cancel(CancelCause::User, false).await.unwrap();
        agent.when_idle().await.unwrap();
        assert!(cancelled.elapsed() < Duration::from_secs(2));
        agent.close().await.unwrap();
        let mut expected = entered("/sleep 600000");
        expected.extend([
            r#"6 step/end {"turn":1,"step":1}"#.into(),
            r#"7 turn/end {"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}}}"#.into(),
        ]);
        assert_eq!(lines(&log), expected);
    }

    #[tokio::test]
    async fn sleep_pre_n_holds_the_claimed_prompt_uninserted_and_a_cancel_ends_it_at_once() {
        let (agent, log) = open().await;
        agent
            .followup(prompt("p1", "/sleep-pre 300"))
            .await
            .unwrap();
        wait_for(&log, "turn/start", 1).await;
        // Claimed, not inserted, while the pre-step holds.
        let mut claimed = entered("/sleep-pre 300");
        claimed.truncate(3);
        assert_eq!(lines(&log), claimed);
        agent.when_idle().await.unwrap();
        agent.close().await.unwrap();
        let mut expected = entered("/sleep-pre 300");
        expected.extend([
            echoed(6, "a-1-1", "/sleep-pre 300"),
            r#"7 step/end {"turn":1,"step":1}"#.into(),
            r#"8 turn/end {"turn":1,"reason":{"kind":"completed"}}"#.into(),
        ]);
        assert_eq!(lines(&log), expected);

        let (agent, log) = open().await;
        agent
            .followup(prompt("p1", "/sleep-pre 600000"))
            .await
            .unwrap();
        wait_for(&log, "turn/start", 1).await;
        let cancelled = Instant::now();
        agent.cancel(CancelCause::User, false).await.unwrap();
        agent.when_idle().await.unwrap();
        assert!(cancelled.elapsed() < Duration::from_secs(2));
        agent.close().await.unwrap();
        let mut expected = entered("/sleep-pre 600000");
        expected.truncate(3);
        expected.push(
            r#"4 turn/end {"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}}}"#.into(),
        );
        assert_eq!(lines(&log), expected);
    }

    #[test]
    fn commands_parse_from_the_first_word_and_its_number() {
        assert_eq!(parse_command("/sleep 5"), Some(Command::Sleep(5)));
        assert_eq!(parse_command("/sleep  7 more"), Some(Command::Sleep(7)));
        assert_eq!(parse_command("/sleep-pre 9"), Some(Command::SleepPre(9)));
        assert_eq!(parse_command("/tools 3"), Some(Command::Tools(3)));
        assert_eq!(
            parse_command("/max-tokens please"),
            Some(Command::MaxTokens)
        );
        assert_eq!(parse_command("/fail"), Some(Command::Fail));
        assert_eq!(parse_command("/refuse"), Some(Command::Refuse));
        assert_eq!(parse_command("/tools 1000"), Some(Command::Tools(1000)));
        for nothing in [
            "/tools 1001",
            "/sleep",
            "/sleep -1",
            "/sleep 1.5",
            "/tools x",
            "/sleepy 3",
            "/",
            "/FAIL",
        ] {
            assert_eq!(parse_command(nothing), None, "{nothing}");
        }
    }
}
