//! A lobby of 50,000 tables (protocol §5e, "Large lobbies"): a whole-lobby
//! subscriber used to be closed at once with 3001 "slow consumer" (its
//! ~9 MB snapshot passed the 1 MiB queue bound); now it gets the snapshot
//! in pages, then the reply, then deltas, over WebSocket (JSON and binary),
//! SSE and long-polling, and its map equals the lobby.
mod common;

use common::*;
use futures_util::{SinkExt, StreamExt};
use herald_proto::{Command, Encoding, Push, Reply, Request, ServerMsg, TableEntry};
use herald_server::ServeArgs;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

const KEY: &str = "lobby-pages-key";
const TABLES: u64 = 50_000;

async fn create(srv: &TestServer, count: u64) {
    let auth = format!("apikey {KEY}");
    let body = format!(r#"{{"game":"holdem","seats":6,"count":{count}}}"#);
    let (status, _, text) = http(
        srv.addr,
        "POST",
        "/api/tables",
        &[("authorization", &auth)],
        &body,
    )
    .await;
    assert_eq!(status, 201, "{text}");
}

/// What a subscriber keeps: entries by id, and the seq it last applied.
#[derive(Default)]
struct View {
    map: BTreeMap<u64, TableEntry>,
    seq: Option<u64>,
    pages: usize,
    updates_before_reply: usize,
}

impl View {
    /// Applies one message as §5e says; true once the reply came.
    fn apply(&mut self, m: ServerMsg) -> bool {
        match m {
            ServerMsg::Push(Push::LobbyPage { tables, .. }) => {
                assert!(self.seq.is_none(), "a page after the reply");
                self.pages += 1;
                for t in tables {
                    self.map.insert(t.table, t);
                }
            }
            ServerMsg::Push(Push::LobbyUpdate {
                seq,
                tables,
                removed,
                ..
            }) => {
                match self.seq {
                    None => self.updates_before_reply += 1,
                    Some(s) if seq <= s => return true,
                    Some(_) => {}
                }
                for t in tables {
                    self.map.insert(t.table, t);
                }
                for id in removed {
                    self.map.remove(&id);
                }
                if self.seq.is_some() {
                    self.seq = Some(seq);
                }
            }
            ServerMsg::Reply {
                reply: Reply::Lobby { seq, tables },
                ..
            } => {
                for t in tables {
                    self.map.insert(t.table, t);
                }
                self.seq = Some(seq);
            }
            other => panic!("unexpected {other:?}"),
        }
        self.seq.is_some()
    }
}

async fn ws_view(srv: &TestServer, enc: Encoding) -> (Ws, View) {
    let proto = match enc {
        Encoding::Json => "herald.json",
        Encoding::Binary => "herald.binary",
    };
    let mut ws = connect(srv.addr, "/ws", Some(proto)).await;
    let send = |id, cmd| Request { id, cmd };
    for req in [
        send(
            1,
            Command::Connect {
                token: None,
                name: None,
            },
        ),
        send(
            2,
            Command::Lobby {
                path: String::new(),
            },
        ),
    ] {
        let mut buf = bytes::BytesMut::new();
        enc.encode_request(&req, &mut buf);
        let bytes = buf.freeze();
        let msg = match enc {
            Encoding::Json => {
                Message::Text(String::from_utf8(bytes.to_vec()).expect("utf8").into())
            }
            Encoding::Binary => Message::Binary(bytes),
        };
        ws.send(msg).await.expect("send");
    }
    let mut view = View::default();
    let started = Instant::now();
    let mut connected = false;
    loop {
        let m = tokio::time::timeout(Duration::from_secs(60), ws.next())
            .await
            .expect("the snapshot in time")
            .expect("open")
            .expect("frame");
        let bytes = match m {
            Message::Text(t) => t.as_bytes().to_vec(),
            Message::Binary(b) => b.to_vec(),
            Message::Close(c) => panic!("closed: {c:?}"),
            _ => continue,
        };
        let msg = enc.decode_server(&bytes).expect("decodes");
        if !connected {
            assert!(matches!(msg, ServerMsg::Reply { id: 1, .. }), "{msg:?}");
            connected = true;
            continue;
        }
        if view.apply(msg) {
            break;
        }
    }
    eprintln!(
        "{enc:?}: {} tables in {} pages + the reply, {:?}",
        view.map.len(),
        view.pages,
        started.elapsed()
    );
    (ws, view)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lobby_of_50000_tables_reaches_whole_lobby_subscribers() {
    let srv = start(ServeArgs {
        api_key: Some(KEY.into()),
        allow_anonymous: Some(true),
        lobby_interval: Some(50),
        ..ServeArgs::default()
    })
    .await;
    for _ in 0..TABLES / 10_000 {
        create(&srv, 10_000).await;
    }
    let mut tables = TABLES;
    for enc in [Encoding::Json, Encoding::Binary] {
        let (mut ws, mut view) = ws_view(&srv, enc).await;
        assert_eq!(view.map.len() as u64, tables, "{enc:?}");
        assert!(view.pages > 10, "{enc:?}: sent in pages: {}", view.pages);
        // Deltas follow: a new table arrives as a lobby_update.
        create(&srv, 1).await;
        tables += 1;
        loop {
            let m = tokio::time::timeout(WAIT, ws.next())
                .await
                .expect("a delta")
                .expect("open")
                .expect("frame");
            let bytes = match m {
                Message::Text(t) => t.as_bytes().to_vec(),
                Message::Binary(b) => b.to_vec(),
                _ => continue,
            };
            view.apply(enc.decode_server(&bytes).expect("decodes"));
            if view.map.len() as u64 == tables {
                break;
            }
        }
    }
    // SSE: the same pages and reply as `herald` events.
    let mut events = sse(srv.addr, "lobby=", None).await;
    let mut view = View::default();
    loop {
        let e = tokio::time::timeout(Duration::from_secs(60), events.next())
            .await
            .expect("the snapshot over SSE in time");
        let data = field(&e, "data").expect("data");
        let v: Value = serde_json::from_str(data).expect("json");
        if v.get("connect").is_some() {
            continue;
        }
        let msg = Encoding::Json
            .decode_server(data.as_bytes())
            .expect("decodes");
        if view.apply(msg) {
            break;
        }
    }
    assert_eq!(view.map.len() as u64, tables, "over SSE");
    assert!(view.pages > 10);

    // Long-polling: a session asks for the lobby; polls bring the pages and
    // the reply (each poll answers what was queued, so the pages flow as
    // the polls drain them).
    let (status, _, body) = http(srv.addr, "POST", "/poll", &[], "").await;
    assert_eq!(status, 200, "{body}");
    let session = serde_json::from_str::<Value>(&body).expect("json")["session"]
        .as_str()
        .expect("session")
        .to_string();
    let cmds = r#"[{"id":1,"connect":{}},{"id":2,"lobby":{"path":""}}]"#;
    let (status, _, _) = http(srv.addr, "POST", &format!("/poll/{session}"), &[], cmds).await;
    assert_eq!(status, 202);
    let mut view = View::default();
    let deadline = Instant::now() + Duration::from_secs(60);
    'polls: loop {
        assert!(
            Instant::now() < deadline,
            "the snapshot over long-polling in time"
        );
        let (status, _, body) = http(srv.addr, "GET", &format!("/poll/{session}"), &[], "").await;
        assert_eq!(status, 200, "{body}");
        for v in serde_json::from_str::<Vec<Value>>(&body).expect("array") {
            if v.get("connect").is_some() {
                continue;
            }
            let msg = Encoding::Json
                .decode_server(v.to_string().as_bytes())
                .expect("decodes");
            if view.apply(msg) {
                break 'polls;
            }
        }
    }
    assert_eq!(view.map.len() as u64, tables, "over long-polling");
    assert!(view.pages > 10);
    srv.shutdown.cancel();
}
