//! The front of every inbox store, written once: [`InboxStore`], [`InboxLifecycle`] and
//! [`InboxTransfer`] for every engine ([`super::engine`]).
//!
//! Each operation opens its span, checks its input (ids, recipient lists, idempotency keys:
//! before any command, so bad input writes nothing), and hands the engine the checked values.
//! Why a blanket implementation over engines rather than provided trait methods: the public
//! traits stay the small vocabulary applications call and may implement for stores of their
//! own, with no hook methods a caller could misuse, while the crate's strategies implement only
//! the engine traits, which nothing outside the crate can name.

use std::future::Future;

use async_trait::async_trait;
use futures::stream::BoxStream;

use super::engine::{InboxEngine, LifecycleEngine, TransferEngine};
use super::keyed::KeyedSend;
use super::lifecycle::{Filter, Filters, InboxLifecycle, Retention, UpTo};
use super::transfer::{HeldMessage, InboxTransfer};
use super::validate::{check_new_message, check_recipients, check_user_id};
use super::{InboxStore, Message, MessageId, NewMessage, Payload, Sent, Strategy};
use crate::error::Result;
use crate::observe::{store_operation, Operation};
use crate::page::{Page, PageRequest};
use crate::realtime::{ResumeToken, Updates, WatchOptions};
use crate::sharding::ShardKey;

/// The span of operation `$name` of `$engine` (see [`crate::observe::store_operation`]).
macro_rules! span {
    ($($operation:tt)*) => { store_operation!(InboxEngine, "inbox", $($operation)*) };
}

/// `work` in `operation`'s span, once `user` is found to be a user id (`role`: `"owner"`,
/// `"sender"`); the check's error otherwise, and `work` never runs.
async fn for_user<T>(
    operation: Operation,
    role: &'static str,
    user: &str,
    work: impl Future<Output = Result<T>>,
) -> Result<T> {
    operation
        .run_checked(check_user_id(role, user), |()| work)
        .await
}

#[async_trait]
impl<P: Payload, E: InboxEngine<P>> InboxStore<P> for E {
    fn strategy(&self) -> Strategy {
        InboxEngine::strategy(self)
    }

    async fn send(&self, message: NewMessage<P>) -> Result<Sent<P>> {
        span!(self, "send", recipients = message.to.len())
            .run(async move {
                check_new_message(&message)?;
                let keyed = KeyedSend::of(&message)?;
                InboxEngine::send(self, message, keyed).await
            })
            .await
    }

    async fn deliver(&self, message: &Message<P>, recipients: &[String]) -> Result<Vec<String>> {
        span!(self, "deliver", recipients = recipients.len())
            .run(async move {
                check_recipients(recipients)?;
                InboxEngine::deliver(self, message, recipients).await
            })
            .await
    }

    async fn remove_from(&self, owner: &str, sender: &str) -> Result<u64> {
        span!(self, "remove_from")
            .run(async move {
                check_user_id("owner", owner)?;
                check_user_id("sender", sender)?;
                InboxEngine::remove_from(self, owner, sender).await
            })
            .await
    }

    fn max_message_bytes(&self) -> usize {
        InboxEngine::max_message_bytes(self)
    }

    async fn inbox_page(&self, owner: &str, page: PageRequest) -> Result<Page<Message<P>>> {
        span!(self, "page", limit = page.limit)
            .run(async move {
                check_user_id("owner", owner)?;
                page.check()?;
                InboxEngine::inbox_page(self, owner, page).await
            })
            .await
    }

    async fn count(&self, owner: &str) -> Result<u64> {
        let work = InboxEngine::count(self, owner);
        for_user(span!(self, "count"), "owner", owner, work).await
    }

    async fn filters(&self, owner: &str) -> Result<Filters> {
        let work = InboxEngine::filters(self, owner);
        for_user(span!(self, "filters"), "owner", owner, work).await
    }

    async fn create_indexes(&self) -> Result<()> {
        span!(self, "create_indexes")
            .run(InboxEngine::create_indexes(self))
            .await
    }

    fn shard_keys(&self) -> Vec<ShardKey> {
        InboxEngine::shard_keys(self)
    }

    fn database(&self) -> &mongodb::Database {
        InboxEngine::database(self)
    }

    fn watch(
        &self,
        owner: &str,
        from: Option<ResumeToken>,
        options: WatchOptions,
    ) -> Updates<Message<P>> {
        if let Err(error) = check_user_id("owner", owner) {
            return crate::realtime::failed(error);
        }
        InboxEngine::watch(self, owner, from, options)
    }
}

