//! Keys, as the text protocol allows them.

use crate::Error;

/// memcached's `KEY_MAX_LENGTH`.
pub const MAX_KEY_LEN: usize = 250;

/// Checks a key against memcached's text-protocol rules: 1 to 250 bytes, none of them
/// whitespace or control characters.
///
/// Every backend applies this one check, so that a key the embedded store accepts is a key
/// that a server behind a text-protocol client accepts too.
pub fn validate_key(key: &[u8]) -> Result<(), Error> {
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(Error::InvalidKey);
    }
    if key.iter().any(|&b| b <= b' ' || b == 0x7f) {
        return Err(Error::InvalidKey);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries() {
        assert!(validate_key(b"a").is_ok());
        assert!(validate_key(&[b'k'; 250]).is_ok());
        assert_eq!(validate_key(&[b'k'; 251]), Err(Error::InvalidKey));
        assert_eq!(validate_key(b""), Err(Error::InvalidKey));
        assert_eq!(validate_key(b"a b"), Err(Error::InvalidKey));
        assert_eq!(validate_key(b"a\r\n"), Err(Error::InvalidKey));
        assert_eq!(validate_key(b"a\x7f"), Err(Error::InvalidKey));
        assert!(
            validate_key("ключ".as_bytes()).is_ok(),
            "UTF-8 is fine: bytes > 0x7f"
        );
    }
}
