//! Where buckets live: `_id`s derived from owner and sequence, an owner's range of them, and the
//! message record's keys.

use bson::{doc, Document};

/// The `_id` of `owner`'s bucket `sequence`: the owner's bytes in hex, a `.`, the sequence in 12
/// digits. Unique per bucket, so `_id`'s own uniqueness refuses a bucket opened twice; and in
/// `_id` order, an owner's buckets are one range, oldest first (the owner's hex is followed by
/// `.`, which sorts before every hex digit, so no owner's range holds another's), read by the
/// `_id` index every server has: the buckets need no other index to be found, and every index
/// is paid on every push.
pub(crate) fn bucket_id(owner: &str, sequence: i64) -> String {
    format!("{}.{sequence:012}", owner_hex(owner))
}

/// The record's field of where each owner's entry went, keyed by [`owner_hex`].
pub(in crate::inbox) const PLACED: &str = "placed";

pub(in crate::inbox) fn owner_hex(owner: &str) -> String {
    use std::fmt::Write;
    owner
        .bytes()
        .fold(String::with_capacity(owner.len() * 2), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

/// The owner whose bytes `hex` spells ([`owner_hex`]), if it spells one.
pub(in crate::inbox) fn owner_from_hex(hex: &str) -> Option<String> {
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(hex.get(at..at + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(bytes).ok()
}

/// A filter for `owner`'s buckets from sequence `from` (inclusive, 0 for all) to `to` (inclusive,
/// `None` for the newest): the owner (the shard key's prefix, for routing) and a range of `_id`.
pub(in crate::inbox) fn owner_buckets(owner: &str, from: i64, to: Option<i64>) -> Document {
    let mut range = doc! { "$gte": bucket_id(owner, from.max(0)) };
    match to {
        Some(to) => range.insert("$lte", bucket_id(owner, to)),
        None => range.insert("$lt", format!("{}/", owner_hex(owner))),
    };
    doc! { "owner": owner, "_id": range }
}
