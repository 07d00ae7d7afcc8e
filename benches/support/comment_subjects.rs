//! The comment strategies under measurement, ours (`mongo_social::comments`) and the manual's
//! (`seed_comments`), behind one face: set a discussion up, fill it, post, reply, read a page.
//! Shared by `benches/comments.rs` and `examples/compare`; each binary uses a part of it.

#![allow(dead_code)]

use std::sync::Arc;

use bson::{doc, Document};
use futures::StreamExt;
use mongo_social::comments::{
    Author, CommentStore, Embedded, HybridPages, NewComment, Order, PerComment,
};
use mongo_social::{Cursor, PageRequest};
use mongodb::Database;

use crate::seed_comments::{SeedComments, SeedServer, SeedView};

/// What the helpers here return on failure.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Comments per page read.
pub const PAGE: usize = 50;
/// The discussion every subject posts to and reads.
pub const DISCUSSION: &str = "article-1";
/// Authors taking turns.
const AUTHORS: u64 = 8;
/// The 16 MiB document limit an embedded discussion must fit, less the 64 KiB our embedded
/// strategy keeps for the application's own fields.
const EMBEDDED_MAX_BYTES: usize = 16 * 1024 * 1024 - 64 * 1024;
/// Bytes an embedded comment costs its document beyond its encoding (array index key, and some
/// slack), as our embedded strategy counts them.
const EMBEDDED_ELEMENT_OVERHEAD: usize = 32;

/// What the server offers that changes how the strategies may run.
#[derive(Clone, Copy, Debug)]
pub struct Server {
    /// Whether single-document updates are atomic (MongoDB; not FerretDB 1.x).
    pub atomic_updates: bool,
    /// What the seed baselines may ask of the server.
    pub seed: SeedServer,
}

impl Server {
    pub fn of(info: &mongo_social::server::ServerInfo) -> Self {
        let capabilities = info.capabilities();
        Self {
            atomic_updates: capabilities.atomic_updates,
            seed: SeedServer {
                // The seeds' pages may start past the end of an array.
                slice_projection: capabilities.slice_projection && capabilities.slice_past_end,
                find_and_modify_projection: capabilities.find_and_modify_projection,
            },
        }
    }
}

/// What is measured: one of our strategies or one of the manual's.
pub enum Kind {
    Ours(Arc<dyn CommentStore>),
    Seed(SeedComments),
}

/// A strategy in its own database.
pub struct Subject {
    pub kind: Kind,
    pub db: Database,
    pub name: &'static str,
}

/// Our three strategies and the manual's three, each in the database `database(name)` gives.
pub fn subjects(mut database: impl FnMut(&str) -> Database) -> Vec<Subject> {
    let mut subjects = Vec::new();
    for name in ["per-comment", "embedded", "hybrid-pages"] {
        let db = database(name);
        let store: Arc<dyn CommentStore> = match name {
            "per-comment" => Arc::new(PerComment::new(&db)),
            "embedded" => Arc::new(Embedded::new(&db)),
            _ => Arc::new(HybridPages::new(&db)),
        };
        debug_assert_eq!(store.strategy().name(), name);
        subjects.push(Subject {
            kind: Kind::Ours(store),
            db,
            name,
        });
    }
    for seed in SeedComments::ALL {
        subjects.push(Subject {
            kind: Kind::Seed(seed),
            db: database(seed.name()),
            name: seed.name(),
        });
    }
    subjects
}

/// Which order a page is read in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    Chronological,
    Threaded,
}

impl View {
    pub fn name(self) -> &'static str {
        match self {
            View::Chronological => "chronological",
            View::Threaded => "threaded",
        }
    }

    fn seed(self) -> SeedView {
        match self {
            View::Chronological => SeedView::Chronological,
            View::Threaded => SeedView::Threaded,
        }
    }
}

/// One page to read: where it starts, and how each kind of subject gets there.
pub struct PageCase {
    pub view: View,
    /// `first` or `end`.
    pub place: &'static str,
    /// Our strategies: the keyset cursor before the page (`None` for the first page).
    pub cursor: Option<Cursor>,
    /// The seeds: `page_num` for `skip(page_num * PAGE)`.
    pub page_num: usize,
}

/// Comment `i`: a 64-character text.
fn text(i: u64) -> String {
    format!("{:.<64}", format!("comment {i} by user{} ", i % AUTHORS))
}

