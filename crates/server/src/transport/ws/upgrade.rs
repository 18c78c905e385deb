//! A WebSocket upgrade on Herald's lean HTTP/1.1 path: checking the request
//! (origin, RFC 6455 handshake, subprotocol), the 101 answer, and the driver
//! each endpoint runs after it (`/ws`, `/shootout`, `/app/{key}`, `/echo`).
//!
//! The decision is taken without awaiting ([`accept`] borrows the parsed
//! head), so the parse state never lives in the connection's future; only
//! the small [`Accepted`] does.

use super::echo::EchoConn;
use super::shootout::{ShootoutConn, ShootoutGroup};
use super::WsWire;
use crate::conn::Connection;
use crate::http::h1::Refusal;
use crate::limits::IpSlot;
use crate::pusher::Apps;
use crate::routes::Route;
use crate::transport::{Drivers, Stream};
use herald_core::metrics::Transport;
use herald_core::Session;
use herald_proto::Encoding;
use std::sync::Arc;

/// What the WebSocket endpoints take: the socket drivers' state, the
/// shootout's broadcast group and the Pusher apps, and which of the optional
/// endpoints are served.
#[derive(Debug)]
pub struct Upgrades {
    /// Starting connection drivers.
    pub drivers: Arc<Drivers>,
    /// The `/shootout` broadcast group.
    pub shootout: Arc<ShootoutGroup>,
    /// Pusher apps (`/app/{key}`).
    pub pusher: Arc<Apps>,
    /// The Bayeux endpoint (`/cometd`): its WebSocket connections.
    pub bayeux: Arc<crate::bayeux::Bayeux>,
    /// `/shootout` is served (only while anonymous clients are allowed).
    pub shootout_enabled: bool,
    /// `/echo` is served (`--test-echo-route`).
    pub echo_enabled: bool,
    /// permessage-deflate settings.
    pub deflate: super::Deflate,
}

/// Which endpoint an upgrade is for.
#[derive(Debug)]
pub enum Endpoint {
    /// `/ws`.
    Herald,
    /// `/shootout`.
    Shootout,
    /// The test-only echo (`--test-echo-route`, see [`super::echo`]).
    Echo,
    /// `/app/{key}`: Pusher Channels.
    Pusher(Box<PusherTarget>),
    /// `/cometd`: Bayeux.
    Bayeux,
}

/// What a Pusher upgrade asked for.
#[derive(Debug)]
pub struct PusherTarget {
    /// The app key from the path.
    key: String,
    /// The `protocol` query parameter, if given.
    protocol: Option<String>,
}

/// An upgrade that was accepted: answer `response` (101), then run the
/// endpoint's driver with `encoding`.
#[derive(Debug)]
pub struct Accepted {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// Herald's encoding, by subprotocol (JSON unless `herald.binary`).
    pub encoding: Encoding,
    /// The 101 answer.
    pub response: Vec<u8>,
    /// permessage-deflate was accepted, on these terms.
    pub deflate: Option<herald_ws::deflate::Agreement>,
}

