//! The Pusher Channels endpoint (`/app/{key}`) and HTTP API (`/apps/{id}/...`)
//! with real sockets: the protocol's happy paths against Herald's hub, and
//! the bad input a Pusher server must refuse (unknown key, bad signatures,
//! stale timestamps, client events where they are not allowed, oversized or
//! too many events, unknown events). Pusher's own JS client and server SDK
//! are exercised by tests/outside/pusher.test.sh.
mod common;
#[path = "common/pusher.rs"]
mod pusher_common;

use common::*;
use herald_pusher::sign;
use herald_server::pusher::PusherArgs;
use herald_server::ServeArgs;
use pusher_common::*;
use serde_json::{json, Value};

async fn server() -> TestServer {
    start(ServeArgs {
        pusher: Some(PusherArgs {
            apps: vec![app("1", KEY, SECRET), app("2", "other-key", "other-secret")],
            client_event_rate: Some(5),
            max_event_size: Some(1000),
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
}

/// A server with `app` as its only app; `channel_vacated` after
/// `vacated_delay_ms` (the default if `None`).
async fn serve_app(
    app: herald_server::pusher::AppArgs,
    vacated_delay_ms: Option<u64>,
) -> TestServer {
    start(ServeArgs {
        pusher: Some(PusherArgs {
            apps: vec![app],
            vacated_delay_ms,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
}

#[tokio::test]
async fn connection_established_and_ping() {
    let srv = server().await;
    let (mut ws, socket) = pusher_client(srv.addr, KEY).await;
    assert!(
        herald_pusher::parse_socket_id(&socket).is_some(),
        "{socket}"
    );
    send_json(&mut ws, json!({"event": "pusher:ping", "data": {}})).await;
    assert_eq!(recv(&mut ws).await["event"], "pusher:pong");
}

#[tokio::test]
async fn unknown_key_and_bad_protocol_versions_are_closed_with_their_codes() {
    let srv = server().await;
    for (path, code) in [
        ("/app/nope?protocol=7", 4001),
        ("/app/app-key", 4008),
        ("/app/app-key?protocol=x", 4006),
        ("/app/app-key?protocol=4", 4007),
    ] {
        let mut ws = connect(srv.addr, path, None).await;
        let m = recv(&mut ws).await;
        assert_eq!(m["event"], "pusher:error", "{path}: {m}");
        assert_eq!(m["data"]["code"], code, "{path}: {m}");
        assert_eq!(close_code(&mut ws).await, code, "{path}");
    }
    assert_serving(srv.addr).await;
}

#[tokio::test]
async fn http_api_events_reach_pusher_and_herald_subscribers() {
    let srv = server().await;
    let (mut p, _) = pusher_client(srv.addr, KEY).await;
    subscribed(&mut p, "news", "", None).await;
    let mut h = json_client(srv.addr).await;
    subscribe_json(&mut h, 2, "pusher-1:news").await;

    trigger(srv.addr, "news", "greeting", "{\"text\":\"hi\"}").await;
    let m = recv_json(&mut p).await;
    assert_eq!(
        m,
        json!({"event": "greeting", "channel": "news", "data": "{\"text\":\"hi\"}"})
    );
    let pubm = recv_json(&mut h).await;
    assert_eq!(
        pubm["pub"]["data"],
        json!({"event": "greeting", "data": {"text": "hi"}}),
        "{pubm}"
    );

    // Herald's own publish API: an envelope keeps its event name, anything
    // else arrives as event "message".
    for (data, event, pusher_data) in [
        (json!({"event": "e2", "data": "plain"}), "e2", "plain"),
        (json!({"x": 1}), "message", "{\"x\":1}"),
    ] {
        let body = json!({"channel": "pusher-1:news", "data": data}).to_string();
        let (status, _, _) = http(srv.addr, "POST", "/api/publish", &[], &body).await;
        assert_eq!(status, 200);
        let m = recv_json(&mut p).await;
        assert_eq!(
            (m["event"].as_str(), m["data"].as_str()),
            (Some(event), Some(pusher_data)),
            "{m}"
        );
    }
}

#[tokio::test]
async fn herald_clients_need_a_grant_for_pusher_private_channels() {
    let srv = server().await;
    let mut h = json_client(srv.addr).await;
    subscribe_json(&mut h, 2, "pusher-1:news").await;
    for (id, channel) in [
        (3, "pusher-1:private-room"),
        (4, "pusher-1:presence-room"),
        (5, "pusher-1:private-encrypted-x"),
        (8, "pusher-1::server-to-user-ann"),
        (6, ">"),
    ] {
        send_json(&mut h, json!({"id": id, "subscribe": {"channel": channel}})).await;
        let r = recv_json(&mut h).await;
        assert_eq!(r["id"], id, "{r}");
        assert_eq!(r["error"]["code"], 104, "{channel}: {r}");
    }
    send_json(
        &mut h,
        json!({"id": 7, "publish": {"channel": "pusher-1:private-room", "data": {"event": "forged", "data": "x"}}}),
    )
    .await;
    assert_eq!(recv_json(&mut h).await["error"]["code"], 104);
}

#[tokio::test]
async fn apps_are_isolated() {
    let srv = server().await;
    let (mut other, _) = pusher_client(srv.addr, "other-key").await;
    let m = subscribe(&mut other, "news", None, None).await;
    assert_eq!(m["event"], "pusher_internal:subscription_succeeded");
    let (mut mine, _) = pusher_client(srv.addr, KEY).await;
    subscribed(&mut mine, "news", "", None).await;
    trigger(srv.addr, "news", "e", "for app 1").await;
    assert_eq!(recv(&mut mine).await["data"], "for app 1");
    // App 2's subscriber gets nothing: a ping is answered first.
    send_json(&mut other, json!({"event": "pusher:ping", "data": {}})).await;
    assert_eq!(recv(&mut other).await["event"], "pusher:pong");
    // App 1's key cannot sign for app 2.
    let body = json!({"name": "e", "channel": "news", "data": "x"}).to_string();
    let (status, _) = api(srv.addr, "POST", "/apps/2/events", &body, &[]).await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn private_channels_need_the_apps_signature() {
    let srv = server().await;
    let (mut ws, socket) = pusher_client(srv.addr, KEY).await;
    for auth in [
        None,
        Some(format!("{KEY}:{}", "0".repeat(64))),
        // Signed for another socket.
        Some(sign::channel_auth(
            KEY,
            SECRET.as_bytes(),
            "1.1",
            "private-a",
            None,
        )),
        // Signed with another app's secret.
        Some(sign::channel_auth(
            KEY,
            b"other-secret",
            &socket,
            "private-a",
            None,
        )),
    ] {
        let m = subscribe(&mut ws, "private-a", auth.as_deref(), None).await;
        assert_eq!(m["event"], "pusher:subscription_error", "{m}");
        assert_eq!(m["channel"], "private-a");
        assert_eq!(m["data"]["type"], "AuthError");
        assert_eq!(m["data"]["status"], 401);
    }
    subscribed(&mut ws, "private-a", &socket, None).await;
    let m = subscribe(&mut ws, "bad name!", None, None).await;
    assert_eq!(m["event"], "pusher:subscription_error", "{m}");
}

#[tokio::test]
async fn client_events_reach_the_others_on_private_channels_only() {
    let srv = server().await;
    let (mut a, sa) = pusher_client(srv.addr, KEY).await;
    let (mut b, sb) = pusher_client(srv.addr, KEY).await;
    subscribed(&mut a, "private-room", &sa, None).await;
    subscribed(&mut b, "private-room", &sb, None).await;
    subscribed(&mut a, "public", &sa, None).await;
    send_json(
        &mut a,
        json!({"event": "client-typing", "channel": "private-room", "data": {"who": "a"}}),
    )
    .await;
    let m = recv(&mut b).await;
    assert_eq!(m["event"], "client-typing");
    assert_eq!(m["channel"], "private-room");
    assert_eq!(m["data"], json!({"who": "a"}));

    // Refused: a public channel, a channel not subscribed, an unknown event.
    for msg in [
        json!({"event": "client-x", "channel": "public", "data": {}}),
        json!({"event": "client-x", "channel": "private-elsewhere", "data": {}}),
        json!({"event": "hello", "data": {}}),
    ] {
        send_json(&mut a, msg.clone()).await;
        let m = recv(&mut a).await;
        assert_eq!(m["event"], "pusher:error", "{msg}: {m}");
        assert!(m["data"]["message"].is_string());
    }
    // The sender never got its own event: a ping is answered next.
    send_json(&mut a, json!({"event": "pusher:ping", "data": {}})).await;
    assert_eq!(recv(&mut a).await["event"], "pusher:pong");
    // Not JSON: an error, and the connection stays.
    use futures_util::SinkExt;
    a.send(tokio_tungstenite::tungstenite::Message::text("{oops"))
        .await
        .expect("send");
    assert_eq!(recv(&mut a).await["event"], "pusher:error");
    send_json(&mut a, json!({"event": "pusher:ping", "data": {}})).await;
    assert_eq!(recv(&mut a).await["event"], "pusher:pong");
}

#[tokio::test]
async fn encrypted_channels_relay_ciphertext_and_refuse_client_events() {
    let srv = server().await;
    let (mut ws, socket) = pusher_client(srv.addr, KEY).await;
    let m = subscribe(&mut ws, "private-encrypted-v", None, None).await;
    assert_eq!(m["event"], "pusher:subscription_error", "{m}");
    subscribed(&mut ws, "private-encrypted-v", &socket, None).await;
    let sealed = r#"{"nonce":"bm9uY2U=","ciphertext":"c2VhbGVk"}"#;
    trigger(srv.addr, "private-encrypted-v", "e", sealed).await;
    let m = recv_json(&mut ws).await;
    assert_eq!(m["data"].as_str(), Some(sealed), "relayed as is: {m}");
    send_json(
        &mut ws,
        json!({"event": "client-x", "channel": "private-encrypted-v", "data": {}}),
    )
    .await;
    assert_eq!(recv(&mut ws).await["event"], "pusher:error");
}

#[tokio::test]
async fn oversized_and_too_frequent_client_events_get_4301() {
    let srv = server().await;
    let (mut a, sa) = pusher_client(srv.addr, KEY).await;
    subscribed(&mut a, "private-room", &sa, None).await;
    let big = "x".repeat(1001);
    send_json(
        &mut a,
        json!({"event": "client-big", "channel": "private-room", "data": big}),
    )
    .await;
    let m = recv(&mut a).await;
    assert_eq!(
        (m["event"].as_str(), m["data"]["code"].as_u64()),
        (Some("pusher:error"), Some(4301)),
        "{m}"
    );
    // The bucket holds five: the sixth at once is refused.
    for _ in 0..6 {
        send_json(
            &mut a,
            json!({"event": "client-x", "channel": "private-room", "data": {}}),
        )
        .await;
    }
    let m = recv(&mut a).await;
    assert_eq!(
        (m["event"].as_str(), m["data"]["code"].as_u64()),
        (Some("pusher:error"), Some(4301)),
        "{m}"
    );
    // HTTP API: data over the limit is 413.
    let body = json!({"name": "e", "channel": "c", "data": "y".repeat(1001)}).to_string();
    assert_eq!(
        api(srv.addr, "POST", "/apps/1/events", &body, &[]).await.0,
        413
    );
}

#[tokio::test]
async fn herald_rate_limit_applies_to_every_pusher_message() {
    let srv = start(ServeArgs {
        pusher: Some(PusherArgs {
            apps: vec![app("1", KEY, SECRET)],
            ..Default::default()
        }),
        rate_limit: Some(5),
        rate_burst: Some(5),
        ..Default::default()
    })
    .await;
    let (mut ws, _) = pusher_client(srv.addr, KEY).await;
    for _ in 0..6 {
        send_json(&mut ws, json!({"event": "pusher:ping", "data": {}})).await;
    }
    let mut events = Vec::new();
    for _ in 0..6 {
        events.push(recv(&mut ws).await["event"].as_str().map(str::to_string));
    }
    assert_eq!(
        events
            .iter()
            .filter(|e| e.as_deref() == Some("pusher:pong"))
            .count(),
        5
    );
    assert!(events.contains(&Some("pusher:error".into())), "{events:?}");
}

#[tokio::test]
async fn presence_members_join_and_leave_once_per_user() {
    let srv = server().await;
    let ann = r#"{"user_id":"ann","user_info":{"name":"Ann"}}"#;
    let bob = r#"{"user_id":"bob"}"#;
    let (mut a, sa) = pusher_client(srv.addr, KEY).await;
    let m = subscribed(&mut a, "presence-room", &sa, Some(ann)).await;
    assert_eq!(m["data"]["presence"]["ids"], json!(["ann"]));
    assert_eq!(m["data"]["presence"]["hash"]["ann"], json!({"name": "Ann"}));

    let (mut b, sb) = pusher_client(srv.addr, KEY).await;
    let m = subscribed(&mut b, "presence-room", &sb, Some(bob)).await;
    assert_eq!(m["data"]["presence"]["count"], 2);
    let m = recv(&mut a).await;
    assert_eq!(m["event"], "pusher_internal:member_added");
    assert_eq!(m["data"], json!({"user_id": "bob", "user_info": null}));

    // Bob's second connection is not news; its client events carry user_id.
    let (mut b2, sb2) = pusher_client(srv.addr, KEY).await;
    subscribed(&mut b2, "presence-room", &sb2, Some(bob)).await;
    send_json(
        &mut b2,
        json!({"event": "client-hi", "channel": "presence-room", "data": "hey"}),
    )
    .await;
    let m = recv(&mut a).await;
    assert_eq!(
        (m["event"].as_str(), m["user_id"].as_str()),
        (Some("client-hi"), Some("bob")),
        "{m}"
    );

    let (status, users) = api(
        srv.addr,
        "GET",
        "/apps/1/channels/presence-room/users",
        "",
        &[],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&users).expect("json"),
        json!({"users": [{"id": "ann"}, {"id": "bob"}]})
    );

    // A connection has one user.
    let other = r#"{"user_id":"carl"}"#;
    let auth = sign::channel_auth(KEY, SECRET.as_bytes(), &sb2, "presence-two", Some(other));
    let m = subscribe(&mut b2, "presence-two", Some(&auth), Some(other)).await;
    assert_eq!(m["event"], "pusher:subscription_error", "{m}");

    drop(b2);
    drop(b);
    let m = recv(&mut a).await;
    assert_eq!(m["event"], "pusher_internal:member_removed", "{m}");
    assert_eq!(m["data"], json!({"user_id": "bob"}));
    // Presence data signed without channel_data is refused.
    let (mut c, sc) = pusher_client(srv.addr, KEY).await;
    let auth = sign::channel_auth(KEY, SECRET.as_bytes(), &sc, "presence-room", None);
    let m = subscribe(&mut c, "presence-room", Some(&auth), None).await;
    assert_eq!(m["event"], "pusher:subscription_error", "{m}");
}

#[tokio::test]
async fn signed_in_users_get_their_events_and_can_be_terminated() {
    let srv = server().await;
    let (mut ws, socket) = pusher_client(srv.addr, KEY).await;
    let user = r#"{"id":"ann","user_info":{"name":"Ann"}}"#;
    let auth = sign::user_auth(KEY, SECRET.as_bytes(), &socket, user);
    send_json(
        &mut ws,
        json!({"event": "pusher:signin", "data": {"auth": auth, "user_data": user}}),
    )
    .await;
    let m = recv(&mut ws).await;
    assert_eq!(m["event"], "pusher:signin_success", "{m}");
    assert_eq!(m["data"]["user_data"], user);
    let m = subscribe(&mut ws, "#server-to-user-bob", None, None).await;
    assert_eq!(
        m["event"], "pusher:subscription_error",
        "another user's channel: {m}"
    );
    let m = subscribe(&mut ws, "#server-to-user-ann", None, None).await;
    assert_eq!(m["event"], "pusher_internal:subscription_succeeded", "{m}");
    trigger(srv.addr, "#server-to-user-ann", "note", "for ann").await;
    let m = recv_json(&mut ws).await;
    assert_eq!(
        m,
        json!({"event": "note", "channel": "#server-to-user-ann", "data": "for ann"})
    );
    let (status, _) = api(
        srv.addr,
        "POST",
        "/apps/1/users/ann/terminate_connections",
        "{}",
        &[],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(close_code(&mut ws).await, 4009);

    // A forged signin: pusher:error 4009, then the close.
    let (mut ws, _) = pusher_client(srv.addr, KEY).await;
    let forged = sign::user_auth(KEY, b"not-the-secret", "1.1", user);
    send_json(
        &mut ws,
        json!({"event": "pusher:signin", "data": {"auth": forged, "user_data": user}}),
    )
    .await;
    let m = recv(&mut ws).await;
    assert_eq!(
        (m["event"].as_str(), m["data"]["code"].as_u64()),
        (Some("pusher:error"), Some(4009)),
        "{m}"
    );
    assert_eq!(close_code(&mut ws).await, 4009);
}

#[tokio::test]
async fn cache_channels_replay_the_last_event() {
    let srv = server().await;
    let (mut ws, socket) = pusher_client(srv.addr, KEY).await;
    subscribed(&mut ws, "cache-empty", &socket, None).await;
    assert_eq!(recv(&mut ws).await["event"], "pusher:cache_miss");
    trigger(srv.addr, "cache-scores", "score", "1").await;
    trigger(srv.addr, "cache-scores", "score", "2").await;
    subscribed(&mut ws, "cache-scores", &socket, None).await;
    let m = recv_json(&mut ws).await;
    assert_eq!(
        (m["event"].as_str(), m["data"].as_str()),
        (Some("score"), Some("2")),
        "{m}"
    );
}

#[tokio::test]
async fn http_api_refuses_bad_signatures_and_stale_timestamps() {
    let srv = server().await;
    let body = json!({"name": "e", "channel": "c", "data": "x"}).to_string();
    let path = "/apps/1/events";
    let cases = [
        ("wrong secret", KEY, "nope", now()),
        ("unknown key", "who", SECRET, now()),
        ("stale", KEY, SECRET, now() - 601),
        ("future", KEY, SECRET, now() + 601),
    ];
    for (what, key, secret, ts) in cases {
        let (status, text) = api_signed(srv.addr, "POST", path, &body, &[], key, secret, ts).await;
        assert_eq!(status, 401, "{what}: {text}");
    }
    // A body that is not the one signed.
    let q = sign::sign_query(KEY, SECRET.as_bytes(), "POST", path, b"{}", now(), &[]);
    let (status, _, text) = http(srv.addr, "POST", &format!("{path}?{q}"), &[], &body).await;
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("body_md5"), "{text}");
    // No signature at all, an unknown app.
    assert_eq!(http(srv.addr, "POST", path, &[], &body).await.0, 401);
    assert_eq!(
        api(srv.addr, "POST", "/apps/9/events", &body, &[]).await.0,
        404
    );
    // Bad bodies.
    for bad in [
        "{",
        r#"{"name":"e","data":"x"}"#,
        r#"{"name":"e","channel":"a b","data":"x"}"#,
    ] {
        assert_eq!(api(srv.addr, "POST", path, bad, &[]).await.0, 400, "{bad}");
    }
}

#[tokio::test]
async fn http_api_lists_channels_and_batches() {
    let srv = server().await;
    let (mut ws, socket) = pusher_client(srv.addr, KEY).await;
    subscribed(&mut ws, "a", &socket, None).await;
    subscribed(&mut ws, "presence-p", &socket, Some(r#"{"user_id":"u"}"#)).await;
    let (status, text) = api(srv.addr, "GET", "/apps/1/channels", "", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&text).expect("json"),
        json!({"channels": {"a": {}, "presence-p": {}}})
    );
    let (_, text) = api(
        srv.addr,
        "GET",
        "/apps/1/channels",
        "",
        &[("filter_by_prefix", "presence-"), ("info", "user_count")],
    )
    .await;
    assert_eq!(
        serde_json::from_str::<Value>(&text).expect("json"),
        json!({"channels": {"presence-p": {"user_count": 1}}})
    );
    let (_, text) = api(
        srv.addr,
        "GET",
        "/apps/1/channels/a",
        "",
        &[("info", "subscription_count")],
    )
    .await;
    assert_eq!(
        serde_json::from_str::<Value>(&text).expect("json"),
        json!({"occupied": true, "subscription_count": 1})
    );
    let (_, text) = api(srv.addr, "GET", "/apps/1/channels/empty", "", &[]).await;
    assert_eq!(
        serde_json::from_str::<Value>(&text).expect("json"),
        json!({"occupied": false})
    );

    let batch = json!({"batch": [
        {"channel": "a", "name": "one", "data": "1"},
        {"channel": "a", "name": "two", "data": "2"},
    ]})
    .to_string();
    let (status, text) = api(srv.addr, "POST", "/apps/1/batch_events", &batch, &[]).await;
    assert_eq!((status, text.as_str()), (200, "{}"));
    assert_eq!(recv(&mut ws).await["event"], "one");
    assert_eq!(recv(&mut ws).await["event"], "two");
    // socket_id excludes that connection.
    let body =
        json!({"name": "skip", "channel": "a", "data": "x", "socket_id": socket}).to_string();
    assert_eq!(
        api(srv.addr, "POST", "/apps/1/events", &body, &[]).await.0,
        200
    );
    trigger(srv.addr, "a", "after", "y").await;
    assert_eq!(recv(&mut ws).await["event"], "after");
}

#[tokio::test]
async fn webhooks_report_occupancy_members_and_client_events() {
    let (url, mut hooks) = webhook_receiver().await;
    let mut with_hooks = app("1", KEY, SECRET);
    with_hooks.webhook_url = Some(url);
    let srv = serve_app(with_hooks, Some(0)).await;
    let (mut ws, socket) = pusher_client(srv.addr, KEY).await;
    subscribed(
        &mut ws,
        "presence-room",
        &socket,
        Some(r#"{"user_id":"ann"}"#),
    )
    .await;
    send_json(
        &mut ws,
        json!({"event": "client-hi", "channel": "presence-room", "data": {"x": 1}}),
    )
    .await;
    // A ping answered: the client event went through before we leave.
    send_json(&mut ws, json!({"event": "pusher:ping", "data": {}})).await;
    assert_eq!(recv(&mut ws).await["event"], "pusher:pong");
    drop(ws);

    let want = [
        json!({"name": "channel_occupied", "channel": "presence-room"}),
        json!({"name": "member_added", "channel": "presence-room", "user_id": "ann"}),
        json!({"name": "client_event", "channel": "presence-room", "event": "client-hi",
               "data": "{\"x\":1}", "socket_id": socket, "user_id": "ann"}),
        json!({"name": "member_removed", "channel": "presence-room", "user_id": "ann"}),
        json!({"name": "channel_vacated", "channel": "presence-room"}),
    ];
    let mut got = Vec::new();
    while got.len() < want.len() {
        let (key, signature, body) = tokio::time::timeout(WAIT, hooks.recv())
            .await
            .expect("webhook in time")
            .expect("receiver running");
        assert_eq!(key, KEY);
        assert!(
            sign::verify_hex(SECRET.as_bytes(), body.as_bytes(), &signature),
            "signature of {body}"
        );
        let v: Value = serde_json::from_str(&body).expect("json");
        assert!(v["time_ms"].as_u64().is_some(), "{v}");
        got.extend(v["events"].as_array().expect("events").iter().cloned());
    }
    assert_eq!(got, want);
}

#[tokio::test]
async fn webhooks_are_only_the_events_the_app_chose() {
    let (url, mut hooks) = webhook_receiver().await;
    let mut with_hooks = app("1", KEY, SECRET);
    with_hooks.webhook_url = Some(url);
    with_hooks.webhook_events = Some(vec!["member_added".into(), "member_removed".into()]);
    let srv = serve_app(with_hooks, Some(0)).await;
    let (mut ws, socket) = pusher_client(srv.addr, KEY).await;
    subscribed(
        &mut ws,
        "presence-room",
        &socket,
        Some(r#"{"user_id":"ann"}"#),
    )
    .await;
    send_json(
        &mut ws,
        json!({"event": "client-hi", "channel": "presence-room", "data": {"x": 1}}),
    )
    .await;
    send_json(&mut ws, json!({"event": "pusher:ping", "data": {}})).await;
    assert_eq!(recv(&mut ws).await["event"], "pusher:pong");
    drop(ws);
    let mut got = hook_events(&mut hooks, 2).await;
    // The vacated that follows would come in order after the removal.
    got.extend(later_hook_events(&mut hooks, std::time::Duration::from_millis(300)).await);
    assert_eq!(
        got,
        [
            json!({"name": "member_added", "channel": "presence-room", "user_id": "ann"}),
            json!({"name": "member_removed", "channel": "presence-room", "user_id": "ann"}),
        ]
    );
}

#[tokio::test]
async fn a_quick_resubscribe_makes_neither_vacated_nor_occupied() {
    let (url, mut hooks) = webhook_receiver().await;
    let mut with_hooks = app("1", KEY, SECRET);
    with_hooks.webhook_url = Some(url);
    let delay = 1000;
    let srv = serve_app(with_hooks, Some(delay)).await;
    let (mut ws, socket) = pusher_client(srv.addr, KEY).await;
    subscribed(&mut ws, "room", &socket, None).await;
    send_json(
        &mut ws,
        json!({"event": "pusher:unsubscribe", "data": {"channel": "room"}}),
    )
    .await;
    // Back at once (the unsubscribe is handled before this subscribe).
    subscribed(&mut ws, "room", &socket, None).await;
    drop(ws);
    let mut got = hook_events(&mut hooks, 2).await;
    got.extend(later_hook_events(&mut hooks, std::time::Duration::from_millis(delay + 300)).await);
    assert_eq!(
        got,
        [
            json!({"name": "channel_occupied", "channel": "room"}),
            json!({"name": "channel_vacated", "channel": "room"}),
        ]
    );
}

#[tokio::test]
async fn webhooks_go_to_https_urls_checked_against_the_given_roots() {
    let (url, mut hooks, ca) = tls_webhook_receiver().await;
    let mut with_hooks = app("1", KEY, SECRET);
    with_hooks.webhook_url = Some(url);
    with_hooks.webhook_ca_file = Some(ca);
    let srv = serve_app(with_hooks, None).await;
    let (mut ws, socket) = pusher_client(srv.addr, KEY).await;
    subscribed(&mut ws, "secure", &socket, None).await;
    let (key, signature, body) = tokio::time::timeout(WAIT, hooks.recv())
        .await
        .expect("webhook in time")
        .expect("receiver running");
    assert_eq!(key, KEY);
    assert!(sign::verify_hex(
        SECRET.as_bytes(),
        body.as_bytes(),
        &signature
    ));
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        v["events"],
        json!([{"name": "channel_occupied", "channel": "secure"}])
    );
}

#[tokio::test]
async fn an_https_webhook_server_outside_the_roots_gets_nothing() {
    let (url, mut hooks, _) = tls_webhook_receiver().await;
    // Roots that do not hold the receiver's certificate.
    let other = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
    let mut with_hooks = app("1", KEY, SECRET);
    with_hooks.webhook_url = Some(url);
    with_hooks.webhook_ca_file = Some(temp_file("other-ca.pem", &other.cert.pem()));
    let srv = serve_app(with_hooks, None).await;
    let (mut ws, socket) = pusher_client(srv.addr, KEY).await;
    subscribed(&mut ws, "secure", &socket, None).await;
    // The first attempt and its first retry (after 1 s) are refused.
    let got = tokio::time::timeout(std::time::Duration::from_millis(1500), hooks.recv()).await;
    assert!(got.is_err(), "delivered to an untrusted server: {got:?}");
}

#[test]
fn an_https_webhook_needs_roots_that_load() {
    let mut a = app("1", KEY, SECRET);
    a.webhook_url = Some("https://localhost:1/hooks".into());
    a.webhook_ca_file = Some(temp_file("not-a-cert.pem", "nothing here"));
    let args = ServeArgs {
        pusher: Some(PusherArgs {
            apps: vec![a],
            ..Default::default()
        }),
        ..Default::default()
    };
    let err = herald_server::ServerConfig::resolve(args).expect_err("refused");
    assert!(err.to_string().contains("webhook_ca_file"), "{err}");
}

/// An app with `subscription_count` on: every Pusher subscriber of a
/// non-presence channel hears its count (Herald subscribers included) when
/// it changes, its own join too, after its `subscription_succeeded`.
#[tokio::test]
async fn subscription_counts_reach_the_subscribers_of_apps_that_enable_them() {
    let mut a = app("1", KEY, SECRET);
    a.subscription_count = Some(true);
    let srv = serve_app(a, None).await;
    let (mut p1, s1) = pusher_client(srv.addr, KEY).await;
    subscribed(&mut p1, "news", &s1, None).await;
    count_reaches(&mut p1, "news", 1).await;
    let (mut p2, s2) = pusher_client(srv.addr, KEY).await;
    subscribed(&mut p2, "private-news", &s2, None).await;
    count_reaches(&mut p2, "private-news", 1).await;
    subscribed(&mut p2, "news", &s2, None).await;
    count_reaches(&mut p2, "news", 2).await;
    count_reaches(&mut p1, "news", 2).await;
    let mut h = json_client(srv.addr).await;
    subscribe_json(&mut h, 2, "pusher-1:news").await;
    count_reaches(&mut p1, "news", 3).await;
    count_reaches(&mut p2, "news", 3).await;
    drop(h);
    count_reaches(&mut p1, "news", 2).await;
    send_json(
        &mut p2,
        json!({"event": "pusher:unsubscribe", "data": {"channel": "news"}}),
    )
    .await;
    count_reaches(&mut p1, "news", 1).await;
}

/// Presence channels (their members are the count) and apps that leave the
/// setting off get no `subscription_count`: after a join and well past the
/// throttle's tick, the next message is the next event.
#[tokio::test]
async fn no_subscription_counts_on_presence_channels_or_by_default() {
    for on in [true, false] {
        let mut a = app("1", KEY, SECRET);
        a.subscription_count = Some(on);
        let srv = serve_app(a, None).await;
        let channel = if on { "presence-room" } else { "news" };
        let data = on.then(|| json!({"user_id": "ann"}).to_string());
        let (mut p, s) = pusher_client(srv.addr, KEY).await;
        subscribed(&mut p, channel, &s, data.as_deref()).await;
        let (mut q, sq) = pusher_client(srv.addr, KEY).await;
        let data = on.then(|| json!({"user_id": "bob"}).to_string());
        subscribed(&mut q, channel, &sq, data.as_deref()).await;
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        trigger(srv.addr, channel, "after", "{}").await;
        if on {
            assert_eq!(recv(&mut p).await["event"], "pusher_internal:member_added");
        }
        assert_eq!(recv(&mut p).await["event"], "after", "{channel}");
        assert_eq!(recv(&mut q).await["event"], "after", "{channel}");
    }
}
