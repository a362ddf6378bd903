//! Each [`memkit_types::Memcache`] call as binary-protocol frames ([`crate::Protocol::Binary`]),
//! and its replies as outcomes. The frames come from the protocol crate's client side
//! ([`binary::encode_command`] for the logical commands, [`binary::encode`] for the rest),
//! the inverse of the decoder memkitd serves with, so the two ends cannot drift apart.
//!
//! | call | frames |
//! |---|---|
//! | `get_multi` | one `GET` (or `GAT` with a touch) per key, pipelined, each answered: a hit carries flags (extras), CAS (header) and value; a miss is `KEY_ENOENT` |
//! | `store` | `SET`/`ADD`/`REPLACE`/`APPEND`/`PREPEND`, a CAS in the header (`cas`: `SET` with it); the reply's header carries the new CAS |
//! | `delete_with` | `DELETE`, a CAS in the header |
//! | `arithmetic` | `INCREMENT`/`DECREMENT` (initial value and expiry when vivifying, else the no-create expiry `0xffffffff`); the value comes back as 8 bytes, the CAS in the header |
//! | `touch` | `TOUCH` |
//! | `flush_all` | `FLUSH` with the delay as extras |
//! | `stats`, `version` | `STAT` (one frame per stat, an empty one last), `VERSION` |
//!
//! What binary cannot say fails with [`Error::Protocol`] before anything is sent, as in
//! [`crate::Dialect::Classic`]: reads with vivify/recache/metadata/no-bump/explicit CAS
//! (there is no TTL or last-access in a binary reply), stores with invalidate/vivify/
//! explicit CAS or a CAS with add/replace, deletes with anything but a CAS, arithmetic that
//! sets a TTL or an explicit CAS, and a negative expiry (binary expiries are unsigned). A
//! read never takes a win token (memcached hands them to meta reads only). Append and
//! prepend keep the item's flags and expiry, so theirs are not sent.
//!
//! Binary outcomes map to the text protocol's: a refused `ADD` (`KEY_EEXISTS`) and a refused
//! `REPLACE` (`KEY_ENOENT`) are [`StoreOutcome::NotStored`], as `NOT_STORED` is in text;
//! with a CAS, `KEY_EEXISTS` is [`StoreOutcome::Exists`] and `KEY_ENOENT`
//! [`StoreOutcome::NotFound`]; `DELTA_BADVAL` is [`ArithOutcome::NonNumeric`]. Error
//! statuses map to [`Error`] in [`BinaryReply::into_error`].

use memkit_protocol::binary::{self, Command, Request, Status, op};
use memkit_protocol::command::Command as Logical;
use memkit_types::{
    ArithOptions, ArithOutcome, DeleteOptions, DeleteOutcome, Error, Exptime, GetOptions, Item,
    Result, StoreMode, StoreOptions, StoreOutcome, Stored,
};

use crate::conn::{Expect, Job};
use crate::reply::{BinaryReply, Reply};

fn cannot(what: &str) -> Error {
    Error::Protocol(format!("{what} cannot be said in the binary protocol"))
}

/// The binary replies of `replies`, which must be exactly `n` (else the error they hold).
fn frames(replies: Vec<Reply>, n: usize) -> Result<Vec<BinaryReply>> {
    if replies.len() != n {
        return Err(unexpected(replies));
    }
    replies
        .into_iter()
        .map(|r| match r {
            Reply::Binary(b) => Ok(b),
            other => Err(other.into_error()),
        })
        .collect()
}

fn unexpected(replies: Vec<Reply>) -> Error {
    match replies.into_iter().find(Reply::is_error) {
        Some(e) => e.into_error(),
        None => Error::Protocol("unexpected reply".into()),
    }
}

/// The one frame answering `opcode`.
fn single(replies: Vec<Reply>, opcode: u8) -> Result<BinaryReply> {
    let b = frames(replies, 1)?.pop().expect("one");
    if b.opcode() != opcode {
        return Err(Error::Protocol(format!(
            "reply to opcode 0x{:02x} for a request 0x{opcode:02x}",
            b.opcode()
        )));
    }
    Ok(b)
}

