//! One test suite, run against every Rust driver (see `tests/suite.rs`).
