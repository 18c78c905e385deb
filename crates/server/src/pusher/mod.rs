//! Pusher Channels (protocol 7) on Herald's hub: the WebSocket endpoint
//! `/app/{key}` ([`conn`]), the HTTP API the server SDKs call
//! (`/apps/{id}/...`, [`api`]) and webhooks ([`webhooks`]), for the apps
//! configured in `[[pusher.apps]]`.
//!
//! A Pusher channel is a Herald channel in the app's namespace and a Pusher
//! event is a Herald publication (the mapping is in [`herald_pusher::channel`]),
//! so Pusher clients, Herald clients and both HTTP APIs share channels,
//! history and presence. Each app has one [`AppRender`], shared by all its
//! connections, that the hub asks once per publication for the Pusher frame
//! (docs/decisions/0007-pusher-protocol.md); everything protocol-specific
//! that needs no socket lives in the `herald-pusher` crate.

pub mod api;
pub mod conn;
pub mod count;
pub mod webhooks;

use crate::config::error::ConfigError;
use crate::config::secret::Secret;
use bytes::Bytes;
use herald_core::{ChannelEvent, Frame, Publication, Render, Rendered};
use herald_proto::ClientInfo;
use herald_pusher::channel::{self, Envelope};
use herald_pusher::message;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Seconds of silence after which a client should send `pusher:ping`
/// (`activity_timeout` in `pusher:connection_established`), by default.
pub const ACTIVITY_TIMEOUT: u32 = 120;
/// Client events per second one connection may send, by default: Pusher's
/// own limit.
pub const CLIENT_EVENT_RATE: u32 = 10;
/// Largest event data (bytes) accepted from a client event or the HTTP API,
/// by default: Pusher's own limit.
pub const MAX_EVENT_SIZE: usize = 10 * 1024;
/// How long a channel stays vacated before `channel_vacated` is sent, by
/// default (milliseconds): a client that reconnects within it makes neither
/// `channel_vacated` nor `channel_occupied`, as on Pusher.
pub const VACATED_DELAY_MS: u64 = 3000;

/// The `[pusher]` section of the TOML file.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PusherArgs {
    /// The apps (`[[pusher.apps]]`).
    #[serde(default)]
    pub apps: Vec<AppArgs>,
    /// Idle seconds before a client pings [default: 120].
    pub activity_timeout: Option<u32>,
    /// Client events per second per connection; 0 = none allowed
    /// [default: 10].
    pub client_event_rate: Option<u32>,
    /// Largest event data in bytes [default: 10240].
    pub max_event_size: Option<usize>,
    /// Milliseconds a channel must stay vacated before the `channel_vacated`
    /// webhook; 0 = at once [default: 3000].
    pub vacated_delay_ms: Option<u64>,
    /// Milliseconds between two `subscription_count` events of a channel of
    /// more than 100 subscriptions (smaller ones get theirs at once)
    /// [default: 5000].
    pub subscription_count_interval_ms: Option<u64>,
}

/// One `[[pusher.apps]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppArgs {
    /// The app id (in HTTP API paths).
    pub id: String,
    /// The app key (in WebSocket URLs and signatures; public).
    pub key: String,
    /// The secret itself (prefer `secret_env` or `secret_file`: a config file
    /// is often readable by more people than the secret should be).
    #[serde(default)]
    pub secret: Option<Secret>,
    /// The environment variable holding the secret.
    #[serde(default)]
    pub secret_env: Option<String>,
    /// A file holding the secret (surrounding whitespace ignored).
    #[serde(default)]
    pub secret_file: Option<PathBuf>,
    /// Herald namespace of the app's channels [default: `pusher-<id>`].
    #[serde(default)]
    pub namespace: Option<String>,
    /// `http://` or `https://` URL the app's webhooks are POSTed to
    /// [default: none].
    #[serde(default)]
    pub webhook_url: Option<String>,
    /// PEM file of the certificates an `https://` webhook URL's server is
    /// checked against [default: /etc/ssl/certs/ca-certificates.crt].
    #[serde(default)]
    pub webhook_ca_file: Option<PathBuf>,
    /// Which webhook events the app wants, of `channel_occupied`,
    /// `channel_vacated`, `member_added`, `member_removed`, `client_event`,
    /// `cache_miss` [default: all of them].
    #[serde(default)]
    pub webhook_events: Option<Vec<String>>,
    /// Send `pusher_internal:subscription_count` to the subscribers of
    /// non-presence channels when their count changes [default: false].
    #[serde(default)]
    pub subscription_count: Option<bool>,
}

