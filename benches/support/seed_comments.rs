//! The MongoDB manual's "Storing Comments" designs (seed 001), implemented literally with plain
//! driver calls, as a user who copied the manual's Python would write them. These are baselines to
//! compare the `comments` module against, not library code: no validation, no lock, no cursor,
//! `skip`-based pages, and the manual's quirks kept (4-hex pseudorandom slugs without a unique
//! index, `full_slug` steps with one-second resolution, pages that pass 100 comments).
//!
//! | design | collections | post | reply | read a page (`page_num`, `page_size`) |
//! |---|---|---|---|---|
//! | per-comment | `comments {discussion_id, slug, full_slug, posted, author, text}` | 1 `insert` | `find_one` parent by slug, `insert` | `find({discussion_id}).sort(posted or full_slug).skip(page_num * page_size).limit(page_size)` |
//! | embedded | `discussion {_id, comments: [{posted, author, text, replies}]}` | `update` `$push` | `update` `$push` onto `comments.<i>.replies...` | `find_one` with `comments: {$slice: [skip, limit]}`; threaded: the whole document, paged here |
//! | hybrid | `discussion {_id, num_pages}`, `comment_pages {discussion_id, page, count, comments}` | `find_one` the discussion, upserting `findAndModify` (`$inc count`, `$push`) on page `num_pages`, and when `count > 100` `update({_id, num_pages}, {$inc: {num_pages: 1}})` | none (the manual leaves threads out) | per page from the first: `find_one({discussion_id, page})` with `comments: {$slice: [skip, limit]}`, then `skip -= count`, `limit -= returned` |
//!
//! Deliberate deviations, each where the manual's own code cannot run as printed:
//! - Embedded: the manual filters its `update` on `discussion_id` but says the discussion is
//!   found by `_id` ("you can rely on the index MongoDB creates automatically"); here the
//!   discussion's `_id` is the discussion id. Its reply code builds the field path
//!   `replies.0.replies.2` and strips the leading `replies.`, leaving a path without the
//!   `comments.` prefix; here the path is `comments.0.replies.2.replies`.
//! - Hybrid: the manual assumes the `discussion` document is at hand; here each post reads it
//!   (`find_one` by `_id`) to learn `num_pages`, as a stateless web request must. Its paging code
//!   issues one query whose `$slice: [skip, limit]` is fixed before the loop adjusts `skip`, which
//!   returns the wrong comments past the first page; here each page gets its own query with the
//!   `$slice` the manual's worked example (skip 300, limit 50 over pages of 100, 102, 101, 22)
//!   describes.
//! - On servers without `$slice` projections (FerretDB 1.x) the same queries read whole documents
//!   and the slice is taken here; on servers without a projection in `findAndModify` (FerretDB
//!   1.x) the hybrid post reads back the whole page instead of `fields={'count': 1}`.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::ReturnDocument;
use mongodb::{Database, IndexModel};

/// The manual's soft limit: a new page is started once a page holds more than 100 comments.
pub const SEED_PAGE_SOFT_LIMIT: i64 = 100;

/// What the server lets the baselines ask for.
#[derive(Clone, Copy, Debug)]
pub struct SeedServer {
    /// `$slice` in a `find` projection.
    pub slice_projection: bool,
    /// A projection (`fields`) in `findAndModify`.
    pub find_and_modify_projection: bool,
}

/// Which order a page is read in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeedView {
    /// By `posted` (per-comment), by array position (embedded, hybrid).
    Chronological,
    /// By `full_slug` (per-comment); depth first over the whole document (embedded).
    Threaded,
}

/// One of the manual's three designs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeedComments {
    /// "One Document per Comment", threaded with `slug` and `full_slug`.
    PerComment,
    /// "Embedding All Comments" in the discussion's document.
    Embedded,
    /// "Hybrid Schema Design": pages of about 100 comments.
    Hybrid,
}

