//! A connection's requests and replies without its I/O: the input read so far, the replies
//! rendered and not yet written, and where the connection is between them. Two drivers move
//! bytes in and out of it: [`crate::connection`] (a tokio task per connection: TLS, `-Y`,
//! idle timeouts, `sync` durability) and [`crate::evloop`] (memcached's worker loop, one
//! poller per worker thread, for every other connection). Both so answer alike by
//! construction.
//!
//! Memory per connection (the limits are listed in `docs/limits.md`):
//! - An idle connection holds no buffer. A worker loop lends its own buffers to the
//!   connections it drives ([`Spare`]); a connection task takes buffers from a small
//!   per-thread pool when bytes arrive. Both are given back when nothing is left to read
//!   (memcached's `rbuf_release`); one grown for a large request or reply is freed instead
//!   (its `conn_shrink`). Under load a connection keeps its buffers from batch to batch.
//! - Input holds at most one request: a value is bounded by `-I`, a line by the codec.
//! - Output is written out once it passes [`FLUSH_AT`], a multi-get's reply in pieces
//!   ([`Action::More`]), and nothing is read while a write is pending: a client that sends
//!   but never reads stops being read, and holds at most `FLUSH_AT` plus one value.

use std::sync::atomic::Ordering::Relaxed;

use bytes::Buf;
use memkit_protocol::binary::REQUEST_MAGIC;
use memkit_protocol::{DecodeError, ErrorReply, Request, decode_request, meta_key};

use crate::config::Protocol;
use crate::dispatch::{REPLY_CHUNK, dispatch, resume};
use crate::exec::{Action, Step};
use crate::state::{ConnState, Shared};

/// Write out pending replies once they reach this many bytes.
pub const FLUSH_AT: usize = REPLY_CHUNK;

/// The protocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    Text,
    Binary,
}

/// What [`Session::pump`] asks of its driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pump {
    /// Write the output out, then pump again.
    Flush,
    /// The input holds no complete request (read more once the output is written), or the
    /// last request asks the connection for more than a reply ([`Action`]).
    Done(Action),
}

/// A multi-get answered in parts: the request stays at the start of the input until its
/// last part is rendered.
#[derive(Debug, Clone, Copy)]
struct Part {
    /// The request's length in the input, and what to swallow after it.
    used: usize,
    swallow: u64,
    /// Byte offset into its key list of the keys answered so far.
    done: usize,
}

/// A connection's protocol state from request to request.
#[derive(Debug, Default)]
pub struct Session {
    /// Input read and not yet answered.
    pub rbuf: bytes::BytesMut,
    /// Replies rendered and not yet written.
    pub out: Vec<u8>,
    /// Input bytes still to discard as they arrive (a refused store's data block).
    pub swallow: u64,
    /// `-B auto` decides on the first byte, as memcached's `try_read_command_negotiate`.
    wire: Option<Wire>,
    /// SASL (`-S`): this binary connection's authentication.
    sasl: crate::sasl::Session,
    part: Option<Part>,
    /// Requests answered, wrapping: a driver compares two readings (`-R`; the idle timeout
    /// counts from the last complete request).
    pub requests: u32,
    /// A request that may have changed stored data was answered since the driver last
    /// cleared this (`sync` durability waits before writing its reply).
    pub mutated: bool,
}

impl Session {
    /// A session in the protocol `-B` names (`auto`: the first byte decides).
    pub fn new(protocol: Protocol) -> Session {
        let wire = match protocol {
            Protocol::Auto => None,
            Protocol::Ascii => Some(Wire::Text),
            Protocol::Binary => Some(Wire::Binary),
        };
        Session {
            wire,
            ..Session::default()
        }
    }

