//! [`SetUp`]: what the conformance suites do to a store before a test uses it.

use async_trait::async_trait;

use mongo_social::server::Topology;
use mongo_social::{
    comments::DynCommentStore, inbox::DynInboxLifecycle, inbox::Payload, BucketedFanOut, Delivery,
    DynInboxStore, Embedded, FanOutOnRead, FanOutOnWrite, FeedStore, FollowGraph, HybridPages,
    JobQueue, NotificationStore, PerComment, Result,
};

/// Readies a store for a test as a new deployment would: when the server is a sharded deployment
/// (a `mongos`, or DocumentDB's gateway over Citus), its collections sharded on its declared keys
/// through its own `shard_collections`, before they exist; then its indexes. So every suite that
/// sets its stores up this way runs on sharded collections there, unique indexes included, and
/// on plain collections everywhere else.
///
/// ```no_run
/// # async fn demo(db: &mongodb::Database) -> mongo_social::Result<()> {
/// use mongo_social_lab::SetUp;
/// let graph = mongo_social::FollowGraph::builder(db).build()?;
/// graph.set_up().await?;
/// # Ok(()) }
/// ```
#[async_trait]
pub trait SetUp {
    /// `shard_collections` on a sharded deployment, then `create_indexes`.
    async fn set_up(&self) -> Result<()>;
}

/// Whether the suites shard what they set up: the server is a sharded deployment.
async fn sharded() -> bool {
    super::server_info().await.topology == Topology::Sharded
}

macro_rules! set_up {
    ($($payload:ident)? => $store:ty $(, $prelude:path)?) => {
        #[async_trait]
        impl$(<$payload: Payload>)? SetUp for $store {
            async fn set_up(&self) -> Result<()> {
                $(#[allow(unused_imports)] use $prelude;)?
                if sharded().await {
                    self.shard_collections().await?;
                }
                self.create_indexes().await
            }
        }
    };
}

set_up!(P => FanOutOnRead<P>, mongo_social::InboxStore);
set_up!(P => FanOutOnWrite<P>, mongo_social::InboxStore);
set_up!(P => BucketedFanOut<P>, mongo_social::InboxStore);
set_up!(P => DynInboxStore<P>);
set_up!(P => DynInboxLifecycle<P>);
set_up!(P => mongo_social::inbox::DynInboxTransfer<P>);
set_up!(=> PerComment, mongo_social::CommentStore);
set_up!(=> Embedded, mongo_social::CommentStore);
set_up!(=> HybridPages, mongo_social::CommentStore);
set_up!(=> DynCommentStore);
set_up!(=> FollowGraph);
set_up!(=> JobQueue);
set_up!(P => Delivery<P>);
set_up!(P => NotificationStore<P>);
set_up!(P => FeedStore<P>);
set_up!(=> dyn mongo_social::comments::ThreadedComments);
set_up!(=> mongo_social::comments::DynCommentTransfer);
