//! Bayeux 1.0 (CometD) on Herald's hub: the endpoint `/cometd` (the path is
//! configurable) over the `long-polling` transport (HTTP POST, [`http`]) and
//! the `websocket` transport ([`ws`]), for the `[bayeux]` settings.
//!
//! A Bayeux session is a Herald session: its subscribe, unsubscribe and
//! publish messages become Herald commands handled by
//! [`herald_core::Session`] (so namespace permissions, subscribe tokens,
//! wildcard patterns, rate limits, size limits and metrics are Herald's, not
//! a copy of them), and a Bayeux channel is a Herald channel by the mapping
//! of [`herald_bayeux::channel`] (docs/decisions/0016-bayeux.md). The
//! session's client is a rendered one: one [`BayeuxRender`], shared by every
//! Bayeux client, turns each publication into its Bayeux delivery once, and
//! the hub queues the same bytes to every Bayeux subscriber. Herald's
//! replies to the commands land in the same bounded queue and are translated
//! back into Bayeux replies when a transport drains it ([`session`]).
//!
//! Sessions outlive requests and sockets: a session that has no held
//! `/meta/connect` for `max_interval` is forgotten ([`Bayeux::reap`], run
//! every second), and its next message gets `402::Unknown client` with
//! `reconnect: handshake`. Everything protocol-specific that needs no
//! session lives in the `herald-bayeux` crate.

pub mod http;
pub mod positions;
pub mod session;
pub mod ws;

use crate::config::error::ConfigError;
use bytes::Bytes;
use herald_core::shard::Sharded;
use herald_core::{Frame, Node, Publication, Render, Rendered};
use herald_proto::ClientInfo;
use serde::Deserialize;
use session::BayeuxSession;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where the endpoint is served, by default.
pub const PATH: &str = "/cometd";
/// How long a `/meta/connect` is held when nothing is delivered
/// (`advice.timeout`), by default: CometD's own default, milliseconds.
pub const TIMEOUT_MS: u64 = 30_000;
/// How long a client waits between a connect reply and its next connect
/// (`advice.interval`), by default, milliseconds.
pub const INTERVAL_MS: u64 = 0;
/// How long a session lives without a connect (`advice.maxInterval`), by
/// default: CometD's own default, milliseconds.
pub const MAX_INTERVAL_MS: u64 = 10_000;
/// Most messages in one batch, by default.
pub const MAX_BATCH: usize = 100;
/// The `interval` advised to a second concurrent long-poll of one browser
/// (`multiple-clients`), milliseconds: CometD's `multiFrameInterval`.
pub const MULTI_FRAME_INTERVAL_MS: u64 = 2_000;

/// The `[bayeux]` section of the TOML file.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BayeuxArgs {
    /// Path of the endpoint [default: /cometd].
    pub path: Option<String>,
    /// Milliseconds a `/meta/connect` is held [default: 30000].
    pub timeout_ms: Option<u64>,
    /// Milliseconds advised between connects [default: 0].
    pub interval_ms: Option<u64>,
    /// Milliseconds a session lives without a connect [default: 10000].
    pub max_interval_ms: Option<u64>,
    /// Most messages in one batch [default: 100].
    pub max_batch: Option<usize>,
    /// The `timestamp` extension: every message sent carries `timestamp`
    /// [default: false].
    pub timestamp: Option<bool>,
}

/// The resolved `[bayeux]` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BayeuxConfig {
    /// Path of the endpoint.
    pub path: String,
    /// How long a connect is held.
    pub timeout: Duration,
    /// Advised pause between connects.
    pub interval: Duration,
    /// How long a session lives without a connect.
    pub max_interval: Duration,
    /// Most messages in one batch.
    pub max_batch: usize,
    /// Every message sent carries `timestamp` (RFC 1123, GMT): replies when
    /// sent, deliveries when published.
    pub timestamp: bool,
}

impl Default for BayeuxConfig {
    fn default() -> Self {
        BayeuxConfig {
            path: PATH.into(),
            timeout: Duration::from_millis(TIMEOUT_MS),
            interval: Duration::from_millis(INTERVAL_MS),
            max_interval: Duration::from_millis(MAX_INTERVAL_MS),
            max_batch: MAX_BATCH,
            timestamp: false,
        }
    }
}

