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
///
/// The checks every frame gets come first (`Frame::parse`), then the shape checks of the
/// opcode's family, each in memcached's order for it.
pub fn decode_request<'a>(
    buf: &'a [u8],
    limits: &Limits,
    auth: Auth,
) -> Result<(Request<'a>, usize), DecodeError<'a>> {
    let f = Frame::parse(buf, auth)?;
    match f.opcode {
        op::VERSION | op::NOOP | op::QUIT | op::SASL_LIST_MECHS => f.bodiless(auth),
        op::FLUSH => f.flush(),
        op::GET | op::GETK | op::TOUCH | op::GAT | op::GATK => f.read(),
        op::DELETE | op::INCREMENT | op::DECREMENT => f.delete_or_arith(),
        op::SET | op::ADD | op::REPLACE | op::APPEND | op::PREPEND => f.store(buf, limits),
        op::STAT => f.stat(),
        op::SASL_AUTH | op::SASL_STEP => f.sasl(buf, limits, auth),
        // memcached swallows the whole body length *after* extras and key: it over-reads by
        // their length, and so must we, or the two would read the next request differently.
        _ => Err(f.reject(Status::UnknownCommand, f.h.body_len.into(), false)),
    }
}

/// What [`decode_request`] returns.
type Decoded<'a> = Result<(Request<'a>, usize), DecodeError<'a>>;

/// A frame whose header, extras and key are in the buffer and passed the checks memcached
/// makes of every request; what is left is its opcode's own shape.
struct Frame<'a> {
    h: Header,
    /// The opcode with a quiet one mapped to its loud form.
    opcode: u8,
    quiet: bool,
    ext: usize,
    klen: usize,
    body: usize,
    /// Header, extras and key: what a command without a value uses.
    head: usize,
    extras: &'a [u8],
    key: &'a [u8],
    /// The body past extras and key.
    vlen: usize,
}

impl<'a> Frame<'a> {
    /// memcached's order: a whole header, the magic, extras and key read, lengths that add
    /// up, authentication, the key's length.
    fn parse(buf: &'a [u8], auth: Auth) -> Result<Frame<'a>, DecodeError<'a>> {
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
        let mut f = Frame {
            h,
            opcode: loud(h.opcode).unwrap_or(h.opcode),
            quiet: loud(h.opcode).is_some(),
            ext,
            klen,
            body,
            head,
            extras: &buf[HEADER_LEN..HEADER_LEN + ext],
            key: &buf[HEADER_LEN + ext..head],
            vlen: 0,
        };
        if klen > body || klen + ext > body {
            return Err(f.reject(Status::UnknownCommand, 0, true));
        }
        if !auth.allows(h.opcode) {
            return Err(f.reject(Status::AuthError, 0, true));
        }
        if klen > crate::MAX_KEY_LEN {
            return Err(f.reject(Status::Invalid, 0, true));
        }
        f.vlen = body - klen - ext;
        Ok(f)
    }

