//! `[admin]`: the dashboard's credential and limits, as given in the TOML
//! file ([`AdminArgs`]) and resolved ([`AdminConfig`]). With neither a
//! `password_hash` nor `api_key = true` there is no credential, and the
//! dashboard is off: every `/admin` path answers 404.
//!
//! A leaf beside [`super::password`]: the configuration imports it without
//! reaching the handlers.

use super::password::PasswordHash;
use crate::config::error::ConfigError;
use crate::config::secret::Secret;
use serde::Deserialize;

/// `[admin]` as written in the TOML file.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminArgs {
    /// The login name [default: admin].
    pub user: Option<String>,
    /// A PBKDF2 hash from `herald admin-hash` [default: none].
    pub password_hash: Option<String>,
    /// Also accept the server's `api_key` as the password [default: false].
    pub api_key: Option<bool>,
    /// Login attempts (right or wrong) accepted per minute from one client
    /// address; ten times that from all together [default: 10].
    pub login_attempts_per_minute: Option<u32>,
    /// Hours a session lasts after login [default: 8].
    pub session_hours: Option<u32>,
}

/// The resolved `[admin]`: present only when a credential is configured.
#[derive(Debug, Clone)]
pub struct AdminConfig {
    /// The login name.
    pub user: String,
    /// The password's hash, if one is configured.
    pub password_hash: Option<PasswordHash>,
    /// The server's API key, when it is accepted as the password.
    pub api_key: Option<Secret>,
    /// Login attempts per minute per client address (ten times that over
    /// all addresses).
    pub login_attempts_per_minute: u32,
    /// How long a session lasts.
    pub session: std::time::Duration,
}

impl AdminConfig {
    /// `[admin]` resolved against the server's `api_key`; `None` (the
    /// dashboard off) when no credential is configured.
    pub fn resolve(
        args: Option<&AdminArgs>,
        api_key: Option<&Secret>,
    ) -> Result<Option<AdminConfig>, ConfigError> {
        let Some(a) = args else { return Ok(None) };
        let password_hash = match a.password_hash.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(h) => Some(
                PasswordHash::parse(h)
                    .map_err(|e| ConfigError::Invalid(format!("[admin] password_hash: {e}")))?,
            ),
        };
        let api_key = match a.api_key {
            Some(true) => match api_key {
                Some(k) => Some(k.clone()),
                None => {
                    return Err(ConfigError::Invalid(
                        "[admin] api_key = true needs an api_key".into(),
                    ))
                }
            },
            _ => None,
        };
        if password_hash.is_none() && api_key.is_none() {
            return Ok(None);
        }
        let user = a.user.clone().unwrap_or_else(|| "admin".into());
        if user.is_empty() || user.len() > 64 {
            return Err(ConfigError::Invalid(
                "[admin] user must be 1 to 64 bytes".into(),
            ));
        }
        let attempts = a.login_attempts_per_minute.unwrap_or(10);
        let hours = a.session_hours.unwrap_or(8);
        if attempts == 0 || hours == 0 || hours > 24 * 30 {
            return Err(ConfigError::Invalid(
                "[admin] login_attempts_per_minute must be > 0, session_hours 1 to 720".into(),
            ));
        }
        Ok(Some(AdminConfig {
            user,
            password_hash,
            api_key,
            login_attempts_per_minute: attempts,
            session: std::time::Duration::from_secs(u64::from(hours) * 3600),
        }))
    }
}
