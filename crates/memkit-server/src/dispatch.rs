//! Text and meta requests: each becomes logical [`Command`]s for the one executor
//! ([`crate::exec`]), whose outcomes `TextReply` and `MetaReply` render; operator
//! commands (`stats`, `watch`, `lru_crawler`...) are answered here.
//!
//! Connection handling never touches the engine, and the engine never sees wire types, so a
//! different backend (the persistent one) plugs in behind the executor and nowhere else.

use memkit_engine::ItemView;
use memkit_protocol::render::{
    self, DebugInfo, ItemMeta, MetaCmd, MetaStatus, meta_code, write_meta, write_meta_value,
};
use memkit_protocol::{AdminCmd, Command, MetaFlags, Request, ShutdownMode, command, meta_key};
use memkit_types::{
    ArithOutcome, DeleteOutcome, Error, Exptime, GetOptions, StoreOutcome, Stored, Ttl,
};

use crate::exec::{Action, Cx, Dump, Reply, execute};
use crate::state::Shared;
use crate::watch;

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

/// Keys of a multi-get warmed ahead of their lookups at a time ([`warm`]). On a table far
/// larger than the caches, a lookup of 100 random keys took 1.1-1.3 µs a key unwarmed and
/// 0.53-0.58 warmed eight at a time (16 at a time: 0.57-0.65; all 100 first: 0.44-0.59); on
/// a table that fits in the caches eight at a time costs 1-5% (`docs/BENCHMARKS.md`,
/// "Warming a multi-get's keys").
const WARM: usize = 8;

/// Starts loading the index buckets of `keys`, then the records they point to, without
/// waiting: the lookups that follow find them in cache instead of waiting on two misses a
/// key, one key after another. A router's engine holds nothing to warm.
fn warm<'a>(sh: &Shared, keys: impl Iterator<Item = &'a [u8]> + Clone) {
    use memkit_engine::Prefetch;
    if sh.router().is_some() {
        return;
    }
    for key in keys.clone() {
        sh.engine.prefetch(key, Prefetch::Bucket);
    }
    for key in keys {
        sh.engine.prefetch(key, Prefetch::Record);
    }
}

const NON_NUMERIC: &str = "CLIENT_ERROR cannot increment or decrement non-numeric value";

