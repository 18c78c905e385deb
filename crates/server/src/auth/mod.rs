//! Authentication and permissions: the server's implementation of
//! [`herald_core::Authenticator`], built from the configuration.
//!
//! - Connection tokens are JWTs ([`jwt`]) verified with an HS256 secret, a PEM
//!   public key (RS256/ES256) and/or a JWKS file ([`keys`]). The token's `sub`
//!   is the user id, `exp` its expiry (the connection is closed with 3002 when
//!   it passes), `channels` the channels (or patterns) it grants.
//! - Anonymous clients (no token) are allowed when no key is configured, and
//!   otherwise only with `allow_anonymous = true`.
//! - Per-namespace rules say who may subscribe, publish, see presence and read
//!   history. A channel's namespace is the part of its name before the first
//!   `:` (`chat:room1` is in `chat`); names without `:` are in the default
//!   namespace `""`. Each action names who may do it: `any` connected client,
//!   `user` (a client with a token), `grant` (the connection token's `channels`
//!   grant the channel, or — for subscribe — a subscribe token does), `none`.
//!   Unlisted namespaces and actions default to `any`.
//! - Subscribe tokens (private channels): a JWT with `channel` (the exact
//!   channel or pattern subscribed) and `sub` equal to the connection's user.
//! - The HTTP API key (`Authorization: apikey KEY`) is checked by [`api_key_ok`].

pub mod jwt;
pub mod keys;
pub mod mint;

use bytes::Bytes;
use herald_core::auth::{pattern_matches, unix_now};
use herald_core::{Action, AuthError, Authenticator, Identity};
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;

/// Who may do an action in a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Who {
    /// Any connected client, anonymous ones included.
    #[default]
    Any,
    /// Clients that connected with a token.
    User,
    /// Clients whose token grants the channel (or, for subscribe, that present
    /// a subscribe token for it).
    Grant,
    /// Nobody (the HTTP API, with its key, still publishes).
    None,
}

/// The rules of one namespace (`[[namespaces]]` in the TOML file).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamespaceRule {
    /// The namespace: the part of channel names before the first `:`; `""` is
    /// the default namespace (names without `:`).
    pub name: String,
    /// Who may subscribe [default: any].
    #[serde(default)]
    pub subscribe: Who,
    /// Who may publish [default: any].
    #[serde(default)]
    pub publish: Who,
    /// Who may ask for presence [default: any].
    #[serde(default)]
    pub presence: Who,
    /// Who may read history (and recover) [default: any].
    #[serde(default)]
    pub history: Who,
    /// Publications retained per channel of this namespace [default: the
    /// server's `history_size`].
    #[serde(default)]
    pub history_size: Option<usize>,
    /// Seconds a publication of this namespace stays in history; 0 = no
    /// time limit [default: the server's `history_ttl`].
    #[serde(default)]
    pub history_ttl: Option<u64>,
}

impl NamespaceRule {
    fn who(&self, action: Action) -> Who {
        match action {
            Action::Subscribe => self.subscribe,
            Action::Publish => self.publish,
            Action::Presence => self.presence,
            Action::History => self.history,
        }
    }
}

pub use herald_core::channel::namespace;

/// The namespace every channel a pattern can match shares, if its literal
/// prefix fixes one (`chat:room.*` → `chat`); `None` when a wildcard comes
/// before any `:` (`>` or `news.*` may match channels of any namespace).
fn pattern_namespace(pattern: &str) -> Option<&str> {
    let mut literal = 0;
    for token in pattern.split('.') {
        if token == "*" || token == ">" {
            break;
        }
        if let Some(i) = token.find(':') {
            return Some(&pattern[..literal + i]);
        }
        literal += token.len() + 1;
    }
    if herald_core::routing::is_pattern(pattern) {
        None
    } else {
        Some(namespace(pattern))
    }
}

/// The policy: token verification plus namespace rules.
#[derive(Debug)]
pub struct Policy {
    verifier: jwt::Verifier,
    allow_anonymous: bool,
    default_rule: NamespaceRule,
    rules: HashMap<String, NamespaceRule>,
    anonymous: Arc<Identity>,
    /// Namespaces of Pusher apps: Herald clients need a grant for their
    /// `private-*` and `presence-*` channels (whatever the namespace rule
    /// says, short of `none`), since Pusher clients need the app's signature
    /// there and a Herald client must not bypass it.
    pusher_namespaces: Vec<String>,
}