    /// Answers requests from the input, rendering replies into the output, until the output
    /// should be written out or the input holds nothing more to answer.
    pub fn pump(&mut self, sh: &Shared, id: u64) -> Pump {
        if !self.rbuf.is_empty() && self.out.capacity() == 0 {
            self.out = pool::take_out();
        }
        loop {
            let (part, action) = match self.part.take() {
                // The rest of a multi-get answered in parts.
                Some(part) => {
                    let action = dispatch_rest(&self.rbuf, part.done, sh, id, &mut self.out);
                    (part, action)
                }
                None => {
                    if self.swallow > 0 {
                        let n = self.swallow.min(self.rbuf.len() as u64);
                        self.consume(n as usize);
                        self.swallow -= n;
                        if self.swallow > 0 {
                            return Pump::Done(Action::Continue);
                        }
                    }
                    if self.rbuf.is_empty() {
                        return Pump::Done(Action::Continue);
                    }
                    let Step::Done {
                        used,
                        swallow,
                        action,
                        mutates,
                    } = self.step(sh, id)
                    else {
                        return Pump::Done(Action::Continue);
                    };
                    self.mutated |= mutates;
                    (
                        Part {
                            used,
                            swallow,
                            done: 0,
                        },
                        action,
                    )
                }
            };
            if let Some(a) = self.book(part, action) {
                return Pump::Done(a);
            }
            if self.part.is_some() || self.out.len() >= FLUSH_AT {
                return Pump::Flush;
            }
        }
    }

    /// Books what the request at the start of the input came to: a multi-get with parts
    /// still to render stays there (a `Request` is not kept across the write: it borrows
    /// the input), anything else is consumed. The action when it is the driver's to take.
    fn book(&mut self, part: Part, action: Action) -> Option<Action> {
        match action {
            Action::More(at) => {
                self.part = Some(Part {
                    done: part.done + at,
                    ..part
                });
                None
            }
            a => {
                self.consume(part.used);
                self.swallow = part.swallow;
                self.requests = self.requests.wrapping_add(1);
                (a != Action::Continue).then_some(a)
            }
        }
    }

    /// Drops the first `n` bytes of the input. All of it, the usual case one request at a
    /// time, is a clear that keeps the buffer's start where it is: an advance would move
    /// it, and the buffer would then be rebuilt (`BytesMut::reserve`) when the connection
    /// hands it back to the pool.
    fn consume(&mut self, n: usize) {
        if n == self.rbuf.len() {
            self.rbuf.clear();
        } else {
            self.rbuf.advance(n);
        }
    }

    /// Handles the request at the start of the input, in the connection's protocol.
    fn step(&mut self, sh: &Shared, id: u64) -> Step {
        let first = self.rbuf[0];
        let wire = self.wire.get_or_insert(if first == REQUEST_MAGIC {
            Wire::Binary
        } else {
            Wire::Text
        });
        match wire {
            Wire::Binary => crate::binary::step(&self.rbuf, sh, id, &mut self.sasl, &mut self.out),
            Wire::Text => text_step(&self.rbuf, sh, id, &mut self.out),
        }
    }

    /// The output was written: count it and empty it, keeping a modest buffer and giving
    /// back what one huge reply needed.
    pub fn written(&mut self, sh: &Shared) {
        sh.counters
            .bytes_written
            .fetch_add(self.out.len() as u64, Relaxed);
        self.out.clear();
        if self.out.capacity() > 4 * FLUSH_AT {
            self.out.shrink_to(pool::READ_CHUNK);
        }
    }

    /// Makes room for a read: a pooled buffer for a connection that gave its own back,
    /// consumed space reclaimed in place, or growth for a large request.
    pub fn room_to_read(&mut self) {
        if self.rbuf.capacity() == 0 {
            self.rbuf = pool::take_read();
        } else if self.rbuf.capacity() - self.rbuf.len() < pool::MIN_ROOM {
            self.rbuf.reserve(pool::READ_CHUNK);
        }
    }

