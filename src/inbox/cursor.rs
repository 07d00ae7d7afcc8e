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
//! refused ([`crate::Error::InvalidCursor`]) rather than read as if it were one's own: tag `ir`
//! for [`super::FanOutOnRead`] and `iw` for [`super::FanOutOnWrite`], each holding the
//! message's `(sent millis, id)` (both order by send time), and `ib` for
//! [`super::BucketedFanOut`], holding the message's position in its owner's inbox (counting
//! from 0).

use super::{MessageId, Strategy};
use crate::page::{self, invalid, Cursor};
use crate::Result;

/// The tag of the cursors of `strategy`.
fn tag(strategy: Strategy) -> &'static str {
    match strategy {
        Strategy::FanOutOnRead => "ir",
        Strategy::FanOutOnWrite => "iw",
        Strategy::BucketedFanOut => "ib",
    }
}

/// A cursor of `strategy` (ordered by send time) after the message `(sent, id)`.
pub(crate) fn after_time(strategy: Strategy, sent: bson::DateTime, id: MessageId) -> Cursor {
    Cursor::new(tag(strategy), &[&page::time_field(sent), &id.0.to_hex()])
}

/// A cursor of [`Strategy::BucketedFanOut`] after the message at `position`.
pub(super) fn after_position(position: u64) -> Cursor {
    Cursor::new(tag(Strategy::BucketedFanOut), &[&position.to_string()])
}

/// The `(sent, id)` of the last message of the previous page, from a cursor `strategy` made.
fn time_key(cursor: &Cursor, strategy: Strategy) -> Result<(bson::DateTime, MessageId)> {
    if strategy == Strategy::BucketedFanOut {
        return Err(invalid("a bucketed inbox is not ordered by send time"));
    }
    let [sent, id] = cursor.fields(tag(strategy))?;
    Ok((page::parse_time(&sent)?, MessageId(page::parse_id(&id)?)))
}

/// The filter for messages after `cursor` in newest-first `(sent, id)` order, with the message
/// id in `id_field`. `sent <= cursor` bounds the index scan; the `$or` drops the cursor's own
/// millisecond up to and including the cursor's message.
pub(crate) fn older_than(
    cursor: &Cursor,
    strategy: Strategy,
    id_field: &str,
) -> Result<bson::Document> {
    let (sent, id) = time_key(cursor, strategy)?;
    Ok(bson::doc! {
        "sent": { "$lte": sent },
        "$or": [
            { "sent": { "$lt": sent } },
            { id_field: { "$lt": id.0 } },
        ],
    })
}

/// The position of the last message of the previous page, from a bucketed inbox's cursor.
pub(super) fn position(cursor: &Cursor) -> Result<u64> {
    let [position] = cursor.fields(tag(Strategy::BucketedFanOut))?;
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
    fn time_cursor_round_trips_in_its_own_strategy_only() {
        let id = MessageId::new();
        let sent = bson::DateTime::from_millis(1_700_000_000_123);
        for strategy in TIMED {
            let cursor = after_time(strategy, sent, id);
            assert_eq!(time_key(&cursor, strategy).unwrap(), (sent, id));
            assert!(position(&cursor).is_err());
            for other in TIMED.into_iter().filter(|other| *other != strategy) {
                assert!(time_key(&cursor, other).is_err(), "{other} read {cursor}");
            }
        }
    }

    #[test]
    fn position_cursor_round_trips() {
        let cursor = after_position(4242);
        assert_eq!(position(&cursor).unwrap(), 4242);
        for strategy in TIMED.into_iter().chain([Strategy::BucketedFanOut]) {
            assert!(time_key(&cursor, strategy).is_err());
        }
    }

    #[test]
    fn malformed_positions_are_rejected() {
        let id = MessageId::new().0.to_hex();
        for (tag, fields) in [
            ("ir", vec![""]),
            ("ir", vec!["12"]),
            ("iw", vec!["abc", "def"]),
            ("iw", vec!["1", "zz"]),
            ("iw", vec!["1", &id, "2"]),
            ("ib", vec![""]),
            ("ib", vec!["-1"]),
            ("ib", vec!["0"]),
            ("ib", vec!["1", "2"]),
            ("ir", vec!["x", &id]),
        ] {
            let cursor = Cursor::new(tag, &fields);
            for strategy in TIMED {
                assert!(
                    time_key(&cursor, strategy).is_err(),
                    "{cursor} was accepted"
                );
            }
            assert!(position(&cursor).is_err(), "{cursor} was accepted");
        }
    }
}
