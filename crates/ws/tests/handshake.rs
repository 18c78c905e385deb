//! The opening handshake: server-side validation and answers, subprotocol
//! selection, and a full client request / server answer round trip.

use herald_ws::{
    accept_key, generate_key, parse_client_response, select_protocol, validate_upgrade,
    write_accept, write_client_request, HandshakeError, UpgradeRequest,
};
use httparse::Header;

const KEY: &[u8] = b"dGhlIHNhbXBsZSBub25jZQ==";

fn h<'a>(name: &'a str, value: &'a str) -> Header<'a> {
    Header {
        name,
        value: value.as_bytes(),
    }
}

/// The headers a browser sends, minus the ones each test replaces.
fn base<'a>(skip: &str) -> Vec<Header<'a>> {
    [
        h("Host", "example.com"),
        h("Upgrade", "websocket"),
        h("Connection", "Upgrade"),
        h("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        h("Sec-WebSocket-Version", "13"),
        h("Origin", "https://example.com"),
    ]
    .into_iter()
    .filter(|header| !header.name.eq_ignore_ascii_case(skip))
    .collect()
}

#[test]
fn valid_request() {
    let mut headers = base("");
    headers.push(h("Sec-WebSocket-Protocol", "herald.binary, herald.json"));
    let request = validate_upgrade("GET", &headers).expect("valid");
    assert_eq!(
        request,
        UpgradeRequest {
            key: KEY,
            protocols: Some(b"herald.binary, herald.json"),
            origin: Some(b"https://example.com"),
            deflate: None,
        }
    );
}

#[test]
fn header_names_and_tokens_are_case_insensitive() {
    let headers = [
        h("UPGRADE", "WebSocket"),
        h("connection", "keep-alive, Upgrade"),
        h("sec-websocket-key", " dGhlIHNhbXBsZSBub25jZQ== "),
        h("SEC-WEBSOCKET-VERSION", "13"),
    ];
    let request = validate_upgrade("GET", &headers).expect("valid");
    assert_eq!(
        (request.key, request.protocols, request.origin),
        (KEY, None, None)
    );
}

#[test]
fn connection_token_in_a_later_header() {
    let mut headers = base("connection");
    headers.push(h("Connection", "keep-alive"));
    headers.push(h("Connection", "upgrade"));
    assert!(validate_upgrade("GET", &headers).is_ok());
}

#[test]
fn non_get_is_405() {
    for method in ["POST", "get", "HEAD", "PUT"] {
        let err = validate_upgrade(method, &base("")).expect_err("not GET");
        assert_eq!((err, err.status()), (HandshakeError::MethodNotAllowed, 405));
    }
}

#[test]
fn missing_key_is_400() {
    let err = validate_upgrade("GET", &base("sec-websocket-key")).expect_err("no key");
    assert_eq!((err, err.status()), (HandshakeError::MissingKey, 400));
}

#[test]
fn malformed_keys_are_400() {
    for key in [
        "",
        "short",
        "dGhlIHNhbXBsZSBub25jZQ",
        "dGhlIHNhbXBsZSBub25jZQ===",
        "dGhlIHNhbXBsZSBub25jZ!==",
        "dGhlIHNhbXBsZSBub25jZQab",
    ] {
        let mut headers = base("sec-websocket-key");
        headers.push(h("Sec-WebSocket-Key", key));
        let err = validate_upgrade("GET", &headers).expect_err(key);
        assert_eq!(
            (err, err.status()),
            (HandshakeError::InvalidKey, 400),
            "{key}"
        );
    }
}

#[test]
fn duplicate_key_is_400() {
    let mut headers = base("");
    headers.push(h("Sec-WebSocket-Key", "AAAAAAAAAAAAAAAAAAAAAA=="));
    let err = validate_upgrade("GET", &headers).expect_err("two keys");
    assert_eq!(err.status(), 400);
}

#[test]
fn wrong_or_missing_version_is_426() {
    for version in ["8", "12", "14", "13, 8", ""] {
        let mut headers = base("sec-websocket-version");
        headers.push(h("Sec-WebSocket-Version", version));
        let err = validate_upgrade("GET", &headers).expect_err(version);
        assert_eq!(
            (err, err.status()),
            (HandshakeError::UnsupportedVersion, 426),
            "{version:?}"
        );
    }
    let err = validate_upgrade("GET", &base("sec-websocket-version")).expect_err("no version");
    assert_eq!(err.status(), 426);
    let mut answer = Vec::new();
    err.write_response(&mut answer);
    let answer = String::from_utf8(answer).expect("ascii");
    assert!(answer.starts_with("HTTP/1.1 426 Upgrade Required\r\n"));
    assert!(answer.contains("\r\nSec-WebSocket-Version: 13\r\n"));
}

#[test]
fn missing_upgrade_or_connection_is_400() {
    let err = validate_upgrade("GET", &base("upgrade")).expect_err("no upgrade");
    assert_eq!((err, err.status()), (HandshakeError::MissingUpgrade, 400));
    let mut headers = base("upgrade");
    headers.push(h("Upgrade", "h2c"));
    assert_eq!(
        validate_upgrade("GET", &headers),
        Err(HandshakeError::MissingUpgrade)
    );

    let err = validate_upgrade("GET", &base("connection")).expect_err("no connection");
    assert_eq!(
        (err, err.status()),
        (HandshakeError::MissingConnectionUpgrade, 400)
    );
    let mut headers = base("connection");
    headers.push(h("Connection", "keep-alive, upgraded"));
    assert_eq!(
        validate_upgrade("GET", &headers),
        Err(HandshakeError::MissingConnectionUpgrade)
    );
}

#[test]
fn first_protocol_header_wins() {
    let mut headers = base("");
    headers.push(h("Sec-WebSocket-Protocol", "a, b"));
    headers.push(h("Sec-WebSocket-Protocol", "c"));
    let request = validate_upgrade("GET", &headers).expect("valid");
    assert_eq!(request.protocols, Some(&b"a, b"[..]));
}

#[test]
fn protocol_selection() {
    let supported = ["herald.binary", "herald.json"];
    // The server's preference order wins over the client's.
    assert_eq!(
        select_protocol(Some(b"herald.json, herald.binary"), &supported),
        Some("herald.binary")
    );
    assert_eq!(
        select_protocol(Some(b"x,herald.json ,y"), &supported),
        Some("herald.json")
    );
    assert_eq!(
        select_protocol(Some(b"  herald.json"), &supported),
        Some("herald.json")
    );
    // Exact, case-sensitive tokens.
    assert_eq!(select_protocol(Some(b"Herald.JSON"), &supported), None);
    assert_eq!(
        select_protocol(Some(b"herald.jsonx, herald"), &supported),
        None
    );
    assert_eq!(select_protocol(Some(b""), &supported), None);
    assert_eq!(select_protocol(None, &supported), None);
    assert_eq!(select_protocol(Some(b"herald.json"), &[]), None);
}

#[test]
fn accept_answer_format() {
    let mut out = Vec::new();
    write_accept(&mut out, &accept_key(KEY), Some("herald.json"));
    assert_eq!(
        out,
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: herald.json\r\n\r\n"
    );
    out.clear();
    write_accept(&mut out, &accept_key(KEY), None);
    assert!(!String::from_utf8_lossy(&out).contains("Sec-WebSocket-Protocol"));
}

/// The server side as Herald runs it: httparse, validate, select, answer.
fn serve(request: &[u8], supported: &[&str]) -> Vec<u8> {
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let mut parsed = httparse::Request::new(&mut headers);
    let status = parsed.parse(request).expect("well-formed");
    assert_eq!(status, httparse::Status::Complete(request.len()));
    let upgrade =
        validate_upgrade(parsed.method.unwrap_or(""), parsed.headers).expect("valid upgrade");
    let protocol = select_protocol(upgrade.protocols, supported);
    let mut answer = Vec::new();
    write_accept(&mut answer, &accept_key(upgrade.key), protocol);
    answer
}

#[test]
fn client_server_round_trip() {
    let key = generate_key();
    let mut request = Vec::new();
    write_client_request(
        &mut request,
        "localhost:8000",
        "/ws?x=1",
        &key,
        &["herald.json", "herald.binary"],
    );
    assert!(request.starts_with(b"GET /ws?x=1 HTTP/1.1\r\nHost: localhost:8000\r\n"));
    let mut answer = serve(&request, &["herald.binary"]);
    let head_len = answer.len();

    // Every proper prefix of the answer is incomplete.
    for k in 0..head_len {
        assert_eq!(
            parse_client_response(&answer[..k], &key),
            Ok(None),
            "prefix {k}"
        );
    }
    // Frame bytes may follow the head in the same read.
    answer.extend_from_slice(&[0x81, 0x00]);
    assert_eq!(
        parse_client_response(&answer, &key),
        Ok(Some((Some("herald.binary".to_owned()), head_len)))
    );
}

#[test]
fn client_round_trip_without_protocols() {
    let key = generate_key();
    let mut request = Vec::new();
    write_client_request(&mut request, "h", "/", &key, &[]);
    assert!(!String::from_utf8_lossy(&request).contains("Sec-WebSocket-Protocol"));
    let answer = serve(&request, &["herald.json"]);
    assert_eq!(
        parse_client_response(&answer, &key),
        Ok(Some((None, answer.len())))
    );
}

#[test]
fn client_refuses_bad_answers() {
    let key = generate_key();
    let other = generate_key();
    assert_ne!(key, other);
    let mut request = Vec::new();
    write_client_request(&mut request, "h", "/", &other, &[]);
    let wrong_key = serve(&request, &[]);
    assert_eq!(
        parse_client_response(&wrong_key, &key),
        Err(HandshakeError::BadAccept)
    );

    let forbidden = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(
        parse_client_response(forbidden, &key),
        Err(HandshakeError::UnexpectedStatus(403))
    );

    let accept = String::from_utf8(accept_key(&key).to_vec()).expect("ascii");
    let answer = |extra: &str| {
        format!("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n{extra}\r\n")
    };
    let no_accept = answer("");
    assert_eq!(
        parse_client_response(no_accept.as_bytes(), &key),
        Err(HandshakeError::BadAccept)
    );
    let with_ext = answer(&format!(
        "Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Extensions: permessage-deflate\r\n"
    ));
    assert_eq!(
        parse_client_response(with_ext.as_bytes(), &key),
        Err(HandshakeError::UnexpectedExtension)
    );
    let two_protocols = answer(&format!(
        "Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: a, b\r\n"
    ));
    assert_eq!(
        parse_client_response(two_protocols.as_bytes(), &key),
        Err(HandshakeError::InvalidProtocol)
    );
    let ok = answer(&format!("sec-websocket-accept: {accept}\r\n"));
    assert_eq!(
        parse_client_response(ok.as_bytes(), &key),
        Ok(Some((None, ok.len())))
    );

    assert!(matches!(
        parse_client_response(b"garbage\r\n\r\n", &key),
        Err(HandshakeError::Http(_))
    ));
}
