//! Each [`memkit_types::Memcache`] call as wire requests, and its replies as outcomes.
//!
//! Which syntax for which call (dialect [`Dialect::Meta`], the default):
//!
//! | call | wire | why |
//! |---|---|---|
//! | reads (`get_multi`, all options) | `mg <key> v f c [T] [N] [R] [E] [t h l] [u]`, one per key, pipelined | only `mg` reports the win/stale/win-taken marks an [`Item`] carries |
//! | `store` | `ms <key> <len> c T F M<mode> [C] [I] [N] [E]` | only `ms` returns the new CAS ([`Stored::cas`]) |
//! | `delete_with` without options | `delete <key>` | exact |
//! | `delete_with` with CAS / invalidate / tombstone | `md <key> [C] [I] [T] [x] [E]` | |
//! | `arithmetic` | `ma <key> M D [N J] [C] [T] [E] v c t` | only `ma` returns the CAS and TTL |
//! | `touch` | `touch <key> <exptime>` | exact |
//! | `flush_all` | `flush_all [delay]` | exact |
//!
//! Meta flags are written in the order memcached applies them: reads `T`, `N`, `R`, then
//! `t`; arithmetic `N`, `T`, then `t`. The options-to-flags mapping is the protocol crate's
//! (`MetaFlags::for_*`, `StoreCmd::for_options`), beside the server's decoding of the same
//! flags, so the two ends cannot drift apart.
//!
//! [`Dialect::Classic`] speaks only the classic commands (`gets`/`gats`, `set`...`cas`,
//! `incr`/`decr`, `delete`, `touch`), for servers and proxies without the meta protocol
//! (memcached before 1.6, twemproxy). There [`Stored::cas`] and the CAS of an arithmetic
//! result are 0, the win/stale marks are never set, and options that need meta flags
//! (vivify, recache, invalidate, metadata, explicit CAS, arithmetic with CAS/TTL/vivify)
//! fail with [`Error::Protocol`].

use bytes::Bytes;
use memkit_protocol::command::exp32;
use memkit_protocol::response::ReturnFlags;
use memkit_protocol::{MetaCode, MetaFlags, Request, Response, StoreCmd, Words, encode_request};
use memkit_types::{
    ArithMode, ArithOptions, ArithOutcome, DeleteOptions, DeleteOutcome, Error, Exptime,
    GetOptions, Item, Result, StoreOptions, StoreOutcome, Stored, Ttl,
};

use crate::conn::{Expect, Job};
use crate::reply::{Reply, TextReply};

/// Which commands a client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Dialect {
    /// Meta commands where a call needs them (memcached 1.6+, memkitd). Exact.
    #[default]
    Meta,
    /// Classic text commands only; see the module docs for what is lost.
    Classic,
}

fn needs_meta(what: &str) -> Error {
    Error::Protocol(format!(
        "{what} needs the meta protocol (dialect is classic)"
    ))
}

fn unexpected(replies: Vec<Reply>) -> Error {
    match replies.into_iter().find(Reply::is_error) {
        Some(e) => e.into_error(),
        None => Error::Protocol("unexpected reply".into()),
    }
}

/// A text connection's reply (a binary one is not an answer to a text request).
fn text(r: Reply) -> Result<TextReply> {
    match r {
        Reply::Text(t) => Ok(t),
        other => Err(unexpected(vec![other])),
    }
}

fn single(mut replies: Vec<Reply>) -> Result<TextReply> {
    match replies.len() {
        1 => text(replies.pop().expect("one")),
        _ => Err(unexpected(replies)),
    }
}

// ---- reads ----

/// Whether the text protocol can carry `key` as it is: memcached splits a request line on
/// spaces, and a line ends at its newline. (A tab or another control byte is part of the
/// key to memcached; the client's own calls refuse them, [`memkit_types::validate_key`], but a router
/// forwards what a server took.)
pub fn text_safe(key: &[u8]) -> bool {
    // Eight bytes a step (a router checks every key it forwards): a word has a byte equal
    // to `c` when `x ^ c..c` has a zero byte, which `(y - 0x01..) & !y & 0x80..` shows.
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let has = |x: u64, c: u8| {
        let y = x ^ (LO * u64::from(c));
        y.wrapping_sub(LO) & !y & HI != 0
    };
    let mut words = key.chunks_exact(8);
    for w in &mut words {
        let x = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        if has(x, b' ') | has(x, b'\r') | has(x, b'\n') | has(x, 0) {
            return false;
        }
    }
    !words
        .remainder()
        .iter()
        .any(|&b| matches!(b, b' ' | b'\r' | b'\n' | 0))
}

