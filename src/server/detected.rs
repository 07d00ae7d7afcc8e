//! The capabilities of a store's server, detected once and shared by the store's clones.

use mongodb::Database;

use super::{Capabilities, ServerInfo};
use crate::error::Result;

/// The capabilities of a store's server, detected on first use and then remembered. Clones
/// share what was detected.
#[derive(Clone, Debug, Default)]
pub(crate) struct DetectedCapabilities(std::sync::Arc<tokio::sync::OnceCell<Capabilities>>);

impl DetectedCapabilities {
    /// Capabilities known already (given by the application): nothing is detected.
    pub(crate) fn given(capabilities: Capabilities) -> Self {
        Self(std::sync::Arc::new(tokio::sync::OnceCell::new_with(Some(
            capabilities,
        ))))
    }

    /// The capabilities of the server behind `database`, asking it only the first time (callers
    /// racing on the first use wait for one detection).
    pub(crate) async fn get(&self, database: &Database) -> Result<Capabilities> {
        self.0
            .get_or_try_init(|| async {
                let info = ServerInfo::detect_for(database).await?;
                let capabilities = info.capabilities();
                crate::observe::detected(&info, &capabilities);
                Ok(capabilities)
            })
            .await
            .copied()
    }
}