/// Checks the upgrade request `req` for `route` (a WebSocket route).
/// `None`: not ours to take (an endpoint that is off): hyper answers it.
pub fn accept(
    req: &httparse::Request<'_, '_>,
    route: Route,
    allowed_origins: &[String],
    up: &Upgrades,
) -> Option<Result<Accepted, Refusal>> {
    let endpoint = match route {
        Route::Ws => Endpoint::Herald,
        // The benchmark protocol has no auth: a server that refuses
        // anonymous clients does not offer it.
        Route::Shootout if !up.shootout_enabled => {
            return Some(Err(Refusal::json(
                "403 Forbidden",
                herald_proto::ErrorCode::PermissionDenied.code(),
                "the shootout endpoint is only served when anonymous clients are allowed",
            )));
        }
        Route::Shootout => Endpoint::Shootout,
        // Test only (`--test-echo-route`): absent otherwise, so hyper's 404.
        Route::Echo if up.echo_enabled => Endpoint::Echo,
        Route::PusherWs => {
            let (path, query) = req
                .path
                .unwrap_or("")
                .split_once('?')
                .unwrap_or((req.path.unwrap_or(""), ""));
            Endpoint::Pusher(Box::new(PusherTarget {
                key: path["/app/".len()..].to_string(),
                protocol: query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("protocol="))
                    .map(str::to_string),
            }))
        }
        Route::Bayeux => Endpoint::Bayeux,
        _ => return None,
    };
    let origin = req
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("origin"))
        .map(|h| h.value);
    if !crate::limits::origin_allowed(allowed_origins, origin) {
        return Some(Err(Refusal::json(
            "403 Forbidden",
            herald_proto::ErrorCode::PermissionDenied.code(),
            "origin not allowed",
        )));
    }
    let upgrade = match herald_ws::validate_upgrade(req.method.unwrap_or(""), req.headers) {
        Ok(u) => u,
        Err(e) => {
            return Some(Err(Refusal {
                status: match e.status() {
                    405 => "405 Method Not Allowed",
                    426 => "426 Upgrade Required",
                    _ => "400 Bad Request",
                },
                extra: if e.status() == 426 {
                    "sec-websocket-version: 13\r\nupgrade: websocket\r\n"
                } else {
                    ""
                },
                body: format!("{e}\n"),
            }))
        }
    };
    let protocol = match endpoint {
        Endpoint::Herald => herald_ws::select_protocol(
            upgrade.protocols,
            &[Encoding::Json.subprotocol(), Encoding::Binary.subprotocol()],
        ),
        Endpoint::Shootout | Endpoint::Echo | Endpoint::Pusher(_) | Endpoint::Bayeux => None,
    };
    let encoding = if protocol == Some(Encoding::Binary.subprotocol()) {
        Encoding::Binary
    } else {
        Encoding::Json
    };
    let deflate_here = match endpoint {
        Endpoint::Shootout => up.deflate.shootout,
        // Bayeux frames are batches made per socket, so its writer
        // compresses each one (above the threshold) for that socket alone.
        Endpoint::Herald | Endpoint::Echo | Endpoint::Pusher(_) | Endpoint::Bayeux => true,
    };
    let deflate = upgrade
        .deflate
        .filter(|_| up.deflate.enabled && deflate_here);
    let mut response = Vec::with_capacity(240);
    herald_ws::write_accept_extensions(
        &mut response,
        &herald_ws::accept_key(upgrade.key),
        protocol,
        deflate
            .as_ref()
            .map(herald_ws::deflate::Agreement::response),
    );
    Some(Ok(Accepted {
        endpoint,
        encoding,
        response,
        deflate,
    }))
}

/// Runs the endpoint's driver on `stream`, whose 101 answer was written;
/// `leftover` is what the client sent after its request head; `deflate` is
/// [`Accepted::deflate`].
pub fn start<S: Stream>(
    stream: S,
    accepted: (Endpoint, Encoding, Option<herald_ws::deflate::Agreement>),
    leftover: &[u8],
    slot: Option<Box<IpSlot>>,
    up: &Upgrades,
) {
    let (endpoint, encoding, deflate) = accepted;
    let drivers = &up.drivers;
    let node = &drivers.node;
    let wire = WsWire::with_deflate(
        drivers.max_message_size,
        deflate.map(|a| (a, up.deflate.threshold)),
    );
    match endpoint {
        Endpoint::Herald => {
            // With a full window the hub compresses each push once for all
            // such clients; a limited window (rare) leaves it to the writer.
            let shared = deflate.is_some_and(|a| a.server_window_bits() == 15);
            let client = node.new_client_deflating(encoding, shared);
            drivers.expect_connect(&client);
            let session = Session::new(node.clone(), client).with_transport(Transport::WebSocket);
            let conn = Connection::new(stream.into_io(), session, wire, leftover).holding(slot);
            drivers.spawn::<S, _, _>(conn);
        }
        Endpoint::Shootout => {
            let client = node.new_client(Encoding::Json);
            let handler = ShootoutConn::new(up.shootout.clone(), client, node.clone());
            let conn = Connection::new(stream.into_io(), handler, wire, leftover).holding(slot);
            drivers.spawn::<S, _, _>(conn);
        }
        Endpoint::Echo => {
            let client = node.new_client(Encoding::Json);
            let handler = EchoConn::new(client, node.clone());
            let conn = Connection::new(stream.into_io(), handler, wire, leftover).holding(slot);
            drivers.spawn::<S, _, _>(conn);
        }
        Endpoint::Pusher(target) => {
            let handler = crate::pusher::conn::open(
                &up.pusher,
                node,
                &target.key,
                target.protocol.as_deref(),
            );
            let conn = Connection::new(stream.into_io(), handler, wire, leftover).holding(slot);
            drivers.spawn::<S, _, _>(conn);
        }
        Endpoint::Bayeux => {
            let handler = crate::bayeux::ws::open(&up.bayeux);
            let conn = Connection::new(stream.into_io(), handler, wire, leftover).holding(slot);
            drivers.spawn::<S, _, _>(conn);
        }
    }
}