impl SeedComments {
    /// The three designs, in the manual's order.
    pub const ALL: [SeedComments; 3] = [
        SeedComments::PerComment,
        SeedComments::Embedded,
        SeedComments::Hybrid,
    ];

    /// A display name, such as `"seed per-comment"`.
    pub fn name(self) -> &'static str {
        match self {
            SeedComments::PerComment => "seed per-comment",
            SeedComments::Embedded => "seed embedded",
            SeedComments::Hybrid => "seed hybrid",
        }
    }

    /// Whether the manual gives the design replies and a threaded view.
    pub fn threaded(self) -> bool {
        !matches!(self, SeedComments::Hybrid)
    }

    /// Creates the manual's indexes, one command each: `(discussion_id, posted)`,
    /// `(discussion_id, full_slug)` and `(discussion_id, slug)` for per-comment; none for
    /// embedded (found by `_id`); `(discussion_id, page)` and `(discussion_id, comments.slug)` on
    /// `comment_pages` for hybrid.
    pub async fn create_indexes(self, db: &Database) -> mongodb::error::Result<()> {
        let keys: Vec<(&str, Document)> = match self {
            SeedComments::PerComment => vec![
                ("comments", doc! { "discussion_id": 1, "posted": 1 }),
                ("comments", doc! { "discussion_id": 1, "full_slug": 1 }),
                ("comments", doc! { "discussion_id": 1, "slug": 1 }),
            ],
            SeedComments::Embedded => Vec::new(),
            SeedComments::Hybrid => vec![
                ("comment_pages", doc! { "discussion_id": 1, "page": 1 }),
                (
                    "comment_pages",
                    doc! { "discussion_id": 1, "comments.slug": 1 },
                ),
            ],
        };
        for (collection, keys) in keys {
            db.collection::<Document>(collection)
                .create_index(IndexModel::builder().keys(keys).build())
                .await?;
        }
        Ok(())
    }

    /// Creates the discussion's document where the design has one: `{_id, comments: []}` for
    /// embedded, `{_id, num_pages: 0}` for hybrid.
    pub async fn create_discussion(
        self,
        db: &Database,
        discussion_id: &str,
    ) -> mongodb::error::Result<()> {
        let discussion = db.collection::<Document>("discussion");
        match self {
            SeedComments::PerComment => {}
            SeedComments::Embedded => {
                discussion
                    .insert_one(doc! { "_id": discussion_id, "comments": [] })
                    .await?;
            }
            SeedComments::Hybrid => {
                discussion
                    .insert_one(doc! { "_id": discussion_id, "num_pages": 0_i64 })
                    .await?;
            }
        }
        Ok(())
    }

    /// Posts a top-level comment the manual's way; returns its slug where the design has one
    /// (per-comment). An embedded comment's link is its position, which the `$push` does not
    /// return.
    pub async fn post(
        self,
        db: &Database,
        server: SeedServer,
        discussion_id: &str,
        author: &Document,
        text: &str,
    ) -> mongodb::error::Result<Option<String>> {
        match self {
            SeedComments::PerComment => {
                per_comment_post(db, discussion_id, None, author, text).await
            }
            SeedComments::Embedded => {
                embedded_post(db, discussion_id, &[], author, text).await?;
                Ok(None)
            }
            SeedComments::Hybrid => {
                hybrid_post(db, server, discussion_id, author, text).await?;
                Ok(None)
            }
        }
    }

    /// Replies to `parent`: a slug path (per-comment) or a position path such as `3` or `3.0`
    /// (embedded). Hybrid has no replies.
    pub async fn reply(
        self,
        db: &Database,
        discussion_id: &str,
        parent: &str,
        author: &Document,
        text: &str,
    ) -> mongodb::error::Result<()> {
        match self {
            SeedComments::PerComment => {
                per_comment_post(db, discussion_id, Some(parent), author, text).await?;
            }
            SeedComments::Embedded => {
                let path: Vec<usize> = parent
                    .split('.')
                    .map(|part| part.parse().expect("a position path"))
                    .collect();
                embedded_post(db, discussion_id, &path, author, text).await?;
            }
            SeedComments::Hybrid => {
                return Err(mongodb::error::Error::custom(
                    "the manual's hybrid design has no replies",
                ))
            }
        }
        Ok(())
    }

    /// Page `page_num` (from 0) of `page_size` comments in `view`, the manual's way.
    pub async fn page(
        self,
        db: &Database,
        server: SeedServer,
        discussion_id: &str,
        view: SeedView,
        page_num: usize,
        page_size: usize,
    ) -> mongodb::error::Result<Vec<Document>> {
        match (self, view) {
            (SeedComments::PerComment, view) => {
                per_comment_page(db, discussion_id, view, page_num, page_size).await
            }
            (SeedComments::Embedded, SeedView::Chronological) => {
                embedded_page(db, server, discussion_id, page_num, page_size).await
            }
            (SeedComments::Embedded, SeedView::Threaded) => {
                embedded_thread_page(db, discussion_id, page_num, page_size).await
            }
            (SeedComments::Hybrid, SeedView::Chronological) => {
                hybrid_find_comments(db, server, discussion_id, page_num * page_size, page_size)
                    .await
            }
            (SeedComments::Hybrid, SeedView::Threaded) => Err(mongodb::error::Error::custom(
                "the manual's hybrid design has no threaded view",
            )),
        }
    }
}