fn job(bytes: Vec<u8>, expect: Expect, count: usize) -> Job {
    Job {
        bytes,
        expect,
        count,
    }
}

/// A frame for a logical command, or the error saying binary cannot carry it.
fn encode(cmd: &Logical<'_>, opaque: u32, out: &mut Vec<u8>, what: &str) -> Result<()> {
    binary::encode_command(cmd, opaque, out).ok_or_else(|| cannot(what))
}

// ---- reads ----

/// `GET` (or `GAT`) per key, pipelined; the opaque is the key's index.
pub fn get(keys: &[&[u8]], o: &GetOptions) -> Result<Job> {
    if o.vivify.is_some() || o.recache_below.is_some() || o.new_cas.is_some() {
        return Err(cannot("vivify/recache/explicit CAS"));
    }
    if o.meta || o.no_bump {
        return Err(cannot(
            "item metadata (TTL, last access, fetched) or no-bump",
        ));
    }
    let opts = GetOptions {
        touch: o.touch,
        classic: true,
        ..GetOptions::default()
    };
    let mut bytes = Vec::with_capacity(keys.len() * (binary::HEADER_LEN + 4 + 32));
    for (i, &key) in keys.iter().enumerate() {
        let cmd = Logical::Get {
            key,
            opts: opts.clone(),
        };
        encode(&cmd, i as u32, &mut bytes, "this expiry")?;
    }
    Ok(job(bytes, Expect::One, keys.len()))
}

/// Items for `keys` (aligned) from the replies to [`get`].
pub fn get_replies(keys: &[&[u8]], replies: Vec<Reply>) -> Result<Vec<Option<Item>>> {
    let frames = frames(replies, keys.len())?;
    frames
        .into_iter()
        .enumerate()
        .map(|(i, b)| {
            if b.opaque() != i as u32 {
                return Err(Error::Protocol("binary reply out of order".into()));
            }
            match b.status() {
                Some(Status::Ok) => {
                    let extras = b.extras();
                    let flags = match extras.len() {
                        4 => u32::from_be_bytes([extras[0], extras[1], extras[2], extras[3]]),
                        _ => return Err(Error::Protocol("get reply without flags".into())),
                    };
                    Ok(Some(Item {
                        value: b.value(),
                        flags,
                        cas: b.cas(),
                        ..Item::default()
                    }))
                }
                Some(Status::KeyNotFound) => Ok(None),
                _ => Err(b.into_error()),
            }
        })
        .collect()
}

// ---- stores ----

/// The frame for a store.
pub fn store(key: &[u8], value: &[u8], o: &StoreOptions) -> Result<Job> {
    let mut opts = o.clone();
    // Append and prepend keep the item's flags and expiry: binary has no field for them.
    if matches!(o.mode, StoreMode::Append | StoreMode::Prepend) {
        opts.flags = 0;
        opts.exptime = Exptime(0);
    }
    let mut bytes = Vec::with_capacity(binary::HEADER_LEN + 8 + key.len() + value.len());
    let cmd = Logical::Store {
        key,
        data: value,
        opts,
    };
    encode(
        &cmd,
        0,
        &mut bytes,
        "invalidate/vivify/explicit CAS, a CAS with add/replace, or a negative expiry",
    )?;
    Ok(job(bytes, Expect::One, 1))
}

fn store_opcode(mode: StoreMode) -> u8 {
    match mode {
        StoreMode::Set => op::SET,
        StoreMode::Add => op::ADD,
        StoreMode::Replace => op::REPLACE,
        StoreMode::Append => op::APPEND,
        StoreMode::Prepend => op::PREPEND,
    }
}

