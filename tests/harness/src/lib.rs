//! The harness of the tests that need a component this machine may lack: PostgreSQL's server
//! binaries (the throwaway clusters of `tests/postgres`, the CLI's PostgreSQL test, the `load`
//! fail-over test) or Chromium (the browser tests of `coxswain view`).
//!
//! libtest cannot decide at run time that a test is skipped: a test that returns early when the
//! component is missing counts as *passed*. So these test binaries are `harness = false` and run
//! their tests through [`run`], which reports them as what they are:
//!
//! - the component is there: every test runs, as under libtest;
//! - it is missing and `CI` is not `true`: every test is reported **ignored** (libtest's own word,
//!   in the `test result:` line cargo prints), after one line on stderr saying what is missing and
//!   how to install it;
//! - it is missing and `CI=true`: every test runs, and fails on the missing component (`.ci/run`
//!   installs every component, so a missing one there is a broken CI, never a skip).
//!
//! The arguments are libtest's (`--ignored`, `--exact`, a filter, `--nocapture`, `--list`, ...).

use std::process::ExitCode;

use libtest_mimic::{Arguments, Trial};

/// A component a test binary needs, and whether this machine has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Needs {
    /// What the tests need, as a reader would name it (`"PostgreSQL's server binaries"`).
    pub what: &'static str,
    /// How to get it (`"apt-get install postgresql"`).
    pub install: &'static str,
    /// Whether this machine has it.
    pub present: bool,
}

/// What [`run`] does with the tests of a binary that needs `needs`, given `CI`'s value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Run every test (the component is there, or `CI=true`, where a missing one must fail).
    Run,
    /// Report every test ignored: the component is missing outside CI.
    Ignore,
}

impl Needs {
    /// The plan for this machine: [`Plan::Ignore`] only when the component is missing and `ci`
    /// (the value of the `CI` variable) is not `"true"`.
    pub fn plan(&self, ci: Option<&str>) -> Plan {
        if self.present || ci == Some("true") {
            Plan::Run
        } else {
            Plan::Ignore
        }
    }
}

/// One test of a `harness = false` binary: its name and its body (a panic fails it).
#[derive(Clone, Copy, Debug)]
pub struct Test {
    name: &'static str,
    body: fn(),
    always_ignored: bool,
}

impl Test {
    /// A test that runs when the component is there (or under `CI=true`).
    pub const fn new(name: &'static str, body: fn()) -> Test {
        Test {
            name,
            body,
            always_ignored: false,
        }
    }

    /// A test that runs only when asked (`--ignored`), like libtest's `#[ignore]`: a
    /// measurement, say.
    pub const fn ignored(name: &'static str, body: fn()) -> Test {
        Test {
            name,
            body,
            always_ignored: true,
        }
    }
}

/// Runs `tests` with libtest's arguments and output; see the crate's docs for what a missing
/// component does. Returns the process's exit code (non-zero when a test failed).
pub fn run(needs: &Needs, tests: &[Test]) -> ExitCode {
    let args = Arguments::from_args();
    let plan = needs.plan(std::env::var("CI").ok().as_deref());
    if plan == Plan::Ignore {
        eprintln!(
            "ignored: these tests need {} ({}); with CI=true they fail instead",
            needs.what, needs.install
        );
    }
    let trials = tests
        .iter()
        .map(|test| {
            let body = test.body;
            Trial::test(test.name, move || {
                body(); // libtest-mimic turns a panic into the test's failure
                Ok(())
            })
            .with_ignored_flag(test.always_ignored || plan == Plan::Ignore)
        })
        .collect();
    libtest_mimic::run(&args, trials).exit_code()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs(present: bool) -> Needs {
        Needs {
            what: "a thing",
            install: "apt-get install thing",
            present,
        }
    }

    #[test]
    fn a_missing_component_is_ignored_outside_ci_and_runs_under_ci() {
        assert_eq!(needs(false).plan(None), Plan::Ignore);
        assert_eq!(needs(false).plan(Some("false")), Plan::Ignore);
        assert_eq!(needs(false).plan(Some("1")), Plan::Ignore);
        assert_eq!(needs(false).plan(Some("true")), Plan::Run);
        assert_eq!(needs(true).plan(None), Plan::Run);
        assert_eq!(needs(true).plan(Some("true")), Plan::Run);
    }
}
