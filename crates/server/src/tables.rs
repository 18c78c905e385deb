//! `/api/tables`: game tables over HTTP, behind the same API key as the rest
//! of `/api/*`.
//!
//! | request | answer |
//! |---|---|
//! | `GET /api/tables` | `{"tables":[entry, ...]}`: every table's lobby entry; in a cluster each table this node owns also has `"owner":{"node","token"}` (its lease and fencing token, decision 0009) |
//! | `POST /api/tables` | body `{"game":"holdem","seats":6,"timing"?:"express","path"?:"…","count"?:1, ...game params}`; 201 `{"tables":[id, ...]}`; 400 (code 103) for bad parameters; in a cluster 503 (code 114) when Redis cannot be reached |
//! | `GET /api/tables/{id}` | `{"table":entry,"seats":[{"seat":0,"user":"u1","away":false}],"state":…}`; 404 (code 115); in a cluster, tables this node runs only |
//! | `DELETE /api/tables/{id}` | closes it (players get `unseat` 115); answers its last state like `GET`; 404 (code 115); in a cluster 202 `{"table":id,"deleted":true,"closed":false,"reason":…}` when no owner answered, 503 (code 114) when Redis cannot be reached |
//!
//! An entry is `{"table","path","seats","players","watchers","attrs"}` as in
//! the protocol's lobby; `state` is the game's public snapshot, embedded as
//! JSON when it is JSON text (Hold'em's is), else as `{"b64":"…"}`.
//!
//! In a cluster (`--broker redis://…`, any role), `POST` writes the tables
//! into Redis's registry (ids from a cluster counter above the configured
//! tables, `herald_game_cluster`'s [`TableDirectory`]) and answers once they are written: a
//! game node's keeper claims them within a scan, and every node's lobby and
//! routes serve them. Not in this node's memory: a table made here alone
//! would be unknown to the other nodes and die with this one. With no game
//! node in the cluster the tables wait in the registry, and commands for
//! them get 114 ("retry"), as for a configured table nobody runs.
//!
//! `DELETE` in a cluster marks the table deleted in Redis (never claimed
//! again, even after a restart), publishes its lobby removal to every node
//! and asks its owner to close it: the owner's players get the same
//! `unseat` 115 "the table was closed" as on a single node, and the answer
//! is the state the owner closed it with (its chips), as on a single node.
//! When nobody owns the table (its owner died and no node took it over
//! yet) or the owner does not answer in time, the table is deleted all the
//! same and the answer is 202 with `"closed": false`: its last save stays
//! in Redis (`P:t:{T}:state`) for whoever must account for its chips, and
//! an owner that is alive closes it at its keeper's next scan.

use crate::respond::{error, json, read_body, Body};
use herald_game::{EngineError, TableConfig};
use herald_game_cluster::json::{entry_json, info_json};
use herald_game_cluster::{Closing, TableDirectory};
use herald_proto::ErrorCode;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use std::sync::Arc;

/// What `/api/tables` takes: the engine, and in a cluster the cluster's
/// tables.
#[derive(Debug, Clone)]
pub struct TablesApi {
    /// The game engine: this node's tables and the lobby.
    pub games: Arc<herald_game::Engine>,
    /// In a cluster: which tables exist (configured, created over HTTP,
    /// deleted), reached through the game cluster's small interface.
    pub cluster: Option<Arc<dyn TableDirectory>>,
    /// How long a request body may take (`request_body_timeout`).
    pub request_body_timeout: std::time::Duration,
}

/// Most tables one `POST` may create.
const MAX_COUNT: u32 = 10_000;

/// Handles `/api/tables` and `/api/tables/{id}`.
pub async fn handle(req: Request<Incoming>, tables: &TablesApi) -> Response<Body> {
    let rest = req.uri().path()["/api/tables".len()..].to_string();
    match (req.method().clone(), rest.as_str()) {
        (Method::GET, "" | "/") => ok(json!({ "tables": list(tables) })),
        (Method::POST, "" | "/") => create(req, tables).await,
        (method, id) if id.len() > 1 => {
            let Ok(id) = id[1..].parse::<u64>() else {
                return not_found();
            };
            match method {
                Method::GET => show(id, tables).await,
                Method::DELETE => close(id, tables).await,
                _ => error(
                    StatusCode::METHOD_NOT_ALLOWED,
                    ErrorCode::BadRequest,
                    "use GET or DELETE",
                ),
            }
        }
        _ => error(
            StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::BadRequest,
            "use GET or POST",
        ),
    }
}

/// The lobby's tables, each with its owner node and fencing token where
/// this node holds the lease (`GET /api/tables`, the admin dashboard).
pub fn list(tables: &TablesApi) -> Vec<Value> {
    let leases = tables.games.leases();
    let node = tables.games.node_id();
    tables
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
        .collect()
}

/// `GET /api/tables/{id}`: the table's public state (404 if unknown).
pub async fn show(id: u64, tables: &TablesApi) -> Response<Body> {
    match state(id, tables).await {
        Some(v) => ok(v),
        None => not_found(),
    }
}

/// The public state of table `id`, if it runs here (the admin dashboard's
/// live table view too).
pub async fn state(id: u64, tables: &TablesApi) -> Option<Value> {
    tables
        .games
        .table(id)
        .await
        .ok()
        .map(|info| info_json(&info))
}

/// `DELETE /api/tables/{id}`: closes the table (in a cluster through the
/// directory, wherever it runs).
pub async fn close(id: u64, tables: &TablesApi) -> Response<Body> {
    if let Some(cluster) = &tables.cluster {
        return delete_in_cluster(id, cluster.as_ref()).await;
    }
    match tables.games.close_table(id).await {
        Ok(info) => ok(info_json(&info)),
        Err(_) => not_found(),
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

async fn create(req: Request<Incoming>, tables: &TablesApi) -> Response<Body> {
    let body = match read_body(req.into_body(), 64 * 1024, tables.request_body_timeout).await {
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
    if let Some(cluster) = &tables.cluster {
        return match tables.games.check_new_table(&engine_spec) {
            Err(e) => error(StatusCode::BAD_REQUEST, ErrorCode::BadRequest, &e.to_string()),
            Ok(()) => match cluster.open(&spec, spec.count).await {
                Ok(ids) => json(
                    StatusCode::CREATED,
                    json!({ "tables": ids }).to_string().into_bytes(),
                ),
                Err(e) => error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    ErrorCode::BrokerUnavailable,
                    &format!("cannot reach Redis: {e}; retry (no table was created if this answer came at once; after a timeout one may have been)"),
                ),
            },
        };
    }
    let mut ids = Vec::with_capacity(spec.count as usize);
    for _ in 0..spec.count {
        match tables.games.create_table(&engine_spec) {
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

/// `DELETE /api/tables/{id}` in a cluster (see the module's docs).
async fn delete_in_cluster(id: u64, cluster: &dyn TableDirectory) -> Response<Body> {
    match cluster.close(id).await {
        Err(e) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::BrokerUnavailable,
            &format!(
                "cannot reach Redis: {e}; retry (a DELETE that went through answers 404 \
                 the second time)"
            ),
        ),
        Ok(Closing::Unknown) => not_found(),
        Ok(Closing::Closed(state)) => ok(state),
        Ok(Closing::Deleted) => json(
            StatusCode::ACCEPTED,
            json!({
                "table": id,
                "deleted": true,
                "closed": false,
                "reason": "no node ran the table or its owner did not answer: it is deleted and \
                           never runs again; its last save stays in Redis",
            })
            .to_string()
            .into_bytes(),
        ),
    }
}
