//! A time-ordered inbox as a watch sees it ([`crate::realtime`]): the messages that arrive in
//! one owner's inbox, for [`super::InboxStore::watch`] of the two time-ordered strategies
//! (buckets have their own, in `bucketed/watch.rs`).
//!
//! A message is keyed by its `(sent, id)`: a poll is one `find` of the owner's index range from
//! the newest reported `sent` less the lookback; a change stream keeps the inserts naming the
//! owner. Only what the inbox's pages show is reported (not deleted, retracted, or from a muted
//! or blocked sender, as the message was when it arrived).

use std::marker::PhantomData;

use async_trait::async_trait;
use bson::{doc, Document};
use mongodb::Collection;

use super::engine::WatchRequest;
use super::recipient_lists::RecipientLists;
use super::time_ordered::{self, Layout};
use super::{Message, Payload};
use crate::backend::Backend;
use crate::realtime::{self, Change, Key, PollRequest, Source, Updates};
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
    /// The watch `request` asks for, of an inbox kept in `collection` as `layout` says.
    pub(super) fn watch(
        backend: &Backend,
        collection: &Collection<Document>,
        layout: Layout,
        recipients: Option<RecipientLists>,
        request: WatchRequest<'_>,
    ) -> Updates<Message<P>> {
        let WatchRequest {
            owner,
            from,
            options,
        } = request;
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

impl<P> Message<P> {
    /// The message's key in a watch: its time, then its id. A timeline's watch merges an
    /// inbox's messages with celebrities' posts by it.
    pub(crate) fn time_key(&self) -> Key {
        Key::new(self.sent.timestamp_millis(), self.id.to_string())
    }
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

    async fn poll(&self, request: PollRequest<'_>) -> Result<Vec<(Key, Message<P>)>> {
        let PollRequest { from, limit, .. } = request;
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
            .map(|message| (message.time_key(), message))
            .collect())
    }

    async fn changes(&self) -> Result<(Collection<Document>, Vec<Document>)> {
        let owner = format!("fullDocument.{}", self.layout.owner_field);
        Ok((
            self.collection.clone(),
            vec![doc! { "$match": { "operationType": "insert", owner: &self.owner } }],
        ))
    }

    async fn items_of(&self, change: Change<'_>) -> Result<Vec<(Key, Message<P>)>> {
        let Change { event, .. } = change;
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
                Ok((message.time_key(), message))
            })
            .collect()
    }
}
