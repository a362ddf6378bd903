//! Warm restart, one shard's part: its live items as records, and records put back with
//! their own write sequence numbers. An item's CAS is derived from its sequence number and
//! its shard (see `Shard::cas_of`), and the restored engine hashes keys with the saved seed,
//! so every item lands in the shard it left and comes back with the same CAS without the 8
//! bytes an explicit one would cost. The file around the records is `engine::restart`'s.
//!
//! A record, little endian:
//!
//! ```text
//! bits:u8 | klen:u8 | vlen:u32 | flags:u32 | exptime_unix:u64 (0 = never) | seq:u64
//!   | [cas:u64 if EXPLICIT_CAS] | key | value, or where it is on flash if FLASH
//! ```
//!
//! A value on flash (the flash tier) is saved as its location, 16 bytes (page, page
//! version, offset, length): the flash file and its page table survive the restart beside
//! this file (`memkit_flash::FlashStore::save_state`), and the restored stub points there.

use std::io::{self, Write};

use memkit_types::Result;

use super::Shard;
use memkit_flash::FlashLoc;

use crate::arena::{Loc, Value, seg_of};
use crate::index::Index;
use crate::policy::Policy;
use crate::segment::{FETCHED, HOT, Header, STALE, VISITED, WIN_SENT, large_for};

/// The record's bits (the file's own numbering, so the segment encoding can change freely).
const R_VISITED: u8 = 0x01;
const R_HOT: u8 = 0x02;
const R_FETCHED: u8 = 0x04;
const R_STALE: u8 = 0x08;
const R_WIN_SENT: u8 = 0x10;
const R_EXPLICIT_CAS: u8 = 0x20;
const R_FLASH: u8 = 0x40;
const R_KNOWN: u8 = 0x7f;
/// Bytes of a saved flash location.
const FLASH_LOC_LEN: usize = 16;
const BIT_MAP: [(u8, u8); 5] = [
    (VISITED, R_VISITED),
    (HOT, R_HOT),
    (FETCHED, R_FETCHED),
    (STALE, R_STALE),
    (WIN_SENT, R_WIN_SENT),
];

/// Bytes of a record before its key, without the explicit CAS.
pub(crate) const RECORD_HEAD: usize = 26;

/// Above any write sequence a shard reaches (2^56 writes: 228 years at ten million a second),
/// and far enough below `u64::MAX` that the writes after a restore cannot overflow it.
pub(crate) const MAX_SEQ: u64 = 1 << 56;

/// A record's fixed part, decoded and checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecordHead {
    bits: u8,
    pub klen: usize,
    pub vlen: usize,
    flags: u32,
    pub exptime_unix: u64,
    pub seq: u64,
    pub explicit_cas: bool,
    /// The explicit CAS (`E`), which the reader fills in from the bytes after the head.
    pub cas: Option<u64>,
    /// The value is on flash: the record holds its location.
    pub flash: bool,
}

impl RecordHead {
    /// Decodes the first [`RECORD_HEAD`] bytes; `None` for a record no save could have
    /// written (so a damaged file is refused even where its checksum would collide).
    pub fn decode(b: &[u8; RECORD_HEAD], item_size_max: usize) -> Option<RecordHead> {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        let r = RecordHead {
            bits: b[0],
            klen: usize::from(b[1]),
            vlen: u32_at(2) as usize,
            flags: u32_at(6),
            exptime_unix: u64_at(10),
            seq: u64_at(18),
            explicit_cas: b[0] & R_EXPLICIT_CAS != 0,
            cas: None,
            flash: b[0] & R_FLASH != 0,
        };
        let ok = r.bits & !R_KNOWN == 0
            && (1..=memkit_types::MAX_KEY_LEN).contains(&r.klen)
            && r.vlen <= item_size_max
            && (1..=MAX_SEQ).contains(&r.seq);
        ok.then_some(r)
    }

    /// Bytes of the record after its key: the value, or its location on flash.
    pub fn stored_len(&self) -> usize {
        if self.flash { FLASH_LOC_LEN } else { self.vlen }
    }
}

fn encode_loc(loc: FlashLoc) -> [u8; FLASH_LOC_LEN] {
    let mut b = [0u8; FLASH_LOC_LEN];
    for (i, v) in [loc.page, loc.version, loc.offset, loc.len]
        .into_iter()
        .enumerate()
    {
        b[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
    }
    b
}

fn decode_loc(b: &[u8]) -> Option<FlashLoc> {
    let v = |i: usize| {
        Some(u32::from_le_bytes(
            b.get(i * 4..i * 4 + 4)?.try_into().ok()?,
        ))
    };
    Some(FlashLoc {
        page: v(0)?,
        version: v(1)?,
        offset: v(2)?,
        len: v(3)?,
    })
}

/// What a shard's section records besides its items.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ShardState {
    /// The write sequence: every CAS derived after the restart is above this shard's old ones.
    pub seq: u64,
    /// A delayed `flush_all` not yet due, in engine seconds.
    pub flush_at: Option<u32>,
    /// Index entries the shard had room for: the restored shard is sized the same at once.
    pub index_capacity: usize,
}

