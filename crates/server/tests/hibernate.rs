//! Hibernation: idle plain WebSocket and raw TCP connections park off tokio
//! (`--hibernate-after`) and resume on input, on anything sent to them, on
//! heartbeats and on shutdown, losing and reordering nothing. Each test waits
//! for the server's own gauge (`herald_hibernated_connections`) to show the
//! connection parked, so a server that never parks fails them.
mod common;

use bytes::BytesMut;
use common::*;
use herald_proto::{Command, Encoding, Push, Reply, Request, ServerMsg};
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A server whose idle connections park after `ms` milliseconds.
fn args(ms: u64) -> ServeArgs {
    ServeArgs {
        hibernate_after: Some(ms),
        ..Default::default()
    }
}

/// One value of the server's `/metrics`.
async fn metric(addr: SocketAddr, name: &str) -> u64 {
    let (status, _, body) = http(addr, "GET", "/metrics", &[], "").await;
    assert_eq!(status, 200);
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
}

/// Waits until exactly `n` connections are parked (bounded by `WAIT`).
async fn parked(addr: SocketAddr, n: u64) {
    let until = tokio::time::Instant::now() + WAIT;
    loop {
        let now = metric(addr, "herald_hibernated_connections").await;
        if now == n {
            return;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "{now} connections parked, never {n}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn publish(addr: SocketAddr, channel: &str, data: Value) {
    let body = json!({"channel": channel, "data": data}).to_string();
    let (status, _, text) = http(addr, "POST", "/api/publish", &[], &body).await;
    assert_eq!(status, 200, "{text}");
}

#[tokio::test]
async fn a_publication_resumes_a_parked_client_in_order() {
    let srv = start(args(20)).await;
    let mut ws = json_client(srv.addr).await;
    subscribe_json(&mut ws, 2, "news").await;
    for round in 0..3 {
        parked(srv.addr, 1).await;
        for i in 0..20 {
            publish(srv.addr, "news", json!({"round": round, "i": i})).await;
        }
        for i in 0..20 {
            let m = recv_json(&mut ws).await;
            assert_eq!(m["pub"]["data"], json!({"round": round, "i": i}), "{m}");
        }
    }
}

#[tokio::test]
async fn a_command_resumes_a_parked_client() {
    let srv = start(args(20)).await;
    let mut ws = json_client(srv.addr).await;
    for id in 10..13 {
        parked(srv.addr, 1).await;
        send_json(&mut ws, json!({"id": id, "ping": {}})).await;
        assert_eq!(recv_json(&mut ws).await, json!({"id": id, "ping": {}}));
    }
}

#[tokio::test]
async fn a_parked_client_that_goes_away_is_cleaned_up() {
    let srv = start(args(20)).await;
    let (mut watcher, _) = presence_client(srv.addr).await;
    send_json(
        &mut watcher,
        json!({"id": 2, "subscribe": {"channel": "room", "join_leave": true}}),
    )
    .await;
    assert!(recv_json(&mut watcher).await["subscribe"].is_object());
    let (mut gone, gone_id) = presence_client(srv.addr).await;
    send_json(
        &mut gone,
        json!({"id": 2, "subscribe": {"channel": "room"}}),
    )
    .await;
    assert!(recv_json(&mut gone).await["subscribe"].is_object());
    assert_eq!(recv_json(&mut watcher).await["join"]["client"], gone_id);
    parked(srv.addr, 2).await;
    drop(gone);
    let m = recv_json(&mut watcher).await;
    assert_eq!(m["leave"]["client"], gone_id, "{m}");
    send_json(
        &mut watcher,
        json!({"id": 3, "presence": {"channel": "room"}}),
    )
    .await;
    let r = recv_json(&mut watcher).await;
    assert_eq!(
        r["presence"]["clients"].as_array().map(Vec::len),
        Some(1),
        "{r}"
    );
    // The registry and the gauge forget it too.
    let until = tokio::time::Instant::now() + WAIT;
    while metric(srv.addr, "herald_connections{transport=\"websocket\"}").await != 1 {
        assert!(
            tokio::time::Instant::now() < until,
            "client never unregistered"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn presence_client(addr: SocketAddr) -> (Ws, String) {
    let mut ws = connect(addr, "/ws", Some("herald.json")).await;
    send_json(&mut ws, json!({"id": 1, "connect": {}})).await;
    let r = recv_json(&mut ws).await;
    let id = r["connect"]["client"].as_str().expect("id").to_string();
    (ws, id)
}

#[tokio::test]
async fn parked_clients_get_1001_on_shutdown() {
    let srv = start(args(20)).await;
    let mut a = json_client(srv.addr).await;
    let mut b = json_client(srv.addr).await;
    parked(srv.addr, 2).await;
    srv.shutdown.cancel();
    assert_eq!(close_code(&mut a).await, 1001);
    assert_eq!(close_code(&mut b).await, 1001);
    tokio::time::timeout(WAIT, srv.handle)
        .await
        .expect("server stops")
        .expect("server task");
}

#[tokio::test]
async fn a_parked_client_that_never_pongs_is_closed_with_3000() {
    let srv = start(ServeArgs {
        ping_interval: Some(1),
        pong_timeout: Some(1),
        ..args(20)
    })
    .await;
    let mut mute = Raw::connect(srv.addr, "/ws", Some("herald.json")).await;
    parked(srv.addr, 1).await;
    assert_eq!(mute.close_code().await, Some(3000));
}

// Two worker threads: the push and the park truly race.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_racing_with_parking_are_all_delivered_in_order() {
    let srv = start(args(1)).await;
    let mut ws = json_client(srv.addr).await;
    subscribe_json(&mut ws, 2, "race").await;
    // The publisher is a connection too (it parks and resumes as well).
    let mut publisher = json_client(srv.addr).await;
    let rounds = 2000u32;
    for i in 0..rounds {
        if i % 500 == 0 {
            // Certainly parked now; the others race with parking.
            parked(srv.addr, 2).await;
        } else if i % 2 == 0 {
            // Around the 1 ms delay: parks start before, during and after.
            tokio::time::sleep(Duration::from_micros(u64::from(i % 13) * 100)).await;
        }
        send_json(
            &mut publisher,
            json!({"id": i + 10, "publish": {"channel": "race", "data": i}}),
        )
        .await;
        assert_eq!(recv_json(&mut ws).await["pub"]["data"], json!(i));
        assert_eq!(recv_json(&mut publisher).await["id"], i + 10);
    }
    assert!(metric(srv.addr, "herald_hibernations_total").await >= 8);
}

// Two worker threads: the push and the park truly race.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_racing_with_parking_are_all_answered() {
    let srv = start(args(1)).await;
    let mut ws = json_client(srv.addr).await;
    for id in 0..300u32 {
        if id % 50 == 0 {
            parked(srv.addr, 1).await;
        } else if id % 3 == 0 {
            tokio::time::sleep(Duration::from_micros(700 + 150 * u64::from(id % 7))).await;
        }
        send_json(&mut ws, json!({"id": id + 10, "ping": {}})).await;
        assert_eq!(recv_json(&mut ws).await["id"], id + 10);
    }
}

/// A raw TCP client speaking the binary encoding.
struct Tcp(TcpStream);

impl Tcp {
    async fn send(&mut self, id: u32, cmd: Command) {
        let mut body = BytesMut::new();
        Encoding::Binary.encode_request(&Request { id, cmd }, &mut body);
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        self.0.write_all(&frame).await.expect("write");
    }

    /// The next message, heartbeats skipped.
    async fn recv(&mut self) -> ServerMsg {
        loop {
            let mut len = [0u8; 4];
            tokio::time::timeout(WAIT, self.0.read_exact(&mut len))
                .await
                .expect("timed out")
                .expect("read");
            let n = u32::from_be_bytes(len) as usize;
            if n == 0 {
                continue;
            }
            let mut body = vec![0u8; n];
            self.0.read_exact(&mut body).await.expect("read body");
            return Encoding::Binary.decode_server(&body).expect("decode");
        }
    }
}

#[tokio::test]
async fn a_parked_tcp_client_resumes_on_publication_and_command() {
    let srv = start_with_tcp(args(20)).await;
    let addr = srv.tcp_addr.expect("tcp");
    let mut t = Tcp(TcpStream::connect(addr).await.expect("connect"));
    t.send(
        1,
        Command::Connect {
            token: None,
            name: None,
        },
    )
    .await;
    assert!(matches!(
        t.recv().await,
        ServerMsg::Reply {
            id: 1,
            reply: Reply::Connect { .. }
        }
    ));
    t.send(
        2,
        Command::Subscribe {
            channel: "tcp-news".into(),
            recover: None,
            join_leave: false,
            token: None,
        },
    )
    .await;
    assert!(matches!(t.recv().await, ServerMsg::Reply { id: 2, .. }));
    for round in 0..3u32 {
        parked(srv.addr, 1).await;
        for i in 0..10u32 {
            publish(srv.addr, "tcp-news", json!(round * 100 + i)).await;
        }
        for i in 0..10u32 {
            match t.recv().await {
                ServerMsg::Push(Push::Publication { data, .. }) => {
                    assert_eq!(data.as_ref(), (round * 100 + i).to_string().as_bytes())
                }
                other => panic!("{other:?}"),
            }
        }
        parked(srv.addr, 1).await;
        t.send(3 + round, Command::Ping).await;
        assert!(matches!(t.recv().await, ServerMsg::Reply { id, .. } if id == 3 + round));
    }
}

/// A connection that is awake when it is pinged parks again soon after the
/// client's pong, not a whole `--hibernate-after` later: with 60 s of
/// `--hibernate-after` and a ping every second, the client (woken by a
/// command of its own, then only answering pings) is parked well within
/// `WAIT`; without the short rest it would stay awake for a minute.
#[tokio::test]
async fn a_heartbeat_answer_lets_the_connection_park_again_soon() {
    let srv = start(ServeArgs {
        ping_interval: Some(1),
        ..args(60_000)
    })
    .await;
    let mut ws = json_client(srv.addr).await;
    // A new connection parks after its opening exchange; a command resumes
    // it, and a resumed connection stays awake for `--hibernate-after`.
    parked(srv.addr, 1).await;
    send_json(&mut ws, json!({"id": 5, "ping": {}})).await;
    assert_eq!(recv_json(&mut ws).await["id"], 5);
    parked(srv.addr, 0).await;
    let woken = metric(srv.addr, "herald_hibernations_total").await;
    // Keep reading, so that the client library answers every ping.
    let reader = tokio::spawn(async move {
        use futures_util::StreamExt;
        while let Some(Ok(_)) = ws.next().await {}
    });
    parked(srv.addr, 1).await;
    assert_eq!(
        metric(srv.addr, "herald_hibernations_total").await,
        woken + 1
    );
    reader.abort();
}

/// A new connection parks as soon as its opening exchange is over, not a
/// whole `--hibernate-after` later: with 60 s of it, a client that connects
/// and waits is parked well within `WAIT`.
#[tokio::test]
async fn a_new_connection_parks_after_its_opening_exchange() {
    let srv = start(args(60_000)).await;
    let mut ws = json_client(srv.addr).await;
    subscribe_json(&mut ws, 2, "first").await;
    parked(srv.addr, 1).await;
    publish(srv.addr, "first", json!(1)).await;
    assert_eq!(recv_json(&mut ws).await["pub"]["data"], json!(1));
}

/// Pings reach a parked connection and its pongs are read where it is
/// parked: it answers several without ever resuming (the number of parks
/// does not move), and is still served afterwards.
#[tokio::test]
async fn pongs_are_read_while_parked_without_resuming() {
    let srv = start(ServeArgs {
        ping_interval: Some(1),
        ..args(20)
    })
    .await;
    let mut ws = json_client(srv.addr).await;
    subscribe_json(&mut ws, 2, "beat").await;
    parked(srv.addr, 1).await;
    let parks = metric(srv.addr, "herald_hibernations_total").await;
    let (tx, mut rx) = tokio::sync::mpsc::channel(8);
    let reader = tokio::spawn(async move {
        use futures_util::StreamExt;
        // tungstenite answers each ping as it reads.
        while let Some(Ok(m)) = ws.next().await {
            if !m.is_ping() && tx.send(m).await.is_err() {
                return;
            }
        }
    });
    let until = tokio::time::Instant::now() + WAIT;
    while metric(srv.addr, "herald_hibernated_pongs_total").await < 3 {
        assert!(
            tokio::time::Instant::now() < until,
            "pongs never read parked"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(metric(srv.addr, "herald_hibernated_pings_total").await >= 3);
    assert_eq!(metric(srv.addr, "herald_hibernations_total").await, parks);
    assert_eq!(metric(srv.addr, "herald_hibernated_connections").await, 1);
    // A publication still resumes it and arrives.
    publish(srv.addr, "beat", json!("after")).await;
    let m = tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("publication");
    let text = m.expect("message").into_text().expect("text");
    let v: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(v["pub"]["data"], json!("after"), "{v}");
    reader.abort();
}

/// The JSON client of `Raw`: connected, its `connect` answered.
async fn raw_client(addr: SocketAddr) -> Raw {
    let mut raw = Raw::connect(addr, "/ws", Some("herald.json")).await;
    raw.send_frame(herald_ws::OpCode::Text, br#"{"id":1,"connect":{}}"#)
        .await;
    assert!(raw.next_json().await["connect"].is_object());
    raw
}

fn masked(opcode: herald_ws::OpCode, payload: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    herald_ws::encode_frame(&mut out, opcode, payload, Some(herald_ws::random_mask()));
    out.to_vec()
}

/// Waits until at least `n` pings were written to parked connections.
async fn pinged(addr: SocketAddr, n: u64) {
    let until = tokio::time::Instant::now() + WAIT;
    while metric(addr, "herald_hibernated_pings_total").await < n {
        assert!(tokio::time::Instant::now() < until, "never pinged parked");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A pong followed by the first half of a command, while parked (and
/// pinged there): the pong is read there, the half frame resumes the
/// connection (it leaves its parking place and stays awake while the frame
/// is incomplete), and the command, once whole, is answered as before.
#[tokio::test]
async fn a_partial_frame_while_parked_resumes_and_is_handled() {
    let srv = start(ServeArgs {
        ping_interval: Some(1),
        ..args(20)
    })
    .await;
    let mut raw = raw_client(srv.addr).await;
    parked(srv.addr, 1).await;
    pinged(srv.addr, 1).await;
    let pongs = metric(srv.addr, "herald_hibernated_pongs_total").await;
    let cmd = masked(herald_ws::OpCode::Text, br#"{"id":7,"ping":{}}"#);
    let mut bytes = masked(herald_ws::OpCode::Pong, b"");
    bytes.extend_from_slice(&cmd[..5]);
    raw.send_raw(&bytes).await;
    parked(srv.addr, 0).await;
    assert_eq!(
        metric(srv.addr, "herald_hibernated_pongs_total").await,
        pongs + 1
    );
    raw.send_raw(&cmd[5..]).await;
    assert_eq!(raw.next_json().await, json!({"id": 7, "ping": {}}));
    parked(srv.addr, 1).await;
}

/// Bytes that are not a valid frame reach a parked connection: it resumes
/// and closes with 1002 as a running one does.
#[tokio::test]
async fn garbage_while_parked_resumes_and_closes_with_1002() {
    let srv = start(ServeArgs {
        ping_interval: Some(1),
        ..args(20)
    })
    .await;
    let mut raw = raw_client(srv.addr).await;
    parked(srv.addr, 1).await;
    pinged(srv.addr, 1).await;
    // An unmasked pong: not an answer the parked connection may read.
    raw.send_raw(&[0x8a, 0x00]).await;
    assert_eq!(raw.close_code().await, Some(1002));
    assert_eq!(metric(srv.addr, "herald_hibernated_pongs_total").await, 0);
}

/// A raw TCP client answers the server's empty frames while parked (each
/// answer read there, the connection never resumed), then goes away: it is
/// unregistered as before.
#[tokio::test]
async fn a_parked_tcp_client_answers_heartbeats_then_goes_away() {
    let srv = start_with_tcp(ServeArgs {
        ping_interval: Some(1),
        ..args(20)
    })
    .await;
    let addr = srv.tcp_addr.expect("tcp");
    let mut t = Tcp(TcpStream::connect(addr).await.expect("connect"));
    t.send(
        1,
        Command::Connect {
            token: None,
            name: None,
        },
    )
    .await;
    assert!(matches!(t.recv().await, ServerMsg::Reply { id: 1, .. }));
    parked(srv.addr, 1).await;
    let parks = metric(srv.addr, "herald_hibernations_total").await;
    for _ in 0..2 {
        let mut beat = [9u8; 4];
        tokio::time::timeout(WAIT, t.0.read_exact(&mut beat))
            .await
            .expect("heartbeat")
            .expect("read");
        assert_eq!(beat, [0; 4]);
        t.0.write_all(&[0; 4]).await.expect("answer");
    }
    let until = tokio::time::Instant::now() + WAIT;
    while metric(srv.addr, "herald_hibernated_pongs_total").await < 2 {
        assert!(tokio::time::Instant::now() < until, "answers never read");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(metric(srv.addr, "herald_hibernations_total").await, parks);
    drop(t);
    let until = tokio::time::Instant::now() + WAIT;
    while metric(srv.addr, "herald_connections{transport=\"tcp\"}").await != 0 {
        assert!(
            tokio::time::Instant::now() < until,
            "client never unregistered"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    parked(srv.addr, 0).await;
}
