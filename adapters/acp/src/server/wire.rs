//! The pure translation between coxswain's neutral values and each ACP version's wire shapes:
//! updates ([`AcpUpdate`] → `session/update`), stop reasons, the `initialize` answer, and the
//! checks of a prompt's content blocks. No IO: every function here is tested on its own.

use agent_client_protocol::v1::schema as v1;
use agent_client_protocol::v2::schema as v2;
use serde_json::{json, Value};

use crate::errors::AcpError;
use crate::updates::{AcpUpdate, TurnEnd};

/// The lifecycle a connection negotiated at `initialize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Version {
    /// Stable v1: a prompt is answered when its turn ends.
    V1,
    /// Unstable v2: a prompt is answered at insertion, with its `messageId`.
    V2,
}

/// The extension methods this agent serves (advertised under `_meta.coxswain.methods`).
pub(crate) const EXTENSION_METHODS: [&str; 4] = [
    "_session/steering",
    "_session/queue",
    "_session/revoke",
    "_session/replace",
];

/// The `stopReason` of a turn end (docs/acp.md, the mapping): `completed` → `end_turn`,
/// `max-tokens` → `max_tokens`, `aborted` → `cancelled`, `error` → `error`, `blocked` →
/// `refusal`; `interrupted` (the agent died and crash repair closed the turn, S50) → `error`:
/// the schema keeps `cancelled` for a stop the client chose.
pub(crate) fn stop_reason(end: &TurnEnd) -> &'static str {
    match end {
        TurnEnd::Completed => "end_turn",
        TurnEnd::MaxTokens => "max_tokens",
        TurnEnd::Blocked => "refusal",
        TurnEnd::Aborted => "cancelled",
        TurnEnd::Error(_) | TurnEnd::Interrupted => "error",
    }
}

/// The error a turn that ended `error` or `interrupted` carries (the host's error as the log
/// holds it, or the interruption), as `data` of a v1 `-32603` and of a v2 idle `error`.
pub(crate) fn turn_error(turn: u64, end: &TurnEnd) -> Option<Value> {
    match end {
        TurnEnd::Error(error) => Some(error.clone()),
        TurnEnd::Interrupted => Some(json!({
            "kind": "interrupted",
            "message": "the agent stopped before the turn ended; crash repair closed it",
            "turn": turn,
        })),
        _ => None,
    }
}

/// The state snapshot a v2 `session/resume` sends after its replay and before its answer:
/// idle (restored work parks until the resume), with the last turn.
pub(crate) fn resume_snapshot(last_turn: u64) -> Value {
    json!({
        "sessionUpdate": "state_update",
        "state": "idle",
        "_meta": {"coxswain": {"turn": last_turn}},
    })
}

/// The `update` objects (the `update` field of `session/update` params) one [`AcpUpdate`]
/// stands for in `version`: most one, a v1 user message one chunk per content block, and the
/// v1 turn boundaries none (a v1 turn's end is its prompt's answer).
pub(crate) fn update_json(version: Version, update: &AcpUpdate) -> Vec<Value> {
    match (version, update) {
        (Version::V1, AcpUpdate::UserMessage { message_id, content }) => content
            .iter()
            .map(|block| {
                json!({"sessionUpdate": "user_message_chunk", "content": block, "messageId": message_id})
            })
            .collect(),
        (Version::V2, AcpUpdate::UserMessage { message_id, content }) => {
            vec![json!({"sessionUpdate": "user_message", "messageId": message_id, "content": content})]
        }
        (_, AcpUpdate::AgentText { message_id, text }) => vec![json!({
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": text},
            "messageId": message_id,
        })],
        (Version::V1, AcpUpdate::ToolCall { tool_call_id, title }) => vec![json!({
            "sessionUpdate": "tool_call",
            "toolCallId": tool_call_id,
            "title": title,
            "status": "in_progress",
        })],
        (Version::V2, AcpUpdate::ToolCall { tool_call_id, title }) => vec![json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": tool_call_id,
            "title": title,
            "status": "in_progress",
        })],
        (_, AcpUpdate::ToolCallCompleted { tool_call_id, output }) => vec![json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": tool_call_id,
            "status": "completed",
            "content": [{"type": "content", "content": {"type": "text", "text": output}}],
        })],
        (Version::V1, AcpUpdate::TurnStarted { .. } | AcpUpdate::TurnEnded { .. }) => Vec::new(),
        (Version::V2, AcpUpdate::TurnStarted { turn }) => vec![json!({
            "sessionUpdate": "state_update",
            "state": "running",
            "_meta": {"coxswain": {"turn": turn}},
        })],
        (Version::V2, AcpUpdate::TurnEnded { turn, end }) => {
            let mut idle = json!({
                "sessionUpdate": "state_update",
                "state": "idle",
                "stopReason": stop_reason(end),
                "_meta": {"coxswain": {"turn": turn}},
            });
            if let (Some(error), Some(object)) = (turn_error(*turn, end), idle.as_object_mut()) {
                object.insert("error".into(), rpc_error_of_host(&error));
            }
            vec![idle]
        }
    }
}

