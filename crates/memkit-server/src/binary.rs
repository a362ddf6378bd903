//! The binary protocol's side of a connection: decode one frame, run it on the engine,
//! write memcached's reply.
//!
//! Replies follow memcached 1.6.18's `proto_bin.c`: a quiet opcode's success is not
//! answered, except a get hit; its errors always are, so a client's trailing `NOOP` sees
//! every failure. Success replies carry the item's CAS in the header, errors carry 0.

use memkit_protocol::binary::{
    self, Command, DecodeError, Request, Status, StoreKind, write_error, write_error_message,
    write_hit, write_miss_with_key, write_ok, write_stat,
};
use memkit_types::{
    ArithMode, ArithOptions, ArithOutcome, DeleteOptions, DeleteOutcome, Error, Exptime,
    GetOptions, StoreMode, StoreOptions, StoreOutcome,
};

use crate::dispatch::Action;
use crate::server::Shared;
use crate::watch::{self, Event};

/// `INCREMENT`/`DECREMENT`'s expiry that means "do not create a missing item".
const NO_CREATE: u32 = 0xffff_ffff;

/// What one call of [`step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The frame is not complete yet: read more.
    Incomplete,
    /// A frame was handled.
    Done {
        /// Input bytes it used.
        used: usize,
        /// Bytes after those to discard as they arrive.
        swallow: u64,
        /// What the connection does next.
        action: Action,
        /// It may have changed stored data (persistent `sync` mode waits for it).
        mutates: bool,
    },
}

/// Handles the frame at the start of `buf`, appending its reply to `out`. `authed` is the
/// connection's SASL state, which `SASL_AUTH` changes.
pub fn step(buf: &[u8], sh: &Shared, conn_id: u64, authed: &mut bool, out: &mut Vec<u8>) -> Step {
    let auth = binary::Auth {
        sasl: sh.settings.sasl,
        authenticated: *authed,
    };
    match binary::decode_request(buf, &sh.limits, auth) {
        Ok((req, used)) => {
            trace(sh, conn_id, &req);
            let action = execute(&req, sh, conn_id, authed, out);
            Step::Done {
                used,
                swallow: 0,
                action,
                mutates: req.mutates(),
            }
        }
        Err(DecodeError::Incomplete) => Step::Incomplete,
        Err(DecodeError::Close) => Step::Done {
            used: buf.len(),
            swallow: 0,
            action: Action::Close,
            mutates: false,
        },
        Err(DecodeError::Reject(r)) => {
            r.encode(out);
            if r.status == Status::TooLarge {
                sh.engine.refuse_too_large(r.unlink);
            }
            Step::Done {
                used: r.consumed,
                swallow: r.swallow,
                action: if r.close {
                    Action::Close
                } else {
                    Action::Continue
                },
                mutates: r.unlink.is_some(),
            }
        }
    }
}

fn trace(sh: &Shared, conn_id: u64, req: &Request<'_>) {
    if sh.verbosity.load(std::sync::atomic::Ordering::Relaxed) < 2 {
        return;
    }
    let key = match req.cmd {
        Command::Get { key, .. }
        | Command::Store { key, .. }
        | Command::Delete { key }
        | Command::Arith { key, .. } => key,
        Command::Stat { group } => group,
        _ => b"",
    };
    // Never the SASL data: it holds the password.
    eprintln!(
        "<{conn_id} binary opcode 0x{:02x} {}",
        req.opcode,
        String::from_utf8_lossy(key)
    );
}

