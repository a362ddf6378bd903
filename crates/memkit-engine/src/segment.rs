//! Segments and the item encoding inside them.
//!
//! Items live packed back to back in fixed-size segments, log-structured: a write appends to
//! the shard's head segment, an overwrite leaves the old copy as dead bytes, and memory comes
//! back one whole segment at a time when the eviction policy empties it (Segcache, NSDI'21).
//! Segment memory is an anonymous mapping, so the process's RSS follows what is mapped and the
//! allocator's fragmentation never enters the picture.
//!
//! Item layout (little endian, no padding, no alignment):
//!
//! ```text
//! bits:u8 | klen:u8 | vlen:varint | seq:zigzag-varint (relative to the segment's base_seq)
//!   | [flags:u32 if HAS_FLAGS] | [exptime:u32 if HAS_EXP] | [cas:u64 if EXT_CAS]
//!   | key | value (or a u32 handle to an out-of-line block if `vlen` > segment size / 32)
//! ```
//!
//! A 20-byte key and 100-byte value with a TTL cost 1+1+1+3+4 = 10 bytes of header.
//! `seq` is the shard's write sequence: it is the CAS (unless `E` gave an explicit one) and it
//! orders writes against `flush_all`.

use memmap2::MmapMut;

/// The policy bit: used since the eviction policy last decided on the item (see
/// `policy.rs`); a policy that keeps the item clears it.
pub(crate) const VISITED: u8 = 0x01;
/// `h`: fetched at least once since written.
pub(crate) const FETCHED: u8 = 0x02;
/// `X`: marked stale by `md I` or a stale `ms I`.
pub(crate) const STALE: u8 = 0x04;
/// `Z`: a win token was handed out for this item.
pub(crate) const WIN_SENT: u8 = 0x08;
const HAS_FLAGS: u8 = 0x10;
const HAS_EXP: u8 = 0x20;
const EXT_CAS: u8 = 0x40;
/// The second policy bit, S3-FIFO's: read again while `VISITED`, so the item earns two laps
/// of main (S3-FIFO's access counter, capped at 2).
pub(crate) const HOT: u8 = 0x80;
/// Bits that an in-place update may change without rewriting the item.
pub(crate) const MUTABLE_BITS: u8 = VISITED | FETCHED | STALE | WIN_SENT | HOT;

/// Whether a value of `vlen` bytes lives out of line in a segment of `seg_size` bytes. A record
/// that does not fit in what is left of the head leaves that tail unused: with records up to
/// a quarter of a segment, a fill of 6.6 KB values used 80% of its segments (0.87x
/// memcached's items). Up to a 32nd, at most 3% is left over, and an out-of-line value costs
/// its 4-byte handle and the allocator's 32 bytes. The rule is the record's layout:
/// `read_item` applies it to the segment it reads instead of a bit.
pub(crate) fn large_for(vlen: usize, large_at: usize) -> bool {
    vlen > large_at
}

/// The longest inline value in segments of `seg_size` bytes: a 32nd of a segment, or with a
/// flash tier whose `ext_item_size` is `flash_item_size`, that size if it is smaller, so
/// that every value the tier may take is out of line (only those can leave RAM and keep
/// their stub). Never under 4 bytes: a value out of line is longer than its handle.
pub(crate) fn large_threshold(seg_size: usize, flash_item_size: Option<usize>) -> usize {
    let inline = seg_size / 32;
    flash_item_size.map_or(inline, |f| inline.min(f).max(4))
}

/// One segment: an anonymous mapping plus bookkeeping.
#[derive(Debug)]
pub(crate) struct Segment {
    mem: Option<MmapMut>,
    /// Bytes written so far; items are appended here.
    pub write_pos: u32,
    /// Bytes of items the index still points at.
    pub live_bytes: u32,
    /// Base for the relative `seq` encoding of items written while this was a head.
    pub base_seq: u64,
    /// Engine time (seconds) when this segment last became a head: the age of its items.
    pub created: u32,
    /// Items with an expiry time written here since the last reset: the expiry walk skips
    /// a segment that has none (and has been walked since the last flush).
    pub expiring: u32,
    /// The shard's flush mark when the expiry walk last went through this segment.
    pub walked_flush: u64,
    /// Where an eviction that stopped part way (it had freed enough out-of-line bytes)
    /// resumes: every item before this offset has been dropped or moved.
    pub evict_pos: u32,
}

