//! The one seam between the data models and the server they run on.
//!
//! Every store holds one [`Backend`], built once by its builder (see [`crate::config`]), and
//! asks it for everything that depends on the server rather than on the data model:
//!
//! - the server's [`Capabilities`], detected on first use (or given) and shared by clones;
//! - write isolation: on MongoDB (and every engine whose single-document updates are atomic)
//!   the stores' filters make each write safe on its own; FerretDB 1.x reads, modifies and
//!   writes back whole documents without isolation, so there writers of the same documents
//!   must take turns. [`Backend::exclusive`] and its siblings make that choice, from the
//!   capabilities: data-model code says which keys its work touches and never reads a
//!   capability flag to choose a locking strategy;
//! - leased locks that a store needs on every server (a job claim, a graph rebuild), over the
//!   same locks collection ([`Backend::lease_locks`]);
//! - the store's indexes, created one per command, and before the first write where
//!   correctness depends on them ([`Backend::create_indexes`], [`Backend::ensure_indexes`]),
//!   including indexes only some servers have ([`Backend::with_partial_index`],
//!   [`Backend::with_text_index`]);
//! - many update statements in as few commands as the server takes ([`Backend::update_batch`]);
//! - the shape of a filter that addresses one document by `_id` ([`Backend::by_id`],
//!   [`Backend::find_by_ids`]): with the shard key's fields, so a `mongos` routes it to one
//!   shard, or by `_id` alone where the server evaluates nothing else without decoding the whole
//!   collection (FerretDB 1.x);
//! - retries of transient failures under the store's policy ([`Backend::retry`]);
//! - what the server does differently, as intents ([`Backend::dialect`]: the fields a
//!   `findAndModify` returns, array slices, text search, reads through partial indexes, graph
//!   joins, change streams);
//! - sharding the store's collections ([`sharding`]).
//!
//! A new server quirk of these kinds changes this folder, not the data models. A new server
//! family is a file in `src/server/family/` (its recognition, capabilities and tunings) and a
//! variant of `ServerFamily` there; [`dialect`] lists the steps.

pub(crate) mod dialect;
mod guarded;
pub(crate) mod indexes;
pub(crate) mod lease_lock;
mod lists;
mod newest;
mod owners;
pub(crate) mod sharding;
pub(crate) mod update_batch;

pub(crate) use guarded::{Guard, GuardedUpdate};
pub(crate) use lists::SortedLists;
pub(crate) use owners::lock_key;

use std::future::Future;
use std::time::Duration;

use bson::{doc, Bson, Document};
use std::future::IntoFuture;

use futures::TryStreamExt;
use mongodb::{Collection, Database, IndexModel};

use crate::error::Result;
use crate::observe::Operation;
use crate::retry::RetryPolicy;
use crate::server::{Capabilities, DetectedCapabilities};
use dialect::{Dialect, TimeIndex};
use indexes::Indexes;
use lease_lock::LeaseLocks;
use update_batch::UpdateBatch;

/// The most documents [`Backend::find_by_ids`] reads one `find` each where only `{_id}` filters
/// stay in the engine: past it, one `find` that decodes the collection once costs less.
pub(crate) const FEW_BY_ID: usize = 8;

/// The most keys one round of [`Backend::exclusive_in_rounds`] locks: each round costs a lock
/// `insert`, its reads and an unlock `delete` besides its writes, so rounds are wide, and a
/// round's writes end well inside a lock's lease even on a slow server (50 recipients' pushes
/// took under half a second on FerretDB 1.24 with SQLite). Its writes go out in `update`
/// commands of at most
/// [`Capabilities::max_update_statements`](crate::server::Capabilities::max_update_statements).
pub(crate) const LOCKED_ROUND: usize = 50;

/// A store's view of its server; cheap to clone, and clones share what was detected and
/// created.
///
/// Where updates are not atomic, each key of [`Backend::exclusive`] is a leased lock document
/// `{_id: key, token, expires}` in the store's locks collection (see [`LeaseLocks`]): one
/// `insert` to take the locks of a call, one `delete` to release them, taken over after the
/// lease if a holder dies.
#[derive(Clone, Debug)]
pub(crate) struct Backend {
    database: Database,
    capabilities: DetectedCapabilities,
    retry: RetryPolicy,
    /// `None` for a store that never takes turns (its builder named no locks collection).
    locks: Option<LeaseLocks>,
    indexes: Indexes,
}