#[async_trait]
impl<P: Payload, E: LifecycleEngine<P>> InboxLifecycle<P> for E {
    async fn mark_read(&self, owner: &str, id: MessageId) -> Result<()> {
        let work = LifecycleEngine::mark_read(self, owner, id);
        for_user(span!(self, "mark_read"), "owner", owner, work).await
    }

    async fn mark_unread(&self, owner: &str, id: MessageId) -> Result<()> {
        let work = LifecycleEngine::mark_unread(self, owner, id);
        for_user(span!(self, "mark_unread"), "owner", owner, work).await
    }

    async fn mark_read_up_to(&self, owner: &str, up_to: UpTo) -> Result<()> {
        let work = LifecycleEngine::mark_read_up_to(self, owner, up_to);
        for_user(span!(self, "mark_read_up_to"), "owner", owner, work).await
    }

    async fn unread_count(&self, owner: &str) -> Result<u64> {
        let work = LifecycleEngine::unread_count(self, owner, None);
        for_user(span!(self, "unread_count"), "owner", owner, work).await
    }

    async fn unread_count_up_to(&self, owner: &str, cap: u64) -> Result<u64> {
        span!(self, "unread_count", cap)
            .run(async move {
                check_user_id("owner", owner)?;
                if cap == 0 {
                    return Ok(0);
                }
                LifecycleEngine::unread_count(self, owner, Some(cap)).await
            })
            .await
    }

    async fn set_starred(&self, owner: &str, id: MessageId, starred: bool) -> Result<()> {
        let work = LifecycleEngine::set_starred(self, owner, id, starred);
        for_user(span!(self, "set_starred"), "owner", owner, work).await
    }

    async fn delete(&self, owner: &str, id: MessageId) -> Result<()> {
        let work = LifecycleEngine::delete(self, owner, id);
        for_user(span!(self, "delete"), "owner", owner, work).await
    }

    async fn retract(&self, sender: &str, id: MessageId) -> Result<()> {
        let work = LifecycleEngine::retract(self, sender, id);
        for_user(span!(self, "retract"), "sender", sender, work).await
    }

    async fn edit(&self, sender: &str, id: MessageId, payload: P) -> Result<bson::DateTime> {
        let work = LifecycleEngine::edit(self, sender, id, payload);
        for_user(span!(self, "edit"), "sender", sender, work).await
    }

    async fn set_filter(&self, owner: &str, sender: &str, filter: Filter, on: bool) -> Result<()> {
        span!(self, "set_filter")
            .run(async move {
                check_user_id("owner", owner)?;
                check_user_id("sender", sender)?;
                LifecycleEngine::set_filter(self, owner, sender, filter, on).await
            })
            .await
    }

    fn retention(&self) -> Retention {
        LifecycleEngine::retention(self)
    }

    async fn prune(&self, owner: &str) -> Result<u64> {
        let work = LifecycleEngine::prune(self, owner);
        for_user(span!(self, "prune"), "owner", owner, work).await
    }
}

#[async_trait]
impl<P: Payload, E: TransferEngine<P>> InboxTransfer<P> for E {
    async fn owners(&self, after: Option<String>) -> Result<BoxStream<'_, Result<String>>> {
        span!(self, "owners")
            .run(TransferEngine::owners(self, after))
            .await
    }

    async fn export(&self, owner: &str) -> Result<BoxStream<'_, Result<HeldMessage>>> {
        let work = TransferEngine::export(self, owner);
        for_user(span!(self, "export"), "owner", owner, work).await
    }

    async fn import(&self, owner: &str, messages: &[HeldMessage]) -> Result<()> {
        let work = TransferEngine::import(self, owner, messages);
        let operation = span!(self, "import", items = messages.len());
        for_user(operation, "owner", owner, work).await
    }

    async fn purge(&self, owner: &str) -> Result<()> {
        let work = TransferEngine::purge(self, owner);
        for_user(span!(self, "purge"), "owner", owner, work).await
    }

    async fn purge_all(&self) -> Result<()> {
        span!(self, "purge_all")
            .run(TransferEngine::purge_all(self))
            .await
    }

    async fn is_empty(&self) -> Result<bool> {
        TransferEngine::is_empty(self).await
    }

    async fn send_stamped(
        &self,
        message: &Message<P>,
        recipients: &[String],
    ) -> Result<Vec<String>> {
        check_recipients(recipients)?;
        TransferEngine::send_stamped(self, message, recipients).await
    }
}
