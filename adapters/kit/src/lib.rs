//! # coxswain-binding-kit
//!
//! What the language bindings of coxswain (the Python binding, pyo3; the Node binding,
//! napi-rs) share, written once and free of any language: they only translate between this and
//! their host's values.
//!
//! * [`Table`]: the message identity table (S8: one host object per message the core holds),
//!   generic over what the host keeps for a message, swept when the core lets go of one.
//! * [`options`]: plain numbers to the core's [`Config`](coxswain_core::Config), the session's
//!   [`ResumeOptions`](coxswain_session::ResumeOptions) (the redelivery allowance, S59) and
//!   [`Options`](coxswain_session::Options) (its defaults the session layer's own), with one set
//!   of error texts ([`OptionError`]).
//! * [`records`]: a log record's entry read from a JSON value ([`records::entry`]), a list of
//!   them encoded as JSON lines ([`records::encode_values`]), a sealed batch's entries encoded
//!   from a first `seq` ([`records::encode_entries`]), and host events read from JSON values
//!   ([`records::host_events`]), each with its typed error.
//! * [`shapes`]: the JSON shapes of a refusal (`{"rejected": KIND, "message", …details}`), the
//!   kind being the core's [`Refused::kind`](coxswain_session::Refused::kind).
//! * [`request`]: a host call's request from its wire name and numbers, and back.
//!
//! The vocabularies themselves (request kinds, statuses, targets, presets, answer words, host
//! failures, refusal kinds) live in the core crates, as `as_str`/`kind()` and `FromStr`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod options;
pub mod records;
pub mod request;
pub mod shapes;
mod table;

pub use options::OptionError;
pub use table::Table;
