//! Numbers on the wire.
//!
//! memcached parses every numeric token with libc `strtol`/`strtoul`/`strtoull` wrapped in
//! `safe_strto*` (util.c), and several of its quirks are observable, so we reproduce them:
//! leading C whitespace and a `+`/`-` sign are accepted; the token must end at whitespace or
//! its end; a 64-bit result is then *truncated* to 32 bits where memcached stores it in an
//! `int32_t`/`uint32_t` (`set k 0 0 4294967297` stores a 1-byte value on 1.6.18); unsigned
//! parses accept `-0` but reject a negative that wraps.

/// C `isspace` in the "C" locale.
pub(crate) fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Digits of a `strto*`-style parse: `(negative, magnitude, rest)`; `None` when no digit or
/// the magnitude overflows u64 (ERANGE).
fn scan(s: &[u8]) -> Option<(bool, u64, &[u8])> {
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut v: u64 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        v = v.checked_mul(10)?.checked_add(u64::from(s[i] - b'0'))?;
        i += 1;
    }
    if i == start {
        return None;
    }
    let rest = &s[i..];
    // safe_strto*: the number must be followed by whitespace or the end of the token.
    if let Some(&b) = rest.first()
        && !is_c_space(b)
    {
        return None;
    }
    Some((neg, v, rest))
}

/// `safe_strtoull`: unsigned 64-bit; a '-' is tolerated only when the wrapped value still
/// looks non-negative as an i64 (as libc does).
pub(crate) fn parse_u64(s: &[u8]) -> Option<u64> {
    let (neg, mag, _) = scan(s)?;
    let v = if neg { mag.wrapping_neg() } else { mag };
    if (v as i64) < 0 && s.contains(&b'-') {
        return None;
    }
    Some(v)
}

/// `safe_strtoul` into a `uint32_t`: the unsigned long result, truncated.
pub(crate) fn parse_u32(s: &[u8]) -> Option<u32> {
    parse_u64(s).map(|v| v as u32)
}

/// `safe_strtol` into an `int32_t`: a signed 64-bit parse (ERANGE outside i64), truncated.
pub(crate) fn parse_i32(s: &[u8]) -> Option<i32> {
    let (neg, mag, _) = scan(s)?;
    let v: i64 = if neg {
        if mag > (i64::MAX as u64) + 1 {
            return None;
        }
        (mag as i64).wrapping_neg()
    } else {
        i64::try_from(mag).ok()?
    };
    Some(v as i32)
}

/// Appends the decimal form of `v`. A reply line has two or three numbers: itoa writes two
/// digits a step, about a third of the 50-80 instructions a loop of divisions by ten takes.
#[inline]
pub fn write_u64(out: &mut Vec<u8>, v: u64) {
    if v < 10 {
        out.push(b'0' + v as u8);
    } else {
        out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    }
}

/// Appends the decimal form of a signed `v`.
pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    write_u64(out, v.unsigned_abs());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_quirks() {
        assert_eq!(parse_i32(b"4294967297"), Some(1), "truncated like int32_t");
        assert_eq!(parse_i32(b"-1"), Some(-1));
        assert_eq!(parse_i32(b"+7"), Some(7));
        assert_eq!(parse_i32(b"\t7"), Some(7), "strtol skips leading space");
        assert_eq!(parse_i32(b"7\r"), Some(7), "trailing space ends the number");
        assert_eq!(parse_i32(b"7x"), None);
        assert_eq!(parse_i32(b""), None);
        assert_eq!(parse_i32(b"-"), None);
        assert_eq!(parse_i32(b"99999999999999999999"), None, "ERANGE");
        assert_eq!(parse_u32(b"-1"), None);
        assert_eq!(parse_u32(b"-0"), Some(0));
        assert_eq!(parse_u32(b"4294967296"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"-1"), None);
    }

    #[test]
    fn writes() {
        let mut v = Vec::new();
        write_u64(&mut v, 0);
        v.push(b' ');
        write_u64(&mut v, u64::MAX);
        v.push(b' ');
        write_i64(&mut v, i64::MIN);
        assert_eq!(v, b"0 18446744073709551615 -9223372036854775808");
        for n in [9u64, 10, 99, 100, 1_000_000, 4_294_967_295] {
            let mut v = Vec::new();
            write_u64(&mut v, n);
            assert_eq!(v, n.to_string().as_bytes());
        }
    }
}
