//! The requests this agent receives, in its own types: the schema's `PromptRequest` drops
//! `idempotencyKey`; the others carry only what the adapter reads, both versions alike.

use agent_client_protocol as acp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `session/new`: the working directory and MCP servers are accepted and not used.
#[derive(Debug, Clone, Serialize, Deserialize, acp::JsonRpcRequest)]
#[request(method = "session/new", response = serde_json::Value)]
#[serde(rename_all = "camelCase")]
pub(super) struct NewSession {
    #[serde(default)]
    pub(super) cwd: Option<Value>,
}

/// `session/prompt` with the extra `idempotencyKey`.
#[derive(Debug, Clone, Serialize, Deserialize, acp::JsonRpcRequest)]
#[request(method = "session/prompt", response = serde_json::Value)]
#[serde(rename_all = "camelCase")]
pub(super) struct Prompt {
    pub(super) session_id: String,
    pub(super) prompt: Vec<Value>,
    #[serde(default)]
    pub(super) idempotency_key: Option<String>,
}

/// `_session/queue`: a follow-up answered at acceptance.
#[derive(Debug, Clone, Serialize, Deserialize, acp::JsonRpcRequest)]
#[request(method = "_session/queue", response = serde_json::Value)]
#[serde(rename_all = "camelCase")]
pub(super) struct Queue {
    pub(super) session_id: String,
    pub(super) prompt: Vec<Value>,
    #[serde(default)]
    pub(super) idempotency_key: Option<String>,
}

/// `_session/steering`.
#[derive(Debug, Clone, Serialize, Deserialize, acp::JsonRpcRequest)]
#[request(method = "_session/steering", response = serde_json::Value)]
#[serde(rename_all = "camelCase")]
pub(super) struct Steering {
    pub(super) session_id: String,
    pub(super) prompt: Vec<Value>,
    #[serde(default)]
    pub(super) idle_behavior: Option<IdleBehavior>,
    #[serde(default)]
    pub(super) turn: Option<u64>,
    #[serde(default)]
    pub(super) idempotency_key: Option<String>,
}

/// What a steer that finds no turn to join does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) enum IdleBehavior {
    /// A follow-up (the default).
    StartNewTurn,
    /// Nothing.
    PromptRequired,
}

/// `_session/revoke`.
#[derive(Debug, Clone, Serialize, Deserialize, acp::JsonRpcRequest)]
#[request(method = "_session/revoke", response = serde_json::Value)]
#[serde(rename_all = "camelCase")]
pub(super) struct Revoke {
    pub(super) session_id: String,
    pub(super) message_id: String,
}

/// `_session/replace`.
#[derive(Debug, Clone, Serialize, Deserialize, acp::JsonRpcRequest)]
#[request(method = "_session/replace", response = serde_json::Value)]
#[serde(rename_all = "camelCase")]
pub(super) struct Replace {
    pub(super) session_id: String,
    pub(super) message_id: String,
    pub(super) prompt: Vec<Value>,
}

/// `session/close`.
#[derive(Debug, Clone, Serialize, Deserialize, acp::JsonRpcRequest)]
#[request(method = "session/close", response = serde_json::Value)]
#[serde(rename_all = "camelCase")]
pub(super) struct Close {
    pub(super) session_id: String,
}

/// `session/load` (v1).
#[derive(Debug, Clone, Serialize, Deserialize, acp::JsonRpcRequest)]
#[request(method = "session/load", response = serde_json::Value)]
#[serde(rename_all = "camelCase")]
pub(super) struct Load {
    pub(super) session_id: String,
}

/// `session/resume` (v2): `replayFrom: {type: "start"}` replays the history, absent nothing.
#[derive(Debug, Clone, Serialize, Deserialize, acp::JsonRpcRequest)]
#[request(method = "session/resume", response = serde_json::Value)]
#[serde(rename_all = "camelCase")]
pub(super) struct Resume {
    pub(super) session_id: String,
    #[serde(default)]
    pub(super) replay_from: Option<Value>,
}

/// `session/cancel`.
#[derive(Debug, Clone, Serialize, Deserialize, acp::JsonRpcNotification)]
#[notification(method = "session/cancel")]
#[serde(rename_all = "camelCase")]
pub(super) struct Cancel {
    pub(super) session_id: String,
}
