//! The load generator's binary protocol, on `memkit_protocol::binary`'s client side
//! (`encode_request`, `decode_response`): the codec the server's own tests use, not a
//! second one.
//!
//! A get is a `GET` frame, a set a `SET` frame (flags 0, no expiry, no CAS), both the loud
//! forms, so every request has exactly one reply and a pipeline of `depth` frames gets
//! `depth` replies in order. Each request's opaque is its sequence number on the
//! connection. A reply is checked, not just counted:
//! - its magic, lengths (by the decoder), opcode and opaque must be the request's: anything
//!   else means the reply stream is out of step, and the run fails;
//! - a get's status must be `OK` (with 4 bytes of flags, 0, no key, and the value this
//!   bench stores for that key: its length and first bytes) or `KEY_ENOENT`; a set's must
//!   be `OK` with a CAS. Anything else counts as an error reply.
//!
//! Multi-gets are not offered in binary (the text bench's multi-get cell stays text).

use std::io;

use memkit_protocol::binary::{Status, decode_response, encode_request, op};

use super::{Encoder, Op, Parsed, Pending, Shape, Wire};

/// One connection's binary encoder and reply checker.
pub(super) struct Binary {
    enc: Encoder,
    /// Opaque of the next request.
    sent: u32,
    /// Opaque the next reply must carry.
    due: u32,
}

fn out_of_step(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl Wire for Binary {
    fn new(shape: Shape) -> Self {
        Binary {
            enc: Encoder::new(shape),
            sent: 0,
            due: 0,
        }
    }

    fn encode(&mut self, op: Op, out: &mut Vec<u8>) -> io::Result<Pending> {
        let opaque = self.sent;
        let pending = match op {
            Op::Get(id) => {
                let (key, _) = self.enc.key_value(id);
                encode_request(out, op::GET, opaque, 0, &[], key, &[]);
                Pending::Get(id)
            }
            Op::Set(id) => {
                // Extras: flags, then expiry, both 0.
                let (key, value) = self.enc.key_value(id);
                encode_request(out, op::SET, opaque, 0, &[0; 8], key, value);
                Pending::Set
            }
            Op::Multi(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "the binary load generator sends no multi-gets",
                ));
            }
        };
        self.sent = self.sent.wrapping_add(1);
        Ok(pending)
    }

    fn parse(&mut self, buf: &[u8], p: &Pending) -> io::Result<Option<Parsed>> {
        let (r, used) = match decode_response(buf) {
            Ok(Some(x)) => x,
            Ok(None) => return Ok(None),
            Err(e) => return Err(out_of_step(format!("binary reply: {e}"))),
        };
        let h = r.header;
        let want = match p {
            Pending::Get(_) => op::GET,
            Pending::Set => op::SET,
            Pending::Multi(_) => return Err(out_of_step("binary multi-get pending".into())),
        };
        if h.opcode != want || h.opaque != self.due {
            return Err(out_of_step(format!(
                "binary reply out of step: opcode {:#04x} opaque {} where {want:#04x} opaque {} was due",
                h.opcode, h.opaque, self.due
            )));
        }
        self.due = self.due.wrapping_add(1);
        let status = Status::from_u16(h.status);
        let (ok, hits) = match *p {
            Pending::Get(id) => match status {
                Some(Status::Ok) => {
                    let n = self.enc.value.len().min(8);
                    let valid = r.extras == [0; 4]
                        && r.key.is_empty()
                        && r.value.len() == self.enc.value.len()
                        && r.value[..n] == id.to_le_bytes()[..n];
                    (valid, u32::from(valid))
                }
                Some(Status::KeyNotFound) => (true, 0),
                _ => (false, 0),
            },
            _ => (status == Some(Status::Ok) && h.cas != 0, 0),
        };
        Ok(Some(Parsed { used, hits, ok }))
    }
}

#[cfg(test)]
mod tests {
    use memkit_protocol::Limits;
    use memkit_protocol::binary::{
        Auth, Command, Request, decode_request, write_error, write_hit, write_ok,
    };

    use super::*;
    use crate::workload::KeyGen;

    fn shape() -> Shape {
        Shape {
            keys: KeyGen::new(16, 32),
            value_len: 100,
        }
    }

    /// Encodes `ops` and decodes them with the server's decoder.
    fn sent(b: &mut Binary, ops: Vec<Op>) -> Vec<u8> {
        let mut out = Vec::new();
        for o in ops {
            b.encode(o, &mut out).unwrap();
        }
        out
    }

    fn decode(buf: &[u8]) -> (Request<'_>, usize) {
        decode_request(buf, &Limits::default(), Auth::default()).unwrap()
    }

