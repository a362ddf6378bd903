//! Codec invariants, shared by the cargo-fuzz targets and the stable fuzz tests.

use crate::{DecodeError, Limits, Request, decode_request, encode_request};

/// Decodes `input` as a stream and panics if an invariant breaks:
/// 1. every `Ok` consumes `1..=len` bytes and every `Reject` at least one line;
/// 2. re-encoding a decoded request and decoding that gives the same request back;
/// 3. feeding the bytes in two pieces (split anywhere) yields the same sequence of events.
pub fn fuzz_one(input: &[u8]) {
    let limits = Limits {
        max_item_size: 64 * 1024,
        ..Limits::default()
    };
    let whole = events(input, &limits, None);
    // A handful of split points keeps each run bounded while covering the interesting ones.
    let n = input.len();
    for split in [1, n / 3, n / 2, n.saturating_sub(1)] {
        // memcached's guard against long lines is itself split-dependent: a line longer than
        // `max_line_len` is served when its newline arrives in the same read, and closes the
        // connection when the read stops short of it. Splits inside such a line prove
        // nothing, so they are skipped (the guard has its own tests).
        let line_start = input[..split.min(n)]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        if split.saturating_sub(line_start) > limits.max_line_len {
            continue;
        }
        if split > 0 && split < n {
            assert_eq!(
                whole,
                events(input, &limits, Some(split)),
                "split at {split}"
            );
        }
    }
}

/// Runs the decoder over `input` like a server would, revealing only `input[..split]` until
/// the decoder asks for more. Returns a printable trace of what happened.
fn events(input: &[u8], limits: &Limits, split: Option<usize>) -> Vec<String> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    let mut visible = split.unwrap_or(input.len());
    let mut swallow = 0u64;
    // Each round consumes at least one byte or reveals more, so this terminates.
    loop {
        if swallow > 0 {
            let avail = (visible - pos) as u64;
            let eat = swallow.min(avail);
            pos += eat as usize;
            swallow -= eat;
        }
        let buf = &input[pos..visible];
        let res = if swallow > 0 {
            Err(DecodeError::Incomplete)
        } else {
            decode_request(buf, limits)
        };
        match res {
            Ok((req, used)) => {
                assert!(
                    used >= 1 && used <= buf.len(),
                    "consumed {used} of {}",
                    buf.len()
                );
                roundtrip(&req, limits);
                out.push(format!("{req:?}"));
                pos += used;
            }
            Err(DecodeError::Reject(r)) => {
                assert!(r.consumed >= 1 && r.consumed <= buf.len());
                out.push(format!(
                    "{:?} noreply={} swallow={}",
                    r.reply, r.noreply, r.swallow
                ));
                pos += r.consumed;
                swallow = r.swallow;
            }
            Err(DecodeError::Close) => {
                out.push("close".into());
                return out;
            }
            Err(DecodeError::Malformed) => panic!("Malformed is for responses"),
            Err(DecodeError::Incomplete) => {
                if visible == input.len() {
                    out.push(format!("incomplete swallow={swallow}"));
                    return out;
                }
                visible = input.len();
            }
        }
    }
}

/// `decode(encode(req)) == req`, consuming exactly the encoding.
pub fn roundtrip(req: &Request<'_>, limits: &Limits) {
    let mut enc = Vec::new();
    encode_request(req, &mut enc);
    match decode_request(&enc, limits) {
        Ok((back, used)) => {
            assert_eq!(
                &back,
                req,
                "re-decoding {:?}",
                String::from_utf8_lossy(&enc)
            );
            assert_eq!(used, enc.len());
        }
        Err(e) => panic!(
            "re-decoding {:?} failed: {e:?}",
            String::from_utf8_lossy(&enc)
        ),
    }
}

/// The binary decoder's invariants on `input` decoded as a stream of frames; panics if one
/// breaks:
/// 1. a request uses at least a header and at most the input; a reject consumes at least a
///    header and swallows no more than the frame's body length;
/// 2. a decoded request does not depend on what follows it (decoding exactly its bytes
///    gives it again) and every shorter prefix is `Incomplete`;
/// 3. re-encoding a decoded request and decoding that gives the same request back.
pub fn fuzz_binary(input: &[u8]) {
    use crate::binary::{self, Auth, DecodeError as E, HEADER_LEN};
    let limits = Limits {
        max_item_size: 64 * 1024,
        ..Limits::default()
    };
    let mut rest = input;
    // Each authentication state: SASL off, required and missing, done.
    let auths = [
        Auth::default(),
        Auth {
            sasl: true,
            authenticated: false,
        },
        Auth {
            sasl: true,
            authenticated: true,
        },
    ];
    let auth = auths[input.len() % 3];
    while !rest.is_empty() {
        match binary::decode_request(rest, &limits, auth) {
            Ok((req, used)) => {
                assert!((HEADER_LEN..=rest.len()).contains(&used), "used {used}");
                let again = binary::decode_request(&rest[..used], &limits, auth);
                assert_eq!(again, Ok((req, used)), "depends on what follows");
                for cut in [0, used / 2, used - 1] {
                    assert_eq!(
                        binary::decode_request(&rest[..cut], &limits, auth),
                        Err(E::Incomplete),
                        "prefix of {cut} bytes"
                    );
                }
                let mut enc = Vec::new();
                binary::encode(&req, &mut enc);
                let (back, n) = binary::decode_request(&enc, &limits, auth)
                    .unwrap_or_else(|e| panic!("re-encoded {req:?} does not decode: {e:?}"));
                assert_eq!((back, n), (req, enc.len()), "round trip");
                rest = &rest[used..];
            }
            Err(E::Reject(r)) => {
                let body = binary::Header::parse(rest).map_or(0, |h| u64::from(h.body_len));
                assert!((HEADER_LEN..=rest.len()).contains(&r.consumed));
                assert!(r.swallow <= body, "swallow {} of body {body}", r.swallow);
                if r.close {
                    return;
                }
                let skip = (r.consumed as u64 + r.swallow).min(rest.len() as u64);
                rest = &rest[skip as usize..];
            }
            Err(E::Incomplete | E::Close) => return,
        }
    }
}
