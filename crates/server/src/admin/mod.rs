//! The admin dashboard at `/admin` (issue 28): a login, then pages showing
//! the cluster's nodes live, channels, connections, game tables and Pusher
//! apps, and a few actions (publish, disconnect a connection, close a
//! table). Off unless `[admin]` configures a credential (see
//! [`config`]): then every `/admin` path answers 404.
//!
//! Security, all here:
//! - Login (`POST /admin/login`, JSON `{"user", "password"}`) checks the
//!   password against the PBKDF2 hash ([`password`]) on a blocking thread,
//!   or against the API key when `api_key = true`; attempts are limited per
//!   minute per client address, with a global ceiling ([`session`]). It sets the `herald_admin_{port}` cookie: `HttpOnly`,
//!   `SameSite=Strict`, `Path=/admin`, and `Secure` when the listener
//!   serves TLS.
//! - Every action is a POST carrying JSON (`Content-Type:
//!   application/json`, which a cross-site form cannot send), the
//!   session's CSRF token in `X-CSRF-Token`, and no foreign `Origin` or
//!   `Sec-Fetch-Site` (login included).
//! - Every answer is `Cache-Control: no-store`, framed by nobody
//!   (`frame-ancestors 'none'`, `X-Frame-Options: DENY`), scripts from the
//!   page's own origin only.
//! - Nothing secret is ever sent ([`views`]).
//! - Every action (logins refused included) is logged (target
//!   `herald::admin`, with the user and what was done) and counted in
//!   `/metrics` (`herald_admin_actions_total{action}`, [`actions`]).
//!
//! The live pages read `GET /admin/api/live`, an SSE stream of the node
//! snapshot every second, plus the open channel, table or connections view
//! named in its query ([`live`], decision 0019).

pub mod actions;
pub mod config;
pub mod live;
pub mod password;
pub mod session;
pub mod stats;
pub mod views;

use crate::respond::{full, json, read_body, Body, BodyError};
use crate::tables::TablesApi;
use actions::{Action, Actions};
use bytes::Bytes;
use config::AdminConfig;
use herald_core::{channel, Completion};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde::Deserialize;
use serde_json::{json as j, Value};
use session::{Session, Sessions};
use stats::StatsSource;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The session cookie's name before the port: `herald_admin_{port}`.
/// Browsers keep cookies per host, not per port: two nodes on one host
/// (a local cluster) would otherwise overwrite each other's session.
pub const COOKIE: &str = "herald_admin";

const ADMIN_HTML: &[u8] = include_bytes!("../../../../web/src/admin.html");
const ADMIN_CSS: &[u8] = include_bytes!("../../../../web/src/admin.css");
const ADMIN_JS: &[u8] = include_bytes!("../../../../web/dist/admin.js");

/// What the dashboard takes: its configuration, and the handles it reads
/// and acts through (the node, the cluster's node list, the tables, the
/// Pusher apps).
#[derive(Debug)]
pub struct Admin {
    /// `[admin]`; `None`: the dashboard is off (404).
    pub config: Option<AdminConfig>,
    /// This node's stats (and the node itself).
    pub source: Arc<StatsSource>,
    /// The Redis broker in cluster mode (the node list).
    pub cluster: Option<Arc<herald_redis::RedisBroker>>,
    /// Game tables: the lobby, a table's state, closing one.
    pub tables: TablesApi,
    /// The Pusher apps.
    pub pusher: Arc<crate::pusher::Apps>,
    /// Whether the listener serves TLS (the cookie is then `Secure`).
    pub tls: bool,
    /// Largest publication accepted (`max_message_size`).
    pub max_message_size: usize,
    /// How long a request body may take.
    pub request_body_timeout: Duration,
    /// Cancelled when shutdown starts (live streams end).
    pub stopping: CancellationToken,
    /// Logged-in sessions and the login limit.
    pub sessions: Arc<Sessions>,
    /// Actions by kind, for `/metrics`.
    pub actions: Arc<Actions>,
    /// The session cookie's name (`herald_admin_{port}`).
    pub cookie: String,
}

