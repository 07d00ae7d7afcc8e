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
//! Every cursor is also bound to the inbox's owner (its [scope](crate::page), a hash of the
//! owner's id), so a cursor taken from one owner's inbox is refused in another's, by pages and by
//! [`super::InboxLifecycle::mark_read_up_to`] alike: a bucket position means nothing in another
//! inbox, and a time key from another inbox would mark or page an unrelated range.

use super::{MessageId, Strategy};
use crate::page::{self, invalid, Cursor, Scope};
use crate::Result;

/// The scope of the cursors of `owner`'s inbox (and timeline).
pub(crate) fn scope(owner: &str) -> Scope {
    Scope::new("owner's inbox", &[owner])
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
        scope(owner),
        &[&page::time_field(sent), &id.0.to_hex()],
    )
}

/// A cursor of [`Strategy::BucketedFanOut`] after the message at `position` of `owner`'s inbox.
pub(super) fn after_position(owner: &str, position: u64) -> Cursor {
    Cursor::new(
        tag(Strategy::BucketedFanOut),
        scope(owner),
        &[&position.to_string()],
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
    let [sent, id] = cursor.fields(tag(strategy), scope(owner))?;
    Ok((page::parse_time(&sent)?, MessageId(page::parse_id(&id)?)))
}

/// The filter for messages after `cursor` (made for `owner`'s inbox) in newest-first
/// `(sent, id)` order, with the message id in `id_field`. `sent <= cursor` bounds the index
/// scan; the `$nor` drops the cursor's own millisecond up to and including the cursor's
/// message. (The same condition as an `$or` of "older" and "same millisecond, lower id" makes
/// DocumentDB plan a union of two bitmap scans and sort the owner's whole inbox: 500 ms at
/// 100,000 messages against 8 ms.)
pub(crate) fn older_than(
    cursor: &Cursor,
    strategy: Strategy,
    owner: &str,
    id_field: &str,
) -> Result<bson::Document> {
    let (sent, id) = time_key(cursor, strategy, owner)?;
    Ok(older_than_time(sent, id, id_field))
}

/// [`older_than`] the message `(sent, id)`.
pub(super) fn older_than_time(
    sent: bson::DateTime,
    id: MessageId,
    id_field: &str,
) -> bson::Document {
    bson::doc! {
        "sent": { "$lte": sent },
        "$nor": [{ "sent": sent, id_field: { "$gte": id.0 } }],
    }
}

/// The filter for the message `(sent, id)` and every message older than it, in newest-first
/// `(sent, id)` order, with the message id in `id_field`.
pub(super) fn at_or_older(sent: bson::DateTime, id: MessageId, id_field: &str) -> bson::Document {
    bson::doc! {
        "sent": { "$lte": sent },
        "$nor": [{ "sent": sent, id_field: { "$gt": id.0 } }],
    }
}

/// The position of the message a bucketed inbox's cursor (made for `owner`'s inbox) names: the
/// last message of the page it followed.
pub(super) fn position(cursor: &Cursor, owner: &str) -> Result<u64> {
    let [position] = cursor.fields(tag(Strategy::BucketedFanOut), scope(owner))?;
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
        let (bob, ann) = (scope("bob"), scope("ann"));
        for (tag, of, fields) in [
            ("ir", bob, vec![""]),
            ("ir", bob, vec!["12"]),
            ("iw", bob, vec!["abc", "def"]),
            ("iw", bob, vec!["1", "zz"]),
            ("iw", ann, vec!["1", &id]),
            ("iw", bob, vec!["1", &id, "2"]),
            ("ib", bob, vec![""]),
            ("ib", bob, vec!["-1"]),
            ("ib", bob, vec!["0"]),
            ("ib", ann, vec!["1"]),
            ("ib", bob, vec!["1", "2"]),
            ("ir", bob, vec!["x", &id]),
        ] {
            let cursor = Cursor::new(tag, of, &fields);
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