    /// Where a connection with nothing to read is, for `stats conns`.
    pub fn waiting_state(&self) -> ConnState {
        if self.swallow > 0 {
            ConnState::Swallow
        } else if self.rbuf.is_empty() {
            ConnState::Waiting
        } else {
            ConnState::Read
        }
    }

    /// Nothing is left to read: give the buffers back (see `pool::release`).
    pub fn release(&mut self) {
        pool::release(&mut self.rbuf, &mut self.out);
    }

    /// Whether the connection holds a buffer of its own.
    pub fn holds_buffers(&self) -> bool {
        self.rbuf.capacity() > 0 || self.out.capacity() > 0
    }

    /// Lends a worker loop's buffers to a connection that holds none, for its turn.
    pub fn lend(&mut self, spare: &mut Spare) {
        if self.rbuf.capacity() == 0
            && let Some(b) = spare.rbufs.pop()
        {
            self.rbuf = b;
        }
        if self.out.capacity() == 0
            && let Some(b) = spare.outs.pop()
        {
            self.out = b;
        }
    }

    /// After a turn, gives the worker loop the buffers the connection left empty, while the
    /// worker keeps fewer than `Spare::KEEPS` of that kind; the rest stay (for
    /// [`Session::release`] to pool).
    pub fn give_back(&mut self, spare: &mut Spare) {
        let rbuf = &mut self.rbuf;
        if spare.rbufs.len() < Spare::KEEPS
            && rbuf.capacity() > 0
            && rbuf.is_empty()
            && pool::tidy_read(rbuf)
        {
            spare.rbufs.push(std::mem::take(rbuf));
        }
        if spare.outs.len() < Spare::KEEPS
            && self.out.is_empty()
            && pool::keeps_out(self.out.capacity())
        {
            spare.outs.push(std::mem::take(&mut self.out));
        }
    }

    /// The connection waits for its next request holding no buffer: the worker takes back
    /// what it can ([`Session::give_back`]), the thread's pool the rest.
    pub fn rest(&mut self, spare: &mut Spare) {
        self.give_back(spare);
        if self.holds_buffers() {
            self.release();
        }
    }
}

/// A worker loop's input and output buffers, lent to the connections it drives
/// ([`Session::lend`]) and taken back when they are done with them ([`Session::give_back`]).
/// At one request in flight a connection has nothing left to read after each reply, and
/// gives its buffers up (an idle connection holds none); the connections woken together
/// hold theirs at once, from their reads to their replies. A take from the thread's pool and
/// a give-back of each buffer cost about 120 instructions a request; a pop and a push here
/// cost a few.
#[derive(Debug, Default)]
pub struct Spare {
    rbufs: Vec<bytes::BytesMut>,
    outs: Vec<Vec<u8>>,
}

impl Spare {
    /// Buffers of each kind a worker keeps: a busy worker finds 5-9 connections woken
    /// together on average (`docs/BENCHMARKS.md`, issue 19), some polls many more. Past
    /// these, buffers come from the thread's pool.
    const KEEPS: usize = 32;
}

/// Handles the text or meta request at the start of `buf`, appending its reply to `out`.
fn text_step(buf: &[u8], sh: &Shared, id: u64, out: &mut Vec<u8>) -> Step {
    match decode_request(buf, &sh.limits) {
        Ok((req, used)) => {
            trace_request(sh, id, &req, &buf[..used]);
            Step::Done {
                used,
                swallow: 0,
                action: dispatch(&req, sh, id, out),
                mutates: req.mutates(),
            }
        }
        Err(DecodeError::Incomplete) => Step::Incomplete,
        Err(DecodeError::Reject(r)) => {
            r.encode(out);
            let mut mutates = false;
            if r.reply == ErrorReply::TooLarge {
                let key = r.unlink.and_then(|(k, b64)| meta_key(k, b64));
                mutates = key.is_some();
                sh.engine.refuse_too_large(key.as_deref());
            }
            Step::Done {
                used: r.consumed,
                swallow: r.swallow,
                action: Action::Continue,
                mutates,
            }
        }
        Err(DecodeError::Close | DecodeError::Malformed) => Step::Done {
            used: 0,
            swallow: 0,
            action: Action::Close,
            mutates: false,
        },
    }
}

