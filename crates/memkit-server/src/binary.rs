//! The binary protocol's side of a connection: decode one frame, run its logical command
//! with the one executor ([`crate::exec`]), write memcached's reply (`BinReply`).
//!
//! Replies follow memcached 1.6.18's `proto_bin.c`: a quiet opcode's success is not
//! answered, except a get hit; its errors always are, so a client's trailing `NOOP` sees
//! every failure. Success replies carry the item's CAS in the header, errors carry 0.

use memkit_engine::ItemView;
use memkit_protocol::binary::{
    self, Command, DecodeError, Request, Status, write_error, write_error_message, write_hit,
    write_miss_with_key, write_ok, write_stat,
};
use memkit_types::{ArithOutcome, DeleteOutcome, Error, StoreMode, StoreOutcome, Stored};

use crate::exec::{self, Reply};
use crate::exec::{Action, Cx, Step};
use crate::sasl::{Outcome, Session};
use crate::state::Shared;

/// Handles the frame at the start of `buf`, appending its reply to `out`. `sasl` is the
/// connection's SASL state, which the SASL commands change.
pub fn step(buf: &[u8], sh: &Shared, cx: &mut Cx, sasl: &mut Session, out: &mut Vec<u8>) -> Step {
    let auth = binary::Auth {
        sasl: sh.settings.sasl,
        authenticated: sasl.authenticated,
    };
    match binary::decode_request(buf, &sh.limits, auth) {
        Ok((req, used)) => {
            trace(cx.id, &req);
            let (action, mutates) = execute(&req, sh, cx, sasl, out);
            Step::Done {
                used,
                swallow: 0,
                action,
                mutates,
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
            if r.status == Status::TooLarge && exec::refuse_too_large(sh, cx, r.unlink) {
                // Not consumed: it runs again, and is answered, after the job.
                return Step::Done {
                    used: r.consumed,
                    swallow: 0,
                    action: Action::Remote,
                    mutates: true,
                };
            }
            r.encode(out);
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

/// `-vv`'s request line; the filter (`-vv`, `verbosity 2` or `RUST_LOG`) decides.
fn trace(conn_id: u64, req: &Request<'_>) {
    if !tracing::enabled!(target: crate::log::REQUESTS, tracing::Level::DEBUG) {
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
    tracing::debug!(
        target: crate::log::REQUESTS,
        "<{conn_id} binary opcode 0x{:02x} {}",
        req.opcode,
        String::from_utf8_lossy(key)
    );
}

fn execute(
    req: &Request<'_>,
    sh: &Shared,
    cx: &mut Cx,
    sasl: &mut Session,
    out: &mut Vec<u8>,
) -> (Action, bool) {
    let (opcode, opaque) = (req.opcode, req.opaque);
    if let Some(cmd) = req.command() {
        let (with_key, value) = match req.cmd {
            Command::Get {
                with_key, value, ..
            } => (with_key, value),
            _ => (false, true),
        };
        let not_stored = match &cmd {
            // memcached answers a refused ADD "exists" and a refused REPLACE "not found".
            memkit_protocol::Command::Store { opts, .. } => match (opts.mode, opts.cas) {
                (StoreMode::Add, None) => Status::KeyExists,
                (StoreMode::Replace, None) => Status::KeyNotFound,
                _ => Status::NotStored,
            },
            _ => Status::NotStored,
        };
        let mark = out.len();
        let mut reply = BinReply {
            out,
            req,
            key: cmd.key().unwrap_or_default(),
            with_key,
            value,
            not_stored,
        };
        exec::execute(&cmd, sh, cx, &mut reply);
        if cx.remote() {
            out.truncate(mark);
            return (Action::Remote, false);
        }
        if cx.fetch.is_some() {
            return (Action::Fetch, false);
        }
        return (Action::Continue, cmd.mutates());
    }
    match req.cmd {
        Command::Noop => write_ok(out, opcode, opaque, 0, b""),
        Command::Version => write_ok(out, opcode, opaque, 0, crate::config::VERSION.as_bytes()),
        Command::Quit => {
            if !req.quiet {
                write_ok(out, opcode, opaque, 0, b"");
            }
            return (Action::Close, false);
        }
        Command::Stat { group } => stat(sh, req, group, out),
        Command::SaslListMechs => {
            let mechs = sasl.list_mechs();
            write_ok(out, opcode, opaque, 0, mechs);
        }
        Command::SaslAuth { step, mech, data } => match sasl.auth(sh, step, mech, data) {
            Outcome::Authenticated => write_ok(out, opcode, opaque, 0, b"Authenticated"),
            Outcome::Continue => {
                binary::write_header(out, opcode, Status::AuthContinue, 0, 0, 0, opaque, 0)
            }
            Outcome::Failed => write_error(out, opcode, opaque, Status::AuthError),
        },
        // Storage commands went to the executor above.
        Command::Get { .. }
        | Command::Store { .. }
        | Command::Delete { .. }
        | Command::Arith { .. }
        | Command::Flush { .. } => {}
    }
    (Action::Continue, false)
}

/// The binary protocol's replies. A quiet request's success is silent (a get hit is not);
/// its errors are not.
struct BinReply<'o, 'r> {
    out: &'o mut Vec<u8>,
    req: &'r Request<'r>,
    key: &'r [u8],
    /// `GETK`/`GATK`: hits and misses carry the key.
    with_key: bool,
    /// `false` for `TOUCH`: a hit carries the flags only.
    value: bool,
    /// The status of a store the engine did not make.
    not_stored: Status,
}

impl BinReply<'_, '_> {
    fn ok(&mut self, cas: u64, body: &[u8]) {
        if !self.req.quiet {
            write_ok(self.out, self.req.opcode, self.req.opaque, cas, body);
        }
    }

    fn fail(&mut self, status: Status) {
        write_error(self.out, self.req.opcode, self.req.opaque, status);
    }
}

impl Reply for BinReply<'_, '_> {
    fn hit(&mut self, v: &ItemView<'_>) -> Option<usize> {
        let key = self.with_key.then_some(self.key);
        let value = self.value.then_some(v.value);
        write_hit(self.out, self.req, v.flags, v.cas, key, value);
        self.value.then(|| self.out.len() - v.value.len())
    }

    fn out(&mut self) -> &mut Vec<u8> {
        self.out
    }

    /// Quiet misses are silent; `GETK`/`GATK` misses carry the key instead of a message.
    fn miss(&mut self) {
        let (opcode, opaque) = (self.req.opcode, self.req.opaque);
        match (self.req.quiet, self.with_key) {
            (true, _) => {}
            (false, true) => write_miss_with_key(self.out, opcode, opaque, self.key),
            (false, false) => self.fail(Status::KeyNotFound),
        }
    }

    fn stored(&mut self, s: &Stored) {
        match s.outcome {
            StoreOutcome::Stored => self.ok(s.cas, b""),
            StoreOutcome::Exists => self.fail(Status::KeyExists),
            StoreOutcome::NotFound => self.fail(Status::KeyNotFound),
            StoreOutcome::NotStored => self.fail(self.not_stored),
        }
    }

    fn deleted(&mut self, d: DeleteOutcome) {
        match d {
            DeleteOutcome::Deleted => self.ok(0, b""),
            DeleteOutcome::NotFound => self.fail(Status::KeyNotFound),
            DeleteOutcome::Exists => self.fail(Status::KeyExists),
        }
    }

    fn arith(&mut self, a: &ArithOutcome) {
        match *a {
            ArithOutcome::Value { value, cas, .. } => self.ok(cas, &value.to_be_bytes()),
            ArithOutcome::NonNumeric => self.fail(Status::DeltaBadval),
            ArithOutcome::NotFound => self.fail(Status::KeyNotFound),
            ArithOutcome::Exists => self.fail(Status::KeyExists),
            ArithOutcome::NotStored => self.fail(Status::NotStored),
        }
    }

    fn touched(&mut self, found: bool) {
        if found {
            self.ok(0, b"");
        } else {
            self.fail(Status::KeyNotFound);
        }
    }

    fn flushed(&mut self) {
        self.ok(0, b"");
    }

    /// memcached's `process_bin_flush` answers `-F` with AUTH_ERROR, quiet or not.
    fn flush_refused(&mut self) {
        self.fail(Status::AuthError);
    }

    /// The binary protocol has no general server error: memcached answers its own
    /// failures (allocation, mostly) `ENOMEM` with a message, and so does memkitd for a
    /// store that failed underneath (the persistent layer).
    fn error(&mut self, e: &Error) {
        let (opcode, opaque) = (self.req.opcode, self.req.opaque);
        let oom: &[u8] = match self.req.cmd {
            Command::Store { .. } => b"Out of memory allocating item",
            Command::Arith { .. } => b"Out of memory incrementing value",
            _ => b"Out of memory",
        };
        match e {
            Error::TooLarge => self.fail(Status::TooLarge),
            Error::InvalidKey => self.fail(Status::Invalid),
            Error::OutOfMemory => {
                write_error_message(self.out, opcode, opaque, Status::OutOfMemory, oom)
            }
            other => {
                let msg = other.to_string();
                write_error_message(
                    self.out,
                    opcode,
                    opaque,
                    Status::OutOfMemory,
                    msg.as_bytes(),
                )
            }
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
