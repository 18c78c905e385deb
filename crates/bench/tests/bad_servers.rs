//! The bench against servers that break the raw TCP, HTTP, SSE and
//! long-polling framing: every run fails with an error that says what the
//! server did, never hangs or panics.

#![allow(clippy::unwrap_used, missing_docs)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

mod common;

use clap::Parser;
use common::{spawn_herald, HeraldFaults};
use herald_bench::{fanout, BenchError, Scenario};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
}

/// A server that answers every connection with `answer` once it has read
/// something, then holds the connection open for a while.
fn canned(answer: &'static [u8]) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                if stream.read(&mut buf).unwrap_or(0) == 0 {
                    return;
                }
                let _ = stream.write_all(answer);
                std::thread::sleep(Duration::from_secs(5));
            });
        }
    });
    addr
}

/// Runs a fanout whose subscribers use `url` and whose publishers use a
/// well-behaved stub, and returns the error it fails with.
fn fanout_error(url: &str, transport: &str) -> String {
    let publishers = format!("ws://{}/ws", spawn_herald(HeraldFaults::default()));
    let via = if transport == "tcp" {
        "ws-binary"
    } else {
        "ws-json"
    };
    let argv = [
        "bench",
        "fanout",
        url,
        "--transport",
        transport,
        "--publish-via",
        via,
        "--publish-url",
        &publishers,
        "-n",
        "1",
        "-r",
        "10",
        "--duration",
        "200ms",
        "--quiet",
    ];
    let Scenario::Fanout(a) = Cli::try_parse_from(argv).unwrap().scenario else {
        panic!("not fanout")
    };
    match fanout::run(&a) {
        Err(e @ BenchError::Client(_)) => e.to_string(),
        other => panic!("a broken server must fail the run, got {other:?}"),
    }
}

#[test]
fn raw_tcp_frame_larger_than_the_limit() {
    let addr = canned(&[0xff, 0xff, 0xff, 0xff, 1, 2, 3]);
    let e = fanout_error(&format!("tcp://{addr}"), "tcp");
    assert!(e.contains("larger than the limit"), "{e}");
}

#[test]
fn http_error_status_is_reported_with_its_body() {
    let addr = canned(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\n\r\noops");
    for transport in ["sse", "poll"] {
        let e = fanout_error(&format!("http://{addr}"), transport);
        assert!(e.contains("500") && e.contains("oops"), "{transport}: {e}");
    }
}

#[test]
fn malformed_http_response() {
    let addr = canned(b"HTTX/1.1 what\r\n\r\n");
    for transport in ["sse", "poll"] {
        let e = fanout_error(&format!("http://{addr}"), transport);
        assert!(e.contains("malformed response head"), "{transport}: {e}");
    }
}

#[test]
fn poll_session_answer_that_is_not_json() {
    let addr = canned(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello");
    let e = fanout_error(&format!("http://{addr}"), "poll");
    assert!(
        e.contains("POST /poll answered 200") && e.contains("hello"),
        "{e}"
    );
}

#[test]
fn event_stream_that_ends() {
    // A chunked event stream that ends at once: the run says why.
    let addr = canned(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
    );
    let e = fanout_error(&format!("http://{addr}"), "sse");
    assert!(e.contains("ended the event stream"), "{e}");
}
