//! What reaches the client as `session/update`s, in one neutral form ([`AcpUpdate`]) that the
//! server turns into v1 or v2 schema types. Every update comes from a durable record of the
//! session's log ([`updates_of`]), live and at replay alike: what a client saw is exactly what
//! `session/load` / `session/resume` replays. A host streams by recording `acp/update` host
//! events inside its step ([`record`], [`record_text`], …).
//!
//! INTERFACE OWNED BY THE LEAD: the enum and the function signatures below are fixed; helper H2
//! fills in the bodies (and may add private helpers and tests).
//!
//! # The mapping ([`updates_of`])
//!
//! | log record | update |
//! | --- | --- |
//! | `user/message` (S30) | [`AcpUpdate::UserMessage`]: the message's id and its `content` blocks (a bare string content is one `text` block); none for a message whose `source.kind` is `tool` (a tool's result, shown by its `tool_call_update`) |
//! | `turn/start` | [`AcpUpdate::TurnStarted`] |
//! | `turn/end` | [`AcpUpdate::TurnEnded`] with the reason's kind ([`TurnEnd`]; `error` carries the host's error JSON) |
//! | host event `acp/update` | the update its `data` encodes (below); none if the data is not one |
//! | anything else | none |
//!
//! # The `acp/update` host event's `data` ([`AcpUpdate::to_host_data`])
//!
//! One JSON object, its `kind` naming the update:
//!
//! | update | `data` |
//! | --- | --- |
//! | [`AcpUpdate::AgentText`] | `{"kind":"agent_text","messageId":…,"text":…}` |
//! | [`AcpUpdate::ToolCall`] | `{"kind":"tool_call","toolCallId":…,"title":…}` |
//! | [`AcpUpdate::ToolCallCompleted`] | `{"kind":"tool_call_completed","toolCallId":…,"output":…}` |
//!
//! Every field is a string. Reading ignores extra fields; a record whose `data` is not one of
//! these (an unknown `kind`, a field missing or not a string) stands for no update.

use coxswain_log::{Entry, ReservedType};
use coxswain_tokio::coxswain_core::{Event, TurnEndKind, TurnEndReason};
use coxswain_tokio::{AgentError, StepContext};
use serde_json::{json, Value};

/// The host event type a host records to stream an update (its `data` is
/// [`AcpUpdate::to_host_data`]).
pub const HOST_EVENT: &str = "acp/update";

/// `kind` of an [`AcpUpdate::AgentText`]'s host data.
const KIND_AGENT_TEXT: &str = "agent_text";
/// `kind` of an [`AcpUpdate::ToolCall`]'s host data.
const KIND_TOOL_CALL: &str = "tool_call";
/// `kind` of an [`AcpUpdate::ToolCallCompleted`]'s host data.
const KIND_TOOL_CALL_COMPLETED: &str = "tool_call_completed";
/// The `source.kind` of a tool's result message: entered, but not shown as a user message.
pub const TOOL_SOURCE: &str = "tool";

/// How a turn ended, as the log's `turn/end` reason says: the core's [`TurnEndKind`] (S58's
/// kinds, [`TurnEnd::end_kind`]), an `error` end carrying the host's error JSON, which the
/// kind alone does not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TurnEnd {
    /// `completed` (`end_turn`).
    Completed,
    /// `max-tokens` (`max_tokens`).
    MaxTokens,
    /// `blocked` (`refusal`).
    Blocked,
    /// `aborted` (`cancelled`).
    Aborted,
    /// `error` (`error`), with the host's error as the log holds it (`{message, code?, …}`).
    Error(Value),
    /// `interrupted` (crash repair closed it, S50).
    Interrupted,
}

