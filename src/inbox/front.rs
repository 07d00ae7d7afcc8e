//! The front of every inbox store, written once: [`InboxStore`], [`InboxLifecycle`] and
//! [`InboxTransfer`] for every engine ([`super::engine`]).
//!
//! Each operation opens its span, checks its input (ids, recipient lists, idempotency keys:
//! before any command, so bad input writes nothing), and hands the engine the checked values.
//! Why a blanket implementation over engines rather than provided trait methods: the public
//! traits stay the small vocabulary applications call and may implement for stores of their
//! own, with no hook methods a caller could misuse, while the crate's strategies implement only
//! the engine traits, which nothing outside the crate can name.

use async_trait::async_trait;
use futures::stream::BoxStream;

use super::engine::{InboxEngine, LifecycleEngine, TransferEngine};
use super::keyed::KeyedSend;
use super::lifecycle::{Filter, Filters, InboxLifecycle, Retention, UpTo};
use super::transfer::{HeldMessage, InboxTransfer};
use super::validate::{check_new_message, check_recipients, check_user_id};
use super::{InboxStore, Message, MessageId, NewMessage, Payload, Sent, Strategy};
use crate::error::Result;
use crate::observe::store_operation;
use crate::page::{Page, PageRequest};
use crate::realtime::{ResumeToken, Updates, WatchOptions};
use crate::sharding::ShardKey;

/// The span of operation `$name` of `$engine` (see [`crate::observe::store_operation`]).
macro_rules! span {
    ($engine:expr, $name:literal $(, $($fields:tt)*)?) => {
        store_operation!(
            InboxEngine::migrating($engine),
            InboxEngine::strategy($engine).name(),
            "inbox",
            $name
            $(, $($fields)*)?
        )
    };
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
        span!(self, "count")
            .run(async move {
                check_user_id("owner", owner)?;
                InboxEngine::count(self, owner).await
            })
            .await
    }

    async fn filters(&self, owner: &str) -> Result<Filters> {
        span!(self, "filters")
            .run(async move {
                check_user_id("owner", owner)?;
                InboxEngine::filters(self, owner).await
            })
            .await
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
        span!(self, "mark_read")
            .run(async move {
                check_user_id("owner", owner)?;
                LifecycleEngine::mark_read(self, owner, id).await
            })
            .await
    }

    async fn mark_unread(&self, owner: &str, id: MessageId) -> Result<()> {
        span!(self, "mark_unread")
            .run(async move {
                check_user_id("owner", owner)?;
                LifecycleEngine::mark_unread(self, owner, id).await
            })
            .await
    }

    async fn mark_read_up_to(&self, owner: &str, up_to: UpTo) -> Result<()> {
        span!(self, "mark_read_up_to")
            .run(async move {
                check_user_id("owner", owner)?;
                LifecycleEngine::mark_read_up_to(self, owner, up_to).await
            })
            .await
    }

    async fn unread_count(&self, owner: &str) -> Result<u64> {
        span!(self, "unread_count")
            .run(async move {
                check_user_id("owner", owner)?;
                LifecycleEngine::unread_count(self, owner, None).await
            })
            .await
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
        span!(self, "set_starred")
            .run(async move {
                check_user_id("owner", owner)?;
                LifecycleEngine::set_starred(self, owner, id, starred).await
            })
            .await
    }

    async fn delete(&self, owner: &str, id: MessageId) -> Result<()> {
        span!(self, "delete")
            .run(async move {
                check_user_id("owner", owner)?;
                LifecycleEngine::delete(self, owner, id).await
            })
            .await
    }

    async fn retract(&self, sender: &str, id: MessageId) -> Result<()> {
        span!(self, "retract")
            .run(async move {
                check_user_id("sender", sender)?;
                LifecycleEngine::retract(self, sender, id).await
            })
            .await
    }

    async fn edit(&self, sender: &str, id: MessageId, payload: P) -> Result<bson::DateTime> {
        span!(self, "edit")
            .run(async move {
                check_user_id("sender", sender)?;
                LifecycleEngine::edit(self, sender, id, payload).await
            })
            .await
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
        span!(self, "prune")
            .run(async move {
                check_user_id("owner", owner)?;
                LifecycleEngine::prune(self, owner).await
            })
            .await
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
        span!(self, "export")
            .run(async move {
                check_user_id("owner", owner)?;
                TransferEngine::export(self, owner).await
            })
            .await
    }

    async fn import(&self, owner: &str, messages: &[HeldMessage]) -> Result<()> {
        span!(self, "import", items = messages.len())
            .run(async move {
                check_user_id("owner", owner)?;
                TransferEngine::import(self, owner, messages).await
            })
            .await
    }

    async fn purge(&self, owner: &str) -> Result<()> {
        span!(self, "purge")
            .run(async move {
                check_user_id("owner", owner)?;
                TransferEngine::purge(self, owner).await
            })
            .await
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
