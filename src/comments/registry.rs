//! The discussions that comments may be posted to, for the designs that keep comments outside
//! the discussion's own document: `{_id: discussion}` plus any fields the design needs.

use bson::{doc, Document};
use mongodb::Collection;

use crate::update_batch::DUPLICATE_KEY;
use crate::Result;

#[derive(Clone, Debug)]
pub(super) struct Registry {
    pub(super) discussions: Collection<Document>,
}

impl Registry {
    pub(super) fn new(discussions: Collection<Document>) -> Self {
        Self { discussions }
    }

    /// Registers `discussion` with the design's initial `fields`; registering it again changes
    /// nothing.
    pub(super) async fn create(&self, discussion: &str, mut fields: Document) -> Result<()> {
        fields.insert("_id", discussion);
        match self.discussions.insert_one(fields).await {
            Ok(_) => Ok(()),
            Err(error) if is_duplicate_key(&error) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// The discussion's registration document, if it was registered.
    pub(super) async fn find(&self, discussion: &str) -> Result<Option<Document>> {
        Ok(self
            .discussions
            .find_one(doc! { "_id": discussion })
            .await?)
    }
}

/// Whether a write failed only because a unique index already held the key.
pub(super) fn is_duplicate_key(error: &mongodb::error::Error) -> bool {
    use mongodb::error::{ErrorKind, WriteFailure};
    match &*error.kind {
        ErrorKind::Write(WriteFailure::WriteError(write)) => write.code == DUPLICATE_KEY,
        ErrorKind::Command(command) => command.code == DUPLICATE_KEY,
        ErrorKind::InsertMany(failure) => failure.write_errors.as_ref().is_some_and(|errors| {
            !errors.is_empty() && errors.iter().all(|write| write.code == DUPLICATE_KEY)
        }),
        _ => false,
    }
}
