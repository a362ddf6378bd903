//! The server's side: one request frame decoded, in memcached's order of checks.

use super::*;

/// Which storage command a [`Command::Store`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreKind {
    /// `SET`: with a nonzero CAS, memcached's `NREAD_CAS`.
    Set,
    /// `ADD`: with a nonzero CAS, a CAS store as well.
    Add,
    /// `REPLACE`: with a nonzero CAS, a CAS store as well.
    Replace,
    /// `APPEND` (the CAS, if nonzero, must match).
    Append,
    /// `PREPEND` (the CAS, if nonzero, must match).
    Prepend,
}

/// What a request asks, borrowed from the input buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command<'a> {
    /// `GET`/`GETK`/`GAT`/`GATK` and their quiet forms; `TOUCH` when `value` is false.
    Get {
        /// The key.
        key: &'a [u8],
        /// `GETK`/`GATK`: the reply carries the key, a miss too.
        with_key: bool,
        /// `TOUCH`/`GAT*`: the new expiry.
        touch: Option<u32>,
        /// `false` for `TOUCH`: the reply carries flags only.
        value: bool,
    },
    /// `SET`/`ADD`/`REPLACE`/`APPEND`/`PREPEND` and their quiet forms.
    Store {
        /// Which command.
        kind: StoreKind,
        /// The key.
        key: &'a [u8],
        /// Client flags (0 for append/prepend, which have no extras).
        flags: u32,
        /// Expiry (0 for append/prepend).
        exptime: u32,
        /// The value.
        data: &'a [u8],
    },
    /// `DELETE(Q)`.
    Delete {
        /// The key.
        key: &'a [u8],
    },
    /// `INCREMENT(Q)`/`DECREMENT(Q)`.
    Arith {
        /// Increment (true) or decrement.
        incr: bool,
        /// The key.
        key: &'a [u8],
        /// The delta.
        delta: u64,
        /// Value to create a missing item with.
        initial: u64,
        /// Expiry of a created item; `0xffffffff`: do not create.
        exptime: u32,
    },
    /// `FLUSH(Q)` with its optional delay.
    Flush {
        /// The delay extra, if sent (0 means now).
        delay: Option<u32>,
    },
    /// `NOOP`.
    Noop,
    /// `VERSION`.
    Version,
    /// `QUIT(Q)`.
    Quit,
    /// `STAT` with a group name (empty: the general stats).
    Stat {
        /// The group, as sent in the key.
        group: &'a [u8],
    },
    /// `SASL_LIST_MECHS`.
    SaslListMechs,
    /// `SASL_AUTH` (`step` false) or `SASL_STEP`.
    SaslAuth {
        /// `SASL_STEP`.
        step: bool,
        /// The mechanism, from the key.
        mech: &'a [u8],
        /// The challenge or response.
        data: &'a [u8],
    },
}

/// One decoded request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    /// The opcode as sent: replies carry it back.
    pub opcode: u8,
    /// Echoed in every reply.
    pub opaque: u32,
    /// The header's CAS (0: none).
    pub cas: u64,
    /// A quiet opcode: success is not answered (except a get hit); errors always are.
    pub quiet: bool,
    /// What it asks.
    pub cmd: Command<'a>,
}

impl Request<'_> {
    /// Whether this request may change stored data (persistent `sync` mode holds its reply
    /// until the change is durable): its logical command's [`crate::Command::mutates`].
    pub fn mutates(&self) -> bool {
        self.command().is_some_and(|c| c.mutates())
    }
}

/// A request answered with an error status without reaching storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reject<'a> {
    /// The request's opcode.
    pub opcode: u8,
    /// The request's opaque.
    pub opaque: u32,
    /// The status to send.
    pub status: Status,
    /// Bytes of the input that the request used (header, extras, key).
    pub consumed: usize,
    /// Bytes after those to discard as they arrive (a refused value).
    pub swallow: u64,
    /// Close the connection after the reply.
    pub close: bool,
    /// A `SET` refused as too large: memcached unlinks the key's old item, so that a stale
    /// value cannot outlive a failed overwrite.
    pub unlink: Option<&'a [u8]>,
}