/// How a meta request carries `key`: as it is where the text protocol can, else in base64
/// with the `b` flag (keys the binary protocol, or meta's `b`, gave a server).
fn meta_key<'k>(key: &'k [u8], f: &mut MetaFlags<'_>) -> std::borrow::Cow<'k, [u8]> {
    if text_safe(key) {
        return key.into();
    }
    f.base64 = true;
    f.push(b'b');
    let mut out = Vec::with_capacity(key.len() * 4 / 3 + 4);
    memkit_protocol::base64::encode_into(key, &mut out);
    out.into()
}

/// A key a classic text request cannot carry.
fn unsafe_key(key: &[u8]) -> Result<()> {
    match text_safe(key) {
        true => Ok(()),
        false => Err(Error::InvalidKey),
    }
}

/// Requests for reading `keys`.
pub fn get(dialect: Dialect, keys: &[&[u8]], o: &GetOptions) -> Result<Job> {
    let mut bytes = Vec::with_capacity(keys.len() * 40);
    match dialect {
        Dialect::Meta => {
            let flags = MetaFlags::for_get(o);
            for key in keys {
                let mut f = flags;
                let key = &meta_key(key, &mut f);
                encode_request(&Request::MetaGet { key, flags: f }, &mut bytes);
            }
            Ok(Job {
                bytes,
                expect: Expect::One,
                count: keys.len(),
            })
        }
        Dialect::Classic => {
            if o.vivify.is_some() || o.recache_below.is_some() || o.new_cas.is_some() {
                return Err(needs_meta("vivify/recache/explicit CAS"));
            }
            if o.meta || o.no_bump {
                return Err(needs_meta("item metadata"));
            }
            keys.iter().try_for_each(|k| unsafe_key(k))?;
            memkit_protocol::encode_get(&mut bytes, true, o.touch.map(exp32), keys);
            Ok(Job {
                bytes,
                expect: Expect::UntilEnd,
                count: 1,
            })
        }
    }
}

/// Items for `keys` (aligned) from the replies to [`get`].
pub fn get_replies(
    dialect: Dialect,
    keys: &[&[u8]],
    replies: Vec<Reply>,
) -> Result<Vec<Option<Item>>> {
    match dialect {
        Dialect::Meta => {
            if replies.len() != keys.len() {
                return Err(unexpected(replies));
            }
            replies.into_iter().map(meta_item).collect()
        }
        Dialect::Classic => {
            let mut out = vec![None; keys.len()];
            // memcached answers in the request's order, misses left out: each `VALUE` is
            // looked for from the key after the last one found (a key asked twice gets
            // two), then, should a server answer out of order, from the start.
            let mut next = 0;
            for r in replies {
                let r = text(r)?;
                let Some(key) = r.value_key() else {
                    match r.response() {
                        Response::End => continue,
                        _ => return Err(unexpected(vec![Reply::Text(r)])),
                    }
                };
                let found = (next..keys.len())
                    .chain(0..next)
                    .find(|&i| keys[i] == key && out[i].is_none());
                if let (Some(i), Ok(item)) = (found, r.into_item()) {
                    out[i] = Some(item);
                    next = i + 1;
                }
            }
            Ok(out)
        }
    }
}

fn meta_item(r: Reply) -> Result<Option<Item>> {
    let r = text(r)?;
    match r.response() {
        Response::Meta {
            code: MetaCode::En, ..
        } => Ok(None),
        Response::Meta {
            code: MetaCode::Va,
            flags,
            data,
        } => {
            let f = ReturnFlags::parse(flags);
            Ok(Some(Item {
                value: data.map(|d| r.part(d)).unwrap_or_default(),
                flags: f.flags.unwrap_or(0),
                cas: f.cas.unwrap_or(0),
                ttl: f.ttl.map(|t| {
                    if t < 0 {
                        Ttl::Never
                    } else {
                        Ttl::Secs(t as u32)
                    }
                }),
                fetched: f.hit,
                last_access: f.last_access.map(|l| l.min(u64::from(u32::MAX)) as u32),
                win: f.win,
                stale: f.stale,
                win_taken: f.win_taken,
            }))
        }
        _ => Err(unexpected(vec![Reply::Text(r)])),
    }
}

// ---- stores ----

