//! A timeline as a watch sees it ([`crate::realtime`]): the owner's inbox watch, paired with a
//! watch of the outbox posts of the celebrities the owner follows (which are never copied).

use std::sync::Arc;

use async_trait::async_trait;
use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::Collection;
use tokio::sync::OnceCell;

use super::worker::decode_post;
use super::{Delivery, DeliveryState};
use crate::backend::Backend;
use crate::inbox::{Message, Strategy};
use crate::realtime::{self, Change, Key, PollRequest, ResumeToken, Source, Updates, WatchOptions};
use crate::{payload::Payload, Result};

impl<P: Payload> Delivery<P> {
    /// A stream of what arrives in `owner`'s timeline ([`Delivery::timeline`]), from `from`
    /// (the token of the last update handled) or from now: the messages arriving in the inbox
    /// ([`crate::InboxStore::watch`]) and the new posts of the celebrities `owner` follows, each
    /// once. The celebrities are those `owner` follows, and neither mutes nor blocks, when the watch first runs; see
    /// [`crate::realtime`] for how each part learns of its items and what tokens promise. With a
    /// bucketed inbox (no celebrities) it is the inbox's watch.
    ///
    /// # Errors
    ///
    /// The stream yields [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank owner,
    /// [`Invalid::Cursor`](crate::error::Invalid::Cursor) for a token of another watch, and server failures past
    /// the retry budget; then it ends.
    pub fn watch_timeline(
        &self,
        owner: &str,
        from: Option<ResumeToken>,
        options: WatchOptions,
    ) -> Updates<Message<P>> {
        let inner = self.inner.clone();
        if inner.inbox.strategy() == Strategy::BucketedFanOut || inner.celebrity_followers.is_none()
        {
            return inner.inbox.watch(owner, from, options);
        }
        if let Err(error) = crate::validate::user_id("owner", owner) {
            return crate::realtime::failed(error);
        }
        let inbox = inner.inbox.clone();
        let owner = owner.to_owned();
        let owner_for_inbox = owner.clone();
        let name = format!("timeline/{}/{owner}", inner.outbox.name());
        realtime::pair(
            &name,
            move |from, options| inbox.watch(&owner_for_inbox, from, options),
            move |from, options| {
                realtime::watch(
                    Celebrities {
                        inner,
                        owner,
                        authors: OnceCell::new(),
                    },
                    from,
                    options,
                )
            },
            from,
            options,
        )
    }
}

/// The outbox posts of the celebrities one owner follows.
struct Celebrities<P: Payload> {
    inner: Arc<DeliveryState<P>>,
    owner: String,
    /// Read when the watch first runs.
    authors: OnceCell<Vec<String>>,
}

impl<P: Payload> Celebrities<P> {
    /// The celebrities the owner follows and neither mutes nor blocks: one `find` of the
    /// celebrities, one of the follows, one of the owner's mute and block lists.
    async fn authors(&self) -> Result<&[String]> {
        self.authors
            .get_or_try_init(|| self.inner.followed_celebrities(&self.owner))
            .await
            .map(Vec::as_slice)
    }

    fn keyed(&self, document: Document) -> Result<(Key, Message<P>)> {
        let message: Message<P> = decode_post(self.inner.outbox.name(), document)?;
        Ok((message.time_key(), message))
    }
}

#[async_trait]
impl<P: Payload> Source for Celebrities<P> {
    type Item = Message<P>;

    fn name(&self) -> String {
        format!("celebrities/{}/{}", self.inner.outbox.name(), self.owner)
    }

    fn backend(&self) -> &Backend {
        &self.inner.backend
    }

    async fn poll(&self, request: PollRequest<'_>) -> Result<Vec<(Key, Message<P>)>> {
        let PollRequest { from, limit, .. } = request;
        let authors = self.authors().await?;
        if authors.is_empty() {
            return Ok(Vec::new());
        }
        let found: Vec<Document> = self
            .inner
            .outbox
            .find(doc! {
                "from": { "$in": authors },
                "sent": { "$gte": bson::DateTime::from_millis(from.time) },
            })
            .sort(doc! { "sent": 1, "_id": 1 })
            .limit(limit as i64)
            .await?
            .try_collect()
            .await?;
        found
            .into_iter()
            .map(|document| self.keyed(document))
            .collect()
    }

    async fn changes(&self) -> Result<(Collection<Document>, Vec<Document>)> {
        let authors = self.authors().await?;
        Ok((
            self.inner.outbox.clone(),
            vec![doc! { "$match": {
                "operationType": "insert",
                "fullDocument.from": { "$in": authors },
            } }],
        ))
    }

    async fn items_of(&self, change: Change<'_>) -> Result<Vec<(Key, Message<P>)>> {
        let Change { event, .. } = change;
        event
            .full_document
            .into_iter()
            .map(|document| self.keyed(document))
            .collect()
    }
}
