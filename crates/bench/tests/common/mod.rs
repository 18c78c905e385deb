//! Test servers for the bench's integration tests: small, written here with
//! `herald-ws`, and able to misbehave on purpose so the tests can check that
//! the bench notices.
//!
//! Each server runs on its own thread with a current-thread tokio runtime,
//! listening on 127.0.0.1:0. Members join the broadcast group *before* the
//! 101 answer is written, so a correct server here never races the bench.

#![allow(dead_code, clippy::unwrap_used, missing_docs)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use herald_proto::shootout::{self, ShootoutKind};
use herald_ws::{Decoder, Message, OpCode, Role};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

/// Deliberate faults, by 1-based count over the whole server.
#[derive(Debug, Clone, Copy, Default)]
pub struct Faults {
    /// Drop this broadcast delivery.
    pub drop_delivery: Option<u64>,
    /// Deliver this broadcast delivery twice.
    pub dup_delivery: Option<u64>,
    /// Send this answer (echo or broadcastResult) twice.
    pub dup_answer: Option<u64>,
}

struct Group {
    members: Mutex<Vec<(u64, UnboundedSender<Vec<u8>>)>>,
    deliveries: AtomicU64,
    answers: AtomicU64,
    next_id: AtomicU64,
    faults: Faults,
}

/// Starts a websocket-shootout server; returns its address.
pub fn spawn_shootout(faults: Faults) -> SocketAddr {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let addr = std_listener.local_addr().unwrap();
    let group = Arc::new(Group {
        members: Mutex::new(Vec::new()),
        deliveries: AtomicU64::new(0),
        answers: AtomicU64::new(0),
        next_id: AtomicU64::new(0),
        faults,
    });
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = TcpListener::from_std(std_listener).unwrap();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                tokio::spawn(shootout_conn(stream, group.clone()));
            }
        });
    });
    addr
}

/// Reads an upgrade request and returns the 101 answer (None: not a
/// WebSocket request) and the bytes after the request head.
async fn read_upgrade(
    stream: &mut TcpStream,
    protocols: &[&str],
) -> Option<(Vec<u8>, Option<String>, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        let n = stream.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        if let httparse::Status::Complete(len) = req.parse(&buf).ok()? {
            let up = herald_ws::validate_upgrade(req.method?, req.headers).ok()?;
            let protocol = herald_ws::select_protocol(up.protocols, protocols).map(str::to_owned);
            let mut answer = Vec::new();
            herald_ws::write_accept(
                &mut answer,
                &herald_ws::accept_key(up.key),
                protocol.as_deref(),
            );
            return Some((answer, protocol, buf[len..].to_vec()));
        }
    }
}

/// Encodes a server (unmasked) frame.
pub fn frame(opcode: OpCode, payload: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    herald_ws::encode_frame(&mut out, opcode, payload, None);
    out.to_vec()
}

/// Reads frames from `stream` (starting with `pending`) and calls `on`
/// with each data message; returns when the peer goes away.
pub async fn read_messages(
    mut stream: tokio::net::tcp::OwnedReadHalf,
    mut pending: Vec<u8>,
    mut on: impl FnMut(bool, &[u8]),
) {
    let mut decoder = Decoder::new(Role::Server, 1 << 20);
    let mut tmp = vec![0u8; 65536];
    loop {
        loop {
            let owned = match decoder.decode(&mut pending) {
                Ok(Some((consumed, msg))) => {
                    let owned = match msg {
                        Some(Message::Text(d)) => Some((false, d.to_vec())),
                        Some(Message::Binary(d)) => Some((true, d.to_vec())),
                        Some(Message::Close(..)) => return,
                        _ => None,
                    };
                    pending.drain(..consumed);
                    owned
                }
                Ok(None) => break,
                Err(_) => return,
            };
            if let Some((binary, data)) = owned {
                on(binary, &data);
            }
        }
        match stream.read(&mut tmp).await {
            Ok(0) | Err(_) => return,
            Ok(n) => pending.extend_from_slice(&tmp[..n]),
        }
    }
}

