//! One vocabulary for a host call that gave no valid answer: what every driver writes into the
//! durable log (the `code` of the `fail` answer the session feeds on the host's behalf), whatever
//! its language. A driver says *what happened* ([`HostFailure`]); the session decides the answer.

use std::str::FromStr;

use coxswain_core::{
    ErrorInfo, Input, Outstanding, PreStepAnswer, StepAnswer, TurnStoppingAnswer, UnknownName,
};

/// How a host call (the `preStep`, `step` or `turnStopping` request) failed to answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HostFailure {
    /// The call panicked (Rust) or crashed its task.
    Panicked,
    /// The call raised or threw (Python, JavaScript) or returned an error.
    Raised,
    /// The call's task was cancelled before it answered (a runtime shutting down, a Python
    /// `CancelledError`).
    Cancelled,
    /// The call was aborted and did not answer within the abort grace: the session gave up on
    /// it ([`Session::handle_timeout`](crate::Session::handle_timeout)).
    Abandoned,
    /// The call answered with something that is not an answer (a wrong shape, a value too deep
    /// for the log).
    InvalidAnswer,
}

impl HostFailure {
    /// Every failure, in the order of the table in docs/architecture.md.
    pub const ALL: [HostFailure; 5] = [
        HostFailure::Panicked,
        HostFailure::Raised,
        HostFailure::Cancelled,
        HostFailure::Abandoned,
        HostFailure::InvalidAnswer,
    ];

    /// The `code` written into the log's `fail` answer: `host-panicked`, `host-raised`,
    /// `host-cancelled`, `host-abandoned` or `host-invalid-answer`.
    pub const fn code(self) -> &'static str {
        match self {
            HostFailure::Panicked => "host-panicked",
            HostFailure::Raised => "host-raised",
            HostFailure::Cancelled => "host-cancelled",
            HostFailure::Abandoned => "host-abandoned",
            HostFailure::InvalidAnswer => "host-invalid-answer",
        }
    }

    /// The failure's name, its code without `host-`: `panicked`, `raised`, `cancelled`,
    /// `abandoned` or `invalid-answer` (what a driver says happened; [`FromStr`] reads it back).
    pub const fn name(self) -> &'static str {
        match self {
            HostFailure::Panicked => "panicked",
            HostFailure::Raised => "raised",
            HostFailure::Cancelled => "cancelled",
            HostFailure::Abandoned => "abandoned",
            HostFailure::InvalidAnswer => "invalid-answer",
        }
    }

    /// The failure a code names, if it is one of [`code`](HostFailure::code)'s.
    pub fn from_code(code: &str) -> Option<HostFailure> {
        HostFailure::ALL
            .into_iter()
            .find(|failure| failure.code() == code)
    }

    /// The error the session answers with: this code, and a message naming the request and
    /// the host's `detail`.
    pub fn error(self, request: Outstanding, detail: &str) -> ErrorInfo {
        let what = match self {
            HostFailure::Panicked => "panicked",
            HostFailure::Raised => "raised",
            HostFailure::Cancelled => "was cancelled",
            HostFailure::Abandoned => "was abandoned after the abort grace",
            HostFailure::InvalidAnswer => "gave an invalid answer",
        };
        let call = request.kind();
        let message = if detail.is_empty() {
            format!("the host's {call} call {what}")
        } else {
            format!("the host's {call} call {what}: {detail}")
        };
        ErrorInfo::new(message, self.code())
    }

    /// The `fail` answer to `request` the session feeds on the host's behalf.
    pub fn answer(self, request: Outstanding, detail: &str) -> Input {
        let error = self.error(request, detail);
        match request {
            Outstanding::PreStep { .. } => Input::PreStep(PreStepAnswer::Fail(error)),
            Outstanding::Step { .. } => Input::Step(StepAnswer::Fail(error)),
            Outstanding::TurnStopping { .. } => {
                Input::TurnStopping(TurnStoppingAnswer::Fail(error))
            }
        }
    }
}

impl FromStr for HostFailure {
    type Err = UnknownName;

    /// Parses a failure's [`name`](HostFailure::name) (`raised`, …); anything else (a code
    /// with its `host-` included) is an error naming it: `unknown host failure `exploded``.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        HostFailure::ALL
            .into_iter()
            .find(|failure| failure.name() == name)
            .ok_or_else(|| UnknownName::new("host failure", name))
    }
}

impl std::fmt::Display for HostFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_code_each_and_back() {
        let codes: Vec<_> = HostFailure::ALL.map(HostFailure::code).to_vec();
        assert_eq!(
            codes,
            [
                "host-panicked",
                "host-raised",
                "host-cancelled",
                "host-abandoned",
                "host-invalid-answer"
            ]
        );
        for failure in HostFailure::ALL {
            assert_eq!(HostFailure::from_code(failure.code()), Some(failure));
        }
        assert_eq!(HostFailure::from_code("host-panic"), None);
    }

    #[test]
    fn one_name_each_and_back() {
        let names: Vec<_> = HostFailure::ALL.map(HostFailure::name).to_vec();
        assert_eq!(
            names,
            [
                "panicked",
                "raised",
                "cancelled",
                "abandoned",
                "invalid-answer"
            ]
        );
        for failure in HostFailure::ALL {
            assert_eq!(failure.name().parse::<HostFailure>(), Ok(failure));
            assert_eq!(failure.code(), format!("host-{}", failure.name()));
        }
        let unknown = "host-raised".parse::<HostFailure>().unwrap_err();
        assert_eq!(unknown.to_string(), "unknown host failure `host-raised`");
        assert_eq!(unknown.found(), "host-raised");
    }

    #[test]
    fn the_error_names_the_call_and_the_detail() {
        let step = Outstanding::Step { turn: 3, step: 1 };
        let error = HostFailure::Raised.error(step, "ValueError('x')");
        assert_eq!(&*error.code, "host-raised");
        assert_eq!(
            &*error.message,
            "the host's step call raised: ValueError('x')"
        );
        let error = HostFailure::Abandoned.error(Outstanding::PreStep { turn: 1, step: 1 }, "");
        assert_eq!(
            &*error.message,
            "the host's preStep call was abandoned after the abort grace"
        );
    }
}
