//! Why a configuration is refused. A leaf: the Pusher settings
//! (`crate::pusher`) report their errors with it too, without reaching back
//! into the rest of `config`.

use std::path::PathBuf;

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file named by `--config` could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown keys.
    #[error("invalid config file {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parse error.
        source: Box<toml::de::Error>,
    },
    /// A value is out of range.
    #[error("invalid option {0}")]
    Invalid(String),
}
