//! Pub/sub between real WebSocket connections, in both encodings and across them.
mod common;

use bytes::{Bytes, BytesMut};
use common::*;
use futures_util::SinkExt;
use herald_proto::{Command, Encoding, Push, Reply, Request, ServerMsg};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

async fn bin_send(ws: &mut Ws, id: u32, cmd: Command) {
    let mut out = BytesMut::new();
    Encoding::Binary.encode_request(&Request { id, cmd }, &mut out);
    ws.send(Message::binary(out.freeze())).await.expect("send");
}

async fn bin_recv(ws: &mut Ws) -> ServerMsg {
    match next_msg(ws).await {
        Message::Binary(b) => Encoding::Binary.decode_server(&b).expect("decode"),
        other => panic!("expected binary, got {other:?}"),
    }
}

async fn binary_client(addr: std::net::SocketAddr) -> Ws {
    let mut ws = connect(addr, "/ws", Some("herald.binary")).await;
    bin_send(
        &mut ws,
        1,
        Command::Connect {
            token: None,
            name: None,
        },
    )
    .await;
    match bin_recv(&mut ws).await {
        ServerMsg::Reply {
            id: 1,
            reply: Reply::Connect { .. },
        } => {}
        other => panic!("unexpected {other:?}"),
    }
    ws
}

#[tokio::test]
async fn json_publish_reaches_subscribers_in_order() {
    let srv = start_default().await;
    let mut sub1 = json_client(srv.addr).await;
    let mut sub2 = json_client(srv.addr).await;
    let mut publisher = json_client(srv.addr).await;
    subscribe_json(&mut sub1, 2, "chat").await;
    subscribe_json(&mut sub2, 2, "chat").await;
    for i in 0..50 {
        send_json(
            &mut publisher,
            json!({"id": 10 + i, "publish": {"channel": "chat", "data": {"n": i}}}),
        )
        .await;
    }
    for i in 0..50 {
        let r = recv_json(&mut publisher).await;
        assert_eq!(r["id"], 10 + i, "{r}");
        assert_eq!(r["publish"]["offset"], i + 1, "{r}");
    }
    for sub in [&mut sub1, &mut sub2] {
        for i in 0..50 {
            let m = recv_json(sub).await;
            assert_eq!(m["pub"]["channel"], "chat");
            assert_eq!(m["pub"]["offset"], i + 1);
            assert_eq!(m["pub"]["data"], json!({"n": i}));
        }
    }
}

#[tokio::test]
async fn binary_publish_reaches_binary_and_json_subscribers() {
    let srv = start_default().await;
    let mut bsub = binary_client(srv.addr).await;
    let mut jsub = json_client(srv.addr).await;
    let mut publisher = binary_client(srv.addr).await;
    bin_send(
        &mut bsub,
        2,
        Command::Subscribe {
            channel: "bin".into(),
            recover: None,
            join_leave: false,
            token: None,
        },
    )
    .await;
    assert!(matches!(
        bin_recv(&mut bsub).await,
        ServerMsg::Reply {
            id: 2,
            reply: Reply::Subscribe { .. }
        }
    ));
    subscribe_json(&mut jsub, 2, "bin").await;

    let payload = Bytes::from_static(&[0, 159, 146, 150, 255]); // not JSON, not UTF-8
    bin_send(
        &mut publisher,
        3,
        Command::Publish {
            channel: "bin".into(),
            data: payload.clone(),
        },
    )
    .await;
    match bin_recv(&mut publisher).await {
        ServerMsg::Reply {
            id: 3,
            reply: Reply::Publish { offset: 1, .. },
        } => {}
        other => panic!("unexpected {other:?}"),
    }
    match bin_recv(&mut bsub).await {
        ServerMsg::Push(Push::Publication {
            channel,
            offset: 1,
            data,
        }) => {
            assert_eq!(channel, "bin");
            assert_eq!(data, payload);
        }
        other => panic!("unexpected {other:?}"),
    }
    let m = recv_json(&mut jsub).await;
    assert_eq!(
        m["pub"]["b64"], "AJ+Slv8=",
        "non-JSON data reaches JSON clients as base64: {m}"
    );
}

