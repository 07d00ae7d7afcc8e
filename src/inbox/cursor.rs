//! Opaque keyset cursors.
//!
//! A cursor names the last message of a page, so the next page starts strictly after it and
//! messages that arrive meanwhile can neither shift nor repeat what follows. (In the
//! time-ordered strategies `sent` is stamped by the sending client, so a message stamped just
//! before a page was read but stored just after can land in a range already read; bucket
//! positions are assigned by the store and have no such window.)
//!
//! Every cursor names the strategy that made it, so a cursor of another strategy is refused
//! ([`Error::InvalidCursor`]) rather than read as if it were one's own: `r.<sent millis>.<message
//! id>` for [`super::FanOutOnRead`], `w.<sent millis>.<message id>` for
//! [`super::FanOutOnWrite`] (both ordered by send time), and `b.<position>` for
//! [`super::BucketedFanOut`] (a message's position in its owner's inbox, counting from 0).
//! Applications treat the text as opaque; the format may change between major versions.

use std::fmt;
use std::str::FromStr;

use bson::oid::ObjectId;

use super::{MessageId, Strategy};
use crate::{Error, Result};

/// The letter that starts the cursors of `strategy`.
fn tag(strategy: Strategy) -> &'static str {
    match strategy {
        Strategy::FanOutOnRead => "r.",
        Strategy::FanOutOnWrite => "w.",
        Strategy::BucketedFanOut => "b.",
    }
}

/// Where the next page starts. Obtained from [`super::Page::next`], passed back in
/// [`super::PageRequest::after`]; it can be stored as text and parsed back with `FromStr`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PageCursor(String);

impl PageCursor {
    /// The cursor as text, for a URL or an API response.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A cursor of `strategy` (ordered by send time) after the message `(sent, id)`.
    pub(crate) fn after_time(strategy: Strategy, sent: bson::DateTime, id: MessageId) -> Self {
        Self(format!(
            "{}{}.{}",
            tag(strategy),
            sent.timestamp_millis(),
            id.0.to_hex()
        ))
    }

    pub(super) fn after_position(position: u64) -> Self {
        Self(format!("{}{position}", tag(Strategy::BucketedFanOut)))
    }

    /// The `(sent, id)` of the last message of the previous page, from a cursor `strategy`
    /// made.
    pub(crate) fn time_key(&self, strategy: Strategy) -> Result<(bson::DateTime, MessageId)> {
        let rest = self
            .0
            .strip_prefix(tag(strategy))
            .filter(|_| strategy != Strategy::BucketedFanOut)
            .ok_or_else(|| invalid(&format!("not a cursor of a {strategy} inbox")))?;
        let (millis, id) = rest
            .split_once('.')
            .ok_or_else(|| invalid("missing message id"))?;
        let millis: i64 = millis.parse().map_err(|_| invalid("bad timestamp"))?;
        let id = ObjectId::parse_str(id).map_err(|_| invalid("bad message id"))?;
        Ok((bson::DateTime::from_millis(millis), MessageId(id)))
    }

    /// The filter for messages after this cursor in newest-first `(sent, id)` order, with the
    /// message id in `id_field`. `sent <= cursor` bounds the index scan; the `$or` drops the
    /// cursor's own millisecond up to and including the cursor's message.
    pub(crate) fn older_than(&self, strategy: Strategy, id_field: &str) -> Result<bson::Document> {
        let (sent, id) = self.time_key(strategy)?;
        Ok(bson::doc! {
            "sent": { "$lte": sent },
            "$or": [
                { "sent": { "$lt": sent } },
                { id_field: { "$lt": id.0 } },
            ],
        })
    }

    /// The position of the last message of the previous page.
    pub(super) fn position(&self) -> Result<u64> {
        let rest = self
            .0
            .strip_prefix(tag(Strategy::BucketedFanOut))
            .ok_or_else(|| invalid("not a cursor of a bucketed inbox"))?;
        let position: u64 = rest.parse().map_err(|_| invalid("bad position"))?;
        if position == 0 {
            return Err(invalid("position 0 has nothing after it"));
        }
        Ok(position)
    }
}

fn invalid(reason: &str) -> Error {
    Error::InvalidCursor {
        reason: reason.to_owned(),
    }
}

impl fmt::Display for PageCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parsing accepts any text; whether it is a valid cursor is checked when it is used, against
/// the strategy reading the page.
impl FromStr for PageCursor {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Ok(Self(s.to_owned()))
    }
}

impl From<String> for PageCursor {
    fn from(text: String) -> Self {
        Self(text)
    }
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
            let cursor = PageCursor::after_time(strategy, sent, id);
            assert_eq!(cursor.time_key(strategy).unwrap(), (sent, id));
            assert!(cursor.position().is_err());
            for other in TIMED.into_iter().filter(|other| *other != strategy) {
                assert!(cursor.time_key(other).is_err(), "{other} read {cursor}");
            }
        }
    }

    #[test]
    fn position_cursor_round_trips() {
        let cursor = PageCursor::after_position(4242);
        assert_eq!(cursor.position().unwrap(), 4242);
        for strategy in TIMED.into_iter().chain([Strategy::BucketedFanOut]) {
            assert!(cursor.time_key(strategy).is_err());
        }
    }

    #[test]
    fn malformed_cursors_are_rejected() {
        for text in [
            "",
            "x",
            "r.",
            "r.12",
            "w.abc.def",
            "w.1.zz",
            "b.",
            "b.-1",
            "b.0",
            "b.1.2",
        ] {
            let cursor: PageCursor = text.parse().unwrap();
            for strategy in TIMED {
                assert!(cursor.time_key(strategy).is_err(), "{text:?} was accepted");
            }
            assert!(cursor.position().is_err(), "{text:?} was accepted");
        }
    }
}
