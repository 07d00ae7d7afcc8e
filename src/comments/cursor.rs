//! What a comment cursor holds, in the crate's one cursor format ([`crate::page`]).
//!
//! A cursor names the last comment of a page, so the next page starts strictly after it. Its
//! tag names the strategy, view and order that made it (`c`, then `p`, `e` or `h`, then `c`
//! chronological, `t` threaded or `s` sub-thread, then `o` oldest or `n` newest first), and its
//! fields hold a position whose shape is the strategy's own (a posting time and id, a sort
//! path, a page and index). A cursor handed to another strategy, view or order is refused with
//! [`crate::Error::InvalidCursor`] rather than read wrongly.

use bson::oid::ObjectId;

use super::{Comment, Order, Strategy};
use crate::page::{self, Cursor};
use crate::{Page, Result};

/// Which view a cursor pages through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum View {
    Chronological,
    Threaded,
    SubThread,
}

/// The tag of the cursors of `strategy`'s `view` in `order`.
fn tag(strategy: Strategy, view: View, order: Order) -> String {
    let strategy = match strategy {
        Strategy::PerComment => 'p',
        Strategy::Embedded => 'e',
        Strategy::HybridPages => 'h',
    };
    let view = match view {
        View::Chronological => 'c',
        View::Threaded => 't',
        View::SubThread => 's',
    };
    let order = match order {
        Order::OldestFirst => 'o',
        Order::NewestFirst => 'n',
    };
    format!("c{strategy}{view}{order}")
}

/// A cursor of `strategy`'s `view` in `order`, after the comment at `position`.
pub(super) fn new(strategy: Strategy, view: View, order: Order, position: &[&str]) -> Cursor {
    Cursor::new(&tag(strategy, view, order), position)
}

/// The position in a cursor made by [`new`] with the same strategy, view and order.
pub(super) fn position<const N: usize>(
    cursor: &Cursor,
    strategy: Strategy,
    view: View,
    order: Order,
) -> Result<[String; N]> {
    cursor.fields(&tag(strategy, view, order))
}

/// A chronological cursor after the comment posted at `posted` with id `id`.
pub(super) fn after_posted(
    strategy: Strategy,
    order: Order,
    posted: bson::DateTime,
    id: ObjectId,
) -> Cursor {
    let position = [&page::time_field(posted), &id.to_hex()];
    new(
        strategy,
        View::Chronological,
        order,
        &position.map(String::as_str),
    )
}

/// The `(posted, id)` in a cursor made by [`after_posted`] with the same strategy and order.
pub(super) fn posted_key(
    cursor: &Cursor,
    strategy: Strategy,
    order: Order,
) -> Result<(bson::DateTime, ObjectId)> {
    let [posted, id] = position(cursor, strategy, View::Chronological, order)?;
    Ok((page::parse_time(&posted)?, page::parse_id(&id)?))
}

/// A page from up to `limit + 1` items already in the view's order: the first `limit`, and a
/// cursor after the last of them if more followed.
pub(super) fn page_from<T>(
    items: Vec<T>,
    limit: usize,
    comment: impl Fn(&T) -> Comment,
    cursor: impl FnOnce(&T) -> Cursor,
) -> Page<Comment> {
    let page = Page::from_overfetch(items, limit, cursor);
    Page {
        items: page.items.iter().map(comment).collect(),
        next: page.next,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_views() {
        let cursor = new(
            Strategy::PerComment,
            View::Threaded,
            Order::NewestFirst,
            &["abc/def"],
        );
        let parsed: Cursor = cursor.to_string().parse().unwrap();
        assert_eq!(parsed, cursor);
        let read = |strategy, view, order| position::<1>(&parsed, strategy, view, order);
        assert_eq!(
            read(Strategy::PerComment, View::Threaded, Order::NewestFirst).unwrap(),
            ["abc/def"]
        );
        assert!(read(Strategy::PerComment, View::Threaded, Order::OldestFirst).is_err());
        assert!(read(Strategy::Embedded, View::Threaded, Order::NewestFirst).is_err());
        assert!(read(
            Strategy::PerComment,
            View::Chronological,
            Order::NewestFirst
        )
        .is_err());
        assert!(position::<2>(
            &parsed,
            Strategy::PerComment,
            View::Threaded,
            Order::NewestFirst
        )
        .is_err());
        for bad in ["", "p", "p.c.o.", "x.c.o.1", "p.q.o.1", "p.c.z.1"] {
            assert!(bad.parse::<Cursor>().is_err(), "{bad}");
        }
    }

    #[test]
    fn chronological_cursors_hold_posted_and_id() {
        let (posted, id) = (
            bson::DateTime::from_millis(1_700_000_000_123),
            ObjectId::new(),
        );
        let cursor = after_posted(Strategy::Embedded, Order::OldestFirst, posted, id);
        assert_eq!(
            posted_key(&cursor, Strategy::Embedded, Order::OldestFirst).unwrap(),
            (posted, id)
        );
        assert!(posted_key(&cursor, Strategy::Embedded, Order::NewestFirst).is_err());
        assert!(posted_key(&cursor, Strategy::PerComment, Order::OldestFirst).is_err());
        let forged = new(
            Strategy::Embedded,
            View::Chronological,
            Order::OldestFirst,
            &["x", "y"],
        );
        assert!(posted_key(&forged, Strategy::Embedded, Order::OldestFirst).is_err());
    }
}