/// The outcome of a store made with options `o`.
pub fn store_reply(o: &StoreOptions, replies: Vec<Reply>) -> Result<Stored> {
    let b = single(replies, store_opcode(o.mode))?;
    let outcome = match (b.status(), o.cas.is_some()) {
        (Some(Status::Ok), _) => {
            return Ok(Stored {
                outcome: StoreOutcome::Stored,
                cas: b.cas(),
            });
        }
        (Some(Status::KeyExists), true) => StoreOutcome::Exists,
        (Some(Status::KeyNotFound), true) => StoreOutcome::NotFound,
        // memcached answers a refused ADD "exists", a refused REPLACE "not found".
        (Some(Status::KeyExists | Status::KeyNotFound | Status::NotStored), false) => {
            StoreOutcome::NotStored
        }
        (Some(Status::NotStored), true) => StoreOutcome::NotStored,
        _ => return Err(b.into_error()),
    };
    Ok(Stored { outcome, cas: 0 })
}

// ---- delete ----

/// The frame for a delete.
pub fn delete(key: &[u8], o: &DeleteOptions) -> Result<Job> {
    let mut bytes = Vec::with_capacity(binary::HEADER_LEN + key.len());
    let cmd = Logical::Delete {
        key,
        opts: o.clone(),
    };
    encode(&cmd, 0, &mut bytes, "a delete with options other than CAS")?;
    Ok(job(bytes, Expect::One, 1))
}

/// The outcome of a delete.
pub fn delete_reply(replies: Vec<Reply>) -> Result<DeleteOutcome> {
    let b = single(replies, op::DELETE)?;
    match b.status() {
        Some(Status::Ok) => Ok(DeleteOutcome::Deleted),
        Some(Status::KeyNotFound) => Ok(DeleteOutcome::NotFound),
        Some(Status::KeyExists) => Ok(DeleteOutcome::Exists),
        _ => Err(b.into_error()),
    }
}

// ---- arithmetic ----

/// The frame for incr/decr.
pub fn arith(key: &[u8], o: &ArithOptions) -> Result<Job> {
    let mut bytes = Vec::with_capacity(binary::HEADER_LEN + 20 + key.len());
    let cmd = Logical::Arith {
        key,
        opts: o.clone(),
    };
    encode(
        &cmd,
        0,
        &mut bytes,
        "arithmetic that sets a TTL or an explicit CAS, or vivifies with a negative expiry",
    )?;
    Ok(job(bytes, Expect::One, 1))
}

/// The outcome of incr/decr made with options `o`.
pub fn arith_reply(o: &ArithOptions, replies: Vec<Reply>) -> Result<ArithOutcome> {
    let opcode = match o.mode {
        memkit_types::ArithMode::Incr => op::INCREMENT,
        memkit_types::ArithMode::Decr => op::DECREMENT,
    };
    let b = single(replies, opcode)?;
    match b.status() {
        Some(Status::Ok) => {
            let v = b.value();
            let value: [u8; 8] = v[..]
                .try_into()
                .map_err(|_| Error::Protocol("arithmetic reply is not 8 bytes".into()))?;
            Ok(ArithOutcome::Value {
                value: u64::from_be_bytes(value),
                cas: b.cas(),
                ttl: None,
            })
        }
        Some(Status::KeyNotFound) => Ok(ArithOutcome::NotFound),
        Some(Status::DeltaBadval) => Ok(ArithOutcome::NonNumeric),
        Some(Status::KeyExists) => Ok(ArithOutcome::Exists),
        Some(Status::NotStored) => Ok(ArithOutcome::NotStored),
        _ => Err(b.into_error()),
    }
}

// ---- touch, flush, stats, version: the frames without a logical store command ----

/// One frame of `cmd` under `opcode`, with no opaque, CAS or quiet bit.
pub(crate) fn request(opcode: u8, cmd: Command<'_>) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(binary::HEADER_LEN + 16);
    let req = Request {
        opcode,
        opaque: 0,
        cas: 0,
        quiet: false,
        cmd,
    };
    binary::encode(&req, &mut bytes);
    bytes
}

