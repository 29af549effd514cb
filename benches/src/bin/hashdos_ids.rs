//! Prints the crafted ids of `tests/data/hashdos-ids.txt` (see `coxswain_benches::hashdos`):
//!
//! ```text
//! cargo run --release -p coxswain-benches --bin hashdos_ids > tests/data/hashdos-ids.txt
//! ```

use coxswain_benches::hashdos::{craft, COLLIDING_BITS};

fn main() {
    for id in craft(10_240, COLLIDING_BITS) {
        println!("{id}");
    }
}
