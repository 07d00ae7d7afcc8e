//! What every store's builder takes, written once: the database, the collections' names (one
//! prefix for all, or a name for one), the retry policy, and the server's capabilities when the
//! application knows them.
//!
//! Each builder holds a [`StoreConfig`] and gets the same public methods from
//! [`store_builder_methods!`]: `collection_prefix`, `collection`, `retry_policy` and
//! `capabilities`; each store's `new` (the defaults) comes from [`new_with_defaults!`], and the
//! `outbox` of a store that notifies from [`outbox_accessor!`]. A store names its collections by their default names (its "roles", listed in
//! its documentation) and [`StoreConfig::names`] resolves them, so every store refuses the same
//! bad configurations the same way.

use std::time::Duration;

use mongodb::Database;

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::retry::RetryPolicy;
use crate::server::Capabilities;
use crate::validate::check_collection_name;

/// A store builder's shared settings.
#[derive(Clone, Debug)]
pub(crate) struct StoreConfig {
    database: Database,
    prefix: String,
    renamed: Vec<(String, String)>,
    retry: RetryPolicy,
    capabilities: Option<Capabilities>,
}

impl StoreConfig {
    /// Default names, the default retry policy, capabilities detected on first use.
    pub(crate) fn new(database: &Database) -> Self {
        Self {
            database: database.clone(),
            prefix: String::new(),
            renamed: Vec::new(),
            retry: RetryPolicy::default(),
            capabilities: None,
        }
    }

    pub(crate) fn database(&self) -> &Database {
        &self.database
    }

    pub(crate) fn set_prefix(&mut self, prefix: String) {
        self.prefix = prefix;
    }

    pub(crate) fn rename(&mut self, role: &str, name: String) {
        self.renamed.retain(|(known, _)| known != role);
        self.renamed.push((role.to_owned(), name));
    }

    pub(crate) fn set_retry(&mut self, retry: RetryPolicy) {
        self.retry = retry;
    }

    pub(crate) fn set_capabilities(&mut self, capabilities: Capabilities) {
        self.capabilities = Some(capabilities);
    }

    /// The collection names of a store whose collections are `roles` (their default names): a
    /// name given with `collection(role, name)` as it is, every other one behind the prefix.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a name given to a role the store does not have, a name
    /// MongoDB would refuse, or two roles sharing a collection.
    pub(crate) fn names<const N: usize>(&self, roles: [&str; N]) -> Result<[String; N]> {
        if let Some((unknown, _)) = self
            .renamed
            .iter()
            .find(|(role, _)| !roles.contains(&role.as_str()))
        {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "this store has no collection `{unknown}`; its collections are {}",
                    roles.join(", ")
                ),
            });
        }
        let names = roles.map(|role| {
            self.renamed
                .iter()
                .find(|(known, _)| known == role)
                .map_or_else(
                    || format!("{}{role}", self.prefix),
                    |(_, name)| name.clone(),
                )
        });
        for (i, name) in names.iter().enumerate() {
            check_collection_name(name)?;
            if let Some(j) = names[..i].iter().position(|other| other == name) {
                return Err(Error::InvalidConfig {
                    reason: format!(
                        "`{}` and `{}` need different collections, not both `{name}`",
                        roles[j], roles[i]
                    ),
                });
            }
        }
        Ok(names)
    }

    /// The backend of a store whose leased locks (taken where the server needs them) live in
    /// the collection `locks` and last `lease`.
    pub(crate) fn backend(&self, locks: &str, lease: Duration) -> Backend {
        Backend::new(
            &self.database,
            Some((locks, lease)),
            self.retry,
            self.capabilities,
        )
    }

    /// The store's retry policy.
    pub(crate) fn retry_policy(&self) -> RetryPolicy {
        self.retry
    }

    /// The capabilities the application gave, if any (else they are detected).
    pub(crate) fn given_capabilities(&self) -> Option<Capabilities> {
        self.capabilities
    }

    /// The backend of a store that never takes locks.
    pub(crate) fn backend_without_locks(&self) -> Backend {
        Backend::new(&self.database, None, self.retry, self.capabilities)
    }
}

