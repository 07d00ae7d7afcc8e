//! The front of every comment store, written once: [`CommentStore`], [`VotedComments`],
//! [`ThreadedComments`] and [`CommentTransfer`] for every engine ([`super::engine`]).
//!
//! Each operation opens its span, checks the discussion id (and a page's limit) before any
//! command, and calls the engine. The reasons for a blanket implementation over engines are the
//! inbox front's ([`crate::inbox`]): the public traits stay small and implementable by
//! applications, the engines stay unnameable outside the crate.

use async_trait::async_trait;
use futures::stream::BoxStream;

use super::engine::{At, BallotEngine, CommentEngine, ThreadsEngine, TransferEngine, VotesEngine};
use super::model::HeldComment;
use super::transfer::CommentTransfer;
use super::validate::{check_discussion, check_page};
use super::{
    Comment, CommentStore, Deletion, Features, NewComment, Order, Sort, Strategy, Thread,
    ThreadedComments, Vote, VotedComments,
};
use crate::error::Result;
use crate::observe::store_operation;
use crate::page::{Page, PageRequest};
use crate::sharding::ShardKey;

/// The span of operation `$name` of `$engine` (see [`crate::observe::store_operation`]).
macro_rules! span {
    ($($operation:tt)*) => { store_operation!(VotesEngine, "comments", $($operation)*) };
}

#[async_trait]
impl<E: VotesEngine> VotedComments for E {
    async fn vote(
        &self,
        discussion: &str,
        link: &str,
        user: &str,
        vote: Vote,
    ) -> Result<Option<Vote>> {
        span!(self, "vote")
            .run_checked(check_discussion(discussion), |()| {
                BallotEngine::vote(self, At { discussion, link }, user, vote)
            })
            .await
    }

    async fn retract_vote(&self, discussion: &str, link: &str, user: &str) -> Result<Option<Vote>> {
        span!(self, "retract_vote")
            .run_checked(check_discussion(discussion), |()| {
                BallotEngine::retract_vote(self, At { discussion, link }, user)
            })
            .await
    }

    async fn vote_of(&self, discussion: &str, link: &str, user: &str) -> Result<Option<Vote>> {
        span!(self, "vote_of")
            .run_checked(check_discussion(discussion), |()| {
                BallotEngine::vote_of(self, At { discussion, link }, user)
            })
            .await
    }

    async fn ranked(
        &self,
        discussion: &str,
        parent: Option<&str>,
        sort: Sort,
        page: PageRequest,
    ) -> Result<Page<Comment>> {
        span!(self, "ranked", limit = page.limit)
            .run_checked(check_page(discussion, page), |listing| {
                VotesEngine::ranked(self, listing, parent, sort)
            })
            .await
    }

    async fn settle_votes(&self, discussion: &str) -> Result<usize> {
        span!(self, "settle_votes")
            .run_checked(check_discussion(discussion), |()| {
                BallotEngine::settle_votes(self, discussion)
            })
            .await
    }
}

#[async_trait]
impl<E: CommentEngine> CommentStore for E {
    fn strategy(&self) -> Strategy {
        VotesEngine::strategy(self)
    }

    fn features(&self) -> Features {
        CommentEngine::features(self)
    }

    fn threaded(&self) -> Option<&dyn ThreadedComments> {
        CommentEngine::threaded(self)
    }

    async fn create_discussion(&self, discussion: &str) -> Result<()> {
        span!(self, "create_discussion")
            .run_checked(check_discussion(discussion), |()| {
                CommentEngine::create_discussion(self, discussion)
            })
            .await
    }

    async fn post(&self, discussion: &str, comment: NewComment) -> Result<Comment> {
        span!(self, "post")
            .run_checked(check_discussion(discussion), |()| {
                CommentEngine::post(self, discussion, comment)
            })
            .await
    }

    async fn chronological(
        &self,
        discussion: &str,
        order: Order,
        page: PageRequest,
    ) -> Result<Page<Comment>> {
        span!(self, "chronological", limit = page.limit)
            .run_checked(check_page(discussion, page), |listing| {
                CommentEngine::chronological(self, listing, order)
            })
            .await
    }