async fn shootout_conn(mut stream: TcpStream, group: Arc<Group>) {
    let Some((answer, _, leftover)) = read_upgrade(&mut stream, &[]).await else {
        return;
    };
    let (tx, mut rx) = unbounded_channel::<Vec<u8>>();
    let id = group.next_id.fetch_add(1, Ordering::Relaxed);
    group.members.lock().unwrap().push((id, tx.clone()));
    if stream.write_all(&answer).await.is_err() {
        return;
    }
    let (read, mut write) = stream.into_split();
    tokio::spawn(async move {
        while let Some(buf) = rx.recv().await {
            if write.write_all(&buf).await.is_err() {
                return;
            }
        }
    });
    let g = group.clone();
    read_messages(read, leftover, move |binary, data| {
        let opcode = if binary { OpCode::Binary } else { OpCode::Text };
        let kind = if binary {
            shootout::parse_binary(data).map(|m| m.kind)
        } else {
            shootout::parse_json(data).map(|m| m.kind)
        };
        let answer = match kind {
            Ok(ShootoutKind::Echo) => frame(opcode, data),
            Ok(ShootoutKind::Broadcast) => {
                let out = frame(opcode, data);
                let members = g.members.lock().unwrap();
                for (_, member) in members.iter() {
                    let n = g.deliveries.fetch_add(1, Ordering::Relaxed) + 1;
                    if g.faults.drop_delivery == Some(n) {
                        continue;
                    }
                    let _ = member.send(out.clone());
                    if g.faults.dup_delivery == Some(n) {
                        let _ = member.send(out.clone());
                    }
                }
                if binary {
                    let mut result = data.to_vec();
                    result[0] = b'r';
                    frame(opcode, &result)
                } else {
                    let payload = shootout::parse_json(data).unwrap().payload;
                    let mut result = BytesMut::new();
                    shootout::write_json_broadcast_result(
                        payload,
                        members.len() as u64,
                        &mut result,
                    );
                    frame(opcode, &result)
                }
            }
            _ => return,
        };
        let n = g.answers.fetch_add(1, Ordering::Relaxed) + 1;
        let _ = tx.send(answer.clone());
        if g.faults.dup_answer == Some(n) {
            let _ = tx.send(answer);
        }
    })
    .await;
    group.members.lock().unwrap().retain(|(m, _)| *m != id);
}

/// A unique temporary file path for a test's output.
pub fn temp_path(name: &str) -> std::path::PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    std::env::temp_dir().join(format!(
        "herald-bench-{}-{}-{name}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

// ------------------------------------------------------------ Herald stub --

/// Deliberate faults of the Herald stub, by 1-based publication delivery
/// count over the whole server.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeraldFaults {
    /// Never deliver this one.
    pub drop_delivery: Option<u64>,
    /// Deliver this one twice.
    pub dup_delivery: Option<u64>,
    /// Deliver this one after the next delivery to the same subscriber.
    pub swap_delivery: Option<u64>,
    /// Answer every recovery `recovered: true` but leave out its first
    /// missed publication (a server that loses while claiming not to).
    pub recover_drop_first: bool,
    /// Answer every recovery with the publication at the client's own
    /// position too (one it already has: a duplicate).
    pub recover_dup_last: bool,
    /// After each hand of the stub game, send a `game` push whose data is
    /// not JSON.
    pub bad_game_data: bool,
}

struct Member {
    tx: UnboundedSender<Vec<u8>>,
    enc: herald_proto::Encoding,
    held: Option<Vec<u8>>,
}

/// A channel's last offset and every publication (offset, data).
type ChannelLog = (u64, Vec<(u64, bytes::Bytes)>);

struct Hub {
    members: Mutex<Vec<(u64, Member)>>,
    channels: Mutex<std::collections::HashMap<String, Vec<u64>>>,
    /// Per channel: the last offset, and every publication.
    offsets: Mutex<std::collections::HashMap<String, ChannelLog>>,
    deliveries: AtomicU64,
    next_id: AtomicU64,
    faults: HeraldFaults,
}

/// Starts a minimal Herald-protocol server (connect, subscribe, publish;
/// both encodings) on `/ws`; returns its address. Its game is a stand-in
/// for Hold'em's messages: one table (7) in the lobby, where every
/// connection sits alone at seat 0 and is given turn after turn; every
/// third action ends a hand (numbered per connection).
pub fn spawn_herald(faults: HeraldFaults) -> SocketAddr {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let addr = std_listener.local_addr().unwrap();
    let hub = Arc::new(Hub {
        members: Mutex::new(Vec::new()),
        channels: Mutex::new(Default::default()),
        offsets: Mutex::new(Default::default()),
        deliveries: AtomicU64::new(0),
        next_id: AtomicU64::new(0),
        faults,
    });
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = TcpListener::from_std(std_listener).unwrap();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                tokio::spawn(herald_conn(stream, hub.clone()));
            }
        });
    });
    addr
}

