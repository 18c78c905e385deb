//! The hidden `__autobahn-client` against a scripted server: the client's
//! side of Autobahn's protocol, and how the bench fails a connection whose
//! server breaks the framing.

#![allow(clippy::unwrap_used, missing_docs)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

use herald_bench::autobahn::{self, AutobahnArgs};
use herald_ws::{Decoder, Message, OpCode, Role};

/// Regression: on a protocol error the bench only dropped the TCP
/// connection; RFC 6455 §7.1.7 asks for a close frame with the error's code
/// first (Autobahn's reports showed no close code from the bench).
#[test]
fn a_masked_server_frame_gets_close_1002() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(stream.read(&mut byte).unwrap(), 1, "request head cut short");
            head.push(byte[0]);
        }
        let head = String::from_utf8(head).unwrap();
        assert!(head.starts_with("GET /getCaseCount "), "{head}");
        let key = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("sec-websocket-key")
                    .then(|| value.trim().to_owned())
            })
            .unwrap();
        let mut answer = Vec::new();
        herald_ws::write_accept(&mut answer, &herald_ws::accept_key(key.as_bytes()), None);
        // A server must not mask its frames: this one does.
        let mut frame = bytes::BytesMut::new();
        herald_ws::encode_frame(&mut frame, OpCode::Text, b"3", Some([1, 2, 3, 4]));
        answer.extend_from_slice(&frame);
        stream.write_all(&answer).unwrap();
        let mut got = Vec::new();
        let _ = stream.read_to_end(&mut got);
        tx.send(got).unwrap();
    });
    let args = AutobahnArgs {
        url: format!("ws://{addr}"),
        agent: "test".into(),
        max_message: 1 << 20,
        case_timeout: Duration::from_secs(10),
    };
    let err = autobahn::run(&args).unwrap_err().to_string();
    assert!(err.contains("getCaseCount"), "{err}");
    let mut got = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let mut dec = Decoder::new(Role::Server, 1 << 20);
    match dec.decode(&mut got) {
        Ok(Some((_, Some(Message::Close(code, _))))) => assert_eq!(code, Some(1002)),
        other => panic!("expected a close frame, got {other:?}"),
    }
}
