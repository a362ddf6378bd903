//! The record format on the file: `crc32 u32 LE | key_len u8 | value_len u32 LE | key | value`.
//!
//! The checksum covers everything after it and starts from the page's version (crc32fast's
//! `new_with_initial`) rather than from zero: a page is rewritten in place, so an older
//! incarnation's record can sit at the very offset a newer location names, with the same key
//! and length. Seeding with the version makes such a leftover fail its check instead of
//! passing for the newer value.

/// Bytes before the key: crc, key length, value length.
pub(crate) const HEADER: usize = 9;

/// Longest key a record holds (its length is one byte).
pub(crate) const MAX_KEY: usize = u8::MAX as usize;

/// Bytes a record of this key and value takes on the file.
pub(crate) fn len(key_len: usize, value_len: usize) -> usize {
    HEADER + key_len + value_len
}

fn crc(version: u32, body: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(version);
    h.update(body);
    h.finalize()
}

/// Appends the record to `out`. The caller has checked the key fits a byte and the value a
/// `u32`, and that `out` has room (the buffer never grows past its capacity).
pub(crate) fn encode(out: &mut Vec<u8>, version: u32, key: &[u8], value: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    out.push(key.len() as u8);
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    let sum = crc(version, &out[start + 4..]);
    out[start..start + 4].copy_from_slice(&sum.to_le_bytes());
}

/// The record length a header announces, or `None` if `bytes` is shorter than a header.
pub(crate) fn announced_len(bytes: &[u8]) -> Option<usize> {
    let h = bytes.get(..HEADER)?;
    let key_len = h[4] as usize;
    let value_len = u32::from_le_bytes([h[5], h[6], h[7], h[8]]) as usize;
    Some(len(key_len, value_len))
}

/// Key and value of a whole record, if its lengths add up to `rec.len()` and its checksum
/// (seeded with `version`) holds.
pub(crate) fn parse(rec: &[u8], version: u32) -> Option<(&[u8], &[u8])> {
    if announced_len(rec)? != rec.len() {
        return None;
    }
    let stored = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]);
    if crc(version, &rec[4..]) != stored {
        return None;
    }
    let key_end = HEADER + rec[4] as usize;
    Some((&rec[HEADER..key_end], &rec[key_end..]))
}

/// The value of `rec` if it is a sound record of `version` holding `key`; the buffer is
/// reused for the value (no second allocation on the read path).
pub(crate) fn into_value(mut rec: Vec<u8>, version: u32, key: &[u8]) -> Option<Vec<u8>> {
    let (k, _) = parse(&rec, version)?;
    if k != key {
        return None;
    }
    rec.drain(..HEADER + key.len());
    Some(rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_every_flipped_byte_fails() {
        let mut buf = Vec::new();
        encode(&mut buf, 7, b"key", b"value");
        assert_eq!(buf.len(), len(3, 5));
        assert_eq!(announced_len(&buf), Some(buf.len()));
        assert_eq!(parse(&buf, 7), Some((&b"key"[..], &b"value"[..])));
        assert_eq!(
            parse(&buf, 8),
            None,
            "another version's record must not pass"
        );
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x40;
            assert_eq!(parse(&bad, 7), None, "byte {i} flipped");
        }
        assert_eq!(into_value(buf.clone(), 7, b"kez"), None);
        assert_eq!(
            into_value(buf.clone(), 7, b"key").as_deref(),
            Some(&b"value"[..])
        );
        assert_eq!(parse(&buf[..buf.len() - 1], 7), None);
        assert_eq!(announced_len(&buf[..HEADER - 1]), None);
    }
}
