//! The item size rule at its boundary, as the decoder applies it to text, meta and binary
//! stores: at `-I 1m` with a 250-byte key the largest value that fits is decoded, one byte
//! more is refused from the command line or header alone. The engine's side of the same
//! boundary is pinned in memkit-engine's tests/item_size.rs; both call
//! `memkit_types::item_fits`.

use memkit_protocol::binary::{self, Auth, Status};
use memkit_protocol::{DecodeError, ErrorReply, Limits, MAX_KEY_LEN, decode_request};

/// 1 MiB - 56 (header and CAS) - 251 (key and NUL) - 2 (`\r\n`).
const LARGEST_AT_1M_250B_KEY: usize = 1_048_267;

fn key() -> String {
    "k".repeat(MAX_KEY_LEN)
}

fn text(line: &str, value_len: usize) -> Vec<u8> {
    let mut buf = line.as_bytes().to_vec();
    buf.extend(std::iter::repeat_n(b'v', value_len));
    buf.extend_from_slice(b"\r\n");
    buf
}

fn refused_as_too_large(buf: &[u8]) -> bool {
    matches!(
        decode_request(buf, &Limits::default()),
        Err(DecodeError::Reject(r)) if r.reply == ErrorReply::TooLarge
    )
}

#[test]
fn the_limits_default_to_one_megabyte() {
    let limits = Limits::default();
    assert!(limits.item_fits(MAX_KEY_LEN, LARGEST_AT_1M_250B_KEY, 0));
    assert!(!limits.item_fits(MAX_KEY_LEN, LARGEST_AT_1M_250B_KEY + 1, 0));
}

#[test]
fn text_set_at_the_boundary() {
    let (k, n) = (key(), LARGEST_AT_1M_250B_KEY);
    let fits = text(&format!("set {k} 0 0 {n}\r\n"), n);
    let (_, used) = decode_request(&fits, &Limits::default()).unwrap();
    assert_eq!(used, fits.len());
    let over = format!("set {k} 0 0 {}\r\n", n + 1);
    assert!(refused_as_too_large(over.as_bytes()));
    // Nonzero client flags cost four bytes.
    let flagged = format!("set {k} 1 0 {}\r\n", n - 3);
    assert!(refused_as_too_large(flagged.as_bytes()));
    let fits = text(&format!("set {k} 1 0 {}\r\n", n - 4), n - 4);
    assert!(decode_request(&fits, &Limits::default()).is_ok());
}

#[test]
fn meta_set_at_the_boundary() {
    let (k, n) = (key(), LARGEST_AT_1M_250B_KEY);
    let fits = text(&format!("ms {k} {n}\r\n"), n);
    let (_, used) = decode_request(&fits, &Limits::default()).unwrap();
    assert_eq!(used, fits.len());
    let over = format!("ms {k} {}\r\n", n + 1);
    assert!(refused_as_too_large(over.as_bytes()));
}

fn binary_set(key: &[u8], value_len: usize, with_value: bool) -> Vec<u8> {
    let body = 8 + key.len() + value_len;
    let mut f = vec![0x80, binary::op::SET];
    f.extend_from_slice(&(key.len() as u16).to_be_bytes());
    f.extend_from_slice(&[8, 0, 0, 0]);
    f.extend_from_slice(&(body as u32).to_be_bytes());
    f.extend_from_slice(&[0; 12]);
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(key);
    if with_value {
        f.extend(std::iter::repeat_n(b'v', value_len));
    }
    f
}

#[test]
fn binary_set_at_the_boundary() {
    let (k, n) = (key(), LARGEST_AT_1M_250B_KEY);
    let fits = binary_set(k.as_bytes(), n, true);
    let (_, used) = binary::decode_request(&fits, &Limits::default(), Auth::default()).unwrap();
    assert_eq!(used, fits.len());
    let over = binary_set(k.as_bytes(), n + 1, false);
    match binary::decode_request(&over, &Limits::default(), Auth::default()) {
        Err(binary::DecodeError::Reject(r)) => assert_eq!(r.status, Status::TooLarge),
        other => panic!("{other:?}"),
    }
}
