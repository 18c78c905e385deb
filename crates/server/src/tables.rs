//! `/api/tables`: game tables over HTTP, behind the same API key as the rest
//! of `/api/*`.
//!
//! | request | answer |
//! |---|---|
//! | `GET /api/tables` | `{"tables":[entry, ...]}`: every table's lobby entry; in a cluster each table this node owns also has `"owner":{"node","token"}` (its lease and fencing token, decision 0009) |
//! | `POST /api/tables` | body `{"game":"holdem","seats":6,"timing"?:"express","path"?:"…","count"?:1, ...game params}`; 201 `{"tables":[id, ...]}`; 400 (code 103) for bad parameters; 409 (code 111) in a cluster |
//! | `GET /api/tables/{id}` | `{"table":entry,"seats":[{"seat":0,"user":"u1","away":false}],"state":…}`; 404 (code 115) |
//! | `DELETE /api/tables/{id}` | closes it (players get `unseat` 115); answers its last state like `GET` |
//!
//! An entry is `{"table","path","seats","players","watchers","attrs"}` as in
//! the protocol's lobby; `state` is the game's public snapshot, embedded as
//! JSON when it is JSON text (Hold'em's is), else as `{"b64":"…"}`.
//!
//! Why `POST` is refused in a cluster (`--broker redis://…`): a table made
//! here would live in this node's memory only (not durable, not leased,
//! unknown to the other nodes' routes and lobbies), and its id would come
//! from this node's counter, which can hand out the id of a configured
//! `[[tables]]` table that another node runs (the counter only skips ids
//! this node claimed), so two tables would answer to one id. Making them
//! cluster tables needs a registry in Redis that every node's keeper and
//! routes read, and a cluster-wide `DELETE` (decision 0009, "Not built");
//! until then a cluster's tables are its configured ones, and the refusal
//! says so rather than creating a table that breaks the cluster's.

use crate::api::{error, json, Body};
use crate::config::TableConfig;
use crate::server::Shared;
use base64::Engine as _;
use bytes::Bytes;
use herald_game::{EngineError, TableInfo};
use herald_proto::{ErrorCode, TableEntry};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};

/// Most tables one `POST` may create.
const MAX_COUNT: u32 = 10_000;

/// Handles `/api/tables` and `/api/tables/{id}`.
pub async fn handle(req: Request<Incoming>, shared: &Shared) -> Response<Body> {
    let rest = req.uri().path()["/api/tables".len()..].to_string();
    match (req.method().clone(), rest.as_str()) {
        (Method::GET, "" | "/") => {
            let leases = shared.games.leases();
            let node = shared.games.node_id();
            let tables: Vec<Value> = shared
                .games
                .tables()
                .iter()
                .map(|e| {
                    let mut v = entry_json(e);
                    if let (Some(node), Some(l)) = (node, leases.get(&e.table)) {
                        v["owner"] = json!({"node": node, "token": l.token});
                    }
                    v
                })
                .collect();
            ok(json!({ "tables": tables }))
        }
        (Method::POST, "" | "/") => create(req, shared).await,
        (method, id) if id.len() > 1 => {
            let Ok(id) = id[1..].parse::<u64>() else {
                return not_found();
            };
            let result = match method {
                Method::GET => shared.games.table(id).await,
                Method::DELETE => shared.games.close_table(id).await,
                _ => {
                    return error(
                        StatusCode::METHOD_NOT_ALLOWED,
                        ErrorCode::BadRequest,
                        "use GET or DELETE",
                    )
                }
            };
            match result {
                Ok(info) => ok(info_json(&info)),
                Err(_) => not_found(),
            }
        }
        _ => error(
            StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::BadRequest,
            "use GET or POST",
        ),
    }
}

fn ok(body: Value) -> Response<Body> {
    json(StatusCode::OK, body.to_string().into_bytes())
}

fn not_found() -> Response<Body> {
    error(
        StatusCode::NOT_FOUND,
        ErrorCode::UnknownTable,
        "unknown table",
    )
}

async fn create(req: Request<Incoming>, shared: &Shared) -> Response<Body> {
    if shared.cluster.is_some() {
        return error(
            StatusCode::CONFLICT,
            ErrorCode::NotAvailable,
            "tables cannot be created over HTTP in a cluster: configure them as [[tables]], \
             the same on every node (docs/protocol.md §5e, decision 0009)",
        );
    }
    let body = match crate::api::read_body(req.into_body(), 64 * 1024, shared).await {
        Ok(b) => b,
        Err(e) => return e.response(),
    };
    let spec: TableConfig = match serde_json::from_slice(&body) {
        Ok(s) => s,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                ErrorCode::BadRequest,
                &format!("expected {{\"game\": ..., \"seats\": ..., ...}}: {e}"),
            )
        }
    };
    if spec.count == 0 || spec.count > MAX_COUNT {
        return error(
            StatusCode::BAD_REQUEST,
            ErrorCode::BadRequest,
            &format!("count must be 1 to {MAX_COUNT}"),
        );
    }
    let engine_spec = spec.spec();
    let mut ids = Vec::with_capacity(spec.count as usize);
    for _ in 0..spec.count {
        match shared.games.create_table(&engine_spec) {
            Ok(id) => ids.push(id),
            // Only the first can fail: every table gets the same spec.
            Err(e @ (EngineError::UnknownGame(_) | EngineError::BadParams(_))) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    ErrorCode::BadRequest,
                    &e.to_string(),
                )
            }
            Err(e) => {
                return error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    ErrorCode::Internal,
                    &e.to_string(),
                )
            }
        }
    }
    json(
        StatusCode::CREATED,
        json!({ "tables": ids }).to_string().into_bytes(),
    )
}

/// A lobby entry as JSON.
pub fn entry_json(e: &TableEntry) -> Value {
    json!({
        "table": e.table,
        "path": e.path,
        "seats": e.seats,
        "players": e.players,
        "watchers": e.watchers,
        "attrs": serde_json::from_slice::<Value>(&e.attrs).unwrap_or_else(|_| json!({})),
    })
}

fn payload_json(b: &Bytes) -> Value {
    serde_json::from_slice::<Value>(b)
        .unwrap_or_else(|_| json!({ "b64": base64::engine::general_purpose::STANDARD.encode(b) }))
}

fn info_json(info: &TableInfo) -> Value {
    let seats: Vec<Value> = info
        .seats
        .iter()
        .map(|(seat, user, away)| json!({"seat": seat, "user": user, "away": away}))
        .collect();
    json!({
        "table": entry_json(&info.entry),
        "seats": seats,
        "state": payload_json(&info.state),
    })
}
