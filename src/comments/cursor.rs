//! What a comment cursor holds, in the crate's one cursor format ([`crate::page`]).
//!
//! A cursor names the last comment of a page, so the next page starts strictly after it. Its
//! tag names the strategy, view and order that made it (`c`, then `p`, `e` or `h`, then `c`
//! chronological, `t` threaded or `s` sub-thread, then `o` oldest or `n` newest first), and its
//! fields hold a position whose shape is the strategy's own (a posting time and id, a sort
//! path, a page and index). A ranked page's tag is `c`, the strategy, `r` and the sort (`b`
//! best, `h` hot, `t` top, `c` controversial); its fields are the parent it lists the replies of
//! (`-` for the top level), the last comment's sort key and its place among equal keys. Every
//! cursor is bound to its discussion (a sub-thread's, to the discussion and the sub-thread's
//! root). A cursor handed to another strategy, view, order, sort, parent, discussion or
//! sub-thread is refused with [`Invalid::Cursor`](crate::error::Invalid::Cursor) rather than
//! read wrongly.

use bson::oid::ObjectId;

use super::{Comment, Order, Sort, Strategy};
use crate::page::{self, Cursor, Scope};
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
    let strategy = strategy_letter(strategy);
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

/// The letter of `strategy` in cursor tags.
fn strategy_letter(strategy: Strategy) -> char {
    match strategy {
        Strategy::PerComment => 'p',
        Strategy::Embedded => 'e',
        Strategy::HybridPages => 'h',
    }
}

/// The tag of the ranked cursors of `strategy` by `sort`.
fn ranked_tag(strategy: Strategy, sort: Sort) -> String {
    format!("c{}r{}", strategy_letter(strategy), sort.letter())
}

/// The scope of the cursors of `discussion`'s pages.
pub(crate) fn discussion(discussion: &str) -> Scope {
    Scope::new("discussion", &[discussion])
}

/// The scope of the cursors of the sub-thread of `discussion` rooted at the comment at `link`.
pub(super) fn sub_thread(discussion: &str, link: &str) -> Scope {
    Scope::new("sub-thread", &[discussion, link])
}

/// The cursor field naming the top level, whose comments have no parent.
const TOP_LEVEL: &str = "-";

/// A ranked cursor of `strategy` by `sort`, in `discussion` among the replies of `parent` (the
/// top level if `None`), after the comment with sort key `key` and place `tiebreak` among equal
/// keys.
pub(super) fn after_ranked(
    strategy: Strategy,
    sort: Sort,
    discussion: &str,
    parent: Option<&str>,
    key: f64,
    tiebreak: &str,
) -> Cursor {
    Cursor::new(
        &ranked_tag(strategy, sort),
        self::discussion(discussion),
        &[parent.unwrap_or(TOP_LEVEL), &key.to_string(), tiebreak],
    )
}

/// The `(key, tiebreak)` in a cursor made by [`after_ranked`] with the same strategy, sort,
/// discussion and parent.
pub(super) fn ranked_key(
    cursor: &Cursor,
    strategy: Strategy,
    sort: Sort,
    discussion: &str,
    parent: Option<&str>,
) -> Result<(f64, String)> {
    let [own_parent, key, tiebreak] =
        cursor.fields(&ranked_tag(strategy, sort), self::discussion(discussion))?;
    if own_parent != parent.unwrap_or(TOP_LEVEL) {
        return Err(page::invalid("made for the replies of another comment"));
    }
    let key = key
        .parse::<f64>()
        .ok()
        .filter(|key| key.is_finite())
        .ok_or_else(|| page::invalid("bad sort key"))?;
    Ok((key, tiebreak))
}

/// A cursor of `strategy`'s `view` in `order`, made by a read of `scope` ([`discussion`],
/// [`sub_thread`]), after the comment at `position`.
pub(super) fn new(
    strategy: Strategy,
    view: View,
    order: Order,
    scope: Scope,
    position: &[&str],
) -> Cursor {
    Cursor::new(&tag(strategy, view, order), scope, position)
}

/// The position in a cursor made by [`new`] with the same strategy, view, order and scope.
pub(super) fn position<const N: usize>(
    cursor: &Cursor,
    strategy: Strategy,
    view: View,
    order: Order,
    scope: Scope,
) -> Result<[String; N]> {
    cursor.fields(&tag(strategy, view, order), scope)
}

