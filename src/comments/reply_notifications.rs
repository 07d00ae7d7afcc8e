//! What a reply tells its parent's author, and what deleting it withdraws.

use std::sync::Arc;

use super::{Comment, CommentStore};
use crate::config::StoreConfig;
use crate::notifications::{Activity, DynNotifier, Kind as NotificationKind, Outbox};
use crate::Result;

/// The builder method of a store whose replies notify: `notifier`, documented for `$store`.
macro_rules! reply_notifier_method {
    ($store:ident) => {
        /// Tells `notifier` (a [`NotificationStore`](crate::NotificationStore), say) of every
        /// reply: the parent comment's author is notified ([`Kind::Reply`] on
        /// `"<discussion>/<parent link>"`, by the reply's author; nobody of their own reply), and
        /// deleting a reply withdraws its author from that group (even if they wrote other replies
        /// to the same comment). Off by default.
        ///
        /// The notification never fails the reply (or the delete): it is queued in the store's own
        /// database, in the collection `<main collection>_outbox`, and tried at once (for at most 2
        /// seconds); one that could not be delivered then is delivered by the store's
        #[doc = concat!("[`outbox`](", stringify!($store), "::outbox) worker, at least once (see")]
        /// [`Outbox`](crate::notifications::Outbox) for the guarantee and what can lose one). On,
        /// a reply costs 2 commands more in the store's database (queue, then complete) besides
        /// the notifier's own, and a delete 4 (reading the comment and its parent, queue,
        /// complete).
        ///
        /// [`Kind::Reply`]: crate::notifications::Kind::Reply
        pub fn notifier(
            mut self,
            notifier: std::sync::Arc<crate::notifications::DynNotifier>,
        ) -> Self {
            self.notifier = Some(notifier);
            self
        }
    };
}

pub(super) use reply_notifier_method;

/// The outbox of a store built with a `notifier`, beside its main collection `main`.
pub(super) fn reply_outbox(
    config: &StoreConfig,
    main: &str,
    notifier: Option<Arc<DynNotifier>>,
) -> Result<Option<Outbox>> {
    notifier
        .map(|notifier| Outbox::build(config, &Outbox::collection_for(main), notifier))
        .transpose()
}

/// What a reply tells a notifier: `reply`'s author replied to the comment `parent` (by
/// `parent_author`) of `discussion`; the parent's author is notified, grouped by the parent.
fn reply_activity(discussion: &str, parent: &str, parent_author: &str, replier: &str) -> Activity {
    Activity::new(
        parent_author,
        NotificationKind::Reply,
        format!("{discussion}/{parent}"),
        replier,
    )
}

/// Fails before a reply to `parent` of `discussion` is written if the store notifies (`outbox`
/// set) and the notification store would refuse the reply's notification: its target,
/// `"<discussion>/<parent link>"`, is an id, of at most [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES)
/// ([`Invalid::TooLong`](crate::error::Invalid::TooLong), `"notification target"`).
pub(super) fn check_reply_target(
    outbox: Option<&Outbox>,
    discussion: &str,
    parent: &str,
) -> Result<()> {
    if outbox.is_none() {
        return Ok(());
    }
    let target = reply_activity(discussion, parent, "", "").target;
    crate::validate::id("notification target", &target)
}

/// Tells `outbox`, if any, of `reply` to the comment `parent` by `parent_author`: queued in the
/// store's database and tried at once, never failing the reply (see [`Outbox`]).
pub(super) async fn notify_reply(
    outbox: Option<&Outbox>,
    discussion: &str,
    parent: &str,
    parent_author: &str,
    reply: &Comment,
) {
    if let Some(outbox) = outbox {
        let activity = reply_activity(discussion, parent, parent_author, &reply.author.id);
        outbox.notify(activity).await;
    }
}

/// Before `link` of `discussion` is deleted: if `notifier` is set and the comment is a reply,
/// what its deletion withdraws (two reads: the comment and its parent). Give it to the
/// outbox's withdraw once the deletion succeeded.
pub(super) async fn reply_to_withdraw(
    store: &(impl CommentStore + ?Sized),
    notifier: Option<&Outbox>,
    discussion: &str,
    link: &str,
) -> Result<Option<Activity>> {
    if notifier.is_none() {
        return Ok(None);
    }
    let comment = store.get(discussion, link).await?;
    let Some(parent) = &comment.parent else {
        return Ok(None);
    };
    let parent_author = store.get(discussion, parent).await?.author.id;
    Ok(Some(reply_activity(
        discussion,
        parent,
        &parent_author,
        &comment.author.id,
    )))
}
