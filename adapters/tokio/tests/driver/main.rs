//! The tokio driver's tests, as one binary: every delivery kind, cancel in every phase, latch
//! replay, maintenance, dispose, resume after a crash, persistence failure, many agents on one
//! runtime, concurrency, a crash at every append point, and §12's guards, bound and conflicts.

mod support;

mod agent_loop;
mod cancel;
mod concurrency;
mod crash;
mod delivery;
mod dispose;
mod durability;
mod group;
mod guards;
mod hostile;
mod hung;
mod limits;
mod maintenance;
mod memory;
mod persistence;
mod resume;
mod retry;
mod runtime;
mod section13;
mod segment;
mod tamper;