impl Segment {
    pub fn unmapped() -> Self {
        Segment {
            mem: None,
            write_pos: 0,
            live_bytes: 0,
            base_seq: 0,
            created: 0,
            expiring: 0,
            walked_flush: 0,
            evict_pos: 0,
        }
    }

    pub fn is_mapped(&self) -> bool {
        self.mem.is_some()
    }

    /// Maps `size` bytes of fresh anonymous memory. The kernel hands pages in lazily, so an
    /// unused tail costs address space, not RSS.
    pub fn map(&mut self, size: usize) -> std::io::Result<()> {
        self.mem = Some(MmapMut::map_anon(size)?);
        self.reset(0, 0);
        Ok(())
    }

    pub fn unmap(&mut self) {
        self.mem = None;
        self.reset(0, 0);
    }

    pub fn reset(&mut self, base_seq: u64, now: u32) {
        self.write_pos = 0;
        self.live_bytes = 0;
        self.base_seq = base_seq;
        self.created = now;
        self.expiring = 0;
        self.walked_flush = 0;
        self.evict_pos = 0;
    }

    pub fn bytes(&self) -> &[u8] {
        self.mem.as_deref().unwrap_or(&[])
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.mem.as_deref_mut().unwrap_or(&mut [])
    }

    pub fn free_space(&self) -> usize {
        self.bytes().len() - self.write_pos as usize
    }

    /// Hands in every page now, in one call, for a segment about to be filled (a warm
    /// restore): a fault per page costs more. Best effort (Linux 5.14+).
    pub fn populate(&self) {
        if let Some(m) = &self.mem {
            let _ = m.advise(memmap2::Advice::PopulateWrite);
        }
    }
}

/// An out-of-line value, for values too big to pack into segments: an exact-size allocation
/// (see `arena::large_cost` for what it is charged).
pub(crate) type LargeBlock = Box<[u8]>;

/// The decoded header of an item plus where its parts are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Header {
    pub bits: u8,
    pub klen: u8,
    pub vlen: u32,
    pub seq: u64,
    pub flags: u32,
    /// Engine-relative expiry second; 0 = never.
    pub exptime: u32,
    /// An explicit CAS set with `E`; otherwise the CAS is derived from `seq`.
    pub ext_cas: Option<u64>,
    /// The value lives out of line; the value bytes in the segment are a u32 handle.
    pub large: bool,
}

impl Header {
    /// Bytes the header itself takes for an item written into a segment with `base_seq`.
    pub fn encoded_len(&self, base_seq: u64) -> usize {
        2 + varint_len(u64::from(self.vlen))
            + varint_len(zigzag(self.seq, base_seq))
            + if self.flags != 0 { 4 } else { 0 }
            + if self.exptime != 0 { 4 } else { 0 }
            + if self.ext_cas.is_some() { 8 } else { 0 }
    }

    /// Bytes the value takes inside the segment.
    pub fn stored_vlen(&self) -> usize {
        if self.large { 4 } else { self.vlen as usize }
    }

    /// Total bytes in a segment: header, key and (inline) value.
    pub fn total_len(&self, base_seq: u64) -> usize {
        self.encoded_len(base_seq) + self.klen as usize + self.stored_vlen()
    }

    /// The size statistics report: header (as if freshly written), key and full value. It
    /// does not change when the item moves between segments.
    pub fn logical_len(&self) -> usize {
        self.encoded_len(self.seq) + self.klen as usize + self.vlen as usize
    }

