//! [`MigratingComments`]: the comment store an application uses while its discussions move,
//! writing both stores, reading where the migration says, and translating links.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;

use super::units::CommentMigrationEngine;
use crate::comments::engine::{
    At, BallotEngine, CommentEngine, Listing, Ranked, ThreadsEngine, VotesEngine,
};
use crate::comments::{
    Comment, Deletion, DynCommentTransfer, Features, NewComment, Order, Sort, Strategy, Thread,
    ThreadedComments, Vote,
};
use crate::error::{Error, Invalid, Limit};
use crate::migrate::engine::Writes;
use crate::sharding::ShardKey;
use crate::{Page, PageRequest, Result};

/// The comment store of a running [`super::CommentMigration`]: every write goes to the source,
/// then (for a discussion whose copy is done) to the target, both under the discussion's lock
/// so the target takes them in the source's order; reads go to the source, or to the target
/// once the migration moved them. Until the finish every link it takes and gives is the
/// source's (the link map translates); after it, it gives the target's and takes both. See the
/// [module docs](crate::migrate) for what each costs. Errors are the source's: the target's own, after
/// the source took a write, leave the discussion to be copied again.
///
/// It threads ([`CommentStore::threaded`](crate::CommentStore::threaded)) where both strategies do.
pub struct MigratingComments {
    inner: Arc<CommentMigrationEngine>,
}

impl fmt::Debug for MigratingComments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MigratingComments")
            .field("migration", &self.inner)
            .finish()
    }
}

/// Where a discussion's reads go.
enum Reader {
    /// The source, links as they are.
    Source,
    /// The target before the finish: links translated both ways.
    Target,
    /// The target after the finish: links given translated where the map has them.
    Finished,
}

impl MigratingComments {
    pub(super) fn new(inner: Arc<CommentMigrationEngine>) -> Self {
        Self { inner }
    }

    fn source(&self) -> &DynCommentTransfer {
        &*self.inner.units.source
    }

    fn target(&self) -> &DynCommentTransfer {
        &*self.inner.units.target
    }

    /// Where `discussion`'s writes go: the source alone for a discussion the migration does
    /// not move.
    async fn writes(&self, discussion: &str) -> Result<Writes> {
        if !self.inner.units.in_scope(discussion) {
            return Ok(Writes::Source);
        }
        self.inner.writes().await
    }

    async fn reader(&self, discussion: &str) -> Result<Reader> {
        if !self.inner.units.in_scope(discussion) || !self.inner.reads_target(discussion).await? {
            return Ok(Reader::Source);
        }
        Ok(if self.inner.finished().await? {
            Reader::Finished
        } else {
            Reader::Target
        })
    }

    /// Runs `work` (a write to both stores) holding `discussion`'s lock.
    async fn locked<T>(
        &self,
        discussion: &str,
        work: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        self.inner
            .units
            .locks
            .with_lock(&format!("comments:{discussion}"), work)
            .await
    }

    /// The target's link the map records for `link` (one `find` of the map), if any.
    async fn mapped(&self, discussion: &str, link: &str) -> Result<Option<String>> {
        let mut map = self
            .inner
            .units
            .links
            .to_target(discussion, &[link])
            .await?;
        Ok(map.remove(link))
    }

    /// The target's link for `link`, a source link in the map (before the finish every link
    /// given is one); a link the map lacks is an error that has the discussion copied again.
    async fn moved(&self, discussion: &str, link: &str) -> Result<String> {
        self.mapped(discussion, link)
            .await?
            .ok_or_else(|| missing(link))
    }

    /// After the finish: the target's link for a link given out before it (in the map), or
    /// the link itself (one of the target's).
    async fn either(&self, discussion: &str, link: &str) -> Result<String> {
        Ok(self
            .mapped(discussion, link)
            .await?
            .unwrap_or_else(|| link.to_owned()))
    }

    /// The link to give the target for `link`, read as [`Reader`] says.
    async fn link_for(&self, reader: &Reader, discussion: &str, link: &str) -> Result<String> {
        match reader {
            Reader::Source => Ok(link.to_owned()),
            Reader::Target => match self.moved(discussion, link).await {
                // Not in the map: not a comment the source has, as the target would say.
                Err(_) => Err(Error::NotFound {
                    what: crate::error::Entity::Comment,
                    id: link.to_owned(),
                }),
                found => found,
            },
            Reader::Finished => self.either(discussion, link).await,
        }
    }

