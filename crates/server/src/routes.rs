//! The route table: which endpoint a request's path names, consulted by both
//! HTTP paths — Herald's lean HTTP/1.1 path ([`crate::http`], which takes
//! WebSocket upgrades, event streams and long-polls itself) and hyper's
//! ([`crate::http::service`], everything else, and all of HTTP/2).
//!
//! One table, so that a path cannot mean one thing on one path and another
//! on the other. What each path does with a route (a method it does not
//! take answers 404 or 405, an upgrade on hyper's path answers 426) is the
//! path's business; which route a path is, is decided here only.

/// An endpoint of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `/ws`: Herald's protocol over WebSocket.
    Ws,
    /// `/shootout`: the websocket-shootout benchmark protocol.
    Shootout,
    /// `/echo`: a WebSocket echo for conformance tests (`--test-echo-route`).
    Echo,
    /// `/app/{key}`: Pusher Channels over WebSocket.
    PusherWs,
    /// `/sse`: Server-Sent Events.
    Sse,
    /// `/poll`, `/poll/{id}`: long-polling.
    Poll,
    /// `/healthz`.
    Health,
    /// `/readyz`.
    Ready,
    /// `/metrics`.
    Metrics,
    /// `/api/publish`.
    Publish,
    /// `/api/nodes`.
    Nodes,
    /// `/api/tables`, `/api/tables/{id}`.
    Tables,
    /// `/api/games`, `/api/games/{name}/reload`.
    Games,
    /// `/apps/{id}/...`: Pusher's HTTP API.
    PusherApi,
    /// `/cometd` (`[bayeux] path`): Bayeux, long-polling (POST) and
    /// WebSocket.
    Bayeux,
    /// `/admin`, `/admin/...`: the admin dashboard (404 unless `[admin]`
    /// configures a credential).
    Admin,
    /// Anything else: a page of the demo (`/`, `/demo.js`, ...) or 404.
    Page,
}

impl Route {
    /// The route of a request path (without its query).
    pub fn of(path: &str) -> Route {
        match path {
            "/ws" => Route::Ws,
            "/shootout" => Route::Shootout,
            "/echo" => Route::Echo,
            "/sse" => Route::Sse,
            "/poll" => Route::Poll,
            "/healthz" => Route::Health,
            "/readyz" => Route::Ready,
            "/metrics" => Route::Metrics,
            "/api/publish" => Route::Publish,
            "/api/nodes" => Route::Nodes,
            "/api/tables" => Route::Tables,
            "/api/games" => Route::Games,
            "/admin" => Route::Admin,
            p if p.starts_with("/admin/") => Route::Admin,
            p if p.starts_with("/poll/") => Route::Poll,
            p if p.starts_with("/api/tables/") => Route::Tables,
            p if p.starts_with("/api/games/") => Route::Games,
            p if p.starts_with("/app/") => Route::PusherWs,
            p if p.starts_with("/apps/") => Route::PusherApi,
            _ => Route::Page,
        }
    }

    /// The route of a request path when the Bayeux endpoint is served at
    /// `bayeux` (configurable, so not in [`Route::of`]'s fixed table; a
    /// path another route takes is refused by the configuration). Paths
    /// below it are Bayeux's too: CometD's long-polling appends the message
    /// type (`/cometd/handshake`, `/cometd/connect`).
    pub fn of_with(path: &str, bayeux: &str) -> Route {
        let below = path
            .strip_prefix(bayeux)
            .is_some_and(|rest| rest.starts_with('/'));
        if path == bayeux || below {
            Route::Bayeux
        } else {
            Route::of(path)
        }
    }

    /// Routes reached by a WebSocket upgrade.
    pub fn is_websocket(self) -> bool {
        matches!(
            self,
            Route::Ws | Route::Shootout | Route::Echo | Route::PusherWs | Route::Bayeux
        )
    }

    /// The browser transports other than WebSocket, which obey the Origin
    /// allowlist like WebSocket upgrades do.
    pub fn is_browser_stream(self) -> bool {
        matches!(self, Route::Sse | Route::Poll | Route::Bayeux)
    }
}

/// Whether a path is under `/api/`, where the API key is required (unknown
/// `/api/...` paths included: without the key they answer 401, not 404).
pub fn needs_api_key(path: &str) -> bool {
    path.starts_with("/api/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_has_its_paths() {
        let cases = [
            ("/ws", Route::Ws),
            ("/shootout", Route::Shootout),
            ("/echo", Route::Echo),
            ("/app/key", Route::PusherWs),
            ("/sse", Route::Sse),
            ("/poll", Route::Poll),
            ("/poll/0123", Route::Poll),
            ("/pollx", Route::Page),
            ("/healthz", Route::Health),
            ("/readyz", Route::Ready),
            ("/metrics", Route::Metrics),
            ("/api/publish", Route::Publish),
            ("/api/nodes", Route::Nodes),
            ("/api/tables", Route::Tables),
            ("/api/tables/7", Route::Tables),
            ("/api/games", Route::Games),
            ("/api/games/dice/reload", Route::Games),
            ("/apps/1/events", Route::PusherApi),
            ("/", Route::Page),
            ("/demo.js", Route::Page),
            ("/admin", Route::Admin),
            ("/admin/api/nodes", Route::Admin),
            ("/administrator", Route::Page),
        ];
        for (path, route) in cases {
            assert_eq!(Route::of(path), route, "{path}");
        }
        assert!(needs_api_key("/api/unknown"));
        assert!(!needs_api_key("/apps/1/events"));
        assert!(Route::of("/app/k").is_websocket() && !Route::of("/sse").is_websocket());
        assert_eq!(Route::of("/cometd"), Route::Page);
        assert_eq!(Route::of_with("/cometd", "/cometd"), Route::Bayeux);
        assert_eq!(Route::of_with("/ws", "/cometd"), Route::Ws);
        assert_eq!(Route::of_with("/cometd/connect", "/cometd"), Route::Bayeux);
        assert_eq!(Route::of_with("/cometdx", "/cometd"), Route::Page);
        assert!(Route::Bayeux.is_websocket() && Route::Bayeux.is_browser_stream());
    }
}
