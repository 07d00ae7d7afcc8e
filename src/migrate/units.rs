//! What both migrations' units ([`Units`](crate::migrate::engine::Units)) do alike: list the
//! source's units, and refuse a target that is not empty.

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use crate::error::{Error, Result};

/// At most `limit` of `units`, a source store's units in order (an inbox store's owners, a
/// comment store's discussions), streamed from after the last one listed: what
/// [`Units::list`](crate::migrate::engine::Units::list) returns.
pub(in crate::migrate) async fn first(
    units: BoxStream<'_, Result<String>>,
    limit: usize,
) -> Result<Vec<String>> {
    units.take(limit).try_collect().await
}

/// Why a migration cannot start
/// ([`Units::check_start`](crate::migrate::engine::Units::check_start)): its target store holds
/// `what` (messages, comments of its discussions) already, and a target starts empty.
pub(in crate::migrate) fn target_not_empty(what: &str) -> Error {
    Error::Precondition {
        reason: format!("the migration's target store holds {what} already: a target starts empty"),
    }
}
