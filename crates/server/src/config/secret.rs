//! A configured secret (API key, Pusher app secret) that `Debug` never
//! prints. A leaf, shared by `config` and `crate::pusher`.

use serde::Deserialize;

/// A secret that never appears in `Debug` output (logs, panics).
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}
