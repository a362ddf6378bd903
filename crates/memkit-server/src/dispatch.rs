//! The one place where a decoded request meets the storage backend.
//!
//! Everything the wire asks of storage passes through [`dispatch`]: it maps a
//! [`Request`] to an engine call and renders the engine's outcome with the codec's writers.
//! Connection handling never touches the engine, and the engine never sees wire types, so a
//! different backend (the persistent one) plugs in here and nowhere else.

use memkit_engine::ItemView;
use memkit_protocol::render::{
    self, DebugInfo, ItemMeta, MetaCmd, MetaStatus, meta_code, write_meta, write_meta_value,
};
use memkit_protocol::{AdminCmd, MetaFlags, Request, ShutdownMode, StoreCmd, meta_key};
use memkit_types::{
    ArithMode, ArithOptions, ArithOutcome, DeleteOptions, DeleteOutcome, Error, Exptime,
    GetOptions, StoreMode, StoreOptions, StoreOutcome, Ttl,
};

use crate::server::Shared;
use crate::watch::{self, Event};

/// What the connection does after a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Go on reading requests.
    Continue,
    /// Flush what is written, then close (`quit`).
    Close,
    /// Become a `watch` stream for these event kinds.
    Watch(u8),
    /// Flush, close, and shut the server down (`shutdown` with `-A`).
    Shutdown,
    /// A multi-get's reply reached [`REPLY_CHUNK`] bytes: write out what is rendered, then
    /// go on with [`resume`] at this byte offset into the key list.
    More(usize),
}

/// Pending reply bytes after which a multi-get stops at a key boundary ([`Action::More`]),
/// so one request's reply is never held whole: a `get` of thousands of large values is
/// sent in pieces of about this size (plus one value).
pub const REPLY_CHUNK: usize = 256 * 1024;

/// The rest of a multi-get that returned [`Action::More`]`(at)`.
pub fn resume<'a>(req: &Request<'a>, at: usize) -> Request<'a> {
    match *req {
        Request::Get { cas, touch, keys } => Request::Get {
            cas,
            touch,
            keys: memkit_protocol::Words::new(&keys.raw()[at..]),
        },
        other => other,
    }
}

const NON_NUMERIC: &str = "CLIENT_ERROR cannot increment or decrement non-numeric value";

