//! The discussions that comments may be posted to, for the strategies that keep comments outside
//! the discussion's own document: `{_id: discussion}` plus any fields the strategy needs.

use bson::{doc, Document};
use mongodb::Collection;

use crate::backend::Backend;
use crate::Result;

/// The default collection names of a store that registers its discussions, in the order its
/// builder takes them: the store's own collection `main`, the registered discussions, the
/// discussions' locks (used only on servers without atomic updates) and the votes.
pub(super) const fn registered_collections(main: &'static str) -> [&'static str; 4] {
    [
        main,
        "comment_discussions",
        "comment_locks",
        super::votes::VOTES,
    ]
}

#[derive(Clone, Debug)]
pub(super) struct Registry {
    pub(super) discussions: Collection<Document>,
    backend: Backend,
}

impl Registry {
    pub(super) fn new(discussions: Collection<Document>, backend: Backend) -> Self {
        Self {
            discussions,
            backend,
        }
    }

    /// Registers `discussion` with the strategy's initial `fields`; registering it again changes
    /// nothing.
    pub(super) async fn create(&self, discussion: &str, mut fields: Document) -> Result<()> {
        fields.insert("_id", discussion);
        self.backend
            .insert_once(&self.discussions, fields)
            .await
            .map(drop)
    }

    /// The discussion's registration document, if it was registered.
    pub(super) async fn find(&self, discussion: &str) -> Result<Option<Document>> {
        Ok(self
            .discussions
            .find_one(doc! { "_id": discussion })
            .await?)
    }
}
