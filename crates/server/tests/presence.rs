//! Presence: who is subscribed, and join/leave pushes for subscribers that ask
//! (`join_leave: true`) — on subscribe, unsubscribe and abrupt disconnect, never
//! about oneself, never to subscribers that did not ask, in both encodings.
mod common;

use bytes::BytesMut;
use common::*;
use futures_util::SinkExt;
use herald_proto::{ClientInfo, Command, Encoding, Push, Reply, Request, ServerMsg};
use serde_json::{json, Value};
use std::net::SocketAddr;
use tokio_tungstenite::tungstenite::Message;

/// A JSON client and its wire id (from the connect reply).
async fn client(addr: SocketAddr) -> (Ws, String) {
    let mut ws = connect(addr, "/ws", Some("herald.json")).await;
    send_json(&mut ws, json!({"id": 1, "connect": {}})).await;
    let r = recv_json(&mut ws).await;
    let id = r["connect"]["client"]
        .as_str()
        .expect("client id")
        .to_string();
    (ws, id)
}

async fn subscribe(ws: &mut Ws, channel: &str, join_leave: bool) {
    send_json(
        ws,
        json!({"id": 2, "subscribe": {"channel": channel, "join_leave": join_leave}}),
    )
    .await;
    let r = recv_json(ws).await;
    assert!(r["subscribe"].is_object(), "{r}");
}

fn join(channel: &str, client: &str) -> Value {
    json!({"join": {"channel": channel, "client": client, "user": ""}})
}

fn leave(channel: &str, client: &str) -> Value {
    json!({"leave": {"channel": channel, "client": client, "user": ""}})
}

/// Proves nothing else was queued for `ws`: a ping's reply comes next.
async fn nothing_more(ws: &mut Ws) {
    send_json(ws, json!({"id": 77, "ping": {}})).await;
    let r = recv_json(ws).await;
    assert_eq!(
        r,
        json!({"id": 77, "ping": {}}),
        "expected nothing but the ping reply"
    );
}

#[tokio::test]
async fn listeners_see_joins_and_leaves_of_others_only() {
    let srv = start_default().await;
    let (mut quiet, _) = client(srv.addr).await;
    subscribe(&mut quiet, "room", false).await;
    let (mut watcher, watcher_id) = client(srv.addr).await;
    subscribe(&mut watcher, "room", true).await;

    // Joins and an orderly leave.
    let (mut visitor, visitor_id) = client(srv.addr).await;
    subscribe(&mut visitor, "room", false).await;
    assert_eq!(recv_json(&mut watcher).await, join("room", &visitor_id));
    send_json(
        &mut visitor,
        json!({"id": 3, "unsubscribe": {"channel": "room"}}),
    )
    .await;
    assert_eq!(recv_json(&mut visitor).await["id"], 3);
    assert_eq!(recv_json(&mut watcher).await, leave("room", &visitor_id));

    // A connection that just goes away leaves too.
    let (mut crasher, crasher_id) = client(srv.addr).await;
    subscribe(&mut crasher, "room", false).await;
    assert_eq!(recv_json(&mut watcher).await, join("room", &crasher_id));
    drop(crasher);
    assert_eq!(recv_json(&mut watcher).await, leave("room", &crasher_id));

    // Another listener: the first hears of it; it hears of nobody before it,
    // nor of itself; both hear the next visitor.
    let (mut second, second_id) = client(srv.addr).await;
    subscribe(&mut second, "room", true).await;
    assert_eq!(recv_json(&mut watcher).await, join("room", &second_id));
    subscribe(&mut visitor, "room", false).await;
    assert_eq!(recv_json(&mut watcher).await, join("room", &visitor_id));
    assert_eq!(recv_json(&mut second).await, join("room", &visitor_id));
    // The first listener leaving is news to the second.
    drop(watcher);
    assert_eq!(recv_json(&mut second).await, leave("room", &watcher_id));

    nothing_more(&mut second).await;
    // Joins and leaves of other channels, and every one of this channel for a
    // subscriber that did not ask: none.
    nothing_more(&mut quiet).await;
    nothing_more(&mut visitor).await;
}

#[tokio::test]
async fn presence_lists_the_subscribers() {
    let srv = start_default().await;
    let (mut a, a_id) = client(srv.addr).await;
    let (mut b, b_id) = client(srv.addr).await;
    let (mut other, _) = client(srv.addr).await;
    subscribe(&mut a, "lobby", true).await;
    subscribe(&mut b, "lobby", false).await;
    subscribe(&mut other, "elsewhere", false).await;
    subscribe(&mut other, "lobby.*", false).await; // a pattern is not a member
    assert_eq!(recv_json(&mut a).await, join("lobby", &b_id));

    let list = |r: &Value| {
        let mut ids: Vec<String> = r["presence"]["clients"]
            .as_array()
            .expect("clients")
            .iter()
            .map(|c| {
                assert_eq!(c["user"], "", "anonymous until auth");
                c["client"].as_str().expect("id").to_string()
            })
            .collect();
        ids.sort();
        ids
    };
    send_json(
        &mut other,
        json!({"id": 5, "presence": {"channel": "lobby"}}),
    )
    .await;
    let mut expected = vec![a_id.clone(), b_id];
    expected.sort();
    assert_eq!(list(&recv_json(&mut other).await), expected);

    drop(b);
    recv_json(&mut a).await; // the leave
    send_json(
        &mut other,
        json!({"id": 6, "presence": {"channel": "lobby"}}),
    )
    .await;
    assert_eq!(list(&recv_json(&mut other).await), vec![a_id]);
    send_json(
        &mut other,
        json!({"id": 7, "presence": {"channel": "nobody"}}),
    )
    .await;
    assert_eq!(
        recv_json(&mut other).await,
        json!({"id": 7, "presence": {"clients": []}})
    );
}

