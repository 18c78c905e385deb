//! `GET /api/nodes` on a single in-memory node: the documented shape, and the
//! address the node actually listens on (the listener is bound to port 0
//! here, as with `--listen 127.0.0.1:0`; it used to show the configured
//! address, 127.0.0.1:8080 in these tests and port 0 from the binary).
mod common;

use common::*;
use serde_json::Value;

#[tokio::test]
async fn nodes_lists_this_node_at_its_bound_address() {
    let srv = start_default().await;
    let (status, headers, body) = http(srv.addr, "GET", "/api/nodes", &[], "").await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/json");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["broker"], "memory");
    assert_eq!(v["node"], "");
    let nodes = v["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0]["self"], true);
    let stats = &nodes[0]["stats"];
    assert_eq!(stats["listen"], srv.addr.to_string());
    for key in ["clients", "channels", "publications", "uptime_s"] {
        assert!(stats[key].is_u64(), "{key}: {stats}");
    }
    assert!(stats["version"].is_string());
}