impl Policy {
    /// Builds the policy. `allow_anonymous` defaults to "no key configured".
    pub fn new(
        verifier: jwt::Verifier,
        allow_anonymous: Option<bool>,
        namespaces: &[NamespaceRule],
    ) -> Policy {
        let mut rules: HashMap<String, NamespaceRule> = namespaces
            .iter()
            .map(|r| (r.name.clone(), r.clone()))
            .collect();
        let default_rule = rules.remove("").unwrap_or_default();
        Policy {
            allow_anonymous: allow_anonymous.unwrap_or(!verifier.is_configured()),
            verifier,
            default_rule,
            rules,
            anonymous: Arc::new(Identity::default()),
            pusher_namespaces: Vec::new(),
        }
    }

    /// Marks the namespaces of Pusher apps (see [`Policy`]'s field docs).
    pub fn with_pusher_namespaces(mut self, namespaces: Vec<String>) -> Policy {
        self.pusher_namespaces = namespaces;
        self
    }

    /// Whether `channel` (or pattern) in namespace `ns` is a Pusher app's
    /// private or presence channel.
    fn pusher_private(&self, ns: &str, channel: &str) -> bool {
        self.pusher_namespaces.iter().any(|p| p == ns)
            && channel.get(ns.len() + 1..).is_some_and(|name| {
                // `:` starts a user channel (`#server-to-user-`).
                name.starts_with("private-")
                    || name.starts_with("presence-")
                    || name.starts_with(':')
            })
    }

    /// Whether anonymous clients may connect.
    pub fn allows_anonymous(&self) -> bool {
        self.allow_anonymous
    }

    /// Whether a token key is configured.
    pub fn has_keys(&self) -> bool {
        self.verifier.is_configured()
    }

    fn rule(&self, ns: &str) -> &NamespaceRule {
        self.rules.get(ns).unwrap_or(&self.default_rule)
    }

    fn token_error(e: jwt::TokenError) -> AuthError {
        match e {
            jwt::TokenError::Expired => AuthError::Expired,
            e => AuthError::Invalid(e.to_string()),
        }
    }

    /// Whether `who` passes `level` for `channel`.
    fn passes(
        &self,
        level: Who,
        who: &Identity,
        action: Action,
        channel: &str,
        token: Option<&str>,
    ) -> Result<(), AuthError> {
        let denied = |why: &str| {
            Err(AuthError::Denied(format!(
                "{} on {channel:?} {why}",
                action.name()
            )))
        };
        match level {
            Who::Any => Ok(()),
            Who::None => denied("is not allowed"),
            Who::User if who.is_anonymous() => denied("needs a token"),
            Who::User => Ok(()),
            Who::Grant => {
                let pattern = herald_core::routing::is_pattern(channel);
                let granted = who
                    .grants
                    .iter()
                    .any(|g| g == channel || (!pattern && pattern_matches(g, channel)));
                if granted {
                    return Ok(());
                }
                match (action, token) {
                    (Action::Subscribe, Some(t)) => self.subscribe_token(who, channel, t),
                    (Action::Subscribe, None) => {
                        denied("needs a grant in the connection token or a subscribe token")
                    }
                    _ => denied("needs a grant in the connection token"),
                }
            }
        }
    }

    fn subscribe_token(&self, who: &Identity, channel: &str, token: &str) -> Result<(), AuthError> {
        let claims = self
            .verifier
            .verify(token, unix_now())
            .map_err(Policy::token_error)?;
        if claims.channel.as_deref() != Some(channel) {
            return Err(AuthError::Denied(format!(
                "the subscribe token is not for {channel:?}"
            )));
        }
        if claims.sub != *who.user {
            return Err(AuthError::Denied(
                "the subscribe token is for another user".into(),
            ));
        }
        Ok(())
    }
}

