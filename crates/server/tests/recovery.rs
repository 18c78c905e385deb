//! Nothing lost on reconnect: a client that recovers from its last position
//! gets exactly what it missed, then live publications with no gap and no
//! duplicate, over every transport (WebSocket JSON and binary, raw TCP,
//! long-polling, SSE); an epoch change or a gap beyond retention is reported
//! as `recovered: false`; publishing racing with recovery loses nothing.
mod common;

use bytes::{Bytes, BytesMut};
use common::*;
use futures_util::SinkExt;
use herald_proto::{Command, Encoding, Position, Push, Reply, Request, ServerMsg};
use herald_server::ServeArgs;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

#[derive(Debug, Clone, Copy)]
enum Kind {
    WsJson,
    WsBinary,
    Tcp,
    Poll,
}

const KINDS: [Kind; 4] = [Kind::WsJson, Kind::WsBinary, Kind::Tcp, Kind::Poll];

/// A long-poll client on one HTTP/1.1 keep-alive connection.
struct Http {
    send: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    base: String,
}

impl Http {
    async fn new(addr: SocketAddr) -> Http {
        let io = TokioIo::new(TcpStream::connect(addr).await.expect("connect"));
        let (send, conn) = hyper::client::conn::http1::handshake(io).await.expect("h1");
        tokio::spawn(conn);
        Http {
            send,
            base: format!("http://{addr}"),
        }
    }

    async fn req(&mut self, method: &str, path: &str, body: Vec<u8>) -> (u16, Bytes) {
        let req = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("host", "localhost")
            .body(Full::new(Bytes::from(body)))
            .expect("request");
        tokio::time::timeout(WAIT, self.send.ready())
            .await
            .expect("http timeout")
            .expect("connection ready");
        let resp = tokio::time::timeout(WAIT, self.send.send_request(req))
            .await
            .expect("http timeout")
            .expect("send");
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        (status, bytes)
    }
}

/// One client connection over any of the bidirectional transports, speaking
/// the protocol through `herald_proto`'s own codecs.
enum Conn {
    Ws(Box<Ws>, Encoding),
    Tcp(TcpStream),
    Poll {
        http: Http,
        session: String,
        queued: VecDeque<ServerMsg>,
    },
}

impl Conn {
    /// Opens a connection of `kind` and completes `connect`.
    async fn open(kind: Kind, srv: &TestServer) -> Conn {
        let mut c = match kind {
            Kind::WsJson => Conn::Ws(
                Box::new(connect(srv.addr, "/ws", Some("herald.json")).await),
                Encoding::Json,
            ),
            Kind::WsBinary => Conn::Ws(
                Box::new(connect(srv.addr, "/ws", Some("herald.binary")).await),
                Encoding::Binary,
            ),
            Kind::Tcp => Conn::Tcp(
                TcpStream::connect(srv.tcp_addr.expect("server started with tcp"))
                    .await
                    .expect("tcp connect"),
            ),
            Kind::Poll => {
                let mut http = Http::new(srv.addr).await;
                let (status, body) = http.req("POST", "/poll", Vec::new()).await;
                assert_eq!(status, 200);
                let v: Value = serde_json::from_slice(&body).expect("json");
                Conn::Poll {
                    http,
                    session: v["session"].as_str().expect("session").to_string(),
                    queued: VecDeque::new(),
                }
            }
        };
        c.send(
            1,
            Command::Connect {
                token: None,
                name: None,
            },
        )
        .await;
        match c.recv().await {
            ServerMsg::Reply {
                id: 1,
                reply: Reply::Connect { .. },
            } => c,
            other => panic!("expected the connect reply, got {other:?}"),
        }
    }