/// A host error (`{message, code?, …}` as the log holds it) as the JSON-RPC error object an
/// `error` stop reason carries.
fn rpc_error_of_host(error: &Value) -> Value {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the step failed");
    json!({"code": -32603, "message": message, "data": error})
}

/// A typed `session/update` notification of `version` for `update`, parsed from its wire JSON
/// (`None` if the schema refuses it: a bug, reported by the caller).
pub(crate) enum Notification {
    /// v1.
    V1(Box<v1::SessionNotification>),
    /// v2.
    V2(Box<v2::UpdateSessionNotification>),
}

/// Parses one `update` object into the version's typed notification.
pub(crate) fn notification(
    version: Version,
    session_id: &str,
    update: Value,
) -> Result<Notification, serde_json::Error> {
    let params = json!({"sessionId": session_id, "update": update});
    Ok(match version {
        Version::V1 => Notification::V1(Box::new(serde_json::from_value(params)?)),
        Version::V2 => Notification::V2(Box::new(serde_json::from_value(params)?)),
    })
}

/// The `initialize` answer of `version`: exactly what is implemented.
pub(crate) fn initialize_json(version: Version) -> Value {
    let info = json!({"name": "coxswain-acp", "version": env!("CARGO_PKG_VERSION")});
    let meta = json!({"coxswain": {"methods": EXTENSION_METHODS}});
    match version {
        Version::V1 => json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": false, "audio": false, "embeddedContext": false},
                "sessionCapabilities": {"close": {}},
                "_meta": meta,
            },
            "authMethods": [],
            "agentInfo": info,
        }),
        Version::V2 => json!({
            "protocolVersion": 2,
            "info": info,
            "capabilities": {
                "session": {},
                "_meta": meta,
            },
            "authMethods": [],
        }),
    }
}