    /// Offset of the exptime field from the item start, when the item has one.
    pub fn exptime_off(&self, key_off_from_item: usize) -> Option<usize> {
        (self.exptime != 0)
            .then(|| key_off_from_item - if self.ext_cas.is_some() { 8 } else { 0 } - 4)
    }
}

/// A parsed item at a known offset of a segment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ItemAt {
    pub header: Header,
    /// Offset of the key from the segment start.
    pub key_off: usize,
    /// Total length of the item record.
    pub len: usize,
}

impl ItemAt {
    pub fn value_off(&self) -> usize {
        self.key_off + self.header.klen as usize
    }

    pub fn key<'a>(&self, seg: &'a [u8]) -> &'a [u8] {
        &seg[self.key_off..self.value_off()]
    }

    /// The inline value, or the 4-byte handle of a large one.
    pub fn stored_value<'a>(&self, seg: &'a [u8]) -> &'a [u8] {
        &seg[self.value_off()..self.value_off() + self.header.stored_vlen()]
    }

    pub fn large_handle(&self, seg: &[u8]) -> Option<u32> {
        self.header.large.then(|| {
            let v = self.stored_value(seg);
            u32::from_le_bytes([v[0], v[1], v[2], v[3]])
        })
    }
}

/// Writes an item at the start of `out`, which must be at least `header.total_len(base)` long.
/// `stored_value` is the value in one or two parts (append/prepend), or the handle bytes of a
/// large value. Returns the length.
pub(crate) fn write_item(
    out: &mut [u8],
    base_seq: u64,
    header: &Header,
    key: &[u8],
    stored_value: &[&[u8]],
) -> usize {
    debug_assert_eq!(key.len(), header.klen as usize);
    debug_assert!(
        !header.large || header.vlen > 4,
        "a large value is bigger than its handle"
    );
    debug_assert_eq!(
        stored_value.iter().map(|p| p.len()).sum::<usize>(),
        header.stored_vlen()
    );
    let mut bits = header.bits & MUTABLE_BITS;
    if header.flags != 0 {
        bits |= HAS_FLAGS;
    }
    if header.exptime != 0 {
        bits |= HAS_EXP;
    }
    if header.ext_cas.is_some() {
        bits |= EXT_CAS;
    }
    out[0] = bits;
    out[1] = header.klen;
    let mut p = 2;
    p += put_varint(&mut out[p..], u64::from(header.vlen));
    p += put_varint(&mut out[p..], zigzag(header.seq, base_seq));
    if header.flags != 0 {
        out[p..p + 4].copy_from_slice(&header.flags.to_le_bytes());
        p += 4;
    }
    if header.exptime != 0 {
        out[p..p + 4].copy_from_slice(&header.exptime.to_le_bytes());
        p += 4;
    }
    if let Some(cas) = header.ext_cas {
        out[p..p + 8].copy_from_slice(&cas.to_le_bytes());
        p += 8;
    }
    out[p..p + key.len()].copy_from_slice(key);
    p += key.len();
    for part in stored_value {
        out[p..p + part.len()].copy_from_slice(part);
        p += part.len();
    }
    p
}

