//! What a watch of a recipient's groups reads: a change stream, or polls on `changed`.

use std::marker::PhantomData;

use async_trait::async_trait;
use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::Collection;

use super::{Group, Groups, CHANGED, CHANGES};
use crate::bson_ext::{self, integer};
use crate::realtime::{Change, Key, PollRequest, Source};
use crate::{payload::Payload, Result};

/// A recipient's groups as a watch sees them: keyed by when they last gained an actor.
pub(super) struct Changes<D> {
    pub(super) groups: Groups,
    pub(super) recipient: String,
    pub(super) _data: PhantomData<fn() -> D>,
}

impl<D> Changes<D> {
    /// When the group last gained an actor, and which of its states that made: two joins in
    /// one millisecond are two keys.
    fn key(document: &Document) -> Option<Key> {
        let changed = document.get_datetime(CHANGED).ok()?;
        let id = document.get_str("_id").ok()?;
        let changes = integer(document, CHANGES)?;
        Some(Key::new(
            changed.timestamp_millis(),
            format!("{id}/{changes:020}"),
        ))
    }
}

#[async_trait]
impl<D: Payload> Source for Changes<D> {
    type Item = Group<D>;

    fn name(&self) -> String {
        format!(
            "notifications/{}/{}",
            self.groups.groups.name(),
            self.recipient
        )
    }

    fn backend(&self) -> &crate::backend::Backend {
        &self.groups.backend
    }

    async fn poll(&self, request: PollRequest<'_>) -> Result<Vec<(Key, Group<D>)>> {
        let PollRequest { from, limit, .. } = request;
        let documents: Vec<Document> = self
            .groups
            .groups
            .find(doc! {
                "recipient": &self.recipient,
                CHANGED: { "$gte": bson::DateTime::from_millis(from.time) },
            })
            .sort(doc! { CHANGED: 1, "_id": 1 })
            .limit(limit as i64)
            .await?
            .try_collect()
            .await?;
        documents
            .into_iter()
            .filter_map(|document| Some((Self::key(&document)?, document)))
            .map(|(key, document)| Ok((key, self.groups.decode(document)?)))
            .collect()
    }

    async fn changes(&self) -> Result<(Collection<Document>, Vec<Document>)> {
        Ok((
            self.groups.groups.clone(),
            vec![doc! { "$match": {
                "fullDocument.recipient": &self.recipient,
                "operationType": { "$in": ["insert", "update", "replace"] },
            } }],
        ))
    }

    async fn items_of(&self, change: Change<'_>) -> Result<Vec<(Key, Group<D>)>> {
        let Change { event, .. } = change;
        // An actor joining sets `changed`; a withdrawal does not, and is not reported.
        let joined = event
            .update_description
            .as_ref()
            .is_none_or(|update| update.updated_fields.contains_key(CHANGED));
        let Some(document) = event.full_document.filter(|_| joined) else {
            return Ok(Vec::new());
        };
        let Some(key) = Self::key(&document) else {
            return Ok(Vec::new());
        };
        if bson_ext::count(&document, "count") == 0 {
            return Ok(Vec::new());
        }
        Ok(vec![(key, self.groups.decode(document)?)])
    }
}