/// Checks a prompt's content blocks: at least one, each a well-formed block of the version's
/// schema and of an advertised type (`text` or `resource_link`: no optional content is
/// advertised).
pub(crate) fn check_prompt(version: Version, prompt: &[Value]) -> Result<(), AcpError> {
    if prompt.is_empty() {
        return Err(AcpError::invalid("the prompt is empty"));
    }
    for (index, block) in prompt.iter().enumerate() {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        let parsed = match version {
            Version::V1 => serde_json::from_value::<v1::ContentBlock>(block.clone()).err(),
            Version::V2 => serde_json::from_value::<v2::ContentBlock>(block.clone()).err(),
        };
        match kind {
            "text" | "resource_link" => {
                if let Some(error) = parsed {
                    return Err(AcpError::invalid(format!(
                        "prompt[{index}] is not a valid {kind} block: {error}"
                    )));
                }
            }
            "" => {
                return Err(AcpError::invalid(format!(
                    "prompt[{index}] has no content block type"
                )))
            }
            other => {
                return Err(AcpError::InvalidParams(json!({
                    "reason": "content block type not advertised",
                    "type": other,
                    "index": index,
                })))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(version: Version, update: &AcpUpdate) -> Vec<Value> {
        update_json(version, update)
            .into_iter()
            .map(|u| match notification(version, "s-1", u) {
                Ok(Notification::V1(n)) => serde_json::to_value(n).unwrap_or(Value::Null),
                Ok(Notification::V2(n)) => serde_json::to_value(n).unwrap_or(Value::Null),
                Err(e) => json!({"refused": e.to_string()}),
            })
            .collect()
    }

    #[test]
    fn stop_reasons_follow_the_mapping_table() {
        assert_eq!(stop_reason(&TurnEnd::Completed), "end_turn");
        assert_eq!(stop_reason(&TurnEnd::MaxTokens), "max_tokens");
        assert_eq!(stop_reason(&TurnEnd::Aborted), "cancelled");
        assert_eq!(stop_reason(&TurnEnd::Error(json!({}))), "error");
        assert_eq!(stop_reason(&TurnEnd::Blocked), "refusal");
        assert_eq!(stop_reason(&TurnEnd::Interrupted), "error");
    }

    #[test]
    fn user_messages_are_chunks_at_v1_and_one_user_message_at_v2() {
        let update = AcpUpdate::UserMessage {
            message_id: "k1".into(),
            content: vec![
                json!({"type": "text", "text": "a"}),
                json!({"type": "text", "text": "b"}),
            ],
        };
        assert_eq!(
            wire(Version::V1, &update),
            vec![
                json!({"sessionId": "s-1", "update": {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "a"}, "messageId": "k1"}}),
                json!({"sessionId": "s-1", "update": {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "b"}, "messageId": "k1"}}),
            ]
        );
        assert_eq!(
            wire(Version::V2, &update),
            vec![
                json!({"sessionId": "s-1", "update": {"sessionUpdate": "user_message", "messageId": "k1", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}})
            ]
        );
    }

    #[test]
    fn agent_text_and_tool_calls_in_both_versions() {
        let text = AcpUpdate::AgentText {
            message_id: "a-1-1".into(),
            text: "hi".into(),
        };
        for version in [Version::V1, Version::V2] {
            assert_eq!(
                wire(version, &text),
                vec![
                    json!({"sessionId": "s-1", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}, "messageId": "a-1-1"}})
                ]
            );
        }
        let call = AcpUpdate::ToolCall {
            tool_call_id: "t-1-1".into(),
            title: "echo 1".into(),
        };
        assert_eq!(
            wire(Version::V1, &call),
            vec![
                json!({"sessionId": "s-1", "update": {"sessionUpdate": "tool_call", "toolCallId": "t-1-1", "title": "echo 1", "status": "in_progress"}})
            ]
        );
        assert_eq!(
            wire(Version::V2, &call),
            vec![
                json!({"sessionId": "s-1", "update": {"sessionUpdate": "tool_call_update", "toolCallId": "t-1-1", "title": "echo 1", "status": "in_progress"}})
            ]
        );
        let done = AcpUpdate::ToolCallCompleted {
            tool_call_id: "t-1-1".into(),
            output: "echo 1".into(),
        };
        for version in [Version::V1, Version::V2] {
            assert_eq!(
                wire(version, &done),
                vec![
                    json!({"sessionId": "s-1", "update": {"sessionUpdate": "tool_call_update", "toolCallId": "t-1-1", "status": "completed", "content": [{"type": "content", "content": {"type": "text", "text": "echo 1"}}]}})
                ]
            );
        }
    }

    #[test]
    fn turns_are_state_updates_at_v2_and_nothing_at_v1() {
        let started = AcpUpdate::TurnStarted { turn: 3 };
        let ended = AcpUpdate::TurnEnded {
            turn: 3,
            end: TurnEnd::MaxTokens,
        };
        assert!(wire(Version::V1, &started).is_empty());
        assert!(wire(Version::V1, &ended).is_empty());
        assert_eq!(
            wire(Version::V2, &started),
            vec![
                json!({"sessionId": "s-1", "update": {"sessionUpdate": "state_update", "state": "running", "_meta": {"coxswain": {"turn": 3}}}})
            ]
        );
        assert_eq!(
            wire(Version::V2, &ended),
            vec![
                json!({"sessionId": "s-1", "update": {"sessionUpdate": "state_update", "state": "idle", "stopReason": "max_tokens", "_meta": {"coxswain": {"turn": 3}}}})
            ]
        );
        let failed = AcpUpdate::TurnEnded {
            turn: 4,
            end: TurnEnd::Error(json!({"message": "echo: /fail", "code": "echo-fail"})),
        };
        assert_eq!(
            wire(Version::V2, &failed),
            vec![
                json!({"sessionId": "s-1", "update": {"sessionUpdate": "state_update", "state": "idle", "stopReason": "error", "error": {"code": -32603, "message": "echo: /fail", "data": {"message": "echo: /fail", "code": "echo-fail"}}, "_meta": {"coxswain": {"turn": 4}}}})
            ]
        );
    }

    #[test]
    fn an_interrupted_turn_is_an_error_with_its_interruption() {
        let interrupted = AcpUpdate::TurnEnded {
            turn: 2,
            end: TurnEnd::Interrupted,
        };
        let message = "the agent stopped before the turn ended; crash repair closed it";
        assert_eq!(
            wire(Version::V2, &interrupted),
            vec![
                json!({"sessionId": "s-1", "update": {"sessionUpdate": "state_update", "state": "idle", "stopReason": "error", "error": {"code": -32603, "message": message, "data": {"kind": "interrupted", "message": message, "turn": 2}}, "_meta": {"coxswain": {"turn": 2}}}})
            ]
        );
        let snapshot = notification(Version::V2, "s-1", resume_snapshot(2))
            .ok()
            .and_then(|n| match n {
                Notification::V2(n) => serde_json::to_value(n).ok(),
                Notification::V1(_) => None,
            });
        assert_eq!(
            snapshot,
            Some(
                json!({"sessionId": "s-1", "update": {"sessionUpdate": "state_update", "state": "idle", "_meta": {"coxswain": {"turn": 2}}}})
            )
        );
    }

    #[test]
    fn initialize_answers_parse_as_the_schema_says_and_advertise_what_is_implemented() {
        let v1: Result<v1::InitializeResponse, _> =
            serde_json::from_value(initialize_json(Version::V1));
        assert_eq!(
            v1.map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
                .map_err(|e| e.to_string()),
            Ok(json!({
                "protocolVersion": 1,
                "agentCapabilities": {
                    "loadSession": true,
                    "promptCapabilities": {"image": false, "audio": false, "embeddedContext": false},
                    "mcpCapabilities": {"http": false, "sse": false},
                    "sessionCapabilities": {"close": {}},
                    "auth": {},
                    "_meta": {"coxswain": {"methods": EXTENSION_METHODS}},
                },
                "authMethods": [],
                "agentInfo": {"name": "coxswain-acp", "version": env!("CARGO_PKG_VERSION")},
            }))
        );
        let v2: Result<v2::InitializeResponse, _> =
            serde_json::from_value(initialize_json(Version::V2));
        assert_eq!(
            v2.map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
                .map_err(|e| e.to_string()),
            Ok(json!({
                "protocolVersion": 2,
                "info": {"name": "coxswain-acp", "version": env!("CARGO_PKG_VERSION")},
                "capabilities": {"session": {}, "_meta": {"coxswain": {"methods": EXTENSION_METHODS}}},
            }))
        );
    }

    #[test]
    fn prompts_are_checked_block_by_block() {
        let text = json!({"type": "text", "text": "hi"});
        let link = json!({"type": "resource_link", "uri": "file:///a", "name": "a"});
        for version in [Version::V1, Version::V2] {
            assert_eq!(check_prompt(version, &[text.clone(), link.clone()]), Ok(()));
            assert_eq!(
                check_prompt(version, &[]),
                Err(AcpError::invalid("the prompt is empty"))
            );
            assert_eq!(
                check_prompt(
                    version,
                    &[
                        text.clone(),
                        json!({"type": "image", "data": "", "mimeType": "image/png"})
                    ]
                ),
                Err(AcpError::InvalidParams(json!({
                    "reason": "content block type not advertised", "type": "image", "index": 1
                })))
            );
            assert_eq!(
                check_prompt(version, &[json!({"text": "hi"})]),
                Err(AcpError::invalid("prompt[0] has no content block type"))
            );
            assert!(matches!(
                check_prompt(version, &[json!({"type": "text"})]),
                Err(AcpError::InvalidParams(Value::String(s))) if s.starts_with("prompt[0] is not a valid text block")
            ));
        }
    }
}