/// Handles one request, appending the reply to `out`.
pub fn dispatch(req: &Request<'_>, sh: &Shared, conn_id: u64, out: &mut Vec<u8>) -> Action {
    let engine = &sh.engine;
    let quiet = req.noreply();
    // With `noreply` the reply is built and then dropped: simpler than threading the flag
    // through every branch, and noreply traffic is not the hot path.
    let mark = out.len();
    let action = match *req {
        Request::Get { cas, touch, keys } => {
            let opts = GetOptions {
                touch: touch.map(|t| Exptime(t.into())),
                classic: true,
                ..Default::default()
            };
            let mut rendered = false;
            for key in keys.iter() {
                if rendered && out.len() >= REPLY_CHUNK {
                    return Action::More(key.as_ptr() as usize - keys.raw().as_ptr() as usize);
                }
                rendered = true;
                let r = engine.get_view(key, &opts, |v| {
                    render::write_value(out, key, v.flags, v.value, cas.then_some(v.cas));
                    v.value.len()
                });
                watch::emit(sh, || {
                    Event::fetch(key, r.as_ref().ok().copied().flatten(), conn_id)
                });
                if let Err(e) = r {
                    error_line(out, &e);
                }
            }
            render::write_end(out);
            Action::Continue
        }
        Request::Store {
            cmd,
            key,
            flags,
            exptime,
            data,
            ..
        } => {
            let (mode, cas) = match cmd {
                StoreCmd::Set => (StoreMode::Set, None),
                StoreCmd::Add => (StoreMode::Add, None),
                StoreCmd::Replace => (StoreMode::Replace, None),
                StoreCmd::Append => (StoreMode::Append, None),
                StoreCmd::Prepend => (StoreMode::Prepend, None),
                StoreCmd::Cas(c) => (StoreMode::Set, Some(c)),
            };
            let opts = StoreOptions {
                cas,
                ..StoreOptions::new(mode, flags, Exptime(exptime.into()))
            };
            let r = engine.store(key, data, &opts);
            watch::emit(sh, || Event::store(key, &r, exptime, data.len(), conn_id));
            match r {
                Ok(s) => line(
                    out,
                    match s.outcome {
                        StoreOutcome::Stored => "STORED",
                        StoreOutcome::NotStored => "NOT_STORED",
                        StoreOutcome::Exists => "EXISTS",
                        StoreOutcome::NotFound => "NOT_FOUND",
                    },
                ),
                Err(e) => error_line(out, &e),
            }
            Action::Continue
        }
        Request::Arith {
            incr, key, delta, ..
        } => {
            let opts = if incr {
                ArithOptions::incr(delta)
            } else {
                ArithOptions::decr(delta)
            };
            match engine.arithmetic(key, &opts) {
                Ok(ArithOutcome::Value { value, .. }) => render::write_number(out, value),
                Ok(ArithOutcome::NonNumeric) => line(out, NON_NUMERIC),
                Ok(_) => line(out, "NOT_FOUND"),
                Err(e) => error_line(out, &e),
            }
            Action::Continue
        }
        Request::Touch { key, exptime, .. } => {
            match engine.touch(key, Exptime(exptime.into())) {
                Ok(true) => line(out, "TOUCHED"),
                Ok(false) => line(out, "NOT_FOUND"),
                Err(e) => error_line(out, &e),
            }
            Action::Continue
        }
        Request::Delete { key, .. } => {
            match engine.delete(key, &DeleteOptions::default()) {
                Ok(DeleteOutcome::Deleted) => line(out, "DELETED"),
                Ok(_) => line(out, "NOT_FOUND"),
                Err(e) => error_line(out, &e),
            }
            Action::Continue
        }
        Request::FlushAll { delay, .. } => {
            // The delay is an expiry time like any other: relative, or an absolute Unix time.
            let now = engine.clock().now_secs();
            // memcached reads a negative delay as 0: flush now.
            let delay = Exptime::flush_delay(delay.unwrap_or(0).max(0) as u32, now);
            match engine.try_flush_all(delay) {
                Ok(()) => line(out, "OK"),
                Err(e) => error_line(out, &e),
            }
            Action::Continue
        }
        Request::Verbosity { level, .. } => {
            sh.verbosity.store(
                level.min(u32::from(u8::MAX)) as u8,
                std::sync::atomic::Ordering::Relaxed,
            );
            line(out, "OK");
            Action::Continue
        }
        Request::CacheMemlimit { megabytes, .. } => {
            if megabytes < 8 {
                line(
                    out,
                    "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m",
                );
            } else {
                engine.set_memory_limit((megabytes as usize) << 20);
                line(out, "OK");
            }
            Action::Continue
        }
        Request::Version => {
            line(out, crate::VERSION_LINE);
            Action::Continue
        }
        Request::Quit => Action::Close,
        Request::Shutdown(mode) => {
            if !sh.settings.enable_shutdown {
                line(out, "ERROR: shutdown not enabled");
                Action::Continue
            } else if mode == ShutdownMode::Invalid {
                line(out, "CLIENT_ERROR invalid shutdown mode");
                Action::Continue
            } else {
                Action::Shutdown
            }
        }
        Request::Stats { args } => {
            let args: Vec<&[u8]> = args.iter().collect();
            crate::stats::write_stats(sh, &args, out);
            Action::Continue
        }
        Request::Admin { cmd, args } => {
            let args: Vec<&[u8]> = args.iter().collect();
            admin(sh, cmd, &args, out)
        }
        Request::MetaGet { key, ref flags } => {
            meta_get(sh, key, flags, conn_id, out);
            Action::Continue
        }
        Request::MetaSet {
            key,
            ref flags,
            data,
        } => {
            meta_set(sh, key, flags, data, conn_id, out);
            Action::Continue
        }
        Request::MetaDelete { key, ref flags } => {
            meta_delete(sh, key, flags, out);
            Action::Continue
        }
        Request::MetaArith { key, ref flags } => {
            meta_arith(sh, key, flags, out);
            Action::Continue
        }
        Request::MetaNoop => {
            line(out, "MN");
            Action::Continue
        }
        Request::MetaDebug { key, base64 } => {
            meta_debug(sh, key, base64, out);
            Action::Continue
        }
    };
    if quiet {
        out.truncate(mark);
    }
    action
}