impl Admin {
    /// The dashboard for `config` (off when `None`).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: Option<AdminConfig>,
        source: Arc<StatsSource>,
        cluster: Option<Arc<herald_redis::RedisBroker>>,
        tables: TablesApi,
        pusher: Arc<crate::pusher::Apps>,
        tls: bool,
        max_message_size: usize,
        request_body_timeout: Duration,
        stopping: CancellationToken,
        actions: Arc<Actions>,
    ) -> Admin {
        let sessions = Arc::new(match &config {
            Some(c) => Sessions::new(c.session, c.login_attempts_per_minute),
            None => Sessions::new(Duration::ZERO, 1),
        });
        let cookie = format!("{COOKIE}_{}", source.listen.port());
        Admin {
            cookie,
            config,
            source,
            cluster,
            tables,
            pusher,
            tls,
            max_message_size,
            request_body_timeout,
            stopping,
            sessions,
            actions,
        }
    }

    /// Logs and counts `action` by `user`.
    fn did(&self, action: Action, user: &str, detail: &str) {
        self.actions.count(action);
        tracing::info!(
            target: "herald::admin",
            user,
            action = action.label(),
            detail,
            "admin action"
        );
    }
}

/// Adds the headers every dashboard answer carries.
fn harden(mut r: Response<Body>) -> Response<Body> {
    let h = r.headers_mut();
    for (name, value) in [
        ("cache-control", "no-store"),
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
        (
            "content-security-policy",
            "default-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
        ),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    r
}

/// A JSON answer.
fn ok(v: Value) -> Response<Body> {
    json(StatusCode::OK, v.to_string().into_bytes())
}

/// A JSON error `{"error": message}`.
fn fail(status: StatusCode, message: &str) -> Response<Body> {
    json(status, j!({ "error": message }).to_string().into_bytes())
}

fn not_found() -> Response<Body> {
    crate::respond::text(StatusCode::NOT_FOUND, "not found\n")
}

/// An embedded file.
fn asset(body: &'static [u8], kind: &'static str) -> Response<Body> {
    let mut r = Response::new(full(body));
    r.headers_mut()
        .insert(http::header::CONTENT_TYPE, HeaderValue::from_static(kind));
    r
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The decoded value of `key` in a query string (`+` is a space).
pub fn query(q: Option<&str>, key: &str) -> Option<String> {
    q?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == key).then(|| percent_decode(v))
    })
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(x) => {
                        out.push(x);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The host a request was sent to: its `Host` header (HTTP/1.1), else the
/// URI's authority (HTTP/2's `:authority`).
fn host<B>(req: &Request<B>) -> String {
    req.headers()
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.as_str().to_string()))
        .unwrap_or_default()
}

/// Whether a state-changing request comes from the dashboard's own
/// origin: no `Sec-Fetch-Site` other than `same-origin`, and no `Origin`
/// other than this host's (`host`, see [`host`]), and a JSON body.
fn same_origin(headers: &HeaderMap, host: &str, tls: bool) -> bool {
    let site = headers.get("sec-fetch-site").map(HeaderValue::as_bytes);
    if site.is_some_and(|s| s != b"same-origin") {
        return false;
    }
    if let Some(origin) = headers.get(http::header::ORIGIN) {
        let scheme = if tls { "https" } else { "http" };
        if origin.as_bytes() != format!("{scheme}://{host}").as_bytes() {
            return false;
        }
    }
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        })
}

/// Routes one `/admin` request.
pub async fn handle(req: Request<Incoming>, admin: &Admin) -> Response<Body> {
    let Some(config) = &admin.config else {
        return not_found();
    };
    harden(route(req, admin, config).await)
}

async fn route(req: Request<Incoming>, admin: &Admin, config: &AdminConfig) -> Response<Body> {
    let path = req.uri().path().to_string();
    let get = req.method() == Method::GET;
    let post = req.method() == Method::POST;
    match path.as_str() {
        "/admin" | "/admin/" | "/admin/index.html" if get => {
            asset(ADMIN_HTML, "text/html; charset=utf-8")
        }
        "/admin/admin.js" if get => asset(ADMIN_JS, "text/javascript; charset=utf-8"),
        "/admin/admin.css" if get => asset(ADMIN_CSS, "text/css; charset=utf-8"),
        "/admin/login" if post => login(req, admin, config).await,
        p if p.starts_with("/admin/api/") || p == "/admin/logout" => {
            let token = cookie(req.headers(), &admin.cookie).map(str::to_string);
            let session = token.as_deref().and_then(|t| admin.sessions.get(t));
            let (Some(token), Some(session)) = (token, session) else {
                return fail(StatusCode::UNAUTHORIZED, "log in first");
            };
            if post {
                let csrf = req
                    .headers()
                    .get("x-csrf-token")
                    .map_or(&b""[..], HeaderValue::as_bytes);
                if !session::same(csrf, session.csrf.as_bytes())
                    || !same_origin(req.headers(), &host(&req), admin.tls)
                {
                    admin.did(Action::CsrfRefused, &session.user, p);
                    return fail(
                        StatusCode::FORBIDDEN,
                        "missing or wrong X-CSRF-Token, or a foreign origin",
                    );
                }
                return act(req, admin, &session, &token).await;
            }
            if !get {
                return fail(StatusCode::METHOD_NOT_ALLOWED, "use GET or POST");
            }
            read(&req, admin, &session, token).await
        }
        _ => not_found(),
    }
}