fn execute(
    req: &Request<'_>,
    sh: &Shared,
    conn_id: u64,
    authed: &mut bool,
    out: &mut Vec<u8>,
) -> Action {
    let (opcode, opaque) = (req.opcode, req.opaque);
    let cas = (req.cas != 0).then_some(req.cas);
    match req.cmd {
        Command::Get {
            key,
            with_key,
            touch,
            value,
        } => get(req, sh, conn_id, key, with_key, touch, value, out),
        Command::Store {
            kind,
            key,
            flags,
            exptime,
            data,
        } => {
            // memcached turns any SET/ADD/REPLACE with a CAS into its `cas` command.
            let mode = match kind {
                _ if cas.is_some() && !matches!(kind, StoreKind::Append | StoreKind::Prepend) => {
                    StoreMode::Set
                }
                StoreKind::Set => StoreMode::Set,
                StoreKind::Add => StoreMode::Add,
                StoreKind::Replace => StoreMode::Replace,
                StoreKind::Append => StoreMode::Append,
                StoreKind::Prepend => StoreMode::Prepend,
            };
            let opts = StoreOptions {
                cas,
                ..StoreOptions::new(mode, flags, Exptime(exptime.into()))
            };
            let r = sh.engine.store(key, data, &opts);
            let ttl = i32::try_from(exptime).unwrap_or(i32::MAX);
            watch::emit(sh, || Event::store(key, &r, ttl, data.len(), conn_id));
            match r {
                Ok(s) if s.outcome == StoreOutcome::Stored => {
                    if !req.quiet {
                        write_ok(out, opcode, opaque, s.cas, b"");
                    }
                }
                Ok(s) => {
                    let status = match (s.outcome, mode, cas) {
                        (StoreOutcome::Exists, ..) => Status::KeyExists,
                        (StoreOutcome::NotFound, ..) => Status::KeyNotFound,
                        (_, StoreMode::Add, None) => Status::KeyExists,
                        (_, StoreMode::Replace, None) => Status::KeyNotFound,
                        _ => Status::NotStored,
                    };
                    write_error(out, opcode, opaque, status);
                }
                Err(e) => engine_error(out, req, &e, "Out of memory allocating item"),
            }
        }
        Command::Delete { key } => {
            let opts = DeleteOptions {
                cas,
                ..Default::default()
            };
            match sh.engine.delete(key, &opts) {
                Ok(DeleteOutcome::Deleted) => {
                    if !req.quiet {
                        write_ok(out, opcode, opaque, 0, b"");
                    }
                }
                Ok(DeleteOutcome::NotFound) => {
                    write_error(out, opcode, opaque, Status::KeyNotFound)
                }
                Ok(DeleteOutcome::Exists) => write_error(out, opcode, opaque, Status::KeyExists),
                Err(e) => engine_error(out, req, &e, "Out of memory"),
            }
        }
        Command::Arith {
            incr,
            key,
            delta,
            initial,
            exptime,
        } => {
            let opts = ArithOptions {
                mode: if incr {
                    ArithMode::Incr
                } else {
                    ArithMode::Decr
                },
                delta,
                vivify: (exptime != NO_CREATE).then(|| (initial, Exptime(exptime.into()))),
                cas,
                ..Default::default()
            };
            let status = match sh.engine.arithmetic(key, &opts) {
                Ok(ArithOutcome::Value { value, cas, .. }) => {
                    if !req.quiet {
                        write_ok(out, opcode, opaque, cas, &value.to_be_bytes());
                    }
                    return Action::Continue;
                }
                Ok(ArithOutcome::NonNumeric) => Status::DeltaBadval,
                Ok(ArithOutcome::NotFound) => Status::KeyNotFound,
                Ok(ArithOutcome::Exists) => Status::KeyExists,
                Ok(ArithOutcome::NotStored) => Status::NotStored,
                Err(e) => {
                    engine_error(out, req, &e, "Out of memory incrementing value");
                    return Action::Continue;
                }
            };
            write_error(out, opcode, opaque, status);
        }
        Command::Flush { delay } => {
            let now = sh.engine.clock().now_secs();
            let delay = Exptime::flush_delay(delay.unwrap_or(0), now);
            match sh.engine.try_flush_all(delay) {
                Ok(()) if req.quiet => {}
                Ok(()) => write_ok(out, opcode, opaque, 0, b""),
                Err(e) => engine_error(out, req, &e, "Out of memory"),
            }
        }
        Command::Noop => write_ok(out, opcode, opaque, 0, b""),
        Command::Version => write_ok(out, opcode, opaque, 0, crate::VERSION.as_bytes()),
        Command::Quit => {
            if !req.quiet {
                write_ok(out, opcode, opaque, 0, b"");
            }
            return Action::Close;
        }
        Command::Stat { group } => stat(sh, req, group, out),
        Command::SaslListMechs => write_ok(out, opcode, opaque, 0, crate::sasl::MECHANISMS),
        Command::SaslAuth { step, mech, data } => {
            if crate::sasl::authenticate(sh, step, mech, data) {
                *authed = true;
                write_ok(out, opcode, opaque, 0, b"Authenticated");
            } else {
                write_error(out, opcode, opaque, Status::AuthError);
            }
        }
    }
    Action::Continue
}

