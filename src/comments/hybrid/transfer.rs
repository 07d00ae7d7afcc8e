//! [`CommentTransfer`] for [`HybridPages`]: exports page by page, imports that fill whole
//! pages in the export's order.

use std::collections::HashSet;

use async_trait::async_trait;
use bson::{doc, Document};
use futures::stream::BoxStream;

use super::{check_slug, page_id, Entry, HybridPages, FLOOR, LAST_POSTED};
use crate::comments::body::Body;
use crate::comments::engine::TransferEngine;
use crate::comments::keyed::StoredKey;
use crate::comments::model::HeldComment;
use crate::comments::transfer;
use crate::Result;

/// The entries an import stores, in the export's order: each keeps its slug where it is one of
/// this strategy's, otherwise gets one derived from its link, salted until it is unique.
fn imported_entries(comments: &[HeldComment]) -> Vec<Entry> {
    let mut slugs: HashSet<String> = HashSet::new();
    let mut entries = Vec::with_capacity(comments.len());
    for comment in comments {
        let mut slug = if check_slug(&comment.link).is_ok() {
            comment.link.clone()
        } else {
            derived_slug(&comment.link, 0)
        };
        let mut salt = 1;
        while !slugs.insert(slug.clone()) {
            slug = derived_slug(&comment.link, salt);
            salt += 1;
        }
        entries.push(Entry {
            slug,
            body: Body::held(comment),
            ups: comment.votes.ups as i64,
            downs: comment.votes.downs as i64,
            key: StoredKey::default(),
        });
    }
    entries
}

/// The pages an import inserts, with what the discussion's page counter records.
struct ImportedPages {
    pages: Vec<Document>,
    /// The newest posting time of the page before the last.
    floor: Option<bson::DateTime>,
    last_page: i64,
}

impl HybridPages {
    /// `entries` cut into full pages of `page_size` (the last one possibly shorter).
    fn imported_pages(&self, discussion: &str, entries: &[Entry]) -> Result<ImportedPages> {
        let mut pages = Vec::new();
        let mut floor = None;
        let mut last_page = 0_i64;
        for (number, chunk) in entries.chunks(self.page_size.max(1)).enumerate() {
            let number = number as i64;
            let last_posted = chunk.iter().map(|e| e.body.posted).max();
            let mut page = doc! {
                "_id": page_id(discussion, number),
                "discussion_id": discussion,
                "page": number,
                "count": chunk.len() as i64,
                "visible": chunk.iter().filter(|e| !e.body.deleted).count() as i64,
                super::super::votes::VOTE_OPS: [],
                "comments": bson::to_bson(chunk)?,
            };
            if let Some(last_posted) = last_posted {
                page.insert(LAST_POSTED, last_posted);
            }
            if number > 0 {
                floor = pages
                    .last()
                    .and_then(|p: &Document| p.get_datetime(LAST_POSTED).ok().copied());
            }
            last_page = number;
            pages.push(page);
        }
        Ok(ImportedPages {
            pages,
            floor,
            last_page,
        })
    }
}
#[async_trait]
impl TransferEngine for HybridPages {
    async fn discussions(&self, after: Option<String>) -> Result<BoxStream<'_, Result<String>>> {
        transfer::ids_after(&self.registry.discussions, doc! {}, after).await
    }

    async fn export(&self, discussion: &str) -> Result<Vec<HeldComment>> {
        transfer::export_with(self, discussion, async {
            let pages = self
                .backend
                .find_all("export comments", || {
                    self.pages
                        .find(doc! { "discussion_id": discussion })
                        .sort(doc! { "page": 1 })
                })
                .await?;
            let mut comments = Vec::new();
            for page in pages {
                let page: super::PageDocument = crate::bson_ext::decode(self.pages.name(), page)?;
                comments.extend(page.comments.iter().map(|e| HeldComment::of(e.comment())));
            }
            Ok(comments)
        })
        .await
    }

    /// Refuses a reply (this strategy has no threads) before anything is written. Keeps a
    /// comment's slug where it is one of this strategy's; fills pages of `page_size` in the
    /// export's order.
    async fn import(&self, discussion: &str, comments: &[HeldComment]) -> Result<Vec<String>> {
        transfer::refuse_replies(discussion, comments)?;
        let entries = imported_entries(comments);
        let links: Vec<String> = entries.iter().map(|e| e.slug.clone()).collect();
        let ImportedPages {
            pages,
            floor,
            last_page,
        } = self.imported_pages(discussion, &entries)?;
        TransferEngine::purge(self, discussion).await?;
        let mut counter = doc! { "last_page": last_page };
        if let Some(floor) = floor {
            counter.insert(FLOOR, floor);
        }
        self.backend
            .command("register discussion", || {
                self.registry
                    .discussions
                    .update_one(doc! { "_id": discussion }, doc! { "$set": counter.clone() })
                    .upsert(true)
            })
            .await?;
        if !pages.is_empty() {
            self.backend.insert_many_once(&self.pages, pages).await?;
        }
        transfer::import_votes(self, discussion, comments, links).await
    }

    async fn purge(&self, discussion: &str) -> Result<()> {
        self.backend
            .retry("purge discussion", || async {
                self.pages
                    .delete_many(doc! { "discussion_id": discussion })
                    .await?;
                self.registry
                    .discussions
                    .update_one(
                        doc! { "_id": discussion },
                        doc! { "$set": { "last_page": 0_i64 }, "$unset": { FLOOR: "" } },
                    )
                    .await?;
                Ok(())
            })
            .await?;
        transfer::purge_votes(&self.votes, Some(discussion)).await
    }

    async fn purge_all(&self) -> Result<()> {
        let own = [&self.pages, &self.registry.discussions];
        transfer::purge_all(self, &self.backend, &own).await
    }

    async fn is_empty(&self) -> Result<bool> {
        Ok(self
            .pages
            .find_one(doc! { "count": { "$gt": 0 } })
            .await?
            .is_none())
    }

    /// None: this strategy has no threads.
    async fn threaded_discussion(&self, _within: Option<&[String]>) -> Result<Option<String>> {
        Ok(None)
    }

    fn data_collections(&self) -> Vec<String> {
        transfer::data_collections(self, &[&self.pages, &self.registry.discussions])
    }
}

/// A slug derived from a source link (and `salt`, after a collision): 16 hex digits, the same
/// for every import of the link.
fn derived_slug(link: &str, salt: u64) -> String {
    let mut hash = 0xcbf2_9ce4_8422_2325_u64 ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for byte in link.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}
