//! S56's message identity as a 128-bit digest: two messages have the same [`Fingerprint`]
//! exactly when their `source` and `content` are the same JSON values (objects whatever the key
//! order, arrays element by element, numbers by mathematical value, strings code point by code
//! point), up to a collision of a 128-bit hash.
//!
//! A message computes its fingerprint once, when it is built (it is immutable afterwards), so a
//! refused retry compares two numbers instead of walking two values, and the delivery memory
//! keeps 16 bytes per held id instead of the message (SPEC §12 allows "a digest of its
//! canonical value").
//!
//! The digest is SipHash-1-3 (128-bit output) over a canonical encoding: a tag per JSON kind,
//! every whole number (an integer, or a float with no fraction below 2^127 in size) as the same
//! 16-byte integer, any other float as its bits, strings and arrays length-prefixed, and an
//! object as its length plus the wrapping sum of one digest per entry (so the key order cannot
//! matter). Keys are fixed: the digest is never stored, sent or shown, only compared within one
//! process. Two different values collide with probability about 2^-128; a caller who crafts a
//! collision on purpose only makes their own reused id look like a retry.

use std::hash::Hasher;

use serde_json::{Number, Value};
use siphasher::sip128::{Hasher128, SipHasher13};

/// The digest of a message's `source` and `content` (S56).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Fingerprint(u128);

/// SipHash keys (the first digits of e, as in foldhash's constants): fixed, see the module docs.
const KEYS: (u64, u64) = (0x2b7e_1516_28ae_d2a6, 0xabf7_1588_09cf_4f3c);

/// Tags of the canonical encoding, one per JSON kind (and one for an absent field).
mod tag {
    pub(super) const ABSENT: u8 = 0;
    pub(super) const NULL: u8 = 1;
    pub(super) const FALSE: u8 = 2;
    pub(super) const TRUE: u8 = 3;
    pub(super) const WHOLE: u8 = 4;
    pub(super) const FRACTION: u8 = 5;
    pub(super) const STRING: u8 = 6;
    pub(super) const ARRAY: u8 = 7;
    pub(super) const OBJECT: u8 = 8;
}

impl Fingerprint {
    /// The digest as two words (aligned to 8, not 16: the delivery memory's held entry packs
    /// it next to a 24-byte record, S58).
    pub(crate) fn halves(self) -> [u64; 2] {
        [(self.0 >> 64) as u64, self.0 as u64]
    }

    /// The digest [`halves`](Fingerprint::halves) split.
    pub(crate) fn from_halves([high, low]: [u64; 2]) -> Self {
        Fingerprint((u128::from(high) << 64) | u128::from(low))
    }

    /// The fingerprint of a message whose `source` and `content` are these (absent: `None`).
    pub(crate) fn of(source: Option<&Value>, content: Option<&Value>) -> Self {
        let mut hasher = new_hasher();
        write_field(&mut hasher, source);
        write_field(&mut hasher, content);
        Fingerprint(digest(&hasher))
    }
}

fn new_hasher() -> SipHasher13 {
    SipHasher13::new_with_keys(KEYS.0, KEYS.1)
}

fn digest(hasher: &SipHasher13) -> u128 {
    hasher.finish128().as_u128()
}

fn write_field(hasher: &mut SipHasher13, value: Option<&Value>) {
    match value {
        Some(value) => write_value(hasher, value),
        None => hasher.write_u8(tag::ABSENT),
    }
}

fn write_value(hasher: &mut SipHasher13, value: &Value) {
    match value {
        Value::Null => hasher.write_u8(tag::NULL),
        Value::Bool(false) => hasher.write_u8(tag::FALSE),
        Value::Bool(true) => hasher.write_u8(tag::TRUE),
        Value::Number(number) => write_number(hasher, number),
        Value::String(string) => {
            hasher.write_u8(tag::STRING);
            hasher.write_usize(string.len());
            hasher.write(string.as_bytes());
        }
        Value::Array(items) => {
            hasher.write_u8(tag::ARRAY);
            hasher.write_usize(items.len());
            items.iter().for_each(|item| write_value(hasher, item));
        }
        Value::Object(entries) => {
            // Each entry is digested on its own and the digests summed: the sum does not
            // depend on the order the map iterates in.
            let sum = entries.iter().fold(0u128, |sum, (key, value)| {
                let mut entry = new_hasher();
                entry.write_usize(key.len());
                entry.write(key.as_bytes());
                write_value(&mut entry, value);
                sum.wrapping_add(digest(&entry))
            });
            hasher.write_u8(tag::OBJECT);
            hasher.write_usize(entries.len());
            hasher.write_u128(sum);
        }
    }
}

