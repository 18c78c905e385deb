//! The raw TCP transport: binary encoding in length-prefixed frames, same
//! session as WebSocket, delivery across transports, bad framing refused.
mod common;

use bytes::BytesMut;
use common::*;
use herald_proto::{Command, Encoding, Push, Reply, Request, ServerMsg};
use herald_server::ServeArgs;
use serde_json::json;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Tcp {
    s: TcpStream,
}

impl Tcp {
    async fn connect(addr: SocketAddr) -> Tcp {
        let mut t = Tcp {
            s: TcpStream::connect(addr).await.expect("connect"),
        };
        t.send(
            1,
            Command::Connect {
                token: None,
                name: Some("native".into()),
            },
        )
        .await;
        assert!(matches!(
            t.recv().await,
            Some(ServerMsg::Reply {
                id: 1,
                reply: Reply::Connect { .. }
            })
        ));
        t
    }

    async fn send(&mut self, id: u32, cmd: Command) {
        let mut body = BytesMut::new();
        Encoding::Binary.encode_request(&Request { id, cmd }, &mut body);
        self.send_raw(&body).await;
    }

    async fn send_raw(&mut self, body: &[u8]) {
        self.s
            .write_all(&(body.len() as u32).to_be_bytes())
            .await
            .expect("write");
        self.s.write_all(body).await.expect("write");
    }

    /// Next message (heartbeats skipped); None on EOF.
    async fn recv(&mut self) -> Option<ServerMsg> {
        loop {
            let mut len = [0u8; 4];
            let r = tokio::time::timeout(WAIT, self.s.read_exact(&mut len))
                .await
                .expect("timeout");
            if r.is_err() {
                return None;
            }
            let n = u32::from_be_bytes(len) as usize;
            if n == 0 {
                continue;
            }
            let mut body = vec![0u8; n];
            self.s.read_exact(&mut body).await.expect("body");
            return Some(Encoding::Binary.decode_server(&body).expect("decode"));
        }
    }
}

#[tokio::test]
async fn tcp_and_websocket_clients_share_channels() {
    let srv = start_with_tcp(ServeArgs::default()).await;
    let tcp_addr = srv.tcp_addr.expect("tcp");
    let mut native = Tcp::connect(tcp_addr).await;
    native
        .send(
            2,
            Command::Subscribe {
                channel: "game".into(),
                recover: None,
                join_leave: false,
                token: None,
            },
        )
        .await;
    assert!(matches!(
        native.recv().await,
        Some(ServerMsg::Reply { id: 2, .. })
    ));

    let mut browser = json_client(srv.addr).await;
    subscribe_json(&mut browser, 2, "game").await;
    send_json(
        &mut browser,
        json!({"publish": {"channel": "game", "data": {"move": "e4"}}}),
    )
    .await;
    match native.recv().await {
        Some(ServerMsg::Push(Push::Publication {
            channel,
            offset: 1,
            data,
        })) => {
            assert_eq!(channel, "game");
            assert_eq!(&data[..], br#"{"move":"e4"}"#);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(recv_json(&mut browser).await["pub"]["offset"], 1);

    native
        .send(
            3,
            Command::Publish {
                channel: "game".into(),
                data: br#"{"move":"e5"}"#.to_vec().into(),
            },
        )
        .await;
    let mut got = Vec::new();
    for _ in 0..2 {
        got.push(native.recv().await);
    }
    assert!(
        got.iter().any(|m| matches!(
            m,
            Some(ServerMsg::Reply {
                id: 3,
                reply: Reply::Publish { offset: 2, .. }
            })
        )),
        "{got:?}"
    );
    assert_eq!(recv_json(&mut browser).await["pub"]["data"]["move"], "e5");
}

#[tokio::test]
async fn oversized_length_prefix_disconnects_with_1009() {
    let srv = start_with_tcp(ServeArgs {
        max_message_size: Some(1024),
        ..Default::default()
    })
    .await;
    let tcp_addr = srv.tcp_addr.expect("tcp");
    let mut bad = Tcp::connect(tcp_addr).await;
    bad.s
        .write_all(&0x7fff_ffffu32.to_be_bytes())
        .await
        .expect("write");
    match bad.recv().await {
        Some(ServerMsg::Push(Push::Disconnect { code: 1009, .. })) => {}
        other => panic!("unexpected {other:?}"),
    }
    assert!(
        bad.recv().await.is_none(),
        "connection must end after the disconnect"
    );
    let mut good = Tcp::connect(tcp_addr).await;
    good.send(9, Command::Ping).await;
    assert!(matches!(
        good.recv().await,
        Some(ServerMsg::Reply {
            id: 9,
            reply: Reply::Ping
        })
    ));
    assert_serving(srv.addr).await;
}

#[tokio::test]
async fn malformed_message_gets_error_reply_and_connection_continues() {
    let srv = start_with_tcp(ServeArgs::default()).await;
    let mut c = Tcp::connect(srv.tcp_addr.expect("tcp")).await;
    c.send_raw(&[0x02, 0x05]).await; // subscribe, truncated after the id
    match c.recv().await {
        Some(ServerMsg::Error {
            id: 5, code: 103, ..
        }) => {}
        other => panic!("unexpected {other:?}"),
    }
    c.send_raw(&[]).await; // a heartbeat: no answer expected
    c.send(6, Command::Ping).await;
    assert!(matches!(
        c.recv().await,
        Some(ServerMsg::Reply { id: 6, .. })
    ));
}
