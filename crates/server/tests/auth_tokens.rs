//! Connection tokens: HS256, RS256 (PEM), ES256 and RS256 from a JWKS file;
//! every way a token can be bad gets its error code and disconnect code, and
//! clients already connected are unaffected.
mod common;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use common::*;
use herald_server::auth::jwt::{sign, Claims};
use herald_server::auth::keys::{public_key_pem, PublicKey, SigningKey};
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::time::{SystemTime, UNIX_EPOCH};

const SECRET: &str = "test-secret-test-secret-test-secret!";
const RSA_KEY: &str = include_str!("testdata/rsa-2048.key.pem");
const RSA_PUB: &str = include_str!("testdata/rsa-2048.pub.pem");

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

fn hs(claims: &Claims) -> String {
    sign(claims, &SigningKey::hmac(SECRET.as_bytes()), None).expect("sign")
}

fn user(sub: &str) -> Claims {
    Claims {
        sub: sub.into(),
        exp: Some(now() + 3600),
        ..Claims::default()
    }
}

fn hs_server_args() -> ServeArgs {
    ServeArgs {
        token_hmac_secret: Some(SECRET.into()),
        ..ServeArgs::default()
    }
}

/// A connected client subscribed to `channel`.
async fn listener(addr: std::net::SocketAddr, token: &str, channel: &str) -> Ws {
    let (mut ws, r) = connect_with_token(addr, Some(token)).await;
    assert!(r["connect"].is_object(), "{r}");
    subscribe_json(&mut ws, 2, channel).await;
    ws
}

/// Publishes on `channel` from `ws` and checks `watcher` receives it.
async fn still_delivers(addr: std::net::SocketAddr, token: &str, watcher: &mut Ws, channel: &str) {
    let (mut publisher, r) = connect_with_token(addr, Some(token)).await;
    assert!(r["connect"].is_object(), "{r}");
    send_json(
        &mut publisher,
        json!({"id": 0, "publish": {"channel": channel, "data": {"still": "here"}}}),
    )
    .await;
    let m = recv_json(watcher).await;
    assert_eq!(m["pub"]["data"]["still"], "here", "{m}");
}

fn error_code(v: &Value) -> u64 {
    v["error"]["code"].as_u64().unwrap_or(0)
}

/// The token's `info` claim is the connection info that presence and
/// join/leave show; a connection without it shows none.
#[tokio::test]
async fn info_claim_shows_in_presence_and_join() {
    let srv = start(hs_server_args()).await;
    let (mut watcher, r) = connect_with_token(srv.addr, Some(&hs(&user("watcher")))).await;
    assert!(r["connect"].is_object(), "{r}");
    send_json(
        &mut watcher,
        json!({"id": 2, "subscribe": {"channel": "table", "join_leave": true}}),
    )
    .await;
    assert!(recv_json(&mut watcher).await["subscribe"].is_object());
    let info = json!({"name": "Carol \u{e9}", "seat": 3, "tags": ["vip"]});
    let claims = Claims {
        info: Some(info.clone()),
        ..user("carol")
    };
    let (mut carol, r) = connect_with_token(srv.addr, Some(&hs(&claims))).await;
    assert!(r["connect"].is_object(), "{r}");
    subscribe_json(&mut carol, 2, "table").await;
    let j = recv_json(&mut watcher).await;
    assert_eq!(j["join"]["user"], "carol", "{j}");
    assert_eq!(j["join"]["info"], info, "{j}");
    send_json(
        &mut carol,
        json!({"id": 3, "presence": {"channel": "table"}}),
    )
    .await;
    let p = recv_json(&mut carol).await;
    let clients = p["presence"]["clients"]
        .as_array()
        .expect("clients")
        .clone();
    let by_user = |u: &str| {
        clients
            .iter()
            .find(|c| c["user"] == u)
            .cloned()
            .unwrap_or_else(|| panic!("{u} not in {p}"))
    };
    assert_eq!(by_user("carol")["info"], info);
    assert!(by_user("watcher").get("info").is_none(), "{p}");
}