/// `GET`, `GETK`, `TOUCH`, `GAT`, `GATK` and their quiet forms.
#[allow(clippy::too_many_arguments)]
fn get(
    req: &Request<'_>,
    sh: &Shared,
    conn_id: u64,
    key: &[u8],
    with_key: bool,
    touch: Option<u32>,
    value: bool,
    out: &mut Vec<u8>,
) {
    let opts = GetOptions {
        touch: touch.map(|t| Exptime(t.into())),
        classic: true,
        ..Default::default()
    };
    let r = sh.engine.get_view(key, &opts, |v| {
        let k = with_key.then_some(key);
        write_hit(out, req, v.flags, v.cas, k, value.then_some(v.value));
        v.value.len()
    });
    watch::emit(sh, || {
        Event::fetch(key, r.as_ref().ok().copied().flatten(), conn_id)
    });
    match r {
        Ok(Some(_)) => {}
        Ok(None) if req.quiet => {}
        Ok(None) if with_key => write_miss_with_key(out, req.opcode, req.opaque, key),
        Ok(None) => write_error(out, req.opcode, req.opaque, Status::KeyNotFound),
        Err(e) => engine_error(out, req, &e, "Out of memory"),
    }
}

/// An engine error in binary terms. The binary protocol has no general server error:
/// memcached answers its own failures (allocation, mostly) `ENOMEM` with a message, and so
/// does memkitd for a store that failed underneath (the persistent layer).
fn engine_error(out: &mut Vec<u8>, req: &Request<'_>, e: &Error, oom: &str) {
    let (opcode, opaque) = (req.opcode, req.opaque);
    match e {
        Error::TooLarge => write_error(out, opcode, opaque, Status::TooLarge),
        Error::InvalidKey => write_error(out, opcode, opaque, Status::Invalid),
        Error::OutOfMemory => {
            write_error_message(out, opcode, opaque, Status::OutOfMemory, oom.as_bytes())
        }
        other => {
            let msg = other.to_string();
            write_error_message(out, opcode, opaque, Status::OutOfMemory, msg.as_bytes())
        }
    }
}

/// `STAT`: the groups memcached answers in binary, each stat one packet, an empty packet
/// last. The text renderer produces the stats; this re-frames its `STAT name value` lines,
/// so the two protocols cannot disagree on a figure.
fn stat(sh: &Shared, req: &Request<'_>, group: &[u8], out: &mut Vec<u8>) {
    let opaque = req.opaque;
    let mut text = Vec::new();
    // memcached compares these three by prefix, the others in full.
    if group.starts_with(b"reset") {
        crate::stats::write_stats(sh, &[b"reset"], &mut text);
    } else if group.starts_with(b"settings") {
        crate::stats::write_stats(sh, &[b"settings"], &mut text);
        reframe(&text, opaque, out);
    } else if let Some(sub) = group.strip_prefix(b"detail") {
        if sub.starts_with(b" dump") {
            crate::stats::write_stats(sh, &[b"detail", b"dump"], &mut text);
            write_stat(out, opaque, b"detailed", &text);
        } else if sub.starts_with(b" on") || sub.starts_with(b" off") {
            let arg: &[u8] = if sub.starts_with(b" on") {
                b"on"
            } else {
                b"off"
            };
            crate::stats::write_stats(sh, &[b"detail", arg], &mut text);
        } else {
            return write_error(out, req.opcode, opaque, Status::KeyNotFound);
        }
    } else if matches!(group, b"" | b"items" | b"slabs" | b"sizes") {
        let args: &[&[u8]] = if group.is_empty() { &[] } else { &[group] };
        crate::stats::write_stats(sh, args, &mut text);
        reframe(&text, opaque, out);
    } else {
        return write_error(out, req.opcode, opaque, Status::KeyNotFound);
    }
    write_stat(out, opaque, b"", b"");
}

/// Each `STAT name value\r\n` line of a text reply as one binary packet.
fn reframe(text: &[u8], opaque: u32, out: &mut Vec<u8>) {
    for line in text.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(rest) = line.strip_prefix(b"STAT ") else {
            continue;
        };
        let (name, value) = match rest.iter().position(|&b| b == b' ') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, &b""[..]),
        };
        write_stat(out, opaque, name, value);
    }
}
