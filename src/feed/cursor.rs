//! What feed and search cursors hold, in the crate's one cursor format ([`crate::page`]).
//!
//! A cursor names the last item of a page by its sort key: tag `ff` for feeds, holding the
//! score, the post id and the generation of the feed document the page was read from; `fb` for
//! best-match search (score, post id) and `fn` for newest-first search (created millis, post
//! id). Scores are the hex of their IEEE-754 bits, so they round-trip exactly. The next page
//! starts strictly after that key, so items added meanwhile neither shift nor repeat what
//! follows.

use super::types::PostId;
use crate::page::{self, invalid, Cursor};
use crate::Result;

/// Which kind of page a cursor continues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CursorKind {
    /// A feed, ordered by score.
    Feed,
    /// Search, best match first.
    BestMatch,
    /// Search, newest first.
    Newest,
}

impl CursorKind {
    fn tag(self) -> &'static str {
        match self {
            CursorKind::Feed => "ff",
            CursorKind::BestMatch => "fb",
            CursorKind::Newest => "fn",
        }
    }
}

fn score_field(score: f64) -> String {
    format!("{:016x}", score.to_bits())
}

fn parse_score(field: &str) -> Result<f64> {
    if field.len() != 16 {
        return Err(invalid("bad score"));
    }
    let bits = u64::from_str_radix(field, 16).map_err(|_| invalid("bad score"))?;
    let score = f64::from_bits(bits);
    if !score.is_finite() {
        return Err(invalid("bad score"));
    }
    Ok(score)
}

fn parse_post(field: &str) -> Result<PostId> {
    page::parse_id(field).map(PostId)
}

/// A best-match search cursor after the item with score `score`.
pub(super) fn after_score(score: f64, post: PostId) -> Cursor {
    let tag = CursorKind::BestMatch.tag();
    Cursor::new(tag, &[&score_field(score), &post.0.to_hex()])
}

/// A feed cursor: after the item `(score, post)` of the feed's `generation`.
pub(super) fn after_feed_item(generation: i64, score: f64, post: PostId) -> Cursor {
    let fields = [
        &score_field(score),
        &post.0.to_hex(),
        &generation.to_string(),
    ];
    Cursor::new(CursorKind::Feed.tag(), &fields.map(String::as_str))
}

/// The `(generation, (score, post))` of a feed cursor.
pub(super) fn feed_key(cursor: &Cursor) -> Result<(i64, (f64, PostId))> {
    let [score, post, generation] = cursor.fields(CursorKind::Feed.tag())?;
    let generation: i64 = generation
        .parse()
        .map_err(|_| invalid("bad feed generation"))?;
    Ok((generation, (parse_score(&score)?, parse_post(&post)?)))
}

/// A cursor after the post created at `created` (a newest-first page).
pub(super) fn after_time(created: bson::DateTime, post: PostId) -> Cursor {
    let tag = CursorKind::Newest.tag();
    Cursor::new(tag, &[&page::time_field(created), &post.0.to_hex()])
}

/// The `(score, post)` of a best-match cursor.
pub(super) fn score_key(cursor: &Cursor) -> Result<(f64, PostId)> {
    let [score, post] = cursor.fields(CursorKind::BestMatch.tag())?;
    Ok((parse_score(&score)?, parse_post(&post)?))
}

/// The `(created, post)` of a newest-first search cursor.
pub(super) fn time_key(cursor: &Cursor) -> Result<(bson::DateTime, PostId)> {
    let [created, post] = cursor.fields(CursorKind::Newest.tag())?;
    Ok((page::parse_time(&created)?, parse_post(&post)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip() {
        let post = PostId::new();
        let cursor = after_score(-12.5, post);
        assert_eq!(score_key(&cursor).unwrap(), (-12.5, post));
        assert!(feed_key(&cursor).is_err());
        assert!(time_key(&cursor).is_err());
        let created = bson::DateTime::from_millis(1_700_000_000_123);
        let cursor = after_time(created, post);
        assert_eq!(time_key(&cursor).unwrap(), (created, post));
        assert!(score_key(&cursor).is_err());
    }

    #[test]
    fn feed_cursors_carry_the_generation() {
        let post = PostId::new();
        let cursor = after_feed_item(7, 3.5, post);
        assert_eq!(feed_key(&cursor).unwrap(), (7, (3.5, post)));
        assert!(score_key(&cursor).is_err() && time_key(&cursor).is_err());
        let without = Cursor::new("ff", &[&score_field(3.5), &post.0.to_hex()]);
        assert!(feed_key(&without).is_err(), "a cursor without a generation");
    }

    #[test]
    fn malformed_cursors_are_rejected() {
        let post = PostId::new().0.to_hex();
        let post = post.as_str();
        for (tag, fields) in [
            ("ff", vec![""]),
            ("ff", vec!["12", post, "0"]),
            ("ff", vec!["7ff0000000000000", post, "0"]),
            ("ff", vec!["0000000000000000", "zz", "0"]),
            ("ff", vec!["0000000000000000", post, "x"]),
            ("fb", vec!["0000000000000000", "zz"]),
            ("fb", vec!["12", post]),
            ("fn", vec!["abc", post]),
            ("fn", vec!["5", post, "1"]),
            ("fx", vec!["0000000000000000", post]),
        ] {
            let cursor = Cursor::new(tag, &fields);
            assert!(
                feed_key(&cursor).is_err()
                    && score_key(&cursor).is_err()
                    && time_key(&cursor).is_err(),
                "{cursor} was accepted"
            );
        }
    }
}