#[tokio::test]
async fn hs256_token_connects_and_names_the_user() {
    let srv = start(hs_server_args()).await;
    let (mut ws, r) = connect_with_token(srv.addr, Some(&hs(&user("alice")))).await;
    assert!(r["connect"]["client"].is_string(), "{r}");
    subscribe_json(&mut ws, 2, "room").await;
    send_json(&mut ws, json!({"id": 3, "presence": {"channel": "room"}})).await;
    let p = recv_json(&mut ws).await;
    assert_eq!(p["presence"]["clients"][0]["user"], "alice", "{p}");
    // Two more connections, one of them alice again: three clients, two users.
    let mut others = Vec::new();
    for (i, who) in ["alice", "bob"].into_iter().enumerate() {
        let (mut other, r) = connect_with_token(srv.addr, Some(&hs(&user(who)))).await;
        assert!(r["connect"].is_object(), "{r}");
        subscribe_json(&mut other, 10 + i as u32, "room").await;
        others.push(other);
    }
    send_json(
        &mut ws,
        json!({"id": 4, "presence_stats": {"channel": "room"}}),
    )
    .await;
    assert_eq!(
        recv_json(&mut ws).await,
        json!({"id": 4, "presence_stats": {"clients": 3, "users": 2}})
    );
}

#[tokio::test]
async fn every_bad_token_is_refused_with_its_code_and_others_are_unaffected() {
    let srv = start(hs_server_args()).await;
    let good = hs(&user("watcher"));
    let mut watcher = listener(srv.addr, &good, "room").await;

    let valid = hs(&user("mallory"));
    let mut parts: Vec<String> = valid.split('.').map(str::to_string).collect();
    // Same signature, payload claiming to be someone else: forged.
    parts[1] = URL_SAFE_NO_PAD.encode(r#"{"sub":"admin"}"#);
    let forged = parts.join(".");
    let alg_none = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#),
        URL_SAFE_NO_PAD.encode(r#"{"sub":"admin"}"#)
    );
    let other_secret = sign(
        &user("mallory"),
        &SigningKey::hmac(b"not-the-server-secret-not-the-server"),
        None,
    )
    .expect("sign");
    let rsa_key = SigningKey::from_pem(RSA_KEY).expect("rsa key");
    let wrong_alg = sign(&user("mallory"), &rsa_key, None).expect("sign");
    let expired = hs(&Claims {
        exp: Some(now() - 10),
        ..user("late")
    });
    let subscribe_token = hs(&Claims {
        channel: Some("room".into()),
        ..user("mallory")
    });
    let no_sub = hs(&Claims {
        sub: String::new(),
        ..user("")
    });

    let cases: Vec<(&str, Option<String>, u64, u16)> = vec![
        ("no token, anonymous not allowed", None, 101, 3500),
        ("malformed", Some("not-a-jwt".into()), 101, 3500),
        ("malformed base64", Some("a.b.c".into()), 101, 3500),
        ("forged payload", Some(forged), 101, 3500),
        ("alg none", Some(alg_none), 101, 3500),
        ("signed with another secret", Some(other_secret), 101, 3500),
        (
            "RS256 with no public key configured",
            Some(wrong_alg),
            101,
            3500,
        ),
        (
            "subscribe token used to connect",
            Some(subscribe_token),
            101,
            3500,
        ),
        ("no sub", Some(no_sub), 101, 3500),
        ("expired", Some(expired), 112, 3002),
    ];
    for (what, token, code, close) in cases {
        let (mut ws, r) = connect_with_token(srv.addr, token.as_deref()).await;
        assert_eq!(error_code(&r), code, "{what}: {r}");
        assert_eq!(r["id"], 1, "{what}: {r}");
        assert_eq!(close_code(&mut ws).await, close, "{what}");
    }
    still_delivers(srv.addr, &good, &mut watcher, "room").await;
}

fn jwk_rsa(kid: &str) -> Value {
    let PublicKey::Rsa(c) = public_key_pem(RSA_PUB).expect("pub") else {
        panic!("not RSA")
    };
    json!({"kty": "RSA", "kid": kid, "use": "sig", "n": URL_SAFE_NO_PAD.encode(&c.n), "e": URL_SAFE_NO_PAD.encode(&c.e)})
}

fn ec_pair() -> (SigningKey, Vec<u8>, String) {
    let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("ec key");
    let key = SigningKey::from_pkcs8(&kp.serialize_der()).expect("pkcs8");
    (key, kp.public_key_raw().to_vec(), kp.public_key_pem())
}

fn jwk_ec(kid: &str, point: &[u8]) -> Value {
    assert_eq!(point.len(), 65);
    json!({"kty": "EC", "crv": "P-256", "kid": kid,
           "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..])})
}

#[tokio::test]
async fn rs256_from_pem_es256_and_rs256_from_jwks() {
    let (ec_key, ec_point, _) = ec_pair();
    let jwks = json!({"keys": [jwk_ec("ec1", &ec_point), jwk_rsa("rsa1"),
                               {"kty": "oct", "k": "c2VjcmV0"}]});
    let srv = start(ServeArgs {
        token_public_key: Some(temp_file("rsa.pub.pem", RSA_PUB)),
        token_jwks_file: Some(temp_file("keys.jwks", &jwks.to_string())),
        ..ServeArgs::default()
    })
    .await;
    let rsa = SigningKey::from_pem(RSA_KEY).expect("rsa");
    let ok = [
        sign(&user("r1"), &rsa, None).expect("sign"),
        sign(&user("r2"), &rsa, Some("rsa1")).expect("sign"),
        sign(&user("e1"), &ec_key, Some("ec1")).expect("sign"),
        sign(&user("e2"), &ec_key, None).expect("sign"),
    ];
    for t in &ok {
        let (_ws, r) = connect_with_token(srv.addr, Some(t)).await;
        assert!(r["connect"].is_object(), "{r}");
    }
    let mut watcher = listener(srv.addr, &ok[0], "keys").await;
    let (other_ec, _, _) = ec_pair();
    let bad = [
        (
            "ES256 from an unknown key",
            sign(&user("x"), &other_ec, None).expect("sign"),
        ),
        (
            "ES256 naming another kid",
            sign(&user("x"), &ec_key, Some("rsa1")).expect("sign"),
        ),
        ("HS256 with no secret configured", hs(&user("x"))),
    ];
    for (what, t) in bad {
        let (mut ws, r) = connect_with_token(srv.addr, Some(&t)).await;
        assert_eq!(error_code(&r), 101, "{what}: {r}");
        assert_eq!(close_code(&mut ws).await, 3500, "{what}");
    }
    still_delivers(srv.addr, &ok[2], &mut watcher, "keys").await;
}

#[tokio::test]
async fn es256_from_a_pem_public_key() {
    let (ec_key, _, pem) = ec_pair();
    let srv = start(ServeArgs {
        token_public_key: Some(temp_file("ec.pub.pem", &pem)),
        ..ServeArgs::default()
    })
    .await;
    let (_ws, r) = connect_with_token(
        srv.addr,
        Some(&sign(&user("e"), &ec_key, None).expect("sign")),
    )
    .await;
    assert!(r["connect"].is_object(), "{r}");
}

#[tokio::test]
async fn a_token_expiring_while_connected_disconnects_with_3002() {
    let srv = start(hs_server_args()).await;
    let mut lasting = listener(srv.addr, &hs(&user("lasting")), "room").await;
    let short = hs(&Claims {
        exp: Some(now() + 2),
        ..user("short")
    });
    let (mut ws, r) = connect_with_token(srv.addr, Some(&short)).await;
    assert!(r["connect"].is_object(), "{r}");
    assert_eq!(
        close_code(&mut ws).await,
        3002,
        "token expired: refresh and reconnect"
    );
    still_delivers(srv.addr, &hs(&user("p")), &mut lasting, "room").await;
}

#[tokio::test]
async fn anonymous_clients_when_allowed_alongside_tokens() {
    let srv = start(ServeArgs {
        allow_anonymous: Some(true),
        ..hs_server_args()
    })
    .await;
    let (_ws, r) = connect_with_token(srv.addr, None).await;
    assert!(r["connect"].is_object(), "{r}");
    // A bad token is still refused: anonymity is not a fallback for it.
    let (mut ws, r) = connect_with_token(srv.addr, Some("bad")).await;
    assert_eq!(error_code(&r), 101, "{r}");
    assert_eq!(close_code(&mut ws).await, 3500);
}