/// One app, resolved.
#[derive(Debug, Clone)]
pub struct AppConfig {
    /// App id.
    pub id: String,
    /// App key.
    pub key: String,
    /// App secret.
    pub secret: Secret,
    /// Herald namespace of its channels.
    pub namespace: String,
    /// Where its webhooks go, if anywhere.
    pub webhook_url: Option<String>,
    /// The webhook events it wants (`None`: all).
    pub webhook_events: Option<Vec<String>>,
    /// For an `https://` webhook URL: the TLS client configuration.
    pub webhook_tls: Option<Arc<rustls::ClientConfig>>,
    /// Whether its channels' subscribers get `subscription_count` events.
    pub subscription_count: bool,
}

/// The resolved `[pusher]` settings.
#[derive(Debug, Clone)]
pub struct PusherConfig {
    /// The apps.
    pub apps: Vec<AppConfig>,
    /// Seconds before a silent client pings.
    pub activity_timeout: u32,
    /// Client events per second per connection.
    pub client_event_rate: u32,
    /// Largest event data in bytes.
    pub max_event_size: usize,
    /// How long a channel must stay vacated before `channel_vacated`.
    pub vacated_delay: Duration,
    /// The least time between two `subscription_count` events of a large
    /// channel.
    pub subscription_count_interval: Duration,
}

impl Default for PusherConfig {
    fn default() -> Self {
        PusherConfig {
            apps: Vec::new(),
            activity_timeout: ACTIVITY_TIMEOUT,
            client_event_rate: CLIENT_EVENT_RATE,
            max_event_size: MAX_EVENT_SIZE,
            vacated_delay: Duration::from_millis(VACATED_DELAY_MS),
            subscription_count_interval: Duration::from_millis(count::INTERVAL_MS),
        }
    }
}

fn invalid(msg: String) -> ConfigError {
    ConfigError::Invalid(msg)
}

impl PusherConfig {
    /// Checks the section and reads each app's secret.
    pub fn resolve(args: Option<&PusherArgs>) -> Result<PusherConfig, ConfigError> {
        let Some(a) = args else {
            return Ok(PusherConfig::default());
        };
        let mut apps: Vec<AppConfig> = Vec::new();
        for app in &a.apps {
            let id = &app.id;
            if id.is_empty()
                || !id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b))
            {
                return Err(invalid(format!(
                    "pusher app id {id:?}: 1 or more of A-Z a-z 0-9 _ -"
                )));
            }
            if app.key.is_empty()
                || !app
                    .key
                    .bytes()
                    .all(|b| b.is_ascii_graphic() && b != b'/' && b != b'?')
            {
                return Err(invalid(format!(
                    "pusher app {id}: key must be non-empty printable ASCII without / or ?"
                )));
            }
            let secret = match (&app.secret, &app.secret_env, &app.secret_file) {
                (Some(s), None, None) => s.0.clone(),
                (None, Some(var), None) => std::env::var(var).map_err(|_| {
                    invalid(format!(
                        "pusher app {id}: environment variable {var} is not set"
                    ))
                })?,
                (None, None, Some(path)) => std::fs::read_to_string(path)
                    .map_err(|e| {
                        invalid(format!(
                            "pusher app {id}: secret_file {}: {e}",
                            path.display()
                        ))
                    })?
                    .trim()
                    .to_string(),
                _ => {
                    return Err(invalid(format!(
                        "pusher app {id}: give exactly one of secret_env, secret_file, secret"
                    )))
                }
            };
            if secret.is_empty() {
                return Err(invalid(format!("pusher app {id}: empty secret")));
            }
            let namespace = app
                .namespace
                .clone()
                .unwrap_or_else(|| format!("pusher-{id}"));
            if !channel::valid_namespace(&namespace) {
                return Err(invalid(format!(
                    "pusher app {id}: namespace {namespace:?} must be 1 to 64 channel characters without ':'"
                )));
            }
            if let Some(other) = apps
                .iter()
                .find(|o| o.id == *id || o.key == app.key || o.namespace == namespace)
            {
                return Err(invalid(format!(
                    "pusher apps {} and {id} share an id, key or namespace",
                    other.id
                )));
            }
            let mut webhook_tls = None;
            if let Some(url) = &app.webhook_url {
                let u = webhooks::parse_url(url)
                    .map_err(|e| invalid(format!("pusher app {id}: {e}")))?;
                if u.tls {
                    let roots = app
                        .webhook_ca_file
                        .clone()
                        .unwrap_or_else(|| crate::tls::SYSTEM_ROOTS.into());
                    let config = crate::tls::client_config(&roots)
                        .map_err(|e| invalid(format!("pusher app {id}: webhook_ca_file: {e}")))?;
                    webhook_tls = Some(config);
                }
            }
            if let Some(bad) = app
                .webhook_events
                .iter()
                .flatten()
                .find(|e| !webhooks::EVENTS.contains(&e.as_str()))
            {
                return Err(invalid(format!(
                    "pusher app {id}: unknown webhook event {bad:?} (known: {})",
                    webhooks::EVENTS.join(", ")
                )));
            }
            apps.push(AppConfig {
                id: id.clone(),
                key: app.key.clone(),
                secret: Secret(secret),
                namespace,
                webhook_url: app.webhook_url.clone(),
                webhook_events: app.webhook_events.clone(),
                webhook_tls,
                subscription_count: app.subscription_count.unwrap_or(false),
            });
        }
        let d = PusherConfig::default();
        let activity_timeout = a.activity_timeout.unwrap_or(d.activity_timeout);
        if activity_timeout == 0 {
            return Err(invalid("pusher activity_timeout must be > 0".into()));
        }
        Ok(PusherConfig {
            apps,
            activity_timeout,
            client_event_rate: a.client_event_rate.unwrap_or(d.client_event_rate),
            max_event_size: a.max_event_size.unwrap_or(d.max_event_size),
            vacated_delay: a
                .vacated_delay_ms
                .map_or(d.vacated_delay, Duration::from_millis),
            subscription_count_interval: a
                .subscription_count_interval_ms
                .map_or(d.subscription_count_interval, Duration::from_millis),
        })
    }
}