#[tokio::test]
async fn json_data_reaches_binary_subscribers_verbatim() {
    let srv = start_default().await;
    let mut bsub = binary_client(srv.addr).await;
    let mut publisher = json_client(srv.addr).await;
    bin_send(
        &mut bsub,
        2,
        Command::Subscribe {
            channel: "mixed".into(),
            recover: None,
            join_leave: false,
            token: None,
        },
    )
    .await;
    bin_recv(&mut bsub).await;
    send_json(
        &mut publisher,
        json!({"id": 0, "publish": {"channel": "mixed", "data": [1, "two", {"3": null}]}}),
    )
    .await;
    match bin_recv(&mut bsub).await {
        ServerMsg::Push(Push::Publication { data, .. }) => {
            let v: serde_json::Value = serde_json::from_slice(&data).expect("JSON text");
            assert_eq!(v, json!([1, "two", {"3": null}]));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn fire_and_forget_publish_gets_no_reply() {
    let srv = start_default().await;
    let mut c = json_client(srv.addr).await;
    subscribe_json(&mut c, 2, "quiet").await;
    send_json(&mut c, json!({"publish": {"channel": "quiet", "data": 1}})).await;
    send_json(&mut c, json!({"id": 5, "ping": {}})).await;
    let first = recv_json(&mut c).await;
    assert_eq!(first["pub"]["data"], 1, "{first}");
    let second = recv_json(&mut c).await;
    assert_eq!(second["id"], 5, "only the ping is answered: {second}");
}

#[tokio::test]
async fn unsubscribe_stops_delivery_and_commands_need_connect() {
    let srv = start_default().await;
    let mut fresh = connect(srv.addr, "/ws", Some("herald.json")).await;
    send_json(&mut fresh, json!({"id": 1, "subscribe": {"channel": "x"}})).await;
    let r = recv_json(&mut fresh).await;
    assert_eq!(r["error"]["code"], 101, "{r}");

    let mut c = json_client(srv.addr).await;
    subscribe_json(&mut c, 2, "x").await;
    send_json(&mut c, json!({"id": 3, "subscribe": {"channel": "x"}})).await;
    assert_eq!(recv_json(&mut c).await["error"]["code"], 105);
    send_json(&mut c, json!({"id": 4, "unsubscribe": {"channel": "x"}})).await;
    assert_eq!(recv_json(&mut c).await["id"], 4);
    send_json(
        &mut c,
        json!({"id": 5, "publish": {"channel": "x", "data": "gone"}}),
    )
    .await;
    let r = recv_json(&mut c).await;
    assert_eq!(
        r["id"], 5,
        "no publication after unsubscribe, only the reply: {r}"
    );
    send_json(&mut c, json!({"id": 6, "unsubscribe": {"channel": "x"}})).await;
    assert_eq!(recv_json(&mut c).await["error"]["code"], 106);
}

#[tokio::test]
async fn presence_lists_subscribers() {
    let srv = start_default().await;
    let mut a = json_client(srv.addr).await;
    let mut b = json_client(srv.addr).await;
    subscribe_json(&mut a, 2, "room").await;
    subscribe_json(&mut b, 2, "room").await;
    send_json(&mut a, json!({"id": 3, "presence": {"channel": "room"}})).await;
    let r = recv_json(&mut a).await;
    assert_eq!(
        r["presence"]["clients"].as_array().map(Vec::len),
        Some(2),
        "{r}"
    );
}

#[tokio::test]
async fn history_returns_retained_publications() {
    let srv = start(herald_server::ServeArgs {
        history_size: Some(3),
        ..Default::default()
    })
    .await;
    let mut c = json_client(srv.addr).await;
    for i in 0..5 {
        send_json(&mut c, json!({"publish": {"channel": "h", "data": i}})).await;
    }
    send_json(&mut c, json!({"id": 9, "history": {"channel": "h"}})).await;
    let r = recv_json(&mut c).await;
    let offsets: Vec<u64> = r["history"]["publications"]
        .as_array()
        .expect("publications")
        .iter()
        .filter_map(|p| p["offset"].as_u64())
        .collect();
    assert_eq!(offsets, vec![3, 4, 5], "{r}");
    assert_eq!(r["history"]["offset"], 5);
}