impl Backend {
    /// A backend over `database` whose locks (if the store takes any) live in the collection
    /// `locks` and last `lease`; `capabilities` as given, or detected on first use.
    pub(crate) fn new(
        database: &Database,
        locks: Option<(&str, Duration)>,
        retry: RetryPolicy,
        capabilities: Option<Capabilities>,
    ) -> Self {
        Self {
            database: database.clone(),
            capabilities: capabilities.map_or_else(DetectedCapabilities::default, |given| {
                DetectedCapabilities::given(given)
            }),
            retry,
            locks: locks
                .map(|(name, lease)| LeaseLocks::new(database.collection(name), lease, retry)),
            indexes: Indexes::new(),
        }
    }

    /// Adds an index the store needs on `collection`.
    pub(crate) fn with_index(
        mut self,
        collection: &Collection<Document>,
        model: IndexModel,
    ) -> Self {
        self.indexes = self.indexes.with(collection, model, None);
        self
    }

    /// Adds the index behind an owner's newest-first pages in the order the server reads: the
    /// ascending keys where the server walks an index backwards, the descending keys where
    /// ordered scans go forward only, and there for owners in an array also
    /// [`TimeIndex::unordered`], the fallback of [`dialect::NewestFirst::FromNewest`]. Reads follow
    /// [`Dialect::newest_first`].
    pub(crate) fn with_time_index(
        mut self,
        collection: &Collection<Document>,
        index: TimeIndex,
    ) -> Self {
        let ascending = IndexModel::builder().keys(index.ascending()).build();
        let descending = IndexModel::builder().keys(index.descending()).build();
        self.indexes = self
            .indexes
            .with(
                collection,
                ascending,
                Some(|c| !c.ordered_scans_forward_only),
            )
            .with(
                collection,
                descending,
                Some(|c| c.ordered_scans_forward_only),
            );
        if index.owners_in_array {
            self.indexes = self.indexes.with(
                collection,
                index.unordered(),
                Some(|c| c.ordered_scans_forward_only),
            );
        }
        self
    }

    /// Adds `partial`, an index with a `partialFilterExpression`, where the server has partial
    /// indexes, and `otherwise` (if any) where it has none; reads that the partial index serves
    /// take their filter from [`Dialect::through_partial_index`].
    pub(crate) fn with_partial_index(
        mut self,
        collection: &Collection<Document>,
        partial: IndexModel,
        otherwise: Option<IndexModel>,
    ) -> Self {
        self.indexes = self
            .indexes
            .with(collection, partial, Some(|c| c.partial_indexes));
        if let Some(otherwise) = otherwise {
            self.indexes = self
                .indexes
                .with(collection, otherwise, Some(|c| !c.partial_indexes));
        }
        self
    }

    /// Adds a text index, created where the server has text search (searches take their
    /// stages from [`Dialect::text_search`]).
    pub(crate) fn with_text_index(
        mut self,
        collection: &Collection<Document>,
        model: IndexModel,
    ) -> Self {
        self.indexes = self
            .indexes
            .with(collection, model, Some(|c| c.text_search));
        self
    }

    pub(crate) fn database(&self) -> &Database {
        &self.database
    }

    /// The store's retry policy.
    pub(crate) fn retry_policy(&self) -> &RetryPolicy {
        &self.retry
    }

    /// The server's capabilities, detected on first use.
    pub(crate) async fn capabilities(&self) -> Result<Capabilities> {
        self.capabilities.get(&self.database).await
    }

    /// How the server does what the stores ask (see [`dialect`]), from its capabilities:
    /// detected on first use, so the first call of a store may cost detection's commands.
    pub(crate) async fn dialect(&self) -> Result<Dialect> {
        Ok(Dialect::new(self.capabilities().await?))
    }

    /// Runs `run` until it succeeds, fails with an error that is not transient, or the store's
    /// retry budget is spent; `run` must be idempotent (see [`crate::retry::retry`]).
    pub(crate) async fn retry<T, F, Fut>(&self, operation: &'static str, run: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        crate::retry::retry(&self.retry, operation, run).await
    }

