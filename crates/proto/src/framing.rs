//! The raw TCP transport's framing: each message is preceded by its length as
//! a 4-byte big-endian integer; a zero length is a heartbeat. Sans-I/O, like
//! the codecs, so the server's transport and the fuzz targets share it.

/// Bytes of the length prefix.
pub const PREFIX: usize = 4;

/// The length prefix announced more than the maximum message size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("frame of {len} bytes exceeds the maximum of {max}")]
pub struct TooLarge {
    /// The announced length.
    pub len: usize,
    /// The maximum.
    pub max: usize,
}

/// Decodes one frame from the front of `buf`: `Ok(None)` when incomplete,
/// `Ok(Some((consumed, payload)))` when whole (an empty payload is a
/// heartbeat), `Err` as soon as a prefix above `max` is seen — before any of
/// the payload is buffered.
pub fn decode_frame(buf: &[u8], max: usize) -> Result<Option<(usize, &[u8])>, TooLarge> {
    let Some(prefix) = buf.get(..PREFIX) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
    if len > max {
        return Err(TooLarge { len, max });
    }
    Ok(buf
        .get(PREFIX..PREFIX + len)
        .map(|payload| (PREFIX + len, payload)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames() {
        assert_eq!(decode_frame(&[0, 0, 0], 8), Ok(None));
        assert_eq!(decode_frame(&[0, 0, 0, 0, 7], 8), Ok(Some((4, &[][..]))));
        assert_eq!(decode_frame(&[0, 0, 0, 2, 1], 8), Ok(None));
        assert_eq!(
            decode_frame(&[0, 0, 0, 2, 1, 2, 3], 8),
            Ok(Some((6, &[1, 2][..])))
        );
        assert!(decode_frame(&[0xff, 0xff, 0xff, 0xff], 8).is_err());
    }
}
