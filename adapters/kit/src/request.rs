//! A host call's request from its wire name and numbers, and back: how a binding names the call
//! an answer is for (`("step", turn, step)`).

use std::str::FromStr;

use coxswain_core::{Outstanding, RequestKind, UnknownName};

/// The request of the host call `call` (`preStep`, `step`, `turnStopping`: the core's
/// [`RequestKind`] names) of turn `turn`, step `step`; an unknown call is an error naming it.
/// A number the host gives below 0 is no request's: the binding passes `u64::MAX` for it, so
/// the session finds it stale.
///
/// ```
/// use coxswain_binding_kit::request::{parts, request};
/// use coxswain_core::Outstanding;
///
/// assert_eq!(request("step", 2, 1), Ok(Outstanding::Step { turn: 2, step: 1 }));
/// assert_eq!(parts(Outstanding::TurnStopping { turn: 2 }), ("turnStopping", 2, 0));
/// assert_eq!(request("stop", 2, 1).unwrap_err().to_string(), "unknown request `stop`");
/// ```
pub fn request(call: &str, turn: u64, step: u64) -> Result<Outstanding, UnknownName> {
    RequestKind::from_str(call).map(|kind| kind.outstanding(turn, step))
}

/// A request as `(kind, turn, step)`; a `turnStopping` request's step is 0.
pub fn parts(request: Outstanding) -> (&'static str, u64, u64) {
    match request {
        Outstanding::PreStep { turn, step } | Outstanding::Step { turn, step } => {
            (request.kind().as_str(), turn, step)
        }
        Outstanding::TurnStopping { turn } => (request.kind().as_str(), turn, 0),
    }
}

/// A number a host gave for a turn or a step: below 0 is none a request has (`u64::MAX`).
pub fn number(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_round_trips_through_its_parts() {
        for kind in RequestKind::ALL {
            let request = kind.outstanding(3, 2);
            let (name, turn, step) = parts(request);
            assert_eq!(super::request(name, turn, step), Ok(request));
        }
        assert_eq!(number(-1), u64::MAX);
        assert_eq!(number(5), 5);
    }
}