    async fn send(&mut self, id: u32, cmd: Command) {
        let req = Request { id, cmd };
        match self {
            Conn::Ws(ws, enc) => {
                let mut out = BytesMut::new();
                enc.encode_request(&req, &mut out);
                let msg = match enc {
                    Encoding::Json => {
                        Message::text(String::from_utf8(out.to_vec()).expect("utf-8"))
                    }
                    Encoding::Binary => Message::binary(out.freeze()),
                };
                ws.send(msg).await.expect("ws send");
            }
            Conn::Tcp(s) => {
                let mut out = BytesMut::new();
                Encoding::Binary.encode_request(&req, &mut out);
                s.write_all(&(out.len() as u32).to_be_bytes())
                    .await
                    .expect("write");
                s.write_all(&out).await.expect("write");
            }
            Conn::Poll { http, session, .. } => {
                let mut out = BytesMut::new();
                Encoding::Json.encode_request(&req, &mut out);
                let (status, _) = http
                    .req("POST", &format!("/poll/{session}"), out.to_vec())
                    .await;
                assert_eq!(status, 202);
            }
        }
    }

    /// The next server message (heartbeats skipped).
    async fn recv(&mut self) -> ServerMsg {
        match self {
            Conn::Ws(ws, enc) => match next_msg(ws).await {
                Message::Text(t) => Encoding::Json.decode_server(t.as_bytes()).expect("decode"),
                Message::Binary(b) => enc.decode_server(&b).expect("decode"),
                other => panic!("unexpected {other:?}"),
            },
            Conn::Tcp(s) => loop {
                let mut len = [0u8; 4];
                tokio::time::timeout(WAIT, s.read_exact(&mut len))
                    .await
                    .expect("timed out waiting for a message")
                    .expect("read");
                let n = u32::from_be_bytes(len) as usize;
                if n == 0 {
                    continue;
                }
                let mut body = vec![0u8; n];
                s.read_exact(&mut body).await.expect("read");
                return Encoding::Binary.decode_server(&body).expect("decode");
            },
            Conn::Poll {
                http,
                session,
                queued,
            } => loop {
                if let Some(m) = queued.pop_front() {
                    return m;
                }
                let (status, body) = http
                    .req("GET", &format!("/poll/{session}"), Vec::new())
                    .await;
                assert_eq!(status, 200);
                let msgs: Vec<&serde_json::value::RawValue> =
                    serde_json::from_slice(&body).expect("array");
                for m in msgs {
                    queued.push_back(
                        Encoding::Json
                            .decode_server(m.get().as_bytes())
                            .expect("decode"),
                    );
                }
            },
        }
    }

    /// Ends the connection without unsubscribing, as a dropped network would
    /// (a long-poll client just abandons its session).
    async fn drop_connection(self) {
        drop(self);
    }

    /// Subscribes to `channel`, recovering from `from` if given; returns the
    /// reply's position, `recovered` and the recovered (offset, data) pairs.
    async fn subscribe(
        &mut self,
        channel: &str,
        from: Option<Position>,
    ) -> (Position, bool, Vec<(u64, Bytes)>) {
        self.send(
            2,
            Command::Subscribe {
                channel: channel.into(),
                recover: from,
                join_leave: false,
                token: None,
            },
        )
        .await;
        match self.recv().await {
            ServerMsg::Reply {
                id: 2,
                reply:
                    Reply::Subscribe {
                        epoch,
                        offset,
                        recovered,
                        publications,
                    },
            } => (
                Position { epoch, offset },
                recovered,
                publications
                    .into_iter()
                    .map(|p| (p.offset, p.data))
                    .collect(),
            ),
            other => panic!("expected the subscribe reply, got {other:?}"),
        }
    }

    /// The next message, which must be a publication: (offset, data).
    async fn publication(&mut self) -> (u64, Bytes) {
        match self.recv().await {
            ServerMsg::Push(Push::Publication { offset, data, .. }) => (offset, data),
            other => panic!("expected a publication, got {other:?}"),
        }
    }

    /// Proves nothing else is queued: a ping's reply is the next message.
    async fn nothing_more(&mut self) {
        self.send(99, Command::Ping).await;
        match self.recv().await {
            ServerMsg::Reply {
                id: 99,
                reply: Reply::Ping,
            } => {}
            other => panic!("expected only the ping reply, got {other:?}"),
        }
    }
}

/// A WebSocket client publishing with replies; data is the number `n`.
struct Publisher(Ws);

impl Publisher {
    async fn new(srv: &TestServer) -> Publisher {
        Publisher(json_client(srv.addr).await)
    }

