//! Comment trees addressed by position paths, for the embedded strategy.
//!
//! A position path lists array indexes from the top: `2` is the third top-level comment,
//! `2.0.1` the second reply to the first reply to it. In the document it is the field path
//! `comments.2.replies.0.replies.1`.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use super::body::Body;
use super::keyed::StoredKey;
use super::validate::invalid_link;
use super::{Comment, Order, Votes};
use crate::Result;

/// One embedded comment and its replies.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Node {
    /// Breaks ties in the chronological view between comments posted in the same millisecond
    /// (increasing within a process, so one process's comments keep their posting order).
    pub(super) id: bson::oid::ObjectId,
    #[serde(flatten)]
    pub(super) body: Body,
    /// Its votes (see [`super::VotedComments`]), changed by `$inc` in place.
    #[serde(default)]
    pub(super) ups: i64,
    #[serde(default)]
    pub(super) downs: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) replies: Vec<Node>,
    /// A keyed comment's key.
    #[serde(flatten)]
    pub(super) key: StoredKey,
}

impl Node {
    /// A comment without replies, votes or a key.
    pub(super) fn new(body: Body) -> Self {
        Self {
            id: bson::oid::ObjectId::new(),
            body,
            ups: 0,
            downs: 0,
            replies: Vec::new(),
            key: StoredKey::default(),
        }
    }

    /// The path and node of the comment `id` among `nodes` (a discussion's top level) and
    /// their replies, at any depth.
    pub(super) fn find(nodes: &[Node], id: bson::oid::ObjectId) -> Option<(Vec<usize>, &Node)> {
        for (index, node) in nodes.iter().enumerate() {
            if node.id == id {
                return Some((vec![index], node));
            }
            if let Some((mut path, found)) = Self::find(&node.replies, id) {
                path.insert(0, index);
                return Some((path, found));
            }
        }
        None
    }

    pub(super) fn votes(&self) -> Votes {
        Votes::from_stored(self.ups, self.downs)
    }

    pub(super) fn comment(&self, path: &[usize]) -> Comment {
        self.body.comment(
            format_path(path),
            (path.len() > 1).then(|| format_path(&path[..path.len() - 1])),
            path.len() - 1,
            self.votes(),
        )
    }

    /// This node and its descendants, depth first, each with its path (`path` is this node's).
    pub(super) fn preorder<'a>(&'a self, path: &mut Vec<usize>, out: &mut Vec<Entry<'a>>) {
        out.push(Entry {
            path: path.clone(),
            node: self,
        });
        for (index, reply) in self.replies.iter().enumerate() {
            path.push(index);
            reply.preorder(path, out);
            path.pop();
        }
    }
}

/// A node found in a tree, with its position path.
#[derive(Clone, Debug)]
pub(super) struct Entry<'a> {
    pub(super) path: Vec<usize>,
    pub(super) node: &'a Node,
}

impl Entry<'_> {
    pub(super) fn comment(&self) -> Comment {
        self.node.comment(&self.path)
    }
}

/// A run of consecutive top-level comments read from a discussion: `nodes[i]` is at position
/// `first + i`, out of `slots` top-level comments in all.
#[derive(Clone, Debug)]
pub(super) struct Window {
    pub(super) first: usize,
    pub(super) slots: usize,
    pub(super) nodes: Vec<Node>,
}

impl Window {
    /// The node at `path`, if the window holds it.
    pub(super) fn node(&self, path: &[usize]) -> Option<&Node> {
        let (top, rest) = path.split_first()?;
        let mut node = self.nodes.get(top.checked_sub(self.first)?)?;
        for &index in rest {
            node = node.replies.get(index)?;
        }
        Some(node)
    }

    /// Every node of the window in threaded order: top-level comments in `order`, each followed
    /// by its replies depth first in posting order.
    pub(super) fn threaded(&self, order: Order) -> Vec<Entry<'_>> {
        let mut out = Vec::new();
        let mut indexes: Vec<usize> = (0..self.nodes.len()).collect();
        if order == Order::NewestFirst {
            indexes.reverse();
        }
        for index in indexes {
            let mut path = vec![self.first + index];
            self.nodes[index].preorder(&mut path, &mut out);
        }
        out
    }

    /// Whether top-level comments exist beyond the window in the direction of `order`.
    pub(super) fn more_beyond(&self, order: Order) -> bool {
        match order {
            Order::OldestFirst => self.first + self.nodes.len() < self.slots,
            Order::NewestFirst => self.first > 0,
        }
    }
}