/// Handles one request, appending the reply to `out`.
pub fn dispatch(req: &Request<'_>, sh: &Shared, cx: &mut Cx, out: &mut Vec<u8>) -> Action {
    let quiet = req.noreply();
    // With `noreply` the reply is built and then dropped: simpler than threading the flag
    // through every branch, and noreply traffic is not the hot path.
    let mark = out.len();
    let action = match *req {
        Request::Get { cas, touch, keys } => {
            let opts = command::get_options(touch);
            let several = keys.iter().nth(1).is_some();
            let mut ahead = keys.iter();
            for (i, key) in keys.iter().enumerate() {
                if i > 0 && out.len() >= REPLY_CHUNK {
                    return Action::More(key.as_ptr() as usize - keys.raw().as_ptr() as usize);
                }
                if several && i % WARM == 0 {
                    warm(sh, ahead.clone().take(WARM));
                    ahead.nth(WARM - 1);
                }
                let cmd = Command::Get {
                    key,
                    opts: opts.clone(),
                };
                let before = out.len();
                let mut reply = TextReply {
                    out,
                    key,
                    cas,
                    failed: false,
                };
                execute(&cmd, sh, cx, &mut reply);
                if reply.failed {
                    // An error ends the reply, as memcached's does: the error line alone,
                    // no values before it and no END after (a client reads one reply).
                    let line = out.split_off(before);
                    out.truncate(mark);
                    out.extend_from_slice(&line);
                    return Action::Continue;
                }
            }
            render::write_end(out);
            Action::Continue
        }
        Request::Store { key, .. }
        | Request::Arith { key, .. }
        | Request::Touch { key, .. }
        | Request::Delete { key, .. } => text(sh, cx, out, req.command(key)),
        Request::FlushAll { .. } => text(sh, cx, out, req.command(b"")),
        Request::Verbosity { level, .. } => {
            let level = level.min(u32::from(u8::MAX)) as u8;
            sh.verbosity
                .store(level, std::sync::atomic::Ordering::Relaxed);
            crate::log::set_verbosity(level);
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
                sh.engine.set_memory_limit((megabytes as usize) << 20);
                line(out, "OK");
            }
            Action::Continue
        }
        Request::Version => {
            line(out, crate::config::VERSION_LINE);
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
            } else if mode == ShutdownMode::Graceful && crate::warm::raise_graceful() {
                // memcached raises SIGUSR1: the stop (and, with -e, the save) is the signal's.
                Action::Close
            } else {
                Action::Shutdown
            }
        }
        Request::Stats { args } => {
            let args: Vec<&[u8]> = args.iter().collect();
            crate::stats::write_stats(sh, &args, out);
            Action::Continue
        }
        Request::Admin {
            cmd: AdminCmd::Cluster,
            args,
        } => {
            let args: Vec<&[u8]> = args.iter().collect();
            cluster(sh, cx, &args, out)
        }
        Request::Admin { cmd, args } => {
            let args: Vec<&[u8]> = args.iter().collect();
            admin(sh, cmd, &args, out)
        }
        Request::MetaGet { key, ref flags } => meta(sh, cx, out, req, MetaCmd::Get, key, flags),
        Request::MetaSet { key, ref flags, .. } => meta(sh, cx, out, req, MetaCmd::Set, key, flags),
        Request::MetaDelete { key, ref flags } => {
            meta(sh, cx, out, req, MetaCmd::Delete, key, flags)
        }
        Request::MetaArith { key, ref flags } => meta(sh, cx, out, req, MetaCmd::Arith, key, flags),
        Request::MetaNoop => {
            line(out, "MN");
            Action::Continue
        }
        Request::MetaDebug { key, base64 } => {
            meta_debug(sh, key, base64, out);
            Action::Continue
        }
    };
    // A command that waits for the group answers on its second run.
    if quiet || cx.remote() {
        out.truncate(mark);
    }
    if cx.remote() {
        return Action::Remote;
    }
    // A command that needs its value back from flash first answered nothing yet.
    if cx.fetch.is_some() {
        return Action::Fetch;
    }
    action
}

/// Runs a single-key text command and renders it in text.
fn text(sh: &Shared, cx: &mut Cx, out: &mut Vec<u8>, cmd: Option<Command<'_>>) -> Action {
    let Some(cmd) = cmd else {
        return Action::Continue;
    };
    let key = cmd.key().unwrap_or_default();
    execute(
        &cmd,
        sh,
        cx,
        &mut TextReply {
            out,
            key,
            cas: false,
            failed: false,
        },
    );
    Action::Continue
}

/// The classic text protocol's replies.
struct TextReply<'o, 'k> {
    out: &'o mut Vec<u8>,
    key: &'k [u8],
    /// `gets`/`gats`: values carry their CAS.
    cas: bool,
    /// An error was rendered: a retrieval's reply ends there.
    failed: bool,
}

impl Reply for TextReply<'_, '_> {
    fn hit(&mut self, v: &ItemView<'_>) -> Option<usize> {
        let cas = self.cas.then_some(v.cas);
        render::write_value(self.out, self.key, v.flags, v.value, cas);
        Some(self.out.len() - 2 - v.value.len())
    }

    fn out(&mut self) -> &mut Vec<u8> {
        self.out
    }

    fn miss(&mut self) {}

    fn stored(&mut self, s: &Stored) {
        line(
            self.out,
            match s.outcome {
                StoreOutcome::Stored => "STORED",
                StoreOutcome::NotStored => "NOT_STORED",
                StoreOutcome::Exists => "EXISTS",
                StoreOutcome::NotFound => "NOT_FOUND",
            },
        );
    }

    fn deleted(&mut self, d: DeleteOutcome) {
        line(
            self.out,
            match d {
                DeleteOutcome::Deleted => "DELETED",
                _ => "NOT_FOUND",
            },
        );
    }

    fn arith(&mut self, a: &ArithOutcome) {
        match a {
            ArithOutcome::Value { value, .. } => render::write_number(self.out, *value),
            ArithOutcome::NonNumeric => line(self.out, NON_NUMERIC),
            _ => line(self.out, "NOT_FOUND"),
        }
    }