    /// One driver command (an action such as `collection.update_one(filter.clone(), update)`,
    /// which `action` makes again for each attempt) run under the store's retry policy, as
    /// [`Backend::retry`] runs it: the command must be idempotent.
    pub(crate) async fn command<T, F, A>(&self, operation: &'static str, action: F) -> Result<T>
    where
        F: Fn() -> A,
        A: IntoFuture<Output = mongodb::error::Result<T>>,
    {
        self.retry(operation, || async { Ok(action().await?) })
            .await
    }

    /// Whether a document of `collection` matches `filter`: one `find` of its `_id` (a
    /// [`Backend::command`], retried as one).
    pub(crate) async fn exists(
        &self,
        operation: &'static str,
        collection: &Collection<Document>,
        filter: Document,
    ) -> Result<bool> {
        let found = self
            .command(operation, || {
                collection
                    .find_one(filter.clone())
                    .projection(doc! { "_id": 1 })
            })
            .await?;
        Ok(found.is_some())
    }

    /// Every document a `find` (which `find` makes again for each attempt) returns, read under
    /// the store's retry policy: a failed attempt reads the whole result again.
    pub(crate) async fn find_all<T, F, A>(&self, operation: &'static str, find: F) -> Result<Vec<T>>
    where
        F: Fn() -> A,
        A: IntoFuture<Output = mongodb::error::Result<mongodb::Cursor<T>>>,
        T: serde::de::DeserializeOwned + Send + Sync,
    {
        self.retry(operation, || async {
            Ok(find().await?.try_collect().await?)
        })
        .await
    }

    /// [`Backend::retry`] for background work, which waits an unreachable database out within
    /// the budget instead of reporting it at once (see [`RetryPolicy`]).
    pub(crate) async fn retry_through_outages<T, F, Fut>(
        &self,
        operation: &'static str,
        run: F,
    ) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        crate::retry::retry(&self.retry.through_outages(), operation, run).await
    }

    /// Inserts `document` once under the store's retry policy: `false` if a unique index already
    /// held its key (see [`update_batch::insert_once_with`]).
    pub(crate) async fn insert_once(
        &self,
        collection: &Collection<Document>,
        document: Document,
    ) -> Result<bool> {
        let capabilities = self.capabilities().await?;
        update_batch::insert_once_with(&self.retry, collection, document, &capabilities).await
    }

    /// Inserts `documents` in one unordered `insert` under the store's retry policy, a
    /// duplicate key taken as "already stored" (see [`update_batch::insert_many_once`]).
    pub(crate) async fn insert_many_once(
        &self,
        collection: &Collection<Document>,
        documents: Vec<Document>,
    ) -> Result<()> {
        update_batch::insert_many_once(&self.retry, collection, documents).await
    }

    /// Creates every index, one `createIndexes` command each (see [`crate::backend::indexes`]).
    pub(crate) async fn create_indexes(&self) -> Result<()> {
        self.indexes
            .create(&self.capabilities().await?, &self.retry)
            .await
    }

    /// [`Backend::create_indexes`] in `operation`'s span (a store's public `create_indexes`).
    pub(crate) async fn create_indexes_in(&self, operation: Operation) -> Result<()> {
        operation.run(self.create_indexes()).await
    }

    /// Creates the indexes unless this store (or a clone) already did.
    pub(crate) async fn ensure_indexes(&self) -> Result<()> {
        self.indexes
            .ensure(&self.capabilities().await?, &self.retry)
            .await
    }

    /// An empty batch of update statements for `collection`, sent under the store's policy and
    /// the server's limits.
    pub(crate) fn update_batch<'a>(&'a self, collection: &'a str) -> UpdateBatch<'a> {
        UpdateBatch::new(&self.database, &self.capabilities, &self.retry, collection)
    }

    /// A filter for the one document whose `_id` is `id` and whose shard key fields hold
    /// `shard_key` (their values, by equality): `{_id, ..shard_key}`, which a `mongos` routes to
    /// one shard; or `{_id}` alone where the server evaluates no other filter in its engine
    /// ([`Capabilities::filters_beyond_id`] false: FerretDB 1.x, which cannot be sharded), since
    /// there any other field makes it decode and test every document of the collection.
    pub(crate) async fn by_id(&self, id: Bson, shard_key: &Document) -> Result<Document> {
        let mut filter = doc! { "_id": id };
        if self.capabilities().await?.filters_beyond_id {
            filter.extend(shard_key.clone());
        }
        Ok(filter)
    }

    /// The documents of `collection` with the `(_id, shard key values)` of `keys`, projected,
    /// missing ones left out: one `find` of the [`Backend::by_id`] filters joined by `$or`.
    ///
    /// Where only a filter that is exactly `{_id}` stays in the engine (FerretDB 1.x), such a
    /// `find` decodes every document of the collection, while a `find` by `{_id}` scans inside
    /// the engine only until it meets its document, for a fraction of that cost (measured on
    /// 100 buckets, 1.2 MB: 10 ms to find one bucket by `_id`, 137 ms to update one by owner and
    /// sequence against 19 ms by `_id`). There up to [`FEW_BY_ID`] documents are read one `find`
    /// each, at once, and more in one `find` as elsewhere.
    pub(crate) async fn find_by_ids(
        &self,
        collection: &Collection<Document>,
        keys: &[(Bson, Document)],
        projection: Document,
    ) -> Result<Vec<Document>> {
        /// Reads in flight at once, one document each.
        const CONCURRENT_READS: usize = 8;
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        if self.capabilities().await?.filters_beyond_id || keys.len() > FEW_BY_ID {
            let filters: Vec<Bson> = keys
                .iter()
                .map(|(id, shard_key)| {
                    let mut filter = doc! { "_id": id.clone() };
                    filter.extend(shard_key.clone());
                    Bson::Document(filter)
                })
                .collect();
            return Ok(collection
                .find(doc! { "$or": filters })
                .projection(projection)
                .batch_size(keys.len() as u32 + 1)
                .await?
                .try_collect()
                .await?);
        }
        let mut found = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(CONCURRENT_READS) {
            let reads = chunk.iter().map(|(id, _)| {
                collection
                    .find_one(doc! { "_id": id.clone() })
                    .projection(projection.clone())
                    .into_future()
            });
            found.extend(
                futures::future::try_join_all(reads)
                    .await?
                    .into_iter()
                    .flatten(),
            );
        }
        Ok(found)
    }

    /// Leased locks in the store's locks collection that last `lease`, for work that takes
    /// turns on every server.
    pub(crate) fn lease_locks(&self, lease: Duration) -> LeaseLocks {
        self.locks().lasting(lease)
    }

    /// Runs `work` on all of `keys` on every server, in rounds of at most [`LOCKED_ROUND`] keys,
    /// each holding the locks of the keys it got, leased for `lease` (see
    /// [`LeaseLocks::in_rounds`]): for work that takes turns wherever it runs, as
    /// [`Backend::lease_locks`] locks do, and [`Backend::exclusive_in_rounds`] for work that
    /// takes turns only where the server needs it.
    pub(crate) async fn lease_locked_in_rounds<F, Fut>(
        &self,
        lease: Duration,
        keys: &[String],
        work: F,
    ) -> Result<()>
    where
        F: FnMut(Vec<String>) -> Fut,
        Fut: Future<Output = Result<()>>,
    {
        self.lease_locks(lease)
            .in_rounds(keys, LOCKED_ROUND, work)
            .await
    }

    /// The name of the locks collection.
    pub(crate) fn locks_collection(&self) -> &str {
        self.locks().collection_name()
    }

    fn locks(&self) -> &LeaseLocks {
        // Only stores built with a locks collection call what takes locks.
        self.locks
            .as_ref()
            .expect("a store that takes locks names its locks collection")
    }

    /// Whether writers must take turns on this server.
    async fn locking(&self) -> Result<bool> {
        Ok(!self.capabilities().await?.atomic_updates)
    }

    /// Runs `work` holding every one of `keys` where the server needs it.
    pub(crate) async fn exclusive<T>(
        &self,
        keys: &[String],
        work: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        if self.locking().await? {
            self.locks().with_locks(keys, work).await
        } else {
            work.await
        }
    }

    /// [`Backend::exclusive`] for one key.
    pub(crate) async fn exclusive_one<T>(
        &self,
        key: &str,
        work: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        self.exclusive(&[key.to_owned()], work).await
    }

    /// Runs `work` on all of `keys`: at once where the server needs no locks; otherwise in
    /// rounds of at most [`LOCKED_ROUND`] keys, each holding the locks of the keys it got (see
    /// [`LeaseLocks::in_rounds`]), so no caller holds some keys while waiting for others.
    pub(crate) async fn exclusive_in_rounds<F, Fut>(
        &self,
        keys: &[String],
        mut work: F,
    ) -> Result<()>
    where
        F: FnMut(Vec<String>) -> Fut,
        Fut: Future<Output = Result<()>>,
    {
        if self.locking().await? {
            self.locks().in_rounds(keys, LOCKED_ROUND, work).await
        } else {
            work(keys.to_vec()).await
        }
    }
}
