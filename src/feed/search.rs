//! The [`Search`] handle: posts' title and body, newest first or best match first,
//! keyset-paged.
//!
//! Every term must appear (in the title or the body). Where the server has text indexes
//! ([`crate::server::Capabilities::text_search`], MongoDB), the store creates a text index over `title`
//! (weight 3) and `body` (weight 1) and searches it with `$text`, each term quoted so all are
//! required. MongoDB matches a quoted term as a phrase: the text index finds candidates, then
//! each must contain the term as written (case-insensitively), so matching is not stemmed
//! ("run" does not find "ran") and a stop word given as a term is required like any other.
//! Best match is MongoDB's `textScore`; either order is one `aggregate`. Where `$text` matches
//! documents holding *any* quoted phrase ([`crate::server::Capabilities::text_all_phrases`] false;
//! docs/SERVERS.md lists the servers), the same `aggregate` filters the text index's candidates
//! again with the fallback's regexes, so every term is still required; the score stays the text
//! index's.
//!
//! Where the server has no text index the fallback is a case-insensitive `$regex` per term
//! over title and body (substring match, no stemming, a collection scan). Newest first is one
//! `find`. Best match scores in the library: for each term, 3 per occurrence in the title plus 1
//! per occurrence in the body, over the newest [`FALLBACK_CANDIDATES`] matches, fetched in one
//! `find`; older matches are not ranked.

use bson::{doc, Bson, Document};
use futures::TryStreamExt;

use super::cursor;
use super::state::handle;
use super::types::{Post, PostId};
use crate::bson_ext;
use crate::error::Invalid;
use crate::error::{Error, Result};
use crate::observe::spans::Op;
use crate::page::{Page, PageRequest};
use crate::payload::Payload;

/// Matches the regex fallback ranks for a best-match search.
pub const FALLBACK_CANDIDATES: i64 = 1000;
/// Terms beyond this many are ignored.
const MAX_TERMS: usize = 16;

/// The order of search results.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SearchOrder {
    /// Newest post first.
    #[default]
    Newest,
    /// Most relevant first, ties to the newer post.
    BestMatch,
}

handle! {
    /// Search over posts: every term must appear in the title or the body. From
    /// [`super::FeedStore::search`]; cheap to clone.
    ///
    /// Where the server has text indexes ([`crate::server::Capabilities::text_search`], MongoDB) it
    /// searches a text index over `title` (weight 3) and `body` (weight 1), each term quoted, so a
    /// term matches as written (not stemmed); elsewhere a case-insensitive `$regex` per term, with
    /// best match scored in the library over the newest [`FALLBACK_CANDIDATES`] matches. A page is
    /// one command.
    ///
    /// ```no_run
    /// # async fn demo(store: mongo_social::FeedStore<()>) -> mongo_social::Result<()> {
    /// use mongo_social::feed::SearchOrder;
    /// use mongo_social::PageRequest;
    ///
    /// let search = store.search();
    /// let order = SearchOrder::BestMatch;
    /// let best = search.page("rust async", order, PageRequest::first(20)).await?;
    /// if let Some(cursor) = best.next {
    ///     let more = search.page("rust async", order, PageRequest::after(20, cursor)).await?;
    /// }
    /// # Ok(()) }
    /// ```
    Search<X>
}

impl<X: Payload> Search<X> {
    /// Posts containing every whitespace-separated term of `terms`, one page in `order`.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for blank terms, [`Invalid::PageLimit`](crate::error::Invalid::PageLimit),
    /// [`Invalid::Cursor`](crate::error::Invalid::Cursor) for a cursor from another kind of page or
    /// another search's (other terms; case aside); all before any command.
    pub async fn page(
        &self,
        terms: &str,
        order: SearchOrder,
        request: PageRequest,
    ) -> Result<Page<Post<X>>> {
        Op::FeedSearchPage
            .span()
            .run(async move {
                let terms: Vec<&str> = terms.split_whitespace().take(MAX_TERMS).collect();
                if terms.is_empty() {
                    return Err(Error::InvalidInput {
                        reason: Invalid::Blank {
                            what: "search terms",
                        },
                    });
                }
                request.check()?;
                match order {
                    SearchOrder::Newest => {
                        let after =
                            request.decode_after(|after| cursor::time_key(after, &terms))?;
                        let keyset = after.map(|(created, post)| {
                            doc! { "$or": [
                                { "created": { "$lt": created } },
                                { "created": created, "_id": { "$lt": post.0 } },
                            ] }
                        });
                        let posts = self.newest_matches(&terms, keyset, request.limit).await?;
                        Ok(Page::from_overfetch(posts, request.limit, |last| {
                            cursor::after_time(&terms, last.created, last.id)
                        }))
                    }
                    SearchOrder::BestMatch => {
                        let after =
                            request.decode_after(|after| cursor::score_key(after, &terms))?;
                        let text = self.text_match(&terms).await?;
                        let scored = match text {
                            Some(text) => self.text_best_match(text, after, request.limit).await?,
                            None => self.regex_best_match(&terms, after).await?,
                        };
                        let page = Page::from_overfetch(scored, request.limit, |(score, last)| {
                            cursor::after_score(&terms, *score, last.id)
                        });
                        Ok(page.map(|(_, post)| post))
                    }
                }
            })
            .await
    }