/// The author of comment `i`.
fn author(i: u64) -> Author {
    let user = i % AUTHORS;
    Author::new(format!("user{user}"), format!("User {user}"))
}

/// The manual's `author_info`: `{id, name}`.
fn seed_author(i: u64) -> Document {
    let author = author(i);
    doc! { "id": author.id, "name": author.name }
}

impl Subject {
    pub fn threaded(&self) -> bool {
        match &self.kind {
            Kind::Ours(store) => store.threaded().is_some(),
            Kind::Seed(seed) => seed.threaded(),
        }
    }

    pub fn is_embedded(&self) -> bool {
        match &self.kind {
            Kind::Ours(store) => store.strategy().name() == "embedded",
            Kind::Seed(seed) => *seed == SeedComments::Embedded,
        }
    }

    /// The views this strategy can page in.
    pub fn views(&self) -> &'static [View] {
        if self.threaded() {
            &[View::Chronological, View::Threaded]
        } else {
            &[View::Chronological]
        }
    }

    /// Indexes and the discussion.
    pub async fn setup(&self) -> Result<(), BoxError> {
        match &self.kind {
            Kind::Ours(store) => {
                store.create_indexes().await?;
                store.create_discussion(DISCUSSION).await?;
            }
            Kind::Seed(seed) => {
                seed.create_indexes(&self.db).await?;
                seed.create_discussion(&self.db, DISCUSSION).await?;
            }
        }
        Ok(())
    }

    /// Posts top-level comment `i`; returns its link where the strategy hands one back.
    pub async fn post(&self, server: Server, i: u64) -> Result<Option<String>, BoxError> {
        Ok(match &self.kind {
            Kind::Ours(store) => Some(
                store
                    .post(DISCUSSION, NewComment::new(author(i), text(i)))
                    .await?
                    .link,
            ),
            Kind::Seed(seed) => {
                seed.post(&self.db, server.seed, DISCUSSION, &seed_author(i), &text(i))
                    .await?
            }
        })
    }

    /// Posts comment `i` as a reply to `parent`.
    pub async fn reply(&self, parent: &str, i: u64) -> Result<(), BoxError> {
        match &self.kind {
            Kind::Ours(store) => {
                let threads = store.threaded().ok_or("not a threaded strategy")?;
                threads
                    .reply(DISCUSSION, parent, NewComment::new(author(i), text(i)))
                    .await?;
            }
            Kind::Seed(seed) => {
                seed.reply(&self.db, DISCUSSION, parent, &seed_author(i), &text(i))
                    .await?;
            }
        }
        Ok(())
    }

    /// How many posts may run at once while filling without breaking the strategy: up to `max`
    /// where posts are independent, else 1 (a discussion lock would serialise them anyway on
    /// a server without atomic updates; the manual's page counter is racy).
    pub fn fill_tasks(&self, server: Server, max: usize) -> usize {
        let concurrent = match &self.kind {
            Kind::Ours(store) => store.strategy().name() == "per-comment" || server.atomic_updates,
            Kind::Seed(SeedComments::PerComment) => true,
            Kind::Seed(SeedComments::Embedded) => server.atomic_updates,
            Kind::Seed(SeedComments::Hybrid) => false,
        };
        if concurrent {
            max
        } else {
            1
        }
    }

    /// Posts top-level comments `from..to` (`max_tasks` at a time where the strategy allows) and
    /// returns their links (positions for the seed's embedded design). The discussion must be
    /// set up and hold `from` comments.
    pub async fn fill(
        &self,
        server: Server,
        from: u64,
        to: u64,
        max_tasks: usize,
    ) -> Result<Vec<String>, BoxError> {
        let links: Vec<Option<String>> = futures::stream::iter(from..to)
            .map(|i| self.post(server, i))
            .buffer_unordered(self.fill_tasks(server, max_tasks))
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()?;
        if let Kind::Ours(store) = &self.kind {
            let count = store.count(DISCUSSION).await?;
            if count != to {
                return Err(
                    format!("{}: {count} comments after the fill, not {to}", self.name).into(),
                );
            }
        }
        let links: Vec<String> = links.into_iter().flatten().collect();
        Ok(if links.is_empty() && self.threaded() {
            // The seed's embedded design: position paths.
            (from..to).map(|i| i.to_string()).collect()
        } else {
            links
        })
    }

    /// The page `case` describes; returns how many comments it held.
    pub async fn read(&self, server: Server, case: &PageCase) -> Result<usize, BoxError> {
        Ok(match &self.kind {
            Kind::Ours(store) => {
                let request = PageRequest {
                    limit: PAGE,
                    after: case.cursor.clone(),
                };
                self.ours_page(store.as_ref(), case.view, request).await?.0
            }
            Kind::Seed(seed) => seed
                .page(
                    &self.db,
                    server.seed,
                    DISCUSSION,
                    case.view.seed(),
                    case.page_num,
                    PAGE,
                )
                .await?
                .len(),
        })
    }

    /// One page, oldest first, of one of our strategies: how many comments, and the cursor
    /// after them.
    async fn ours_page(
        &self,
        store: &dyn CommentStore,
        view: View,
        request: PageRequest,
    ) -> Result<(usize, Option<Cursor>), BoxError> {
        let order = Order::OldestFirst;
        let page = match view {
            View::Chronological => store.chronological(DISCUSSION, order, request).await?,
            View::Threaded => {
                store
                    .threaded()
                    .ok_or("not a threaded strategy")?
                    .thread_page(DISCUSSION, order, request)
                    .await?
            }
        };
        Ok((page.items.len(), page.next))
    }

    /// Our strategies: the cursor after the first `offset` comments of `view`, found by paging
    /// through (up to `PageRequest::MAX_LIMIT` comments a page).
    pub async fn cursor_at(&self, view: View, offset: usize) -> Result<Option<Cursor>, BoxError> {
        let Kind::Ours(store) = &self.kind else {
            return Ok(None);
        };
        let mut cursor = None;
        let mut remaining = offset;
        while remaining > 0 {
            let take = remaining.min(PageRequest::MAX_LIMIT);
            let request = PageRequest {
                limit: take,
                after: cursor.take(),
            };
            let (len, next) = self.ours_page(store.as_ref(), view, request).await?;
            if len != take {
                let view = view.name();
                return Err(format!("{}: {view} page of {len}, not {take}", self.name).into());
            }
            cursor = next;
            remaining -= take;
        }
        Ok(cursor)
    }

    /// The first page and the last full page of every view of a discussion of `m` comments,
    /// with the cursors our strategies need to get there. The last page starts at the last multiple
    /// of `PAGE` up to `m - PAGE` (so `skip`-based seeds read the same comments as our keyset
    /// pages): offset `m - PAGE` when `m` is a multiple of `PAGE`.
    pub async fn page_cases(&self, m: u64) -> Result<Vec<PageCase>, BoxError> {
        let end = (m as usize).saturating_sub(PAGE) / PAGE * PAGE;
        let mut cases = Vec::new();
        for &view in self.views() {
            for (place, offset) in [("first", 0), ("end", end)] {
                if place == "end" && offset == 0 {
                    continue;
                }
                cases.push(PageCase {
                    view,
                    place,
                    cursor: self.cursor_at(view, offset).await?,
                    page_num: offset / PAGE,
                });
            }
        }
        Ok(cases)
    }

    /// `Err(reason)` when this is an embedded strategy whose discussion of `m` comments would
    /// not fit one 16 MiB document.
    pub fn fits(&self, m: u64) -> Result<(), String> {
        if !self.is_embedded() {
            return Ok(());
        }
        let per_comment = self.embedded_comment_bytes();
        let bytes = per_comment as u64 * m;
        if bytes <= EMBEDDED_MAX_BYTES as u64 {
            return Ok(());
        }
        Err(format!(
            "{m} comments of about {per_comment} bytes each (encoded, with array overhead) come \
             to about {:.1} MiB, past the 16 MiB document limit less 64 KiB (room for about {} \
             comments)",
            bytes as f64 / (1024.0 * 1024.0),
            EMBEDDED_MAX_BYTES / per_comment,
        ))
    }

    /// The bytes one comment of this embedded strategy adds to the discussion document.
    fn embedded_comment_bytes(&self) -> usize {
        let comment = match &self.kind {
            // Our embedded node: id, posted, author, text, deleted.
            Kind::Ours(_) => doc! {
                "id": bson::oid::ObjectId::new(),
                "posted": bson::DateTime::now(),
                "author": seed_author(0),
                "text": text(100_000),
                "deleted": false,
            },
            Kind::Seed(_) => doc! {
                "posted": bson::DateTime::now(),
                "author": seed_author(0),
                "text": text(100_000),
            },
        };
        bson::to_vec(&comment).expect("encode").len() + EMBEDDED_ELEMENT_OVERHEAD
    }
}