/// One app at run time.
#[derive(Debug)]
pub struct App {
    /// Its configuration.
    pub config: AppConfig,
    /// The renderer all its connections share.
    pub render: Arc<AppRender>,
    /// Its webhook queue, when it has a `webhook_url`.
    pub webhooks: Option<webhooks::Webhooks>,
}

impl App {
    /// The Herald channel of Pusher channel `name`.
    pub fn herald_channel(&self, name: &str) -> String {
        channel::to_herald(&self.config.namespace, name)
    }

    /// The secret's bytes, for signatures.
    pub fn secret(&self) -> &[u8] {
        self.config.secret.0.as_bytes()
    }
}

/// Every configured app, and the settings they share.
#[derive(Debug)]
pub struct Apps {
    apps: Vec<Arc<App>>,
    /// Settings.
    pub config: PusherConfig,
    /// On one node, `channel_vacated` waits here for `vacated_delay` (a
    /// token per Herald channel; an occupation meanwhile removes it). In a
    /// cluster the broker applies the delay, cluster-wide, and this stays
    /// unused.
    vacating: Option<Arc<Mutex<HashMap<String, u64>>>>,
    /// The next token of `vacating`.
    tokens: std::sync::atomic::AtomicU64,
    /// When an app sends `subscription_count` events: the channels whose
    /// count changed, for the ticker ([`count::run`]).
    pub counts: Option<Arc<count::Dirty>>,
}

impl Apps {
    /// The apps of `config`; their webhook senders start on the current
    /// tokio runtime (none outside one). `clustered`: the broker reports
    /// cluster-wide transitions and applies the vacated delay itself.
    pub fn new(config: &PusherConfig, clustered: bool) -> Apps {
        let runtime = tokio::runtime::Handle::try_current().is_ok();
        Apps {
            apps: config
                .apps
                .iter()
                .map(|c| {
                    let webhooks = c.webhook_url.as_deref().filter(|_| runtime).and_then(|u| {
                        let events = c.webhook_events.as_deref();
                        let tls = c.webhook_tls.clone();
                        webhooks::Webhooks::start(u, &c.key, c.secret.0.as_bytes(), events, tls)
                            .ok()
                    });
                    Arc::new(App {
                        render: Arc::new(AppRender {
                            namespace: c.namespace.clone(),
                        }),
                        config: c.clone(),
                        webhooks,
                    })
                })
                .collect(),
            config: config.clone(),
            vacating: (!clustered && !config.vacated_delay.is_zero())
                .then(|| Arc::new(Mutex::new(HashMap::new()))),
            tokens: std::sync::atomic::AtomicU64::new(0),
            counts: config
                .apps
                .iter()
                .any(|a| a.subscription_count)
                .then(|| Arc::new(count::Dirty::default())),
        }
    }

