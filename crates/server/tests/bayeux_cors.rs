//! The Bayeux long-polling endpoint from a browser page of another origin:
//! the CORS preflight is answered and answers name the origin (credentials
//! allowed, for the `BAYEUX_BROWSER` cookie); an origin outside
//! `--allowed-origins` is refused (WebSocket upgrades are checked by the
//! upgrade path every WebSocket endpoint shares).
mod common;

use common::*;
use herald_server::ServeArgs;

#[tokio::test]
async fn preflight_answers_and_the_origin_allowlist() {
    let args = ServeArgs {
        allowed_origins: Some(vec!["http://app.test".into()]),
        ..ServeArgs::default()
    };
    let srv = start(args).await;
    let (status, h, _) = http(
        srv.addr,
        "OPTIONS",
        "/cometd/handshake",
        &[
            ("origin", "http://app.test"),
            ("access-control-request-method", "POST"),
        ],
        "",
    )
    .await;
    assert_eq!(status, 204);
    assert_eq!(h["access-control-allow-origin"], "http://app.test");
    assert_eq!(h["access-control-allow-credentials"], "true");
    assert_eq!(h["access-control-allow-methods"], "POST");
    let body = r#"[{"channel":"/meta/handshake","supportedConnectionTypes":["long-polling"]}]"#;
    let (status, h, text) = http(
        srv.addr,
        "POST",
        "/cometd/handshake",
        &[("origin", "http://app.test")],
        body,
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(h["access-control-allow-origin"], "http://app.test");
    assert!(h["set-cookie"]
        .to_str()
        .is_ok_and(|c| c.starts_with("BAYEUX_BROWSER=")));
    // Without an Origin (not a browser): no CORS headers.
    let (status, h, _) = http(srv.addr, "POST", "/cometd", &[], body).await;
    assert_eq!(status, 200);
    assert!(h.get("access-control-allow-origin").is_none());
    // A foreign origin: refused before Bayeux sees it.
    let (status, _, _) = http(
        srv.addr,
        "POST",
        "/cometd",
        &[("origin", "http://evil.test")],
        body,
    )
    .await;
    assert_eq!(status, 403);
}