    fn touched(&mut self, found: bool) {
        line(self.out, if found { "TOUCHED" } else { "NOT_FOUND" });
    }

    fn flushed(&mut self) {
        line(self.out, "OK");
    }

    fn flush_refused(&mut self) {
        line(self.out, "CLIENT_ERROR flush_all not allowed");
    }

    fn error(&mut self, e: &Error) {
        self.failed = true;
        error_line(self.out, e);
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
        Error::Client(m) => line(out, &format!("CLIENT_ERROR {m}")),
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

/// `mg`, `ms`, `md`, `ma`: the flags become a logical command, its outcome a meta reply.
fn meta(
    sh: &Shared,
    cx: &mut Cx,
    out: &mut Vec<u8>,
    req: &Request<'_>,
    cmd: MetaCmd,
    key: &[u8],
    f: &MetaFlags<'_>,
) -> Action {
    let Some(k) = storage_key(out, key, f.base64) else {
        return Action::Continue;
    };
    let Some(logical) = req.command(&k) else {
        return Action::Continue;
    };
    let value_len = match &logical {
        Command::Store { data, .. } => data.len(),
        _ => 0,
    };
    let mut reply = MetaReply {
        sh,
        out,
        cmd,
        key,
        f,
        value_len,
    };
    execute(&logical, sh, cx, &mut reply);
    Action::Continue
}

/// The meta protocol's replies, built from the request's flags.
struct MetaReply<'a, 'f> {
    sh: &'a Shared,
    out: &'a mut Vec<u8>,
    cmd: MetaCmd,
    /// The key as sent (base64 if `b`), for `k`.
    key: &'a [u8],
    f: &'a MetaFlags<'f>,
    /// `ms`'s data length, for `s`.
    value_len: usize,
}

impl MetaReply<'_, '_> {
    fn status(&mut self, status: MetaStatus, meta: Option<&ItemMeta>) {
        let code = meta_code(self.cmd, status, false);
        write_meta(self.out, self.cmd, code, self.key, self.f, meta);
    }
}

impl Reply for MetaReply<'_, '_> {
    fn out(&mut self) -> &mut Vec<u8> {
        self.out
    }

    fn hit(&mut self, v: &ItemView<'_>) -> Option<usize> {
        let f = self.f;
        let mut meta = meta_of(v);
        let pos = |c: u8| f.order().iter().position(|&x| x == c);
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
                Some((_, secs)) => remaining_ttl(self.sh, secs),
            };
        }
        // `C`: the client already holds this version; skip the value.
        if f.value && f.compare_cas != Some(v.cas) {
            let before = self.out.len();
            write_meta_value(self.out, MetaCmd::Get, self.key, f, &meta, v.value);
            let len = v.value.len();
            (self.out.len() >= before + len + 2).then(|| self.out.len() - 2 - len)
        } else {
            self.status(MetaStatus::Ok, Some(&meta));
            None
        }
    }

    fn miss(&mut self) {
        let code = meta_code(MetaCmd::Get, MetaStatus::Miss, self.f.value);
        write_meta(self.out, MetaCmd::Get, code, self.key, self.f, None);
    }

    fn stored(&mut self, s: &Stored) {
        let status = match s.outcome {
            StoreOutcome::Stored => MetaStatus::Ok,
            StoreOutcome::NotStored => MetaStatus::NotStored,
            StoreOutcome::Exists => MetaStatus::Exists,
            StoreOutcome::NotFound => MetaStatus::Miss,
        };
        let meta = ItemMeta {
            cas: s.cas,
            value_len: self.value_len,
            ..Default::default()
        };
        self.status(status, Some(&meta));
    }

    fn deleted(&mut self, d: DeleteOutcome) {
        let status = match d {
            DeleteOutcome::Deleted => MetaStatus::Ok,
            DeleteOutcome::NotFound => MetaStatus::Miss,
            DeleteOutcome::Exists => MetaStatus::Exists,
        };
        self.status(status, None);
    }

