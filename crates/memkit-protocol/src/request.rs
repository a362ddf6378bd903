//! Requests: the typed form of every text and meta command, and their encoding (client side).
//!
//! Wire formats (each line ends in `\r\n`):
//! ```text
//! get|gets <key>+                      gat|gats <exptime> <key>*
//! set|add|replace|append|prepend <key> <flags> <exptime> <bytes> [noreply]  + data block
//! cas <key> <flags> <exptime> <bytes> <cas> [noreply]                       + data block
//! incr|decr <key> <delta> [noreply]    touch <key> <exptime> [noreply]
//! delete <key> [0] [noreply]           flush_all [delay] [noreply]
//! verbosity <level> [noreply]          cache_memlimit <megabytes> [noreply]
//! version | quit | shutdown [graceful] | stats [args...]
//! lru_crawler ... | watch ... | slabs ... | lru ...        (operator commands, args kept raw)
//! mg <key> <flag>*   ms <key> <datalen> <flag>* + data block   md <key> <flag>*
//! ma <key> <flag>*   mn                 me <key> [b]
//! ```
//! Keys are borrowed from the input buffer as sent: any bytes but space, `\n` and NUL (memcached
//! does not check more than the length). Meta keys sent with `b` stay base64 here; see
//! [`meta_key`].

use crate::meta::MetaFlags;
use crate::num::{write_i64, write_u64};
use crate::token::Words;

/// The classic storage commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreCmd {
    /// `set`
    Set,
    /// `add`
    Add,
    /// `replace`
    Replace,
    /// `append`
    Append,
    /// `prepend`
    Prepend,
    /// `cas` with the client's token.
    Cas(u64),
}

impl StoreCmd {
    fn name(self) -> &'static [u8] {
        match self {
            StoreCmd::Set => b"set",
            StoreCmd::Add => b"add",
            StoreCmd::Replace => b"replace",
            StoreCmd::Append => b"append",
            StoreCmd::Prepend => b"prepend",
            StoreCmd::Cas(_) => b"cas",
        }
    }
}

/// Operator commands whose arguments the codec keeps raw: what they accept depends on the
/// server's features (crawler, slab mover, watchers), so the server interprets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AdminCmd {
    /// `lru_crawler crawl|metadump|tocrawl|sleep|enable|disable ...`
    LruCrawler,
    /// `watch [rawcmds|evictions|fetchers|mutations|...]`
    Watch,
    /// `slabs reassign|automove ...`
    Slabs,
    /// `lru tune|mode|temp_ttl ...`
    Lru,
    /// `cluster status|add ID HOST:PORT|remove ID` (memkitd in a replicated group).
    Cluster,
}

impl AdminCmd {
    fn name(self) -> &'static [u8] {
        match self {
            AdminCmd::LruCrawler => b"lru_crawler",
            AdminCmd::Watch => b"watch",
            AdminCmd::Slabs => b"slabs",
            AdminCmd::Lru => b"lru",
            AdminCmd::Cluster => b"cluster",
        }
    }
}

/// `shutdown`'s argument; memcached checks whether shutdown is enabled *before* the mode, so
/// an invalid mode is passed on rather than rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShutdownMode {
    /// `shutdown`
    Immediate,
    /// `shutdown graceful`
    Graceful,
    /// Anything else: `CLIENT_ERROR invalid shutdown mode` if shutdown is enabled.
    Invalid,
}

