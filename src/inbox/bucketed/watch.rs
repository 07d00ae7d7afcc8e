//! A bucketed inbox as a watch sees it ([`crate::realtime`]), for
//! [`InboxStore::watch`](crate::inbox::InboxStore::watch) of [`super::BucketedFanOut`].
//!
//! An entry is keyed by its position in the inbox, which the store assigns in arrival order: a
//! poll is one `find` of the buckets from the newest reported position on, with no lookback; a
//! change stream keeps the changes of the owner's buckets, and each brings the entries past the
//! newest position reported. Only what the inbox's pages show is reported (not deleted,
//! retracted, or from a muted or blocked sender, as the message was when it arrived).

use std::marker::PhantomData;

use async_trait::async_trait;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::Collection;

use super::lifecycle::shown;
use crate::backend::Backend;
use crate::bson_ext::integer;
use crate::error::Result;
use crate::inbox::recipient_lists::RecipientLists;
use crate::inbox::{Message, Payload};
use crate::realtime::{Change, Key, PollRequest, Source};

/// A bucketed inbox of one owner.
pub(in crate::inbox) struct Bucketed<P> {
    pub(in crate::inbox) backend: Backend,
    pub(in crate::inbox) buckets: Collection<Document>,
    pub(in crate::inbox) recipients: RecipientLists,
    pub(in crate::inbox) bucket_size: u32,
    pub(in crate::inbox) owner: String,
    pub(in crate::inbox) _payload: PhantomData<fn() -> P>,
}

impl<P: Payload> Bucketed<P> {
    /// The entries of `buckets` at `from` or later that pages show, by position, decoded.
    async fn entries(&self, buckets: Vec<Document>, from: i64) -> Result<Vec<(Key, Message<P>)>> {
        let size = i64::from(self.bucket_size);
        let mut found = Vec::new();
        for mut bucket in buckets {
            let sequence = integer(&bucket, "sequence").unwrap_or(0);
            let Some(Bson::Array(messages)) = bucket.remove("messages") else {
                continue;
            };
            for (index, entry) in messages.into_iter().enumerate() {
                let position = sequence * size + index as i64;
                match entry {
                    Bson::Document(entry) if position >= from && shown(&entry) => {
                        found.push((position, entry));
                    }
                    _ => {}
                }
            }
        }
        found.sort_by_key(|(position, _)| *position);
        let (positions, mut entries): (Vec<i64>, Vec<Document>) = found.into_iter().unzip();
        self.recipients.restore(&mut entries, "id").await?;
        positions
            .into_iter()
            .zip(entries)
            .map(|(position, entry)| {
                let id = entry.get("id").cloned();
                let message = crate::bson_ext::decode_with_id(self.buckets.name(), id, entry)?;
                Ok((Key::new(position, ""), message))
            })
            .collect()
    }
}

#[async_trait]
impl<P: Payload> Source for Bucketed<P> {
    type Item = Message<P>;

    fn name(&self) -> String {
        format!("inbox/{}/{}", self.buckets.name(), self.owner)
    }

    fn ordered(&self) -> bool {
        true
    }

    fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Positions, not times: a watch without a token starts after the owner's last entry
    /// stamped before `since` (position order is `sent` order), so what arrives between the
    /// call of `watch` and its first poll is reported. One `find` of the newest buckets, newest
    /// first, read until one holds such an entry (the newest one does, but in the first moments
    /// of a bucket).
    async fn initial(&self, since: bson::DateTime) -> Result<Option<Key>> {
        let size = i64::from(self.bucket_size);
        let mut newest_first = self
            .buckets
            .find(super::owner_buckets(&self.owner, 0, None))
            .sort(doc! { "_id": -1 })
            .projection(doc! { "_id": 0, "sequence": 1, "messages.sent": 1 })
            .batch_size(2)
            .await?;
        while let Some(bucket) = newest_first.try_next().await? {
            let sequence = integer(&bucket, "sequence").unwrap_or(0);
            let Ok(messages) = bucket.get_array("messages") else {
                continue;
            };
            let before = messages.iter().rposition(|entry| {
                entry
                    .as_document()
                    .and_then(|entry| entry.get_datetime("sent").ok())
                    .is_some_and(|sent| *sent < since)
            });
            if let Some(index) = before {
                return Ok(Some(Key::new(sequence * size + index as i64, "")));
            }
        }
        // Nothing before `since`: every entry is reported.
        Ok(Some(Key::new(-1, "")))
    }

    async fn poll(&self, request: PollRequest<'_>) -> Result<Vec<(Key, Message<P>)>> {
        let PollRequest { from, limit, .. } = request;
        let size = i64::from(self.bucket_size);
        let first = from.time.max(0) / size;
        let wanted = 1 + (limit as i64 + size - 1) / size;
        let buckets: Vec<Document> = self
            .buckets
            .find(super::owner_buckets(&self.owner, first, None))
            .sort(doc! { "_id": 1 })
            .projection(doc! { "_id": 0, "sequence": 1, "messages": 1 })
            .limit(wanted)
            .await?
            .try_collect()
            .await?;
        self.entries(buckets, from.time).await
    }

    async fn changes(&self) -> Result<(Collection<Document>, Vec<Document>)> {
        Ok((
            self.buckets.clone(),
            vec![doc! { "$match": {
                "fullDocument.owner": &self.owner,
                "operationType": { "$in": ["insert", "update", "replace"] },
            } }],
        ))
    }

    async fn items_of(&self, change: Change<'_>) -> Result<Vec<(Key, Message<P>)>> {
        let Change { event, newest, .. } = change;
        match event.full_document {
            Some(bucket) => self.entries(vec![bucket], newest.time + 1).await,
            None => Ok(Vec::new()),
        }
    }
}