/// Whether a request may change stored data: in persistent `sync` mode its reply waits
/// until the change is durable. (Reads that only bump access bits do not count.)
pub fn mutates(req: &Request<'_>) -> bool {
    match req {
        Request::Get { touch, .. } => touch.is_some(),
        Request::MetaGet { flags, .. } => flags.ttl.is_some() || flags.vivify.is_some(),
        Request::Store { .. }
        | Request::Arith { .. }
        | Request::Touch { .. }
        | Request::Delete { .. }
        | Request::FlushAll { .. }
        | Request::MetaSet { .. }
        | Request::MetaDelete { .. }
        | Request::MetaArith { .. } => true,
        _ => false,
    }
}

fn line(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// An engine error as memcached words it.
fn error_line(out: &mut Vec<u8>, e: &Error) {
    match e {
        Error::InvalidKey => line(out, "CLIENT_ERROR bad command line format"),
        Error::TooLarge => line(out, "SERVER_ERROR object too large for cache"),
        Error::OutOfMemory => line(out, "SERVER_ERROR out of memory storing object"),
        Error::Server(m) => line(out, &format!("SERVER_ERROR {m}")),
        other => line(out, &format!("SERVER_ERROR {other}")),
    }
}

fn ttl_i64(t: Ttl) -> i64 {
    match t {
        Ttl::Never => -1,
        Ttl::Secs(s) => i64::from(s),
    }
}

/// The TTL a request's expiry token gives, as `t` reports it: -1 for none.
fn remaining_ttl(sh: &Shared, secs: i32) -> i64 {
    let now = sh.engine.clock().now_secs();
    match Exptime(secs.into()).deadline(now) {
        None => -1,
        Some(d) => d.saturating_sub(now) as i64,
    }
}

fn meta_of(v: &ItemView<'_>) -> ItemMeta {
    ItemMeta {
        value_len: v.value.len(),
        client_flags: v.flags,
        cas: v.cas,
        ttl: ttl_i64(v.ttl),
        fetched: v.fetched,
        last_access: u64::from(v.last_access),
        win: v.win,
        stale: v.stale,
        win_taken: v.win_taken,
    }
}

/// The storage key of a meta request; the codec validated it, so `None` cannot happen for
/// what it decoded, and is answered like a bad key if it does.
fn storage_key(out: &mut Vec<u8>, key: &[u8], base64: bool) -> Option<memkit_protocol::KeyBuf> {
    let k = meta_key(key, base64);
    if k.is_none() {
        line(out, "CLIENT_ERROR bad command line format");
    }
    k
}

fn meta_get(sh: &Shared, key: &[u8], f: &MetaFlags<'_>, conn_id: u64, out: &mut Vec<u8>) {
    let Some(k) = storage_key(out, key, f.base64) else {
        return;
    };
    // memcached applies `T` and `N` in request order: on a vivify, whichever comes last
    // sets the new item's TTL; and `t` reports the TTL as it stands where `t` appears.
    let pos = |c: u8| f.order().iter().position(|&x| x == c);
    let t_after_n = matches!((pos(b'N'), pos(b'T')), (Some(n), Some(t)) if t > n);
    let vivify = if t_after_n { f.ttl } else { f.vivify };
    let opts = GetOptions {
        touch: f.ttl.map(|t| Exptime(t.into())),
        vivify: f.vivify.and(vivify).map(|t| Exptime(t.into())),
        recache_below: f.recache.map(|r| r.max(0) as u32),
        meta: true,
        no_bump: f.no_bump,
        new_cas: f.new_cas,
        classic: false,
    };
    let r = sh.engine.get_view(&k, &opts, |v| {
        let mut meta = meta_of(&v);
        if let Some(tp) = pos(b't') {
            // The TTL set by the last of `T` (and, on a vivify, `N`) that precedes `t`.
            let before_t = |c: u8, val: Option<i32>| pos(c).filter(|&p| p < tp).zip(val);
            let mut set_by = before_t(b'T', f.ttl);
            if v.created
                && let Some((np, nv)) = before_t(b'N', f.vivify)
                && set_by.is_none_or(|(p, _)| np > p)
            {
                set_by = Some((np, nv));
            }
            meta.ttl = match set_by {
                None => ttl_i64(v.ttl_before),
                Some(_) if !v.created => ttl_i64(v.ttl),
                Some((_, secs)) => remaining_ttl(sh, secs),
            };
        }
        // `C`: the client already holds this version; skip the value.
        if f.value && f.compare_cas != Some(v.cas) {
            write_meta_value(out, MetaCmd::Get, key, f, &meta, v.value);
        } else {
            let code = meta_code(MetaCmd::Get, MetaStatus::Ok, false);
            write_meta(out, MetaCmd::Get, code, key, f, Some(&meta));
        }
        v.value.len()
    });
    watch::emit(sh, || {
        Event::fetch(&k, r.as_ref().ok().copied().flatten(), conn_id)
    });
    match r {
        Ok(Some(_)) => {}
        Ok(None) => {
            let code = meta_code(MetaCmd::Get, MetaStatus::Miss, f.value);
            write_meta(out, MetaCmd::Get, code, key, f, None);
        }
        Err(e) => error_line(out, &e),
    }
}

fn meta_set(
    sh: &Shared,
    key: &[u8],
    f: &MetaFlags<'_>,
    data: &[u8],
    conn_id: u64,
    out: &mut Vec<u8>,
) {
    let Some(k) = storage_key(out, key, f.base64) else {
        return;
    };
    let mode = match f.mode {
        Some(b'E' | b'e') => StoreMode::Add,
        Some(b'A' | b'a') => StoreMode::Append,
        Some(b'P' | b'p') => StoreMode::Prepend,
        Some(b'R' | b'r') => StoreMode::Replace,
        _ => StoreMode::Set,
    };
    let ttl = f.ttl.unwrap_or(0);
    let opts = StoreOptions {
        mode,
        flags: f.client_flags.unwrap_or(0),
        exptime: Exptime(ttl.into()),
        cas: f.compare_cas,
        invalidate: f.invalidate,
        vivify: f.vivify.map(|t| Exptime(t.into())),
        new_cas: f.new_cas,
    };
    let r = sh.engine.store(&k, data, &opts);
    watch::emit(sh, || Event::store(&k, &r, ttl, data.len(), conn_id));
    match r {
        Ok(s) => {
            let status = match s.outcome {
                StoreOutcome::Stored => MetaStatus::Ok,
                StoreOutcome::NotStored => MetaStatus::NotStored,
                StoreOutcome::Exists => MetaStatus::Exists,
                StoreOutcome::NotFound => MetaStatus::Miss,
            };
            let meta = ItemMeta {
                cas: s.cas,
                value_len: data.len(),
                ..Default::default()
            };
            let code = meta_code(MetaCmd::Set, status, false);
            write_meta(out, MetaCmd::Set, code, key, f, Some(&meta));
        }
        Err(e) => error_line(out, &e),
    }
}

fn meta_delete(sh: &Shared, key: &[u8], f: &MetaFlags<'_>, out: &mut Vec<u8>) {
    let Some(k) = storage_key(out, key, f.base64) else {
        return;
    };
    let opts = DeleteOptions {
        cas: f.compare_cas,
        invalidate: f.invalidate,
        stale_ttl: f.ttl.map(|t| Exptime(t.into())),
        remove_value: f.remove_value,
        new_cas: f.new_cas,
    };
    match sh.engine.delete(&k, &opts) {
        Ok(outcome) => {
            let status = match outcome {
                DeleteOutcome::Deleted => MetaStatus::Ok,
                DeleteOutcome::NotFound => MetaStatus::Miss,
                DeleteOutcome::Exists => MetaStatus::Exists,
            };
            let code = meta_code(MetaCmd::Delete, status, false);
            write_meta(out, MetaCmd::Delete, code, key, f, None);
        }
        Err(e) => error_line(out, &e),
    }
}

fn meta_arith(sh: &Shared, key: &[u8], f: &MetaFlags<'_>, out: &mut Vec<u8>) {
    let Some(k) = storage_key(out, key, f.base64) else {
        return;
    };
    let mode = match f.mode {
        Some(b'D' | b'd' | b'-') => ArithMode::Decr,
        _ => ArithMode::Incr,
    };
    let opts = ArithOptions {
        mode,
        delta: f.delta.unwrap_or(1),
        vivify: f
            .vivify
            .map(|t| (f.initial.unwrap_or(0), Exptime(t.into()))),
        cas: f.compare_cas,
        update_ttl: f.ttl.map(|t| Exptime(t.into())),
        new_cas: f.new_cas,
    };
    match sh.engine.arithmetic(&k, &opts) {
        Ok(ArithOutcome::Value { value, cas, ttl }) => {
            let meta = ItemMeta {
                cas,
                ttl: ttl.map_or(-1, i64::from),
                ..Default::default()
            };
            if f.value {
                let digits = value.to_string();
                write_meta_value(out, MetaCmd::Arith, key, f, &meta, digits.as_bytes());
            } else {
                let code = meta_code(MetaCmd::Arith, MetaStatus::Ok, false);
                write_meta(out, MetaCmd::Arith, code, key, f, Some(&meta));
            }
        }
        Ok(ArithOutcome::NonNumeric) => line(out, NON_NUMERIC),
        Ok(other) => {
            let status = match other {
                ArithOutcome::Exists => MetaStatus::Exists,
                ArithOutcome::NotStored => MetaStatus::NotStored,
                _ => MetaStatus::Miss,
            };
            let code = meta_code(MetaCmd::Arith, status, false);
            write_meta(out, MetaCmd::Arith, code, key, f, None);
        }
        Err(e) => error_line(out, &e),
    }
}

fn meta_debug(sh: &Shared, key: &[u8], base64: bool, out: &mut Vec<u8>) {
    let Some(k) = storage_key(out, key, base64) else {
        return;
    };
    let opts = GetOptions {
        meta: true,
        no_bump: true,
        ..Default::default()
    };
    let info = sh.engine.get_view(&k, &opts, |v| DebugInfo {
        exp: ttl_i64(v.ttl),
        la: u64::from(v.last_access),
        cas: v.cas,
        fetched: v.fetched,
        cls: crate::stats::class_id(sh, k.len() + v.value.len()),
        size: (k.len() + v.value.len()) as u64,
    });
    match info {
        Ok(Some(d)) => render::write_meta_debug(out, key, base64, &d),
        Ok(None) => line(out, "EN"),
        Err(e) => error_line(out, &e),
    }
}

/// `lru_crawler`, `watch`, `slabs`, `lru`.
fn admin(sh: &Shared, cmd: AdminCmd, args: &[&[u8]], out: &mut Vec<u8>) -> Action {
    match cmd {
        AdminCmd::LruCrawler => match args.first().copied() {
            Some(b"metadump") => {
                if !sh.settings.dumping {
                    line(out, "ERROR metadump not allowed");
                } else {
                    crate::stats::write_metadump(sh, out);
                }
            }
            // memkitd reclaims expired items on its own schedule; the crawler's knobs are
            // accepted so that scripts written for memcached keep working.
            Some(b"crawl" | b"enable" | b"disable" | b"sleep" | b"tocrawl" | b"mgdump") => {
                line(out, "OK")
            }
            _ => line(out, "CLIENT_ERROR bad command line format"),
        },
        AdminCmd::Watch => {
            if !sh.settings.watch {
                line(out, "CLIENT_ERROR watch commands not allowed");
                return Action::Continue;
            }
            let mut mask = 0u8;
            for a in args {
                mask |= match *a {
                    b"fetchers" => watch::FETCHERS,
                    b"mutations" => watch::MUTATIONS,
                    b"evictions" => watch::EVICTIONS,
                    _ => 0,
                };
            }
            if args.is_empty() {
                mask = watch::FETCHERS | watch::MUTATIONS | watch::EVICTIONS;
            }
            line(out, "OK");
            return Action::Watch(mask);
        }
        AdminCmd::Slabs | AdminCmd::Lru => line(out, "OK"),
    }
    Action::Continue
}
