//! What a reply tells its parent's author, and what deleting it withdraws.

use super::{Comment, CommentStore};
use crate::notifications::{Activity, Kind as NotificationKind, Outbox};
use crate::Result;

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
