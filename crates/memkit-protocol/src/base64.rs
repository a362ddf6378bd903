//! Base64 exactly as memcached's `base64.c` does it, for meta keys sent with the `b` flag.
//!
//! Decoding is lenient in memcached's particular way (bytes outside the alphabet are skipped,
//! the count of alphabet bytes must be a multiple of four, decoding stops after the first
//! padded block) and we copy that, so a key memcached accepts we accept, byte for byte.
//! Encoding is standard, padded, without line breaks.

const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn value(b: u8) -> Option<u8> {
    match b {
        b'A'..=b'Z' => Some(b - b'A'),
        b'a'..=b'z' => Some(b - b'a' + 26),
        b'0'..=b'9' => Some(b - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        b'=' => Some(0),
        _ => None,
    }
}

/// Decodes `src` into `out` (which must hold `src.len()` bytes, enough for any input); returns
/// the decoded length, or `None` where memcached's `base64_decode` returns 0.
pub fn decode_into(src: &[u8], out: &mut [u8]) -> Option<usize> {
    let count = src.iter().filter(|&&b| value(b).is_some()).count();
    if count == 0 || count % 4 != 0 || count / 4 * 3 > out.len() {
        return None;
    }
    let (mut pos, mut n, mut pad) = (0usize, 0usize, 0usize);
    let mut block = [0u8; 4];
    for &b in src {
        let Some(v) = value(b) else { continue };
        if b == b'=' {
            pad += 1;
        }
        block[n] = v;
        n += 1;
        if n == 4 {
            out[pos] = (block[0] << 2) | (block[1] >> 4);
            out[pos + 1] = (block[1] << 4) | (block[2] >> 2);
            out[pos + 2] = (block[2] << 6) | block[3];
            pos += 3;
            n = 0;
            if pad > 0 {
                match pad {
                    1 => pos -= 1,
                    2 => pos -= 2,
                    _ => return None,
                }
                break;
            }
        }
    }
    // memcached's 0 return doubles as "failed", so an input decoding to nothing fails too.
    (pos > 0).then_some(pos)
}

/// Appends the padded base64 encoding of `src`.
pub fn encode_into(src: &[u8], out: &mut Vec<u8>) {
    for chunk in src.chunks(3) {
        let b0 = chunk[0];
        let b1 = chunk.get(1).copied().unwrap_or(0);
        let b2 = chunk.get(2).copied().unwrap_or(0);
        out.push(TABLE[usize::from(b0 >> 2)]);
        out.push(TABLE[usize::from(((b0 & 0x03) << 4) | (b1 >> 4))]);
        if chunk.len() > 1 {
            out.push(TABLE[usize::from(((b1 & 0x0f) << 2) | (b2 >> 6))]);
        } else {
            out.push(b'=');
        }
        if chunk.len() > 2 {
            out.push(TABLE[usize::from(b2 & 0x3f)]);
        } else {
            out.push(b'=');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &[u8]) -> Option<Vec<u8>> {
        let mut out = vec![0; s.len()];
        decode_into(s, &mut out).map(|n| out[..n].to_vec())
    }

    #[test]
    fn memcached_cases() {
        assert_eq!(dec(b"bmV3"), Some(b"new".to_vec()));
        assert_eq!(dec(b"bm"), None, "not a multiple of four");
        assert_eq!(dec(b"bmU="), Some(b"ne".to_vec()));
        assert_eq!(dec(b"bg=="), Some(b"n".to_vec()));
        assert_eq!(dec(b"b!mV3"), Some(b"new".to_vec()), "junk skipped");
        assert_eq!(dec(b"===="), None, "three pads");
        let mut e = Vec::new();
        encode_into(b"\x00\xffab", &mut e);
        assert_eq!(e, b"AP9hYg==");
    }
}
