//! The HTTP API Pusher's server SDKs call, under `/apps/{app_id}/`:
//!
//! | request | answer |
//! |---|---|
//! | `POST events` `{"name","data","channels"\|"channel","socket_id"?,"info"?}` | `{}` (or `{"channels":{..}}` with `info`) |
//! | `POST batch_events` `{"batch":[{"channel","name","data","socket_id"?,"info"?}]}` | `{}` (or `{"batch":[..]}` with `info`) |
//! | `GET channels?filter_by_prefix=&info=user_count` | `{"channels":{"name":{..}}}` |
//! | `GET channels/{name}?info=subscription_count,user_count` | `{"occupied":bool,..}` |
//! | `GET channels/{name}/users` | `{"users":[{"id":..}]}` (presence channels) |
//! | `POST users/{id}/terminate_connections` | `{}`; the user's connections close with 4009, on every node of a cluster |
//!
//! Events may also go to `#server-to-user-{id}` (the SDKs' `sendToUser`): the
//! connections signed in as that user receive them.
//!
//! Every request must carry the app's signed query ([`herald_pusher::sign`]):
//! 401 for a missing or wrong signature, an unknown `auth_key`, a body whose
//! MD5 differs, or a timestamp more than ten minutes off. Errors are plain
//! text, as Pusher answers them. Events are published through the broker
//! exactly like Herald publications (see [`herald_pusher::channel`] for the
//! payload), so they reach Herald and Pusher subscribers alike. Limits, as
//! Pusher's: 100 channels per event, 10 events per batch, 200 characters of
//! event name, `max_event_size` bytes of data (413 beyond).
//!
//! Every channel question (`channels`, `channels/{name}`, `.../users` and
//! the `info` of `events`) asks the node's presence, which is cluster-wide
//! on Redis like Herald's `presence`: whichever node is asked answers for
//! the cluster (docs/decisions/0012-pusher-cluster.md).

use super::{App, Apps};
use crate::respond::{full, json, Body};
use bytes::Bytes;
use herald_core::Completion;
use herald_core::Node;
use herald_pusher::channel::{self, data_string, ChannelType, Envelope, Kind};
use herald_pusher::sign::SignedQuery;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json as j, Map, Value};
use std::borrow::Cow;
use std::sync::Arc;

/// What Pusher's HTTP API takes: the apps, the node (its broker and
/// presence), and in a cluster the Redis broker (to close a user's
/// connections on every node).
#[derive(Debug)]
pub struct PusherApi {
    /// Pusher apps.
    pub apps: Arc<Apps>,
    /// The node.
    pub node: Arc<Node>,
    /// The Redis broker in cluster mode.
    pub cluster: Option<Arc<herald_redis::RedisBroker>>,
}

/// Most channels one event may go to.
const MAX_CHANNELS: usize = 100;
/// Most events in one batch.
const MAX_BATCH: usize = 10;
/// Longest event name.
const MAX_EVENT_NAME: usize = 200;