/// The rest of the multi-get at the start of `buf`, from byte `skip` of its key list on
/// (the parts before it were answered). The request decoded before, so it decodes again.
fn dispatch_rest(buf: &[u8], skip: usize, sh: &Shared, id: u64, out: &mut Vec<u8>) -> Action {
    match decode_request(buf, &sh.limits) {
        Ok((req, _)) => dispatch(&resume(&req, skip), sh, id, out),
        Err(_) => Action::Close,
    }
}

fn trace_request(sh: &Shared, id: u64, req: &Request<'_>, raw: &[u8]) {
    if matches!(
        req,
        Request::MetaGet { .. }
            | Request::MetaSet { .. }
            | Request::MetaDelete { .. }
            | Request::MetaArith { .. }
            | Request::MetaNoop
            | Request::MetaDebug { .. }
    ) {
        sh.counters.cmd_meta.fetch_add(1, Relaxed);
    }
    // `-vv`'s request line; the filter (`-vv`, `verbosity 2` or `RUST_LOG`) decides.
    if tracing::enabled!(target: crate::log::REQUESTS, tracing::Level::DEBUG) {
        let line = raw.split(|&b| b == b'\n').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line);
        tracing::debug!(target: crate::log::REQUESTS, "<{id} {}", line.trim_end());
    }
}

/// Per-thread caches of connection buffers, so that connections going idle and busy again
/// do not allocate per batch, and idle ones hold nothing (memcached's per-thread rbuf cache).
/// A connection stays on its worker thread (`server::Workers`), so its buffers come and go
/// from that thread's pool; the embedded server's multi-thread runtime (no workers) may move
/// a task, and a buffer then lands in another thread's pool, which only changes where it is
/// cached.
mod pool {
    use std::cell::RefCell;

    use bytes::BytesMut;

    /// A fresh buffer's size, memcached's `READ_BUFFER_SIZE`.
    pub const READ_CHUNK: usize = 16 * 1024;
    /// A read first makes room for another `READ_CHUNK` when less than this is free.
    pub const MIN_ROOM: usize = 4096;
    /// Buffers grown past this for one large request or reply are freed, not kept.
    const KEEP_MAX: usize = 4 * READ_CHUNK;
    /// Buffers of each kind a worker thread keeps.
    const POOLED: usize = 64;

    thread_local! {
        static READ: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
        static OUT: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    }

    pub fn take_read() -> BytesMut {
        READ.with_borrow_mut(|p| p.pop())
            .unwrap_or_else(|| BytesMut::with_capacity(READ_CHUNK))
    }

    pub fn take_out() -> Vec<u8> {
        OUT.with_borrow_mut(|p| p.pop())
            .unwrap_or_else(|| Vec::with_capacity(READ_CHUNK))
    }

    /// The connection has nothing to read: give back its (empty) output buffer, and its
    /// input buffer unless it holds the start of a request, in which case a large one is
    /// swapped for a small one (memcached's `conn_shrink`).
    pub fn release(rbuf: &mut BytesMut, out: &mut Vec<u8>) {
        if rbuf.is_empty() {
            // No buffer at all when a worker loop took it back (`Session::give_back`).
            let mut b = std::mem::take(rbuf);
            if b.capacity() > 0 && tidy_read(&mut b) {
                READ.with_borrow_mut(|p| (p.len() < POOLED).then(|| p.push(b)));
            }
        } else if rbuf.capacity() > KEEP_MAX && rbuf.len() < READ_CHUNK / 2 {
            let mut small = take_read();
            small.extend_from_slice(rbuf);
            *rbuf = small;
        }
        if out.capacity() > 0 {
            let mut b = std::mem::take(out);
            b.clear();
            if keeps_out(b.capacity()) {
                OUT.with_borrow_mut(|p| (p.len() < POOLED).then(|| p.push(b)));
            }
        }
    }