/// The request for a store.
pub fn store(dialect: Dialect, key: &[u8], value: &[u8], o: &StoreOptions) -> Result<Job> {
    let mut bytes = Vec::with_capacity(key.len() + value.len() + 48);
    match dialect {
        Dialect::Meta => {
            let mut f = MetaFlags::for_store(o);
            let key = &meta_key(key, &mut f);
            let req = Request::MetaSet {
                key,
                flags: f,
                data: value,
            };
            encode_request(&req, &mut bytes);
        }
        Dialect::Classic => {
            let cmd = StoreCmd::for_options(o).ok_or_else(|| {
                needs_meta("invalidate/vivify/explicit CAS, or CAS with append/prepend/add/replace")
            })?;
            unsafe_key(key)?;
            let req = Request::Store {
                cmd,
                key,
                flags: o.flags,
                exptime: exp32(o.exptime),
                data: value,
                noreply: false,
            };
            encode_request(&req, &mut bytes);
        }
    }
    Ok(one(bytes))
}

fn one(bytes: Vec<u8>) -> Job {
    Job {
        bytes,
        expect: Expect::One,
        count: 1,
    }
}

/// The outcome of a store.
pub fn store_reply(replies: Vec<Reply>) -> Result<Stored> {
    let r = single(replies)?;
    let (outcome, cas) = match r.response() {
        Response::Meta { code, flags, .. } => {
            let outcome = match code {
                MetaCode::Hd => StoreOutcome::Stored,
                MetaCode::Ns => StoreOutcome::NotStored,
                MetaCode::Ex => StoreOutcome::Exists,
                MetaCode::Nf => StoreOutcome::NotFound,
                _ => return Err(r.into_error()),
            };
            (outcome, ReturnFlags::parse(flags).cas.unwrap_or(0))
        }
        Response::Stored => (StoreOutcome::Stored, 0),
        Response::NotStored => (StoreOutcome::NotStored, 0),
        Response::Exists => (StoreOutcome::Exists, 0),
        Response::NotFound => (StoreOutcome::NotFound, 0),
        _ => return Err(r.into_error()),
    };
    let cas = if outcome == StoreOutcome::Stored {
        cas
    } else {
        0
    };
    Ok(Stored { outcome, cas })
}

// ---- delete ----

/// The request for a delete.
pub fn delete(dialect: Dialect, key: &[u8], o: &DeleteOptions) -> Result<Job> {
    let mut bytes = Vec::with_capacity(key.len() + 32);
    if *o == DeleteOptions::default() && (text_safe(key) || dialect == Dialect::Classic) {
        unsafe_key(key)?;
        encode_request(
            &Request::Delete {
                key,
                noreply: false,
            },
            &mut bytes,
        );
        return Ok(one(bytes));
    }
    if dialect == Dialect::Classic {
        return Err(needs_meta("delete with options"));
    }
    let mut f = MetaFlags::for_delete(o);
    let key = &meta_key(key, &mut f);
    encode_request(&Request::MetaDelete { key, flags: f }, &mut bytes);
    Ok(one(bytes))
}

/// The outcome of a delete.
pub fn delete_reply(replies: Vec<Reply>) -> Result<DeleteOutcome> {
    let r = single(replies)?;
    match r.response() {
        Response::Deleted
        | Response::Meta {
            code: MetaCode::Hd, ..
        } => Ok(DeleteOutcome::Deleted),
        Response::NotFound
        | Response::Meta {
            code: MetaCode::Nf, ..
        } => Ok(DeleteOutcome::NotFound),
        Response::Exists
        | Response::Meta {
            code: MetaCode::Ex, ..
        } => Ok(DeleteOutcome::Exists),
        _ => Err(r.into_error()),
    }
}

// ---- arithmetic ----

/// The request for incr/decr.
pub fn arith(dialect: Dialect, key: &[u8], o: &ArithOptions) -> Result<Job> {
    let mut bytes = Vec::with_capacity(key.len() + 48);
    let incr = o.mode == ArithMode::Incr;
    match dialect {
        Dialect::Classic => {
            if o.vivify.is_some()
                || o.cas.is_some()
                || o.update_ttl.is_some()
                || o.new_cas.is_some()
            {
                return Err(needs_meta("arithmetic with vivify/CAS/TTL"));
            }
            unsafe_key(key)?;
            let req = Request::Arith {
                incr,
                key,
                delta: o.delta,
                noreply: false,
            };
            encode_request(&req, &mut bytes);
        }
        Dialect::Meta => {
            let mut f = MetaFlags::for_arith(o);
            let key = &meta_key(key, &mut f);
            encode_request(&Request::MetaArith { key, flags: f }, &mut bytes);
        }
    }
    Ok(one(bytes))
}