/// How two paths compare in the threaded view of `order`.
pub(super) fn threaded_cmp(order: Order, a: &[usize], b: &[usize]) -> Ordering {
    match (order, a.split_first(), b.split_first()) {
        (Order::NewestFirst, Some((a0, a_rest)), Some((b0, b_rest))) => {
            b0.cmp(a0).then_with(|| a_rest.cmp(b_rest))
        }
        _ => a.cmp(b),
    }
}

/// Checks a position path (`2`, `2.0.1`) and returns its indexes.
pub(super) fn parse_path(link: &str, max_depth: usize) -> Result<Vec<usize>> {
    if link.is_empty() {
        return Err(invalid_link(link, "empty"));
    }
    let mut path = Vec::new();
    for step in link.split('.') {
        let canonical = step == "0" || (!step.starts_with('0') && !step.is_empty());
        let index = step
            .parse::<u32>()
            .ok()
            .filter(|_| canonical && step.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| {
                invalid_link(
                    link,
                    "a position path is array indexes joined by `.`, like 2.0.1",
                )
            })?;
        path.push(index as usize);
    }
    if path.len() > max_depth + 1 {
        return Err(invalid_link(
            link,
            "deeper than any thread this strategy stores",
        ));
    }
    Ok(path)
}

/// The position path as text.
pub(super) fn format_path(path: &[usize]) -> String {
    let steps: Vec<String> = path.iter().map(usize::to_string).collect();
    steps.join(".")
}

/// The document field holding the comment at `path`: `comments.2.replies.0`.
pub(super) fn field_path(path: &[usize]) -> String {
    let mut field = String::from("comments");
    for (depth, index) in path.iter().enumerate() {
        if depth > 0 {
            field.push_str(".replies");
        }
        field.push('.');
        field.push_str(&index.to_string());
    }
    field
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comments::{Author, NewComment};

    fn node(text: &str, replies: Vec<Node>) -> Node {
        let comment = NewComment::new(Author::new("a", "A"), text);
        Node {
            replies,
            ..Node::new(Body::posted_at(bson::DateTime::from_millis(0), comment))
        }
    }

    #[test]
    fn paths_parse_and_map_to_fields() {
        assert_eq!(parse_path("2.0.13", 40).unwrap(), [2, 0, 13]);
        assert_eq!(field_path(&[2, 0, 13]), "comments.2.replies.0.replies.13");
        assert_eq!(format_path(&[2, 0, 13]), "2.0.13");
        for bad in ["", ".", "1.", "01", "a", "1..2", "-1", "+1", "99999999999"] {
            assert!(parse_path(bad, 40).is_err(), "{bad}");
        }
        assert!(parse_path("0.0.0", 1).is_err());
    }

    #[test]
    fn threaded_order_keeps_replies_in_posting_order() {
        let window = Window {
            first: 0,
            slots: 2,
            nodes: vec![
                node(
                    "a",
                    vec![node("a0", vec![node("a00", vec![])]), node("a1", vec![])],
                ),
                node("b", vec![node("b0", vec![])]),
            ],
        };
        let texts = |order| -> Vec<String> {
            window
                .threaded(order)
                .iter()
                .map(|e| e.node.body.text.clone())
                .collect()
        };
        assert_eq!(
            texts(Order::OldestFirst),
            ["a", "a0", "a00", "a1", "b", "b0"]
        );
        assert_eq!(
            texts(Order::NewestFirst),
            ["b", "b0", "a", "a0", "a00", "a1"]
        );
        for order in [Order::OldestFirst, Order::NewestFirst] {
            let paths: Vec<Vec<usize>> =
                window.threaded(order).into_iter().map(|e| e.path).collect();
            assert!(paths
                .windows(2)
                .all(|w| threaded_cmp(order, &w[0], &w[1]) == Ordering::Less));
        }
        assert_eq!(window.node(&[0, 0, 0]).unwrap().body.text, "a00");
        assert!(window.node(&[0, 2]).is_none());
    }
}
