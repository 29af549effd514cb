//! Hostile ids (HashDoS): ids crafted so that they all land in one bucket of a hash table whose
//! keys the attacker knows — here the fixed keys the core's id index used before it took a seed
//! from the host (`foldhash::fast::FixedState`, whose keys are published in its source).
//!
//! The attack is a brute-force search: hash candidate ids under the known keys and keep those
//! whose low `bits` bits are all zero. A hashbrown table (std's `HashMap`) picks an id's first
//! bucket from the low bits of its hash, so every kept id starts probing at the same place, in
//! any table of up to `2^bits` buckets: each insert and lookup walks past all the others.

use std::hash::BuildHasher;

use coxswain_core::MessageId;
use foldhash::fast::FixedState;

/// The low bits the committed ids share (tables of up to 65,536 buckets).
pub const COLLIDING_BITS: u32 = 16;

/// The committed set of crafted ids (`tests/data/hashdos-ids.txt`, one a line): 10,240 ids
/// whose hashes under the old fixed keys end in [`COLLIDING_BITS`] zero bits.
pub const CRAFTED_IDS: &str = include_str!("../../tests/data/hashdos-ids.txt");

/// The crafted ids, in file order.
pub fn crafted_ids() -> Vec<&'static str> {
    CRAFTED_IDS.lines().collect()
}

/// The hash the old core gave `id` in its pending index (a `MessageId` hashed by
/// `FixedState::default()`).
pub fn fixed_key_hash(id: &str) -> u64 {
    FixedState::default().hash_one(MessageId::new(id))
}

/// Searches `msg-0000000000`, `msg-0000000001`, … for the first `count` ids whose fixed-key hash
/// ends in `bits` zero bits (about `count << bits` hashes).
pub fn craft(count: usize, bits: u32) -> Vec<String> {
    let mask = (1u64 << bits) - 1;
    let mut found = Vec::with_capacity(count);
    let mut n = 0u64;
    while found.len() < count {
        let id = format!("msg-{n:010}");
        if fixed_key_hash(&id) & mask == 0 {
            found.push(id);
        }
        n += 1;
    }
    found
}

/// `n` ordinary ids of the crafted ids' shape (`msg-0000000000`, `msg-0000000001`, …; none of
/// the first 17,776 is crafted): the baseline the crafted ids are compared with.
pub fn ordinary_ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("msg-{i:010}")).collect()
}