    /// Readies an empty input buffer for its next connection: whether it is one to keep.
    pub fn tidy_read(b: &mut BytesMut) -> bool {
        // Reclaims the space `advance` consumed, in place: nothing is copied.
        b.clear();
        b.reserve(READ_CHUNK);
        b.capacity() <= KEEP_MAX
    }

    /// Whether an output buffer of this capacity is one to keep for the next connection.
    pub fn keeps_out(capacity: usize) -> bool {
        (READ_CHUNK..=KEEP_MAX).contains(&capacity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker's buffers go to the connection it drives and come back when the connection
    /// is left with nothing to read; a partial request keeps its input buffer.
    #[test]
    fn a_worker_lends_its_buffers_for_a_turn() {
        let mut spare = Spare::default();
        let mut s = Session::new(Protocol::Auto);
        s.room_to_read();
        s.out = pool::take_out();
        s.give_back(&mut spare);
        assert!(!s.holds_buffers(), "empty buffers go back to the worker");
        assert_eq!((spare.rbufs.len(), spare.outs.len()), (1, 1));
        assert!(spare.rbufs[0].capacity() >= pool::READ_CHUNK);
        let (rptr, optr) = (spare.rbufs[0].as_ptr(), spare.outs[0].as_ptr());

        let mut other = Session::new(Protocol::Auto);
        other.lend(&mut spare);
        assert_eq!((spare.rbufs.len(), spare.outs.len()), (0, 0));
        assert_eq!((other.rbuf.as_ptr(), other.out.as_ptr()), (rptr, optr));

        // The start of a request stays with its connection; the empty output goes back.
        other.rbuf.extend_from_slice(b"get fo");
        other.give_back(&mut spare);
        assert_eq!(&other.rbuf[..], b"get fo");
        assert_eq!((spare.rbufs.len(), spare.outs.len()), (0, 1));
        assert_eq!(spare.outs[0].as_ptr(), optr);

        // Driven again, it keeps its own input buffer and borrows only an output buffer.
        other.lend(&mut spare);
        assert_eq!(&other.rbuf[..], b"get fo");
        assert_eq!(other.out.as_ptr(), optr);
        assert!(spare.outs.is_empty());
    }

    /// Connections woken together each hold a worker's buffers at once, and the worker
    /// keeps no more than its bound of them.
    #[test]
    fn a_worker_keeps_a_bounded_stack_of_buffers() {
        let mut spare = Spare::default();
        let mut conns: Vec<Session> = (0..Spare::KEEPS + 8)
            .map(|_| Session::new(Protocol::Auto))
            .collect();
        for c in &mut conns {
            c.room_to_read();
            c.out = pool::take_out();
        }
        let ptrs: std::collections::HashSet<_> = conns.iter().map(|c| c.rbuf.as_ptr()).collect();
        assert_eq!(
            ptrs.len(),
            conns.len(),
            "each connection has its own buffer"
        );
        for c in &mut conns {
            c.give_back(&mut spare);
        }
        assert_eq!(
            (spare.rbufs.len(), spare.outs.len()),
            (Spare::KEEPS, Spare::KEEPS)
        );
        let kept = conns.iter().filter(|c| c.holds_buffers()).count();
        assert_eq!(kept, 8, "the buffers past the bound stay for the pool");
        let mut woken: Vec<Session> = (0..3).map(|_| Session::new(Protocol::Auto)).collect();
        for c in &mut woken {
            c.lend(&mut spare);
        }
        let lent: std::collections::HashSet<_> = woken.iter().map(|c| c.out.as_ptr()).collect();
        assert_eq!(lent.len(), 3);
        assert_eq!(spare.outs.len(), Spare::KEEPS - 3);
    }
}
