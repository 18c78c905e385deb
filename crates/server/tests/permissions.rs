//! Per-namespace rules, channel grants, subscribe tokens for private
//! channels, the HTTP API key and tokens on SSE: each refusal gets its code,
//! and nobody else is affected.
mod common;

use common::*;
use herald_server::auth::jwt::{sign, Claims};
use herald_server::auth::keys::SigningKey;
use herald_server::auth::{NamespaceRule, Who};
use herald_server::ServeArgs;
use serde_json::{json, Value};

const SECRET: &str = "test-secret-test-secret-test-secret!";

fn token(c: Claims) -> String {
    sign(&c, &SigningKey::hmac(SECRET.as_bytes()), None).expect("sign")
}

fn user(sub: &str, grants: &[&str]) -> String {
    token(Claims {
        sub: sub.into(),
        channels: grants.iter().map(|s| s.to_string()).collect(),
        ..Claims::default()
    })
}

fn sub_token(sub: &str, channel: &str) -> String {
    token(Claims {
        sub: sub.into(),
        channel: Some(channel.into()),
        ..Claims::default()
    })
}

fn args() -> ServeArgs {
    ServeArgs {
        token_hmac_secret: Some(SECRET.into()),
        allow_anonymous: Some(true),
        namespaces: vec![
            NamespaceRule {
                name: "private".into(),
                subscribe: Who::Grant,
                publish: Who::Grant,
                presence: Who::Grant,
                history: Who::Grant,
                ..NamespaceRule::default()
            },
            NamespaceRule {
                name: "news".into(),
                publish: Who::None,
                ..NamespaceRule::default()
            },
            NamespaceRule {
                name: "".into(),
                publish: Who::User,
                presence: Who::User,
                ..NamespaceRule::default()
            },
        ],
        ..ServeArgs::default()
    }
}

async fn ask(ws: &mut Ws, body: Value) -> Value {
    send_json(ws, body).await;
    recv_json(ws).await
}

fn code(v: &Value) -> u64 {
    v["error"]["code"].as_u64().unwrap_or(0)
}

#[tokio::test]
async fn namespace_rules_grants_and_subscribe_tokens() {
    let srv = start(args()).await;
    let (mut alice, r) = connect_with_token(srv.addr, Some(&user("alice", &["private:a"]))).await;
    assert!(r["connect"].is_object(), "{r}");
    let (mut anon, r) = connect_with_token(srv.addr, None).await;
    assert!(r["connect"].is_object(), "{r}");

    // Granted by the connection token.
    subscribe_json(&mut alice, 2, "private:a").await;
    // Not granted: 104, and the connection stays.
    let r = ask(
        &mut alice,
        json!({"id": 3, "subscribe": {"channel": "private:b"}}),
    )
    .await;
    assert_eq!((r["id"].as_u64(), code(&r)), (Some(3), 104), "{r}");
    // A subscribe token for exactly that channel and user opens it.
    let r = ask(
        &mut alice,
        json!({"id": 4, "subscribe": {"channel": "private:b", "token": sub_token("alice", "private:b")}}),
    )
    .await;
    assert!(r["subscribe"].is_object(), "{r}");
    for (what, t) in [
        ("for another channel", sub_token("alice", "private:b")),
        ("for another user", sub_token("bob", "private:c")),
        ("forged", format!("{}x", sub_token("alice", "private:c"))),
        ("garbage", "nope".into()),
    ] {
        let r = ask(
            &mut alice,
            json!({"id": 5, "subscribe": {"channel": "private:c", "token": t}}),
        )
        .await;
        assert!(matches!(code(&r), 101 | 104), "{what}: {r}");
    }
    let expired = token(Claims {
        sub: "alice".into(),
        channel: Some("private:c".into()),
        exp: Some(1),
        ..Claims::default()
    });
    let r = ask(
        &mut alice,
        json!({"id": 6, "subscribe": {"channel": "private:c", "token": expired}}),
    )
    .await;
    assert_eq!(code(&r), 112, "{r}");
    // A wildcard that could reach private channels needs permission there too.
    let r = ask(&mut alice, json!({"id": 7, "subscribe": {"channel": ">"}})).await;
    assert_eq!(code(&r), 104, "{r}");

    // Anonymous: may subscribe in the default namespace, not publish there.
    subscribe_json(&mut anon, 2, "lobby").await;
    let r = ask(
        &mut anon,
        json!({"id": 3, "publish": {"channel": "lobby", "data": 1}}),
    )
    .await;
    assert_eq!(code(&r), 104, "{r}");
    let r = ask(
        &mut anon,
        json!({"id": 4, "presence": {"channel": "lobby"}}),
    )
    .await;
    assert_eq!(code(&r), 104, "{r}");
    let r = ask(
        &mut anon,
        json!({"id": 4, "presence_stats": {"channel": "lobby"}}),
    )
    .await;
    assert_eq!(code(&r), 104, "{r}");
    let r = ask(
        &mut anon,
        json!({"id": 5, "history": {"channel": "private:a"}}),
    )
    .await;
    assert_eq!(code(&r), 104, "{r}");
    // Nobody publishes to news over a connection...
    let r = ask(
        &mut alice,
        json!({"id": 8, "publish": {"channel": "news:x", "data": 1}}),
    )
    .await;
    assert_eq!(code(&r), 104, "{r}");

    // ... and alice, granted, publishes to her private channel; both her
    // subscriptions work.
    let r = ask(
        &mut alice,
        json!({"id": 9, "publish": {"channel": "private:a", "data": {"n": 1}}}),
    )
    .await;
    let (p, reply) = if r["pub"].is_object() {
        (r, recv_json(&mut alice).await)
    } else {
        (recv_json(&mut alice).await, r)
    };
    assert_eq!(p["pub"]["data"]["n"], 1, "{p}");
    assert_eq!(reply["id"], 9, "{reply}");
    // The anonymous client was never disconnected by any of this.
    let r = ask(&mut anon, json!({"id": 6, "ping": {}})).await;
    assert_eq!(r["id"], 6, "{r}");
}