impl BayeuxConfig {
    /// Checks the section.
    pub fn resolve(args: Option<&BayeuxArgs>) -> Result<BayeuxConfig, ConfigError> {
        let d = BayeuxConfig::default();
        let Some(a) = args else {
            return Ok(d);
        };
        let path = a.path.clone().unwrap_or(d.path);
        let taken = crate::routes::Route::of(&path) != crate::routes::Route::Page || path == "/";
        if !path.starts_with('/') || path.contains(['?', '#', ' ']) || taken {
            return Err(ConfigError::Invalid(format!(
                "bayeux path {path:?}: an absolute path no other endpoint uses"
            )));
        }
        let max_batch = a.max_batch.unwrap_or(d.max_batch);
        if max_batch == 0 {
            return Err(ConfigError::Invalid("bayeux max_batch must be > 0".into()));
        }
        let ms = |v: Option<u64>, d: Duration| v.map_or(d, Duration::from_millis);
        Ok(BayeuxConfig {
            path,
            timeout: ms(a.timeout_ms, d.timeout),
            interval: ms(a.interval_ms, d.interval),
            max_interval: ms(a.max_interval_ms, d.max_interval),
            max_batch,
            timestamp: a.timestamp.unwrap_or(d.timestamp),
        })
    }
}

/// The endpoint's state: its sessions by `clientId`, and what serving them
/// takes.
#[derive(Debug)]
pub struct Bayeux {
    /// The settings.
    pub config: BayeuxConfig,
    /// The node: hub, broker, sessions.
    pub node: Arc<Node>,
    /// The renderer every Bayeux client shares...
    render: Arc<BayeuxRender>,
    /// ...but those of `ack` sessions, whose deliveries carry their Herald
    /// offsets (herald_bayeux::resume).
    render_acked: Arc<BayeuxRender>,
    /// Sessions by `clientId`, sharded so that one lock is not every
    /// request's.
    sessions: Sharded<String, Arc<BayeuxSession>>,
    /// Held long-poll connects per browser (`BAYEUX_BROWSER` cookie), for
    /// the `multiple-clients` advice.
    browsers: Mutex<HashMap<String, usize>>,
    /// Where websocket `ack` sessions' positions are kept for other nodes
    /// (cluster only), and the sessions whose positions may have moved.
    positions: Option<Arc<dyn positions::Positions>>,
    dirty: positions::Dirty,
    /// Largest message accepted (`max_message_size`).
    pub max_message_size: usize,
    /// How long a request body may take (`request_body_timeout`).
    pub request_body_timeout: Duration,
}

impl Bayeux {
    /// No sessions yet, on `node`.
    pub fn new(
        config: BayeuxConfig,
        node: Arc<Node>,
        max_message_size: usize,
        request_body_timeout: Duration,
    ) -> Bayeux {
        Bayeux {
            render: Arc::new(BayeuxRender {
                timestamp: config.timestamp,
                offsets: false,
            }),
            render_acked: Arc::new(BayeuxRender {
                timestamp: config.timestamp,
                offsets: true,
            }),
            config,
            node,
            sessions: Sharded::new(16),
            browsers: Mutex::new(HashMap::new()),
            positions: None,
            dirty: positions::Dirty::default(),
            max_message_size,
            request_body_timeout,
        }
    }

    /// Keeps websocket `ack` sessions' positions in `store`, so that
    /// another node can resume them ([`positions`]).
    #[must_use]
    pub fn with_positions(mut self, store: Arc<dyn positions::Positions>) -> Bayeux {
        self.positions = Some(store);
        self
    }

    /// The store of websocket `ack` sessions' positions, if there is one.
    pub fn positions(&self) -> Option<&dyn positions::Positions> {
        self.positions.as_deref()
    }

    /// A websocket `ack` session's connect acknowledged something: its
    /// positions are written at the next flush if they moved.
    pub fn positions_moved(&self, client_id: &str) {
        if self.positions.is_some() {
            self.dirty.mark(client_id);
        }
    }

    /// An `ack` session disconnected: nothing of it is to be resumed.
    pub fn forget_positions(&self, client_id: &str) {
        if let Some(p) = &self.positions {
            p.forget(client_id);
        }
    }