#[derive(Deserialize)]
struct Login {
    user: String,
    password: String,
}

/// `POST /admin/login`.
async fn login(req: Request<Incoming>, admin: &Admin, config: &AdminConfig) -> Response<Body> {
    if !same_origin(req.headers(), &host(&req), admin.tls) {
        admin.did(Action::CsrfRefused, "", "/admin/login");
        return fail(
            StatusCode::FORBIDDEN,
            "log in from the dashboard (JSON, same origin)",
        );
    }
    let peer = req
        .extensions()
        .get::<crate::http::service::Peer>()
        .map(|p| p.0);
    if let Err(why) = admin.sessions.attempt(peer) {
        let detail = match why {
            session::Limited::Address => "too many login attempts from one address",
            session::Limited::Global => "too many login attempts from all addresses",
        };
        let shown = peer.map_or_else(|| "?".to_string(), |p| p.to_string());
        admin.did(Action::LoginLimited, "", &format!("{detail} ({shown})"));
        let mut r = fail(
            StatusCode::TOO_MANY_REQUESTS,
            "too many login attempts: wait a minute",
        );
        r.headers_mut()
            .insert(http::header::RETRY_AFTER, HeaderValue::from_static("60"));
        return r;
    }
    let body = match read_body(req.into_body(), 4096, admin.request_body_timeout).await {
        Ok(b) => b,
        Err(e) => return e.response(),
    };
    let Ok(login) = serde_json::from_slice::<Login>(&body) else {
        return fail(
            StatusCode::BAD_REQUEST,
            "expected {\"user\": ..., \"password\": ...}",
        );
    };
    let name_ok = session::same(login.user.as_bytes(), config.user.as_bytes());
    let key_ok = config
        .api_key
        .as_ref()
        .is_some_and(|k| session::same(login.password.as_bytes(), k.0.as_bytes()));
    let hash_ok = match config.password_hash.clone() {
        Some(h) if !key_ok => {
            let password = login.password.clone();
            tokio::task::spawn_blocking(move || h.verify(&password))
                .await
                .unwrap_or(false)
        }
        _ => false,
    };
    let shown: String = login.user.chars().take(64).collect();
    if !(name_ok && (key_ok || hash_ok)) {
        admin.did(Action::LoginRefused, &shown, "wrong user or password");
        return fail(StatusCode::UNAUTHORIZED, "wrong user or password");
    }
    let Some((token, session)) = admin.sessions.start(&config.user) else {
        return fail(StatusCode::INTERNAL_SERVER_ERROR, "no random token");
    };
    admin.did(Action::Login, &session.user, "logged in");
    let mut r = ok(j!({"user": session.user, "csrf": session.csrf}));
    let secure = if admin.tls { "; Secure" } else { "" };
    let max_age = config.session.as_secs();
    let set = format!(
        "{}={token}; Path=/admin; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}",
        admin.cookie
    );
    if let Ok(v) = HeaderValue::from_str(&set) {
        r.headers_mut().insert(http::header::SET_COOKIE, v);
    }
    r
}

/// The GET endpoints under `/admin/api/`.
async fn read(
    req: &Request<Incoming>,
    admin: &Admin,
    session: &Session,
    token: String,
) -> Response<Body> {
    let q = req.uri().query();
    let node = &admin.source.node;
    match req.uri().path() {
        "/admin/api/session" => ok(j!({"user": session.user, "csrf": session.csrf})),
        "/admin/api/nodes" => ok(views::nodes(&admin.source, admin.cluster.as_deref())),
        "/admin/api/live" => {
            let view = match live_view(q) {
                Ok(v) => v,
                Err(why) => return fail(StatusCode::BAD_REQUEST, why),
            };
            let live = live::Live::new(
                admin.source.clone(),
                admin.cluster.clone(),
                admin.sessions.clone(),
                token,
                admin.stopping.clone(),
                admin.tables.clone(),
                view,
            );
            let mut r = Response::new(http_body_util::BodyExt::boxed(live));
            r.headers_mut().insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            r
        }
        "/admin/api/channels" => ok(views::channels(node, &query(q, "q").unwrap_or_default())),
        "/admin/api/channel" => match query(q, "name") {
            Some(name) if channel::validate(&name).is_ok() => ok(views::channel(node, &name).await),
            _ => fail(StatusCode::BAD_REQUEST, "give a valid ?name="),
        },
        "/admin/api/connections" => {
            let user = query(q, "user").filter(|u| !u.is_empty());
            let client = match query(q, "client").filter(|c| !c.is_empty()) {
                Some(c) => match u64::from_str_radix(c.trim(), 16) {
                    Ok(id) => Some(id),
                    Err(_) => return fail(StatusCode::BAD_REQUEST, "client ids are hex"),
                },
                None => None,
            };
            if user.is_none() && client.is_none() {
                return fail(StatusCode::BAD_REQUEST, "give ?user= or ?client=");
            }
            ok(views::connections(node, user.as_deref(), client))
        }
        "/admin/api/tables" => ok(j!({
            "node": admin.tables.games.node_id(),
            "tables": crate::tables::list(&admin.tables),
        })),
        "/admin/api/table" => match query(q, "id").and_then(|i| i.parse::<u64>().ok()) {
            Some(id) => crate::tables::show(id, &admin.tables).await,
            None => fail(StatusCode::BAD_REQUEST, "give ?id="),
        },
        "/admin/api/pusher" => ok(views::pusher(node, &admin.pusher)),
        _ => fail(StatusCode::NOT_FOUND, "no such endpoint"),
    }
}

