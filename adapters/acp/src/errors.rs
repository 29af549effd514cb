//! The ACP errors of docs/acp.md's table: every refusal the adapter answers, as one typed value
//! ([`AcpError`]) that becomes the JSON-RPC error object ([`AcpError::to_rpc`]). The core
//! decides; this module only names the codes.

use agent_client_protocol::{Error as RpcError, ErrorCode};
use coxswain_tokio::{AgentError, LogError};
use serde_json::{json, Value};

use crate::store::StoreError;

/// `-32010`: an id (`idempotencyKey`) reused for a different message (S56).
pub const CONFLICT: i32 = -32010;
/// `-32011`: the admission bound was reached (S55).
pub const BACKPRESSURE: i32 = -32011;
/// `-32012`: the prompt was claimed by a turn that ended before entering it.
pub const NOT_INSERTED: i32 = -32012;
/// `-32013`: the session's log is held by another process, or fenced.
pub const SESSION_LOCKED: i32 = -32013;
/// The longest `idempotencyKey`, in characters.
pub const MAX_KEY_CHARS: usize = 255;

/// Why a request was refused (docs/acp.md, "Errors").
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum AcpError {
    /// `-32002`: no such session on this connection (never created, closed, or gone).
    UnknownSession(String),
    /// `-32602`: anything malformed; `data` says what.
    InvalidParams(Value),
    /// `-32010` (S56).
    Conflict(String),
    /// `-32011` (S55).
    Full {
        /// The bound.
        limit: usize,
    },
    /// `-32011` with `data: { kind: "retries", limit }`: `limit` requests for one id are
    /// already held (a prompt and its retries).
    TooManyRetries {
        /// The bound.
        limit: usize,
    },
    /// `-32011` with `data: { kind: "sessions", limit }`: `limit` sessions are already open on
    /// this connection (each holds an agent and its buffers).
    TooManySessions {
        /// The bound.
        limit: usize,
    },
    /// `-32800`: discarded (cancel, close, revoke).
    Cancelled,
    /// `-32012`: claimed by turn `turn`, which ended `end` before entering it.
    NotInserted {
        /// The claiming turn.
        turn: u64,
        /// Its end's kind (`blocked`, `error`, `interrupted`, `aborted`, …).
        end: String,
    },
    /// `-32013`: `kind` is `locked` or `fenced`.
    Locked {
        /// `locked` or `fenced`.
        kind: &'static str,
        /// The log's text.
        detail: String,
    },
    /// `-32603` with `data: { kind, message }`: the log failed, or anything internal.
    Internal {
        /// The kind (`persistence`, `indeterminate`, `stopped`, `closed`, …).
        kind: String,
        /// The text.
        message: String,
    },
    /// `-32603` with the host's error as `data`: a v1 prompt whose turn ended `error`.
    TurnFailed(Value),
}

impl AcpError {
    /// An `-32602` whose `data` is a sentence.
    pub(crate) fn invalid(what: impl Into<String>) -> Self {
        AcpError::InvalidParams(Value::String(what.into()))
    }

    /// The JSON-RPC error object.
    pub(crate) fn to_rpc(&self) -> RpcError {
        match self {
            AcpError::UnknownSession(id) => {
                RpcError::new(ErrorCode::RESOURCE_NOT_FOUND, "Resource not found")
                    .data(json!({ "sessionId": id }))
            }
            AcpError::InvalidParams(data) => {
                RpcError::new(ErrorCode::INVALID_PARAMS, "Invalid params").data(data.clone())
            }
            AcpError::Conflict(id) => RpcError::new(CONFLICT, "conflict")
                .data(json!({ "kind": "conflict", "messageId": id })),
            AcpError::Full { limit } => RpcError::new(BACKPRESSURE, "backpressure")
                .data(json!({ "kind": "full", "limit": limit })),
            AcpError::TooManyRetries { limit } => RpcError::new(BACKPRESSURE, "backpressure")
                .data(json!({ "kind": "retries", "limit": limit })),
            AcpError::TooManySessions { limit } => RpcError::new(BACKPRESSURE, "backpressure")
                .data(json!({ "kind": "sessions", "limit": limit })),
            AcpError::Cancelled => RpcError::new(ErrorCode::REQUEST_CANCELLED, "Request cancelled"),
            AcpError::NotInserted { turn, end } => RpcError::new(NOT_INSERTED, "not inserted")
                .data(json!({ "kind": "not-inserted", "turn": turn, "end": end })),
            AcpError::Locked { kind, detail } => RpcError::new(SESSION_LOCKED, "session locked")
                .data(json!({ "kind": kind, "message": detail })),
            AcpError::Internal { kind, message } => {
                RpcError::new(ErrorCode::INTERNAL_ERROR, "Internal error")
                    .data(json!({ "kind": kind, "message": message }))
            }
            AcpError::TurnFailed(error) => {
                RpcError::new(ErrorCode::INTERNAL_ERROR, "Internal error").data(error.clone())
            }
        }
    }