#[tokio::test]
async fn the_http_api_needs_its_key_once_configured() {
    let srv = start(ServeArgs {
        api_key: Some("k3y-for-tests".into()),
        ..ServeArgs::default()
    })
    .await;
    let mut sub = json_client(srv.addr).await;
    subscribe_json(&mut sub, 2, "alerts").await;
    let body = r#"{"channel":"alerts","data":{"ok":1}}"#;
    for (what, headers) in [
        ("no key", vec![]),
        ("wrong key", vec![("authorization", "apikey wrong")]),
        (
            "wrong scheme",
            vec![("authorization", "Bearer k3y-for-tests")],
        ),
    ] {
        let (status, h, text) = http(srv.addr, "POST", "/api/publish", &headers, body).await;
        assert_eq!(status, 401, "{what}: {text}");
        let v: Value = serde_json::from_str(&text).expect("json error");
        assert_eq!(code(&v), 101, "{what}");
        assert!(h.get("www-authenticate").is_some());
    }
    let (status, _, text) = http(
        srv.addr,
        "POST",
        "/api/publish",
        &[("authorization", "apikey k3y-for-tests")],
        body,
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(recv_json(&mut sub).await["pub"]["data"]["ok"], 1);
    // Health is not behind the key.
    let (status, _, _) = http(srv.addr, "GET", "/healthz", &[], "").await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn sse_takes_a_token_and_obeys_the_rules() {
    let srv = start(ServeArgs {
        allow_anonymous: Some(false),
        ..args()
    })
    .await;
    let alice = user("alice", &["private:a"]);
    let cases = [
        (
            "no token",
            "/sse?channel=lobby".to_string(),
            vec![],
            401,
            101,
        ),
        (
            "bad token",
            "/sse?channel=lobby&token=bad".into(),
            vec![],
            401,
            101,
        ),
        (
            "channel not granted",
            format!("/sse?channel=private:b&token={alice}"),
            vec![],
            403,
            104,
        ),
    ];
    for (what, path, headers, status, want) in cases {
        let (got, _, text) = http(srv.addr, "GET", &path, &headers, "").await;
        assert_eq!(got, status, "{what}: {text}");
        let v: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(code(&v), want, "{what}");
    }
    let (status, _, _) = http(
        srv.addr,
        "GET",
        &format!("/sse?channel=private:a&token={alice}"),
        &[],
        "",
    )
    .await;
    assert_eq!(status, 200);
    let bearer = format!("Bearer {alice}");
    let (status, _, _) = http(
        srv.addr,
        "GET",
        "/sse?channel=lobby",
        &[("authorization", &bearer)],
        "",
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn long_poll_commands_are_authenticated_too() {
    let srv = start(ServeArgs {
        allow_anonymous: Some(false),
        ..args()
    })
    .await;
    let (status, _, text) = http(srv.addr, "POST", "/poll", &[], "").await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).expect("json");
    let id = v["session"].as_str().expect("session").to_string();
    let (status, _, _) = http(
        srv.addr,
        "POST",
        &format!("/poll/{id}"),
        &[],
        r#"{"id":1,"connect":{}}"#,
    )
    .await;
    assert_eq!(status, 202);
    let (_, _, text) = http(srv.addr, "GET", &format!("/poll/{id}"), &[], "").await;
    let msgs: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(msgs[0]["error"]["code"], 101, "{msgs}");
    assert_eq!(msgs[1]["disconnect"]["code"], 3500, "{msgs}");
}