/// `TOUCH`.
pub fn touch(key: &[u8], exptime: Exptime) -> Result<Job> {
    let t = u32::try_from(exptime.0).map_err(|_| cannot("a negative expiry"))?;
    let cmd = Command::Get {
        key,
        with_key: false,
        touch: Some(t),
        value: false,
    };
    Ok(job(request(op::TOUCH, cmd), Expect::One, 1))
}

/// Whether the key was touched.
pub fn touch_reply(replies: Vec<Reply>) -> Result<bool> {
    let b = single(replies, op::TOUCH)?;
    match b.status() {
        Some(Status::Ok) => Ok(true),
        Some(Status::KeyNotFound) => Ok(false),
        _ => Err(b.into_error()),
    }
}

/// `FLUSH` (with the delay, if any).
pub fn flush_all(delay: u32) -> Job {
    let mut bytes = Vec::with_capacity(binary::HEADER_LEN + 4);
    // Every flush can be said: the unwrap-free form of `encode_command`'s `Some`.
    let _ = binary::encode_command(&Logical::Flush { delay }, 0, &mut bytes);
    job(bytes, Expect::One, 1)
}

/// `FLUSH`'s success.
pub fn flush_reply(replies: Vec<Reply>) -> Result<()> {
    let b = single(replies, op::FLUSH)?;
    if b.is_ok() {
        Ok(())
    } else {
        Err(b.into_error())
    }
}

/// `STAT <group>`: the group goes in the key (`""`, `items`, `slabs`, `settings`...).
pub fn stats(args: &str) -> Job {
    let cmd = Command::Stat {
        group: args.as_bytes(),
    };
    job(request(op::STAT, cmd), Expect::UntilEnd, 1)
}

/// The name/value pairs of `STAT`'s frames.
pub fn stats_reply(replies: Vec<Reply>) -> Result<Vec<(String, String)>> {
    let mut out = Vec::with_capacity(replies.len());
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    for r in replies {
        match r {
            Reply::Binary(b) if b.is_ok() && b.opcode() == op::STAT => {
                let key = b.key();
                if !key.is_empty() {
                    out.push((text(&key), text(&b.value())));
                }
            }
            other => return Err(other.into_error()),
        }
    }
    Ok(out)
}

/// `VERSION`.
pub fn version() -> Job {
    job(request(op::VERSION, Command::Version), Expect::One, 1)
}

