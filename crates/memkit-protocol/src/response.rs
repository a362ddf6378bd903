//! Server replies as values: [`Response`], its encoding (server side) and [`decode_response`]
//! (client side).
//!
//! Wire format: one line per reply ending in `\r\n`, plus a data block after `VALUE` and
//! `VA` lines. Multi-line replies (`VALUE`... `END`, `STAT`... `END`) decode one line per
//! call, so a client reads them in a loop until `End`.

use crate::Limits;
use crate::error::DecodeError;
use crate::num::{parse_i32, parse_u32, parse_u64, write_u64};

/// Two-letter meta reply codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaCode {
    /// `VA`: value follows.
    Va,
    /// `HD`: success, no value.
    Hd,
    /// `EN`: mg miss.
    En,
    /// `NF`: not found.
    Nf,
    /// `NS`: not stored.
    Ns,
    /// `EX`: CAS mismatch.
    Ex,
}

impl MetaCode {
    /// The two letters.
    pub const fn as_str(self) -> &'static str {
        match self {
            MetaCode::Va => "VA",
            MetaCode::Hd => "HD",
            MetaCode::En => "EN",
            MetaCode::Nf => "NF",
            MetaCode::Ns => "NS",
            MetaCode::Ex => "EX",
        }
    }
}

/// One reply line (with its data block, if any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Response<'a> {
    /// `VALUE <key> <flags> <bytes> [<cas>]` + data.
    Value {
        /// Key.
        key: &'a [u8],
        /// Client flags.
        flags: u32,
        /// CAS, for gets/gats.
        cas: Option<u64>,
        /// The data.
        data: &'a [u8],
    },
    /// `END`
    End,
    /// `STORED`
    Stored,
    /// `NOT_STORED`
    NotStored,
    /// `EXISTS`
    Exists,
    /// `NOT_FOUND`
    NotFound,
    /// `DELETED`
    Deleted,
    /// `TOUCHED`
    Touched,
    /// `OK`
    Ok,
    /// `RESET` (stats reset)
    Reset,
    /// incr/decr result.
    Number(u64),
    /// `VERSION <v>`
    Version(&'a [u8]),
    /// `STAT <name> <value>`
    Stat {
        /// Name.
        name: &'a [u8],
        /// Value (may hold spaces).
        value: &'a [u8],
    },
    /// `ERROR`
    Error,
    /// `CLIENT_ERROR <msg>`
    ClientError(&'a [u8]),
    /// `SERVER_ERROR <msg>`
    ServerError(&'a [u8]),
    /// A meta reply: `<code> <flags>` (`VA <len> <flags>` + data).
    Meta {
        /// Code.
        code: MetaCode,
        /// Return flags, raw and space-separated; see [`ReturnFlags::parse`].
        flags: &'a [u8],
        /// The data block, for `VA` only.
        data: Option<&'a [u8]>,
    },
    /// `MN`
    MetaNoop,
    /// `ME <key> <k=v ...>`
    MetaDebug {
        /// Key (base64 if the request used `b`).
        key: &'a [u8],
        /// The `k=v` pairs, raw.
        info: &'a [u8],
    },
    /// Any other line (`BUSY ...`, `ERROR: shutdown not enabled`, `MEMLIMIT_TOO_SMALL ...`).
    Other(&'a [u8]),
}

fn put(out: &mut Vec<u8>, parts: &[&[u8]]) {
    for p in parts {
        out.extend_from_slice(p);
    }
    out.extend_from_slice(b"\r\n");
}

impl Response<'_> {
    /// Appends the reply with its `\r\n` endings.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Response::Value {
                key,
                flags,
                cas,
                data,
            } => crate::render::write_value(out, key, flags, data, cas),
            Response::End => put(out, &[b"END"]),
            Response::Stored => put(out, &[b"STORED"]),
            Response::NotStored => put(out, &[b"NOT_STORED"]),
            Response::Exists => put(out, &[b"EXISTS"]),
            Response::NotFound => put(out, &[b"NOT_FOUND"]),
            Response::Deleted => put(out, &[b"DELETED"]),
            Response::Touched => put(out, &[b"TOUCHED"]),
            Response::Ok => put(out, &[b"OK"]),
            Response::Reset => put(out, &[b"RESET"]),
            Response::Number(n) => crate::render::write_number(out, n),
            Response::Version(v) => put(out, &[b"VERSION ", v]),
            Response::Stat { name, value } => put(out, &[b"STAT ", name, b" ", value]),
            Response::Error => put(out, &[b"ERROR"]),
            Response::ClientError(m) => put(out, &[b"CLIENT_ERROR ", m]),
            Response::ServerError(m) => put(out, &[b"SERVER_ERROR ", m]),
            Response::Meta { code, flags, data } => {
                out.extend_from_slice(code.as_str().as_bytes());
                if code == MetaCode::Va {
                    out.push(b' ');
                    write_u64(out, data.map_or(0, |d| d.len() as u64));
                }
                if !flags.is_empty() {
                    out.push(b' ');
                    out.extend_from_slice(flags);
                }
                out.extend_from_slice(b"\r\n");
                if let (MetaCode::Va, Some(d)) = (code, data) {
                    put(out, &[d]);
                }
            }
            Response::MetaNoop => put(out, &[b"MN"]),
            Response::MetaDebug { key, info } => put(out, &[b"ME ", key, b" ", info]),
            Response::Other(l) => put(out, &[l]),
        }
    }
}