/// `generate_pseudorandom_slug()`: 4 hex digits, as in the manual's `'34db'`.
pub fn generate_pseudorandom_slug() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    format!("{:04x}", hasher.finish() & 0xffff)
}

/// The manual's threaded insert:
///
/// ```text
/// posted = datetime.utcnow()
/// slug_part = generate_pseudorandom_slug()
/// full_slug_part = posted.strftime('%Y.%m.%d.%H.%M.%S') + ':' + slug_part
/// if parent_slug:
///     parent = db.comments.find_one({'discussion_id': discussion_id, 'slug': parent_slug })
///     slug = parent['slug'] + '/' + slug_part
///     full_slug = parent['full_slug'] + '/' + full_slug_part
/// else:
///     slug = slug_part
///     full_slug = full_slug_part
/// db.comments.insert({'discussion_id': discussion_id, 'slug': slug, 'full_slug': full_slug,
///                     'posted': posted, 'author': author_info, 'text': comment_text })
/// ```
pub async fn per_comment_post(
    db: &Database,
    discussion_id: &str,
    parent_slug: Option<&str>,
    author: &Document,
    text: &str,
) -> mongodb::error::Result<Option<String>> {
    let comments = db.collection::<Document>("comments");
    let posted = bson::DateTime::now();
    let slug_part = generate_pseudorandom_slug();
    let full_slug_part = format!(
        "{}:{slug_part}",
        posted.to_chrono().format("%Y.%m.%d.%H.%M.%S")
    );
    let (slug, full_slug) = match parent_slug {
        Some(parent_slug) => {
            let parent = comments
                .find_one(doc! { "discussion_id": discussion_id, "slug": parent_slug })
                .await?
                .ok_or_else(|| {
                    mongodb::error::Error::custom(format!("no parent comment {parent_slug}"))
                })?;
            (
                format!("{}/{slug_part}", parent.get_str("slug").unwrap_or_default()),
                format!(
                    "{}/{full_slug_part}",
                    parent.get_str("full_slug").unwrap_or_default()
                ),
            )
        }
        None => (slug_part, full_slug_part),
    };
    comments
        .insert_one(doc! {
            "discussion_id": discussion_id,
            "slug": &slug,
            "full_slug": full_slug,
            "posted": posted,
            "author": author.clone(),
            "text": text,
        })
        .await?;
    Ok(Some(slug))
}

