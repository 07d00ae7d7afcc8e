//! [`CommentTransfer`] for [`PerComment`]: discussions from the registry, exports in posting
//! order, imports that keep slug paths where they are this strategy's.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use bson::{doc, Document};
use futures::stream::BoxStream;

use super::stored::{Ranking, Stored};
use super::PerComment;
use crate::comments::body::Body;
use crate::comments::engine::TransferEngine;
use crate::comments::model::HeldComment;
use crate::comments::transfer;
use crate::comments::{slug, CommentStore};
use crate::Result;

/// Comments inserted at a time by an import.
const IMPORT_CHUNK: usize = 500;

impl PerComment {
    /// The documents an import inserts, in the export's order, and each comment's slug path as
    /// its link; posting times made strictly increasing so the slugs keep that order.
    fn imported_documents(
        &self,
        discussion: &str,
        comments: &[HeldComment],
    ) -> Result<(Vec<Document>, Vec<String>)> {
        let mut built: HashMap<&str, Stored> = HashMap::new();
        let mut parts: HashSet<String> = HashSet::new();
        let mut documents = Vec::with_capacity(comments.len());
        let mut links = Vec::with_capacity(comments.len());
        let mut last_micros = i64::MIN;
        for comment in comments {
            let parent = match &comment.parent {
                Some(parent) => Some(built.get(parent.as_str()).ok_or_else(|| {
                    crate::bson_ext::corrupt(
                        self.comments.name(),
                        None,
                        format!(
                            "an export whose reply {} comes before its parent",
                            comment.link
                        ),
                    )
                })?),
                None => None,
            };
            let part = unique_part(comment, parent, &mut parts);
            let micros = (comment.posted.timestamp_millis() * 1_000).max(last_micros + 1);
            last_micros = micros;
            let stored = imported_comment(discussion, comment, parent, &part, micros);
            self.check_key(discussion, &stored)?;
            links.push(stored.slug.clone());
            documents.push(bson::to_document(&stored)?);
            built.insert(comment.link.as_str(), stored);
        }
        Ok((documents, links))
    }
}

/// The slug part of an imported comment: its own where its link is a slug path of this strategy
/// under `parent`, otherwise one derived from the link; salted until no other comment of the
/// import (in `parts`) has it.
fn unique_part(
    comment: &HeldComment,
    parent: Option<&Stored>,
    parts: &mut HashSet<String>,
) -> String {
    let kept = slug::parse_slug(&comment.link)
        .ok()
        .and_then(|steps| steps.last().map(|part| part.to_string()))
        .filter(|part| {
            let expected = match parent {
                Some(parent) => format!("{}/{part}", parent.slug),
                None => part.clone(),
            };
            expected == comment.link
        });
    let mut part = kept.unwrap_or_else(|| derived_part(&comment.link, 0));
    let mut salt = 1;
    while !parts.insert(part.clone()) {
        part = derived_part(&comment.link, salt);
        salt += 1;
    }
    part
}

/// The stored comment an imported `comment` becomes, with slug `part` posted at `micros`, under
/// `parent` if it is a reply.
fn imported_comment(
    discussion: &str,
    comment: &HeldComment,
    parent: Option<&Stored>,
    part: &str,
    micros: i64,
) -> Stored {
    let placed = Stored::placed(discussion, parent, part, micros, Body::held(comment));
    Stored {
        ranking: Ranking::of(comment.votes, comment.posted),
        ..placed
    }
}

#[async_trait]
impl TransferEngine for PerComment {
    async fn discussions(&self, after: Option<String>) -> Result<BoxStream<'_, Result<String>>> {
        transfer::ids_after(&self.registry.discussions, doc! {}, after).await
    }

    async fn export(&self, discussion: &str) -> Result<Vec<HeldComment>> {
        transfer::export_with(self, discussion, async {
            let stored = self
                .backend
                .find_all("export comments", || {
                    self.comments
                        .find(doc! { "discussion_id": discussion })
                        .sort(doc! { "posted": 1, "_id": 1 })
                })
                .await?;
            stored
                .into_iter()
                .map(|document| {
                    let stored: Stored = crate::bson_ext::decode(self.comments.name(), document)?;
                    Ok(HeldComment::of(stored.comment()))
                })
                .collect()
        })
        .await
    }

    /// Keeps a comment's slug path where it is one of this strategy's (from another
    /// [`PerComment`] store); otherwise gives it a slug part derived from its source link.
    /// Steps follow the export's order, so the threaded view reads as the source's.
    async fn import(&self, discussion: &str, comments: &[HeldComment]) -> Result<Vec<String>> {
        let (documents, links) = self.imported_documents(discussion, comments)?;
        TransferEngine::purge(self, discussion).await?;
        self.create_discussion(discussion).await?;
        self.backend.ensure_indexes().await?;
        for chunk in documents.chunks(IMPORT_CHUNK) {
            self.backend
                .insert_many_once(&self.comments, chunk.to_vec())
                .await?;
        }
        transfer::import_votes(self, discussion, comments, links).await
    }

    async fn purge(&self, discussion: &str) -> Result<()> {
        self.backend
            .command("purge discussion", || {
                self.comments
                    .delete_many(doc! { "discussion_id": discussion })
            })
            .await?;
        transfer::purge_votes(&self.votes, Some(discussion)).await
    }

    async fn purge_all(&self) -> Result<()> {
        let own = [&self.comments, &self.registry.discussions];
        transfer::purge_all(self, &self.backend, &own).await
    }

    async fn is_empty(&self) -> Result<bool> {
        Ok(self.comments.find_one(doc! {}).await?.is_none())
    }

    async fn threaded_discussion(&self, within: Option<&[String]>) -> Result<Option<String>> {
        let mut filter = doc! { "parent": { "$ne": "" } };
        if let Some(within) = within {
            filter.insert("discussion_id", doc! { "$in": within });
        }
        let found = self
            .comments
            .find_one(filter)
            .projection(doc! { "discussion_id": 1 })
            .await?;
        Ok(found.and_then(|d| d.get_str("discussion_id").ok().map(str::to_owned)))
    }

    fn data_collections(&self) -> Vec<String> {
        transfer::data_collections(self, &[&self.comments, &self.registry.discussions])
    }
}

/// A slug part derived from a source link (and `salt`, after a collision): the same for every
/// import of the link.
fn derived_part(link: &str, salt: u32) -> String {
    let mut hash = 0x811c_9dc5_u32 ^ salt.wrapping_mul(0x9e37_79b9);
    for byte in link.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!("{hash:08x}")
}