impl Authenticator for Policy {
    fn connect(&self, token: Option<&str>) -> Result<Arc<Identity>, AuthError> {
        let Some(token) = token.filter(|_| self.verifier.is_configured()) else {
            // Without a key, tokens cannot be checked and are ignored.
            return if self.allow_anonymous {
                Ok(self.anonymous.clone())
            } else {
                Err(AuthError::Missing)
            };
        };
        let claims = self
            .verifier
            .verify(token, unix_now())
            .map_err(Policy::token_error)?;
        if claims.channel.is_some() {
            return Err(AuthError::Invalid(
                "this is a subscribe token (it has a channel claim)".into(),
            ));
        }
        if claims.sub.is_empty() {
            return Err(AuthError::Invalid("the token has no sub (user id)".into()));
        }
        let info = match claims.info {
            None | Some(serde_json::Value::Null) => Bytes::new(),
            Some(v) => Bytes::from(
                serde_json::to_vec(&v)
                    .map_err(|e| AuthError::Invalid(format!("the token's info claim: {e}")))?,
            ),
        };
        Ok(Arc::new(Identity {
            user: claims.sub.into(),
            expires_at: claims.exp,
            grants: claims.channels,
            info,
        }))
    }

    fn allow(
        &self,
        who: &Identity,
        action: Action,
        channel: &str,
        token: Option<&str>,
    ) -> Result<(), AuthError> {
        match pattern_namespace(channel) {
            Some(ns) => {
                let mut level = self.rule(ns).who(action);
                if level != Who::None && self.pusher_private(ns, channel) {
                    level = Who::Grant;
                }
                self.passes(level, who, action, channel, token)
            }
            None => {
                // A pattern that may match any namespace must be allowed in all.
                self.passes(self.default_rule.who(action), who, action, channel, token)?;
                if !self.pusher_namespaces.is_empty() {
                    // It may match a Pusher app's private channels.
                    self.passes(Who::Grant, who, action, channel, token)?;
                }
                for rule in self.rules.values() {
                    self.passes(rule.who(action), who, action, channel, token)?;
                }
                Ok(())
            }
        }
    }

    fn describe(&self) -> String {
        let keys = if self.verifier.is_configured() {
            format!("tokens verified ({:?})", self.verifier)
        } else {
            "no token key configured".into()
        };
        let anon = if self.allow_anonymous {
            "anonymous clients ALLOWED"
        } else {
            "anonymous clients refused"
        };
        format!("{keys}; {anon}; {} namespace rule(s)", self.rules.len())
    }
}

/// Constant-time check of an `Authorization: apikey KEY` header value.
pub fn api_key_ok(header: Option<&[u8]>, key: &str) -> bool {
    let Some(value) = header else {
        return false;
    };
    let Some(given) = value
        .strip_prefix(b"apikey ")
        .or_else(|| value.strip_prefix(b"ApiKey "))
    else {
        return false;
    };
    // Compare HMACs of both under a random key: equal-length, constant-time,
    // and no length leak of the real key.
    let rng = ring::rand::SystemRandom::new();
    let Ok(k) = ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &rng) else {
        return false;
    };
    let expected = ring::hmac::sign(&k, key.as_bytes());
    ring::hmac::verify(&k, given, expected.as_ref()).is_ok()
}

