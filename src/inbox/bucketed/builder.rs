//! The builder of a [`BucketedFanOut`]: collections, bucket size, retention, inline lists.

use super::*;
use crate::phantom_impls::debug_fields;
use crate::setters::builder_setters;

/// Configures a [`BucketedFanOut`] store.
#[must_use = "a builder does nothing until `build()`"]
pub struct BucketedFanOutBuilder<P> {
    config: StoreConfig,
    max_inline: Option<usize>,
    bucket_size: u32,
    retention: Retention,
    _payload: PhantomData<fn() -> P>,
}

debug_fields!(BucketedFanOutBuilder<P> { config, max_inline, bucket_size, retention });

impl<P: Payload> BucketedFanOutBuilder<P> {
    /// The default settings, in `database`.
    pub(super) fn new(database: &Database) -> Self {
        BucketedFanOutBuilder {
            config: StoreConfig::new(database),
            max_inline: None,
            bucket_size: DEFAULT_BUCKET_SIZE,
            retention: Retention::default(),
            _payload: PhantomData,
        }
    }

    store_builder_methods!();

    builder_setters! {
        /// How long owners' messages are kept, enforced by
        /// [`InboxLifecycle::prune`](crate::inbox::InboxLifecycle::prune), which drops whole buckets
        /// (default: forever).
        retention: Retention,

        /// Messages per bucket (default [`DEFAULT_BUCKET_SIZE`](super::DEFAULT_BUCKET_SIZE), 50).
        bucket_size: u32,
    }

    /// The longest recipient list stored in every bucket entry; a longer one is kept only in
    /// the message's record. 0 keeps every list there only. By default 100.
    pub fn max_inline_recipients(mut self, max: usize) -> Self {
        self.max_inline = Some(max);
        self
    }

    /// Builds the store.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a bucket size of 0 or above
    /// [`MAX_BUCKET_SIZE`](super::MAX_BUCKET_SIZE), an unusable collection name, two
    /// collections given the same name, or a name given to a collection the store does not
    /// have.
    pub fn build(self) -> Result<BucketedFanOut<P>> {
        if self.bucket_size == 0 || self.bucket_size > MAX_BUCKET_SIZE {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "bucket size must be 1..={MAX_BUCKET_SIZE}, not {}",
                    self.bucket_size
                ),
            });
        }
        let [buckets, heads, locks, recipients] = self.config.names(COLLECTIONS)?;
        let database = self.config.database();
        let buckets = database.collection(&buckets);
        // The unread count's index: the full buckets with unread messages, which pushes (into
        // the newest bucket, not full) never maintain, newest first, so that a capped count
        // reads the newest few in order and stops.
        let unread = IndexModel::builder()
            .keys(doc! { "owner": 1, "sequence": -1 })
            .options(
                IndexOptions::builder()
                    .name(FULL_UNREAD_INDEX.to_owned())
                    .partial_filter_expression(doc! {
                        "count": { "$gte": i64::from(self.bucket_size) },
                        "unread": { "$gt": 0_i64 },
                    })
                    .build(),
            )
            .build();
        Ok(BucketedFanOut {
            buckets: Buckets {
                backend: self
                    .config
                    .backend(&locks, LOCK_LEASE)
                    .with_partial_index(&buckets, unread, None),
                buckets,
                heads: database.collection(&heads),
                recipients: RecipientLists::new(database.collection(&recipients), self.max_inline),
                bucket_size: self.bucket_size,
                retention: self.retention,
            },
            _payload: PhantomData,
        })
    }
}