    #[test]
    fn requests_decode_as_the_server_reads_them() {
        let mut b = Binary::new(shape());
        let buf = sent(&mut b, vec![Op::Get(7), Op::Set(7)]);
        let (get, used) = decode(&buf);
        let mut k = [0; crate::workload::MAX_GEN_KEY];
        let key = shape().keys.write(7, &mut k).to_vec();
        assert_eq!((get.opcode, get.opaque, get.quiet), (op::GET, 0, false));
        assert!(
            matches!(get.cmd, Command::Get { key: k, with_key: false, touch: None, value: true } if k == key)
        );
        let (set, used2) = decode(&buf[used..]);
        assert_eq!(used + used2, buf.len());
        assert_eq!((set.opcode, set.opaque, set.cas), (op::SET, 1, 0));
        match set.cmd {
            Command::Store {
                key: k,
                flags,
                exptime,
                data,
                ..
            } => {
                assert_eq!((k, flags, exptime, data.len()), (&key[..], 0, 0, 100));
                assert_eq!(data[..8], 7u64.to_le_bytes());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            b.encode(Op::Multi(vec![1, 2]), &mut Vec::new())
                .unwrap_err()
                .kind(),
            io::ErrorKind::Unsupported
        );
    }

    /// The reply memkitd's server code writes to each request of `buf`: hit, then stored.
    fn replies(buf: &[u8], value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let (get, used) = decode(buf);
        write_hit(&mut out, &get, 0, 5, None, Some(value));
        let (set, _) = decode(&buf[used..]);
        write_ok(&mut out, set.opcode, set.opaque, 6, b"");
        out
    }

    #[test]
    fn replies_are_checked_in_step() {
        let mut b = Binary::new(shape());
        let buf = sent(&mut b, vec![Op::Get(9), Op::Set(9)]);
        let mut value = b.enc.value.clone();
        value[..8].copy_from_slice(&9u64.to_le_bytes());
        let rep = replies(&buf, &value);
        for cut in 0..24 + 4 + 100 {
            assert!(b.parse(&rep[..cut], &Pending::Get(9)).unwrap().is_none());
        }
        let hit = b.parse(&rep, &Pending::Get(9)).unwrap().unwrap();
        assert_eq!((hit.ok, hit.hits, hit.used), (true, 1, 24 + 4 + 100));
        let set = b.parse(&rep[hit.used..], &Pending::Set).unwrap().unwrap();
        assert!(set.ok && set.used == 24);

        // A hit with another key's value is an error, a miss is not.
        let mut b = Binary::new(shape());
        let buf = sent(&mut b, vec![Op::Get(9), Op::Set(9), Op::Get(3), Op::Set(3)]);
        let rep = replies(&buf, &value);
        let first = b.parse(&rep, &Pending::Get(9)).unwrap().unwrap();
        b.parse(&rep[first.used..], &Pending::Set).unwrap().unwrap();
        let mut miss = Vec::new();
        write_error(&mut miss, op::GET, 2, Status::KeyNotFound);
        write_error(&mut miss, op::SET, 3, Status::OutOfMemory);
        let m = b.parse(&miss, &Pending::Get(3)).unwrap().unwrap();
        assert_eq!((m.ok, m.hits), (true, 0));
        let e = b.parse(&miss[m.used..], &Pending::Set).unwrap().unwrap();
        assert!(!e.ok);
        let mut b = Binary::new(shape());
        let buf = sent(&mut b, vec![Op::Get(3), Op::Set(3)]);
        let bad = b.parse(&replies(&buf, &value), &Pending::Get(3)).unwrap();
        assert_eq!(bad.map(|p| (p.ok, p.hits)), Some((false, 0)));
    }

    #[test]
    fn a_reply_out_of_step_fails_the_run() {
        let mut b = Binary::new(shape());
        let buf = sent(&mut b, vec![Op::Get(1), Op::Set(1)]);
        // The set's reply first: wrong opcode and opaque for the pending get.
        let mut out = Vec::new();
        let (_, used) = decode(&buf);
        let (set, _) = decode(&buf[used..]);
        write_ok(&mut out, set.opcode, set.opaque, 1, b"");
        let e = b.parse(&out, &Pending::Get(1)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        // The right opcode with a skipped opaque.
        let mut b = Binary::new(shape());
        sent(&mut b, vec![Op::Get(1)]);
        let mut out = Vec::new();
        write_error(&mut out, op::GET, 1, Status::KeyNotFound);
        assert!(b.parse(&out, &Pending::Get(1)).is_err());
        // A text reply where a frame was due.
        let mut b = Binary::new(shape());
        sent(&mut b, vec![Op::Get(1)]);
        assert!(
            b.parse(
                b"END\r\nEND\r\nEND\r\nEND\r\nEND\r\nEND\r\n",
                &Pending::Get(1)
            )
            .is_err()
        );
    }
}
