//! What an inbox cursor holds: the position of the last message of a page, in the crate's one
//! cursor format ([`crate::page`]).
//!
//! A cursor names the last message of a page, so the next page starts strictly after it and
//! messages that arrive meanwhile can neither shift nor repeat what follows. (In the
//! time-ordered strategies `sent` is stamped by the sending client, so a message stamped just
//! before a page was read but stored just after can land in a range already read; bucket
//! positions are assigned by the store and have no such window.)
//!
//! Every cursor is tagged with the strategy that made it, so a cursor of another strategy is
//! refused ([`Invalid::Cursor`](crate::error::Invalid::Cursor)) rather than read as if it were one's own: tag `ir`
//! for [`super::FanOutOnRead`] and `iw` for [`super::FanOutOnWrite`], each holding the
//! message's `(sent millis, id)` (both order by send time), and `ib` for
//! [`super::BucketedFanOut`], holding the message's position in its owner's inbox (counting
//! from 0).
//!
//! Every cursor also ends with a tag of the inbox's owner (64 bits of FNV-1a over the owner's
//! id, in hex), so a cursor taken from one owner's inbox is refused in another's, by pages and by
//! [`super::InboxLifecycle::mark_read_up_to`] alike: a bucket position means nothing in another
//! inbox, and a time key from another inbox would mark or page an unrelated range.

use super::{MessageId, Strategy};
use crate::page::{self, invalid, Cursor};
use crate::Result;

/// The owner's tag in a cursor: 64 bits of FNV-1a over the owner's id, in hex.
fn owner_tag(owner: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in owner.as_bytes() {
        hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Fails with [`Invalid::Cursor`](crate::error::Invalid::Cursor) unless `tag` is `owner`'s.
fn check_owner(tag: &str, owner: &str) -> Result<()> {
    if tag != owner_tag(owner) {
        return Err(invalid("made for another owner's inbox"));
    }
    Ok(())
}

/// The tag of the cursors of `strategy`.
fn tag(strategy: Strategy) -> &'static str {
    match strategy {
        Strategy::FanOutOnRead => "ir",
        Strategy::FanOutOnWrite => "iw",
        Strategy::BucketedFanOut => "ib",
    }
}

/// A cursor of `strategy` (ordered by send time) after the message `(sent, id)` of `owner`'s
/// inbox.
pub(crate) fn after_time(
    strategy: Strategy,
    owner: &str,
    sent: bson::DateTime,
    id: MessageId,
) -> Cursor {
    Cursor::new(
        tag(strategy),
        &[&page::time_field(sent), &id.0.to_hex(), &owner_tag(owner)],
    )
}

/// A cursor of [`Strategy::BucketedFanOut`] after the message at `position` of `owner`'s inbox.
pub(super) fn after_position(owner: &str, position: u64) -> Cursor {
    Cursor::new(
        tag(Strategy::BucketedFanOut),
        &[&position.to_string(), &owner_tag(owner)],
    )
}

/// The `(sent, id)` of the message a cursor `strategy` made for `owner`'s inbox names: the last
/// message of the page it followed.
pub(super) fn time_key(
    cursor: &Cursor,
    strategy: Strategy,
    owner: &str,
) -> Result<(bson::DateTime, MessageId)> {
    if strategy == Strategy::BucketedFanOut {
        return Err(invalid("a bucketed inbox is not ordered by send time"));
    }
    let [sent, id, of] = cursor.fields(tag(strategy))?;
    check_owner(&of, owner)?;
    Ok((page::parse_time(&sent)?, MessageId(page::parse_id(&id)?)))
}

/// The filter for messages after `cursor` (made for `owner`'s inbox) in newest-first
/// `(sent, id)` order, with the message id in `id_field`. `sent <= cursor` bounds the index
/// scan; the `$or` drops the cursor's own millisecond up to and including the cursor's message.
pub(crate) fn older_than(
    cursor: &Cursor,
    strategy: Strategy,
    owner: &str,
    id_field: &str,
) -> Result<bson::Document> {
    let (sent, id) = time_key(cursor, strategy, owner)?;
    Ok(bson::doc! {
        "sent": { "$lte": sent },
        "$or": [
            { "sent": { "$lt": sent } },
            { id_field: { "$lt": id.0 } },
        ],
    })
}

/// The filter for the message `(sent, id)` and every message older than it, in newest-first
/// `(sent, id)` order, with the message id in `id_field`.
pub(super) fn at_or_older(sent: bson::DateTime, id: MessageId, id_field: &str) -> bson::Document {
    bson::doc! {
        "sent": { "$lte": sent },
        "$or": [
            { "sent": { "$lt": sent } },
            { id_field: { "$lte": id.0 } },
        ],
    }
}

/// The position of the message a bucketed inbox's cursor (made for `owner`'s inbox) names: the
/// last message of the page it followed.
pub(super) fn position(cursor: &Cursor, owner: &str) -> Result<u64> {
    let [position, of] = cursor.fields(tag(Strategy::BucketedFanOut))?;
    check_owner(&of, owner)?;
    let position: u64 = position.parse().map_err(|_| invalid("bad position"))?;
    if position == 0 {
        return Err(invalid("position 0 has nothing after it"));
    }
    Ok(position)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMED: [Strategy; 2] = [Strategy::FanOutOnRead, Strategy::FanOutOnWrite];

    #[test]
    fn time_cursor_round_trips_in_its_own_strategy_and_inbox_only() {
        let id = MessageId::new();
        let sent = bson::DateTime::from_millis(1_700_000_000_123);
        for strategy in TIMED {
            let cursor = after_time(strategy, "bob", sent, id);
            assert_eq!(time_key(&cursor, strategy, "bob").unwrap(), (sent, id));
            assert!(time_key(&cursor, strategy, "ann").is_err(), "another owner");
            assert!(position(&cursor, "bob").is_err());
            for other in TIMED.into_iter().filter(|other| *other != strategy) {
                assert!(
                    time_key(&cursor, other, "bob").is_err(),
                    "{other} read {cursor}"
                );
            }
        }
    }

    #[test]
    fn position_cursor_round_trips_in_its_own_inbox_only() {
        let cursor = after_position("bob", 4242);
        assert_eq!(position(&cursor, "bob").unwrap(), 4242);
        assert!(position(&cursor, "bobby").is_err(), "another owner");
        for strategy in TIMED.into_iter().chain([Strategy::BucketedFanOut]) {
            assert!(time_key(&cursor, strategy, "bob").is_err());
        }
    }

    #[test]
    fn malformed_positions_are_rejected() {
        let id = MessageId::new().0.to_hex();
        let bob = owner_tag("bob");
        for (tag, fields) in [
            ("ir", vec![""]),
            ("ir", vec!["12"]),
            ("iw", vec!["abc", "def"]),
            ("iw", vec!["1", "zz"]),
            ("iw", vec!["1", "zz", &bob]),
            ("iw", vec!["1", &id]),
            ("iw", vec!["1", &id, &bob, "2"]),
            ("ib", vec![""]),
            ("ib", vec!["-1", &bob]),
            ("ib", vec!["0", &bob]),
            ("ib", vec!["1"]),
            ("ib", vec!["1", "2", &bob]),
            ("ir", vec!["x", &id, &bob]),
        ] {
            let cursor = Cursor::new(tag, &fields);
            for strategy in TIMED {
                assert!(
                    time_key(&cursor, strategy, "bob").is_err(),
                    "{cursor} was accepted"
                );
            }
            assert!(position(&cursor, "bob").is_err(), "{cursor} was accepted");
        }
    }
}