fn parse_number(data: &[u8]) -> Result<u64> {
    std::str::from_utf8(data)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| Error::Protocol("non-numeric arithmetic reply".into()))
}

/// The outcome of incr/decr.
pub fn arith_reply(replies: Vec<Reply>) -> Result<ArithOutcome> {
    let r = single(replies)?;
    match r.response() {
        Response::Number(value) => Ok(ArithOutcome::Value {
            value,
            cas: 0,
            ttl: None,
        }),
        Response::Meta {
            code: MetaCode::Va,
            flags,
            data,
        } => {
            let f = ReturnFlags::parse(flags);
            Ok(ArithOutcome::Value {
                value: parse_number(data.unwrap_or_default())?,
                cas: f.cas.unwrap_or(0),
                ttl: f.ttl.filter(|&t| t >= 0).map(|t| t as u32),
            })
        }
        Response::Meta {
            code: MetaCode::Hd, ..
        } => Err(Error::Protocol("ma reply without a value".into())),
        Response::NotFound
        | Response::Meta {
            code: MetaCode::Nf, ..
        } => Ok(ArithOutcome::NotFound),
        Response::Meta {
            code: MetaCode::Ex, ..
        } => Ok(ArithOutcome::Exists),
        Response::Meta {
            code: MetaCode::Ns, ..
        } => Ok(ArithOutcome::NotStored),
        Response::ClientError(m) if String::from_utf8_lossy(m).contains("non-numeric") => {
            Ok(ArithOutcome::NonNumeric)
        }
        _ => Err(r.into_error()),
    }
}

// ---- touch, flush_all ----

/// `touch <key> <exptime>`.
pub fn touch(key: &[u8], exptime: Exptime) -> Job {
    let mut bytes = Vec::with_capacity(key.len() + 24);
    let req = Request::Touch {
        key,
        exptime: exp32(exptime),
        noreply: false,
    };
    encode_request(&req, &mut bytes);
    one(bytes)
}

/// Whether the key was touched.
pub fn touch_reply(replies: Vec<Reply>) -> Result<bool> {
    let r = single(replies)?;
    match r.response() {
        Response::Touched => Ok(true),
        Response::NotFound => Ok(false),
        _ => Err(r.into_error()),
    }
}

/// `flush_all [delay]`.
pub fn flush_all(delay: u32) -> Job {
    let mut bytes = Vec::new();
    let req = Request::FlushAll {
        delay: (delay > 0).then(|| delay.min(i32::MAX as u32) as i32),
        noreply: false,
    };
    encode_request(&req, &mut bytes);
    one(bytes)
}

/// `OK`.
pub fn ok_reply(replies: Vec<Reply>) -> Result<()> {
    let r = single(replies)?;
    match r.response() {
        Response::Ok => Ok(()),
        _ => Err(r.into_error()),
    }
}

/// `stats [args]`.
pub fn stats(args: &str) -> Job {
    let mut bytes = Vec::new();
    encode_request(
        &Request::Stats {
            args: Words::new(args.as_bytes()),
        },
        &mut bytes,
    );
    Job {
        bytes,
        expect: Expect::UntilEnd,
        count: 1,
    }
}

/// The `STAT` pairs.
pub fn stats_reply(replies: Vec<Reply>) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let text_of = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    for r in replies {
        let r = text(r)?;
        match r.response() {
            Response::Stat { name, value } => out.push((text_of(name), text_of(value))),
            Response::End => {}
            _ => return Err(r.into_error()),
        }
    }
    Ok(out)
}

/// `version`.
pub fn version() -> Job {
    let mut bytes = Vec::new();
    encode_request(&Request::Version, &mut bytes);
    one(bytes)
}

/// The version string.
pub fn version_reply(replies: Vec<Reply>) -> Result<String> {
    let r = single(replies)?;
    match r.response() {
        Response::Version(v) => Ok(String::from_utf8_lossy(v).into_owned()),
        _ => Err(r.into_error()),
    }
}