/// One update for the client.
#[derive(Clone, Debug, PartialEq)]
pub enum AcpUpdate {
    /// A `user/message` event (S30): the message entered, with its id and its `content` (the
    /// prompt's content blocks as JSON, as the message holds them).
    UserMessage {
        /// The message id (= the v2 `messageId`).
        message_id: String,
        /// The content blocks.
        content: Vec<Value>,
    },
    /// Agent output text (`agent_message_chunk`).
    AgentText {
        /// The agent message's id.
        message_id: String,
        /// The text.
        text: String,
    },
    /// A tool call started (`tool_call`, status `in_progress`).
    ToolCall {
        /// Its id.
        tool_call_id: String,
        /// Its title.
        title: String,
    },
    /// A tool call completed (`tool_call_update`, status `completed`, its output as text).
    ToolCallCompleted {
        /// Its id.
        tool_call_id: String,
        /// Its output.
        output: String,
    },
    /// `turn/start` (v2: a `running` state update).
    TurnStarted {
        /// The turn.
        turn: u64,
    },
    /// `turn/end` (v2: an `idle` state update with the stop reason; v1: the prompt's answer).
    TurnEnded {
        /// The turn.
        turn: u64,
        /// How it ended.
        end: TurnEnd,
    },
}

impl AcpUpdate {
    /// The `data` of the `acp/update` host event that carries this update (only the host's own
    /// kinds: `AgentText`, `ToolCall`, `ToolCallCompleted`; `None` for the others, which come
    /// from the machine's events).
    pub fn to_host_data(&self) -> Option<Value> {
        match self {
            AcpUpdate::AgentText { message_id, text } => Some(json!({
                "kind": KIND_AGENT_TEXT,
                "messageId": message_id,
                "text": text,
            })),
            AcpUpdate::ToolCall {
                tool_call_id,
                title,
            } => Some(json!({
                "kind": KIND_TOOL_CALL,
                "toolCallId": tool_call_id,
                "title": title,
            })),
            AcpUpdate::ToolCallCompleted {
                tool_call_id,
                output,
            } => Some(json!({
                "kind": KIND_TOOL_CALL_COMPLETED,
                "toolCallId": tool_call_id,
                "output": output,
            })),
            AcpUpdate::UserMessage { .. }
            | AcpUpdate::TurnStarted { .. }
            | AcpUpdate::TurnEnded { .. } => None,
        }
    }

    /// The update an `acp/update` host event's `data` encodes ([`to_host_data`]'s inverse):
    /// `None` for anything else (an unknown `kind`, a missing or non-string field). Extra
    /// fields are ignored.
    ///
    /// [`to_host_data`]: AcpUpdate::to_host_data
    pub fn from_host_data(data: &Value) -> Option<AcpUpdate> {
        let field = |name: &str| -> Option<String> { Some(data.get(name)?.as_str()?.to_owned()) };
        match data.get("kind")?.as_str()? {
            KIND_AGENT_TEXT => Some(AcpUpdate::AgentText {
                message_id: field("messageId")?,
                text: field("text")?,
            }),
            KIND_TOOL_CALL => Some(AcpUpdate::ToolCall {
                tool_call_id: field("toolCallId")?,
                title: field("title")?,
            }),
            KIND_TOOL_CALL_COMPLETED => Some(AcpUpdate::ToolCallCompleted {
                tool_call_id: field("toolCallId")?,
                output: field("output")?,
            }),
            _ => None,
        }
    }

    /// The machine event type an update of a machine kind stands for (`user/message`,
    /// `turn/start`, `turn/end`); `None` for the host's kinds.
    fn machine_type(&self) -> Option<&'static str> {
        match self {
            AcpUpdate::UserMessage { .. } => Some(Event::USER_MESSAGE),
            AcpUpdate::TurnStarted { .. } => Some(Event::TURN_START),
            AcpUpdate::TurnEnded { .. } => Some(Event::TURN_END),
            AcpUpdate::AgentText { .. }
            | AcpUpdate::ToolCall { .. }
            | AcpUpdate::ToolCallCompleted { .. } => None,
        }
    }
}

impl TurnEnd {
    /// How the log's `turn/end` reason reads here.
    pub fn of(reason: &TurnEndReason) -> TurnEnd {
        TurnEnd::from_kind(reason.end_kind(), || match reason {
            // An `ErrorInfo` always serializes (strings and a JSON map); `Null` is never seen.
            TurnEndReason::Error { error } => serde_json::to_value(error).unwrap_or(Value::Null),
            _ => Value::Null,
        })
    }

