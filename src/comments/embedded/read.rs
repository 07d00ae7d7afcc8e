//! Reads: the top-level comments a read needs, and pages cut from them.

use bson::{doc, Bson};

use super::{count_field, created, Embedded};
use crate::bson_ext;
use crate::comments::tree::{Entry, Node, Window};
use crate::comments::{validate, Comment};
use crate::error::{Entity, Result};
use crate::page::{Cursor, Page};

/// Which top-level comments to read.
#[derive(Clone, Copy, Debug)]
pub(super) enum Range {
    All,
    From { first: usize, len: usize },
    Last { len: usize },
}

impl Embedded {
    /// Reads the top-level comments in `range`, or `None` if the discussion was not created.
    pub(super) async fn window(&self, discussion: &str, range: Range) -> Result<Option<Window>> {
        let dialect = self.backend.dialect().await?;
        // `[skip, limit]` may skip past the end (a link to a missing comment, a page past the
        // last); where the server cannot cut the array, the whole document is read.
        let slice = match range {
            Range::All => None,
            Range::From { first, len } => dialect.array_window(first, len.max(1)),
            Range::Last { len } => dialect.last_of_array(len.max(1)),
        };
        let sliced = slice.is_some();
        let comments = slice.unwrap_or(Bson::from(1));
        let found = self
            .discussions
            .find_one(doc! { "_id": discussion })
            .projection(doc! { "slots": 1, "comments": comments })
            .await?;
        let Some(found) = found.filter(created) else {
            return Ok(None);
        };
        let slots = count_field(&found, "slots");
        let mut nodes: Vec<Node> = match found.get_array("comments") {
            Ok(array) => bson_ext::decode_with_id(
                self.discussions.name(),
                Some(discussion.into()),
                array.clone(),
            )?,
            Err(_) => Vec::new(),
        };
        let first = match range {
            Range::All => 0,
            Range::From { first, .. } => first,
            Range::Last { .. } if sliced => slots.saturating_sub(nodes.len()),
            Range::Last { len } => slots.saturating_sub(len),
        };
        if !sliced {
            // The server sent every comment: keep the ones asked for.
            let end = match range {
                Range::All => nodes.len(),
                Range::From { first, len } => first.saturating_add(len).min(nodes.len()),
                Range::Last { .. } => nodes.len(),
            };
            nodes.truncate(end);
            nodes.drain(..first.min(nodes.len()));
        }
        Ok(Some(Window {
            first,
            slots,
            nodes,
        }))
    }

    /// The window holding the thread of `path`, failing if the discussion or comment is missing.
    pub(super) async fn window_with(
        &self,
        discussion: &str,
        path: &[usize],
        link: &str,
        what: Entity,
    ) -> Result<Window> {
        let window = self
            .window(
                discussion,
                Range::From {
                    first: path[0],
                    len: 1,
                },
            )
            .await?
            .ok_or_else(|| validate::no_discussion(discussion))?;
        if window.node(path).is_none() {
            return Err(validate::no_comment(what, link));
        }
        Ok(window)
    }
}

/// A page from `entries` (in view order) after the cursor position, which `is_after` tests.
pub(super) fn page_after(
    entries: Vec<Entry<'_>>,
    limit: usize,
    more_beyond: bool,
    is_after: impl Fn(&Entry<'_>) -> bool,
    cursor: impl Fn(&Entry<'_>) -> Cursor,
) -> Page<Comment> {
    let mut entries: Vec<Entry<'_>> = entries.into_iter().filter(|e| is_after(e)).collect();
    let more = entries.len() > limit || (more_beyond && !entries.is_empty());
    entries.truncate(limit);
    Page {
        next: if more {
            entries.last().map(&cursor)
        } else {
            None
        },
        items: entries.iter().map(Entry::comment).collect(),
    }
}