    /// `comments` read from the target before the finish, with the source's links (one `find`
    /// of the map).
    async fn back(&self, discussion: &str, mut comments: Vec<Comment>) -> Result<Vec<Comment>> {
        let links: Vec<&str> = comments
            .iter()
            .flat_map(|c| std::iter::once(c.link.as_str()).chain(c.parent.as_deref()))
            .collect();
        if links.is_empty() {
            return Ok(comments);
        }
        let map = self.inner.units.links.to_source(discussion, &links).await?;
        for comment in &mut comments {
            if let Some(link) = map.get(&comment.link) {
                comment.link = link.clone();
            }
            if let Some(parent) = comment.parent.as_mut().and_then(|p| map.get(p)) {
                comment.parent = Some(parent.clone());
            }
        }
        Ok(comments)
    }

    /// A page read from the store `reader` names: `read` on the source, or on the target with
    /// `target_link` (the link read through, if any, translated) and its comments' links
    /// translated back; a source cursor met by the target before the finish reads on from the
    /// source, whole until then.
    async fn page<'a, F, Fut>(
        &'a self,
        discussion: &str,
        link: Option<&str>,
        page: &PageRequest,
        read: F,
    ) -> Result<Page<Comment>>
    where
        F: Fn(&'a DynCommentTransfer, Option<String>, PageRequest) -> Fut,
        Fut: Future<Output = Result<Page<Comment>>>,
    {
        let reader = self.reader(discussion).await?;
        let link_given = link.map(str::to_owned);
        let translated = match link {
            Some(link) => Some(self.link_for(&reader, discussion, link).await?),
            None => None,
        };
        match reader {
            Reader::Source => read(self.source(), link_given, page.clone()).await,
            Reader::Finished => read(self.target(), translated, page.clone()).await,
            Reader::Target => match read(self.target(), translated, page.clone()).await {
                Err(Error::InvalidInput {
                    reason: Invalid::Cursor { .. },
                }) if page.after.is_some() => read(self.source(), link_given, page.clone()).await,
                Err(error) => Err(error),
                Ok(found) => {
                    let next = found.next;
                    let items = self.back(discussion, found.items).await?;
                    Ok(Page { items, next })
                }
            },
        }
    }

    /// One comment read as [`MigratingComments::page`] reads pages.
    async fn one(&self, discussion: &str, comment: Comment, reader: &Reader) -> Result<Comment> {
        match reader {
            Reader::Target => Ok(self
                .back(discussion, vec![comment])
                .await?
                .pop()
                .ok_or_else(|| missing(discussion))?),
            _ => Ok(comment),
        }
    }

    /// A write of `discussion` that names a comment: on the source with `link`, then on the
    /// target with the link the map gives, both under the discussion's lock; or on one store
    /// alone. A target that lacks the comment has the discussion copied again, unless `gone_ok`
    /// (a delete or a retraction: the target's strategy may have removed it already).
    async fn write_at<'a, T, F, Fut>(
        &'a self,
        discussion: &str,
        link: &str,
        gone_ok: bool,
        write: F,
    ) -> Result<T>
    where
        F: Fn(&'a DynCommentTransfer, String) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        match self.writes(discussion).await? {
            Writes::Source => write(self.source(), link.to_owned()).await,
            Writes::Target => write(self.target(), self.either(discussion, link).await?).await,
            Writes::Both => {
                self.locked(discussion, async {
                    let done = write(self.source(), link.to_owned()).await?;
                    self.inner
                        .mirror(vec![discussion.to_owned()], |_| async {
                            let moved = match self.moved(discussion, link).await {
                                Err(Error::Precondition { .. }) if gone_ok => return Ok(()),
                                moved => moved?,
                            };
                            match write(self.target(), moved).await {
                                Err(Error::NotFound { .. }) if gone_ok => Ok(()),
                                Err(Error::NotFound { .. }) => Err(missing(link)),
                                other => other.map(drop),
                            }
                        })
                        .await?;
                    Ok(done)
                })
                .await
            }
        }
    }

    /// A post or reply (`parent`): on the source, then on the target under the parent's
    /// target link, the new pair of links recorded, both under the discussion's lock.
    async fn add(
        &self,
        discussion: &str,
        parent: Option<&str>,
        comment: NewComment,
    ) -> Result<Comment> {
        if parent.is_some() && !self.inner.units.threads() {
            return Err(no_threads(self.target().strategy()));
        }
        let parent_owned = parent.map(str::to_owned);
        match self.writes(discussion).await? {
            Writes::Source => add(self.source(), discussion, parent_owned, comment).await,
            Writes::Target => {
                let parent = match parent {
                    Some(parent) => Some(self.either(discussion, parent).await?),
                    None => None,
                };
                add(self.target(), discussion, parent, comment).await
            }
            Writes::Both => {
                self.locked(discussion, async {
                    let keyed = comment.key.is_some();
                    let added =
                        add(self.source(), discussion, parent_owned, comment.clone()).await?;
                    let links = &self.inner.units.links;
                    self.inner
                        .mirror(vec![discussion.to_owned()], |_| async {
                            if keyed && self.mapped(discussion, &added.link).await?.is_some() {
                                // A repeat of a keyed post the target has already.
                                return Ok(());
                            }
                            let parent = match parent {
                                Some(parent) => Some(self.moved(discussion, parent).await?),
                                None => None,
                            };
                            let made = match add(self.target(), discussion, parent, comment).await {
                                Err(Error::NotFound { .. }) => return Err(missing(&added.link)),
                                made => made?,
                            };
                            links
                                .record(discussion, &[(added.link.clone(), made.link)])
                                .await
                        })
                        .await?;
                    Ok(added)
                })
                .await
            }
        }
    }
}

