//! # coxswain-acp
//!
//! coxswain behind the [Agent Client Protocol](https://agentclientprotocol.com): an ACP agent whose
//! prompt lifecycle is decided by the coxswain core and session layer. See `docs/acp.md` for the
//! mapping table, the errors and the demo host.
//!
//! * [`serve`]: serve ACP (v1 and the unstable v2, negotiated at `initialize`) on a transport,
//!   one coxswain agent per ACP session.
//! * [`store`]: where the sessions' logs live (a directory of file logs, or PostgreSQL).
//! * [`updates`]: what a host records inside its step to stream to the client, and how the log's
//!   records become ACP updates (live and at replay alike).
//! * [`echo`]: the deterministic demo host (`coxswain-acp --echo`).
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod echo;
mod errors;
mod server;
pub mod store;
pub mod updates;

pub use errors::{ServeError, BACKPRESSURE, CONFLICT, MAX_KEY_CHARS, NOT_INSERTED, SESSION_LOCKED};
pub use server::{serve, stdio, Config};
pub use store::Storage;