    /// Publishes `n` to `channel` and returns its position.
    async fn publish(&mut self, channel: &str, n: u64) -> Position {
        send_json(
            &mut self.0,
            json!({"id": 7, "publish": {"channel": channel, "data": n}}),
        )
        .await;
        let r = recv_json(&mut self.0).await;
        assert_eq!(r["id"], 7, "{r}");
        Position {
            epoch: r["publish"]["epoch"].as_str().expect("epoch").to_string(),
            offset: r["publish"]["offset"].as_u64().expect("offset"),
        }
    }
}

fn data(n: u64) -> Bytes {
    Bytes::from(n.to_string())
}

async fn server(args: ServeArgs) -> TestServer {
    start_with_tcp(args).await
}

/// Subscribe, receive 1..=3, drop the connection, miss 4..=7, recover them
/// exactly, then receive 8 and 9 live and nothing else.
async fn recovers_after_a_dropped_connection(kind: Kind) {
    let srv = server(ServeArgs::default()).await;
    let mut publisher = Publisher::new(&srv).await;
    let mut c = Conn::open(kind, &srv).await;
    let (start, recovered, missed) = c.subscribe("feed", None).await;
    assert!(!recovered && missed.is_empty());
    assert_eq!(start.offset, 0);
    for n in 1..=3 {
        publisher.publish("feed", n).await;
    }
    for n in 1..=3 {
        assert_eq!(c.publication().await, (n, data(n)), "{kind:?}");
    }
    c.drop_connection().await;
    for n in 4..=7 {
        publisher.publish("feed", n).await;
    }

    let mut c = Conn::open(kind, &srv).await;
    let last = Position {
        epoch: start.epoch.clone(),
        offset: 3,
    };
    let (top, recovered, missed) = c.subscribe("feed", Some(last)).await;
    assert!(recovered, "{kind:?}");
    assert_eq!(
        top,
        Position {
            epoch: start.epoch,
            offset: 7
        }
    );
    assert_eq!(missed, (4..=7).map(|n| (n, data(n))).collect::<Vec<_>>());
    for n in 8..=9 {
        publisher.publish("feed", n).await;
    }
    for n in 8..=9 {
        assert_eq!(c.publication().await, (n, data(n)), "{kind:?}");
    }
    c.nothing_more().await;
}

#[tokio::test]
async fn recovery_over_websocket_json() {
    recovers_after_a_dropped_connection(Kind::WsJson).await;
}

#[tokio::test]
async fn recovery_over_websocket_binary() {
    recovers_after_a_dropped_connection(Kind::WsBinary).await;
}

#[tokio::test]
async fn recovery_over_raw_tcp() {
    recovers_after_a_dropped_connection(Kind::Tcp).await;
}

#[tokio::test]
async fn recovery_over_long_polling() {
    recovers_after_a_dropped_connection(Kind::Poll).await;
}

#[tokio::test]
async fn another_epoch_is_not_recovered() {
    let srv = server(ServeArgs::default()).await;
    let mut publisher = Publisher::new(&srv).await;
    let at = publisher.publish("e", 1).await;
    publisher.publish("e", 2).await;
    // A position from a server that was restarted: another process, another
    // epoch, even with offsets that exist here.
    let restarted = server(ServeArgs::default()).await;
    let old = Publisher::new(&restarted).await.publish("e", 1).await;
    assert_ne!(old.epoch, at.epoch);
    let mut c = Conn::open(Kind::WsJson, &srv).await;
    let (top, recovered, _) = c
        .subscribe(
            "e",
            Some(Position {
                epoch: old.epoch,
                offset: 1,
            }),
        )
        .await;
    assert!(!recovered);
    assert_eq!(
        top,
        Position {
            epoch: at.epoch.clone(),
            offset: 2
        }
    );
    // The right epoch recovers.
    let mut c = Conn::open(Kind::Tcp, &srv).await;
    let (_, recovered, missed) = c.subscribe("e", Some(at)).await;
    assert!(recovered);
    assert_eq!(missed, vec![(2, data(2))]);
}