/// Values as `Bytes`, for callers that want only the data.
pub fn values(items: Vec<Option<Item>>) -> Vec<Option<Bytes>> {
    items.into_iter().map(|i| i.map(|i| i.value)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::tests::reply;
    use memkit_types::StoreMode;

    fn wire(job: Result<Job>) -> String {
        String::from_utf8(job.unwrap().bytes).unwrap()
    }

    #[test]
    fn text_safe_finds_a_space_line_end_or_nul_anywhere() {
        for len in 1..=40 {
            assert!(text_safe(&vec![b'k'; len]), "{len}");
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut key = vec![b'k'; len];
                    key[at] = b;
                    let unsafe_byte = matches!(b, b' ' | b'\r' | b'\n' | 0);
                    assert_eq!(text_safe(&key), !unsafe_byte, "{b:#x} at {at} of {len}");
                }
            }
        }
    }

    #[test]
    fn reads_put_flags_in_application_order() {
        let o = GetOptions {
            touch: Some(Exptime(30)),
            vivify: Some(Exptime(10)),
            recache_below: Some(5),
            meta: true,
            no_bump: true,
            ..Default::default()
        };
        assert_eq!(
            wire(get(Dialect::Meta, &[b"a", b"b"], &o)),
            "mg a v f c T30 N10 R5 t h l u\r\nmg b v f c T30 N10 R5 t h l u\r\n"
        );
        assert_eq!(
            wire(get(
                Dialect::Classic,
                &[b"a", b"b"],
                &GetOptions::touch(Exptime(9))
            )),
            "gats 9 a b\r\n"
        );
        assert!(get(Dialect::Classic, &[b"a"], &o).is_err());
    }

    #[test]
    fn stores_and_arith() {
        let o = StoreOptions {
            cas: Some(7),
            ..StoreOptions::new(StoreMode::Add, 3, Exptime(60))
        };
        assert_eq!(
            wire(store(Dialect::Meta, b"k", b"vv", &o)),
            "ms k 2 c T60 F3 ME C7\r\nvv\r\n"
        );
        let o = StoreOptions::new(StoreMode::Set, 3, Exptime(60));
        assert_eq!(
            wire(store(Dialect::Classic, b"k", b"vv", &o)),
            "set k 3 60 2\r\nvv\r\n"
        );
        let a = ArithOptions {
            vivify: Some((5, Exptime(9))),
            update_ttl: Some(Exptime(100)),
            ..ArithOptions::decr(2)
        };
        assert_eq!(
            wire(arith(Dialect::Meta, b"n", &a)),
            "ma n MD D2 N9 J5 T100 v c t\r\n"
        );
        assert_eq!(
            wire(delete(Dialect::Meta, b"k", &DeleteOptions::default())),
            "delete k\r\n"
        );
    }

    #[test]
    fn replies_to_outcomes() {
        let items = get_replies(
            Dialect::Meta,
            &[b"a", b"b"],
            vec![reply("VA 2 f3 c9 t-1 W\r\nxy\r\n"), reply("EN\r\n")],
        )
        .unwrap();
        let a = items[0].clone().unwrap();
        assert_eq!(
            (&a.value[..], a.flags, a.cas, a.ttl, a.win),
            (&b"xy"[..], 3, 9, Some(Ttl::Never), true)
        );
        assert_eq!(items[1], None);
        // Classic: values in the request's order, misses left out, a key asked twice
        // answered twice; one out of order is still placed.
        let values = |keys: &[&[u8]], lines: &[&str]| {
            let replies = lines.iter().map(|l| reply(l)).collect();
            let items = get_replies(Dialect::Classic, keys, replies).unwrap();
            items
                .into_iter()
                .map(|i| i.map(|i| String::from_utf8(i.value.to_vec()).unwrap()))
                .collect::<Vec<_>>()
        };
        let v = |s: &str| Some(s.to_string());
        assert_eq!(
            values(
                &[b"a", b"b", b"a", b"c"],
                &[
                    "VALUE a 0 1\r\n1\r\n",
                    "VALUE a 0 1\r\n2\r\n",
                    "VALUE c 0 1\r\n3\r\n",
                    "END\r\n"
                ]
            ),
            [v("1"), None, v("2"), v("3")]
        );
        assert_eq!(
            values(
                &[b"a", b"b"],
                &["VALUE b 0 1\r\n2\r\n", "VALUE a 0 1\r\n1\r\n", "END\r\n"]
            ),
            [v("1"), v("2")]
        );
        assert_eq!(
            arith_reply(vec![reply("VA 2 c4 t10\r\n12\r\n")]).unwrap(),
            ArithOutcome::Value {
                value: 12,
                cas: 4,
                ttl: Some(10)
            }
        );
        assert_eq!(
            arith_reply(vec![reply(
                "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
            )])
            .unwrap(),
            ArithOutcome::NonNumeric
        );
        assert_eq!(
            store_reply(vec![reply("SERVER_ERROR object too large for cache\r\n")]),
            Err(Error::TooLarge)
        );
    }
}