/// ```text
/// cursor = db.comments.find({'discussion_id': discussion_id})
/// cursor = cursor.sort('posted')          # or 'full_slug' for the threaded view
/// cursor = cursor.skip(page_num * page_size)
/// cursor = cursor.limit(page_size)
/// ```
pub async fn per_comment_page(
    db: &Database,
    discussion_id: &str,
    view: SeedView,
    page_num: usize,
    page_size: usize,
) -> mongodb::error::Result<Vec<Document>> {
    let sort = match view {
        SeedView::Chronological => doc! { "posted": 1 },
        SeedView::Threaded => doc! { "full_slug": 1 },
    };
    db.collection::<Document>("comments")
        .find(doc! { "discussion_id": discussion_id })
        .sort(sort)
        .skip((page_num * page_size) as u64)
        .limit(page_size as i64)
        .await?
        .try_collect()
        .await
}

/// `db.discussion.update({_id}, {'$push': {'comments': {posted, author, text}}})`, or for a
/// reply to the comment at position `path`, the same `$push` onto
/// `comments.<path[0]>.replies.<path[1]>...replies`.
pub async fn embedded_post(
    db: &Database,
    discussion_id: &str,
    path: &[usize],
    author: &Document,
    text: &str,
) -> mongodb::error::Result<()> {
    let field = if path.is_empty() {
        "comments".to_owned()
    } else {
        let steps: Vec<String> = path.iter().map(|i| i.to_string()).collect();
        format!("comments.{}.replies", steps.join(".replies."))
    };
    db.collection::<Document>("discussion")
        .update_one(
            doc! { "_id": discussion_id },
            doc! { "$push": { field: {
                "posted": bson::DateTime::now(),
                "author": author.clone(),
                "text": text,
            } } },
        )
        .await?;
    Ok(())
}

/// `db.discussion.find_one({_id}, {'comments': {'$slice': [page_num * page_size, page_size]}})`
/// (on a server without `$slice` projections: the whole document, sliced here).
pub async fn embedded_page(
    db: &Database,
    server: SeedServer,
    discussion_id: &str,
    page_num: usize,
    page_size: usize,
) -> mongodb::error::Result<Vec<Document>> {
    let skip = page_num * page_size;
    let discussion = db.collection::<Document>("discussion");
    let mut find = discussion.find_one(doc! { "_id": discussion_id });
    if server.slice_projection {
        find = find.projection(doc! { "comments": { "$slice": [skip as i32, page_size as i32] } });
    }
    let Some(found) = find.await? else {
        return Ok(Vec::new());
    };
    let comments = documents(&found, "comments");
    Ok(if server.slice_projection {
        comments
    } else {
        comments.into_iter().skip(skip).take(page_size).collect()
    })
}

/// The threaded embedded page: "retrieve the whole document and paginate the comments in the
/// application", depth first (each comment, then its `replies`).
pub async fn embedded_thread_page(
    db: &Database,
    discussion_id: &str,
    page_num: usize,
    page_size: usize,
) -> mongodb::error::Result<Vec<Document>> {
    let Some(found) = db
        .collection::<Document>("discussion")
        .find_one(doc! { "_id": discussion_id })
        .await?
    else {
        return Ok(Vec::new());
    };
    fn walk(comments: Vec<Document>, out: &mut Vec<Document>) {
        for mut comment in comments {
            let replies = documents(&comment, "replies");
            comment.remove("replies");
            out.push(comment);
            walk(replies, out);
        }
    }
    let mut flat = Vec::new();
    walk(documents(&found, "comments"), &mut flat);
    Ok(flat
        .into_iter()
        .skip(page_num * page_size)
        .take(page_size)
        .collect())
}

