//! The store's builder: settings, checks and indexes.

use std::marker::PhantomData;
use std::time::Duration;

use bson::{doc, Document};
use mongodb::options::IndexOptions;
use mongodb::IndexModel;

use super::{Groups, NotificationStore, CHANGED, COLLECTIONS};
use crate::config::{store_builder_methods, StoreConfig};
use crate::phantom_impls::debug_fields;
use crate::setters::builder_setters;
use crate::{payload::Payload, Error, Result};

/// How long a group's lock lasts if its holder dies (servers without atomic updates).
const LOCK_LEASE: Duration = Duration::from_secs(30);

/// Configures a [`NotificationStore`].
#[must_use = "a builder does nothing until `build()`"]
pub struct NotificationStoreBuilder<D> {
    pub(super) config: StoreConfig,
    pub(super) window: Duration,
    pub(super) recent_actors: usize,
    pub(super) max_actors: u64,
    pub(super) _data: PhantomData<fn() -> D>,
}

debug_fields!(NotificationStoreBuilder<D> { config, window, recent_actors, max_actors });

impl<D: Payload> NotificationStoreBuilder<D> {
    store_builder_methods!();

    builder_setters! {
        /// How long a group gathers events (default 24 hours): windows are aligned to the Unix
        /// epoch, so a day's window runs from midnight to midnight UTC.
        window: Duration,

        /// How many of a group's newest actors a page returns (default 3, at most 100).
        recent_actors: usize,

        /// The most actors one group document holds (default 10,000, at most 100,000); a busier
        /// window continues in another group.
        max_actors: u64,
    }

    /// Builds the store.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a window under a second, a number of recent actors outside
    /// `1..=100`, a group size outside `1..=100_000`, or unusable collection names.
    pub fn build(self) -> Result<NotificationStore<D>> {
        if self.window < Duration::from_secs(1) {
            return Err(Error::InvalidConfig {
                reason: "a notification window needs at least a second".to_owned(),
            });
        }
        if !(1..=100).contains(&self.recent_actors) || !(1..=100_000).contains(&self.max_actors) {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "recent_actors must be 1..=100 and max_actors 1..=100000, not {} and {}",
                    self.recent_actors, self.max_actors
                ),
            });
        }
        let [groups, locks] = self.config.names(COLLECTIONS)?;
        let groups = self.config.database().collection(&groups);
        let index = |keys: Document, name: &str| {
            IndexModel::builder()
                .keys(keys)
                .options(IndexOptions::builder().name(name.to_owned()).build())
                .build()
        };
        let backend = self
            .config
            .backend(&locks, LOCK_LEASE)
            .with_index(
                &groups,
                index(doc! { "recipient": 1, "updated": -1, "_id": -1 }, "newest"),
            )
            .with_index(
                &groups,
                index(doc! { "recipient": 1, "read": 1, "seen": 1 }, "unread"),
            )
            .with_index(
                &groups,
                index(
                    doc! { "recipient": 1, "kind": 1, "target": 1, "window": 1 },
                    "by_target",
                ),
            )
            .with_index(
                &groups,
                index(doc! { "recipient": 1, CHANGED: 1, "_id": 1 }, "changed"),
            );
        Ok(NotificationStore {
            groups: Groups {
                backend,
                groups,
                window: self.window,
                recent_actors: self.recent_actors,
                max_actors: self.max_actors,
            },
            _data: PhantomData,
        })
    }
}