/// Posts `comment` to `store`, as a reply to `parent` if given.
async fn add(
    store: &DynCommentTransfer,
    discussion: &str,
    parent: Option<String>,
    comment: NewComment,
) -> Result<Comment> {
    match parent {
        None => store.post(discussion, comment).await,
        Some(parent) => match store.threaded() {
            Some(threads) => threads.reply(discussion, &parent, comment).await,
            None => Err(no_threads(store.strategy())),
        },
    }
}

/// What a write that reached the source but found the target without its comment returns
/// inside the migration (never to the caller): the discussion is copied again.
fn missing(link: &str) -> Error {
    Error::Precondition {
        reason: format!("the migration's target lacks the comment {link}: copied again"),
    }
}

fn no_threads(strategy: Strategy) -> Error {
    Error::Unsupported {
        feature: "replies",
        limit: Limit::Strategy,
        reason: format!("the {strategy} strategy of one of the migration's stores has no threads"),
    }
}

#[async_trait]
impl CommentEngine for MigratingComments {
    /// What both stores support.
    fn features(&self) -> Features {
        let (source, target) = (self.source().features(), self.target().features());
        Features {
            threading: source.threading && target.threading,
            removes_leaves: source.removes_leaves,
        }
    }

    fn threaded(&self) -> Option<&dyn ThreadedComments> {
        self.inner
            .units
            .threads()
            .then_some(self as &dyn ThreadedComments)
    }

    async fn create_discussion(&self, discussion: &str) -> Result<()> {
        match self.writes(discussion).await? {
            Writes::Source => self.source().create_discussion(discussion).await,
            Writes::Target => self.target().create_discussion(discussion).await,
            Writes::Both => {
                self.source().create_discussion(discussion).await?;
                self.inner
                    .mirror(vec![discussion.to_owned()], |_| {
                        self.target().create_discussion(discussion)
                    })
                    .await
            }
        }
    }

    async fn post(&self, discussion: &str, comment: NewComment) -> Result<Comment> {
        self.add(discussion, None, comment).await
    }

    async fn chronological(&self, listing: Listing<'_>, order: Order) -> Result<Page<Comment>> {
        let Listing { discussion, page } = listing;
        self.page(discussion, None, &page, |store, _, page| async move {
            store.chronological(discussion, order, page).await
        })
        .await
    }

    async fn get(&self, discussion: &str, link: &str) -> Result<Comment> {
        let reader = self.reader(discussion).await?;
        let found = match reader {
            Reader::Source => self.source().get(discussion, link).await?,
            _ => {
                let moved = self.link_for(&reader, discussion, link).await?;
                self.target().get(discussion, &moved).await?
            }
        };
        self.one(discussion, found, &reader).await
    }

    /// Returns the source's comment as edited (the target's, once finished).
    async fn edit(&self, discussion: &str, link: &str, text: &str) -> Result<Comment> {
        self.write_at(discussion, link, false, |store, link| async move {
            store.edit(discussion, &link, text).await
        })
        .await
    }

    /// What the source did (the target's strategy may tombstone what the source removes, and
    /// the other way round: each store keeps its own rule).
    async fn delete(&self, discussion: &str, link: &str) -> Result<Deletion> {
        self.write_at(discussion, link, true, |store, link| async move {
            store.delete(discussion, &link).await
        })
        .await
    }