#[tokio::test]
async fn presence_stats_counts_without_listing() {
    let srv = start_default().await;
    let (mut asker, _) = client(srv.addr).await;
    let stats = |id: u32, clients: u64| json!({"id": id, "presence_stats": {"clients": clients, "users": 0}});
    send_json(
        &mut asker,
        json!({"id": 4, "presence_stats": {"channel": "hall"}}),
    )
    .await;
    assert_eq!(recv_json(&mut asker).await, stats(4, 0));
    // The watcher is a member too; its join/leave pushes say when the
    // server has seen each change.
    let (mut watcher, _) = client(srv.addr).await;
    subscribe(&mut watcher, "hall", true).await;
    let mut members = Vec::new();
    for _ in 0..5 {
        let (mut m, id) = client(srv.addr).await;
        subscribe(&mut m, "hall", false).await;
        assert_eq!(recv_json(&mut watcher).await, join("hall", &id));
        members.push(m);
    }
    // A pattern subscriber is not a member.
    subscribe(&mut asker, "hall.>", false).await;
    subscribe(&mut asker, ">", false).await;
    send_json(
        &mut asker,
        json!({"id": 5, "presence_stats": {"channel": "hall"}}),
    )
    .await;
    assert_eq!(recv_json(&mut asker).await, stats(5, 6));
    members.truncate(2); // three connections just drop
    for _ in 0..3 {
        assert!(recv_json(&mut watcher).await["leave"].is_object());
    }
    send_json(
        &mut asker,
        json!({"id": 6, "presence_stats": {"channel": "hall"}}),
    )
    .await;
    assert_eq!(recv_json(&mut asker).await, stats(6, 3));
    // Patterns and bad names are refused as for presence.
    for (id, bad) in [(7, "hall.*"), (8, "")] {
        send_json(
            &mut asker,
            json!({"id": id, "presence_stats": {"channel": bad}}),
        )
        .await;
        let r = recv_json(&mut asker).await;
        assert_eq!(r["id"], id, "{r}");
        assert_eq!(r["error"]["code"], 109, "{r}");
    }
}

#[tokio::test]
async fn binary_listeners_get_binary_pushes() {
    let srv = start_default().await;
    let mut ws = connect(srv.addr, "/ws", Some("herald.binary")).await;
    let send = |id, cmd| {
        let mut out = BytesMut::new();
        Encoding::Binary.encode_request(&Request { id, cmd }, &mut out);
        Message::binary(out.freeze())
    };
    let recv = |m: Message| match m {
        Message::Binary(b) => Encoding::Binary.decode_server(&b).expect("decode"),
        other => panic!("expected a binary message, got {other:?}"),
    };
    ws.send(send(
        1,
        Command::Connect {
            token: None,
            name: None,
        },
    ))
    .await
    .expect("send");
    recv(next_msg(&mut ws).await);
    ws.send(send(
        2,
        Command::Subscribe {
            channel: "bin".into(),
            recover: None,
            join_leave: true,
            token: None,
        },
    ))
    .await
    .expect("send");
    assert!(matches!(
        recv(next_msg(&mut ws).await),
        ServerMsg::Reply {
            id: 2,
            reply: Reply::Subscribe { .. }
        }
    ));
    let (mut visitor, visitor_id) = client(srv.addr).await;
    subscribe(&mut visitor, "bin", false).await;
    drop(visitor);
    let info = ClientInfo {
        client: visitor_id,
        user: String::new(),
        info: Default::default(),
    };
    assert_eq!(
        recv(next_msg(&mut ws).await),
        ServerMsg::Push(Push::Join {
            channel: "bin".into(),
            info: info.clone()
        })
    );
    assert_eq!(
        recv(next_msg(&mut ws).await),
        ServerMsg::Push(Push::Leave {
            channel: "bin".into(),
            info
        })
    );
    ws.send(send(
        3,
        Command::PresenceStats {
            channel: "bin".into(),
        },
    ))
    .await
    .expect("send");
    assert_eq!(
        recv(next_msg(&mut ws).await),
        ServerMsg::Reply {
            id: 3,
            reply: Reply::PresenceStats {
                clients: 1,
                users: 0
            }
        }
    );
}

#[tokio::test]
async fn join_leave_on_a_pattern_is_refused() {
    let srv = start_default().await;
    let (mut ws, _) = client(srv.addr).await;
    send_json(
        &mut ws,
        json!({"id": 2, "subscribe": {"channel": "room.*", "join_leave": true}}),
    )
    .await;
    assert_eq!(recv_json(&mut ws).await["error"]["code"], 111);
    // Not left half-subscribed.
    subscribe(&mut ws, "room.*", false).await;
}
