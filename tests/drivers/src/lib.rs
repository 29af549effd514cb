//! One test suite, run against every Rust driver (see `tests/suite.rs`), and the agent parity
//! interpreter (`agents`, run by `tests/agents.rs`).

pub mod agents;