    /// A failed delivery or call of the agent. `was_delivered()` errors are not refusals and
    /// never reach here (the caller answers them from `fate`).
    pub(crate) fn of_agent(error: &AgentError) -> Self {
        match error {
            AgentError::Conflict(id) => AcpError::Conflict(id.as_str().to_owned()),
            AgentError::Full { max, .. } => AcpError::Full { limit: *max },
            AgentError::IdTooLong { bytes, max } => AcpError::invalid(format!(
                "idempotencyKey is {bytes} bytes, above the limit of {max}"
            )),
            AgentError::MessageTooLarge { bytes, max, .. } => AcpError::invalid(format!(
                "the prompt is {bytes} bytes encoded, above the limit of {max}"
            )),
            AgentError::TooDeep(deep) => AcpError::invalid(deep.to_string()),
            AgentError::Persistence(log) | AgentError::Indeterminate(log) => match of_log(log) {
                Some(locked) => locked,
                None => AcpError::Internal {
                    kind: error.kind().to_owned(),
                    message: error.to_string(),
                },
            },
            other => AcpError::Internal {
                kind: other.kind().to_owned(),
                message: other.to_string(),
            },
        }
    }

    /// The agent stopped on a failed log (`Ending::Stopped`): another writer took the session
    /// over (`-32013`, `kind: "fenced"`/`"locked"`), else `-32603` `kind: "stopped"`.
    pub(crate) fn of_stopped(log: &LogError) -> Self {
        of_log(log).unwrap_or_else(|| AcpError::Internal {
            kind: "stopped".into(),
            message: log.to_string(),
        })
    }

    /// A failed open of a session's log.
    pub(crate) fn of_store(error: &StoreError) -> Self {
        match error {
            StoreError::UnknownSession(id) => AcpError::UnknownSession(id.clone()),
            StoreError::Locked { detail, .. } => AcpError::Locked {
                kind: "locked",
                detail: detail.clone(),
            },
            StoreError::Fenced { detail, .. } => AcpError::Locked {
                kind: "fenced",
                detail: detail.clone(),
            },
            other => AcpError::Internal {
                kind: other.kind().to_owned(),
                message: other.to_string(),
            },
        }
    }
}

/// A log error that means another writer owns the session.
fn of_log(error: &LogError) -> Option<AcpError> {
    match error.kind() {
        "locked" => Some(AcpError::Locked {
            kind: "locked",
            detail: error.to_string(),
        }),
        "fenced" => Some(AcpError::Locked {
            kind: "fenced",
            detail: error.to_string(),
        }),
        _ => None,
    }
}

/// Checks an `idempotencyKey`: non-empty, at most [`MAX_KEY_CHARS`] characters.
pub(crate) fn check_key(key: &str) -> Result<(), AcpError> {
    if key.is_empty() {
        return Err(AcpError::invalid("idempotencyKey is empty"));
    }
    let chars = key.chars().count();
    if chars > MAX_KEY_CHARS {
        return Err(AcpError::invalid(format!(
            "idempotencyKey is {chars} characters, above the limit of {MAX_KEY_CHARS}"
        )));
    }
    Ok(())
}