/// One decoded command, borrowing keys and data from the input buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<'a> {
    /// `get`/`gets`/`gat`/`gats` (and the ancient `bget`, decoded as `get`).
    Get {
        /// `gets`/`gats`: return CAS tokens.
        cas: bool,
        /// `gat`/`gats`: the new exptime.
        touch: Option<i32>,
        /// The keys; `gat` may have none.
        keys: Words<'a>,
    },
    /// `set`/`add`/`replace`/`append`/`prepend`/`cas`.
    Store {
        /// Which command.
        cmd: StoreCmd,
        /// The key.
        key: &'a [u8],
        /// Client flags.
        flags: u32,
        /// Expiry as memcached reads it (`int32_t`).
        exptime: i32,
        /// The data block, without its `\r\n`.
        data: &'a [u8],
        /// `noreply`.
        noreply: bool,
    },
    /// `incr`/`decr`.
    Arith {
        /// `incr` (true) or `decr`.
        incr: bool,
        /// The key.
        key: &'a [u8],
        /// The delta.
        delta: u64,
        /// `noreply`.
        noreply: bool,
    },
    /// `touch`.
    Touch {
        /// The key.
        key: &'a [u8],
        /// The new exptime.
        exptime: i32,
        /// `noreply`.
        noreply: bool,
    },
    /// `delete` (a `0` hold time is accepted and dropped, as memcached does).
    Delete {
        /// The key.
        key: &'a [u8],
        /// `noreply`.
        noreply: bool,
    },
    /// `flush_all`.
    FlushAll {
        /// The delay in seconds (or absolute time), if given.
        delay: Option<i32>,
        /// `noreply`.
        noreply: bool,
    },
    /// `verbosity`.
    Verbosity {
        /// The level.
        level: u32,
        /// `noreply`.
        noreply: bool,
    },
    /// `cache_memlimit` in megabytes.
    CacheMemlimit {
        /// The new limit in megabytes.
        megabytes: u32,
        /// `noreply`.
        noreply: bool,
    },
    /// `version`.
    Version,
    /// `quit`: close after flushing earlier replies.
    Quit,
    /// `shutdown`.
    Shutdown(ShutdownMode),
    /// `stats [args]`.
    Stats {
        /// The arguments (`settings`, `slabs`, `items`, `conns`, `detail on`, ...).
        args: Words<'a>,
    },
    /// An operator command with raw arguments.
    Admin {
        /// Which command.
        cmd: AdminCmd,
        /// Its arguments.
        args: Words<'a>,
    },
    /// `mg`.
    MetaGet {
        /// The key as sent (base64 if `flags.base64`).
        key: &'a [u8],
        /// The flags.
        flags: MetaFlags<'a>,
    },
    /// `ms`.
    MetaSet {
        /// The key as sent.
        key: &'a [u8],
        /// The flags.
        flags: MetaFlags<'a>,
        /// The data block, without its `\r\n`.
        data: &'a [u8],
    },
    /// `md`.
    MetaDelete {
        /// The key as sent.
        key: &'a [u8],
        /// The flags.
        flags: MetaFlags<'a>,
    },
    /// `ma`.
    MetaArith {
        /// The key as sent.
        key: &'a [u8],
        /// The flags.
        flags: MetaFlags<'a>,
    },
    /// `mn`.
    MetaNoop,
    /// `me`.
    MetaDebug {
        /// The key as sent.
        key: &'a [u8],
        /// `b`: the key is base64.
        base64: bool,
    },
}

impl Request<'_> {
    /// Whether a classic command said `noreply`: send nothing back for it (meta commands
    /// use `q` instead, see [`crate::render::suppressed`]).
    pub fn noreply(&self) -> bool {
        match *self {
            Request::Store { noreply, .. }
            | Request::Arith { noreply, .. }
            | Request::Touch { noreply, .. }
            | Request::Delete { noreply, .. }
            | Request::FlushAll { noreply, .. }
            | Request::Verbosity { noreply, .. }
            | Request::CacheMemlimit { noreply, .. } => noreply,
            _ => false,
        }
    }

    /// Whether it is a meta command (`mg`, `ms`, `md`, `ma`, `mn`, `me`: memcached counts
    /// them in `cmd_meta`).
    pub fn is_meta(&self) -> bool {
        matches!(
            self,
            Request::MetaGet { .. }
                | Request::MetaSet { .. }
                | Request::MetaDelete { .. }
                | Request::MetaArith { .. }
                | Request::MetaNoop
                | Request::MetaDebug { .. }
        )
    }
}