    /// The hub's count hook: notes a changed count of a counted channel of
    /// an app with `subscription_count` (see [`count`]).
    pub fn count_changed(&self, channel: &str) {
        let Some(dirty) = &self.counts else {
            return;
        };
        let Some((ns, _)) = channel.split_once(':') else {
            return;
        };
        if !channel::from_herald(ns, channel).is_some_and(|n| count::counted(&n)) {
            return;
        }
        if self
            .by_namespace(ns)
            .is_some_and(|a| a.config.subscription_count)
        {
            dirty.mark(channel);
        }
    }

    /// The app whose namespace is `ns`.
    pub fn by_namespace(&self, ns: &str) -> Option<&Arc<App>> {
        self.apps.iter().find(|a| a.config.namespace == ns)
    }

    /// Whether any app sends webhooks.
    pub fn has_webhooks(&self) -> bool {
        self.apps.iter().any(|a| a.webhooks.is_some())
    }

    /// The hub's observer: occupancy of an app's channels and presence
    /// members coming and going become webhooks (`channel_occupied`,
    /// `channel_vacated`, `member_added`, `member_removed`).
    pub fn observe(&self, channel: &str, event: ChannelEvent<'_>) {
        let Some((ns, _)) = channel.split_once(':') else {
            return;
        };
        let Some(app) = self.apps.iter().find(|a| a.config.namespace == ns) else {
            return;
        };
        let (Some(w), Some(name)) = (&app.webhooks, channel::from_herald(ns, channel)) else {
            return;
        };
        if name.starts_with('#') {
            // User channels are the connection's own business.
            return;
        }
        let presence = channel::ChannelType::of(&name).kind == channel::Kind::Presence;
        let event = match event {
            ChannelEvent::Occupied => {
                if self.vacating.as_ref().is_some_and(|v| {
                    v.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(channel)
                        .is_some()
                }) {
                    // Occupied again within the delay: neither is news.
                    return;
                }
                serde_json::json!({"name": "channel_occupied", "channel": name})
            }
            ChannelEvent::Vacated => {
                let e = serde_json::json!({"name": "channel_vacated", "channel": name});
                match (&self.vacating, tokio::runtime::Handle::try_current()) {
                    (Some(v), Ok(rt)) => {
                        let token = self.tokens.fetch_add(1, Ordering::Relaxed);
                        v.lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(channel.to_string(), token);
                        let (v, app, channel) = (v.clone(), app.clone(), channel.to_string());
                        let delay = self.config.vacated_delay;
                        rt.spawn(async move {
                            tokio::time::sleep(delay).await;
                            let mut pending = v.lock().unwrap_or_else(|p| p.into_inner());
                            if pending.get(&channel) == Some(&token) {
                                pending.remove(&channel);
                                drop(pending);
                                if let Some(w) = &app.webhooks {
                                    w.send(e);
                                }
                            }
                        });
                        return;
                    }
                    _ => e,
                }
            }
            ChannelEvent::UserAdded(u) if presence => {
                serde_json::json!({"name": "member_added", "channel": name, "user_id": u})
            }
            ChannelEvent::UserRemoved(u) if presence => {
                serde_json::json!({"name": "member_removed", "channel": name, "user_id": u})
            }
            _ => return,
        };
        w.send(event);
    }

    /// The app with key `key`.
    pub fn by_key(&self, key: &str) -> Option<&Arc<App>> {
        self.apps.iter().find(|a| a.config.key == key)
    }

    /// Every configured app.
    pub fn all(&self) -> &[Arc<App>] {
        &self.apps
    }

    /// The app with id `id`.
    pub fn by_id(&self, id: &str) -> Option<&Arc<App>> {
        self.apps.iter().find(|a| a.config.id == id)
    }
}

/// Renders publications and presence changes of one app's channels as
/// Pusher frames (see [`herald_core::render`]).
#[derive(Debug)]
pub struct AppRender {
    namespace: String,
}

impl AppRender {
    /// The frame of a publication on Herald channel `channel` (`None`: not
    /// this app's, or not text).
    pub fn render(&self, channel: &str, data: &[u8]) -> Option<Rendered> {
        let name = channel::from_herald(&self.namespace, channel)?;
        let e = Envelope::of_publication(data)?;
        let frame = message::render_event(&e.event, Some(&name), &e.data, e.user_id.as_deref());
        Some(Rendered {
            frame: Frame::Text(Bytes::from(frame)),
            except: e.except,
        })
    }
}

impl Render for AppRender {
    fn publication(&self, p: &Publication) -> Option<Rendered> {
        self.render(&p.channel, &p.data)
    }

