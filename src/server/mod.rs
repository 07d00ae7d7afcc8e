//! What the connected server is and what it can do, detected once per store.
//!
//! Detection asks the server who it is (`buildInfo`, then `hello`, or `isMaster` where `hello` is
//! missing) and, for a server that is neither MongoDB nor FerretDB, tries what it can do on a
//! scratch collection (see [`ServerInfo::detect_for`]). Every difference between servers that the
//! library cares about ends up in one [`Capabilities`] value.

mod capabilities;
mod detected;
pub(crate) mod family;
mod flavor;
mod info;
mod probes;
mod reply;

pub use capabilities::Capabilities;
pub(crate) use detected::DetectedCapabilities;
pub use flavor::{ServerFlavor, Topology};
pub use info::ServerInfo;
pub use probes::PROBE_COLLECTION_PREFIX;

#[cfg(test)]
mod tests;