async fn herald_conn(mut stream: TcpStream, hub: Arc<Hub>) {
    use herald_proto::{Command, Encoding, Push, Reply, ServerMsg};
    let Some((answer, protocol, leftover)) =
        read_upgrade(&mut stream, &["herald.json", "herald.binary"]).await
    else {
        return;
    };
    let enc = if protocol.as_deref() == Some("herald.binary") {
        Encoding::Binary
    } else {
        Encoding::Json
    };
    let opcode = if enc == Encoding::Binary {
        OpCode::Binary
    } else {
        OpCode::Text
    };
    let (tx, mut rx) = unbounded_channel::<Vec<u8>>();
    let id = hub.next_id.fetch_add(1, Ordering::Relaxed);
    hub.members.lock().unwrap().push((
        id,
        Member {
            tx: tx.clone(),
            enc,
            held: None,
        },
    ));
    if stream.write_all(&answer).await.is_err() {
        return;
    }
    let (read, mut write) = stream.into_split();
    tokio::spawn(async move {
        while let Some(buf) = rx.recv().await {
            if write.write_all(&buf).await.is_err() {
                return;
            }
        }
    });
    let h = hub.clone();
    // Actions in the stub game's current hand, and hands finished.
    let (mut acts, mut hands) = (0u64, 0u64);
    read_messages(read, leftover, move |_, data| {
        let req = match enc.decode_request(data) {
            Ok(r) => r,
            Err(e) => {
                let _ = tx.send(encode(
                    enc,
                    &ServerMsg::Error {
                        id: e.id(),
                        code: 100,
                        message: e.to_string(),
                    },
                ));
                return;
            }
        };
        let reply = match req.cmd {
            Command::Connect { .. } => Reply::Connect {
                client: format!("c{id}"),
                version: "stub".into(),
                ping_interval: 25,
            },
            Command::Subscribe {
                channel, recover, ..
            } => stub_subscribe(&h, id, channel, recover),
            Command::Publish { channel, data } => {
                let offset = stub_publish(&h, channel, data);
                if req.id == 0 {
                    return;
                }
                Reply::Publish {
                    epoch: "e".into(),
                    offset,
                }
            }
            Command::Ping => Reply::Ping,
            Command::Lobby { .. } => Reply::Lobby {
                seq: 1,
                tables: vec![herald_proto::TableEntry {
                    table: 7,
                    path: "holdem/6-seat/stub".into(),
                    seats: 6,
                    players: 0,
                    watchers: 0,
                    attrs: bytes::Bytes::from_static(b"{}"),
                }],
            },
            Command::Sit { table: 7, .. } => {
                let snapshot =
                    br#"{"t":"state","hand":0,"seats":[{"seat":0,"stack":1000}],"turn":null}"#;
                let game = |data: &'static [u8]| {
                    encode(
                        enc,
                        &ServerMsg::Push(Push::Game {
                            table: 7,
                            data: bytes::Bytes::from_static(data),
                        }),
                    )
                };
                let _ = tx.send(encode(
                    enc,
                    &ServerMsg::Reply {
                        id: req.id,
                        reply: Reply::Sit {
                            seat: 0,
                            data: bytes::Bytes::from_static(snapshot),
                        },
                    },
                ));
                let _ = tx.send(game(STUB_TURN));
                return;
            }
            Command::Act { table: 7, data } => {
                stub_act(&h, &tx, enc, req.id, &data, (&mut acts, &mut hands));
                return;
            }
            Command::Stand { .. } => Reply::Stand,
            Command::Sit { .. } | Command::Act { .. } => {
                let _ = tx.send(encode(
                    enc,
                    &ServerMsg::Error {
                        id: req.id,
                        code: 115,
                        message: "unknown table".into(),
                    },
                ));
                return;
            }
            _ => {
                let _ = tx.send(encode(
                    enc,
                    &ServerMsg::Error {
                        id: req.id,
                        code: 102,
                        message: "not in the stub".into(),
                    },
                ));
                return;
            }
        };
        let _ = opcode;
        let _ = tx.send(encode(enc, &ServerMsg::Reply { id: req.id, reply }));
    })
    .await;
    hub.members.lock().unwrap().retain(|(m, _)| *m != id);
    for subs in hub.channels.lock().unwrap().values_mut() {
        subs.retain(|m| *m != id);
    }
}