/// The detail view a live stream carries, from its query: `channel=`,
/// `table=`, or `user=` / `client=` (hex); none without any.
/// A bad one: why (a 400).
fn live_view(q: Option<&str>) -> Result<Option<live::View>, &'static str> {
    if let Some(name) = query(q, "channel") {
        if channel::validate(&name).is_err() {
            return Err("invalid channel name");
        }
        return Ok(Some(live::View::Channel(name)));
    }
    if let Some(id) = query(q, "table") {
        return match id.parse::<u64>() {
            Ok(id) => Ok(Some(live::View::Table(id))),
            Err(_) => Err("table ids are numbers"),
        };
    }
    let user = query(q, "user").filter(|u| !u.is_empty());
    let client = match query(q, "client").filter(|c| !c.is_empty()) {
        Some(c) => match u64::from_str_radix(c.trim(), 16) {
            Ok(id) => Some(id),
            Err(_) => return Err("client ids are hex"),
        },
        None => None,
    };
    if user.is_none() && client.is_none() {
        return Ok(None);
    }
    Ok(Some(live::View::Connections { user, client }))
}

#[derive(Deserialize)]
struct Publish {
    channel: String,
    data: Box<serde_json::value::RawValue>,
}

#[derive(Deserialize)]
struct Disconnect {
    client: String,
    code: u16,
}

#[derive(Deserialize)]
struct CloseTable {
    id: u64,
}

/// Reads and parses an action's JSON body.
async fn body<T: serde::de::DeserializeOwned>(
    req: Request<Incoming>,
    admin: &Admin,
) -> Result<T, Response<Body>> {
    let limit = admin.max_message_size + 1024;
    let b: Bytes = read_body(req.into_body(), limit, admin.request_body_timeout)
        .await
        .map_err(|e: BodyError| e.response())?;
    serde_json::from_slice(&b).map_err(|e| fail(StatusCode::BAD_REQUEST, &e.to_string()))
}

/// Whether `code` may be sent to a client the dashboard disconnects: 1000
/// (normal) or an application code (3000-4999).
pub fn disconnect_code_ok(code: u16) -> bool {
    code == 1000 || (3000..=4999).contains(&code)
}