    fn arith(&mut self, a: &ArithOutcome) {
        let status = match *a {
            ArithOutcome::Value { value, cas, ttl } => {
                let meta = ItemMeta {
                    cas,
                    ttl: ttl.map_or(-1, i64::from),
                    ..Default::default()
                };
                if self.f.value {
                    let digits = value.to_string();
                    let (key, f) = (self.key, self.f);
                    write_meta_value(self.out, MetaCmd::Arith, key, f, &meta, digits.as_bytes());
                } else {
                    self.status(MetaStatus::Ok, Some(&meta));
                }
                return;
            }
            ArithOutcome::NonNumeric => return line(self.out, NON_NUMERIC),
            ArithOutcome::Exists => MetaStatus::Exists,
            ArithOutcome::NotStored => MetaStatus::NotStored,
            ArithOutcome::NotFound => MetaStatus::Miss,
        };
        self.status(status, None);
    }

    fn touched(&mut self, found: bool) {
        let status = if found {
            MetaStatus::Ok
        } else {
            MetaStatus::Miss
        };
        self.status(status, None);
    }

    fn flushed(&mut self) {
        self.status(MetaStatus::Ok, None);
    }

    /// Meta has no flush of its own; the text reply, should one ever reach here.
    fn flush_refused(&mut self) {
        line(self.out, "CLIENT_ERROR flush_all not allowed");
    }

    fn error(&mut self, e: &Error) {
        error_line(self.out, e);
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
    let info_of = |v: ItemView<'_>, len: usize| DebugInfo {
        exp: ttl_i64(v.ttl),
        la: u64::from(v.last_access),
        cas: v.cas,
        fetched: v.fetched,
        cls: crate::stats::class_id(sh, k.len() + len),
        size: (k.len() + len) as u64,
    };
    // A value on flash is not read: its length is known.
    let info = (sh.engine)
        .get_or_flash(&k, &opts, |v| info_of(v, v.value.len()))
        .map(|got| {
            got.map(|got| match got {
                memkit_engine::Got::Now(d) => d,
                memkit_engine::Got::Flash(read) => info_of(read.view(&k, &[]), read.len),
            })
        });
    match info {
        Ok(Some(d)) => render::write_meta_debug(out, key, base64, &d),
        Ok(None) => line(out, "EN"),
        Err(e) => error_line(out, &e),
    }
}

/// `cluster status|add ID HOST:PORT|remove ID`: carried out by the group's node while the
/// connection waits, as a write is (`crate::exec::replicate`).
fn cluster(sh: &Shared, cx: &mut Cx, args: &[&[u8]], out: &mut Vec<u8>) -> Action {
    if sh.replica().is_none() {
        line(
            out,
            "CLIENT_ERROR not a node of a replicated group (--raft-node)",
        );
        return Action::Continue;
    }
    let Some(admin) = crate::replica::Admin::parse(args) else {
        line(
            out,
            "CLIENT_ERROR usage: cluster status|add ID HOST:PORT|remove ID",
        );
        return Action::Continue;
    };
    match cx.group().cluster(admin) {
        None => {}
        Some(Ok(lines)) => lines.iter().for_each(|l| line(out, l)),
        Some(Err(e)) => line(out, &format!("SERVER_ERROR {e}")),
    }
    Action::Continue
}

/// `lru_crawler`, `watch`, `slabs`, `lru`.
fn admin(sh: &Shared, cmd: AdminCmd, args: &[&[u8]], out: &mut Vec<u8>) -> Action {
    match cmd {
        AdminCmd::LruCrawler => match args.first().copied() {
            Some(b"metadump") => {
                if !sh.settings.dumping {
                    line(out, "ERROR metadump not allowed");
                } else {
                    return Action::Dump(Dump::Meta);
                }
            }
            Some(b"mgdump") => {
                if !sh.settings.dumping {
                    line(out, "ERROR key dump not allowed");
                } else {
                    return Action::Dump(Dump::Mg);
                }
            }
            // memkitd reclaims expired items on its own schedule; the crawler's knobs are
            // accepted so that scripts written for memcached keep working.
            Some(b"crawl" | b"enable" | b"disable" | b"sleep" | b"tocrawl") => line(out, "OK"),
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
        // Handled by `cluster` (it needs the connection).
        AdminCmd::Cluster => line(out, "ERROR"),
    }
    Action::Continue
}