/// Decodes one reply from `buf`: `Ok((reply, consumed))`, `Incomplete` until the line and its
/// data block are all there, `Malformed` for a reply that breaks the protocol (a data block
/// not ending in `\r\n`, a length above `limits.max_item_size`).
pub fn decode_response<'a>(
    buf: &'a [u8],
    limits: &Limits,
) -> Result<(Response<'a>, usize), DecodeError<'a>> {
    let Some(nl) = memchr::memchr(b'\n', buf) else {
        // A reply line is short; a server sending pages without a newline is broken.
        return Err(if buf.len() > limits.max_line_len.max(4096) {
            DecodeError::Malformed
        } else {
            DecodeError::Incomplete
        });
    };
    let consumed = nl + 1;
    let line = buf[..nl].strip_suffix(b"\r").unwrap_or(&buf[..nl]);
    let (head, rest) = match line.iter().position(|&b| b == b' ') {
        Some(i) => (&line[..i], &line[i + 1..]),
        None => (line, &line[line.len()..]),
    };
    let simple = |r| Ok((r, consumed));
    match (head, rest.is_empty()) {
        (b"END", true) => simple(Response::End),
        (b"STORED", true) => simple(Response::Stored),
        (b"NOT_STORED", true) => simple(Response::NotStored),
        (b"EXISTS", true) => simple(Response::Exists),
        (b"NOT_FOUND", true) => simple(Response::NotFound),
        (b"DELETED", true) => simple(Response::Deleted),
        (b"TOUCHED", true) => simple(Response::Touched),
        (b"OK", true) => simple(Response::Ok),
        (b"RESET", true) => simple(Response::Reset),
        (b"ERROR", true) => simple(Response::Error),
        (b"MN", true) => simple(Response::MetaNoop),
        (b"VERSION", false) => simple(Response::Version(rest)),
        (b"CLIENT_ERROR", false) => simple(Response::ClientError(rest)),
        (b"SERVER_ERROR", false) => simple(Response::ServerError(rest)),
        (b"STAT", false) => {
            let (name, value) = match rest.iter().position(|&b| b == b' ') {
                Some(i) => (&rest[..i], &rest[i + 1..]),
                None => (rest, &rest[rest.len()..]),
            };
            simple(Response::Stat { name, value })
        }
        (b"ME", false) => match rest.iter().position(|&b| b == b' ') {
            Some(i) => simple(Response::MetaDebug {
                key: &rest[..i],
                info: &rest[i + 1..],
            }),
            None => simple(Response::Other(line)),
        },
        (b"HD" | b"EN" | b"NF" | b"NS" | b"EX", _) => {
            let code = match head {
                b"HD" => MetaCode::Hd,
                b"EN" => MetaCode::En,
                b"NF" => MetaCode::Nf,
                b"NS" => MetaCode::Ns,
                _ => MetaCode::Ex,
            };
            simple(Response::Meta {
                code,
                flags: rest,
                data: None,
            })
        }
        (b"VA", false) => {
            let (len, flags) = match rest.iter().position(|&b| b == b' ') {
                Some(i) => (&rest[..i], &rest[i + 1..]),
                None => (rest, &rest[rest.len()..]),
            };
            let len = parse_u64(len).ok_or(DecodeError::Malformed)?;
            let data = block(buf, consumed, len, limits)?;
            let total = consumed + data.len() + 2;
            Ok((
                Response::Meta {
                    code: MetaCode::Va,
                    flags,
                    data: Some(data),
                },
                total,
            ))
        }
        (b"VALUE", false) => {
            let mut it = rest.split(|&b| b == b' ');
            let key = it
                .next()
                .filter(|k| !k.is_empty())
                .ok_or(DecodeError::Malformed)?;
            let flags = it
                .next()
                .and_then(parse_u32)
                .ok_or(DecodeError::Malformed)?;
            let len = it
                .next()
                .and_then(parse_u64)
                .ok_or(DecodeError::Malformed)?;
            let cas = match it.next() {
                Some(c) => Some(parse_u64(c).ok_or(DecodeError::Malformed)?),
                None => None,
            };
            let data = block(buf, consumed, len, limits)?;
            let total = consumed + data.len() + 2;
            Ok((
                Response::Value {
                    key,
                    flags,
                    cas,
                    data,
                },
                total,
            ))
        }
        _ if !line.is_empty() && line.iter().all(u8::is_ascii_digit) => match parse_u64(line) {
            Some(n) => simple(Response::Number(n)),
            None => simple(Response::Other(line)),
        },
        _ => simple(Response::Other(line)),
    }
}

fn block<'a>(
    buf: &'a [u8],
    start: usize,
    len: u64,
    limits: &Limits,
) -> Result<&'a [u8], DecodeError<'a>> {
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l <= limits.max_item_size)
        .ok_or(DecodeError::Malformed)?;
    let b = buf
        .get(start..start + len + 2)
        .ok_or(DecodeError::Incomplete)?;
    if !b.ends_with(b"\r\n") {
        return Err(DecodeError::Malformed);
    }
    Ok(&b[..len])
}