/// The POST endpoints: logout and the actions.
async fn act(
    req: Request<Incoming>,
    admin: &Admin,
    session: &Session,
    token: &str,
) -> Response<Body> {
    let node = &admin.source.node;
    let who = session.user.as_str();
    match req.uri().path().to_string().as_str() {
        "/admin/logout" => {
            admin.sessions.end(token);
            admin.did(Action::Logout, who, "logged out");
            let mut r = ok(j!({"ok": true}));
            let secure = if admin.tls { "; Secure" } else { "" };
            let clear = format!(
                "{}=; Path=/admin; HttpOnly; SameSite=Strict; Max-Age=0{secure}",
                admin.cookie
            );
            if let Ok(v) = HeaderValue::from_str(&clear) {
                r.headers_mut().insert(http::header::SET_COOKIE, v);
            }
            r
        }
        "/admin/api/publish" => {
            let p: Publish = match body(req, admin).await {
                Ok(p) => p,
                Err(r) => return r,
            };
            if channel::validate(&p.channel).is_err() {
                return fail(StatusCode::BAD_REQUEST, "invalid channel name");
            }
            let data = Bytes::from(p.data.get().as_bytes().to_vec());
            if data.len() > admin.max_message_size {
                return fail(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "data larger than the maximum message size",
                );
            }
            node.metrics.publications.inc();
            let result = match node.broker.publish_json(&p.channel, data) {
                Completion::Ready(r) => r,
                Completion::Pending(f) => f.await,
            };
            match result {
                Ok(pos) => {
                    admin.did(
                        Action::Publish,
                        who,
                        &format!("{} offset {}", p.channel, pos.offset),
                    );
                    ok(j!({"epoch": pos.epoch, "offset": pos.offset}))
                }
                Err(e) => fail(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
            }
        }
        "/admin/api/disconnect" => {
            let d: Disconnect = match body(req, admin).await {
                Ok(d) => d,
                Err(r) => return r,
            };
            if !disconnect_code_ok(d.code) {
                return fail(StatusCode::BAD_REQUEST, "code must be 1000 or 3000 to 4999");
            }
            let Ok(id) = u64::from_str_radix(d.client.trim(), 16) else {
                return fail(StatusCode::BAD_REQUEST, "client ids are hex");
            };
            match views::find_client(node, id) {
                Some(c) => {
                    c.outbox.close(d.code, false);
                    admin.did(
                        Action::Disconnect,
                        who,
                        &format!("client {} (user {:?}) with {}", d.client, c.user(), d.code),
                    );
                    ok(j!({"client": d.client, "code": d.code}))
                }
                None => fail(StatusCode::NOT_FOUND, "no such client on this node"),
            }
        }
        "/admin/api/close-table" => {
            let c: CloseTable = match body(req, admin).await {
                Ok(c) => c,
                Err(r) => return r,
            };
            let r = crate::tables::close(c.id, &admin.tables).await;
            if r.status().is_success() {
                admin.did(Action::CloseTable, who, &format!("table {}", c.id));
            }
            r
        }
        _ => fail(StatusCode::NOT_FOUND, "no such action"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_decode() {
        assert_eq!(query(Some("q=a%2Eb+c&x=1"), "q").as_deref(), Some("a.b c"));
        assert_eq!(query(Some("x=1"), "q"), None);
        assert_eq!(query(None, "q"), None);
        assert_eq!(query(Some("q"), "q").as_deref(), Some(""));
        assert_eq!(query(Some("q=%"), "q").as_deref(), Some("%"));
        assert_eq!(query(Some("q=%4"), "q").as_deref(), Some("%4"));
        assert_eq!(query(Some("q=%zz"), "q").as_deref(), Some("%zz"));
        assert_eq!(query(Some("q=%ff"), "q").as_deref(), Some("\u{fffd}"));
    }

    #[test]
    fn cookies_are_found_among_others() {
        let mut h = HeaderMap::new();
        h.append(
            http::header::COOKIE,
            HeaderValue::from_static("a=1; herald_admin=tok"),
        );
        h.append(http::header::COOKIE, HeaderValue::from_static("b=2"));
        assert_eq!(cookie(&h, COOKIE), Some("tok"));
        assert_eq!(cookie(&h, "b"), Some("2"));
        assert_eq!(cookie(&h, "c"), None);
    }

    #[test]
    fn origins_and_content_types() {
        const HOST: &str = "127.0.0.1:8080";
        let mut h = HeaderMap::new();
        assert!(!same_origin(&h, HOST, false), "no JSON content type");
        h.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        assert!(same_origin(&h, HOST, false));
        h.insert(
            http::header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8080"),
        );
        assert!(same_origin(&h, HOST, false));
        assert!(!same_origin(&h, HOST, true), "https expected under TLS");
        h.insert(
            http::header::ORIGIN,
            HeaderValue::from_static("http://evil.example"),
        );
        assert!(!same_origin(&h, HOST, false));
        h.remove(http::header::ORIGIN);
        h.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(!same_origin(&h, HOST, false));
        h.insert("sec-fetch-site", HeaderValue::from_static("same-origin"));
        assert!(same_origin(&h, HOST, false));
        let h2 = Request::builder()
            .uri("https://example.org:8443/admin/login")
            .body(())
            .unwrap();
        assert_eq!(host(&h2), "example.org:8443", "HTTP/2: the authority");
        let h1 = Request::builder()
            .uri("/admin/login")
            .header("host", "a.example")
            .body(())
            .unwrap();
        assert_eq!(host(&h1), "a.example");
    }

    #[test]
    fn disconnect_codes() {
        assert!(disconnect_code_ok(1000) && disconnect_code_ok(3000) && disconnect_code_ok(4999));
        assert!(!disconnect_code_ok(1006) && !disconnect_code_ok(0) && !disconnect_code_ok(5000));
    }
}
