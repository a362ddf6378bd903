//! memcached's binary protocol: frames, the server's request decoder and reply writers, and
//! the client side's request encoder and reply decoder.
//!
//! Deprecated since memcached 1.6.0 but still served by default (`-B auto`), and the default
//! of several clients (PHP's session handler, .NET's EnyimMemcached) and the only carrier of
//! SASL. Every frame is a 24-byte header (all integers big-endian), then extras, key, value:
//! ```text
//! magic opcode keylen(2) extlen datatype vbucket|status(2) bodylen(4) opaque(4) cas(8)
//! ```
//! The decoder follows memcached 1.6.18's `try_read_command_binary` and
//! `dispatch_bin_command` step for step, because the order of its checks is observable: it
//! waits for header, extras and key; checks the lengths add up (else `UNKNOWN_COMMAND` and
//! close), then SASL (`AUTH_ERROR` and close), then the key length (`EINVAL` and close), then
//! each opcode's shape (`EINVAL` and close). A command without a value consumes header,
//! extras and key only: memcached reads nothing more, so surplus body bytes are read as the
//! next request, here as there. A value over `-I` is refused from its header and swallowed as
//! it arrives, never buffered.

use memkit_types::{
    ArithMode, ArithOptions, DeleteOptions, Exptime, GetOptions, StoreMode, StoreOptions,
};

use crate::Limits;

/// Length of a frame header.
pub const HEADER_LEN: usize = 24;
/// First byte of a request: on a new connection under `-B auto` it selects this protocol.
pub const REQUEST_MAGIC: u8 = 0x80;
/// First byte of a response.
pub const RESPONSE_MAGIC: u8 = 0x81;
/// Longest SASL mechanism name memcached accepts (`MAX_SASL_MECH_LEN`).
pub const MAX_SASL_MECH_LEN: usize = 32;

/// Opcodes memcached 1.6.18 serves, by their protocol names.
#[allow(missing_docs)]
pub mod op {
    pub const GET: u8 = 0x00;
    pub const SET: u8 = 0x01;
    pub const ADD: u8 = 0x02;
    pub const REPLACE: u8 = 0x03;
    pub const DELETE: u8 = 0x04;
    pub const INCREMENT: u8 = 0x05;
    pub const DECREMENT: u8 = 0x06;
    pub const QUIT: u8 = 0x07;
    pub const FLUSH: u8 = 0x08;
    pub const GETQ: u8 = 0x09;
    pub const NOOP: u8 = 0x0a;
    pub const VERSION: u8 = 0x0b;
    pub const GETK: u8 = 0x0c;
    pub const GETKQ: u8 = 0x0d;
    pub const APPEND: u8 = 0x0e;
    pub const PREPEND: u8 = 0x0f;
    pub const STAT: u8 = 0x10;
    pub const SETQ: u8 = 0x11;
    pub const ADDQ: u8 = 0x12;
    pub const REPLACEQ: u8 = 0x13;
    pub const DELETEQ: u8 = 0x14;
    pub const INCREMENTQ: u8 = 0x15;
    pub const DECREMENTQ: u8 = 0x16;
    pub const QUITQ: u8 = 0x17;
    pub const FLUSHQ: u8 = 0x18;
    pub const APPENDQ: u8 = 0x19;
    pub const PREPENDQ: u8 = 0x1a;
    /// Defined by the protocol; memcached 1.6.18 answers it `UNKNOWN_COMMAND`.
    pub const VERBOSITY: u8 = 0x1b;
    pub const TOUCH: u8 = 0x1c;
    pub const GAT: u8 = 0x1d;
    pub const GATQ: u8 = 0x1e;
    pub const SASL_LIST_MECHS: u8 = 0x20;
    pub const SASL_AUTH: u8 = 0x21;
    pub const SASL_STEP: u8 = 0x22;
    pub const GATK: u8 = 0x23;
    pub const GATKQ: u8 = 0x24;
}

/// A response status, with memcached's numbering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum Status {
    /// Success.
    Ok = 0x00,
    /// `KEY_ENOENT`.
    KeyNotFound = 0x01,
    /// `KEY_EEXISTS`.
    KeyExists = 0x02,
    /// `E2BIG`.
    TooLarge = 0x03,
    /// `EINVAL`.
    Invalid = 0x04,
    /// `NOT_STORED`.
    NotStored = 0x05,
    /// `DELTA_BADVAL`.
    DeltaBadval = 0x06,
    /// `AUTH_ERROR`.
    AuthError = 0x20,
    /// `AUTH_CONTINUE`.
    AuthContinue = 0x21,
    /// `UNKNOWN_COMMAND`.
    UnknownCommand = 0x81,
    /// `ENOMEM`.
    OutOfMemory = 0x82,
}

