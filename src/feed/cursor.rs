//! What feed and search cursors hold, in the crate's one cursor format ([`crate::page`]).
//!
//! A cursor names the last item of a page by its sort key: tag `ff` for feeds, holding the
//! score, the post id and the generation of the feed document the page was read from; `fb` for
//! best-match search (score, post id) and `fn` for newest-first search (created millis, post
//! id). Scores are the hex of their IEEE-754 bits, so they round-trip exactly. The next page
//! starts strictly after that key, so items added meanwhile neither shift nor repeat what
//! follows. A feed cursor is bound to its feed (latest, hot, or a user's), a search cursor to
//! its terms, so another feed or search refuses it.

use super::types::{FeedKind, PostId};
use crate::page::{self, invalid, Cursor, Scope};
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

/// The scope of a feed's cursors.
fn feed_scope(feed: &FeedKind) -> Scope {
    Scope::new("feed", &[&feed.key()])
}

/// The scope of the cursors of a search for `terms` (as the search reads them: split at
/// whitespace, at most its number of terms), in lowercase as they match.
fn search_scope(terms: &[&str]) -> Scope {
    let terms: Vec<String> = terms.iter().map(|term| term.to_lowercase()).collect();
    let terms: Vec<&str> = terms.iter().map(String::as_str).collect();
    Scope::new("search", &terms)
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

/// A best-match cursor of the search for `terms` after the item with score `score`.
pub(super) fn after_score(terms: &[&str], score: f64, post: PostId) -> Cursor {
    let tag = CursorKind::BestMatch.tag();
    let fields = [&score_field(score), &post.0.to_hex()];
    Cursor::new(tag, search_scope(terms), &fields.map(String::as_str))
}

/// A cursor of `feed`: after the item `(score, post)` of the feed's `generation`.
pub(super) fn after_feed_item(
    feed: &FeedKind,
    generation: i64,
    score: f64,
    post: PostId,
) -> Cursor {
    let fields = [
        &score_field(score),
        &post.0.to_hex(),
        &generation.to_string(),
    ];
    Cursor::new(
        CursorKind::Feed.tag(),
        feed_scope(feed),
        &fields.map(String::as_str),
    )
}

/// The `(generation, (score, post))` of a cursor of `feed`.
pub(super) fn feed_key(cursor: &Cursor, feed: &FeedKind) -> Result<(i64, (f64, PostId))> {
    let [score, post, generation] = cursor.fields(CursorKind::Feed.tag(), feed_scope(feed))?;
    let generation: i64 = generation
        .parse()
        .map_err(|_| invalid("bad feed generation"))?;
    Ok((generation, (parse_score(&score)?, parse_post(&post)?)))
}

/// A newest-first cursor of the search for `terms` after the post created at `created`.
pub(super) fn after_time(terms: &[&str], created: bson::DateTime, post: PostId) -> Cursor {
    let tag = CursorKind::Newest.tag();
    let fields = [&page::time_field(created), &post.0.to_hex()];
    Cursor::new(tag, search_scope(terms), &fields.map(String::as_str))
}

/// The `(score, post)` of a best-match cursor of the search for `terms`.
pub(super) fn score_key(cursor: &Cursor, terms: &[&str]) -> Result<(f64, PostId)> {
    let [score, post] = cursor.fields(CursorKind::BestMatch.tag(), search_scope(terms))?;
    Ok((parse_score(&score)?, parse_post(&post)?))
}

/// The `(created, post)` of a newest-first cursor of the search for `terms`.
pub(super) fn time_key(cursor: &Cursor, terms: &[&str]) -> Result<(bson::DateTime, PostId)> {
    let [created, post] = cursor.fields(CursorKind::Newest.tag(), search_scope(terms))?;
    Ok((page::parse_time(&created)?, parse_post(&post)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TERMS: &[&str] = &["rust", "mongo"];

    #[test]
    fn cursors_round_trip() {
        let post = PostId::new();
        let cursor = after_score(TERMS, -12.5, post);
        assert_eq!(score_key(&cursor, TERMS).unwrap(), (-12.5, post));
        assert!(score_key(&cursor, &["rust"]).is_err(), "other terms");
        assert_eq!(
            score_key(&cursor, &["Rust", "MONGO"]).unwrap(),
            (-12.5, post)
        );
        assert!(feed_key(&cursor, &FeedKind::Latest).is_err());
        assert!(time_key(&cursor, TERMS).is_err());
        let created = bson::DateTime::from_millis(1_700_000_000_123);
        let cursor = after_time(TERMS, created, post);
        assert_eq!(time_key(&cursor, TERMS).unwrap(), (created, post));
        assert!(
            time_key(&cursor, &["mongo", "rust"]).is_err(),
            "other terms"
        );
        assert!(score_key(&cursor, TERMS).is_err());
    }

    #[test]
    fn feed_cursors_carry_the_generation() {
        let post = PostId::new();
        let ann = FeedKind::User("ann".to_owned());
        let cursor = after_feed_item(&ann, 7, 3.5, post);
        assert_eq!(feed_key(&cursor, &ann).unwrap(), (7, (3.5, post)));
        for other in [
            FeedKind::User("bob".to_owned()),
            FeedKind::Latest,
            FeedKind::Hot,
        ] {
            assert!(feed_key(&cursor, &other).is_err(), "{other:?}");
        }
        assert!(score_key(&cursor, TERMS).is_err() && time_key(&cursor, TERMS).is_err());
        let fields = [score_field(3.5), post.0.to_hex()];
        let without = Cursor::new(
            "ff",
            feed_scope(&ann),
            &fields.each_ref().map(String::as_str),
        );
        assert!(
            feed_key(&without, &ann).is_err(),
            "a cursor without a generation"
        );
    }

    #[test]
    fn malformed_cursors_are_rejected() {
        let post = PostId::new().0.to_hex();
        let post = post.as_str();
        let (feed, search) = (feed_scope(&FeedKind::Latest), search_scope(TERMS));
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
            for scope in [feed, search] {
                let cursor = Cursor::new(tag, scope, &fields);
                assert!(
                    feed_key(&cursor, &FeedKind::Latest).is_err()
                        && score_key(&cursor, TERMS).is_err()
                        && time_key(&cursor, TERMS).is_err(),
                    "{cursor} was accepted"
                );
            }
        }
    }
}
