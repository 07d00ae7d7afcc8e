//! A comment migration's link map: for every comment, its link in the source and its link in
//! the target, one document each in `<name>_links`:
//! `{_id: "<length of discussion>:<discussion>/<source link>", discussion, source, target}`,
//! index
//! `{discussion: 1, target: 1}` (the way back).

use std::collections::HashMap;

use bson::{doc, Document};
use mongodb::{Collection, IndexModel};

use crate::backend::Backend;
use crate::comments::transfer::delete_discussion;
use crate::error::Result;

/// Pairs written per `insert`.
const CHUNK: usize = 1_000;

/// The link map of one migration.
#[derive(Clone, Debug)]
pub(super) struct Links {
    backend: Backend,
    links: Collection<Document>,
}

impl Links {
    pub(super) fn new(backend: Backend, links: Collection<Document>) -> Self {
        Self { backend, links }
    }

    /// Creates the index of the way back (one command).
    pub(super) async fn create_indexes(&self) -> Result<()> {
        self.links
            .create_index(
                IndexModel::builder()
                    .keys(doc! { "discussion": 1, "target": 1 })
                    .build(),
            )
            .await?;
        Ok(())
    }

    /// Records `pairs` (source link, target link) of `discussion`: one `insert` per 1,000,
    /// pairs recorded already left as they are.
    pub(super) async fn record(&self, discussion: &str, pairs: &[(String, String)]) -> Result<()> {
        for chunk in pairs.chunks(CHUNK) {
            let documents = chunk
                .iter()
                .map(|(source, target)| {
                    doc! {
                        "_id": pair_id(discussion, source),
                        "discussion": discussion, "source": source, "target": target,
                    }
                })
                .collect();
            self.backend
                .insert_many_once(&self.links, documents)
                .await?;
        }
        Ok(())
    }

    /// The target links of `sources` in `discussion` (one `find`); a link not in the map is
    /// not in the result.
    pub(super) async fn to_target(
        &self,
        discussion: &str,
        sources: &[&str],
    ) -> Result<HashMap<String, String>> {
        if sources.is_empty() {
            // No command: an empty `$in` matches nothing, and on the shard key it crashes a
            // sharded engine (see `src/server/family/`).
            return Ok(HashMap::new());
        }
        let ids: Vec<String> = sources.iter().map(|s| pair_id(discussion, s)).collect();
        self.pairs(doc! { "_id": { "$in": ids } }, "source", "target")
            .await
    }

    /// The source links of `targets` in `discussion` (one `find`).
    pub(super) async fn to_source(
        &self,
        discussion: &str,
        targets: &[&str],
    ) -> Result<HashMap<String, String>> {
        self.pairs(
            doc! { "discussion": discussion, "target": { "$in": targets } },
            "target",
            "source",
        )
        .await
    }

    async fn pairs(
        &self,
        filter: Document,
        from: &str,
        to: &str,
    ) -> Result<HashMap<String, String>> {
        let found: Vec<Document> = self
            .backend
            .find_all("read link map", || self.links.find(filter.clone()))
            .await?;
        Ok(found
            .iter()
            .filter_map(|d| {
                Some((
                    d.get_str(from).ok()?.to_owned(),
                    d.get_str(to).ok()?.to_owned(),
                ))
            })
            .collect())
    }

    /// Forgets `discussion`'s links (or every discussion's): one `delete`.
    pub(super) async fn forget(&self, discussion: Option<&str>) -> Result<()> {
        let (backend, links) = (&self.backend, &self.links);
        delete_discussion(backend, links, "discussion", discussion, "forget links").await
    }
}

/// The `_id` of a source link's pair: unique per discussion and link (the length prefix keeps
/// a `/` in a discussion id from making two pairs one).
fn pair_id(discussion: &str, source: &str) -> String {
    format!("{}:{discussion}/{source}", discussion.len())
}
