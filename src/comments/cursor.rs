//! Opaque keyset cursors for comment pages.
//!
//! A cursor names the last comment of a page, so the next page starts strictly after it. Its
//! text is `<strategy>.<view>.<order>.<key>`: which store made it, for which view and order, and a
//! key whose shape is the strategy's own (a posting time and id, a sort path, a position). A
//! cursor handed to another strategy, view or order is refused with
//! [`crate::Error::InvalidCursor`] rather than read wrongly. Applications treat the text as
//! opaque; the format may change between major versions.

use std::fmt;
use std::str::FromStr;

use super::Order;
use crate::{Error, Result};

/// Where the next page starts. Obtained from [`super::CommentPage::next`], passed back with
/// [`super::CommentQuery::after`]; it can be stored as text and parsed back with `FromStr`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CommentCursor(String);

/// Which view a cursor pages through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum View {
    Chronological,
    Threaded,
    SubThread,
}

impl View {
    fn tag(self) -> char {
        match self {
            View::Chronological => 'c',
            View::Threaded => 't',
            View::SubThread => 's',
        }
    }
}

fn order_tag(order: Order) -> char {
    match order {
        Order::OldestFirst => 'o',
        Order::NewestFirst => 'n',
    }
}

impl CommentCursor {
    /// The cursor as text, for a URL or an API response.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A cursor of strategy `strategy` (one letter), view and order, after `key`.
    pub(super) fn new(strategy: char, view: View, order: Order, key: &str) -> Self {
        Self(format!(
            "{strategy}.{}.{}.{key}",
            view.tag(),
            order_tag(order)
        ))
    }

    /// The key of a cursor made by [`CommentCursor::new`] with the same strategy, view and order.
    pub(super) fn key(&self, strategy: char, view: View, order: Order) -> Result<&str> {
        let prefix = format!("{strategy}.{}.{}.", view.tag(), order_tag(order));
        self.0.strip_prefix(&prefix).ok_or_else(|| {
            invalid("made by another comment strategy, view or order than this query's")
        })
    }
}

/// [`Error::InvalidCursor`] with `reason`.
pub(super) fn invalid(reason: &str) -> Error {
    Error::InvalidCursor {
        reason: reason.to_owned(),
    }
}

/// A page from up to `limit + 1` items already in the view's order: the first `limit`, and a
/// cursor after the last of them if more followed.
pub(super) fn page_from<T>(
    mut items: Vec<T>,
    limit: usize,
    comment: impl Fn(&T) -> super::Comment,
    cursor: impl Fn(&T) -> CommentCursor,
) -> super::CommentPage {
    let more = items.len() > limit;
    items.truncate(limit);
    super::CommentPage {
        next: if more {
            items.last().map(&cursor)
        } else {
            None
        },
        comments: items.iter().map(comment).collect(),
    }
}

impl fmt::Display for CommentCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for CommentCursor {
    type Err = Error;

    /// Accepts any text of the cursor's outer shape; the key is checked when the cursor is used.
    fn from_str(s: &str) -> Result<Self> {
        let mut parts = s.splitn(4, '.');
        let strategy = parts.next().unwrap_or_default();
        let view = parts.next().unwrap_or_default();
        let order = parts.next().unwrap_or_default();
        let key = parts.next().unwrap_or_default();
        let shape_ok = matches!(strategy, "p" | "e" | "h")
            && matches!(view, "c" | "t" | "s")
            && matches!(order, "o" | "n")
            && !key.is_empty();
        if !shape_ok {
            return Err(invalid("not a comment cursor"));
        }
        Ok(Self(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_views() {
        let cursor = CommentCursor::new('p', View::Threaded, Order::NewestFirst, "abc/def");
        let parsed: CommentCursor = cursor.to_string().parse().unwrap();
        assert_eq!(parsed, cursor);
        assert_eq!(
            parsed.key('p', View::Threaded, Order::NewestFirst).unwrap(),
            "abc/def"
        );
        assert!(parsed.key('p', View::Threaded, Order::OldestFirst).is_err());
        assert!(parsed.key('e', View::Threaded, Order::NewestFirst).is_err());
        assert!(parsed
            .key('p', View::Chronological, Order::NewestFirst)
            .is_err());
        for bad in ["", "p", "p.c.o.", "x.c.o.1", "p.q.o.1", "p.c.z.1"] {
            assert!(bad.parse::<CommentCursor>().is_err(), "{bad}");
        }
    }
}
