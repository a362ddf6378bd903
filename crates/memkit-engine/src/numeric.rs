//! Decimal values for incr/decr, parsed exactly as memcached's `safe_strtoull` parses the
//! item data (which memcached stores followed by "\r\n").

/// Parses `value` as memcached would: optional leading whitespace, an optional sign, decimal
/// digits, then whitespace or the end. A minus sign is refused unless the result is small
/// (strtoull's wrap-around of "-5" is rejected, "-0" is 0). Empty values are non-numeric.
pub(crate) fn parse_u64(value: &[u8]) -> Option<u64> {
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r');
    let mut i = 0;
    while i < value.len() && is_space(value[i]) {
        i += 1;
    }
    let mut negative = false;
    if i < value.len() && (value[i] == b'+' || value[i] == b'-') {
        negative = value[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut n: u64 = 0;
    while i < value.len() && value[i].is_ascii_digit() {
        n = n.checked_mul(10)?.checked_add(u64::from(value[i] - b'0'))?;
        i += 1;
    }
    if i == start {
        return None;
    }
    // The byte after the digits: memcached sees '\r' (from its "\r\n" suffix) at the end,
    // a NUL, or whatever the value holds.
    let ok_end = i == value.len() || is_space(value[i]) || value[i] == 0;
    if !ok_end {
        return None;
    }
    if negative {
        let v = n.wrapping_neg();
        return if (v as i64) < 0 { None } else { Some(v) };
    }
    Some(n)
}

/// Writes the new value as memcached does: decimal digits, padded with spaces to the old
/// length when shorter (memcached rewrites the item in place then).
pub(crate) fn render(value: u64, old_len: usize, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(value.to_string().as_bytes());
    if out.len() < old_len {
        out.resize(old_len, b' ');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_safe_strtoull() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"9 "), Some(9));
        assert_eq!(parse_u64(b"  42"), Some(42));
        assert_eq!(parse_u64(b"+7"), Some(7));
        assert_eq!(parse_u64(b"12 abc"), Some(12));
        assert_eq!(parse_u64(b"-0"), Some(0));
        assert_eq!(parse_u64(b"-5"), None);
        assert_eq!(parse_u64(b"12abc"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b" "), None);
        assert_eq!(parse_u64(b"abc"), None);
    }

    #[test]
    fn renders_with_padding() {
        let mut out = Vec::new();
        render(9, 2, &mut out);
        assert_eq!(out, b"9 ");
        render(100, 2, &mut out);
        assert_eq!(out, b"100");
    }
}