/// Typed view of a meta reply's return flags (client side).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReturnFlags<'a> {
    /// `c`
    pub cas: Option<u64>,
    /// `f`
    pub flags: Option<u32>,
    /// `t`: -1 for never.
    pub ttl: Option<i32>,
    /// `s`
    pub size: Option<u64>,
    /// `l`
    pub last_access: Option<u64>,
    /// `h`
    pub hit: Option<bool>,
    /// `k`, as sent (base64 when `base64`).
    pub key: Option<&'a [u8]>,
    /// `b`: `key` is base64.
    pub base64: bool,
    /// `O`
    pub opaque: Option<&'a [u8]>,
    /// `W`
    pub win: bool,
    /// `X`
    pub stale: bool,
    /// `Z`
    pub win_taken: bool,
}

impl<'a> ReturnFlags<'a> {
    /// Parses `flags` from [`Response::Meta`]. Unknown flags are skipped (newer servers add
    /// some); a malformed number is `None`.
    pub fn parse(flags: &'a [u8]) -> Self {
        let mut r = ReturnFlags::default();
        for tok in flags.split(|&b| b == b' ') {
            let Some((&c, arg)) = tok.split_first() else {
                continue;
            };
            match c {
                b'c' => r.cas = parse_u64(arg),
                b'f' => r.flags = parse_u32(arg),
                b't' => r.ttl = parse_i32(arg),
                b's' => r.size = parse_u64(arg),
                b'l' => r.last_access = parse_u64(arg),
                b'h' => r.hit = Some(arg == b"1"),
                b'k' => r.key = Some(arg),
                b'b' => r.base64 = true,
                b'O' => r.opaque = Some(arg),
                b'W' => r.win = true,
                b'X' => r.stale = true,
                b'Z' => r.win_taken = true,
                _ => {}
            }
        }
        r
    }
}
