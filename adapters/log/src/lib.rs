//! # coxswain-log
//!
//! The durable log of a coxswain session, independent of any async runtime:
//!
//! * [`Auditor`]: checks a log event by event against the invariants a log can show (I1, I2, I4,
//!   I5 and the splice rules) — the engine of `coxswain verify`, and the history checker of the
//!   model checker and the property tests.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod audit;

pub use audit::{Auditor, Rule, Violation};