/// A decoded key: meta keys sent with `b` are base64 on the wire and binary in storage.
/// Lives on the stack: a 250-byte token decodes to at most 187 bytes.
#[derive(Clone, Copy)]
pub struct KeyBuf {
    buf: [u8; crate::MAX_KEY_LEN],
    len: usize,
}

impl std::ops::Deref for KeyBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl std::fmt::Debug for KeyBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyBuf({:?})", String::from_utf8_lossy(self))
    }
}

/// The storage key of a meta request: `raw` itself, or its base64 decoding when `base64`.
/// The decoder has already validated both, so this only fails on keys it never produced.
pub fn meta_key(raw: &[u8], base64: bool) -> Option<KeyBuf> {
    let mut k = KeyBuf {
        buf: [0; crate::MAX_KEY_LEN],
        len: 0,
    };
    if raw.len() > crate::MAX_KEY_LEN {
        return None;
    }
    if base64 {
        k.len = crate::base64::decode_into(raw, &mut k.buf[..raw.len()])?;
    } else {
        k.buf[..raw.len()].copy_from_slice(raw);
        k.len = raw.len();
    }
    Some(k)
}

fn noreply(out: &mut Vec<u8>, on: bool) {
    if on {
        out.extend_from_slice(b" noreply");
    }
}

/// Encodes a request the way a client sends it (single spaces, `\r\n` endings).
pub fn encode_request(req: &Request<'_>, out: &mut Vec<u8>) {
    match *req {
        Request::Get { cas, touch, keys } => retrieval(out, cas, touch, keys),
        Request::Store {
            cmd,
            key,
            flags,
            exptime,
            data,
            noreply: nr,
        } => {
            storage(out, cmd, key, flags, exptime, data.len());
            noreply(out, nr);
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(data);
        }
        Request::Arith {
            incr,
            key,
            delta,
            noreply: nr,
        } => {
            out.extend_from_slice(if incr { b"incr " } else { b"decr " });
            out.extend_from_slice(key);
            out.push(b' ');
            write_u64(out, delta);
            noreply(out, nr);
        }
        Request::Touch {
            key,
            exptime,
            noreply: nr,
        } => {
            out.extend_from_slice(b"touch ");
            out.extend_from_slice(key);
            out.push(b' ');
            write_i64(out, i64::from(exptime));
            noreply(out, nr);
        }
        Request::Delete { key, noreply: nr } => {
            out.extend_from_slice(b"delete ");
            out.extend_from_slice(key);
            noreply(out, nr);
        }
        Request::MetaGet { .. }
        | Request::MetaSet { .. }
        | Request::MetaDelete { .. }
        | Request::MetaArith { .. }
        | Request::MetaNoop
        | Request::MetaDebug { .. } => meta_request(req, out),
        Request::FlushAll { .. }
        | Request::Verbosity { .. }
        | Request::CacheMemlimit { .. }
        | Request::Version
        | Request::Quit
        | Request::Shutdown(_)
        | Request::Stats { .. }
        | Request::Admin { .. } => admin(req, out),
    }
    out.extend_from_slice(b"\r\n");
}

/// `get`/`gets`/`gat`/`gats` of `keys`, as [`encode_request`] renders [`Request::Get`]
/// (`\r\n` included), from separate keys: a client need not join them into one buffer
/// for [`Words`] to split again.
pub fn encode_get(out: &mut Vec<u8>, cas: bool, touch: Option<i32>, keys: &[&[u8]]) {
    retrieval_command(out, cas, touch);
    for k in keys {
        out.push(b' ');
        out.extend_from_slice(k);
    }
    out.extend_from_slice(b"\r\n");
}

/// `get`/`gets`/`gat`/`gats`: the touch's expiry comes before the keys.
fn retrieval(out: &mut Vec<u8>, cas: bool, touch: Option<i32>, keys: Words<'_>) {
    retrieval_command(out, cas, touch);
    words(out, keys);
}

