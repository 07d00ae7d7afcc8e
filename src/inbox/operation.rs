//! How every inbox operation opens, written once for the public traits' provided methods
//! ([`super::InboxStore`], [`super::InboxLifecycle`], [`super::InboxTransfer`]): its span, and
//! the check of the user it acts for before any command.

use std::future::Future;

use super::validate::check_user_id;
use crate::error::Result;
use crate::observe::Operation;

/// The span of operation `$name` of the inbox store `$store` (see
/// [`crate::observe::store_operation`]).
macro_rules! span {
    ($store:expr, $($operation:tt)*) => {
        $crate::observe::store_operation!(
            "inbox",
            $crate::inbox::InboxStore::inbox_engine($store),
            $($operation)*
        )
    };
}

pub(super) use span;

/// `work` in `operation`'s span, once `user` is found to be a user id (`role`: `"owner"`,
/// `"sender"`); the check's error otherwise, and `work` never runs.
pub(super) async fn for_user<T>(
    operation: Operation,
    role: &'static str,
    user: &str,
    work: impl Future<Output = Result<T>>,
) -> Result<T> {
    operation
        .run_checked(check_user_id(role, user), |()| work)
        .await
}
