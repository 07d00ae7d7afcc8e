//! What an application stores: the payload of a message, a post's extension.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// What an application stores in a message (or a post's extension): any serde type that can
/// cross threads.
///
/// Implemented for every suitable type; you never implement it yourself. Stored documents
/// outlive the code that wrote them: give fields added later `#[serde(default)]`.
pub trait Payload: Serialize + DeserializeOwned + Send + Sync + Unpin + 'static {}

impl<T> Payload for T where T: Serialize + DeserializeOwned + Send + Sync + Unpin + 'static {}
