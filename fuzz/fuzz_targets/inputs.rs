//! Fuzz target `inputs`: arbitrary bytes decoded (`arbitrary`) as a sequence of environment
//! choices and run through the property tests' session driver (`tests/src/harness.rs`): the real
//! machine beside the executable spec, with the model checker's `Monitor` after every input, the
//! byte-for-byte S5 check behind every rejection, and restores and crash repairs at random points.
//! Any violation or disagreement panics.
#![no_main]
#![allow(dead_code)]

#[path = "../../tests/src/harness.rs"]
mod harness;

use harness::{Checks, Choice, Session};
use libfuzzer_sys::arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;

/// Long enough for several turns, short enough to keep executions fast.
const MAX_CHOICES: usize = 1000;

fuzz_target!(|bytes: &[u8]| {
    let mut data = Unstructured::new(bytes);
    let choices: Vec<Choice> = data
        .arbitrary_iter::<(u16, u8)>()
        .map(|iter| {
            iter.take(MAX_CHOICES)
                .filter_map(Result::ok)
                .map(|(code, arg)| Choice::decode(code, arg))
                .collect()
        })
        .unwrap_or_default();
    let mut session = Session::new(Checks::ALL);
    if let Err(failure) = session.run(&choices) {
        panic!("{failure}");
    }
});
