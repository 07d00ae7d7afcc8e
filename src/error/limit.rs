//! What lacks a feature an operation asked for ([`Limit`]).

use std::fmt;

/// What lacks a feature an operation asked for ([`Error::Unsupported`]).
///
/// [`Error::Unsupported`]: super::Error::Unsupported
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Limit {
    /// The server (for example, change streams on a standalone server).
    Server,
    /// The store's strategy (for example, replies in [`HybridPages`](crate::HybridPages), which
    /// does not thread).
    Strategy,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Limit::Server => "server",
            Limit::Strategy => "strategy",
        })
    }
}