    /// Writes the positions of the sessions marked since the last flush
    /// that moved (or need refreshing). Called every second.
    pub fn flush_positions(&self) {
        let Some(store) = &self.positions else {
            return;
        };
        let now = unix_now();
        for id in self.dirty.take() {
            let Some(s) = self.find(&id) else {
                continue;
            };
            if let Some(v) = s.positions_to_store(now, positions::REFRESH_SECS) {
                store.save(&id, &v, positions::TTL);
            }
        }
    }

    /// The session of `client_id`, if it is known.
    pub fn find(&self, client_id: &str) -> Option<Arc<BayeuxSession>> {
        self.sessions.lock(client_id).get(client_id).cloned()
    }

    /// Opens a session for an authenticated handshake (`token`: Herald's
    /// JWT from `ext.herald.token`); with `acks`, an `ack`-extension session
    /// resuming from the `BAYEUX_ACKED` cookie's `resume` entries. `Err`:
    /// the token was refused.
    pub fn open(
        &self,
        token: Option<&str>,
        acks: Option<Vec<herald_bayeux::resume::Entry>>,
    ) -> Result<Arc<BayeuxSession>, herald_core::AuthError> {
        let render = match acks {
            Some(_) => &self.render_acked,
            None => &self.render,
        };
        let client = self.node.new_rendered_client(render.clone());
        let s = BayeuxSession::open(self.node.clone(), client, token)?;
        if let Some(resume) = acks {
            s.enable_acks(self.render_acked.clone(), resume);
        }
        let s = Arc::new(s);
        self.sessions.lock(&s.id).insert(s.id.clone(), s.clone());
        Ok(s)
    }

    /// Forgets a session (disconnect, expiry): its Herald session ends.
    pub fn remove(&self, client_id: &str) {
        let gone = self.sessions.remove(client_id);
        if let Some(s) = gone {
            s.end();
        }
    }

    /// Number of open sessions.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// True when no session is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets sessions without a held connect for `max_interval`, and those
    /// Herald ended (slow consumer, expired token, shutdown) once nothing
    /// waits on them. Called every second.
    pub fn reap(&self) {
        let now = self.node.now_ms();
        let seconds = self.node.now();
        let max = self.config.max_interval.as_millis() as u64;
        let mut dead = Vec::new();
        self.sessions.retain(|_, s| {
            s.keep_alive(seconds);
            let expired = s.expired(now, max);
            if expired {
                dead.push(s.clone());
            }
            !expired
        });
        // Ended outside the shard locks: ending drops a Herald session.
        for s in dead {
            s.end();
        }
    }

    /// Stamps messages on their way out when the `timestamp` extension is
    /// on.
    pub fn stamp(&self, out: &mut [Vec<u8>]) {
        if self.config.timestamp && !out.is_empty() {
            let now = herald_bayeux::time::now();
            for m in out {
                herald_bayeux::reply::stamp(m, &now);
            }
        }
    }

    /// Counts a held long-poll of `browser`; false when that browser has
    /// one held already (the new one gets the `multiple-clients` advice).
    pub fn hold_browser(&self, browser: &str) -> bool {
        let mut b = self.browsers.lock().unwrap_or_else(|p| p.into_inner());
        let n = b.entry(browser.to_string()).or_insert(0);
        if *n >= 1 {
            return false;
        }
        *n += 1;
        true
    }

    /// The end of a held long-poll counted by [`Bayeux::hold_browser`].
    pub fn release_browser(&self, browser: &str) {
        let mut b = self.browsers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = b.get_mut(browser) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                b.remove(browser);
            }
        }
    }

    /// Ends every session (shutdown).
    pub fn close_all(&self) {
        let mut all = Vec::new();
        self.sessions.retain(|_, s| {
            all.push(s.clone());
            false
        });
        for s in all {
            s.end();
        }
    }
}

/// Unix seconds: the time stamps of the resume codec's entries.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Runs [`Bayeux::reap`] every second until `stop`.
pub async fn reaper(bayeux: Arc<Bayeux>, stop: tokio_util::sync::CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = tick.tick() => {
                bayeux.reap();
                bayeux.flush_positions();
            }
            () = stop.cancelled() => return,
        }
    }
}