/// The manual's hybrid post:
///
/// ```text
/// page = db.comment_pages.find_and_modify(
///     { 'discussion_id': discussion['_id'], 'page': discussion['num_pages'] },
///     { '$inc': { 'count': 1 }, '$push': { 'comments': { 'slug': slug, ... } } },
///     fields={'count': 1}, upsert=True, new=True)
/// if page['count'] > 100:
///     db.discussion.update(
///         { 'discussion_id': discussion['_id'], 'num_pages': discussion['num_pages'] },
///         { '$inc': { 'num_pages': 1 } })
/// ```
///
/// with the `discussion` document read first (`find_one` by `_id`), and the discussion's `_id`
/// in the counter update's filter (the discussion document has no `discussion_id`).
pub async fn hybrid_post(
    db: &Database,
    server: SeedServer,
    discussion_id: &str,
    author: &Document,
    text: &str,
) -> mongodb::error::Result<()> {
    let discussions = db.collection::<Document>("discussion");
    let discussion = discussions
        .find_one(doc! { "_id": discussion_id })
        .await?
        .ok_or_else(|| mongodb::error::Error::custom(format!("no discussion {discussion_id}")))?;
    let num_pages = number(&discussion, "num_pages");
    let pages = db.collection::<Document>("comment_pages");
    let mut find_and_modify = pages
        .find_one_and_update(
            doc! { "discussion_id": discussion_id, "page": num_pages },
            doc! {
                "$inc": { "count": 1 },
                "$push": { "comments": {
                    "slug": generate_pseudorandom_slug(),
                    "posted": bson::DateTime::now(),
                    "author": author.clone(),
                    "text": text,
                } },
            },
        )
        .upsert(true)
        .return_document(ReturnDocument::After);
    if server.find_and_modify_projection {
        find_and_modify = find_and_modify.projection(doc! { "count": 1 });
    }
    let page = find_and_modify
        .await?
        .ok_or_else(|| mongodb::error::Error::custom("the upsert returned no page"))?;
    if number(&page, "count") > SEED_PAGE_SOFT_LIMIT {
        discussions
            .update_one(
                doc! { "_id": discussion_id, "num_pages": num_pages },
                doc! { "$inc": { "num_pages": 1 } },
            )
            .await?;
    }
    Ok(())
}

/// The manual's `find_comments(discussion_id, skip, limit)`, one query per page as its worked
/// example describes: from page 0 up, `find_one({discussion_id, page}, {count: 1, comments:
/// {$slice: [skip, limit]}})`, keep what it returns, `skip = max(0, skip - count)`,
/// `limit -= returned`, until `limit` is 0 or no page is left.
pub async fn hybrid_find_comments(
    db: &Database,
    server: SeedServer,
    discussion_id: &str,
    mut skip: usize,
    mut limit: usize,
) -> mongodb::error::Result<Vec<Document>> {
    let pages = db.collection::<Document>("comment_pages");
    let mut result = Vec::new();
    let mut page_number = 0_i64;
    while limit > 0 {
        let mut find = pages.find_one(doc! { "discussion_id": discussion_id, "page": page_number });
        if server.slice_projection {
            find = find.projection(doc! {
                "count": 1,
                "comments": { "$slice": [skip as i32, limit as i32] },
            });
        }
        let Some(page) = find.await? else {
            break;
        };
        let mut comments = documents(&page, "comments");
        if !server.slice_projection {
            comments = comments.into_iter().skip(skip).take(limit).collect();
        }
        skip = skip.saturating_sub(number(&page, "count").max(0) as usize);
        limit -= comments.len().min(limit);
        result.extend(comments);
        page_number += 1;
    }
    Ok(result)
}

/// The documents of the array `field`, or none.
fn documents(document: &Document, field: &str) -> Vec<Document> {
    match document.get_array(field) {
        Ok(array) => array
            .iter()
            .filter_map(|value| match value {
                Bson::Document(document) => Some(document.clone()),
                _ => None,
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// An integer field, 0 when missing.
fn number(document: &Document, field: &str) -> i64 {
    match document.get(field) {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(n)) => *n as i64,
        _ => 0,
    }
}
