//! Integration, property and conformance tests of coxswain, compiled as one test binary.
#[cfg(test)]
mod bad_input;
#[cfg(test)]
mod budgets;
#[cfg(test)]
mod conformance;
#[cfg(test)]
mod harness;
#[cfg(test)]
mod hashdos;
#[cfg(test)]
mod layers;
#[cfg(test)]
mod model_check;
#[cfg(test)]
mod mutation_gate;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod readme;
#[cfg(test)]
mod rollback;
#[cfg(test)]
mod roundtrip;
#[cfg(test)]
mod session_model;