/// A chronological cursor of `discussion` after the comment posted at `posted` with id `id`.
pub(super) fn after_posted(
    strategy: Strategy,
    order: Order,
    discussion: &str,
    posted: bson::DateTime,
    id: ObjectId,
) -> Cursor {
    let position = [&page::time_field(posted), &id.to_hex()];
    new(
        strategy,
        View::Chronological,
        order,
        self::discussion(discussion),
        &position.map(String::as_str),
    )
}

/// The `(posted, id)` in a cursor made by [`after_posted`] with the same strategy, order and
/// discussion.
pub(super) fn posted_key(
    cursor: &Cursor,
    strategy: Strategy,
    order: Order,
    discussion: &str,
) -> Result<(bson::DateTime, ObjectId)> {
    let scope = self::discussion(discussion);
    let [posted, id] = position(cursor, strategy, View::Chronological, order, scope)?;
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
        let scope = discussion("p1");
        let cursor = new(
            Strategy::PerComment,
            View::Threaded,
            Order::NewestFirst,
            scope,
            &["abc/def"],
        );
        let parsed: Cursor = cursor.to_string().parse().unwrap();
        assert_eq!(parsed, cursor);
        let read = |strategy, view, order| position::<1>(&parsed, strategy, view, order, scope);
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
            Order::NewestFirst,
            scope
        )
        .is_err());
        for other in [discussion("p2"), sub_thread("p1", "abc")] {
            assert!(position::<1>(
                &parsed,
                Strategy::PerComment,
                View::Threaded,
                Order::NewestFirst,
                other
            )
            .is_err());
        }
        for bad in ["", "p", "p.c.o.", "x.c.o.1", "p.q.o.1", "p.c.z.1"] {
            assert!(bad.parse::<Cursor>().is_err(), "{bad}");
        }
    }

    #[test]
    fn ranked_cursors_hold_parent_key_and_tiebreak() {
        let key = 0.123_456_789_012_345_67_f64;
        let cursor = after_ranked(Strategy::Embedded, Sort::Best, "p1", Some("0.2"), key, "3");
        let parsed: Cursor = cursor.to_string().parse().unwrap();
        let (read, tiebreak) =
            ranked_key(&parsed, Strategy::Embedded, Sort::Best, "p1", Some("0.2")).unwrap();
        assert_eq!((read.to_bits(), tiebreak.as_str()), (key.to_bits(), "3"));
        assert!(ranked_key(&parsed, Strategy::Embedded, Sort::Best, "p1", None).is_err());
        assert!(ranked_key(&parsed, Strategy::Embedded, Sort::Best, "p2", Some("0.2")).is_err());
        assert!(ranked_key(&parsed, Strategy::Embedded, Sort::Hot, "p1", Some("0.2")).is_err());
        assert!(ranked_key(&parsed, Strategy::PerComment, Sort::Best, "p1", Some("0.2")).is_err());
        let top = after_ranked(Strategy::HybridPages, Sort::Top, "p1", None, -3.0, "1:4");
        assert_eq!(
            ranked_key(&top, Strategy::HybridPages, Sort::Top, "p1", None).unwrap(),
            (-3.0, "1:4".to_owned())
        );
        let forged = Cursor::new("chrt", discussion("p1"), &["-", "NaN", "1:4"]);
        assert!(ranked_key(&forged, Strategy::HybridPages, Sort::Top, "p1", None).is_err());
    }

    #[test]
    fn chronological_cursors_hold_posted_and_id() {
        let (posted, id) = (
            bson::DateTime::from_millis(1_700_000_000_123),
            ObjectId::new(),
        );
        let cursor = after_posted(Strategy::Embedded, Order::OldestFirst, "p1", posted, id);
        assert_eq!(
            posted_key(&cursor, Strategy::Embedded, Order::OldestFirst, "p1").unwrap(),
            (posted, id)
        );
        assert!(posted_key(&cursor, Strategy::Embedded, Order::OldestFirst, "p2").is_err());
        assert!(posted_key(&cursor, Strategy::Embedded, Order::NewestFirst, "p1").is_err());
        assert!(posted_key(&cursor, Strategy::PerComment, Order::OldestFirst, "p1").is_err());
        let forged = new(
            Strategy::Embedded,
            View::Chronological,
            Order::OldestFirst,
            discussion("p1"),
            &["x", "y"],
        );
        assert!(posted_key(&forged, Strategy::Embedded, Order::OldestFirst, "p1").is_err());
    }
}
