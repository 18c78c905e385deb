//! Helpers shared by the integration tests: owned copies of decoded messages
//! and a loop that decodes a whole byte stream the way a connection would.

// Each test file uses a different subset of these helpers.
#![allow(dead_code)]

use herald_ws::{Decoder, Message, ProtocolError};

/// An owned copy of a [`Message`], so tests can collect several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owned {
    Text(Vec<u8>),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<u16>, String),
}

impl From<Message<'_>> for Owned {
    fn from(message: Message<'_>) -> Owned {
        match message {
            Message::Text(b) => Owned::Text(b.to_vec()),
            Message::Binary(b) => Owned::Binary(b.to_vec()),
            Message::Ping(b) => Owned::Ping(b.to_vec()),
            Message::Pong(b) => Owned::Pong(b.to_vec()),
            Message::Close(code, reason) => Owned::Close(code, reason.to_owned()),
        }
    }
}

/// Decodes every complete frame at the front of `stream`; returns the
/// messages and how many bytes were consumed (the rest is an incomplete frame).
pub fn decode_all(
    decoder: &mut Decoder,
    stream: &mut [u8],
) -> Result<(Vec<Owned>, usize), ProtocolError> {
    let mut messages = Vec::new();
    let mut at = 0;
    while let Some((consumed, message)) = decoder.decode(&mut stream[at..])? {
        assert!(consumed > 0, "a frame is at least 2 bytes");
        at += consumed;
        if let Some(message) = message {
            messages.push(message.into());
        }
    }
    Ok((messages, at))
}

/// Decodes a stream that must consist of whole, valid frames.
pub fn decode_ok(decoder: &mut Decoder, mut stream: Vec<u8>) -> Vec<Owned> {
    let (messages, consumed) = decode_all(decoder, &mut stream).expect("valid stream");
    assert_eq!(consumed, stream.len(), "stream ended inside a frame");
    messages
}

/// Decodes a stream and returns the error it must provoke.
pub fn decode_err(decoder: &mut Decoder, mut stream: Vec<u8>) -> ProtocolError {
    match decode_all(decoder, &mut stream) {
        Err(e) => e,
        Ok((messages, consumed)) => {
            panic!("expected an error, got {messages:?} ({consumed} bytes consumed)")
        }
    }
}