fn text(status: StatusCode, body: impl Into<String>) -> Response<Body> {
    let mut r = Response::new(full(Bytes::from(body.into() + "\n")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// A refused request: its status and plain-text message (small, unlike a
/// `Response`, so `Result`s carrying it stay small).
struct Refusal(StatusCode, String);

impl Refusal {
    fn response(self) -> Response<Body> {
        text(self.0, self.1)
    }
}

fn refusal(status: StatusCode, body: impl Into<String>) -> Refusal {
    Refusal(status, body.into())
}

fn ok(v: Value) -> Response<Body> {
    json(StatusCode::OK, v.to_string().into_bytes())
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Serves one `/apps/...` request.
pub async fn handle(req: Request<Incoming>, api: &PusherApi) -> Response<Body> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let method = req.method().clone();
    let Some((app_id, rest)) = path.strip_prefix("/apps/").and_then(|r| r.split_once('/')) else {
        return text(StatusCode::NOT_FOUND, "not found");
    };
    let Some(app) = api.apps.by_id(app_id).cloned() else {
        return text(StatusCode::NOT_FOUND, format!("unknown app {app_id:?}"));
    };
    let settings = &api.apps.config;
    // A batch of the largest events, with room for names and channels.
    let limit = MAX_BATCH * settings.max_event_size + 64 * 1024;
    let body = match Limited::new(req.into_body(), limit).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return text(StatusCode::PAYLOAD_TOO_LARGE, "request body too large"),
    };
    let signed = match SignedQuery::parse(&query) {
        Ok(q) => q,
        Err(e) => return text(StatusCode::UNAUTHORIZED, e.to_string()),
    };
    match signed.key() {
        Ok(k) if k == app.config.key => {}
        Ok(_) => return text(StatusCode::UNAUTHORIZED, "unknown auth_key for this app"),
        Err(e) => return text(StatusCode::UNAUTHORIZED, e.to_string()),
    }
    if let Err(e) = signed.verify(app.secret(), method.as_str(), &path, &body, unix_now()) {
        return text(StatusCode::UNAUTHORIZED, e.to_string());
    }
    let rest = rest.trim_end_matches('/');
    match (&method, rest) {
        (&Method::POST, "events") => events(&app, api, &body).await,
        (&Method::POST, "batch_events") => batch_events(&app, api, &body).await,
        (&Method::POST, r) if r.starts_with("users/") && r.ends_with("/terminate_connections") => {
            let id = &r["users/".len()..r.len() - "/terminate_connections".len()];
            terminate(&app, api, id).await
        }
        (&Method::GET, "channels") => channels(&app, api, &signed).await,
        (&Method::GET, r) if r.starts_with("channels/") => {
            let r = &r["channels/".len()..];
            match r.strip_suffix("/users") {
                Some(name) => users(&app, api, name).await,
                None => channel_info(&app, api, r, &signed).await,
            }
        }
        _ => text(StatusCode::NOT_FOUND, "not found"),
    }
}

#[derive(Deserialize)]
struct Event<'a> {
    name: String,
    #[serde(borrow)]
    data: &'a RawValue,
    #[serde(default)]
    channels: Option<Vec<String>>,
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    socket_id: Option<String>,
    #[serde(default)]
    info: Option<String>,
}

/// A checked event, ready to publish.
struct Checked {
    channels: Vec<String>,
    payload: Bytes,
    info: Vec<String>,
}

/// Checks one event (from `events` or a batch); the error is the answer.
fn check(e: &Event<'_>, max_size: usize) -> Result<Checked, Refusal> {
    let channels: Vec<String> = match (&e.channels, &e.channel) {
        (Some(c), None) => c.clone(),
        (None, Some(c)) => vec![c.clone()],
        _ => {
            return Err(refusal(
                StatusCode::BAD_REQUEST,
                "give exactly one of channels and channel",
            ))
        }
    };
    if channels.is_empty() || channels.len() > MAX_CHANNELS {
        return Err(refusal(
            StatusCode::BAD_REQUEST,
            format!("an event goes to 1 to {MAX_CHANNELS} channels"),
        ));
    }
    if let Some(bad) = channels
        .iter()
        .find(|c| !channel::valid_name(c) && channel::user_channel(c).is_none())
    {
        return Err(refusal(
            StatusCode::BAD_REQUEST,
            format!("invalid channel name {bad:?}"),
        ));
    }
    if e.name.is_empty() || e.name.len() > MAX_EVENT_NAME {
        return Err(refusal(
            StatusCode::BAD_REQUEST,
            format!("event name must be 1 to {MAX_EVENT_NAME} characters"),
        ));
    }
    let data = data_string(e.data);
    if data.len() > max_size {
        return Err(refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("event data over {max_size} bytes"),
        ));
    }
    let except = match e.socket_id.as_deref() {
        None => None,
        Some(s) => match herald_pusher::parse_socket_id(s) {
            Some(id) => Some(id),
            None => {
                return Err(refusal(
                    StatusCode::BAD_REQUEST,
                    format!("invalid socket_id {s:?}"),
                ))
            }
        },
    };
    let envelope = Envelope {
        event: Cow::Borrowed(&e.name),
        data,
        user_id: None,
        except,
    };
    let info = e
        .info
        .as_deref()
        .map(|i| i.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    Ok(Checked {
        channels,
        payload: Bytes::from(envelope.to_payload()),
        info,
    })
}

/// Publishes a checked event to each of its channels; the error is the
/// answer.
async fn publish(app: &App, api: &PusherApi, c: &Checked) -> Result<(), Refusal> {
    for name in &c.channels {
        let herald = app.herald_channel(name);
        api.node.metrics.publications.inc();
        let r = match api.node.broker.publish(&herald, c.payload.clone()) {
            Completion::Ready(r) => r,
            Completion::Pending(f) => f.await,
        };
        if let Err(e) = r {
            return Err(refusal(StatusCode::SERVICE_UNAVAILABLE, e.to_string()));
        }
    }
    Ok(())
}

/// The `info` attributes of one channel that were asked for, counted
/// cluster-wide (the node's presence).
async fn attributes(
    app: &App,
    api: &PusherApi,
    name: &str,
    info: &[String],
) -> Result<Map<String, Value>, Refusal> {
    let mut m = Map::new();
    if info.is_empty() {
        return Ok(m);
    }
    let stats = api.node.presence.stats(&app.herald_channel(name));
    let (connections, users) = match stats {
        Completion::Ready(r) => r,
        Completion::Pending(f) => f.await,
    }
    .map_err(|e| refusal(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    for attr in info {
        match attr.as_str() {
            "subscription_count" => {
                m.insert(attr.clone(), j!(connections));
            }
            "user_count" if ChannelType::of(name).kind == Kind::Presence => {
                m.insert(attr.clone(), j!(users));
            }
            _ => {}
        }
    }
    Ok(m)
}

fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, Refusal> {
    serde_json::from_slice(body)
        .map_err(|e| refusal(StatusCode::BAD_REQUEST, format!("invalid JSON body: {e}")))
}

/// Closes every connection signed in as user `id` with 4009: this node's at
/// once, and in a cluster every node's, through the cluster's control topic
/// (503 when Redis cannot take the request; this node's are closed anyway).
async fn terminate(app: &App, api: &PusherApi, id: &str) -> Response<Body> {
    if !channel::valid_name(id) {
        return text(StatusCode::BAD_REQUEST, "invalid user id");
    }
    let herald = app.herald_channel(&format!("{}{id}", channel::USER_CHANNEL));
    let code = herald_pusher::Code::Unauthorized.code();
    api.node.hub.close_subscribers(&herald, code);
    if let Some(cluster) = &api.cluster {
        if let Err(e) = cluster.close_everywhere(&herald, code).await {
            return text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("closed on this node only: {e}"),
            );
        }
    }
    ok(j!({}))
}

async fn events(app: &App, api: &PusherApi, body: &[u8]) -> Response<Body> {
    let result = async {
        let e: Event<'_> = parse(body)?;
        let c = check(&e, api.apps.config.max_event_size)?;
        publish(app, api, &c).await?;
        if c.info.is_empty() {
            return Ok(j!({}));
        }
        let mut channels = Map::new();
        for n in &c.channels {
            let attrs = attributes(app, api, n, &c.info).await?;
            channels.insert(n.clone(), Value::Object(attrs));
        }
        Ok(j!({ "channels": channels }))
    };
    result.await.map_or_else(Refusal::response, ok)
}

#[derive(Deserialize)]
struct Batch<'a> {
    #[serde(borrow)]
    batch: Vec<Event<'a>>,
}

async fn batch_events(app: &App, api: &PusherApi, body: &[u8]) -> Response<Body> {
    let result = async {
        let b: Batch<'_> = parse(body)?;
        if b.batch.len() > MAX_BATCH {
            return Err(refusal(
                StatusCode::BAD_REQUEST,
                format!("at most {MAX_BATCH} events per batch"),
            ));
        }
        // Every event is checked before any is published: a bad batch
        // publishes nothing.
        let checked: Vec<Checked> = b
            .batch
            .iter()
            .map(|e| check(e, api.apps.config.max_event_size))
            .collect::<Result<_, _>>()?;
        for c in &checked {
            publish(app, api, c).await?;
        }
        if checked.iter().all(|c| c.info.is_empty()) {
            return Ok(j!({}));
        }
        let mut batch = Vec::with_capacity(checked.len());
        for c in &checked {
            let name = c.channels.first().map_or("", String::as_str);
            batch.push(Value::Object(attributes(app, api, name, &c.info).await?));
        }
        Ok(j!({ "batch": batch }))
    };
    result.await.map_or_else(Refusal::response, ok)
}

async fn channels(app: &App, api: &PusherApi, q: &SignedQuery) -> Response<Body> {
    let prefix = q.get("filter_by_prefix").unwrap_or("");
    let info: Vec<String> = q
        .get("info")
        .map(|i| i.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    if info.iter().any(|i| i == "user_count") && !prefix.starts_with("presence-") {
        return text(
            StatusCode::BAD_REQUEST,
            "info=user_count needs filter_by_prefix=presence-",
        );
    }
    let occupied = match presence(api.node.presence.occupied(&app.config.namespace)).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let mut out = Map::new();
    for herald in occupied {
        let Some(name) = channel::from_herald(&app.config.namespace, &herald) else {
            continue;
        };
        if name.starts_with(prefix) {
            match attributes(app, api, &name, &info).await {
                Ok(attrs) => out.insert(name.into_owned(), Value::Object(attrs)),
                Err(r) => return r.response(),
            };
        }
    }
    ok(j!({ "channels": out }))
}

/// Awaits a presence answer (cluster-wide on Redis).
async fn presence<T>(
    c: Completion<Result<T, herald_core::BrokerError>>,
) -> Result<T, Response<Body>> {
    match c {
        Completion::Ready(r) => r,
        Completion::Pending(f) => f.await,
    }
    .map_err(|e| text(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))
}

async fn channel_info(app: &App, api: &PusherApi, name: &str, q: &SignedQuery) -> Response<Body> {
    if !channel::valid_name(name) {
        return text(StatusCode::BAD_REQUEST, "invalid channel name");
    }
    let info: Vec<String> = q
        .get("info")
        .map(|i| i.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let herald = app.herald_channel(name);
    let (connections, users) = match presence(api.node.presence.stats(&herald)).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let mut m = Map::new();
    m.insert("occupied".into(), j!(connections > 0));
    if info.iter().any(|i| i == "subscription_count") {
        m.insert("subscription_count".into(), j!(connections));
    }
    if info.iter().any(|i| i == "user_count") && ChannelType::of(name).kind == Kind::Presence {
        m.insert("user_count".into(), j!(users));
    }
    ok(Value::Object(m))
}

async fn users(app: &App, api: &PusherApi, name: &str) -> Response<Body> {
    if ChannelType::of(name).kind != Kind::Presence || !channel::valid_name(name) {
        return text(
            StatusCode::BAD_REQUEST,
            "users are listed for presence channels only",
        );
    }
    let members = match presence(api.node.presence.list(&app.herald_channel(name))).await {
        Ok(m) => m,
        Err(r) => return r,
    };
    let mut ids: Vec<String> = members
        .into_iter()
        .filter(|m| !m.user.is_empty())
        .map(|m| m.user)
        .collect();
    ids.sort();
    ids.dedup();
    let users: Vec<Value> = ids.into_iter().map(|id| j!({ "id": id })).collect();
    ok(j!({ "users": users }))
}
