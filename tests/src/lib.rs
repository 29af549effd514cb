//! Integration, property and conformance tests of coxswain, compiled as one test binary.
#[cfg(test)]
mod conformance;
#[cfg(test)]
mod model_check;
#[cfg(test)]
mod reference;