impl Shard {
    /// The live items, in the policy's order (oldest segments first, as `Self::segments`
    /// lists them, so a restore that runs short of room drops what would have gone next),
    /// and the bytes their records take. Taken from the index, so no key is hashed; the
    /// shard must stay locked until [`Self::warm_write`] has run.
    pub(crate) fn warm_items(&mut self, now: u32) -> (Vec<Loc>, u64) {
        self.apply_flush(now);
        let mut rank: Vec<u32> = Vec::new();
        for (r, s) in self.segments().enumerate() {
            let s = s as usize;
            if rank.len() <= s {
                rank.resize(s + 1, u32::MAX);
            }
            rank[s] = r as u32;
        }
        // A counting sort by rank, then each segment's items by offset, so that they are
        // read front to back (the hardware prefetches; read at random, each record is a
        // miss: 40% of a save's CPU). A segment without a rank, which no index entry should
        // point to, goes last.
        let last = rank.iter().filter(|&&r| r != u32::MAX).count();
        let rank_of = |e: Loc| match rank.get(seg_of(e) as usize) {
            Some(&r) if r != u32::MAX => r as usize,
            _ => last,
        };
        let mut start = vec![0usize; last + 2];
        for e in self.index.locs() {
            start[rank_of(e) + 1] += 1;
        }
        for r in 1..start.len() {
            start[r] += start[r - 1];
        }
        let mut sorted: Vec<Loc> = vec![0; start[last + 1]];
        for e in self.index.locs() {
            let at = &mut start[rank_of(e)];
            sorted[*at] = e;
            *at += 1;
        }
        // `start[r]` is now where rank r ends.
        let mut from = 0;
        for &end in &start[..=last] {
            sorted[from..end].sort_unstable();
            from = end;
        }
        let mut locs = Vec::with_capacity(sorted.len());
        let mut bytes = 0u64;
        for e in sorted {
            let at = self.arena.item_at(e);
            if self.dead(&at.header, now).is_none() {
                locs.push(e);
                bytes += record_len(&at.header, self.flash_loc(e, &at).is_some()) as u64;
            }
        }
        (locs, bytes)
    }

    /// Writes the records of `locs` (from [`Self::warm_items`], shard still locked).
    pub(crate) fn warm_write(
        &self,
        locs: &[Loc],
        epoch: u64,
        out: &mut impl Write,
    ) -> io::Result<()> {
        let mut head = [0u8; RECORD_HEAD + 8];
        for &e in locs {
            let at = self.arena.item_at(e);
            let h = &at.header;
            let mut bits = BIT_MAP
                .iter()
                .filter(|(seg, _)| h.bits & seg != 0)
                .fold(0, |acc, (_, rec)| acc | rec);
            if h.ext_cas.is_some() {
                bits |= R_EXPLICIT_CAS;
            }
            let value = self.arena.value_of(e, &at);
            if let Value::Flash(_) = value {
                bits |= R_FLASH;
            }
            let exptime_unix = if h.exptime == 0 {
                0
            } else {
                epoch + u64::from(h.exptime)
            };
            head[0] = bits;
            head[1] = h.klen;
            head[2..6].copy_from_slice(&h.vlen.to_le_bytes());
            head[6..10].copy_from_slice(&h.flags.to_le_bytes());
            head[10..18].copy_from_slice(&exptime_unix.to_le_bytes());
            head[18..26].copy_from_slice(&h.seq.to_le_bytes());
            let n = match h.ext_cas {
                Some(cas) => {
                    head[26..34].copy_from_slice(&cas.to_le_bytes());
                    RECORD_HEAD + 8
                }
                None => RECORD_HEAD,
            };
            out.write_all(&head[..n])?;
            out.write_all(at.key(self.arena.seg(seg_of(e)).bytes()))?;
            match value {
                Value::Bytes(b) => out.write_all(b)?,
                Value::Flash(loc) => out.write_all(&encode_loc(loc))?,
            }
        }
        Ok(())
    }

    /// After its section is written at a stop: the shard empty, with `budget`, and all its
    /// memory (segments, large blocks, index) given back at once. The write sequence stays,
    /// so a CAS issued later is still above every earlier one.
    pub(crate) fn warm_clear(&mut self, budget: usize) {
        let mut empty = Shard::new(
            self.cfg.clone(),
            self.id,
            self.shard_bits,
            self.hasher.clone(),
        );
        empty.set_budget(budget);
        empty.seq = self.seq;
        *self = empty;
    }