/// The command word of a retrieval and the touch's expiry.
fn retrieval_command(out: &mut Vec<u8>, cas: bool, touch: Option<i32>) {
    out.extend_from_slice(match (touch.is_some(), cas) {
        (false, false) => b"get".as_slice(),
        (false, true) => b"gets",
        (true, false) => b"gat",
        (true, true) => b"gats",
    });
    if let Some(t) = touch {
        out.push(b' ');
        write_i64(out, i64::from(t));
    }
}

/// A storage command's line up to its length (and `cas`'s unique), before `noreply`.
fn storage(out: &mut Vec<u8>, cmd: StoreCmd, key: &[u8], flags: u32, exptime: i32, len: usize) {
    out.extend_from_slice(cmd.name());
    out.push(b' ');
    out.extend_from_slice(key);
    out.push(b' ');
    write_u64(out, u64::from(flags));
    out.push(b' ');
    write_i64(out, i64::from(exptime));
    out.push(b' ');
    write_u64(out, len as u64);
    if let StoreCmd::Cas(c) = cmd {
        out.push(b' ');
        write_u64(out, c);
    }
}

/// The meta commands (`mg`, `ms`, `md`, `ma`, `mn`, `me`), without the final `\r\n`;
/// [`encode_request`] routes only these here.
fn meta_request(req: &Request<'_>, out: &mut Vec<u8>) {
    match *req {
        Request::MetaGet { key, flags } => meta(out, b"mg ", key, &flags),
        Request::MetaDelete { key, flags } => meta(out, b"md ", key, &flags),
        Request::MetaArith { key, flags } => meta(out, b"ma ", key, &flags),
        Request::MetaSet { key, flags, data } => {
            out.extend_from_slice(b"ms ");
            out.extend_from_slice(key);
            out.push(b' ');
            write_u64(out, data.len() as u64);
            flags.encode(out);
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(data);
        }
        Request::MetaNoop => out.extend_from_slice(b"mn"),
        Request::MetaDebug { key, base64 } => {
            out.extend_from_slice(b"me ");
            out.extend_from_slice(key);
            if base64 {
                out.extend_from_slice(b" b");
            }
        }
        _ => {}
    }
}

/// The commands that touch no item (`flush_all`, `verbosity`, `stats`, ...), without the
/// final `\r\n`; [`encode_request`] routes only these here.
fn admin(req: &Request<'_>, out: &mut Vec<u8>) {
    match *req {
        Request::FlushAll { delay, noreply: nr } => {
            out.extend_from_slice(b"flush_all");
            if let Some(d) = delay {
                out.push(b' ');
                write_i64(out, i64::from(d));
            }
            noreply(out, nr);
        }
        Request::Verbosity { level, noreply: nr } => {
            out.extend_from_slice(b"verbosity ");
            write_u64(out, u64::from(level));
            noreply(out, nr);
        }
        Request::CacheMemlimit {
            megabytes,
            noreply: nr,
        } => {
            out.extend_from_slice(b"cache_memlimit ");
            write_u64(out, u64::from(megabytes));
            noreply(out, nr);
        }
        Request::Version => out.extend_from_slice(b"version"),
        Request::Quit => out.extend_from_slice(b"quit"),
        Request::Shutdown(mode) => out.extend_from_slice(match mode {
            ShutdownMode::Immediate => b"shutdown".as_slice(),
            ShutdownMode::Graceful => b"shutdown graceful",
            ShutdownMode::Invalid => b"shutdown invalid",
        }),
        Request::Stats { args } => {
            out.extend_from_slice(b"stats");
            words(out, args);
        }
        Request::Admin { cmd, args } => {
            out.extend_from_slice(cmd.name());
            words(out, args);
        }
        _ => {}
    }
}

fn words(out: &mut Vec<u8>, w: Words<'_>) {
    for a in w.iter() {
        out.push(b' ');
        out.extend_from_slice(a);
    }
}

fn meta(out: &mut Vec<u8>, cmd: &[u8], key: &[u8], flags: &MetaFlags<'_>) {
    out.extend_from_slice(cmd);
    out.extend_from_slice(key);
    flags.encode(out);
}