/// The builder methods every store shares, for a builder with a `config: StoreConfig` field.
macro_rules! store_builder_methods {
    () => {
        /// Puts `prefix` before every collection name of the store (default: none), to keep
        /// several stores of one kind in one database.
        pub fn collection_prefix(mut self, prefix: impl Into<String>) -> Self {
            self.config.set_prefix(prefix.into());
            self
        }

        /// Stores the collection whose default name is `collection` (see the store's
        /// collections) under `name` instead, as it is (the prefix does not apply to it).
        /// [`build`](Self::build) refuses a `collection` the store does not have.
        pub fn collection(mut self, collection: &str, name: impl Into<String>) -> Self {
            self.config.rename(collection, name.into());
            self
        }

        /// How transient failures of the store's commands are retried (default
        /// [`RetryPolicy::default`](crate::retry::RetryPolicy::default)).
        pub fn retry_policy(mut self, policy: crate::retry::RetryPolicy) -> Self {
            self.config.set_retry(policy);
            self
        }

        /// Uses these capabilities instead of asking the server for them on first use.
        pub fn capabilities(mut self, capabilities: crate::server::Capabilities) -> Self {
            self.config.set_capabilities(capabilities);
            self
        }
    };
}

pub(crate) use store_builder_methods;

/// A store's `new`: its builder's defaults, which are always valid. `$doc` says what it makes.
macro_rules! new_with_defaults {
    ($doc:literal) => {
        #[doc = $doc]
        pub fn new(database: &mongodb::Database) -> Self {
            Self::builder(database)
                .build()
                .expect("the default configuration is valid")
        }
    };
}

pub(crate) use new_with_defaults;

/// The `outbox` of a store whose builder takes a notifier (`$builder::notifier`), for a store
/// with an `outbox: Option<Outbox>` field.
macro_rules! outbox_accessor {
    ($builder:ident) => {
        /// The notifications the store owes, when it was built with a
        #[doc = concat!("[`notifier`](", stringify!($builder), "::notifier): run its worker (or")]
        /// `run_pending`) to deliver those whose first attempt failed.
        pub fn outbox(&self) -> Option<&crate::notifications::Outbox> {
            self.outbox.as_ref()
        }
    };
}

pub(crate) use outbox_accessor;

#[cfg(test)]
mod tests {
    use super::*;

    /// A config over a client that never connects (nothing here talks to a server).
    async fn config() -> StoreConfig {
        let client = mongodb::Client::with_uri_str("mongodb://127.0.0.1:1")
            .await
            .unwrap();
        StoreConfig::new(&client.database("config_tests"))
    }

    #[tokio::test]
    async fn names_are_prefixed_unless_given() {
        let mut config = config().await;
        config.set_prefix("app_".to_owned());
        config.rename("heads", "users".to_owned());
        assert_eq!(
            config.names(["buckets", "heads"]).unwrap(),
            ["app_buckets", "users"]
        );
    }

    /// Asserts that the names of roles `buckets` and `heads`, once `role` is renamed `name`, are
    /// refused with an error that says `expected`.
    async fn assert_rename_refused(role: &str, name: &str, expected: &str) {
        let mut config = config().await;
        config.rename(role, name.to_owned());
        let error = config.names(["buckets", "heads"]).unwrap_err();
        assert!(error.to_string().contains(expected), "{error}");
    }

    #[tokio::test]
    async fn unknown_roles_unusable_and_shared_names_are_refused() {
        assert_rename_refused("bukets", "x", "no collection `bukets`").await;
        assert_rename_refused("heads", "buckets", "`buckets` and `heads`").await;

        let mut config = self::config().await;
        config.set_prefix("$".to_owned());
        assert!(matches!(
            config.names(["buckets"]),
            Err(Error::InvalidConfig { .. })
        ));
    }
}