/// A number by its mathematical value: every whole number as one `i128` (`1`, `1.0` and `-0.0`
/// agree; `u64::MAX` and `-1` do not), any other float as its bits (JSON has no NaN, and only
/// zero has two signs).
fn write_number(hasher: &mut SipHasher13, number: &Number) {
    match whole(number) {
        Some(whole) => {
            hasher.write_u8(tag::WHOLE);
            hasher.write_i128(whole);
        }
        None => {
            hasher.write_u8(tag::FRACTION);
            hasher.write_u64(number.as_f64().map_or(0, f64::to_bits));
        }
    }
}

/// The number as an `i128` when it is whole: any `u64` or `i64`, or a float with no fraction
/// below 2^127 in size (which converts exactly).
fn whole(number: &Number) -> Option<i128> {
    const TWO_POW_127: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    if let Some(n) = number.as_u64() {
        return Some(i128::from(n));
    }
    if let Some(n) = number.as_i64() {
        return Some(i128::from(n));
    }
    let float = number.as_f64()?;
    (float.fract() == 0.0 && float.abs() < TWO_POW_127).then_some(float as i128)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// S56's equality written out by value: the oracle the digest must agree with.
    fn same_value(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Number(a), Value::Number(b)) => match (whole(a), whole(b)) {
                (Some(a), Some(b)) => a == b,
                (None, None) => a.as_f64() == b.as_f64(),
                _ => false,
            },
            (Value::Array(a), Value::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_value(a, b))
            }
            (Value::Object(a), Value::Object(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .all(|(key, a)| b.get(key).is_some_and(|b| same_value(a, b)))
            }
            _ => a == b,
        }
    }

    fn of(content: &Value) -> Fingerprint {
        Fingerprint::of(Some(&json!({"kind": "user"})), Some(content))
    }

    /// A small deterministic generator of JSON values that are often equal by value but not as
    /// written: whole floats, reordered keys, nested mixes.
    fn values() -> Vec<Value> {
        let scalars = [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(-0.0),
            json!(0.0),
            json!(1),
            json!(1.0),
            json!(-1),
            json!(1.5),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(-9.223_372_036_854_776e18),
            json!(9_007_199_254_740_993_u64),
            json!(9_007_199_254_740_992.0),
            json!(18_446_744_073_709_551_616.0),
            json!(""),
            json!("1"),
            json!("a"),
            json!("é"),
            json!("e\u{301}"),
        ];
        let mut values: Vec<Value> = scalars.to_vec();
        for a in &scalars[..12] {
            values.push(json!([a]));
            values.push(json!({ "a": a }));
            for b in &scalars[..8] {
                values.push(json!([a, b]));
                values.push(json!({ "a": a, "b": b }));
                values.push(json!({ "b": b, "a": a }));
                values.push(json!({ "a": [a, { "b": b }] }));
            }
        }
        values
    }

    #[test]
    fn s56_equal_fingerprints_exactly_when_equal_by_value() {
        let values = values();
        let prints: Vec<_> = values.iter().map(of).collect();
        let mut equal_pairs = 0;
        for (a, pa) in values.iter().zip(&prints) {
            for (b, pb) in values.iter().zip(&prints) {
                let same = same_value(a, b);
                assert_eq!(pa == pb, same, "{a} vs {b}");
                equal_pairs += usize::from(same);
            }
        }
        // The generator does produce equal-by-value pairs that differ as written.
        assert!(equal_pairs > values.len() * 2, "{equal_pairs}");
    }

    #[test]
    fn s56_pinned_cases() {
        assert_eq!(of(&json!(1)), of(&json!(1.0)));
        assert_eq!(of(&json!(-0.0)), of(&json!(0)));
        assert_eq!(
            of(&json!({"a": [1, {"b": null}], "c": "x"})),
            of(&json!({"c": "x", "a": [1.0, {"b": null}]}))
        );
        assert_eq!(of(&json!(i64::MIN)), of(&json!(-9.223_372_036_854_776e18)));
        assert_ne!(
            of(&json!(9_007_199_254_740_993_u64)),
            of(&json!(9_007_199_254_740_992.0))
        );
        assert_ne!(of(&json!(u64::MAX)), of(&json!(-1)));
        assert_ne!(of(&json!([1, 2])), of(&json!([2, 1])));
        assert_ne!(of(&json!({"a": 1})), of(&json!({"a": 1, "b": null})));
        assert_ne!(of(&json!({"ab": 1})), of(&json!({"a": 1, "b": 1})));
        assert_ne!(of(&json!(["ab"])), of(&json!(["a", "b"])));
        // An absent field is not `null`, and the fields do not swap.
        assert_ne!(
            Fingerprint::of(None, Some(&json!(1))),
            Fingerprint::of(Some(&json!(null)), Some(&json!(1)))
        );
        assert_ne!(
            Fingerprint::of(Some(&json!(1)), Some(&json!(2))),
            Fingerprint::of(Some(&json!(2)), Some(&json!(1)))
        );
    }
}
