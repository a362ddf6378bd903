//! The decoder's order of checks and the writers, on hand-built frames.

use super::*;

fn frame(opcode: u8, cas: u64, extras: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    encode_request(&mut v, opcode, 0xdead_beef, cas, extras, key, value);
    v
}

fn dec(b: &[u8]) -> Result<(Request<'_>, usize), DecodeError<'_>> {
    decode_request(b, &Limits::default(), Auth::default())
}

#[test]
fn a_set_decodes_whole_and_waits_for_its_value() {
    let mut ext = 7u32.to_be_bytes().to_vec();
    ext.extend_from_slice(&60u32.to_be_bytes());
    let f = frame(op::SETQ, 9, &ext, b"k", b"hello");
    for cut in 0..f.len() {
        assert_eq!(dec(&f[..cut]), Err(DecodeError::Incomplete), "cut {cut}");
    }
    let (r, used) = dec(&f).unwrap();
    assert_eq!(used, f.len());
    assert!(r.quiet);
    assert_eq!((r.opcode, r.opaque, r.cas), (op::SETQ, 0xdead_beef, 9));
    assert_eq!(
        r.cmd,
        Command::Store {
            kind: StoreKind::Set,
            key: b"k",
            flags: 7,
            exptime: 60,
            data: b"hello"
        }
    );
}

#[test]
fn checks_run_in_memcacheds_order() {
    // Bad magic closes without a reply.
    let mut f = frame(op::GET, 0, &[], b"k", &[]);
    f[0] = 0x81;
    assert_eq!(dec(&f), Err(DecodeError::Close));
    // Lengths that do not add up: UNKNOWN_COMMAND and close, before SASL is checked.
    let mut f = frame(op::GET, 0, &[], b"key", &[]);
    f[11] = 1;
    let auth = Auth {
        sasl: true,
        authenticated: false,
    };
    match decode_request(&f, &Limits::default(), auth) {
        Err(DecodeError::Reject(r)) => {
            assert_eq!((r.status, r.close), (Status::UnknownCommand, true))
        }
        other => panic!("{other:?}"),
    }
    // Unauthenticated: AUTH_ERROR and close, except VERSION.
    let f = frame(op::GET, 0, &[], b"k", &[]);
    match decode_request(&f, &Limits::default(), auth) {
        Err(DecodeError::Reject(r)) => {
            assert_eq!((r.status, r.close), (Status::AuthError, true))
        }
        other => panic!("{other:?}"),
    }
    let f = frame(op::VERSION, 0, &[], b"", &[]);
    assert!(decode_request(&f, &Limits::default(), auth).is_ok());
    // A key over 250 bytes: EINVAL and close.
    let long = vec![b'a'; 251];
    let f = frame(op::GET, 0, &[], &long, &[]);
    match dec(&f) {
        Err(DecodeError::Reject(r)) => assert_eq!((r.status, r.close), (Status::Invalid, true)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unknown_opcodes_swallow_the_body_length_after_the_key() {
    let f = frame(0x55, 0, &[1, 2], b"kk", b"vvvv");
    match dec(&f) {
        Err(DecodeError::Reject(r)) => {
            assert_eq!(r.status, Status::UnknownCommand);
            assert_eq!((r.consumed, r.swallow, r.close), (28, 8, false));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_value_over_the_limit_is_refused_from_its_header() {
    let limits = Limits {
        max_item_size: 1024,
        ..Limits::default()
    };
    let mut f = frame(op::SET, 0, &[0; 8], b"k", &[]);
    f[8..12].copy_from_slice(&(9u32 + 5000).to_be_bytes());
    match decode_request(&f, &limits, Auth::default()) {
        Err(DecodeError::Reject(r)) => {
            assert_eq!(r.status, Status::TooLarge);
            assert_eq!((r.consumed, r.swallow), (33, 5000));
            assert_eq!(r.unlink, Some(&b"k"[..]));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn commands_without_a_value_leave_surplus_body_bytes_unread() {
    // memcached reads TOUCH's header, extras and key only.
    let mut f = frame(op::TOUCH, 0, &5u32.to_be_bytes(), b"k", b"xy");
    let (r, used) = dec(&f).unwrap();
    assert_eq!(used, 29);
    assert!(matches!(r.cmd, Command::Get { value: false, .. }));
    f.truncate(29);
}

#[test]
fn replies_round_trip_through_the_client_decoder() {
    let req = Request {
        opcode: op::GETK,
        opaque: 5,
        cas: 0,
        quiet: false,
        cmd: Command::Noop,
    };
    let mut out = Vec::new();
    write_hit(&mut out, &req, 3, 77, Some(b"key"), Some(b"value"));
    write_error(&mut out, op::ADD, 6, Status::KeyExists);
    let (r, n) = decode_response(&out).unwrap().unwrap();
    assert_eq!(
        (r.header.cas, r.extras, r.key, r.value),
        (77, &3u32.to_be_bytes()[..], &b"key"[..], &b"value"[..])
    );
    let (e, m) = decode_response(&out[n..]).unwrap().unwrap();
    assert_eq!(n + m, out.len());
    assert_eq!(Status::from_u16(e.header.status), Some(Status::KeyExists));
    assert_eq!(e.value, b"Data exists for key.");
}

#[test]
fn sasl_data_over_the_cap_is_refused_from_its_header() {
    let auth = Auth {
        sasl: true,
        authenticated: false,
    };
    let limits = Limits::default();
    // The header, mechanism and one byte of data: the rest is never needed.
    let refused = |vlen: usize| {
        let f = frame(op::SASL_AUTH, 0, &[], b"PLAIN", &vec![0u8; vlen]);
        match decode_request(&f[..HEADER_LEN + 6], &limits, auth) {
            Err(DecodeError::Reject(r)) => (r.status, r.close, r.consumed, r.swallow),
            other => panic!("{vlen} bytes: {other:?}"),
        }
    };
    // Past the cap: AUTH_ERROR, the data swallowed as it arrives, the connection kept.
    let (vlen, head) = (MAX_SASL_DATA + 1, HEADER_LEN + 5);
    assert_eq!(refused(vlen), (Status::AuthError, false, head, vlen as u64));
    // Past an item's size, memcached's ENOMEM comes first.
    let vlen = limits.max_item_size + 1;
    assert_eq!(
        refused(vlen),
        (Status::OutOfMemory, false, head, vlen as u64)
    );
    // At the cap, the data is waited for and decoded.
    let f = frame(op::SASL_STEP, 0, &[], b"PLAIN", &vec![b'x'; MAX_SASL_DATA]);
    assert_eq!(
        decode_request(&f[..f.len() - 1], &limits, auth),
        Err(DecodeError::Incomplete)
    );
    match decode_request(&f, &limits, auth) {
        Ok((r, used)) => {
            assert_eq!(used, f.len());
            assert!(
                matches!(r.cmd, Command::SaslAuth { step: true, data, .. } if data.len() == MAX_SASL_DATA)
            );
        }
        other => panic!("{other:?}"),
    }
}