/// Renders publications as Bayeux deliveries (see [`herald_core::render`]):
/// `{"channel":"/a/b","data":DATA}` for the Herald channel `a.b`. Data that
/// is JSON is delivered as it is; other UTF-8 text as a JSON string; binary
/// data, and channels Bayeux cannot name, not at all. With the `timestamp`
/// extension a delivery carries the time it was rendered (once per
/// publication, so every subscriber sees the same).
#[derive(Debug)]
pub struct BayeuxRender {
    /// Stamp deliveries.
    timestamp: bool,
    /// Give deliveries their Herald offset (`ext.herald.offset`).
    offsets: bool,
}

impl BayeuxRender {
    /// The delivery of `data` published on Herald channel `channel` at
    /// `offset`.
    pub fn render(&self, channel: &str, data: &[u8], json: bool, offset: u64) -> Option<Vec<u8>> {
        let name = herald_bayeux::channel::from_herald(channel)?;
        let is_json = json || serde_json::from_slice::<serde::de::IgnoredAny>(data).is_ok();
        let text = std::str::from_utf8(data).ok()?;
        let quoted;
        let data = if is_json {
            text
        } else {
            quoted = serde_json::to_string(text).ok()?;
            &quoted
        };
        let now = self.timestamp.then(herald_bayeux::time::now);
        Some(herald_bayeux::reply::delivery_at(
            &name,
            data,
            None,
            now.as_deref(),
            self.offsets.then_some(offset),
        ))
    }
}

impl Render for BayeuxRender {
    fn publication(&self, p: &Publication) -> Option<Rendered> {
        let frame = self.render(&p.channel, &p.data, p.json, p.offset)?;
        Some(Rendered {
            frame: Frame::Text(Bytes::from(frame)),
            except: None,
        })
    }

    fn presence(&self, _: &str, _: &ClientInfo, _: bool, _: bool) -> Option<Frame> {
        // Bayeux has no presence: join/leave are never asked for.
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> Result<BayeuxConfig, ConfigError> {
        let args: crate::ServeArgs = toml::from_str(toml_text).expect("toml");
        BayeuxConfig::resolve(args.bayeux.as_ref())
    }

    #[test]
    fn settings_from_toml_and_their_defaults() {
        assert_eq!(parse("").expect("none"), BayeuxConfig::default());
        let c = parse(
            "[bayeux]\npath = \"/bayeux\"\ntimeout_ms = 5000\nmax_batch = 7\ntimestamp = true\n",
        )
        .expect("valid");
        assert!(c.timestamp);
        assert_eq!(c.path, "/bayeux");
        assert_eq!(c.timeout, Duration::from_secs(5));
        assert_eq!(c.max_batch, 7);
        assert_eq!(c.max_interval, Duration::from_millis(MAX_INTERVAL_MS));
        for bad in [
            "[bayeux]\npath = \"cometd\"",
            "[bayeux]\npath = \"/ws\"",
            "[bayeux]\npath = \"/\"",
            "[bayeux]\nmax_batch = 0",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(toml::from_str::<crate::ServeArgs>("[bayeux]\nfrob = 1").is_err());
    }

    #[test]
    fn the_renderer_maps_channels_and_data() {
        let r = BayeuxRender {
            timestamp: false,
            offsets: false,
        };
        let d = r
            .render("chat.room1", br#"{"t":1}"#, false, 1)
            .expect("json");
        assert_eq!(d, br#"{"channel":"/chat/room1","data":{"t":1}}"#);
        let d = r.render("chat", b"plain text", false, 2).expect("text");
        assert_eq!(d, br#"{"channel":"/chat","data":"plain text"}"#);
        assert!(r.render("chat", &[0xff, 0], false, 3).is_none());
        assert!(r.render("pusher-1:a/b", b"{}", true, 4).is_none());
        assert!(r.render("meta.connect", b"{}", true, 5).is_none());
        let stamped = BayeuxRender {
            timestamp: true,
            offsets: true,
        };
        let d = stamped.render("a", b"1", true, 9).expect("json");
        let v: serde_json::Value = serde_json::from_slice(&d).expect("json");
        assert!(
            v["timestamp"].as_str().is_some_and(|t| t.ends_with(" GMT")),
            "{v}"
        );
        assert_eq!(v["ext"]["herald"]["offset"], 9, "{v}");
    }
}