    /// Up to `limit + 1` matches after `keyset`, newest first, in one command: an `aggregate`
    /// with `$text` (MongoDB allows `$text` beside an `$or` only if every `$or` clause is
    /// indexed, so the keyset is a second stage), a `find` with regexes.
    async fn newest_matches(
        &self,
        terms: &[&str],
        keyset: Option<Document>,
        limit: usize,
    ) -> Result<Vec<Post<X>>> {
        let sort = doc! { "created": -1, "_id": -1 };
        let found: Vec<Document> = if let Some(mut pipeline) = self.text_match(terms).await? {
            if let Some(keyset) = keyset {
                pipeline.push(doc! { "$match": keyset });
            }
            pipeline.push(doc! { "$sort": sort });
            pipeline.push(doc! { "$limit": limit as i64 + 1 });
            self.inner
                .collections
                .posts
                .aggregate(pipeline)
                .await?
                .try_collect()
                .await?
        } else {
            let mut filter = regex_filter(terms);
            if let Some(keyset) = keyset {
                filter.extend(keyset);
            }
            self.inner
                .collections
                .posts
                .find(filter)
                .sort(sort)
                .limit(limit as i64 + 1)
                .await?
                .try_collect()
                .await?
        };
        decode_posts(self.inner.collections.posts.name(), found)
    }

    /// The `$match` stages that keep the posts holding every term through the text index, or
    /// `None` where the server has no text search (see [`Dialect::text_search`](crate::backend::dialect::Dialect::text_search)).
    async fn text_match(&self, terms: &[&str]) -> Result<Option<Vec<Document>>> {
        let dialect = self.inner.backend.dialect().await?;
        Ok(dialect.text_search(terms, || regex_filter(terms)))
    }

    /// One `aggregate` after the text index's `$match` stages `pipeline`: score, keyset, sort,
    /// limit.
    async fn text_best_match(
        &self,
        mut pipeline: Vec<Document>,
        after: Option<(f64, PostId)>,
        limit: usize,
    ) -> Result<Vec<(f64, Post<X>)>> {
        pipeline.push(doc! { "$addFields": { "_score": { "$meta": "textScore" } } });
        if let Some((score, post)) = after {
            pipeline.push(doc! { "$match": { "$or": [
                { "_score": { "$lt": score } },
                { "_score": score, "_id": { "$lt": post.0 } },
            ] } });
        }
        pipeline.push(doc! { "$sort": { "_score": -1, "_id": -1 } });
        pipeline.push(doc! { "$limit": limit as i64 + 1 });
        let found: Vec<Document> = self
            .inner
            .collections
            .posts
            .aggregate(pipeline)
            .await?
            .try_collect()
            .await?;
        found
            .into_iter()
            .map(|document| {
                let score = document.get_f64("_score").unwrap_or(0.0);
                Ok((
                    score,
                    bson_ext::decode(self.inner.collections.posts.name(), document)?,
                ))
            })
            .collect()
    }

    /// One `find` of the newest matches, scored and ordered here.
    async fn regex_best_match(
        &self,
        terms: &[&str],
        after: Option<(f64, PostId)>,
    ) -> Result<Vec<(f64, Post<X>)>> {
        let found: Vec<Document> = self
            .inner
            .collections
            .posts
            .find(regex_filter(terms))
            .sort(doc! { "created": -1, "_id": -1 })
            .limit(FALLBACK_CANDIDATES)
            .await?
            .try_collect()
            .await?;
        let lowered: Vec<String> = terms.iter().map(|term| term.to_lowercase()).collect();
        let mut scored: Vec<(f64, Post<X>)> =
            decode_posts::<X>(self.inner.collections.posts.name(), found)?
                .into_iter()
                .map(|post| (fallback_score(&lowered, &post.title, &post.body), post))
                .collect();
        scored.sort_by(|(sa, a), (sb, b)| sb.total_cmp(sa).then(b.id.cmp(&a.id)));
        if let Some((score, last)) = after {
            scored.retain(|(s, post)| match s.total_cmp(&score) {
                std::cmp::Ordering::Less => true,
                std::cmp::Ordering::Equal => post.id < last,
                std::cmp::Ordering::Greater => false,
            });
        }
        Ok(scored)
    }
}

/// Every term, case-insensitively, in the title or the body: a regex per term.
fn regex_filter(terms: &[&str]) -> Document {
    let all: Vec<Bson> = terms
        .iter()
        .map(|term| {
            let pattern = doc! { "$regex": escape_regex(term), "$options": "i" };
            Bson::Document(doc! { "$or": [
                { "title": pattern.clone() },
                { "body": pattern },
            ] })
        })
        .collect();
    doc! { "$and": all }
}

/// Posts read from the collection `posts`.
fn decode_posts<X: Payload>(posts: &str, found: Vec<Document>) -> Result<Vec<Post<X>>> {
    found
        .into_iter()
        .map(|document| bson_ext::decode(posts, document))
        .collect()
}

/// 3 per occurrence of a term in the title, 1 per occurrence in the body (terms lowercased).
fn fallback_score(terms: &[String], title: &str, body: &str) -> f64 {
    let (title, body) = (title.to_lowercase(), body.to_lowercase());
    terms
        .iter()
        .map(|term| {
            (3 * title.matches(term.as_str()).count() + body.matches(term.as_str()).count()) as f64
        })
        .sum()
}

/// `text` as a regex matching itself literally.
fn escape_regex(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\^$.|?*+()[]{}/-".contains(c) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regex_escaping_and_scores() {
        assert_eq!(escape_regex("a.b*(c)"), r"a\.b\*\(c\)");
        let terms = vec!["rust".to_owned()];
        assert_eq!(fallback_score(&terms, "Rust and rust", "rust"), 7.0);
        assert_eq!(fallback_score(&terms, "Go", "none"), 0.0);
    }
}
