//! # coxswain-checker
//!
//! A [stateright] model of the coxswain core. Its actions are the environment's choices — every
//! kind of delivery over a small pool of message ids, queue edits, cancels with each cause and
//! with or without `keepInbox`, maintenance, disposal, crash-and-restore, and every answer the
//! host may give — and its transition is the *real* [`coxswain_core::Machine`]: there is no
//! second copy of any delivery rule here. A [`Monitor`] watches every transition and checks
//! SPEC §10 (I1–I10) plus the rules a history shows (S5, S10, S18, S21/S24/S25/S35, S33, S39,
//! S49), §11–§12 (I11–I14) and §13 (S57, and with fate records of its own I15 and I16: in every
//! state it restores the log so far repaired with the redelivery allowance `A = 1`); beside it
//! runs the executable spec ([`coxswain_spec::Spec`]), which must agree with the core on every
//! output, rejection, observable field and fate, and on every crash repair (the `always`
//! property [`EQUIVALENCE`], S1–S59). The model exposes one property per invariant, I9 as an
//! `eventually` property, and one `sometimes` property per situation it must reach, so a passing
//! run is not vacuous.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod check;
mod differential;
mod explore;
mod model;
mod monitor;
mod session;
mod symmetry;

pub use check::{
    check, counterexample, CheckReport, Counterexample, Progress, PropertyReport, Verdict,
};
pub use differential::{view, JsonLog, Mismatch, Outcome, EQUIVALENCE};
pub use model::{Action, Bound, Cause, DeliveryModel, State, LIVENESS};
pub use monitor::{Fact, Invariant, Monitor, Violation, REDELIVERY};
pub use session::{
    check_agent, check_session, AgentAction, AgentBound, AgentModel, AgentProperty, AgentReport,
    AgentState, AgentVerdict, ModelReport, ModelVerdict, SessionAction, SessionBound, SessionModel,
    SessionProperty, SessionReport, SessionState, SessionVerdict, Submit,
};
pub use stateright;