/// The version string.
pub fn version_reply(replies: Vec<Reply>) -> Result<String> {
    let b = single(replies, op::VERSION)?;
    if b.is_ok() {
        Ok(String::from_utf8_lossy(&b.value()).into_owned())
    } else {
        Err(b.into_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memkit_protocol::binary::{Header, RESPONSE_MAGIC};

    fn frame(opcode: u8, status: Status, opaque: u32, cas: u64, ext: &[u8], val: &[u8]) -> Reply {
        let h = Header {
            magic: RESPONSE_MAGIC,
            opcode,
            key_len: 0,
            extras_len: ext.len() as u8,
            data_type: 0,
            status: status as u16,
            body_len: (ext.len() + val.len()) as u32,
            opaque,
            cas,
        };
        let mut b = Vec::new();
        h.write(&mut b);
        b.extend_from_slice(ext);
        b.extend_from_slice(val);
        Reply::Binary(BinaryReply::decode(&b).unwrap().unwrap().0)
    }

    #[test]
    fn frames_come_from_the_protocol_crates_encoder() {
        let j = get(&[b"a", b"bc"], &GetOptions::touch(Exptime(9))).unwrap();
        assert_eq!((j.count, j.expect), (2, Expect::One));
        let (r, used) = binary::decode_request(
            &j.bytes,
            &memkit_protocol::Limits::default(),
            binary::Auth::default(),
        )
        .unwrap();
        assert_eq!((r.opcode, r.opaque), (op::GAT, 0));
        let (r2, _) = binary::decode_request(
            &j.bytes[used..],
            &memkit_protocol::Limits::default(),
            binary::Auth::default(),
        )
        .unwrap();
        assert_eq!(r2.opaque, 1);
        assert!(matches!(
            r2.cmd,
            Command::Get {
                key: b"bc",
                touch: Some(9),
                ..
            }
        ));
        let meta = GetOptions {
            meta: true,
            ..GetOptions::default()
        };
        assert!(matches!(get(&[b"a"], &meta), Err(Error::Protocol(_))));
        let add_cas = StoreOptions {
            cas: Some(3),
            ..StoreOptions::new(StoreMode::Add, 0, Exptime(0))
        };
        assert!(matches!(
            store(b"k", b"v", &add_cas),
            Err(Error::Protocol(_))
        ));
        let negative = StoreOptions::new(StoreMode::Set, 0, Exptime(-1));
        assert!(matches!(
            store(b"k", b"v", &negative),
            Err(Error::Protocol(_))
        ));
        assert!(matches!(touch(b"k", Exptime(-1)), Err(Error::Protocol(_))));
        // Append's flags and expiry are the item's: not refused, not sent.
        let app = StoreOptions::new(StoreMode::Append, 7, Exptime(60));
        assert!(store(b"k", b"v", &app).is_ok());
    }

    #[test]
    fn replies_to_outcomes() {
        let hit = frame(op::GET, Status::Ok, 0, 77, &5u32.to_be_bytes(), b"xy");
        let miss = frame(op::GET, Status::KeyNotFound, 1, 0, &[], b"Not found");
        let items = get_replies(&[b"a", b"b"], vec![hit, miss]).unwrap();
        let a = items[0].clone().unwrap();
        assert_eq!((&a.value[..], a.flags, a.cas), (&b"xy"[..], 5, 77));
        assert_eq!(items[1], None);
        let add = StoreOptions::new(StoreMode::Add, 0, Exptime(0));
        let r = frame(
            op::ADD,
            Status::KeyExists,
            0,
            0,
            &[],
            b"Data exists for key.",
        );
        assert_eq!(
            store_reply(&add, vec![r]).unwrap().outcome,
            StoreOutcome::NotStored
        );
        let cas = StoreOptions {
            cas: Some(1),
            ..StoreOptions::new(StoreMode::Set, 0, Exptime(0))
        };
        let r = frame(
            op::SET,
            Status::KeyExists,
            0,
            0,
            &[],
            b"Data exists for key.",
        );
        assert_eq!(
            store_reply(&cas, vec![r]).unwrap().outcome,
            StoreOutcome::Exists
        );
        let r = frame(op::SET, Status::Ok, 0, 42, &[], b"");
        assert_eq!(store_reply(&cas, vec![r]).unwrap().cas, 42);
        let r = frame(op::SET, Status::TooLarge, 0, 0, &[], b"Too large.");
        assert_eq!(store_reply(&cas, vec![r]), Err(Error::TooLarge));
        let incr = ArithOptions::incr(1);
        let r = frame(op::INCREMENT, Status::Ok, 0, 9, &[], &12u64.to_be_bytes());
        assert_eq!(
            arith_reply(&incr, vec![r]).unwrap(),
            ArithOutcome::Value {
                value: 12,
                cas: 9,
                ttl: None
            }
        );
        let r = frame(
            op::INCREMENT,
            Status::DeltaBadval,
            0,
            0,
            &[],
            b"Non-numeric",
        );
        assert_eq!(
            arith_reply(&incr, vec![r]).unwrap(),
            ArithOutcome::NonNumeric
        );
        let r = frame(op::GET, Status::AuthError, 0, 0, &[], b"Auth failure.");
        assert!(
            matches!(get_replies(&[b"a"], vec![r]), Err(Error::Client(m)) if m.contains("SASL"))
        );
        // A reply to another opcode is a protocol error, not an outcome.
        let r = frame(op::GET, Status::Ok, 0, 0, &[], b"");
        assert!(matches!(delete_reply(vec![r]), Err(Error::Protocol(_))));
    }
}
