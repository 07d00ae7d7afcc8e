//! What the server families' errors say, for [`crate::error::transient`]: the codes and
//! messages by which a family reports a transient failure or a lost database of its own, beyond
//! MongoDB's. A leaf: it reads only the families' error files, so the error module can depend on
//! it without depending on detection.

/// The SQLSTATE a server error code carries, for the engines that report PostgreSQL's errors
/// as codes (DocumentDB); `None` for MongoDB's own codes.
pub use super::documentdb::errors::sqlstate;

/// MongoDB's `InternalError`, under which some families pass on their own failures.
#[cfg(test)]
pub(crate) use super::documentdb::errors::INTERNAL_ERROR;

/// Whether a server error code is transient for the family that sends it, beyond MongoDB's
/// own codes (which `crate::error::transient` knows): a deadlock or serialization failure of the
/// engines on PostgreSQL, or their lost backend.
pub(crate) fn server_says_transient(code: i32) -> bool {
    super::documentdb::errors::server_says_transient(code)
}

/// Whether a server error (its code and message) says the database behind the server is gone
/// or restarting: an outage, not a refusal.
pub(crate) fn is_lost_backend(code: i32, message: &str) -> bool {
    super::documentdb::errors::is_lost_backend(code, message)
}

/// Whether a server error (its code and message) says an ordered index scan gave up keeping
/// its order, which a read through an unordered index does not meet (DocumentDB, over arrays).
pub(crate) fn gave_up_ordered_scan(code: i32, message: &str) -> bool {
    super::documentdb::errors::gave_up_ordered_scan(code, message)
}