/// The stub's `subscribe`: joins `channel` and, with `recover`, replies
/// with the history after the position (as the faults bend it).
fn stub_subscribe(
    h: &Hub,
    id: u64,
    channel: String,
    recover: Option<herald_proto::Position>,
) -> herald_proto::Reply {
    // The offsets lock is held while subscribing and while publishing, so
    // recovery and live delivery never overlap.
    let offsets = h.offsets.lock().unwrap();
    h.channels
        .lock()
        .unwrap()
        .entry(channel.clone())
        .or_default()
        .push(id);
    let (offset, history) = offsets
        .get(&channel)
        .map_or((0, &[][..]), |(o, hist)| (*o, &hist[..]));
    let mut publications = Vec::new();
    if let Some(pos) = &recover {
        let from = if h.faults.recover_dup_last {
            pos.offset
        } else {
            pos.offset + 1
        };
        publications = history
            .iter()
            .filter(|(o, _)| *o >= from)
            .map(|(o, d)| herald_proto::HistoryItem {
                offset: *o,
                data: d.clone(),
            })
            .collect();
        if h.faults.recover_drop_first && !publications.is_empty() {
            publications.remove(0);
        }
    }
    herald_proto::Reply::Subscribe {
        epoch: "e".into(),
        offset,
        recovered: recover.is_some(),
        publications,
    }
}

/// The stub's `publish`: appends to the channel's history and delivers to
/// its subscribers (as the faults bend it); returns the offset.
fn stub_publish(h: &Hub, channel: String, data: bytes::Bytes) -> u64 {
    use herald_proto::{Push, ServerMsg};
    let mut offsets = h.offsets.lock().unwrap();
    let entry = offsets.entry(channel.clone()).or_default();
    entry.0 += 1;
    let offset = entry.0;
    entry.1.push((offset, data.clone()));
    let subs = h
        .channels
        .lock()
        .unwrap()
        .get(&channel)
        .cloned()
        .unwrap_or_default();
    let push = ServerMsg::Push(Push::Publication {
        channel,
        offset,
        data,
    });
    let mut members = h.members.lock().unwrap();
    for sub in subs {
        let Some((_, m)) = members.iter_mut().find(|(mid, _)| *mid == sub) else {
            continue;
        };
        let n = h.deliveries.fetch_add(1, Ordering::Relaxed) + 1;
        let bytes = encode(m.enc, &push);
        if h.faults.drop_delivery == Some(n) {
            continue;
        }
        if h.faults.swap_delivery == Some(n) {
            m.held = Some(bytes);
            continue;
        }
        let _ = m.tx.send(bytes.clone());
        if let Some(held) = m.held.take() {
            let _ = m.tx.send(held);
        }
        if h.faults.dup_delivery == Some(n) {
            let _ = m.tx.send(bytes);
        }
    }
    drop(members);
    drop(offsets);
    offset
}