impl Status {
    /// The status with this code, if memcached uses it.
    pub fn from_u16(v: u16) -> Option<Status> {
        Some(match v {
            0x00 => Status::Ok,
            0x01 => Status::KeyNotFound,
            0x02 => Status::KeyExists,
            0x03 => Status::TooLarge,
            0x04 => Status::Invalid,
            0x05 => Status::NotStored,
            0x06 => Status::DeltaBadval,
            0x20 => Status::AuthError,
            0x21 => Status::AuthContinue,
            0x81 => Status::UnknownCommand,
            0x82 => Status::OutOfMemory,
            _ => return None,
        })
    }

    /// The body memcached's `write_bin_error` sends with this status.
    pub fn message(self) -> &'static [u8] {
        match self {
            Status::Ok | Status::AuthContinue => b"",
            Status::KeyNotFound => b"Not found",
            Status::KeyExists => b"Data exists for key.",
            Status::TooLarge => b"Too large.",
            Status::Invalid => b"Invalid arguments",
            Status::NotStored => b"Not stored.",
            Status::DeltaBadval => b"Non-numeric server-side value for incr or decr",
            Status::AuthError => b"Auth failure.",
            Status::UnknownCommand => b"Unknown command",
            Status::OutOfMemory => b"Out of memory",
        }
    }
}

/// A frame header, integers in host order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
    /// [`REQUEST_MAGIC`] or [`RESPONSE_MAGIC`].
    pub magic: u8,
    /// The opcode.
    pub opcode: u8,
    /// Key length.
    pub key_len: u16,
    /// Extras length.
    pub extras_len: u8,
    /// Data type (always 0, raw bytes).
    pub data_type: u8,
    /// vbucket in a request, status in a response.
    pub status: u16,
    /// Extras + key + value.
    pub body_len: u32,
    /// Echoed back in the response.
    pub opaque: u32,
    /// CAS.
    pub cas: u64,
}

impl Header {
    /// Parses the first [`HEADER_LEN`] bytes of `b`; `None` if there are fewer.
    pub fn parse(b: &[u8]) -> Option<Header> {
        let b: &[u8; HEADER_LEN] = b.get(..HEADER_LEN)?.try_into().ok()?;
        Some(Header {
            magic: b[0],
            opcode: b[1],
            key_len: u16::from_be_bytes([b[2], b[3]]),
            extras_len: b[4],
            data_type: b[5],
            status: u16::from_be_bytes([b[6], b[7]]),
            body_len: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            opaque: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
            cas: u64::from_be_bytes([b[16], b[17], b[18], b[19], b[20], b[21], b[22], b[23]]),
        })
    }

    /// Appends the header's 24 bytes, and reserves room for the body that follows, so a
    /// reply is one append into a buffer that grows at most once.
    pub fn write(&self, out: &mut Vec<u8>) {
        let mut h = [0u8; HEADER_LEN];
        h[0] = self.magic;
        h[1] = self.opcode;
        h[2..4].copy_from_slice(&self.key_len.to_be_bytes());
        h[4] = self.extras_len;
        h[5] = self.data_type;
        h[6..8].copy_from_slice(&self.status.to_be_bytes());
        h[8..12].copy_from_slice(&self.body_len.to_be_bytes());
        h[12..16].copy_from_slice(&self.opaque.to_be_bytes());
        h[16..24].copy_from_slice(&self.cas.to_be_bytes());
        out.reserve(HEADER_LEN + self.body_len as usize);
        out.extend_from_slice(&h);
    }
}

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

/// `INCREMENT`/`DECREMENT`'s expiry that means "do not create a missing item".
pub const NO_CREATE: u32 = 0xffff_ffff;

