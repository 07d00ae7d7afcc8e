//! What a comment migration moves, discussion by discussion, and how a moved discussion is
//! verified.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;

use crate::backend::lease_lock::LeaseLocks;
use crate::comments::{DynCommentTransfer, HeldComment};
use crate::error::Result;
use crate::migrate::engine::{Engine, Units};
use crate::migrate::links::Links;
use crate::migrate::units;

/// The comment migration's engine.
pub(super) type CommentMigrationEngine = Engine<Discussions>;

/// What a comment migration moves: discussions, from `source` to `target`.
pub(in crate::migrate) struct Discussions {
    pub(in crate::migrate) source: Arc<DynCommentTransfer>,
    pub(in crate::migrate) target: Arc<DynCommentTransfer>,
    pub(in crate::migrate) links: Links,
    /// The discussions moved, in order; `None` for every one.
    pub(in crate::migrate) scope: Option<Vec<String>>,
    /// The migrating stores' per-discussion locks: a write reaches both stores in one turn.
    pub(in crate::migrate) locks: LeaseLocks,
}

impl std::fmt::Debug for Discussions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discussions")
            .field("source", &self.source)
            .field("target", &self.target)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl Discussions {
    /// Whether the migration moves `discussion`.
    pub(in crate::migrate) fn in_scope(&self, discussion: &str) -> bool {
        self.scope.as_ref().is_none_or(|scope| {
            scope
                .binary_search_by(|d| d.as_str().cmp(discussion))
                .is_ok()
        })
    }

    /// Whether both stores thread: the migrating store threads then.
    pub(in crate::migrate) fn threads(&self) -> bool {
        self.source.features().threading && self.target.features().threading
    }
}

#[async_trait]
impl Units for Discussions {
    fn kind(&self) -> &'static str {
        "migrate-comments"
    }

    fn unit(&self) -> &'static str {
        "discussion"
    }

    fn strategies(&self) -> (String, String) {
        (
            self.source.strategy().name().to_owned(),
            self.target.strategy().name().to_owned(),
        )
    }

    async fn create_indexes(&self) -> Result<()> {
        self.source.create_indexes().await?;
        self.target.create_indexes().await?;
        self.links.create_indexes().await
    }

    async fn check_start(&self) -> Result<()> {
        let holds = match &self.scope {
            None => !self.target.is_empty().await?,
            Some(scope) => {
                let mut any = false;
                for discussion in scope {
                    any |= !self.target.export(discussion).await?.is_empty();
                }
                any
            }
        };
        if holds {
            return Err(units::target_not_empty("comments of its discussions"));
        }
        if self.source.features().threading && !self.target.features().threading {
            if let Some(discussion) = self
                .source
                .threaded_discussion(self.scope.as_deref())
                .await?
            {
                return Err(crate::comments::threads_unsupported(&discussion));
            }
        }
        Ok(())
    }

    async fn list(&self, after: Option<String>, limit: usize) -> Result<Vec<String>> {
        match &self.scope {
            Some(scope) => Ok(scope
                .iter()
                .filter(|d| after.as_deref().is_none_or(|after| d.as_str() > after))
                .take(limit)
                .cloned()
                .collect()),
            None => units::first(self.source.discussions(after).await?, limit).await,
        }
    }

    /// Exports the discussion from the source, imports it into the target (which replaces
    /// what the target held of it) and records every comment's pair of links.
    async fn copy(&self, discussion: &str) -> Result<u64> {
        let held = self.source.export(discussion).await?;
        self.links.forget(Some(discussion)).await?;
        let links = self.target.import(discussion, &held).await?;
        let pairs: Vec<(String, String)> = held.iter().map(|c| c.link.clone()).zip(links).collect();
        self.links.record(discussion, &pairs).await?;
        Ok(held.len() as u64)
    }

    /// The same comments in the same order, each with the same parent, author, text, times,
    /// tombstone, counts and votes, and each target link the one the map gives.
    async fn verified(&self, discussion: &str) -> Result<bool> {
        let source = self.source.export(discussion).await?;
        let target = self.target.export(discussion).await?;
        if source.len() != target.len() {
            return Ok(false);
        }
        let links: Vec<&str> = source.iter().map(|c| c.link.as_str()).collect();
        let map = self.links.to_target(discussion, &links).await?;
        Ok(source.iter().zip(&target).all(|(s, t)| same(s, t, &map)))
    }

    async fn purge_target(&self) -> Result<()> {
        match &self.scope {
            None => {
                self.target.purge_all().await?;
                self.links.forget(None).await
            }
            Some(scope) => {
                for discussion in scope {
                    self.target.purge(discussion).await?;
                    self.links.forget(Some(discussion)).await?;
                }
                Ok(())
            }
        }
    }
}

/// Whether `target` is `source` moved, its links as `map` gives them.
fn same(source: &HeldComment, target: &HeldComment, map: &HashMap<String, String>) -> bool {
    let moved = |link: &str| map.get(link).map(String::as_str);
    moved(&source.link) == Some(target.link.as_str())
        && source.parent.as_deref().map(moved) == target.parent.as_deref().map(Some)
        && source.author == target.author
        && source.text == target.text
        && source.posted == target.posted
        && source.edited == target.edited
        && source.deleted == target.deleted
        && source.votes == target.votes
        && source.voters == target.voters
}