/// The stub game's answer to an action: the reply, the action, every third
/// one a hand's result, then the next turn. `count` is (actions in this
/// hand, hands finished).
fn stub_act(
    h: &Hub,
    tx: &UnboundedSender<Vec<u8>>,
    enc: herald_proto::Encoding,
    id: u32,
    data: &[u8],
    count: (&mut u64, &mut u64),
) {
    use herald_proto::{Push, Reply, ServerMsg};
    let (acts, hands) = count;
    let _ = tx.send(encode(
        enc,
        &ServerMsg::Reply {
            id,
            reply: Reply::Act,
        },
    ));
    let game = |data: Vec<u8>| {
        encode(
            enc,
            &ServerMsg::Push(Push::Game {
                table: 7,
                data: data.into(),
            }),
        )
    };
    let v: serde_json::Value = serde_json::from_slice(data).unwrap_or_default();
    let a = v["a"].as_str().unwrap_or("?").to_owned();
    if a == "rebuy" {
        return;
    }
    *acts += 1;
    let action = serde_json::json!({"t": "action", "seat": 0, "a": a, "amount": 0,
        "bet": 0, "stack": 1000, "pot": 0, "auto": false});
    let _ = tx.send(game(action.to_string().into_bytes()));
    if *acts == 3 {
        *acts = 0;
        *hands += 1;
        let result = serde_json::json!({"t": "result", "hand": *hands, "board": [],
            "pots": [], "shown": [], "returned": null,
            "stacks": [{"seat": 0, "stack": 1000}]});
        let _ = tx.send(game(result.to_string().into_bytes()));
        if h.faults.bad_game_data {
            let _ = tx.send(game(b"\xff not json".to_vec()));
        }
    }
    let _ = tx.send(game(STUB_TURN.to_vec()));
}

/// One server message as a WebSocket frame in `enc`.
fn encode(enc: herald_proto::Encoding, msg: &herald_proto::ServerMsg) -> Vec<u8> {
    let mut out = BytesMut::new();
    enc.encode_server(msg, &mut out);
    let op = if enc == herald_proto::Encoding::Binary {
        OpCode::Binary
    } else {
        OpCode::Text
    };
    frame(op, &out)
}

/// The stub game's `turn` for seat 0.
const STUB_TURN: &[u8] =
    br#"{"t":"turn","seat":0,"to_call":10,"min_raise_to":20,"max_raise_to":1000,"pot":15,"timeout_ms":1000}"#;

/// `herald bench`'s command line, for parsing test arguments exactly as a user's.
#[derive(clap::Parser)]
pub struct Cli {
    #[command(subcommand)]
    /// The scenario with its arguments.
    pub scenario: herald_bench::Scenario,
}

/// Parses `bench CMD… --quiet`.
pub fn parse(cmd: &[&str]) -> herald_bench::Scenario {
    let mut argv = vec!["bench"];
    argv.extend_from_slice(cmd);
    argv.push("--quiet");
    <Cli as clap::Parser>::try_parse_from(argv)
        .unwrap()
        .scenario
}

/// Parses a `fanout` command line.
pub fn fanout_args(cmd: &[&str]) -> herald_bench::fanout::FanoutArgs {
    match parse(cmd) {
        herald_bench::Scenario::Fanout(a) => a,
        _ => panic!("not fanout"),
    }
}

/// Reads (and removes) a result file.
pub fn read_json(path: &std::path::Path) -> serde_json::Value {
    let v = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let _ = std::fs::remove_file(path);
    v
}