#[tokio::test]
async fn a_gap_beyond_retention_by_count_is_not_recovered() {
    let srv = server(ServeArgs {
        history_size: Some(3),
        ..ServeArgs::default()
    })
    .await;
    let mut publisher = Publisher::new(&srv).await;
    let mut c = Conn::open(Kind::WsBinary, &srv).await;
    let (start, _, _) = c.subscribe("small", None).await;
    publisher.publish("small", 1).await;
    assert_eq!(c.publication().await.0, 1);
    c.drop_connection().await;
    for n in 2..=10 {
        publisher.publish("small", n).await;
    }
    let mut c = Conn::open(Kind::WsBinary, &srv).await;
    let from = Position {
        epoch: start.epoch.clone(),
        offset: 1,
    };
    let (top, recovered, tail) = c.subscribe("small", Some(from)).await;
    assert!(!recovered, "2..=7 left retention");
    assert_eq!(top.offset, 10);
    assert_eq!(
        tail.iter().map(|p| p.0).collect::<Vec<_>>(),
        vec![8, 9, 10],
        "what is left is still offered, after the gap"
    );
    // From within retention it does recover.
    let mut c = Conn::open(Kind::WsJson, &srv).await;
    let from = Position {
        epoch: start.epoch,
        offset: 7,
    };
    let (_, recovered, missed) = c.subscribe("small", Some(from)).await;
    assert!(recovered);
    assert_eq!(missed.len(), 3);
}

/// A namespace with a longer history recovers a gap that the default
/// retention of the same server could not.
#[tokio::test]
async fn a_namespace_with_its_own_retention_recovers_a_longer_gap() {
    let srv = server(ServeArgs {
        history_size: Some(3),
        namespaces: vec![herald_server::auth::NamespaceRule {
            name: "chat".into(),
            history_size: Some(50),
            ..Default::default()
        }],
        ..ServeArgs::default()
    })
    .await;
    let mut publisher = Publisher::new(&srv).await;
    let mut starts = Vec::new();
    for channel in ["chat:room", "room"] {
        let mut c = Conn::open(Kind::WsJson, &srv).await;
        let (start, _, _) = c.subscribe(channel, None).await;
        c.drop_connection().await;
        starts.push(start);
    }
    for n in 1..=20 {
        publisher.publish("chat:room", n).await;
        publisher.publish("room", n).await;
    }
    for (channel, start, recoverable) in
        [("chat:room", &starts[0], true), ("room", &starts[1], false)]
    {
        let mut c = Conn::open(Kind::WsJson, &srv).await;
        let (top, recovered, missed) = c.subscribe(channel, Some(start.clone())).await;
        assert_eq!(top.offset, 20);
        assert_eq!(recovered, recoverable, "{channel}");
        let expected: Vec<u64> = if recoverable {
            (1..=20).collect()
        } else {
            vec![18, 19, 20]
        };
        assert_eq!(missed.iter().map(|p| p.0).collect::<Vec<_>>(), expected);
    }
}

#[tokio::test]
async fn a_gap_beyond_retention_by_time_is_not_recovered() {
    let srv = server(ServeArgs {
        history_ttl: Some(1),
        ..ServeArgs::default()
    })
    .await;
    let mut publisher = Publisher::new(&srv).await;
    let first = publisher.publish("brief", 1).await;
    publisher.publish("brief", 2).await;
    let mut c = Conn::open(Kind::Tcp, &srv).await;
    let (_, recovered, missed) = c.subscribe("brief", Some(first.clone())).await;
    assert!(recovered, "within the time limit");
    assert_eq!(missed, vec![(2, data(2))]);
    c.drop_connection().await;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let mut c = Conn::open(Kind::Tcp, &srv).await;
    let (_, recovered, missed) = c.subscribe("brief", Some(first)).await;
    assert!(!recovered, "offset 2 expired");
    assert!(missed.is_empty(), "{missed:?}");
}