/// Parses the item starting at `off` of `seg`, a whole segment (values longer than
/// `large_at` are out of line: `large_threshold`). The bytes were written by
/// [`write_item`]; a bad record means memory corruption, which the `debug_assert`s catch in
/// tests.
pub(crate) fn read_item(seg: &[u8], off: usize, base_seq: u64, large_at: usize) -> ItemAt {
    let b = &seg[off..];
    let bits = b[0];
    let klen = b[1];
    let mut p = 2;
    let (vlen, n) = get_varint(&b[p..]);
    p += n;
    let (zz, n) = get_varint(&b[p..]);
    p += n;
    let u32_at = |p: &mut usize| {
        let v = u32::from_le_bytes([b[*p], b[*p + 1], b[*p + 2], b[*p + 3]]);
        *p += 4;
        v
    };
    let flags = if bits & HAS_FLAGS != 0 {
        u32_at(&mut p)
    } else {
        0
    };
    let exptime = if bits & HAS_EXP != 0 {
        u32_at(&mut p)
    } else {
        0
    };
    let ext_cas = (bits & EXT_CAS != 0).then(|| {
        let mut c = [0u8; 8];
        c.copy_from_slice(&b[p..p + 8]);
        p += 8;
        u64::from_le_bytes(c)
    });
    let header = Header {
        bits: bits & MUTABLE_BITS,
        klen,
        vlen: vlen as u32,
        seq: unzigzag(zz, base_seq),
        flags,
        exptime,
        ext_cas,
        large: large_for(vlen as usize, large_at),
    };
    let len = p + klen as usize + header.stored_vlen();
    ItemAt {
        header,
        key_off: off + p,
        len,
    }
}

fn zigzag(seq: u64, base: u64) -> u64 {
    let d = seq.wrapping_sub(base) as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(z: u64, base: u64) -> u64 {
    let d = ((z >> 1) as i64) ^ -((z & 1) as i64);
    base.wrapping_add(d as u64)
}

fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn put_varint(out: &mut [u8], mut v: u64) -> usize {
    let mut i = 0;
    while v >= 0x80 {
        out[i] = (v as u8) | 0x80;
        v >>= 7;
        i += 1;
    }
    out[i] = v as u8;
    i + 1
}

/// A one-byte varint (a value under 128: most value lengths and sequence offsets) is
/// answered without the loop, which every record parse meets twice.
#[inline]
fn get_varint(b: &[u8]) -> (u64, usize) {
    match b.first() {
        Some(&byte) if byte < 0x80 => (u64::from(byte), 1),
        _ => get_varint_long(b),
    }
}

fn get_varint_long(b: &[u8]) -> (u64, usize) {
    let mut v = 0u64;
    for (i, &byte) in b.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return (v, i + 1);
        }
    }
    debug_assert!(false, "unterminated varint in a segment");
    (v, 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(h: Header, base: u64) {
        let key = vec![b'k'; h.klen as usize];
        let val = vec![7u8; h.stored_vlen()];
        let mut buf = vec![0u8; 32 << 10]; // a 32 KiB segment: values over 1 KiB are large
        let n = write_item(&mut buf[3..], base, &h, &key, &[&val]);
        assert_eq!(n, h.total_len(base));
        let at = read_item(&buf, 3, base, large_threshold(buf.len(), None));
        assert_eq!(at.header, h);
        assert_eq!(at.len, n);
        assert_eq!(at.key(&buf), &key[..]);
        assert_eq!(at.stored_value(&buf), &val[..]);
    }

    #[test]
    fn encoding_roundtrips() {
        let base = Header {
            bits: VISITED,
            klen: 20,
            vlen: 100,
            seq: 1000,
            flags: 0,
            exptime: 0,
            ext_cas: None,
            large: false,
        };
        roundtrip(base, 990);
        roundtrip(Header { seq: 5, ..base }, 1 << 40);
        roundtrip(
            Header {
                flags: u32::MAX,
                exptime: 77,
                ext_cas: Some(u64::MAX),
                ..base
            },
            0,
        );
        roundtrip(
            Header {
                large: true,
                vlen: 5 << 20,
                bits: STALE | WIN_SENT,
                ..base
            },
            1,
        );
        roundtrip(
            Header {
                seq: u64::MAX,
                klen: 250,
                vlen: 0,
                ..base
            },
            0,
        );
    }

    #[test]
    fn a_typical_item_has_a_small_header() {
        let h = Header {
            bits: 0,
            klen: 20,
            vlen: 100,
            seq: 123_456,
            flags: 0,
            exptime: 3600,
            ext_cas: None,
            large: false,
        };
        // A write sequence within 2^20 of the segment base takes 3 bytes.
        assert_eq!(h.encoded_len(123_456 - 100_000), 10);
    }
}
