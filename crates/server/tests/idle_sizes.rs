//! The per-connection state an idle client holds, in bytes, as accounted in
//! docs/decisions/0010-idle-memory.md: each bound fails if a change makes
//! an idle connection's own structures grow (tokio's task header, its I/O
//! registration and the allocator's size classes come on top; see there).
//! Run with `--nocapture` to print the sizes.
use herald_core::{Client, Outbox, Session};
use herald_server::conn::Connection;
use herald_server::transport::sse::conn::SseConn;
use herald_server::transport::tcp::TcpWire;
use herald_server::transport::ws::WsWire;
use std::mem::size_of;
use tokio::net::TcpStream;

#[test]
fn idle_connection_state_stays_small() {
    let sizes = [
        ("Client", size_of::<Client>(), 160),
        ("Outbox", size_of::<Outbox>(), 96),
        ("Session", size_of::<Session>(), 64),
        ("TcpStream", size_of::<TcpStream>(), 40),
        (
            "Connection<Session, WsWire>",
            size_of::<Connection<Session, WsWire>>(),
            160,
        ),
        (
            "Connection<Session, TcpWire>",
            size_of::<Connection<Session, TcpWire>>(),
            160,
        ),
        ("SseConn<TcpStream>", size_of::<SseConn<TcpStream>>(), 192),
    ];
    for (name, size, bound) in sizes {
        println!("{name}: {size} bytes (bound {bound})");
    }
    for (name, size, bound) in sizes {
        assert!(size <= bound, "{name} is {size} bytes, over {bound}");
    }
}