    async fn get(&self, discussion: &str, link: &str) -> Result<Comment> {
        span!(self, "get")
            .run_checked(check_discussion(discussion), |()| {
                CommentEngine::get(self, discussion, link)
            })
            .await
    }

    async fn edit(&self, discussion: &str, link: &str, text: &str) -> Result<Comment> {
        span!(self, "edit")
            .run_checked(check_discussion(discussion), |()| {
                CommentEngine::edit(self, discussion, link, text)
            })
            .await
    }

    async fn delete(&self, discussion: &str, link: &str) -> Result<Deletion> {
        span!(self, "delete")
            .run_checked(check_discussion(discussion), |()| {
                CommentEngine::delete(self, discussion, link)
            })
            .await
    }

    async fn count(&self, discussion: &str) -> Result<u64> {
        span!(self, "count")
            .run_checked(check_discussion(discussion), |()| {
                CommentEngine::count(self, discussion)
            })
            .await
    }

    async fn create_indexes(&self) -> Result<()> {
        span!(self, "create_indexes")
            .run(CommentEngine::create_indexes(self))
            .await
    }

    fn shard_keys(&self) -> Vec<ShardKey> {
        CommentEngine::shard_keys(self)
    }

    fn database(&self) -> &mongodb::Database {
        CommentEngine::database(self)
    }
}

#[async_trait]
impl<E: ThreadsEngine> ThreadedComments for E {
    async fn reply(&self, discussion: &str, parent: &str, comment: NewComment) -> Result<Comment> {
        span!(self, "reply")
            .run_checked(check_discussion(discussion), |()| {
                ThreadsEngine::reply(self, discussion, parent, comment)
            })
            .await
    }

    async fn thread_page(
        &self,
        discussion: &str,
        order: Order,
        page: PageRequest,
    ) -> Result<Page<Comment>> {
        span!(self, "thread_page", limit = page.limit)
            .run_checked(check_page(discussion, page), |listing| {
                ThreadsEngine::thread_page(self, listing, order)
            })
            .await
    }

    async fn sub_thread(
        &self,
        discussion: &str,
        link: &str,
        page: PageRequest,
    ) -> Result<Page<Comment>> {
        span!(self, "sub_thread", limit = page.limit)
            .run_checked(check_page(discussion, page), |listing| {
                ThreadsEngine::sub_thread(self, listing, link)
            })
            .await
    }

    async fn ranked_thread(
        &self,
        discussion: &str,
        sort: Sort,
        page: PageRequest,
        depth: usize,
    ) -> Result<Page<Thread>> {
        span!(self, "ranked_thread", limit = page.limit)
            .run_checked(check_page(discussion, page), |listing| {
                ThreadsEngine::ranked_thread(self, listing, sort, depth)
            })
            .await
    }
}

#[async_trait]
impl<E: TransferEngine> CommentTransfer for E {
    async fn discussions(&self, after: Option<String>) -> Result<BoxStream<'_, Result<String>>> {
        span!(self, "discussions")
            .run(TransferEngine::discussions(self, after))
            .await
    }

    async fn export(&self, discussion: &str) -> Result<Vec<HeldComment>> {
        span!(self, "export")
            .run(TransferEngine::export(self, discussion))
            .await
    }

    async fn import(&self, discussion: &str, comments: &[HeldComment]) -> Result<Vec<String>> {
        span!(self, "import", items = comments.len())
            .run(TransferEngine::import(self, discussion, comments))
            .await
    }

    async fn purge(&self, discussion: &str) -> Result<()> {
        span!(self, "purge")
            .run(TransferEngine::purge(self, discussion))
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

    async fn threaded_discussion(&self, within: Option<&[String]>) -> Result<Option<String>> {
        TransferEngine::threaded_discussion(self, within).await
    }

    fn data_collections(&self) -> Vec<String> {
        TransferEngine::data_collections(self)
    }
}
