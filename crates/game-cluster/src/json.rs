//! A table as JSON, the way `/api/tables` shows it: the server's handlers
//! answer with it, and a table's owner answers a remote close with it
//! (`table_routes`), so a `DELETE` answers the same on any node.

use base64::Engine as _;
use bytes::Bytes;
use herald_game::TableInfo;
use herald_proto::TableEntry;
use serde_json::{json, Value};

/// A lobby entry as JSON: `{"table","path","seats","players","watchers","attrs"}`.
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

/// A game's public state: embedded as JSON when it is JSON text (Hold'em's
/// is), else as `{"b64":"…"}`.
fn payload_json(b: &Bytes) -> Value {
    serde_json::from_slice::<Value>(b)
        .unwrap_or_else(|_| json!({ "b64": base64::engine::general_purpose::STANDARD.encode(b) }))
}

/// A table's state as `GET /api/tables/{id}` (and `DELETE`) answer it.
pub fn info_json(info: &TableInfo) -> Value {
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
