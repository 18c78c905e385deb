//! The websocket-shootout benchmark protocol (hashrocket/websocket-shootout), so
//! the field's standard broadcast benchmark runs against Herald unchanged.
//!
//! JSON mode (text frames): `{"type":"echo"|"broadcast","payload":P}`; the server
//! answers `echo` with the same object, and `broadcast` by sending the object to
//! every shootout connection and `{"type":"broadcastResult","payload":P,...}` to the
//! sender. P is passed through byte for byte.
//!
//! Binary mode (binary frames): byte 0 is the type (`e`, `b`, `r`), bytes 1..5 a
//! big-endian u32 payload length, bytes 5..13 a big-endian i64 send time in
//! nanoseconds, then padding.