    fn reject(&self, status: Status, swallow: u64, close: bool) -> DecodeError<'a> {
        DecodeError::Reject(Reject {
            opcode: self.h.opcode,
            opaque: self.h.opaque,
            status,
            consumed: self.head,
            swallow,
            close,
            unlink: None,
        })
    }

    /// The request, with the header's opaque and CAS and the raw opcode (replies echo it).
    fn done(&self, cmd: Command<'a>, used: usize) -> Decoded<'a> {
        let request = Request {
            opcode: self.h.opcode,
            opaque: self.h.opaque,
            cas: self.h.cas,
            quiet: self.quiet,
            cmd,
        };
        Ok((request, used))
    }

    /// A shape memcached refuses: `EINVAL`, and the connection closes.
    fn bad<T>(&self) -> Result<T, DecodeError<'a>> {
        Err(self.reject(Status::Invalid, 0, true))
    }

    /// `VERSION`, `NOOP`, `QUIT`, `SASL_LIST_MECHS`: no extras, key or value.
    fn bodiless(&self, auth: Auth) -> Decoded<'a> {
        if self.ext != 0 || self.klen != 0 || self.body != 0 {
            return self.bad();
        }
        let cmd = match self.opcode {
            op::VERSION => Command::Version,
            op::NOOP => Command::Noop,
            op::QUIT => Command::Quit,
            _ if !auth.sasl => return Err(self.reject(Status::UnknownCommand, 0, false)),
            _ => Command::SaslListMechs,
        };
        self.done(cmd, self.head)
    }

    /// `FLUSH`: no key, extras empty or a 4-byte delay.
    fn flush(&self) -> Decoded<'a> {
        let ext = self.ext;
        if self.klen != 0 || self.body != ext || (ext != 0 && ext != 4) {
            return self.bad();
        }
        let delay = (ext == 4).then(|| be32(self.extras));
        self.done(Command::Flush { delay }, self.head)
    }

    /// `GET`/`GETK` (a key alone) and `TOUCH`/`GAT`/`GATK` (a key and a 4-byte expiry).
    fn read(&self) -> Decoded<'a> {
        let (key, opcode) = (self.key, self.opcode);
        let cmd = if matches!(opcode, op::GET | op::GETK) {
            if self.ext != 0 || self.body != self.klen || self.klen == 0 {
                return self.bad();
            }
            Command::Get {
                key,
                with_key: opcode == op::GETK,
                touch: None,
                value: true,
            }
        } else {
            if self.ext != 4 || self.klen == 0 {
                return self.bad();
            }
            Command::Get {
                key,
                with_key: opcode == op::GATK,
                touch: Some(be32(self.extras)),
                value: opcode != op::TOUCH,
            }
        };
        self.done(cmd, self.head)
    }

    /// `DELETE` (a key alone) and `INCREMENT`/`DECREMENT` (a key and 20 bytes of delta,
    /// initial value and expiry).
    fn delete_or_arith(&self) -> Decoded<'a> {
        let (key, klen, extras) = (self.key, self.klen, self.extras);
        let cmd = if self.opcode == op::DELETE {
            if klen == 0 || self.ext != 0 || self.body != klen {
                return self.bad();
            }
            Command::Delete { key }
        } else {
            if klen == 0 || self.ext != 20 || self.body != klen + 20 {
                return self.bad();
            }
            Command::Arith {
                incr: self.opcode == op::INCREMENT,
                key,
                delta: be64(extras),
                initial: be64(&extras[8..]),
                exptime: be32(&extras[16..]),
            }
        };
        self.done(cmd, self.head)
    }

    /// `SET`/`ADD`/`REPLACE` (8 bytes of flags and expiry) and `APPEND`/`PREPEND` (no
    /// extras), then the item size rule, decided from the header before the value is read.
    fn store(&self, buf: &'a [u8], limits: &Limits) -> Decoded<'a> {
        let (opcode, klen) = (self.opcode, self.klen);
        let (kind, flags, exptime) = match opcode {
            op::APPEND | op::PREPEND => {
                if klen == 0 || self.ext != 0 {
                    return self.bad();
                }
                let kind = if opcode == op::APPEND {
                    StoreKind::Append
                } else {
                    StoreKind::Prepend
                };
                (kind, 0, 0)
            }
            _ => {
                if self.ext != 8 || klen == 0 || self.body < klen + 8 {
                    return self.bad();
                }
                let kind = match opcode {
                    op::SET => StoreKind::Set,
                    op::ADD => StoreKind::Add,
                    _ => StoreKind::Replace,
                };
                (kind, be32(self.extras), be32(&self.extras[4..]))
            }
        };
        let (head, vlen) = (self.head, self.vlen);
        if !limits.item_fits(klen, vlen, flags) {
            let mut e = self.reject(Status::TooLarge, vlen as u64, false);
            if let DecodeError::Reject(r) = &mut e
                && opcode == op::SET
            {
                r.unlink = Some(self.key);
            }
            return Err(e);
        }
        let Some(data) = buf.get(head..head + vlen) else {
            return Err(DecodeError::Incomplete);
        };
        let cmd = Command::Store {
            kind,
            key: self.key,
            flags,
            exptime,
            data,
        };
        self.done(cmd, head + vlen)
    }

    /// `STAT`: no extras; the key, if any, names the group.
    fn stat(&self) -> Decoded<'a> {
        if self.ext != 0 {
            return self.bad();
        }
        self.done(Command::Stat { group: self.key }, self.head)
    }

    /// `SASL_AUTH`/`SASL_STEP`: the mechanism as key, the credentials as value.
    fn sasl(&self, buf: &'a [u8], limits: &Limits, auth: Auth) -> Decoded<'a> {
        let (klen, vlen) = (self.klen, self.vlen);
        if self.ext != 0 || klen == 0 {
            return self.bad();
        }
        if !auth.sasl {
            return Err(self.reject(Status::UnknownCommand, vlen as u64, false));
        }
        if klen > MAX_SASL_MECH_LEN {
            return Err(self.reject(Status::Invalid, vlen as u64, false));
        }
        // memcached reads the data into an item: what does not fit one is ENOMEM.
        if !limits.item_fits(klen, vlen, 0) {
            return Err(self.reject(Status::OutOfMemory, vlen as u64, false));
        }
        if vlen > MAX_SASL_DATA {
            return Err(self.reject(Status::AuthError, vlen as u64, false));
        }
        let Some(data) = buf.get(self.head..self.head + vlen) else {
            return Err(DecodeError::Incomplete);
        };
        let cmd = Command::SaslAuth {
            step: self.opcode == op::SASL_STEP,
            mech: self.key,
            data,
        };
        self.done(cmd, self.head + vlen)
    }
}
