//! Keyset cursors for feed and search pages, carried in the crate's opaque
//! [`crate::PageCursor`].
//!
//! A cursor names the last item of a page by its sort key: `f.<score>.<post id>.<generation>` for
//! feeds (the generation of the feed document the page was read from),
//! `m.<score>.<post id>` for best-match search and `n.<created millis>.<post id>` for newest-first
//! search (scores as the hex of their IEEE-754 bits, so they round-trip exactly). The next page
//! starts strictly after that key, so items added meanwhile neither shift nor repeat what follows.

use bson::oid::ObjectId;

use super::PostId;
use crate::{Error, PageCursor, Result};

/// Which kind of page a cursor continues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CursorKind {
    /// A feed, ordered by score.
    Feed,
    /// Search, best match first.
    BestMatch,
    /// Search, newest first.
    Newest,
}

impl CursorKind {
    fn prefix(self) -> &'static str {
        match self {
            CursorKind::Feed => "f",
            CursorKind::BestMatch => "m",
            CursorKind::Newest => "n",
        }
    }
}

/// A cursor after the item with score `score` (a feed or best-match page).
pub(super) fn after_score(kind: CursorKind, score: f64, post: PostId) -> PageCursor {
    PageCursor::from(format!(
        "{}.{:016x}.{}",
        kind.prefix(),
        score.to_bits(),
        post.0.to_hex()
    ))
}

/// A feed cursor: after the item `(score, post)` of the feed's `generation`.
pub(super) fn after_feed_item(generation: i64, score: f64, post: PostId) -> PageCursor {
    let cursor = after_score(CursorKind::Feed, score, post);
    PageCursor::from(format!("{}.{generation}", cursor.as_str()))
}

/// The `(generation, (score, post))` of a feed cursor.
pub(super) fn feed_key(cursor: &PageCursor) -> Result<(i64, (f64, PostId))> {
    let (rest, generation) = cursor
        .as_str()
        .rsplit_once('.')
        .ok_or_else(|| invalid("missing feed generation"))?;
    let generation: i64 = generation
        .parse()
        .map_err(|_| invalid("bad feed generation"))?;
    let key = score_key(CursorKind::Feed, &PageCursor::from(rest.to_owned()))?;
    Ok((generation, key))
}

/// A cursor after the post created at `created` (a newest-first page).
pub(super) fn after_time(created: bson::DateTime, post: PostId) -> PageCursor {
    PageCursor::from(format!(
        "{}.{}.{}",
        CursorKind::Newest.prefix(),
        created.timestamp_millis(),
        post.0.to_hex()
    ))
}

/// The `(score, post)` of a feed or best-match cursor.
pub(super) fn score_key(kind: CursorKind, cursor: &PageCursor) -> Result<(f64, PostId)> {
    let (key, post) = split(kind, cursor)?;
    if key.len() != 16 {
        return Err(invalid("bad score"));
    }
    let bits = u64::from_str_radix(key, 16).map_err(|_| invalid("bad score"))?;
    let score = f64::from_bits(bits);
    if !score.is_finite() {
        return Err(invalid("bad score"));
    }
    Ok((score, post))
}

/// The `(created, post)` of a newest-first search cursor.
pub(super) fn time_key(cursor: &PageCursor) -> Result<(bson::DateTime, PostId)> {
    let (key, post) = split(CursorKind::Newest, cursor)?;
    let millis: i64 = key.parse().map_err(|_| invalid("bad timestamp"))?;
    Ok((bson::DateTime::from_millis(millis), post))
}

fn split(kind: CursorKind, cursor: &PageCursor) -> Result<(&str, PostId)> {
    let rest = cursor
        .as_str()
        .strip_prefix(kind.prefix())
        .and_then(|rest| rest.strip_prefix('.'))
        .ok_or_else(|| invalid("not a cursor of this kind of page"))?;
    let (key, post) = rest
        .split_once('.')
        .ok_or_else(|| invalid("missing post id"))?;
    let post = ObjectId::parse_str(post).map_err(|_| invalid("bad post id"))?;
    Ok((key, PostId(post)))
}

fn invalid(reason: &str) -> Error {
    Error::InvalidCursor {
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip() {
        let post = PostId::new();
        let cursor = after_score(CursorKind::Feed, -12.5, post);
        assert_eq!(score_key(CursorKind::Feed, &cursor).unwrap(), (-12.5, post));
        assert!(score_key(CursorKind::BestMatch, &cursor).is_err());
        assert!(time_key(&cursor).is_err());
        let created = bson::DateTime::from_millis(1_700_000_000_123);
        let cursor = after_time(created, post);
        assert_eq!(time_key(&cursor).unwrap(), (created, post));
        assert!(score_key(CursorKind::Feed, &cursor).is_err());
    }

    #[test]
    fn feed_cursors_carry_the_generation() {
        let post = PostId::new();
        let cursor = after_feed_item(7, 3.5, post);
        assert_eq!(feed_key(&cursor).unwrap(), (7, (3.5, post)));
        let old = after_score(CursorKind::Feed, 3.5, post);
        assert!(feed_key(&old).is_err(), "a cursor without a generation");
    }

    #[test]
    fn malformed_cursors_are_rejected() {
        let post = PostId::new().0.to_hex();
        for text in [
            String::new(),
            "f".into(),
            "f.".into(),
            format!("f.12.{post}"),
            format!("f.7ff0000000000000.{post}"),
            "f.0000000000000000.zz".into(),
            format!("x.0000000000000000.{post}"),
            format!("n.abc.{post}"),
            format!("n1.5.{post}"),
            format!("f.0000000000000000.{post}.x"),
        ] {
            let cursor = PageCursor::from(text.clone());
            assert!(
                score_key(CursorKind::Feed, &cursor).is_err() && time_key(&cursor).is_err(),
                "{text:?} was accepted"
            );
        }
    }
}
