//! # coxswain-tokio
//!
//! The tokio runtime side of coxswain: one driver task per agent, an IO loop over the sans-IO
//! session layer's agent loop (`coxswain_session::AgentLoop`, the core's
//! [`coxswain_core::Machine`] inside it) and the agent's [`DurableLog`]; an [`Agent`] handle
//! delivers to it; the embedder's [`Host`] does the asynchronous work the core asks for. The
//! driver only moves bytes and time: every delivery decision (routing, latch, claims, turns) is
//! the core's, and group commit, rollback, who waits for what, the stop policy, the retry
//! pause, the abort grace, admission, the hooks a host did not write ([`Hooks`]) and the
//! host-failure codes are the session's.
//!
//! ```
//! use coxswain_tokio::coxswain_core::{ErrorInfo, Message, StepAnswer};
//! use coxswain_tokio::{Agent, FileLog, Host, StepContext};
//!
//! struct Model;
//!
//! impl Host for Model {
//!     async fn step(&self, cx: StepContext) -> StepAnswer {
//!         // Call the model here (watching cx.cancel); log its output inside the step.
//!         let output = serde_json::json!({"text": "hello"});
//!         match cx.record("model/output", output).await {
//!             Ok(()) => StepAnswer::Completed,
//!             Err(error) => StepAnswer::Fail(ErrorInfo::new(error.to_string(), "log")),
//!         }
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let log = FileLog::open(dir.path().join("session.jsonl")).await?;
//! let (agent, _recovery) = Agent::open(Model, log).await?; // or resume: the same call
//! agent.followup(Message::user("m1", "hi")).await?; // resolves once durable
//! agent.when_idle().await?;
//! agent.dispose().await?;
//! let log = std::fs::read_to_string(dir.path().join("session.jsonl"))?;
//! assert_eq!(log.lines().count(), 8); // splice, turn/start, claim, step/start, user/message,
//!                                     // model/output, step/end, turn/end
//! # Ok(()) }
//! ```
//!
//! Resume is the same call on a log that holds a session: [`Agent::open`] reads it back, drops a
//! torn final line, closes an interrupted turn (S50) and restores the core (S46–S48).
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod agent;
mod channel;
mod deliver;
mod driver;
mod error;
mod host;
mod log;
mod open;
mod options;
mod reports;
mod segment;
mod updates;

pub use agent::Agent;
pub use coxswain_file_log::LogFile;
pub use error::{AgentError, Ending, OpenError};
pub use host::{Host, PreStepContext, StepContext, TurnStoppingContext};
pub use log::{DurableLog, FileLog, LogBytes, LogError, MemoryLog, ReadBack, SyncPolicy};
pub use open::Recovery;
pub use options::{InvalidOptions, Options};
pub use segment::{SegmentLog, SessionLog};

pub use coxswain_session::{Hooks, LogFailure};
pub use updates::{PendingSnapshot, Update};

pub use coxswain_core;
pub use coxswain_log;