impl<'a> Request<'a> {
    /// The logical command of a storage request (`None` for `NOOP`, `STAT`, SASL...).
    /// memcached turns a `SET`, `ADD` or `REPLACE` with a CAS into its `cas` command;
    /// `TOUCH` is a read that sets the expiry, because its reply carries the flags.
    pub fn command(&self) -> Option<crate::Command<'a>> {
        use crate::Command as C;
        let cas = (self.cas != 0).then_some(self.cas);
        Some(match self.cmd {
            Command::Get { key, touch, .. } => C::Get {
                key,
                opts: GetOptions {
                    touch: touch.map(|t| Exptime(t.into())),
                    classic: true,
                    ..Default::default()
                },
            },
            Command::Store {
                kind,
                key,
                flags,
                exptime,
                data,
            } => {
                let mode = match kind {
                    StoreKind::Append => StoreMode::Append,
                    StoreKind::Prepend => StoreMode::Prepend,
                    _ if cas.is_some() => StoreMode::Set,
                    StoreKind::Set => StoreMode::Set,
                    StoreKind::Add => StoreMode::Add,
                    StoreKind::Replace => StoreMode::Replace,
                };
                let opts = StoreOptions {
                    cas,
                    ..StoreOptions::new(mode, flags, Exptime(exptime.into()))
                };
                C::Store { key, data, opts }
            }
            Command::Delete { key } => C::Delete {
                key,
                opts: DeleteOptions {
                    cas,
                    ..Default::default()
                },
            },
            Command::Arith {
                incr,
                key,
                delta,
                initial,
                exptime,
            } => C::Arith {
                key,
                opts: ArithOptions {
                    mode: if incr {
                        ArithMode::Incr
                    } else {
                        ArithMode::Decr
                    },
                    delta,
                    vivify: (exptime != NO_CREATE).then(|| (initial, Exptime(exptime.into()))),
                    cas,
                    ..Default::default()
                },
            },
            Command::Flush { delay } => C::Flush {
                delay: delay.unwrap_or(0),
            },
            _ => return None,
        })
    }
}