/// Why [`serve`](crate::serve) returned an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The storage could not be reached (the text names the directory or URL).
    #[error("{0}")]
    Store(#[from] StoreError),
    /// The connection failed (the transport, or the protocol engine).
    #[error("the ACP connection failed: {0}")]
    Connection(RpcError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(error: &AcpError) -> Value {
        serde_json::to_value(error.to_rpc()).unwrap_or(Value::Null)
    }

    #[test]
    fn every_error_of_the_table_has_its_code_message_and_data() {
        assert_eq!(
            wire(&AcpError::UnknownSession("s-1".into())),
            json!({"code": -32002, "message": "Resource not found", "data": {"sessionId": "s-1"}})
        );
        assert_eq!(
            wire(&AcpError::invalid("the prompt is empty")),
            json!({"code": -32602, "message": "Invalid params", "data": "the prompt is empty"})
        );
        assert_eq!(
            wire(&AcpError::Conflict("k".into())),
            json!({"code": -32010, "message": "conflict", "data": {"kind": "conflict", "messageId": "k"}})
        );
        assert_eq!(
            wire(&AcpError::Full { limit: 3 }),
            json!({"code": -32011, "message": "backpressure", "data": {"kind": "full", "limit": 3}})
        );
        assert_eq!(
            wire(&AcpError::TooManyRetries { limit: 64 }),
            json!({"code": -32011, "message": "backpressure", "data": {"kind": "retries", "limit": 64}})
        );
        assert_eq!(
            wire(&AcpError::Cancelled),
            json!({"code": -32800, "message": "Request cancelled"})
        );
        assert_eq!(
            wire(&AcpError::NotInserted {
                turn: 2,
                end: "blocked".into()
            }),
            json!({"code": -32012, "message": "not inserted", "data": {"kind": "not-inserted", "turn": 2, "end": "blocked"}})
        );
        assert_eq!(
            wire(&AcpError::Locked {
                kind: "locked",
                detail: "x".into()
            }),
            json!({"code": -32013, "message": "session locked", "data": {"kind": "locked", "message": "x"}})
        );
        assert_eq!(
            wire(&AcpError::TurnFailed(
                json!({"message": "echo: /fail", "code": "echo-fail"})
            )),
            json!({"code": -32603, "message": "Internal error", "data": {"message": "echo: /fail", "code": "echo-fail"}})
        );
    }

    #[test]
    fn a_stopped_agent_names_why() {
        // H6 fix 7: a fenced agent is -32013 `fenced` (docs/acp.md), not -32603.
        let fenced = LogError::Fenced {
            session: "s-1".into(),
            epoch: 3,
        };
        let error = AcpError::of_stopped(&fenced);
        assert_eq!(
            error,
            AcpError::Locked {
                kind: "fenced",
                detail: fenced.to_string()
            }
        );
        assert_eq!(
            wire(&error),
            json!({ "code": -32013, "message": "session locked",
                    "data": { "kind": "fenced", "message": fenced.to_string() } })
        );
        let failed = LogError::WriterStopped;
        assert_eq!(
            AcpError::of_stopped(&failed),
            AcpError::Internal {
                kind: "stopped".into(),
                message: failed.to_string()
            }
        );
    }

    #[test]
    fn agent_refusals_map_to_their_codes() {
        use coxswain_tokio::coxswain_core::{MessageId, Target};
        assert_eq!(
            AcpError::of_agent(&AgentError::Conflict(MessageId::from("k"))),
            AcpError::Conflict("k".into())
        );
        assert_eq!(
            AcpError::of_agent(&AgentError::Full {
                target: Target::NextTurn,
                max: 2
            }),
            AcpError::Full { limit: 2 }
        );
        assert_eq!(
            AcpError::of_agent(&AgentError::Closed).to_rpc().code,
            ErrorCode::INTERNAL_ERROR
        );
    }

    #[test]
    fn keys_are_checked_for_emptiness_and_length() {
        assert_eq!(
            check_key(""),
            Err(AcpError::invalid("idempotencyKey is empty"))
        );
        assert_eq!(check_key(&"x".repeat(255)), Ok(()));
        assert_eq!(check_key(&"é".repeat(255)), Ok(()));
        assert_eq!(
            check_key(&"x".repeat(256)),
            Err(AcpError::invalid(
                "idempotencyKey is 256 characters, above the limit of 255"
            ))
        );
    }
}