    fn presence(&self, channel: &str, who: &ClientInfo, join: bool, edge: bool) -> Option<Frame> {
        if !edge || who.user.is_empty() {
            return None;
        }
        let name = channel::from_herald(&self.namespace, channel)?;
        let frame = if join {
            let info = std::str::from_utf8(&who.info).unwrap_or("");
            message::render_member_added(&name, &who.user, info)
        } else {
            message::render_member_removed(&name, &who.user)
        };
        Some(Frame::Text(Bytes::from(frame)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> Result<PusherConfig, ConfigError> {
        let args: crate::ServeArgs = toml::from_str(toml_text).expect("toml");
        PusherConfig::resolve(args.pusher.as_ref())
    }

    #[test]
    fn apps_from_toml_with_secrets_from_env_file_or_value() {
        let dir = std::env::temp_dir().join(format!("herald-pusher-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("secret");
        std::fs::write(&file, "from-file\n").expect("write");
        // A variable every test process has, so no test sets the environment.
        let c = parse(&format!(
            r#"
            [pusher]
            client_event_rate = 3
            [[pusher.apps]]
            id = "1"
            key = "k1"
            secret = "inline"
            [[pusher.apps]]
            id = "2"
            key = "k2"
            secret_file = "{}"
            namespace = "shop"
            [[pusher.apps]]
            id = "3"
            key = "k3"
            secret_env = "PATH"
            "#,
            file.display()
        ))
        .expect("valid");
        assert_eq!(c.client_event_rate, 3);
        assert_eq!(c.activity_timeout, ACTIVITY_TIMEOUT);
        assert_eq!(c.apps[0].secret.0, "inline");
        assert_eq!(c.apps[0].namespace, "pusher-1");
        assert_eq!(c.apps[1].secret.0, "from-file");
        assert_eq!(c.apps[1].namespace, "shop");
        assert!(!c.apps[2].secret.0.is_empty());
        let debug = format!("{c:?}");
        assert!(
            !debug.contains("inline") && !debug.contains("from-file"),
            "{debug}"
        );
        assert!(parse("").expect("no section").apps.is_empty());
    }

    #[test]
    fn bad_apps_are_refused() {
        for bad in [
            // No secret, two secrets, an unset variable.
            "[[pusher.apps]]\nid = \"1\"\nkey = \"k\"",
            "[[pusher.apps]]\nid = \"1\"\nkey = \"k\"\nsecret = \"s\"\nsecret_env = \"PATH\"",
            "[[pusher.apps]]\nid = \"1\"\nkey = \"k\"\nsecret_env = \"HERALD_SURELY_UNSET_VARIABLE\"",
            // Bad id, key, namespace; duplicates.
            "[[pusher.apps]]\nid = \"a:b\"\nkey = \"k\"\nsecret = \"s\"",
            "[[pusher.apps]]\nid = \"1\"\nkey = \"k/x\"\nsecret = \"s\"",
            "[[pusher.apps]]\nid = \"1\"\nkey = \"k\"\nsecret = \"s\"\nnamespace = \"a:b\"",
            "[[pusher.apps]]\nid = \"1\"\nkey = \"k\"\nsecret = \"s\"\n[[pusher.apps]]\nid = \"2\"\nkey = \"k\"\nsecret = \"t\"",
            "[pusher]\nactivity_timeout = 0",
            "[[pusher.apps]]\nid = \"1\"\nkey = \"k\"\nsecret = \"s\"\nwebhook_url = \"https://x/\"\nwebhook_ca_file = \"/nonexistent/ca.pem\"",
            "[[pusher.apps]]\nid = \"1\"\nkey = \"k\"\nsecret = \"s\"\nwebhook_events = [\"channel_occupied\", \"channel_gone\"]",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_renderer_maps_channels_and_presence() {
        let r = AppRender {
            namespace: "pusher-1".into(),
        };
        let out = r
            .render(
                "pusher-1:a/b",
                br#"{"event":"e","data":{"x":1},"socket_id":"0.5"}"#,
            )
            .expect("this app's");
        assert_eq!(out.except, Some(5));
        assert_eq!(
            &out.frame.payload()[..],
            &br#"{"event":"e","channel":"a;b","data":"{\"x\":1}"}"#[..]
        );
        assert!(r.render("pusher-2:a", b"{}").is_none(), "another app's");
        let who = ClientInfo {
            client: "1".into(),
            user: "ann".into(),
            info: Bytes::from_static(b"{\"n\":1}"),
        };
        assert!(r
            .presence("pusher-1:presence-x", &who, true, false)
            .is_none());
        let f = r
            .presence("pusher-1:presence-x", &who, true, true)
            .expect("edge");
        let v: serde_json::Value = serde_json::from_slice(&f.payload()).expect("json");
        assert_eq!(v["event"], "pusher_internal:member_added");
    }
}
