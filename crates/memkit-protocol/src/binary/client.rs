//! The client side: request encoders and the response decoder.

use super::*;

/// Client side: encodes a request frame.
pub fn encode_request(
    out: &mut Vec<u8>,
    opcode: u8,
    opaque: u32,
    cas: u64,
    extras: &[u8],
    key: &[u8],
    value: &[u8],
) {
    Header {
        magic: REQUEST_MAGIC,
        opcode,
        key_len: key.len() as u16,
        extras_len: extras.len() as u8,
        data_type: 0,
        status: 0,
        body_len: (extras.len() + key.len() + value.len()) as u32,
        opaque,
        cas,
    }
    .write(out);
    out.extend_from_slice(extras);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

/// Client side: the frame that sends `req` (the inverse of [`decode_request`] for every
/// request it returns).
pub fn encode(req: &Request<'_>, out: &mut Vec<u8>) {
    let mut extras = [0u8; 20];
    let (ext, key, value): (usize, &[u8], &[u8]) = match req.cmd {
        Command::Get { key, touch, .. } => match touch {
            Some(t) => {
                extras[..4].copy_from_slice(&t.to_be_bytes());
                (4, key, b"")
            }
            None => (0, key, b""),
        },
        Command::Store {
            kind,
            key,
            flags,
            exptime,
            data,
        } => match kind {
            StoreKind::Append | StoreKind::Prepend => (0, key, data),
            _ => {
                extras[..4].copy_from_slice(&flags.to_be_bytes());
                extras[4..8].copy_from_slice(&exptime.to_be_bytes());
                (8, key, data)
            }
        },
        Command::Delete { key } => (0, key, b""),
        Command::Arith {
            key,
            delta,
            initial,
            exptime,
            ..
        } => {
            extras[..8].copy_from_slice(&delta.to_be_bytes());
            extras[8..16].copy_from_slice(&initial.to_be_bytes());
            extras[16..].copy_from_slice(&exptime.to_be_bytes());
            (20, key, b"")
        }
        Command::Flush { delay } => match delay {
            Some(d) => {
                extras[..4].copy_from_slice(&d.to_be_bytes());
                (4, b"", b"")
            }
            None => (0, b"", b""),
        },
        Command::Stat { group } => (0, group, b""),
        Command::SaslAuth { mech, data, .. } => (0, mech, data),
        Command::Noop | Command::Version | Command::Quit | Command::SaslListMechs => (0, b"", b""),
    };
    encode_request(
        out,
        req.opcode,
        req.opaque,
        req.cas,
        &extras[..ext],
        key,
        value,
    );
}

/// A decoded response frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response<'a> {
    /// The header (its `status` field is the status code).
    pub header: Header,
    /// Extras.
    pub extras: &'a [u8],
    /// Key.
    pub key: &'a [u8],
    /// Value or error message.
    pub value: &'a [u8],
}

/// Client side: decodes one response frame; `Ok(None)` until it is complete, `Err` on a
/// frame that is not a response or whose lengths do not add up.
pub fn decode_response(buf: &[u8]) -> Result<Option<(Response<'_>, usize)>, &'static str> {
    let Some(h) = Header::parse(buf) else {
        return Ok(None);
    };
    if h.magic != RESPONSE_MAGIC {
        return Err("bad response magic");
    }
    let (ext, klen, body) = (
        usize::from(h.extras_len),
        usize::from(h.key_len),
        h.body_len as usize,
    );
    if ext + klen > body {
        return Err("extras and key longer than the body");
    }
    let Some(b) = buf.get(HEADER_LEN..HEADER_LEN + body) else {
        return Ok(None);
    };
    let r = Response {
        header: h,
        extras: &b[..ext],
        key: &b[ext..ext + klen],
        value: &b[ext + klen..],
    };
    Ok(Some((r, HEADER_LEN + body)))
}
