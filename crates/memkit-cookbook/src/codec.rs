//! Value encodings and key naming shared by the structures.
//!
//! - Counters are memcached decimal numbers (what `incr` understands). memcached pads a
//!   number that shrinks in place with spaces (`decr 10 -> "9 "`), so [`parse_u64`] trims.
//! - Typed values (events, array elements, queue items, hash values) are JSON
//!   (`serde_json`): self-describing, debuggable with `get` from a terminal, and never
//!   containing a raw newline, so records can be framed one per line and appended with the
//!   atomic `append` ([`encode_line`], [`decode_lines`]).
//! - Keys are `"<prefix>:<name>..."`; an element or user id that goes into a key is used
//!   verbatim when it is key-safe and short, and replaced by a 128-bit hash otherwise
//!   ([`key_part`]); structures that do so store the full element in the value and compare it
//!   on read, so a hash collision can never make a wrong answer.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Error, Result};

/// Parses a memcached counter value: ASCII digits, possibly padded with trailing spaces.
pub fn parse_u64(bytes: &[u8]) -> Result<u64> {
    let s = std::str::from_utf8(bytes).map_err(|e| Error::Codec(e.to_string()))?;
    s.trim_end_matches([' ', '\0'])
        .trim()
        .parse()
        .map_err(|_| Error::Codec(format!("not a counter: {s:?}")))
}

/// Encodes `value` as one JSON record followed by `\n`.
pub fn encode_line<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
    let mut out = serde_json::to_vec(value)?;
    out.push(b'\n');
    Ok(out)
}

/// Decodes newline-framed JSON records. Empty lines are skipped.
pub fn decode_lines<T: DeserializeOwned>(bytes: &[u8]) -> Result<Vec<T>> {
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).map_err(Error::from))
        .collect()
}

/// Encodes one value as JSON (no framing).
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
    Ok(serde_json::to_vec(value)?)
}

/// Decodes one JSON value.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    Ok(serde_json::from_slice(bytes)?)
}

/// 64-bit FNV-1a with a chosen offset basis: stable across processes and platforms (unlike
/// `std`'s randomly seeded hasher), which is what sharding by hash needs.
pub fn fnv1a(bytes: &[u8], basis: u64) -> u64 {
    let mut h = basis;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// FNV-1a's standard offset basis.
pub const FNV_BASIS: u64 = 0xcbf2_9ce4_8422_2325;

/// The longest element text [`key_part`] keeps verbatim.
pub const MAX_VERBATIM: usize = 100;

/// How `part` appears inside a key: verbatim when it is 1..=100 bytes of printable
/// non-space ASCII other than `~`, else `~` followed by a 128-bit hash in hex.
pub fn key_part(part: &[u8]) -> String {
    let safe = !part.is_empty()
        && part.len() <= MAX_VERBATIM
        && part.iter().all(|&b| b > b' ' && b < 0x7f && b != b'~');
    if safe {
        // Checked: printable ASCII.
        String::from_utf8_lossy(part).into_owned()
    } else {
        format!(
            "~{:016x}{:016x}",
            fnv1a(part, FNV_BASIS),
            fnv1a(part, 0x6c62_272e_07bb_0142)
        )
    }
}

/// `"<prefix>:<name>"`.
pub fn key(prefix: &str, name: &str) -> Vec<u8> {
    format!("{prefix}:{name}").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_parse_with_padding() {
        assert_eq!(parse_u64(b"9 ").unwrap(), 9);
        assert_eq!(parse_u64(b"18446744073709551615").unwrap(), u64::MAX);
        assert!(parse_u64(b"x").is_err());
    }

    #[test]
    fn lines_round_trip() {
        let mut buf = encode_line(&"a\nb").unwrap();
        buf.extend(encode_line(&"c").unwrap());
        assert_eq!(decode_lines::<String>(&buf).unwrap(), vec!["a\nb", "c"]);
    }

    #[test]
    fn key_parts() {
        assert_eq!(key_part(b"alice"), "alice");
        let hashed = key_part(b"a b");
        assert!(hashed.starts_with('~') && hashed.len() == 33);
        assert_ne!(key_part(b"a b"), key_part(b"a c"));
        assert!(key_part(&[b'x'; 200]).starts_with('~'));
    }
}
