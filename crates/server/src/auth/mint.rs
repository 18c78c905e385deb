//! `herald token`: mints a token for development and tests, signed with the
//! same secret (or a private key) the server verifies with.

use super::jwt::{sign, Claims};
use super::keys::SigningKey;
use std::path::PathBuf;

/// Options of `herald token`.
#[derive(Debug, Clone, clap::Args)]
pub struct TokenArgs {
    /// The user id (`sub`).
    #[arg(long)]
    pub user: String,
    /// A channel (or pattern) the token grants (`channels`); repeatable. With
    /// `--subscribe`, the one channel the subscribe token is for.
    #[arg(long)]
    pub channel: Vec<String>,
    /// Lifetime: `90`, `45s`, `30m`, `1h`, `7d` [default: 1h].
    #[arg(long, default_value = "1h")]
    pub ttl: String,
    /// Mint a subscribe token (claim `channel`) instead of a connection token.
    #[arg(long)]
    pub subscribe: bool,
    /// Connection info (claim `info`, any JSON value, e.g.
    /// `'{"name":"Alice"}'`), shown in presence and join/leave.
    #[arg(long)]
    pub info: Option<String>,
    /// HS256 secret [default: `token_hmac_secret` of `--config`].
    #[arg(long, env = "HERALD_TOKEN_HMAC_SECRET", hide_env_values = true)]
    pub secret: Option<String>,
    /// Sign RS256/ES256 with this PKCS#8 PEM private key instead.
    #[arg(long)]
    pub private_key: Option<PathBuf>,
    /// `kid` to put in the header (to pick a key of a JWKS file).
    #[arg(long)]
    pub kid: Option<String>,
    /// The server's TOML file, to read `token_hmac_secret` from.
    #[arg(long, env = "HERALD_CONFIG")]
    pub config: Option<PathBuf>,
}

/// Why no token could be minted.
#[derive(Debug, thiserror::Error)]
pub enum MintError {
    /// Bad options.
    #[error("{0}")]
    Usage(String),
    /// The key could not be read.
    #[error(transparent)]
    Key(#[from] super::keys::KeyError),
    /// Signing failed.
    #[error(transparent)]
    Sign(#[from] super::jwt::TokenError),
}

/// Mints the token `args` describe, valid from Unix second `now`.
pub fn mint(args: &TokenArgs, now: u64) -> Result<String, MintError> {
    let ttl = super::parse_ttl(&args.ttl).ok_or_else(|| {
        MintError::Usage(format!("bad --ttl {:?} (e.g. 45s, 30m, 1h, 7d)", args.ttl))
    })?;
    let key = if let Some(path) = &args.private_key {
        let text = std::fs::read_to_string(path)
            .map_err(|e| MintError::Usage(format!("cannot read {}: {e}", path.display())))?;
        SigningKey::from_pem(&text)?
    } else {
        let secret = match (&args.secret, &args.config) {
            (Some(s), _) => s.clone(),
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    MintError::Usage(format!("cannot read {}: {e}", path.display()))
                })?;
                // Only the one key is read; the rest of the file is the server's.
                let table: toml::Table = toml::from_str(&text)
                    .map_err(|e| MintError::Usage(format!("invalid {}: {e}", path.display())))?;
                table
                    .get("token_hmac_secret")
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
                    .ok_or_else(|| {
                        MintError::Usage(format!("{} has no token_hmac_secret", path.display()))
                    })?
            }
            (None, None) => {
                return Err(MintError::Usage(
                    "give --secret (or HERALD_TOKEN_HMAC_SECRET), --config or --private-key".into(),
                ))
            }
        };
        if secret.len() < 32 {
            return Err(MintError::Usage(
                "the HS256 secret must be at least 32 bytes".into(),
            ));
        }
        SigningKey::hmac(secret.as_bytes())
    };
    let mut claims = Claims {
        sub: args.user.clone(),
        exp: Some(now + ttl),
        iat: Some(now),
        ..Claims::default()
    };
    if let Some(text) = &args.info {
        let value = serde_json::from_str(text)
            .map_err(|e| MintError::Usage(format!("--info is not JSON: {e}")))?;
        claims.info = Some(value);
    }
    if args.subscribe {
        let [channel] = args.channel.as_slice() else {
            return Err(MintError::Usage(
                "a subscribe token is for exactly one --channel".into(),
            ));
        };
        claims.channel = Some(channel.clone());
    } else {
        claims.channels = args.channel.clone();
    }
    Ok(sign(&claims, &key, args.kid.as_deref())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::jwt::Verifier;

    fn args() -> TokenArgs {
        TokenArgs {
            user: "alice".into(),
            channel: vec!["chat:1".into()],
            ttl: "1h".into(),
            subscribe: false,
            info: None,
            secret: Some("s".repeat(32)),
            private_key: None,
            kid: None,
            config: None,
        }
    }

    #[test]
    fn minted_tokens_verify() {
        let t = mint(&args(), 1000).expect("mint");
        let c = Verifier::new(Some("s".repeat(32).as_bytes()), Vec::new())
            .verify(&t, 1001)
            .expect("verify");
        assert_eq!(c.sub, "alice");
        assert_eq!(c.info, None);
        let with_info = TokenArgs {
            info: Some(r#"{"name":"Alice"}"#.into()),
            ..args()
        };
        let c = Verifier::new(Some("s".repeat(32).as_bytes()), Vec::new())
            .verify(&mint(&with_info, 1000).expect("mint"), 1001)
            .expect("verify");
        assert_eq!(c.info, Some(serde_json::json!({"name": "Alice"})));
        let bad = TokenArgs {
            info: Some("{name".into()),
            ..args()
        };
        assert!(
            matches!(mint(&bad, 1000), Err(MintError::Usage(m)) if m.contains("--info")),
            "bad JSON refused"
        );
        assert_eq!(c.exp, Some(4600));
        assert_eq!(c.channels, vec!["chat:1".to_string()]);
        let sub = mint(
            &TokenArgs {
                subscribe: true,
                ..args()
            },
            1000,
        )
        .expect("mint");
        let c = Verifier::new(Some("s".repeat(32).as_bytes()), Vec::new())
            .verify(&sub, 1001)
            .expect("verify");
        assert_eq!(c.channel.as_deref(), Some("chat:1"));
    }

    #[test]
    fn bad_options() {
        assert!(mint(
            &TokenArgs {
                ttl: "soon".into(),
                ..args()
            },
            0
        )
        .is_err());
        assert!(mint(
            &TokenArgs {
                secret: None,
                ..args()
            },
            0
        )
        .is_err());
        assert!(mint(
            &TokenArgs {
                secret: Some("short".into()),
                ..args()
            },
            0
        )
        .is_err());
        assert!(mint(
            &TokenArgs {
                subscribe: true,
                channel: vec![],
                ..args()
            },
            0
        )
        .is_err());
    }
}
