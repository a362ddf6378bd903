//! The on-disk encoding of an item and of the layer's own metadata.
//!
//! Keyspace `items`: key = the memcached key, unchanged (1-250 bytes; meta commands may
//! carry binary keys). Value = a fixed 38-byte header, then the value bytes:
//!
//! ```text
//! 0      version (1)
//! 1      bits: 0x01 stale, 0x02 win token handed out
//! 2..6   client flags, u32 LE
//! 6..14  expiry, absolute Unix seconds, u64 LE (0 = never)
//! 14..22 CAS, u64 LE
//! 22..30 write stamp, u64 LE: orders the write against `flush_all` (see `FlushState`)
//! 30..38 write time, Unix seconds, u64 LE: for a delayed `flush_all`
//! 38..   value
//! ```
//!
//! Keyspace `meta`: `reserved` = CAS and stamp reservations (two u64 LE), `flush` = the
//! flush state (three u64 LE).

use memkit_engine::{Loaded, Record};

/// Format version of an item record.
pub const VERSION: u8 = 1;
/// Bytes before the value.
pub const HEADER: usize = 38;
const STALE: u8 = 0x01;
const WIN_SENT: u8 = 0x02;

/// A decoded item header (the value follows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub flags: u32,
    pub exptime_unix: Option<u64>,
    pub cas: u64,
    pub stale: bool,
    pub win_sent: bool,
    pub stamp: u64,
    pub written_unix: u64,
}

impl Header {
    /// Expired at `now_unix` (memcached: an item whose time has come is gone).
    pub fn expired(&self, now_unix: u64) -> bool {
        self.exptime_unix.is_some_and(|t| t <= now_unix)
    }
}

/// Encodes `r` with its write stamp.
pub fn encode(r: &Record<'_>, stamp: u64, written_unix: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + r.value.len());
    out.push(VERSION);
    out.push(if r.stale { STALE } else { 0 } | if r.win_sent { WIN_SENT } else { 0 });
    out.extend_from_slice(&r.flags.to_le_bytes());
    out.extend_from_slice(&r.exptime_unix.unwrap_or(0).to_le_bytes());
    out.extend_from_slice(&r.cas.to_le_bytes());
    out.extend_from_slice(&stamp.to_le_bytes());
    out.extend_from_slice(&written_unix.to_le_bytes());
    out.extend_from_slice(r.value);
    out
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Decodes a record's header; `None` if it is not a record this version wrote.
pub fn decode(b: &[u8]) -> Option<Header> {
    if b.len() < HEADER || b[0] != VERSION {
        return None;
    }
    let exp = u64_at(b, 6);
    Some(Header {
        flags: u32::from_le_bytes(b[2..6].try_into().expect("4 bytes")),
        exptime_unix: (exp != 0).then_some(exp),
        cas: u64_at(b, 14),
        stale: b[1] & STALE != 0,
        win_sent: b[1] & WIN_SENT != 0,
        stamp: u64_at(b, 22),
        written_unix: u64_at(b, 30),
    })
}

/// The item a record holds, for RAM.
pub fn loaded(h: &Header, b: &[u8]) -> Loaded {
    Loaded {
        value: b[HEADER..].to_vec(),
        flags: h.flags,
        exptime_unix: h.exptime_unix,
        cas: h.cas,
        stale: h.stale,
        win_sent: h.win_sent,
    }
}

/// Little-endian u64s, for the `meta` keyspace.
pub fn encode_u64s(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The inverse of [`encode_u64s`]; missing trailing numbers read as 0.
pub fn decode_u64s<const N: usize>(b: &[u8]) -> [u64; N] {
    let mut out = [0u64; N];
    for (i, o) in out.iter_mut().enumerate() {
        if b.len() >= (i + 1) * 8 {
            *o = u64_at(b, i * 8);
        }
    }
    out
}

/// `flush_all` as the disk remembers it. An item is flushed if its write stamp is below
/// `before_stamp` (an immediate flush), or it was written up to Unix second `upto_unix`
/// (a delayed flush that came due), or a pending delayed flush has come due and it was
/// written up to that second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlushState {
    pub before_stamp: u64,
    pub upto_unix: u64,
    pub pending_unix: Option<u64>,
}

impl FlushState {
    pub fn flushed(&self, h: &Header, now_unix: u64) -> bool {
        h.stamp < self.before_stamp
            || (self.upto_unix != 0 && h.written_unix <= self.upto_unix)
            || self
                .pending_unix
                .is_some_and(|t| now_unix >= t && h.written_unix <= t)
    }

    pub fn encode(&self) -> Vec<u8> {
        encode_u64s(&[
            self.before_stamp,
            self.upto_unix,
            self.pending_unix.unwrap_or(0),
        ])
    }

    pub fn decode(b: &[u8]) -> FlushState {
        let [before_stamp, upto_unix, pending] = decode_u64s::<3>(b);
        FlushState {
            before_stamp,
            upto_unix,
            pending_unix: (pending != 0).then_some(pending),
        }
    }

    /// A pending delayed flush that has come due becomes part of the permanent state.
    pub fn settle(&mut self, now_unix: u64) {
        if let Some(t) = self.pending_unix
            && now_unix >= t
        {
            // Items written after `t` must survive, so only `upto_unix` may move.
            self.upto_unix = self.upto_unix.max(t);
            self.pending_unix = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let r = Record {
            key: b"k",
            value: b"hello",
            flags: 0xdead_beef,
            exptime_unix: Some(1_800_000_000),
            cas: 42,
            stale: true,
            win_sent: true,
        };
        let b = encode(&r, 7, 1_700_000_000);
        let h = decode(&b).unwrap();
        assert_eq!(
            (h.flags, h.exptime_unix, h.cas, h.stale, h.win_sent, h.stamp),
            (0xdead_beef, Some(1_800_000_000), 42, true, true, 7)
        );
        let l = loaded(&h, &b);
        assert_eq!(l.value, b"hello");
        assert!(decode(&b[..10]).is_none());
    }

    #[test]
    fn flush_state_rules() {
        let h = |stamp, written_unix| Header {
            flags: 0,
            exptime_unix: None,
            cas: 1,
            stale: false,
            win_sent: false,
            stamp,
            written_unix,
        };
        let mut f = FlushState {
            before_stamp: 10,
            ..Default::default()
        };
        assert!(f.flushed(&h(9, 0), 0) && !f.flushed(&h(10, 0), 0));
        f.pending_unix = Some(100);
        assert!(!f.flushed(&h(11, 100), 99), "not due yet");
        assert!(f.flushed(&h(11, 100), 100) && !f.flushed(&h(11, 101), 101));
        f.settle(101);
        assert_eq!((f.upto_unix, f.pending_unix), (100, None));
        assert_eq!(FlushState::decode(&f.encode()), f);
    }
}