/// One task publishes 1, 2, 3, ... as fast as it can (in small bursts) while a
/// client keeps dropping its connection and recovering on the next transport:
/// each incarnation must continue exactly where the previous one stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishing_races_with_recovery() {
    const ROUNDS: usize = 20;
    let srv = server(ServeArgs {
        // Room for however long a reconnect takes on a loaded machine.
        history_size: Some(1_000_000),
        history_ttl: Some(0),
        ..ServeArgs::default()
    })
    .await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut ws = json_client(srv.addr).await;
    let flag = stop.clone();
    let publishing = tokio::spawn(async move {
        let mut n = 0u64;
        while !flag.load(Ordering::Relaxed) {
            for _ in 0..5 {
                n += 1;
                send_json(&mut ws, json!({"publish": {"channel": "race", "data": n}})).await;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        n
    });

    let mut last: Option<Position> = None;
    let mut recovered_total = 0;
    for round in 0..ROUNDS {
        let kind = KINDS[round % KINDS.len()];
        let mut c = Conn::open(kind, &srv).await;
        let (top, recovered, missed) = c.subscribe("race", last.clone()).await;
        let mut expect = match &last {
            None => top.offset + 1,
            Some(p) => {
                assert!(recovered, "round {round} ({kind:?}): not recovered");
                assert_eq!(top.epoch, p.epoch);
                p.offset + 1
            }
        };
        recovered_total += missed.len();
        for (offset, d) in &missed {
            assert_eq!((*offset, d), (expect, &data(expect)), "round {round}");
            expect += 1;
        }
        assert_eq!(top.offset + 1, expect, "round {round}: reply top");
        // Then live, from exactly there.
        for _ in 0..1 + (round * 7) % 30 {
            let (offset, d) = c.publication().await;
            assert_eq!(
                (offset, d),
                (expect, data(expect)),
                "round {round} ({kind:?})"
            );
            expect += 1;
        }
        last = Some(Position {
            epoch: top.epoch,
            offset: expect - 1,
        });
        c.drop_connection().await;
    }
    stop.store(true, Ordering::Relaxed);
    let published = tokio::time::timeout(WAIT, publishing)
        .await
        .expect("publisher stops")
        .expect("publisher task");
    assert!(published > 0);
    assert!(
        recovered_total > 0,
        "the publisher never outran a reconnect: the race was not exercised"
    );
}

// ---------------------------------------------------------------- SSE resume

/// Publishes `n` to `channel` once the stream's subscription exists: the
/// stream subscribes before its response is returned, so this is immediate.
async fn sse_publish(p: &mut Publisher, channel: &str, n: u64) {
    p.publish(channel, n).await;
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Streams 1..=3, drops the stream, misses 4..=6, resumes with the last id
/// (given by `resume`), and must get 4..=6 then 7 live.
async fn sse_resumes(resume_by_header: bool) {
    let srv = server(ServeArgs::default()).await;
    let mut p = Publisher::new(&srv).await;
    let mut events = sse(srv.addr, "channel=news", None).await;
    for n in 1..=3 {
        sse_publish(&mut p, "news", n).await;
    }
    let got = read_events(&mut events, 3).await;
    assert_eq!(
        got.iter().map(|g| g.0.as_str()).collect::<Vec<_>>(),
        ["1", "2", "3"]
    );
    let last_id = got[2].1.clone();
    assert!(last_id.ends_with(":3"), "{last_id}");
    drop(events);
    for n in 4..=6 {
        sse_publish(&mut p, "news", n).await;
    }
    let mut events = if resume_by_header {
        sse(srv.addr, "channel=news", Some(&last_id)).await
    } else {
        let q = format!("channel=news&lastEventId={}", percent_encode(&last_id));
        sse(srv.addr, &q, None).await
    };
    let got = read_events(&mut events, 3).await;
    let epoch = last_id.split(':').next().expect("epoch");
    assert_eq!(
        got,
        (4..=6)
            .map(|n| (n.to_string(), format!("{epoch}:{n}")))
            .collect::<Vec<_>>()
    );
    sse_publish(&mut p, "news", 7).await;
    assert_eq!(
        read_events(&mut events, 1).await,
        vec![("7".to_string(), format!("{epoch}:7"))]
    );
}

#[tokio::test]
async fn sse_resumes_from_the_last_event_id_query_parameter() {
    sse_resumes(false).await;
}

#[tokio::test]
async fn sse_resumes_from_the_last_event_id_header() {
    sse_resumes(true).await;
}

/// A stream lost before its first publication resumes from the id it sent
/// alone once subscribed: it used to have no id then, and reconnected live,
/// missing what was published in between.
#[tokio::test]
async fn sse_lost_before_its_first_event_resumes_from_where_it_started() {
    let srv = server(ServeArgs::default()).await;
    let mut p = Publisher::new(&srv).await;
    let pos = p.publish("quiet", 1).await;
    let at = |n: u64| format!("{}:{n}", pos.epoch);
    let mut events = sse(srv.addr, "channel=quiet", None).await;
    let first = events.next_block().await;
    assert_eq!(first, [format!("id: {}", at(1))], "an id alone, no data");
    drop(events);
    sse_publish(&mut p, "quiet", 2).await;
    sse_publish(&mut p, "quiet", 3).await;
    let mut events = sse(srv.addr, "channel=quiet", Some(&at(1))).await;
    assert_eq!(
        read_events(&mut events, 2).await,
        vec![("2".to_string(), at(2)), ("3".to_string(), at(3))]
    );
}

#[tokio::test]
async fn sse_resumes_every_channel_of_a_multi_channel_stream() {
    let srv = server(ServeArgs::default()).await;
    let mut p = Publisher::new(&srv).await;
    let mut events = sse(srv.addr, "channel=a&channel=b", None).await;
    sse_publish(&mut p, "a", 1).await;
    let first = events.next().await;
    let id = field(&first, "id").expect("id").to_string();
    drop(events);
    // Missed: b 1, a 2, b 2.
    sse_publish(&mut p, "b", 1).await;
    sse_publish(&mut p, "a", 2).await;
    sse_publish(&mut p, "b", 2).await;
    let q = format!("channel=a&channel=b&lastEventId={}", percent_encode(&id));
    let mut events = sse(srv.addr, &q, None).await;
    let mut got = Vec::new();
    for _ in 0..3 {
        let e = events.next().await;
        got.push(format!(
            "{}={}",
            field(&e, "event").expect("event"),
            field(&e, "data").expect("data")
        ));
        if got.len() == 3 {
            let id = field(&e, "id").expect("id");
            let offsets: Vec<&str> = id
                .split(',')
                .map(|p| &p[p.find(':').expect(":")..])
                .collect();
            assert_eq!(offsets, [":2", ":2"], "{id}");
        }
    }
    // Channel by channel in parameter order; each channel in offset order.
    assert_eq!(got, ["a=2", "b=1", "b=2"]);
    sse_publish(&mut p, "b", 3).await;
    let e = events.next().await;
    assert_eq!(field(&e, "data"), Some("3"));
}

#[tokio::test]
async fn sse_unrecoverable_resume_sends_a_notice_then_goes_live() {
    let srv = server(ServeArgs::default()).await;
    let mut p = Publisher::new(&srv).await;
    let pos = p.publish("n", 1).await;
    let mut events = sse(srv.addr, "channel=n&lastEventId=restarted-0%3A5", None).await;
    let e = events.next().await;
    assert_eq!(field(&e, "event"), Some("herald"), "{e:?}");
    let notice: Value = serde_json::from_str(field(&e, "data").expect("data")).expect("json");
    assert_eq!(
        notice,
        json!({"unrecovered": {"channel": "n", "epoch": pos.epoch, "offset": 1}})
    );
    assert_eq!(
        field(&e, "id"),
        Some(format!("{}:1", pos.epoch).as_str()),
        "the id moves the browser past the gap"
    );
    sse_publish(&mut p, "n", 2).await;
    assert_eq!(
        read_events(&mut events, 1).await,
        vec![("2".to_string(), format!("{}:2", pos.epoch))]
    );
}

#[tokio::test]
async fn sse_malformed_last_event_id_starts_live() {
    let srv = server(ServeArgs::default()).await;
    let mut p = Publisher::new(&srv).await;
    p.publish("m", 1).await;
    for bad in ["garbage", "e%3Ax", "e%3A1%2Cf%3A2", "%3A"] {
        let mut events = sse(srv.addr, &format!("channel=m&lastEventId={bad}"), None).await;
        let n = p.publish("m", 9).await.offset;
        let e = events.next().await;
        assert_eq!(field(&e, "event"), None, "{bad}: no notice, {e:?}");
        assert_eq!(field(&e, "data"), Some("9"), "{bad}: live only");
        assert!(field(&e, "id").expect("id").ends_with(&format!(":{n}")));
    }
}