    /// The turn end of the core's `kind`; `error` gives the host's error JSON of an `error`
    /// end (called only for [`TurnEndKind::Error`]).
    pub fn from_kind(kind: TurnEndKind, error: impl FnOnce() -> Value) -> TurnEnd {
        match kind {
            TurnEndKind::Completed => TurnEnd::Completed,
            TurnEndKind::MaxTokens => TurnEnd::MaxTokens,
            TurnEndKind::Blocked => TurnEnd::Blocked,
            TurnEndKind::Aborted => TurnEnd::Aborted,
            TurnEndKind::Error => TurnEnd::Error(error()),
            TurnEndKind::Interrupted => TurnEnd::Interrupted,
        }
    }

    /// The core's kind of this end (S36, S58).
    pub fn end_kind(&self) -> TurnEndKind {
        match self {
            TurnEnd::Completed => TurnEndKind::Completed,
            TurnEnd::MaxTokens => TurnEndKind::MaxTokens,
            TurnEnd::Blocked => TurnEndKind::Blocked,
            TurnEnd::Aborted => TurnEndKind::Aborted,
            TurnEnd::Error(_) => TurnEndKind::Error,
            TurnEnd::Interrupted => TurnEndKind::Interrupted,
        }
    }

    /// The reason's `kind` as the log spells it ([`TurnEndKind::as_str`]): `completed`,
    /// `max-tokens`, `blocked`, `aborted`, `error`, `interrupted`.
    pub fn kind(&self) -> &'static str {
        self.end_kind().as_str()
    }
}

/// The updates one log record stands for, in order (most records stand for none).
pub fn updates_of(entry: &Entry) -> Vec<AcpUpdate> {
    match entry {
        Entry::Machine(Event::UserMessage(message)) => {
            if message.source_kind() == Some(TOOL_SOURCE) {
                return Vec::new();
            }
            vec![AcpUpdate::UserMessage {
                message_id: message.id().as_str().to_owned(),
                content: content_blocks(message.content()),
            }]
        }
        Entry::Machine(Event::TurnStart { turn }) => vec![AcpUpdate::TurnStarted { turn: *turn }],
        Entry::Machine(Event::TurnEnd { turn, reason }) => vec![AcpUpdate::TurnEnded {
            turn: *turn,
            end: TurnEnd::of(reason),
        }],
        Entry::Machine(_) => Vec::new(),
        Entry::Host(event) if event.kind() == HOST_EVENT => AcpUpdate::from_host_data(event.data())
            .into_iter()
            .collect(),
        Entry::Host(_) => Vec::new(),
    }
}

/// A message's `content` as content blocks: an array as it is; a bare string (what
/// `Message::user(id, "text")` makes) as one `text` block; nothing for a missing or `null`
/// content; any other value as the one element.
fn content_blocks(content: Option<&Value>) -> Vec<Value> {
    match content {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(blocks)) => blocks.clone(),
        Some(Value::String(text)) => vec![json!({"type": "text", "text": text})],
        Some(other) => vec![other.clone()],
    }
}

/// Records `update` (a host kind) inside the step: durable, then sent to the client.
///
/// # Errors
///
/// An update of a machine kind (`UserMessage`, `TurnStarted`, `TurnEnded`: the machine writes
/// those) is refused [`AgentError::Reserved`] naming its event type, before anything is
/// written; otherwise what [`StepContext::record`] fails with.
pub async fn record(cx: &StepContext, update: &AcpUpdate) -> Result<(), AgentError> {
    match update.to_host_data() {
        Some(data) => cx.record(HOST_EVENT, data).await,
        None => {
            let kind = update.machine_type().unwrap_or(HOST_EVENT);
            Err(AgentError::Reserved(ReservedType(kind.to_owned())))
        }
    }
}

/// Records agent output text inside the step ([`AcpUpdate::AgentText`]).
pub async fn record_text(
    cx: &StepContext,
    message_id: impl Into<String>,
    text: impl Into<String>,
) -> Result<(), AgentError> {
    record(
        cx,
        &AcpUpdate::AgentText {
            message_id: message_id.into(),
            text: text.into(),
        },
    )
    .await
}