impl Reject<'_> {
    /// Writes the error reply.
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_error(out, self.opcode, self.opaque, self.status);
    }
}

/// Why [`decode_request`] returned no request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError<'a> {
    /// More bytes are needed.
    Incomplete,
    /// Answer with an error (and maybe swallow or close).
    Reject(Reject<'a>),
    /// Bad magic: memcached closes without a reply.
    Close,
}

/// SASL as the decoder needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Auth {
    /// `-S`: SASL is on.
    pub sasl: bool,
    /// This connection has authenticated.
    pub authenticated: bool,
}

impl Auth {
    /// memcached's `authenticated()`: with SASL on, only the SASL commands and `VERSION`
    /// are served before authentication.
    fn allows(self, opcode: u8) -> bool {
        !self.sasl
            || self.authenticated
            || matches!(
                opcode,
                op::SASL_LIST_MECHS | op::SASL_AUTH | op::SASL_STEP | op::VERSION
            )
    }
}

/// The opcode a quiet opcode is the quiet form of; `None` if `opcode` is not quiet.
fn loud(opcode: u8) -> Option<u8> {
    Some(match opcode {
        op::SETQ => op::SET,
        op::ADDQ => op::ADD,
        op::REPLACEQ => op::REPLACE,
        op::DELETEQ => op::DELETE,
        op::INCREMENTQ => op::INCREMENT,
        op::DECREMENTQ => op::DECREMENT,
        op::QUITQ => op::QUIT,
        op::FLUSHQ => op::FLUSH,
        op::APPENDQ => op::APPEND,
        op::PREPENDQ => op::PREPEND,
        op::GETQ => op::GET,
        op::GETKQ => op::GETK,
        op::GATQ => op::GAT,
        op::GATKQ => op::GATK,
        _ => return None,
    })
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// Decodes one request from the start of `buf`, returning it and the bytes it used.
///
/// Never allocates, never panics, and waits for at most header + extras + key (under 66 KiB)
/// before deciding, plus a value that fits `limits` for the commands that carry one.
pub fn decode_request<'a>(
    buf: &'a [u8],
    limits: &Limits,
    auth: Auth,
) -> Result<(Request<'a>, usize), DecodeError<'a>> {
    let Some(h) = Header::parse(buf) else {
        return Err(DecodeError::Incomplete);
    };
    if h.magic != REQUEST_MAGIC {
        return Err(DecodeError::Close);
    }
    let (ext, klen, body) = (
        usize::from(h.extras_len),
        usize::from(h.key_len),
        h.body_len as usize,
    );
    let head = HEADER_LEN + ext + klen;
    if buf.len() < head {
        return Err(DecodeError::Incomplete);
    }
    let reject = |status, swallow: u64, close| {
        DecodeError::Reject(Reject {
            opcode: h.opcode,
            opaque: h.opaque,
            status,
            consumed: head,
            swallow,
            close,
            unlink: None,
        })
    };
    if klen > body || klen + ext > body {
        return Err(reject(Status::UnknownCommand, 0, true));
    }
    if !auth.allows(h.opcode) {
        return Err(reject(Status::AuthError, 0, true));
    }
    if klen > crate::MAX_KEY_LEN {
        return Err(reject(Status::Invalid, 0, true));
    }
    let extras = &buf[HEADER_LEN..HEADER_LEN + ext];
    let key = &buf[HEADER_LEN + ext..head];
    let quiet = loud(h.opcode).is_some();
    let opcode = loud(h.opcode).unwrap_or(h.opcode);
    let vlen = body - klen - ext;
    let done = |cmd, used| {
        Ok((
            Request {
                opcode: h.opcode,
                opaque: h.opaque,
                cas: h.cas,
                quiet,
                cmd,
            },
            used,
        ))
    };
    let bad = || Err(reject(Status::Invalid, 0, true));
    match opcode {
        op::VERSION | op::NOOP | op::QUIT | op::SASL_LIST_MECHS => {
            if ext != 0 || klen != 0 || body != 0 {
                return bad();
            }
            let cmd = match opcode {
                op::VERSION => Command::Version,
                op::NOOP => Command::Noop,
                op::QUIT => Command::Quit,
                _ if !auth.sasl => return Err(reject(Status::UnknownCommand, 0, false)),
                _ => Command::SaslListMechs,
            };
            done(cmd, head)
        }
        op::FLUSH => {
            if klen != 0 || body != ext || (ext != 0 && ext != 4) {
                return bad();
            }
            let delay = (ext == 4).then(|| be32(extras));
            done(Command::Flush { delay }, head)
        }
        op::GET | op::GETK => {
            if ext != 0 || body != klen || klen == 0 {
                return bad();
            }
            let with_key = opcode == op::GETK;
            let cmd = Command::Get {
                key,
                with_key,
                touch: None,
                value: true,
            };
            done(cmd, head)
        }
        op::TOUCH | op::GAT | op::GATK => {
            if ext != 4 || klen == 0 {
                return bad();
            }
            let cmd = Command::Get {
                key,
                with_key: opcode == op::GATK,
                touch: Some(be32(extras)),
                value: opcode != op::TOUCH,
            };
            done(cmd, head)
        }
        op::DELETE => {
            if klen == 0 || ext != 0 || body != klen {
                return bad();
            }
            done(Command::Delete { key }, head)
        }
        op::INCREMENT | op::DECREMENT => {
            if klen == 0 || ext != 20 || body != klen + 20 {
                return bad();
            }
            let cmd = Command::Arith {
                incr: opcode == op::INCREMENT,
                key,
                delta: be64(extras),
                initial: be64(&extras[8..]),
                exptime: be32(&extras[16..]),
            };
            done(cmd, head)
        }
        op::SET | op::ADD | op::REPLACE | op::APPEND | op::PREPEND => {
            let (kind, flags, exptime) = match opcode {
                op::APPEND | op::PREPEND => {
                    if klen == 0 || ext != 0 {
                        return bad();
                    }
                    let kind = if opcode == op::APPEND {
                        StoreKind::Append
                    } else {
                        StoreKind::Prepend
                    };
                    (kind, 0, 0)
                }
                _ => {
                    if ext != 8 || klen == 0 || body < klen + 8 {
                        return bad();
                    }
                    let kind = match opcode {
                        op::SET => StoreKind::Set,
                        op::ADD => StoreKind::Add,
                        _ => StoreKind::Replace,
                    };
                    (kind, be32(extras), be32(&extras[4..]))
                }
            };
            if !limits.item_fits(klen, vlen, flags) {
                let mut r = Reject {
                    opcode: h.opcode,
                    opaque: h.opaque,
                    status: Status::TooLarge,
                    consumed: head,
                    swallow: vlen as u64,
                    close: false,
                    unlink: None,
                };
                if opcode == op::SET {
                    r.unlink = Some(key);
                }
                return Err(DecodeError::Reject(r));
            }
            let Some(data) = buf.get(head..head + vlen) else {
                return Err(DecodeError::Incomplete);
            };
            let cmd = Command::Store {
                kind,
                key,
                flags,
                exptime,
                data,
            };
            done(cmd, head + vlen)
        }
        op::STAT => {
            if ext != 0 {
                return bad();
            }
            done(Command::Stat { group: key }, head)
        }
        op::SASL_AUTH | op::SASL_STEP => {
            if ext != 0 || klen == 0 {
                return bad();
            }
            if !auth.sasl {
                return Err(reject(Status::UnknownCommand, vlen as u64, false));
            }
            if klen > MAX_SASL_MECH_LEN {
                return Err(reject(Status::Invalid, vlen as u64, false));
            }
            // memcached reads the data into an item: what does not fit one is ENOMEM.
            if !limits.item_fits(klen, vlen, 0) {
                return Err(reject(Status::OutOfMemory, vlen as u64, false));
            }
            let Some(data) = buf.get(head..head + vlen) else {
                return Err(DecodeError::Incomplete);
            };
            let cmd = Command::SaslAuth {
                step: opcode == op::SASL_STEP,
                mech: key,
                data,
            };
            done(cmd, head + vlen)
        }
        // memcached swallows the whole body length *after* extras and key: it over-reads by
        // their length, and so must we, or the two would read the next request differently.
        _ => Err(reject(Status::UnknownCommand, h.body_len.into(), false)),
    }
}