/// Parses a duration like `90`, `45s`, `30m`, `1h`, `7d` into seconds.
pub fn parse_ttl(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: u64 = num.parse().ok()?;
    let mult = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jwt::{sign, Claims};
    use keys::SigningKey;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn policy(rules: &[NamespaceRule]) -> Policy {
        Policy::new(jwt::Verifier::new(Some(SECRET), Vec::new()), None, rules)
    }

    fn token(c: Claims) -> String {
        sign(&c, &SigningKey::hmac(SECRET), None).expect("sign")
    }

    fn user(grants: &[&str]) -> Identity {
        Identity {
            user: "u".into(),
            expires_at: None,
            grants: grants.iter().map(|s| s.to_string()).collect(),
            info: Default::default(),
        }
    }

    #[test]
    fn namespaces() {
        assert_eq!(namespace("chat:1"), "chat");
        assert_eq!(namespace("news"), "");
        assert_eq!(pattern_namespace("chat:room.*"), Some("chat"));
        assert_eq!(pattern_namespace("a.chat:room.*"), Some("a.chat"));
        assert_eq!(pattern_namespace("news.*"), None);
        assert_eq!(pattern_namespace(">"), None);
        assert_eq!(pattern_namespace("news.sport"), Some(""));
    }

    #[test]
    fn anonymous_rule_and_keys() {
        let p = policy(&[]);
        assert!(!p.allows_anonymous());
        assert_eq!(p.connect(None), Err(AuthError::Missing));
        let open = Policy::new(jwt::Verifier::default(), None, &[]);
        assert!(open.allows_anonymous());
        let both = Policy::new(
            jwt::Verifier::new(Some(SECRET), Vec::new()),
            Some(true),
            &[],
        );
        assert!(both.connect(None).expect("anon").is_anonymous());
        let id = both
            .connect(Some(&token(Claims {
                sub: "alice".into(),
                ..Claims::default()
            })))
            .expect("token");
        assert_eq!(&*id.user, "alice");
    }

    #[test]
    fn connect_refuses_subscribe_tokens_and_tokens_without_sub() {
        let p = policy(&[]);
        let sub_token = token(Claims {
            sub: "u".into(),
            channel: Some("c".into()),
            ..Claims::default()
        });
        assert!(matches!(
            p.connect(Some(&sub_token)),
            Err(AuthError::Invalid(_))
        ));
        let no_sub = token(Claims::default());
        assert!(matches!(
            p.connect(Some(&no_sub)),
            Err(AuthError::Invalid(_))
        ));
    }

    #[test]
    fn rules_per_namespace() {
        let p = policy(&[
            NamespaceRule {
                name: "private".into(),
                subscribe: Who::Grant,
                publish: Who::Grant,
                presence: Who::User,
                history: Who::None,
                ..NamespaceRule::default()
            },
            NamespaceRule {
                name: "".into(),
                publish: Who::User,
                ..NamespaceRule::default()
            },
        ]);
        let anon = Identity::default();
        let u = user(&["private:a", "private:b.*"]);
        assert!(p.allow(&anon, Action::Subscribe, "news", None).is_ok());
        assert!(p.allow(&anon, Action::Publish, "news", None).is_err());
        assert!(p.allow(&u, Action::Publish, "news", None).is_ok());
        assert!(p.allow(&u, Action::Subscribe, "private:a", None).is_ok());
        assert!(p.allow(&u, Action::Subscribe, "private:b.x", None).is_ok());
        assert!(p.allow(&u, Action::Subscribe, "private:c", None).is_err());
        assert!(p.allow(&u, Action::History, "private:a", None).is_err());
        assert!(p.allow(&anon, Action::Presence, "private:a", None).is_err());
        // A pattern needs the very pattern granted, and one that may match
        // private channels needs permission there too.
        assert!(p.allow(&u, Action::Subscribe, "private:b.*", None).is_ok());
        assert!(p.allow(&u, Action::Subscribe, "private:a.*", None).is_err());
        assert!(p.allow(&u, Action::Subscribe, ">", None).is_err());
        assert!(p.allow(&u, Action::Subscribe, "news.*", None).is_err());
    }

    #[test]
    fn subscribe_tokens() {
        let p = policy(&[NamespaceRule {
            name: "private".into(),
            subscribe: Who::Grant,
            ..NamespaceRule::default()
        }]);
        let u = user(&[]);
        let t = |sub: &str, ch: &str, exp: Option<u64>| {
            token(Claims {
                sub: sub.into(),
                channel: Some(ch.into()),
                exp,
                ..Claims::default()
            })
        };
        let ok = t("u", "private:x", None);
        assert!(p
            .allow(&u, Action::Subscribe, "private:x", Some(&ok))
            .is_ok());
        assert!(p
            .allow(&u, Action::Subscribe, "private:y", Some(&ok))
            .is_err());
        let other_user = t("v", "private:x", None);
        assert!(p
            .allow(&u, Action::Subscribe, "private:x", Some(&other_user))
            .is_err());
        let expired = t("u", "private:x", Some(1));
        assert_eq!(
            p.allow(&u, Action::Subscribe, "private:x", Some(&expired)),
            Err(AuthError::Expired)
        );
        assert!(p.allow(&u, Action::Publish, "private:x", Some(&ok)).is_ok());
    }

    #[test]
    fn api_keys_and_ttls() {
        assert!(api_key_ok(Some(b"apikey s3cret"), "s3cret"));
        assert!(!api_key_ok(Some(b"apikey s3cre"), "s3cret"));
        assert!(!api_key_ok(Some(b"Bearer s3cret"), "s3cret"));
        assert!(!api_key_ok(None, "s3cret"));
        assert_eq!(parse_ttl("1h"), Some(3600));
        assert_eq!(parse_ttl("90"), Some(90));
        assert_eq!(parse_ttl("2d"), Some(172_800));
        assert_eq!(parse_ttl("1y"), None);
        assert_eq!(parse_ttl("h"), None);
    }
}