/// Records a tool call's start inside the step ([`AcpUpdate::ToolCall`]).
pub async fn record_tool_call(
    cx: &StepContext,
    tool_call_id: impl Into<String>,
    title: impl Into<String>,
) -> Result<(), AgentError> {
    record(
        cx,
        &AcpUpdate::ToolCall {
            tool_call_id: tool_call_id.into(),
            title: title.into(),
        },
    )
    .await
}

/// Records a tool call's completion and its output inside the step
/// ([`AcpUpdate::ToolCallCompleted`]).
pub async fn record_tool_call_completed(
    cx: &StepContext,
    tool_call_id: impl Into<String>,
    output: impl Into<String>,
) -> Result<(), AgentError> {
    record(
        cx,
        &AcpUpdate::ToolCallCompleted {
            tool_call_id: tool_call_id.into(),
            output: output.into(),
        },
    )
    .await
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use std::sync::Arc;

    use coxswain_log::HostEvent;
    use coxswain_tokio::coxswain_core::{
        CancelCause, ErrorInfo, Message, Splice, StepAnswer, Target,
    };
    use coxswain_tokio::{Agent, Hooks, Host, MemoryLog};

    use super::*;

    fn user_message(message: Message) -> Entry {
        Entry::Machine(Event::UserMessage(Arc::new(message)))
    }

    fn host(kind: &str, data: Value) -> Entry {
        Entry::Host(HostEvent::new(kind, data).unwrap())
    }

    fn turn_end(reason: TurnEndReason) -> Vec<AcpUpdate> {
        updates_of(&Entry::Machine(Event::TurnEnd { turn: 7, reason }))
    }

    #[test]
    fn s30_a_user_message_event_is_a_user_message_update_with_its_content_blocks() {
        let content = json!([
            {"type": "text", "text": "hello"},
            {"type": "resource_link", "uri": "file:///a.rs", "name": "a.rs"}
        ]);
        let entry = user_message(Message::new("p-1", json!({"kind": "user"}), content));
        assert_eq!(
            updates_of(&entry),
            vec![AcpUpdate::UserMessage {
                message_id: "p-1".into(),
                content: vec![
                    json!({"type": "text", "text": "hello"}),
                    json!({"type": "resource_link", "uri": "file:///a.rs", "name": "a.rs"}),
                ],
            }]
        );
        // A bare string content (`Message::user`) is one text block.
        assert_eq!(
            updates_of(&user_message(Message::user("m1", "hi"))),
            vec![AcpUpdate::UserMessage {
                message_id: "m1".into(),
                content: vec![json!({"type": "text", "text": "hi"})],
            }]
        );
        // No content: no blocks; another value: that one block.
        let mut fields = serde_json::Map::new();
        fields.insert("source".into(), json!({"kind": "user"}));
        assert_eq!(
            updates_of(&user_message(Message::from_fields("m2", fields))),
            vec![AcpUpdate::UserMessage {
                message_id: "m2".into(),
                content: vec![],
            }]
        );
        assert_eq!(
            updates_of(&user_message(Message::new(
                "m3",
                json!({"kind": "user"}),
                json!(5)
            ))),
            vec![AcpUpdate::UserMessage {
                message_id: "m3".into(),
                content: vec![json!(5)],
            }]
        );
    }

    #[test]
    fn a_tool_result_message_is_not_shown_as_a_user_message() {
        let tool = Message::new(
            "t-1-1-result",
            json!({"kind": "tool"}),
            json!([{"type": "text", "text": "echo 1"}]),
        );
        assert_eq!(updates_of(&user_message(tool)), vec![]);
        // Another source kind is shown.
        let steer = Message::new("s1", json!({"kind": "steer"}), json!([]));
        assert_eq!(updates_of(&user_message(steer)).len(), 1);
    }

    #[test]
    fn turn_start_and_every_turn_end_reason() {
        assert_eq!(
            updates_of(&Entry::Machine(Event::TurnStart { turn: 3 })),
            vec![AcpUpdate::TurnStarted { turn: 3 }]
        );
        let ended = |end| vec![AcpUpdate::TurnEnded { turn: 7, end }];
        assert_eq!(
            turn_end(TurnEndReason::Completed),
            ended(TurnEnd::Completed)
        );
        assert_eq!(
            turn_end(TurnEndReason::MaxTokens),
            ended(TurnEnd::MaxTokens)
        );
        assert_eq!(turn_end(TurnEndReason::Blocked), ended(TurnEnd::Blocked));
        assert_eq!(
            turn_end(TurnEndReason::Aborted {
                reason: CancelCause::User
            }),
            ended(TurnEnd::Aborted)
        );
        assert_eq!(
            turn_end(TurnEndReason::Interrupted),
            ended(TurnEnd::Interrupted)
        );
        let mut error = ErrorInfo::new("echo: /fail", "echo-fail");
        let mut details = serde_json::Map::new();
        details.insert("status".into(), json!(503));
        error.details = details.into();
        assert_eq!(
            turn_end(TurnEndReason::Error { error }),
            ended(TurnEnd::Error(
                json!({"message": "echo: /fail", "code": "echo-fail", "status": 503})
            ))
        );
        let kinds: Vec<_> = [
            TurnEnd::Completed,
            TurnEnd::MaxTokens,
            TurnEnd::Blocked,
            TurnEnd::Aborted,
            TurnEnd::Error(Value::Null),
            TurnEnd::Interrupted,
        ]
        .iter()
        .map(TurnEnd::kind)
        .collect();
        assert_eq!(
            kinds,
            [
                "completed",
                "max-tokens",
                "blocked",
                "aborted",
                "error",
                "interrupted"
            ]
        );
    }

    #[test]
    fn s58_turn_ends_are_the_cores_kinds_and_back() {
        for kind in TurnEndKind::ALL {
            let end = TurnEnd::from_kind(kind, || json!({"message": "m"}));
            assert_eq!(end.end_kind(), kind);
            assert_eq!(end.kind(), kind.as_str());
            // Only an `error` end asks for (and carries) the error JSON.
            let carried =
                matches!(&end, TurnEnd::Error(error) if error == &json!({"message": "m"}));
            assert_eq!(carried, kind == TurnEndKind::Error, "{kind}");
        }
        assert_eq!(
            TurnEnd::of(&TurnEndReason::Aborted {
                reason: CancelCause::User
            })
            .end_kind(),
            TurnEndKind::Aborted
        );
    }

    #[test]
    fn the_other_machine_events_stand_for_nothing() {
        let spliced = Event::Spliced(
            serde_json::from_value::<Splice>(json!({
                "target": "next-turn", "start": 0, "removedCount": 0,
                "inserted": [{"id": "m1", "content": "hi"}]
            }))
            .unwrap(),
        );
        let _ = Target::NextTurn;
        for event in [
            spliced,
            Event::StepStart { turn: 1, step: 1 },
            Event::StepEnd { turn: 1, step: 1 },
        ] {
            assert_eq!(updates_of(&Entry::Machine(event)), vec![]);
        }
    }

    fn host_kinds() -> Vec<(AcpUpdate, Value)> {
        vec![
            (
                AcpUpdate::AgentText {
                    message_id: "a-1-1".into(),
                    text: "hello".into(),
                },
                json!({"kind": "agent_text", "messageId": "a-1-1", "text": "hello"}),
            ),
            (
                AcpUpdate::ToolCall {
                    tool_call_id: "t-1-1".into(),
                    title: "echo 1".into(),
                },
                json!({"kind": "tool_call", "toolCallId": "t-1-1", "title": "echo 1"}),
            ),
            (
                AcpUpdate::ToolCallCompleted {
                    tool_call_id: "t-1-1".into(),
                    output: "echo 1".into(),
                },
                json!({"kind": "tool_call_completed", "toolCallId": "t-1-1", "output": "echo 1"}),
            ),
        ]
    }

    #[test]
    fn s32_host_kinds_encode_exactly_and_round_trip_through_an_acp_update_event() {
        for (update, data) in host_kinds() {
            assert_eq!(update.to_host_data(), Some(data.clone()));
            assert_eq!(updates_of(&host(HOST_EVENT, data)), vec![update.clone()]);
            // Extra fields are ignored.
            let mut extra = update.to_host_data().unwrap();
            extra["more"] = json!(1);
            assert_eq!(updates_of(&host(HOST_EVENT, extra)), vec![update]);
        }
    }

    #[test]
    fn machine_kinds_have_no_host_data() {
        for update in [
            AcpUpdate::UserMessage {
                message_id: "m".into(),
                content: vec![],
            },
            AcpUpdate::TurnStarted { turn: 1 },
            AcpUpdate::TurnEnded {
                turn: 1,
                end: TurnEnd::Completed,
            },
        ] {
            assert_eq!(update.to_host_data(), None);
        }
    }

    #[test]
    fn malformed_acp_update_data_stands_for_nothing() {
        for data in [
            json!(null),
            json!("agent_text"),
            json!([{"kind": "agent_text"}]),
            json!({}),
            json!({"kind": 1, "messageId": "a", "text": "b"}),
            json!({"kind": "agent_thought", "messageId": "a", "text": "b"}),
            json!({"kind": "agent_text", "text": "b"}),
            json!({"kind": "agent_text", "messageId": "a"}),
            json!({"kind": "agent_text", "messageId": 1, "text": "b"}),
            json!({"kind": "agent_text", "messageId": "a", "text": null}),
            json!({"kind": "tool_call", "toolCallId": "t"}),
            json!({"kind": "tool_call", "title": "t"}),
            json!({"kind": "tool_call_completed", "toolCallId": "t"}),
            json!({"kind": "tool_call_completed", "toolCallId": "t", "output": {"text": "x"}}),
        ] {
            assert_eq!(
                updates_of(&host(HOST_EVENT, data.clone())),
                vec![],
                "{data}"
            );
        }
        // A well-formed update under another host type is not one.
        let (_, data) = host_kinds().remove(0);
        assert_eq!(updates_of(&host("model/output", data)), vec![]);
    }

    /// A host that records every kind through `record`, and tries a machine kind.
    struct Recorder;

    impl Host for Recorder {
        fn hooks(&self) -> Hooks {
            Hooks::NONE
        }

        async fn step(&self, cx: StepContext) -> StepAnswer {
            let refused = record(&cx, &AcpUpdate::TurnStarted { turn: 9 }).await;
            let text = match refused {
                Err(error) => error.to_string(),
                Ok(()) => "recorded".into(),
            };
            let results = [
                record_text(&cx, "a-1-1", text).await,
                record_tool_call(&cx, "t-1-1", "echo 1").await,
                record_tool_call_completed(&cx, "t-1-1", "echo 1").await,
            ];
            match results.into_iter().find_map(Result::err) {
                None => StepAnswer::Completed,
                Some(error) => StepAnswer::Fail(ErrorInfo::new(error.to_string(), "test")),
            }
        }
    }

    #[tokio::test]
    async fn record_writes_host_kinds_inside_the_step_and_refuses_machine_kinds() {
        let log = MemoryLog::new();
        let (agent, _) = Agent::open(Recorder, log.clone()).await.unwrap();
        agent.followup(Message::user("m1", "hi")).await.unwrap();
        agent.when_idle().await.unwrap();
        agent.close().await.unwrap();
        let records = log.records().unwrap();
        let lines: Vec<String> = records
            .iter()
            .filter(|record| record.event["type"] == HOST_EVENT)
            .map(|record| record.event.to_string())
            .collect();
        assert_eq!(
            lines,
            [
                r#"{"seq":6,"type":"acp/update","data":{"kind":"agent_text","messageId":"a-1-1","text":"event type `turn/start` is reserved for the machine's own events"}}"#,
                r#"{"seq":7,"type":"acp/update","data":{"kind":"tool_call","toolCallId":"t-1-1","title":"echo 1"}}"#,
                r#"{"seq":8,"type":"acp/update","data":{"kind":"tool_call_completed","toolCallId":"t-1-1","output":"echo 1"}}"#,
            ]
        );
        let kinds: Vec<&str> = records
            .iter()
            .map(|record| record.event["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "agent/inbox/spliced",
                "turn/start",
                "agent/inbox/spliced",
                "step/start",
                "user/message",
                "acp/update",
                "acp/update",
                "acp/update",
                "step/end",
                "turn/end",
            ]
        );
    }
}