    async fn count(&self, discussion: &str) -> Result<u64> {
        match self.reader(discussion).await? {
            Reader::Source => self.source().count(discussion).await,
            _ => self.target().count(discussion).await,
        }
    }

    async fn create_indexes(&self) -> Result<()> {
        self.source().create_indexes().await?;
        self.target().create_indexes().await
    }

    fn database(&self) -> &mongodb::Database {
        self.source().database()
    }

    fn shard_keys(&self) -> Vec<ShardKey> {
        let mut keys = self.source().shard_keys();
        keys.extend(self.target().shard_keys());
        keys
    }
}

#[async_trait]
impl BallotEngine for MigratingComments {
    /// The source's strategy (the target's pages, once reads moved, carry the target's
    /// cursors all the same).
    fn strategy(&self) -> Strategy {
        self.source().strategy()
    }

    async fn vote(
        &self,
        At { discussion, link }: At<'_>,
        user: &str,
        vote: Vote,
    ) -> Result<Option<Vote>> {
        self.write_at(discussion, link, false, |store, link| async move {
            store.vote(discussion, &link, user, vote).await
        })
        .await
    }

    async fn retract_vote(
        &self,
        At { discussion, link }: At<'_>,
        user: &str,
    ) -> Result<Option<Vote>> {
        self.write_at(discussion, link, true, |store, link| async move {
            store.retract_vote(discussion, &link, user).await
        })
        .await
    }

    async fn vote_of(&self, At { discussion, link }: At<'_>, user: &str) -> Result<Option<Vote>> {
        let reader = self.reader(discussion).await?;
        match reader {
            Reader::Source => self.source().vote_of(discussion, link, user).await,
            _ => match self.link_for(&reader, discussion, link).await {
                Ok(moved) => self.target().vote_of(discussion, &moved, user).await,
                Err(Error::NotFound { .. }) => Ok(None),
                Err(error) => Err(error),
            },
        }
    }

    async fn settle_votes(&self, discussion: &str) -> Result<usize> {
        let settled = self.source().settle_votes(discussion).await?;
        if self.inner.units.in_scope(discussion) {
            self.target().settle_votes(discussion).await?;
        }
        Ok(settled)
    }
}

#[async_trait]
impl VotesEngine for MigratingComments {
    fn migrating(&self) -> bool {
        true
    }

    async fn ranked(&self, listing: Listing<'_>, ranked: Ranked<'_>) -> Result<Page<Comment>> {
        let (Listing { discussion, page }, Ranked { parent, sort }) = (listing, ranked);
        self.page(
            discussion,
            parent,
            &page,
            |store, parent, page| async move {
                store
                    .ranked(discussion, parent.as_deref(), sort, page)
                    .await
            },
        )
        .await
    }
}

#[async_trait]
impl ThreadsEngine for MigratingComments {
    /// Assembled from [`crate::comments::VotedComments::ranked`] of this store, level by level.
    async fn ranked_thread(
        &self,
        listing: Listing<'_>,
        sort: Sort,
        depth: usize,
    ) -> Result<Page<Thread>> {
        let Listing { discussion, page } = listing;
        crate::comments::ranked_levels(self, discussion, sort, page, depth).await
    }

    /// # Errors
    ///
    /// As the stores', and [`Error::Unsupported`] (`"replies"`) where either strategy has no
    /// threads, before anything is written.
    async fn reply(&self, discussion: &str, parent: &str, comment: NewComment) -> Result<Comment> {
        self.add(discussion, Some(parent), comment).await
    }

    async fn thread_page(&self, listing: Listing<'_>, order: Order) -> Result<Page<Comment>> {
        let Listing { discussion, page } = listing;
        self.page(discussion, None, &page, |store, _, page| async move {
            match store.threaded() {
                Some(threads) => threads.thread_page(discussion, order, page).await,
                None => Err(no_threads(store.strategy())),
            }
        })
        .await
    }

    async fn sub_thread(&self, listing: Listing<'_>, link: &str) -> Result<Page<Comment>> {
        let Listing { discussion, page } = listing;
        self.page(
            discussion,
            Some(link),
            &page,
            |store, link, page| async move {
                match (store.threaded(), link) {
                    (Some(threads), Some(link)) => {
                        threads.sub_thread(discussion, &link, page).await
                    }
                    _ => Err(no_threads(store.strategy())),
                }
            },
        )
        .await
    }
}