/// Client side: the frame that carries a logical command, `None` for what the binary
/// protocol cannot say (meta-only options, a CAS with add or replace, an expiry beyond
/// `u32`, `touch` without a read). The inverse of [`Request::command`].
pub fn encode_command(cmd: &crate::Command<'_>, opaque: u32, out: &mut Vec<u8>) -> Option<()> {
    use crate::Command as C;
    let exp = |e: Exptime| u32::try_from(e.0).ok();
    let (opcode, cas, cmd) = match cmd {
        C::Get { key, opts } => {
            let plain = GetOptions {
                touch: opts.touch,
                classic: true,
                ..Default::default()
            };
            if *opts != plain {
                return None;
            }
            let touch = match opts.touch {
                Some(t) => Some(exp(t)?),
                None => None,
            };
            let opcode = if touch.is_some() { op::GAT } else { op::GET };
            let cmd = Command::Get {
                key,
                with_key: false,
                touch,
                value: true,
            };
            (opcode, 0, cmd)
        }
        C::Store { key, data, opts } => {
            let plain = StoreOptions {
                cas: opts.cas,
                ..StoreOptions::new(opts.mode, opts.flags, opts.exptime)
            };
            if *opts != plain {
                return None;
            }
            let (opcode, kind) = match opts.mode {
                StoreMode::Set => (op::SET, StoreKind::Set),
                StoreMode::Add if opts.cas.is_none() => (op::ADD, StoreKind::Add),
                StoreMode::Replace if opts.cas.is_none() => (op::REPLACE, StoreKind::Replace),
                StoreMode::Append => (op::APPEND, StoreKind::Append),
                StoreMode::Prepend => (op::PREPEND, StoreKind::Prepend),
                _ => return None,
            };
            let appending = matches!(kind, StoreKind::Append | StoreKind::Prepend);
            if appending && (opts.flags != 0 || opts.exptime != Exptime(0)) {
                return None;
            }
            let cmd = Command::Store {
                kind,
                key,
                flags: opts.flags,
                exptime: exp(opts.exptime)?,
                data,
            };
            (opcode, opts.cas.unwrap_or(0), cmd)
        }
        C::Delete { key, opts } => {
            if *opts
                != (DeleteOptions {
                    cas: opts.cas,
                    ..Default::default()
                })
            {
                return None;
            }
            (op::DELETE, opts.cas.unwrap_or(0), Command::Delete { key })
        }
        C::Arith { key, opts } => {
            if opts.update_ttl.is_some() || opts.new_cas.is_some() {
                return None;
            }
            let (initial, exptime) = match opts.vivify {
                Some((i, e)) => (i, exp(e).filter(|&e| e != NO_CREATE)?),
                None => (0, NO_CREATE),
            };
            let incr = opts.mode == ArithMode::Incr;
            let cmd = Command::Arith {
                incr,
                key,
                delta: opts.delta,
                initial,
                exptime,
            };
            let opcode = if incr { op::INCREMENT } else { op::DECREMENT };
            (opcode, opts.cas.unwrap_or(0), cmd)
        }
        C::Flush { delay } => {
            let delay = (*delay != 0).then_some(*delay);
            (op::FLUSH, 0, Command::Flush { delay })
        }
        C::Touch { .. } => return None,
    };
    let req = Request {
        opcode,
        opaque,
        cas,
        quiet: false,
        cmd,
    };
    encode(&req, out);
    Some(())
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
            if !limits.item_fits(klen, flags, vlen) {
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
            if !limits.item_fits(klen, 0, vlen) {
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

/// Appends a response header with `status`, `opaque` and `cas` for these lengths.
#[allow(clippy::too_many_arguments)]
pub fn write_header(
    out: &mut Vec<u8>,
    opcode: u8,
    status: Status,
    extras_len: u8,
    key_len: u16,
    body_len: u32,
    opaque: u32,
    cas: u64,
) {
    Header {
        magic: RESPONSE_MAGIC,
        opcode,
        key_len,
        extras_len,
        data_type: 0,
        status: status as u16,
        body_len,
        opaque,
        cas,
    }
    .write(out);
}

/// A success reply carrying `body` (no extras, no key).
pub fn write_ok(out: &mut Vec<u8>, opcode: u8, opaque: u32, cas: u64, body: &[u8]) {
    write_header(
        out,
        opcode,
        Status::Ok,
        0,
        0,
        body.len() as u32,
        opaque,
        cas,
    );
    out.extend_from_slice(body);
}

/// An error reply with memcached's message for `status`.
pub fn write_error(out: &mut Vec<u8>, opcode: u8, opaque: u32, status: Status) {
    write_error_message(out, opcode, opaque, status, status.message());
}

/// An error reply with a message of its own (memcached's `out_of_memory` texts).
pub fn write_error_message(out: &mut Vec<u8>, opcode: u8, opaque: u32, status: Status, msg: &[u8]) {
    write_header(out, opcode, status, 0, 0, msg.len() as u32, opaque, 0);
    out.extend_from_slice(msg);
}

/// A get-family hit: flags in the extras, the key if asked, the value unless `TOUCH`.
pub fn write_hit(
    out: &mut Vec<u8>,
    req: &Request<'_>,
    flags: u32,
    cas: u64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) {
    let klen = key.map_or(0, <[u8]>::len);
    let vlen = value.map_or(0, <[u8]>::len);
    let body = (4 + klen + vlen) as u32;
    write_header(
        out,
        req.opcode,
        Status::Ok,
        4,
        klen as u16,
        body,
        req.opaque,
        cas,
    );
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(key.unwrap_or_default());
    out.extend_from_slice(value.unwrap_or_default());
}

/// A `GETK`/`GATK` miss: `KEY_ENOENT` with the key and no message.
pub fn write_miss_with_key(out: &mut Vec<u8>, opcode: u8, opaque: u32, key: &[u8]) {
    let klen = key.len() as u16;
    write_header(
        out,
        opcode,
        Status::KeyNotFound,
        0,
        klen,
        klen.into(),
        opaque,
        0,
    );
    out.extend_from_slice(key);
}

/// One `STAT` packet; an empty name and value end the list.
pub fn write_stat(out: &mut Vec<u8>, opaque: u32, name: &[u8], value: &[u8]) {
    let body = (name.len() + value.len()) as u32;
    write_header(
        out,
        op::STAT,
        Status::Ok,
        0,
        name.len() as u16,
        body,
        opaque,
        0,
    );
    out.extend_from_slice(name);
    out.extend_from_slice(value);
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(opcode: u8, cas: u64, extras: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        encode_request(&mut v, opcode, 0xdead_beef, cas, extras, key, value);
        v
    }

    fn dec(b: &[u8]) -> Result<(Request<'_>, usize), DecodeError<'_>> {
        decode_request(b, &Limits::default(), Auth::default())
    }

    #[test]
    fn a_set_decodes_whole_and_waits_for_its_value() {
        let mut ext = 7u32.to_be_bytes().to_vec();
        ext.extend_from_slice(&60u32.to_be_bytes());
        let f = frame(op::SETQ, 9, &ext, b"k", b"hello");
        for cut in 0..f.len() {
            assert_eq!(dec(&f[..cut]), Err(DecodeError::Incomplete), "cut {cut}");
        }
        let (r, used) = dec(&f).unwrap();
        assert_eq!(used, f.len());
        assert!(r.quiet);
        assert_eq!((r.opcode, r.opaque, r.cas), (op::SETQ, 0xdead_beef, 9));
        assert_eq!(
            r.cmd,
            Command::Store {
                kind: StoreKind::Set,
                key: b"k",
                flags: 7,
                exptime: 60,
                data: b"hello"
            }
        );
    }

    #[test]
    fn checks_run_in_memcacheds_order() {
        // Bad magic closes without a reply.
        let mut f = frame(op::GET, 0, &[], b"k", &[]);
        f[0] = 0x81;
        assert_eq!(dec(&f), Err(DecodeError::Close));
        // Lengths that do not add up: UNKNOWN_COMMAND and close, before SASL is checked.
        let mut f = frame(op::GET, 0, &[], b"key", &[]);
        f[11] = 1;
        let auth = Auth {
            sasl: true,
            authenticated: false,
        };
        match decode_request(&f, &Limits::default(), auth) {
            Err(DecodeError::Reject(r)) => {
                assert_eq!((r.status, r.close), (Status::UnknownCommand, true))
            }
            other => panic!("{other:?}"),
        }
        // Unauthenticated: AUTH_ERROR and close, except VERSION.
        let f = frame(op::GET, 0, &[], b"k", &[]);
        match decode_request(&f, &Limits::default(), auth) {
            Err(DecodeError::Reject(r)) => {
                assert_eq!((r.status, r.close), (Status::AuthError, true))
            }
            other => panic!("{other:?}"),
        }
        let f = frame(op::VERSION, 0, &[], b"", &[]);
        assert!(decode_request(&f, &Limits::default(), auth).is_ok());
        // A key over 250 bytes: EINVAL and close.
        let long = vec![b'a'; 251];
        let f = frame(op::GET, 0, &[], &long, &[]);
        match dec(&f) {
            Err(DecodeError::Reject(r)) => assert_eq!((r.status, r.close), (Status::Invalid, true)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_opcodes_swallow_the_body_length_after_the_key() {
        let f = frame(0x55, 0, &[1, 2], b"kk", b"vvvv");
        match dec(&f) {
            Err(DecodeError::Reject(r)) => {
                assert_eq!(r.status, Status::UnknownCommand);
                assert_eq!((r.consumed, r.swallow, r.close), (28, 8, false));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_value_over_the_limit_is_refused_from_its_header() {
        let limits = Limits {
            max_item_size: 1024,
            ..Limits::default()
        };
        let mut f = frame(op::SET, 0, &[0; 8], b"k", &[]);
        f[8..12].copy_from_slice(&(9u32 + 5000).to_be_bytes());
        match decode_request(&f, &limits, Auth::default()) {
            Err(DecodeError::Reject(r)) => {
                assert_eq!(r.status, Status::TooLarge);
                assert_eq!((r.consumed, r.swallow), (33, 5000));
                assert_eq!(r.unlink, Some(&b"k"[..]));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn commands_without_a_value_leave_surplus_body_bytes_unread() {
        // memcached reads TOUCH's header, extras and key only.
        let mut f = frame(op::TOUCH, 0, &5u32.to_be_bytes(), b"k", b"xy");
        let (r, used) = dec(&f).unwrap();
        assert_eq!(used, 29);
        assert!(matches!(r.cmd, Command::Get { value: false, .. }));
        f.truncate(29);
    }

    #[test]
    fn replies_round_trip_through_the_client_decoder() {
        let req = Request {
            opcode: op::GETK,
            opaque: 5,
            cas: 0,
            quiet: false,
            cmd: Command::Noop,
        };
        let mut out = Vec::new();
        write_hit(&mut out, &req, 3, 77, Some(b"key"), Some(b"value"));
        write_error(&mut out, op::ADD, 6, Status::KeyExists);
        let (r, n) = decode_response(&out).unwrap().unwrap();
        assert_eq!(
            (r.header.cas, r.extras, r.key, r.value),
            (77, &3u32.to_be_bytes()[..], &b"key"[..], &b"value"[..])
        );
        let (e, m) = decode_response(&out[n..]).unwrap().unwrap();
        assert_eq!(n + m, out.len());
        assert_eq!(Status::from_u16(e.header.status), Some(Status::KeyExists));
        assert_eq!(e.value, b"Data exists for key.");
    }
}
