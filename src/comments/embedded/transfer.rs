//! [`CommentTransfer`] for [`Embedded`]: exports from the discussion's document, imports that
//! write the whole comment tree in one update.

use std::collections::HashMap;

use async_trait::async_trait;
use bson::{doc, Document};
use futures::stream::BoxStream;
use futures::TryStreamExt;

use super::read::Range;
use super::{Embedded, KEYED, LAST_POSTED};
use crate::comments::body::Body;
use crate::comments::engine::TransferEngine;
use crate::comments::model::HeldComment;
use crate::comments::transfer;
use crate::comments::tree::{format_path, Node};
use crate::error::Invalid;
use crate::{Error, Result};

/// The fields a discussion's document holds for its comments (the rest is the application's).
const FIELDS: [&str; 8] = [
    "comments",
    "count",
    "slots",
    "bytes",
    LAST_POSTED,
    KEYED,
    super::super::votes::VOTE_OPS,
    "_id",
];

/// The node an imported comment becomes, with its times, deletion and vote counts.
fn imported_node(comment: &HeldComment) -> Node {
    Node {
        ups: comment.votes.ups as i64,
        downs: comment.votes.downs as i64,
        ..Node::new(Body::held(comment))
    }
}

impl Embedded {
    /// The comment tree of an import in the export's order (each comment after its earlier
    /// siblings), and each comment's position path as its link.
    fn imported_tree(
        &self,
        discussion: &str,
        comments: &[HeldComment],
    ) -> Result<(Vec<Node>, Vec<String>)> {
        let mut top: Vec<Node> = Vec::new();
        let mut paths: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut links = Vec::with_capacity(comments.len());
        for comment in comments {
            let node = imported_node(comment);
            let path = match &comment.parent {
                None => {
                    top.push(node);
                    vec![top.len() - 1]
                }
                Some(parent) => {
                    let parent_path = paths.get(parent.as_str()).cloned().ok_or_else(|| {
                        crate::bson_ext::corrupt(
                            self.discussions.name(),
                            Some(discussion.into()),
                            format!(
                                "an export whose reply {} comes before its parent",
                                comment.link
                            ),
                        )
                    })?;
                    if parent_path.len() > self.max_depth {
                        return Err(Error::InvalidInput {
                            reason: Invalid::ThreadTooDeep {
                                depth: parent_path.len(),
                                limit: format!(
                                    "this store nests replies at most {} deep",
                                    self.max_depth
                                ),
                            },
                        });
                    }
                    let siblings = &mut node_at(&mut top, &parent_path).replies;
                    siblings.push(node);
                    let mut path = parent_path;
                    path.push(siblings.len() - 1);
                    path
                }
            };
            links.push(format_path(&path));
            paths.insert(comment.link.as_str(), path);
        }
        Ok((top, links))
    }

    /// The comment fields an import sets on the discussion's document (one `find` of it),
    /// checked against the document size limit with the application's fields it keeps.
    async fn imported_fields(
        &self,
        discussion: &str,
        comments: &[HeldComment],
        top: &[Node],
    ) -> Result<Document> {
        let existing = self
            .backend
            .command("read discussion", || {
                self.discussions.find_one(doc! { "_id": discussion })
            })
            .await?;
        let mut own = existing.unwrap_or_default();
        for field in FIELDS {
            own.remove(field);
        }
        own.insert("_id", discussion);
        let count = comments.iter().filter(|c| !c.deleted).count() as i64;
        let mut fields = doc! {
            "comments": bson::to_bson(top)?,
            "count": count,
            "slots": top.len() as i64,
            KEYED: [],
            super::super::votes::VOTE_OPS: [],
        };
        if let Some(last) = top.iter().map(|n| n.body.posted).max() {
            fields.insert(LAST_POSTED, last);
        }
        let mut whole = own.clone();
        whole.extend(fields.clone());
        let bytes = bson::to_vec(&whole)?.len();
        if bytes > self.max_document_bytes {
            return Err(Error::InvalidInput {
                reason: Invalid::TooLarge {
                    what: "discussion",
                    size: bytes,
                    limit: self.max_document_bytes,
                },
            });
        }
        fields.insert("bytes", bytes as i64);
        Ok(fields)
    }
}

