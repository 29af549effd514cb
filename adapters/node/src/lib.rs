//! # coxswain-node
//!
//! The Node.js binding of coxswain (napi-rs). It exposes three things to JavaScript and decides
//! nothing itself:
//!
//! * [`NativeMachine`]: the core's [`Machine`](coxswain_core::Machine) with its drain contract —
//!   an input's transition crosses whole (the `feed` of its hot path,
//!   [`NativeMachine::hot_path`]: its durable events and its effects, which the core keeps
//!   queued until the host's persisted word comes with the next input), or every output in
//!   wire order for ports (`ordered`, [`NativeMachine::wire`]).
//! * [`NativeAgent`]: one agent's loop, the session layer's
//!   [`AgentLoop`](coxswain_session::AgentLoop), over such a machine, for the agent
//!   (`agent.js`): batches, waiters, the stop policy, the abort grace, admission, the hooks a
//!   host did not write and the defaults are decided in the pure layer; the agent only moves
//!   bytes, time and promises. Its hot path ([`NativeAgent::hot_path`]) is functions bound to
//!   its core.
//! * SPEC §13 (module `section13`): the query `fate` (S58) on the machine, crash repair's
//!   redelivery allowance (S59) checked by the session layer's one owner of its bound
//!   ([`redelivery_refusal`]), and a trace's `given` with `memory: "unbounded"` and `repair`.
//! * The JSON-lines record format of `coxswain-log` ([`encode_records`], [`parse_log`]), and
//!   [`NativeFileLog`]: the one file log of every runtime (`coxswain-file-log`), its IO on
//!   libuv's thread pool, so the log written from Node is the log the tokio and threads drivers,
//!   Python and `coxswain run --log` write: one owner of its format and of its durability rules.
//!
//! On the hot path a transition crosses as a *tape* (the module `tape`, decoded by `tape.js`):
//! one string of small numbers, decoded in JavaScript into object literals, with every message
//! named by the handle of the caller's own frozen object (S8) — no JSON text is parsed or
//! written for it. An input's message content crosses inward once, as the JSON text
//! `json.js` writes (it refuses what JSON cannot carry exactly), or, for a message that is
//! exactly `{id, source: {kind}, content}` of well-formed strings, as those three strings
//! (`machine.js` `plainFields`; `plain_message` in `src/machine.rs` builds the message its
//! JSON text parses to). A sealed batch's log lines stay in the session until the log takes
//! them, as a string or copied straight into a `MemoryLog`'s buffer. The ports' entry points
//! (`wire`, `outputs`, `restore_given`) and the rarer replies keep JSON text in the shapes of
//! `docs/FORMAT.md`. The typed API is `index.js` / `index.d.ts`.
#![deny(missing_docs)]
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

/// The addon's allocator: mimalloc (see Cargo.toml).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod bound;
#[cfg(feature = "faults")]
mod faults;
mod filelog;
mod log;
mod machine;
mod section13;
mod session;
mod tape;
mod wire;

pub use filelog::{open_file_log, NativeFileLog};
pub use log::{encode_records, host_failure, max_line_bytes, parse_log};
pub use machine::{Core, NativeMachine, Shared};
pub use section13::{max_redelivery, redelivery_refusal};
pub use session::{
    agent_defaults, AgentCore, AgentDefaults, AgentOptions, AgentShared, NativeAgent,
};
pub use tape::tape_table;