    /// [`Shard::warm_clear`] for a cache that goes on serving: the counters (hits, sets...)
    /// carry over, the gauges (items, bytes) start again from nothing.
    pub(crate) fn clear_keeping_counters(&mut self, budget: usize) {
        let counters = self.stats.counters.clone();
        self.warm_clear(budget);
        self.stats.counters = crate::stats::Counters {
            curr_items: 0,
            bytes: 0,
            ..counters
        };
    }

    /// The section state to save with the records.
    pub(crate) fn warm_state(&self) -> ShardState {
        ShardState {
            seq: self.seq,
            flush_at: self.flush_at,
            index_capacity: self.index.capacity(),
        }
    }

    /// Sizes the (empty) index as the saved shard had it (and the policy's metadata, which
    /// follows the index), charged to the budget as their growth would have been. Whatever
    /// the file says, never past a table of half the budget (about what a cache of the
    /// smallest items holds in its index), so that the rest is left for items: the records
    /// grow the index further if they need it.
    pub(crate) fn warm_presize(&mut self, st: &ShardState, items: usize) {
        let held = self.index_bytes + self.policy.bytes();
        let most = Index::capacity_within(self.arena.limit() / 2);
        self.index.reserve(st.index_capacity.max(items).min(most));
        // The policy's metadata is sized from the index, as its growth would have left it.
        self.policy.resize(self.index.capacity());
        self.index_bytes = self.index.bytes();
        (self.arena).recharge(held, self.index_bytes + self.policy.bytes());
    }

    /// Puts one record back, with its own sequence number (hence CAS) and bits. `exptime` is
    /// in engine seconds (0 = never). `write_new`'s steps without its search for an old
    /// version and its `on_insert`: the shard is filled from empty with distinct keys whose
    /// policy bits the file holds (the search is a cache miss a record, a quarter of a
    /// restore). Like a load from disk, not a store: it does not count in `total_items`.
    pub(crate) fn warm_install(
        &mut self,
        h: u64,
        rec: &RecordHead,
        exptime: u32,
        key: &[u8],
        value: &[u8],
        now: u32,
    ) -> Result<()> {
        let bits = BIT_MAP
            .iter()
            .filter(|(_, r)| rec.bits & r != 0)
            .fold(0, |acc, (seg, _)| acc | seg);
        let hdr = Header {
            bits,
            klen: key.len() as u8,
            vlen: rec.vlen as u32,
            seq: rec.seq,
            flags: rec.flags,
            exptime,
            ext_cas: rec.cas,
            large: large_for(rec.vlen, self.arena.large_at()),
        };
        // A value on flash comes back as its stub, if the page still holds it and the
        // value is one this configuration keeps out of line.
        let flash = match rec.flash {
            false => None,
            true => {
                let loc = decode_loc(value).ok_or(memkit_types::Error::OutOfMemory)?;
                let live = self.arena.flash().is_some_and(|f| f.is_live(loc));
                if !live || !hdr.large {
                    return Err(memkit_types::Error::OutOfMemory);
                }
                Some(loc)
            }
        };
        // A head opened for this record takes the sequence before it as its base.
        self.seq = rec.seq - 1;
        let large = if hdr.large && flash.is_none() {
            value.len()
        } else {
            0
        };
        self.make_room(hdr.total_len(self.write_base()), large, true, now)?;
        self.seq = rec.seq;
        let handle;
        let stored: [&[u8]; 2] = if let Some(loc) = flash {
            handle = self.arena.adopt_flash(loc).to_le_bytes();
            [&handle, &[]]
        } else if hdr.large {
            handle = self.arena.alloc_large([value, &[]])?.to_le_bytes();
            [&handle, &[]]
        } else {
            [value, &[]]
        };
        let e = match flash {
            // A stub of a value on flash goes where such stubs live (`shard::flash`).
            Some(_) => self
                .append_stub(key, &hdr, stored, now)
                .ok_or(memkit_types::Error::OutOfMemory)?,
            None => {
                let head = self
                    .policy
                    .write_head()
                    .expect("make_room leaves a write head");
                if self.arena.seg(head).write_pos == 0 {
                    self.arena.seg(head).populate();
                }
                self.append_record(key, &hdr, stored)
            }
        };
        self.link(h, e, &hdr, now);
        Ok(())
    }

    /// After the last record: the write sequence goes back above every restored item's (and
    /// whatever the saved shard had issued), and a pending delayed `flush_all` is re-armed.
    pub(crate) fn warm_finish(&mut self, st: &ShardState, max_seq: u64, now: u32) {
        self.seq = self.seq.max(st.seq).max(max_seq);
        if let Some(at) = st.flush_at {
            self.flush(Some(at), now);
        }
    }
}

/// Bytes of an item's record (`flash`: its value is on flash, the record holds where).
fn record_len(h: &Header, flash: bool) -> usize {
    let value = if flash {
        FLASH_LOC_LEN
    } else {
        h.vlen as usize
    };
    RECORD_HEAD + if h.ext_cas.is_some() { 8 } else { 0 } + h.klen as usize + value
}
