//! An inbox as a watch sees it ([`crate::realtime`]): the messages that arrive in one owner's
//! inbox, for [`super::InboxStore::watch`].
//!
//! - The two time-ordered strategies key a message by its `(sent, id)`: a poll is one `find` of
//!   the owner's index range from the newest reported `sent` less the lookback; a change stream
//!   keeps the inserts naming the owner.
//! - Buckets key an entry by its position in the inbox, which the store assigns in arrival
//!   order: a poll is one `find` of the buckets from the newest reported position on, with no
//!   lookback; a change stream keeps the changes of the owner's buckets, and each brings the
//!   entries past the newest position reported.
//!
//! Either way only what the inbox's pages show is reported (not deleted, retracted, or from a
//! muted or blocked sender, as the message was when it arrived).

use std::collections::BTreeSet;
use std::marker::PhantomData;

use async_trait::async_trait;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::change_stream::event::ChangeStreamEvent;
use mongodb::Collection;

use super::bucketed::lifecycle::shown;
use super::recipient_lists::RecipientLists;
use super::time_ordered::{self, Layout};
use super::{Message, Payload};
use crate::backend::Backend;
use crate::bson_ext::integer;
use crate::realtime::{self, Key, ResumeToken, Source, Updates, WatchOptions};
use crate::Result;

/// A time-ordered inbox (fan out on read or on write) of one owner.
pub(super) struct TimeOrdered<P> {
    backend: Backend,
    collection: Collection<Document>,
    layout: Layout,
    recipients: Option<RecipientLists>,
    owner: String,
    _payload: PhantomData<fn() -> P>,
}

impl<P: Payload> TimeOrdered<P> {
    /// The watch of `owner`'s inbox kept in `collection` as `layout` says, refused for a blank
    /// owner.
    pub(super) fn watch(
        backend: &Backend,
        collection: &Collection<Document>,
        layout: Layout,
        recipients: Option<RecipientLists>,
        owner: &str,
        from: Option<ResumeToken>,
        options: WatchOptions,
    ) -> Updates<Message<P>> {
        if let Err(error) = crate::validate::user_id("owner", owner) {
            return realtime::failed(error);
        }
        let source = Self {
            backend: backend.clone(),
            collection: collection.clone(),
            layout,
            recipients,
            owner: owner.to_owned(),
            _payload: PhantomData,
        };
        realtime::watch(source, from, options)
    }
}

fn time_key<P>(message: &Message<P>) -> Key {
    Key::new(message.sent.timestamp_millis(), message.id.to_string())
}

#[async_trait]
impl<P: Payload> Source for TimeOrdered<P> {
    type Item = Message<P>;

    fn name(&self) -> String {
        format!("inbox/{}/{}", self.collection.name(), self.owner)
    }

    fn backend(&self) -> &Backend {
        &self.backend
    }

    async fn poll(
        &self,
        from: &Key,
        _seen: &BTreeSet<Key>,
        limit: usize,
    ) -> Result<Vec<(Key, Message<P>)>> {
        let messages: Vec<Message<P>> = time_ordered::arrivals(
            &self.collection,
            self.layout,
            &self.owner,
            bson::DateTime::from_millis(from.time),
            limit,
            self.recipients.as_ref(),
        )
        .await?;
        Ok(messages
            .into_iter()
            .map(|message| (time_key(&message), message))
            .collect())
    }

    async fn changes(&self) -> Result<(Collection<Document>, Vec<Document>)> {
        let owner = format!("fullDocument.{}", self.layout.owner_field);
        Ok((
            self.collection.clone(),
            vec![doc! { "$match": { "operationType": "insert", owner: &self.owner } }],
        ))
    }

    async fn items_of(
        &self,
        event: ChangeStreamEvent<Document>,
        _newest: &Key,
        _seen: &BTreeSet<Key>,
    ) -> Result<Vec<(Key, Message<P>)>> {
        let Some(document) = event.full_document else {
            return Ok(Vec::new());
        };
        if !self.layout.state.shows(&document, &self.owner) {
            return Ok(Vec::new());
        }
        let mut documents = vec![document];
        if let Some(recipients) = &self.recipients {
            recipients
                .restore(&mut documents, self.layout.id_field)
                .await?;
        }
        documents
            .into_iter()
            .map(|document| {
                let message: Message<P> = time_ordered::decode(
                    self.collection.name(),
                    document,
                    self.layout,
                    &self.owner,
                )?;
                Ok((time_key(&message), message))
            })
            .collect()
    }
}

/// A bucketed inbox of one owner.
pub(super) struct Bucketed<P> {
    pub(super) backend: Backend,
    pub(super) buckets: Collection<Document>,
    pub(super) recipients: RecipientLists,
    pub(super) bucket_size: u32,
    pub(super) owner: String,
    pub(super) _payload: PhantomData<fn() -> P>,
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
            .find(super::bucketed::owner_buckets(&self.owner, 0, None))
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

    async fn poll(
        &self,
        from: &Key,
        _seen: &BTreeSet<Key>,
        limit: usize,
    ) -> Result<Vec<(Key, Message<P>)>> {
        let size = i64::from(self.bucket_size);
        let first = from.time.max(0) / size;
        let wanted = 1 + (limit as i64 + size - 1) / size;
        let buckets: Vec<Document> = self
            .buckets
            .find(super::bucketed::owner_buckets(&self.owner, first, None))
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

    async fn items_of(
        &self,
        event: ChangeStreamEvent<Document>,
        newest: &Key,
        _seen: &BTreeSet<Key>,
    ) -> Result<Vec<(Key, Message<P>)>> {
        match event.full_document {
            Some(bucket) => self.entries(vec![bucket], newest.time + 1).await,
            None => Ok(Vec::new()),
        }
    }
}
