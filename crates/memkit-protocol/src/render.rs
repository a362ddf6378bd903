//! Server replies: hot-path writers and meta rendering.
//!
//! Wire formats:
//! ```text
//! VALUE <key> <flags> <bytes> [<cas>]\r\n<data>\r\n ... END\r\n
//! STORED | NOT_STORED | EXISTS | NOT_FOUND | DELETED | TOUCHED | OK   (\r\n)
//! <number>\r\n                      (incr/decr)
//! STAT <name> <value>\r\n ... END\r\n
//! <CD> <ret flags>*\r\n             CD in HD EN NF NS EX; VA <bytes> <ret flags>*\r\n<data>\r\n
//! ME <key> exp=<e> la=<l> cas=<c> fetch=<yes|no> cls=<n> size=<n>\r\n      MN\r\n
//! ```
//! Meta return flags follow the request's order (`mg k s v t` answers `VA 2 s2 t-1`), with
//! `Z`, `X`, `W` appended last in that order; a base64 key is echoed re-encoded and followed
//! by ` b`. Which flags each command echoes is memcached 1.6.18's choice (see [`MetaCmd`]).

use crate::meta::MetaFlags;
use crate::num::{write_i64, write_u64};
use crate::response::MetaCode;

/// Appends `VALUE <key> <flags> <len>[ <cas>]\r\n<data>\r\n`.
pub fn write_value(out: &mut Vec<u8>, key: &[u8], flags: u32, data: &[u8], cas: Option<u64>) {
    write_value_header(out, key, flags, data.len(), cas);
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Appends only the `VALUE` line, for servers that write the data from elsewhere (then
/// `\r\n`).
pub fn write_value_header(out: &mut Vec<u8>, key: &[u8], flags: u32, len: usize, cas: Option<u64>) {
    // "VALUE ", three numbers of at most 20 digits and their spaces, "\r\n": one growth
    // at most, not one per piece.
    out.reserve(key.len() + 71);
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    out.push(b' ');
    write_u64(out, u64::from(flags));
    out.push(b' ');
    write_u64(out, len as u64);
    if let Some(c) = cas {
        out.push(b' ');
        write_u64(out, c);
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends `END\r\n`.
pub fn write_end(out: &mut Vec<u8>) {
    out.extend_from_slice(b"END\r\n");
}

/// Appends a fixed reply line such as `STORED` plus `\r\n`.
pub fn write_line(out: &mut Vec<u8>, line: &str) {
    out.extend_from_slice(line.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends an incr/decr result: `<n>\r\n`.
pub fn write_number(out: &mut Vec<u8>, n: u64) {
    write_u64(out, n);
    out.extend_from_slice(b"\r\n");
}

/// Appends `STAT <name> <value>\r\n`.
pub fn write_stat(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(b"STAT ");
    out.extend_from_slice(name.as_bytes());
    out.push(b' ');
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Appends `STAT <name> <n>\r\n`.
pub fn write_stat_u64(out: &mut Vec<u8>, name: &str, n: u64) {
    out.extend_from_slice(b"STAT ");
    out.extend_from_slice(name.as_bytes());
    out.push(b' ');
    write_number(out, n);
}

/// Which meta command a reply answers: it decides the echoed flags and the `q` rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaCmd {
    /// `mg`: echoes `s t c f l h O k` in order, then `Z X W`; misses echo `O k`.
    Get,
    /// `ms`: echoes `O k c`.
    Set,
    /// `md`: echoes `O k`.
    Delete,
    /// `ma`: with an item echoes `c t O k`, otherwise `O k`.
    Arith,
}

/// What the server learned about the item a meta request touched, for its return flags:
/// values as the reply prints them (TTL and idle time relative to now). Not the engine's
/// `CrawledItem`, which is one item of a crawl (key, absolute times).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ItemMeta {
    /// Value length in bytes (`s`, and the `VA` length).
    pub value_len: usize,
    /// Client flags (`f`).
    pub client_flags: u32,
    /// CAS (`c`); for `ms`, the stored item's CAS, 0 when not stored.
    pub cas: u64,
    /// Remaining TTL in seconds, -1 for never (`t`).
    pub ttl: i64,
    /// Whether the item had been fetched before (`h`).
    pub fetched: bool,
    /// Seconds since last access (`l`).
    pub last_access: u64,
    /// `W`: this request won the recache token.
    pub win: bool,
    /// `X`: the item is stale.
    pub stale: bool,
    /// `Z`: a win token was already handed out.
    pub win_taken: bool,
}

/// The outcome the server reports, before the codec picks the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaStatus {
    /// Success: `VA` when a value is returned (mg/ma with `v`), else `HD`.
    Ok,
    /// Miss: `EN` for mg, `NF` otherwise.
    Miss,
    /// `NS`.
    NotStored,
    /// `EX`.
    Exists,
}

/// The reply code for `status`; `with_value` says the server returns the value (`v` asked,
/// and for mg not cancelled by a matching `C`).
pub fn meta_code(cmd: MetaCmd, status: MetaStatus, with_value: bool) -> MetaCode {
    match status {
        MetaStatus::Ok if with_value && matches!(cmd, MetaCmd::Get | MetaCmd::Arith) => {
            MetaCode::Va
        }
        MetaStatus::Ok => MetaCode::Hd,
        MetaStatus::Miss if cmd == MetaCmd::Get => MetaCode::En,
        MetaStatus::Miss => MetaCode::Nf,
        MetaStatus::NotStored => MetaCode::Ns,
        MetaStatus::Exists => MetaCode::Ex,
    }
}

/// The `q` rules of memcached 1.6.18: quiet mode hides `EN` for mg, and `HD` for ms, md and
/// ma (ma also hides `VA`); everything else, errors included, is always sent.
pub fn suppressed(cmd: MetaCmd, code: MetaCode, quiet: bool) -> bool {
    quiet
        && match cmd {
            MetaCmd::Get => code == MetaCode::En,
            MetaCmd::Set | MetaCmd::Delete => code == MetaCode::Hd,
            MetaCmd::Arith => matches!(code, MetaCode::Hd | MetaCode::Va),
        }
}

/// Appends a meta reply line (without a data block; for `VA`, write the data and `\r\n`
/// after it, or use [`write_meta_value`]). `key` is the request's key as sent; `item` is the
/// item's metadata when there is one. Writes nothing when `q` suppresses the reply, and
/// returns whether it wrote.
pub fn write_meta(
    out: &mut Vec<u8>,
    cmd: MetaCmd,
    code: MetaCode,
    key: &[u8],
    flags: &MetaFlags<'_>,
    item: Option<&ItemMeta>,
) -> bool {
    if suppressed(cmd, code, flags.quiet) {
        return false;
    }
    out.extend_from_slice(code.as_str().as_bytes());
    if code == MetaCode::Va {
        out.push(b' ');
        write_u64(out, item.map_or(0, |i| i.value_len as u64));
    }
    let item = item.filter(|_| matches!(code, MetaCode::Va | MetaCode::Hd) || cmd == MetaCmd::Set);
    for &f in flags.order() {
        match (f, cmd, item) {
            (b'O', ..) => {
                out.extend_from_slice(b" O");
                out.extend_from_slice(flags.opaque.unwrap_or_default());
            }
            // A hit on mg echoes the key the way the *item* was stored; every other reply
            // echoes it the way the request sent it.
            (b'k', MetaCmd::Get, Some(_)) => write_key(out, key, flags.base64, true),
            (b'k', ..) => write_key(out, key, flags.base64, false),
            (b'c', MetaCmd::Get | MetaCmd::Arith, Some(i)) => {
                out.extend_from_slice(b" c");
                write_u64(out, i.cas);
            }
            // ms always answers `c`, with 0 when nothing was stored.
            (b'c', MetaCmd::Set, i) => {
                out.extend_from_slice(b" c");
                write_u64(out, i.map_or(0, |i| i.cas));
            }
            (b't', MetaCmd::Get | MetaCmd::Arith, Some(i)) => {
                out.extend_from_slice(b" t");
                write_i64(out, i.ttl);
            }
            (b's', MetaCmd::Get, Some(i)) => {
                out.extend_from_slice(b" s");
                write_u64(out, i.value_len as u64);
            }
            (b'f', MetaCmd::Get, Some(i)) => {
                out.extend_from_slice(b" f");
                write_u64(out, u64::from(i.client_flags));
            }
            (b'l', MetaCmd::Get, Some(i)) => {
                out.extend_from_slice(b" l");
                write_u64(out, i.last_access);
            }
            (b'h', MetaCmd::Get, Some(i)) => {
                out.extend_from_slice(if i.fetched { b" h1" } else { b" h0" });
            }
            _ => {}
        }
    }
    if let (MetaCmd::Get, Some(i)) = (cmd, item) {
        for (on, s) in [(i.win_taken, b" Z"), (i.stale, b" X"), (i.win, b" W")] {
            if on {
                out.extend_from_slice(s);
            }
        }
    }
    out.extend_from_slice(b"\r\n");
    true
}

/// [`write_meta`] followed by the data block for `VA`.
pub fn write_meta_value(
    out: &mut Vec<u8>,
    cmd: MetaCmd,
    key: &[u8],
    flags: &MetaFlags<'_>,
    item: &ItemMeta,
    value: &[u8],
) {
    let item = ItemMeta {
        value_len: value.len(),
        ..*item
    };
    if write_meta(out, cmd, MetaCode::Va, key, flags, Some(&item)) {
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
}

/// memcached's `META_KEY`: ` k<key>`, or for a binary key its base64 form plus ` b`.
///
/// For an mg hit (`from_item`) memcached decides by a flag on the *item* (was it stored with
/// a binary key?), so a key stored as text and read with `b` comes back raw. memkit keeps no
/// such flag; it re-encodes exactly the keys that could not be sent raw (bytes the text
/// protocol cannot carry), which agrees with memcached except for a printable key stored
/// through `b` (raw here, base64 there).
fn write_key(out: &mut Vec<u8>, key: &[u8], base64: bool, from_item: bool) {
    out.extend_from_slice(b" k");
    match crate::request::meta_key(key, base64).filter(|_| base64) {
        // A printable key read back from an item: memcached's item is not flagged binary
        // (as far as memkit can tell), so the decoded key goes out raw.
        Some(bin) if from_item && !bin.iter().any(|&b| b <= b' ' || b >= 0x7f) => {
            out.extend_from_slice(&bin)
        }
        Some(bin) => {
            crate::base64::encode_into(&bin, out);
            out.extend_from_slice(b" b");
        }
        None => out.extend_from_slice(key),
    }
}

/// What `me` reports about an item.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DebugInfo {
    /// Seconds until expiry; -1 for never.
    pub exp: i64,
    /// Seconds since last access.
    pub la: u64,
    /// CAS.
    pub cas: u64,
    /// Fetched before.
    pub fetched: bool,
    /// Size class id.
    pub cls: u32,
    /// Total item size in bytes.
    pub size: u64,
}

/// Appends `ME <key> exp=.. la=.. cas=.. fetch=yes|no cls=.. size=..\r\n`.
pub fn write_meta_debug(out: &mut Vec<u8>, key: &[u8], base64: bool, d: &DebugInfo) {
    out.extend_from_slice(b"ME ");
    match crate::request::meta_key(key, base64).filter(|_| base64) {
        Some(bin) => crate::base64::encode_into(&bin, out),
        None => out.extend_from_slice(key),
    }
    out.extend_from_slice(b" exp=");
    write_i64(out, d.exp);
    out.extend_from_slice(b" la=");
    write_u64(out, d.la);
    out.extend_from_slice(b" cas=");
    write_u64(out, d.cas);
    out.extend_from_slice(if d.fetched {
        b" fetch=yes"
    } else {
        b" fetch=no"
    });
    out.extend_from_slice(b" cls=");
    write_u64(out, u64::from(d.cls));
    out.extend_from_slice(b" size=");
    write_u64(out, d.size);
    out.extend_from_slice(b"\r\n");
}