#[async_trait]
impl TransferEngine for Embedded {
    async fn discussions(&self, after: Option<String>) -> Result<BoxStream<'_, Result<String>>> {
        transfer::ids_after(
            &self.discussions,
            doc! { "slots": { "$exists": true } },
            after,
        )
        .await
    }

    async fn export(&self, discussion: &str) -> Result<Vec<HeldComment>> {
        transfer::export_with(self, discussion, async {
            let window = self
                .backend
                .retry("export comments", || self.window(discussion, Range::All))
                .await?;
            let Some(window) = window else {
                return Ok(Vec::new());
            };
            let mut entries = window.threaded(crate::comments::Order::OldestFirst);
            entries.sort_by_key(|e| (e.node.body.posted.timestamp_millis(), e.node.id));
            Ok(entries
                .iter()
                .map(|entry| HeldComment::of(entry.comment()))
                .collect())
        })
        .await
    }

    /// Builds the comment tree in the export's order (each comment after its earlier
    /// siblings: an export of this strategy keeps its position paths) and writes it with the
    /// discussion's counts in one `update`, keeping the document's other fields.
    async fn import(&self, discussion: &str, comments: &[HeldComment]) -> Result<Vec<String>> {
        let (top, links) = self.imported_tree(discussion, comments)?;
        let fields = self.imported_fields(discussion, comments, &top).await?;
        transfer::purge_votes(&self.votes, Some(discussion)).await?;
        let mut update = doc! { "$set": fields };
        if top.is_empty() {
            update.insert("$unset", doc! { LAST_POSTED: "" });
        }
        // A `$set` of the whole tree: repeating it writes the same.
        self.backend
            .command("import comments", || {
                self.discussions
                    .update_one(doc! { "_id": discussion }, update.clone())
                    .upsert(true)
            })
            .await?;
        transfer::import_votes(self, discussion, comments, links).await
    }

    /// Removes the comment fields from the discussion's document, and the document where it
    /// holds nothing else.
    async fn purge(&self, discussion: &str) -> Result<()> {
        let unset: Document = FIELDS
            .iter()
            .filter(|f| **f != "_id")
            .map(|f| (f.to_string(), bson::Bson::from("")))
            .collect();
        self.backend
            .retry("purge discussion", || async {
                self.discussions
                    .update_one(doc! { "_id": discussion }, doc! { "$unset": unset.clone() })
                    .await?;
                let left = self
                    .discussions
                    .find_one(doc! { "_id": discussion })
                    .await?;
                if left.is_some_and(|left| left.len() == 1) {
                    self.discussions
                        .delete_one(doc! { "_id": discussion, "slots": { "$exists": false } })
                        .await?;
                }
                Ok(())
            })
            .await?;
        transfer::purge_votes(&self.votes, Some(discussion)).await
    }

    async fn purge_all(&self) -> Result<()> {
        let discussions: Vec<String> = TransferEngine::discussions(self, None)
            .await?
            .try_collect()
            .await?;
        for discussion in &discussions {
            TransferEngine::purge(self, discussion).await?;
        }
        transfer::purge_votes(&self.votes, None).await
    }

    async fn is_empty(&self) -> Result<bool> {
        Ok(self
            .discussions
            .find_one(doc! { "count": { "$gt": 0 } })
            .await?
            .is_none()
            && self
                .discussions
                .find_one(doc! { "slots": { "$gt": 0 } })
                .await?
                .is_none())
    }

    /// One `find` of the discussions (every one, or `within`), their comments read here.
    async fn threaded_discussion(&self, within: Option<&[String]>) -> Result<Option<String>> {
        let mut filter = doc! { "slots": { "$gt": 0 } };
        if let Some(within) = within {
            filter.insert("_id", doc! { "$in": within });
        }
        let mut found = self
            .discussions
            .find(filter)
            .projection(doc! { "comments": 1 })
            .await?;
        while let Some(document) = found.try_next().await? {
            let nodes: Vec<Node> = match document.get("comments") {
                Some(comments) => crate::bson_ext::decode_with_id(
                    self.discussions.name(),
                    document.get("_id").cloned(),
                    comments.clone(),
                )?,
                None => Vec::new(),
            };
            if nodes.iter().any(|n| !n.replies.is_empty()) {
                return Ok(document.get_str("_id").ok().map(str::to_owned));
            }
        }
        Ok(None)
    }

    fn data_collections(&self) -> Vec<String> {
        transfer::data_collections(self, &[&self.discussions])
    }
}

/// The node at `path` (which exists) among `nodes`.
fn node_at<'a>(nodes: &'a mut [Node], path: &[usize]) -> &'a mut Node {
    let (first, rest) = path.split_first().expect("a path has a first step");
    let mut node = &mut nodes[*first];
    for index in rest {
        node = &mut node.replies[*index];
    }
    node
}
