//! A connection's requests and replies without its I/O: the input read so far, the replies
//! rendered and not yet written, and the connection's state between them. [`Session::pump`]
//! decides what happens next and returns it ([`Next`]); a driver only carries it out:
//! [`crate::evloop`] (memcached's worker loop, one poller or ring per worker thread) and
//! [`crate::task`] (a tokio task per connection, for TLS and for embedders without worker
//! threads). Both so answer alike by construction.
//!
//! The states (`State`), under memcached's names where it has one:
//! - `Login` (`-Y`): nothing but the login phase runs until it succeeds (`login`);
//! - `Ready` (conn_new_cmd): the next request is at the start of the input, or not yet in;
//! - `Swallow` (conn_swallow): a refused store's data block is discarded as it arrives;
//! - `Part`: a multi-get answered in parts, the request kept at the start of the input;
//! - `Dumping`: `lru_crawler metadump`/`mgdump` listing the cache a bounded batch at a time
//!   (`Engine::crawl`), as fast as the client reads it;
//! - `Parked` (conn_io_queue): replies wait for a [`crate::state::gate::Gate`] (a durable
//!   commit) or for values read from flash (`crate::exec::flash`); nothing more of the
//!   connection executes until the driver calls [`Session::resume`];
//! - `Ended`: `quit`, `shutdown`, `watch` or a protocol error decided the end; the output
//!   is written and the driver acts.
//!
//! Memory per connection (the limits are listed in `docs/limits.md`):
//! - An idle connection holds no buffer. A worker loop lends its own buffers to the
//!   connections it drives ([`Spare`]); a connection task takes buffers from a small
//!   per-thread pool when bytes arrive (`pool`). Both are given back when nothing is left
//!   to read (memcached's `rbuf_release`); one grown for a large request or reply is freed
//!   instead (its `conn_shrink`). Under load a connection keeps its buffers from batch to
//!   batch.
//! - Input holds at most one request: a value is bounded by `-I`, a line by the codec.
//! - Output is written out once it passes [`FLUSH_AT`], a multi-get's reply in pieces, and
//!   nothing is read while a write is pending: a client that sends but never reads stops
//!   being read, and holds at most `FLUSH_AT` plus one value.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Buf;
use memkit_protocol::binary::REQUEST_MAGIC;

use crate::config::Protocol;
use crate::dispatch::REPLY_CHUNK;
use memkit_engine::DumpCursor;

use crate::exec::flash::{Reads, Results};
use crate::exec::{Action, Cx, Dump, Remote, Step};
use crate::state::{ConnLive, ConnState, Registered, Shared};
use text::{dispatch_rest, text_step};

mod gather;
mod login;
mod pool;
#[cfg(test)]
mod tests;
mod text;

pub use crate::state::gate::{Completer, Outcome};

/// Write out pending replies once they reach this many bytes.
pub const FLUSH_AT: usize = REPLY_CHUNK;

/// Items a dump lists under one shard lock.
const DUMP_BATCH: usize = 64;

/// What a connection does next, as its session decides; the driver carries it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Write the output out, then pump again.
    Write,
    /// The input holds no complete request: write what is pending, then read.
    Read,
    /// `-R` requests of this event were answered (memcached's `reqs_per_event`): write what
    /// is pending and let the worker's other connections go first, then read.
    GiveWay,
    /// Replies wait (the output is held): hand [`Session::park`] a completer, and give its
    /// outcome to [`Session::resume`]. Nothing else is done for the connection meanwhile.
    Park,
    /// Write what is pending, then close (`quit`, a protocol error, a failed wait).
    Close,
    /// Write what is pending, close, and stop the server (`shutdown` with `-A`).
    Shutdown,
    /// Write what is pending, then stream `watch` events of these kinds.
    Watch(u8),
}

/// How the connection ends, once decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Close,
    Shutdown,
    Watch(u8),
}

/// What the connection does once its output may leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    Write,
    Read,
    End(End),
}

/// The protocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    Text,
    Binary,
}

/// Where a connection is between requests (see the module's list).
#[derive(Debug)]
enum State {
    Login(login::Phase),
    Ready,
    Swallow(u64),
    Part(Part),
    Dumping(Box<(Dump, DumpCursor)>),
    Parked(Box<Parked>),
    Ended(End),
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

/// A parked connection: what its replies wait for, what it does once they may leave, and
/// the state it returns to.
#[derive(Debug)]
struct Parked {
    wait: Wait,
    after: After,
    then: State,
}

/// What a parked connection waits for.
#[derive(Debug)]
enum Wait {
    /// The gate to pass this ticket.
    Gate(u64),
    /// Reads of values on flash: those its replies hold the place of, and one a request
    /// needs in RAM before it runs.
    Flash(Box<Reads>),
    /// The replicated group: the request's writes committed, a read barrier passed.
    Group(Box<crate::replica::Job>),
    /// The router's backends: the requests' outcomes.
    Route(Box<crate::router::Job>),
}

/// A connection's protocol state from request to request.
#[derive(Debug)]
pub struct Session {
    /// Input read and not yet answered.
    pub rbuf: bytes::BytesMut,
    /// Replies rendered and not yet written; `sent` of them are written already.
    pub out: Vec<u8>,
    sent: usize,
    reg: Registered,
    live: Arc<ConnLive>,
    state: State,
    /// `-B auto` decides on the first byte, as memcached's `try_read_command_negotiate`.
    wire: Option<Wire>,
    /// SASL (`-S`): this binary connection's authentication.
    sasl: crate::sasl::Session,
    /// Requests answered, wrapping; and their count when the current event began (`-R`
    /// counts the requests of one event).
    requests: u32,
    event_start: u32,
    /// Input searched for a newline without finding one: a text line arriving in pieces is
    /// searched from where the last search stopped.
    scanned: usize,
    /// The last read left more in the socket: `-R` may make the connection give way.
    more: bool,
    /// Reads from flash the output waits for: replies rendered with a value's place held,
    /// and a value the request at the start of the input needs in RAM first (`append`,
    /// `incr`... of a value on flash, run again once it is back). The connection parks
    /// before any of its output leaves. Boxed: rare, and a connection's slot stays small.
    flash: Option<Box<Reads>>,
    /// The request at the start of the input runs again after a fetch: once only.
    fetched: bool,
    /// In a replicated group or a router: what the request at the start of the input waits
    /// for, and what came of it (see `crate::exec::replicate`, `crate::exec::route`).
    remote: Option<Box<Remote>>,
    /// Replies to writes wait for the server's gate (`--persist` `sync`)...
    gated: bool,
    /// ... and some such replies are in the output.
    unacked: bool,
}

impl Session {
    /// A session for the connection `reg` registered, in the protocol `-B` names (`auto`:
    /// the first byte decides), logging in first under `-Y`.
    pub fn new(reg: Registered, live: Arc<ConnLive>) -> Session {
        let sh = &reg.sh;
        let wire = match sh.settings.protocol {
            Protocol::Auto => None,
            Protocol::Ascii => Some(Wire::Text),
            Protocol::Binary => Some(Wire::Binary),
        };
        let state = match sh.auth {
            Some(_) => State::Login(login::Phase::default()),
            None => State::Ready,
        };
        Session {
            flash: None,
            fetched: false,
            remote: None,
            gated: sh.gate().is_some(),
            rbuf: bytes::BytesMut::new(),
            out: Vec::new(),
            sent: 0,
            live,
            state,
            wire,
            sasl: crate::sasl::Session::default(),
            requests: 0,
            event_start: 0,
            scanned: 0,
            more: false,
            unacked: false,
            reg,
        }
    }

    /// The server's state.
    pub fn sh(&self) -> &Arc<Shared> {
        &self.reg.sh
    }

    /// The connection's registry entry (`stats conns`).
    pub fn live(&self) -> &ConnLive {
        &self.live
    }

    /// Gives up the registration, for a connection that moves to another driver.
    pub fn into_registration(self) -> Registered {
        self.reg
    }

    /// Answers requests from the input, rendering replies into the output, until the output
    /// should be written out, the input holds nothing more to answer, or replies must wait.
    pub fn pump(&mut self) -> Next {
        if !self.rbuf.is_empty() && self.out.capacity() == 0 {
            self.out = pool::take_out();
        }
        loop {
            if let Some(after) = self.advance() {
                return self.settle(after);
            }
        }
    }

    /// One step of the state machine: `None` to go on, or what the connection does once
    /// its output may leave.
    fn advance(&mut self) -> Option<After> {
        match &mut self.state {
            State::Ready => {
                if self.rbuf.is_empty() {
                    return Some(After::Read);
                }
                let ticket = self.ticket();
                match self.step() {
                    Step::Incomplete => Some(After::Read),
                    Step::Done {
                        used,
                        swallow,
                        action,
                        mutates,
                    } => {
                        self.unacked |= mutates && self.ticket() != ticket;
                        let part = Part {
                            used,
                            swallow,
                            done: 0,
                        };
                        self.book(part, action)
                    }
                }
            }
            State::Part(part) => {
                let part = *part;
                let ticket = self.ticket();
                let mut cx = self.cx();
                let sh = &self.reg.sh;
                let action = dispatch_rest(&self.rbuf, part.done, sh, &mut cx, &mut self.out);
                self.keep(cx);
                // A `gat` of many keys touches them part by part.
                self.unacked |= self.ticket() != ticket;
                self.book(part, action)
            }
            State::Swallow(left) => {
                let n = (*left).min(self.rbuf.len() as u64);
                *left -= n;
                let done = *left == 0;
                self.consume(n as usize);
                if !done {
                    return Some(After::Read);
                }
                self.state = State::Ready;
                None
            }
            State::Login(phase) => {
                let Some(auth) = self.reg.sh.auth.as_deref() else {
                    self.state = State::Ready;
                    return None;
                };
                match phase.step(&mut self.rbuf, auth) {
                    login::Step::More => Some(After::Read),
                    login::Step::Reply(r) => {
                        self.out.extend_from_slice(r);
                        None
                    }
                    login::Step::Authed => {
                        self.out.extend_from_slice(b"STORED\r\n");
                        self.state = State::Ready;
                        None
                    }
                    login::Step::Close => Some(self.end(End::Close)),
                }
            }
            State::Dumping(_) => self.dump(),
            State::Ended(end) => Some(After::End(*end)),
            // Driven while parked (it should not be): still parked.
            State::Parked(p) => Some(p.after),
        }
    }

    /// Books what the request at the start of the input came to: a multi-get with parts
    /// still to render stays there (a `Request` is not kept across the write: it borrows
    /// the input), anything else is consumed.
    fn book(&mut self, part: Part, action: Action) -> Option<After> {
        if matches!(action, Action::Fetch | Action::Remote) {
            // Not consumed: it runs again once its value is back in RAM, or once the group
            // or the backends have answered (with the requests behind it: `gather`).
            if matches!(action, Action::Remote) {
                self.gather(part.used);
            }
            self.state = State::Ready;
            return Some(After::Write);
        }
        self.fetched = false;
        if let Action::More(at) = action {
            self.state = State::Part(Part {
                done: part.done + at,
                ..part
            });
            return Some(After::Write);
        }
        self.consume(part.used);
        if let Some(r) = &mut self.remote {
            r.answered();
        }
        self.state = match part.swallow {
            0 => State::Ready,
            n => State::Swallow(n),
        };
        self.requests = self.requests.wrapping_add(1);
        // memcached's `last_cmd_time`: `stats conns` and `-o idle_timeout` read it.
        let now = self.reg.sh.uptime_secs.load(Relaxed);
        self.live.last_cmd.store(now, Relaxed);
        match action {
            // (`Fetch` and `Remote` returned above.)
            Action::Continue | Action::More(_) | Action::Fetch | Action::Remote => {
                (self.out.len() >= FLUSH_AT).then_some(After::Write)
            }
            Action::Close => Some(self.end(End::Close)),
            Action::Shutdown => Some(self.end(End::Shutdown)),
            Action::Watch(mask) => Some(self.end(End::Watch(mask))),
            Action::Dump(kind) => {
                self.state = State::Dumping(Box::new((kind, DumpCursor::default())));
                None
            }
        }
    }

    /// The next batches of a dump, until the output should be written out or the dump is
    /// over. Only a batch's shard is locked, and only while its lines are rendered; the
    /// driver writes the output before the next call, so a client that does not read stops
    /// the dump, which then holds the output and a cursor.
    fn dump(&mut self) -> Option<After> {
        let State::Dumping(d) = &mut self.state else {
            return None;
        };
        let (kind, cursor) = &mut **d;
        let sh = &self.reg.sh;
        while self.out.len() < FLUSH_AT {
            let more = sh.engine.crawl(cursor, DUMP_BATCH, |item| {
                crate::stats::dump_line(sh, *kind, &item, &mut self.out)
            });
            if !more {
                crate::stats::dump_end(*kind, &mut self.out);
                self.state = State::Ready;
                return None;
            }
        }
        Some(After::Write)
    }

    /// The gate's ticket now (0 when replies wait for nothing). A write the engine made
    /// takes a ticket; one it refused (a failed store refuses every write) takes none, and
    /// its error reply need not wait: so the ticket is read before and after each request
    /// that may write, and only a change makes the replies wait. Another connection's
    /// write in between makes them wait too, which is merely conservative.
    fn ticket(&self) -> u64 {
        match self.gated {
            true => self.reg.sh.gate().map_or(0, |g| g.ticket()),
            false => 0,
        }
    }

    fn end(&mut self, end: End) -> After {
        self.state = State::Ended(end);
        After::End(end)
    }

    /// What the driver does next, once replies to writes may leave: if the gate has not
    /// passed them yet, the connection parks.
    fn settle(&mut self, after: After) -> Next {
        if let Some(reads) = self.flash.take() {
            return self.park_on(Wait::Flash(reads), after);
        }
        let wait = match self.remote.as_deref_mut() {
            Some(Remote::Group(r)) => r.take_job().map(|j| Wait::Group(Box::new(j))),
            Some(Remote::Route(p)) => p.take_job().map(|j| Wait::Route(Box::new(j))),
            None => None,
        };
        if let Some(wait) = wait {
            return self.park_on(wait, after);
        }
        if self.unacked && !self.out.is_empty() {
            let gate = self
                .reg
                .sh
                .gate()
                .expect("a gated session's server has a gate");
            let ticket = gate.ticket();
            if !gate.passed(ticket) {
                return self.park_on(Wait::Gate(ticket), after);
            }
            self.unacked = false;
        }
        match after {
            After::Write => Next::Write,
            After::Read => {
                let answered = self.requests.wrapping_sub(self.event_start) as usize;
                if self.more && answered >= self.reg.sh.settings.reqs_per_event {
                    self.reg.sh.counters.conn_yields.fetch_add(1, Relaxed);
                    self.event_start = self.requests;
                    Next::GiveWay
                } else {
                    Next::Read
                }
            }
            After::End(End::Close) => Next::Close,
            After::End(End::Shutdown) => Next::Shutdown,
            After::End(End::Watch(mask)) => Next::Watch(mask),
        }
    }

    /// Parks the connection until `wait` is over, then it does `after`.
    fn park_on(&mut self, wait: Wait, after: After) -> Next {
        let then = std::mem::replace(&mut self.state, State::Ready);
        self.state = State::Parked(Box::new(Parked { wait, after, then }));
        self.live.set(ConnState::IoQueue);
        Next::Park
    }

    /// Hands what a parked connection waits for the completer ([`Next::Park`]): the gate,
    /// or the flash store's readers.
    pub fn park(&mut self, done: Completer) {
        let State::Parked(p) = &mut self.state else {
            return done.complete(Ok(()));
        };
        match &mut p.wait {
            Wait::Gate(ticket) => match self.reg.sh.gate() {
                Some(gate) => gate.when(*ticket, done),
                None => done.complete(Err("no gate".into())),
            },
            Wait::Flash(reads) => crate::exec::flash::submit(&self.reg.sh, reads, done),
            Wait::Group(job) => match self.reg.sh.replica() {
                Some(rep) => rep.submit(job, done),
                None => done.complete(Err("no replicated group".into())),
            },
            Wait::Route(job) => match self.reg.sh.router() {
                Some(router) => router.submit(job, done),
                None => done.complete(Err("not a router".into())),
            },
        }
    }

    /// [`Session::park`], except that a router's job is handed back for the caller to
    /// await (a connection's own task: [`crate::router::Router::job`]).
    pub fn park_here(&mut self, done: Completer) -> Option<crate::router::JobFuture> {
        if let State::Parked(p) = &mut self.state
            && let Wait::Route(job) = &mut p.wait
            && let Some(router) = self.reg.sh.router()
        {
            return Some(router.job(job, done));
        }
        self.park(done);
        None
    }

    /// A parked connection's wait ended. On success its replies may leave; on failure they
    /// must not (the writes they acknowledge may be lost), and the connection closes with
    /// them unsent.
    pub fn resume(&mut self, outcome: Outcome) -> Next {
        let State::Parked(p) = std::mem::replace(&mut self.state, State::Ready) else {
            return self.pump();
        };
        let Parked { wait, after, then } = *p;
        self.state = then;
        self.live.set(ConnState::ParseCmd);
        // Flash reads that failed are misses, not lost writes: the replies go out either way.
        if let Wait::Flash(reads) = wait {
            self.fetched = reads.fetch.is_some();
            crate::exec::flash::fill(&self.reg.sh, &mut self.out, *reads);
            return self.settle(after);
        }
        // The group's failures are answered request by request, in the second run.
        if let Wait::Group(job) = wait {
            if let Some(Remote::Group(r)) = self.remote.as_deref_mut() {
                r.finish(*job);
            }
            return self.settle(after);
        }
        if let Wait::Route(job) = wait {
            if let Some(Remote::Route(p)) = self.remote.as_deref_mut() {
                p.finish(*job);
            }
            return self.settle(after);
        }
        match outcome {
            Ok(()) => {
                self.unacked = false;
                self.settle(after)
            }
            Err(why) => {
                tracing::warn!("connection {}: replies withheld: {why}", self.reg.id);
                self.out.clear();
                self.sent = 0;
                self.end(End::Close);
                Next::Close
            }
        }
    }

    /// Whether the connection waits for a completion.
    pub fn is_parked(&self) -> bool {
        matches!(self.state, State::Parked(_))
    }

    /// A new event of the connection (input arrived, or it is driven again after giving
    /// way): `-R` counts the requests answered from here.
    pub fn event(&mut self) {
        self.event_start = self.requests;
    }

    /// `n` bytes arrived in the input (`more`: the socket holds more than the read took):
    /// counted, and the connection is parsing them.
    pub fn arrived(&mut self, n: usize, more: bool) {
        self.more = more;
        if let Some(Remote::Group(r)) = self.remote.as_deref_mut() {
            r.arrived();
        }
        self.reg.sh.counters.bytes_read.add(n as u64);
        self.live.set(ConnState::ParseCmd);
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
        self.scanned = 0;
    }

    /// Handles the request at the start of the input, in the connection's protocol.
    fn step(&mut self) -> Step {
        let first = self.rbuf[0];
        let wire = *self.wire.get_or_insert(if first == REQUEST_MAGIC {
            Wire::Binary
        } else {
            Wire::Text
        });
        let mut cx = self.cx();
        let step = self.step_in(&mut cx, wire);
        self.keep(cx);
        step
    }

    /// What the executor is to know of the connection for the next request. Its flash
    /// reads join those of the requests before it (`Cx::holes`).
    fn cx(&mut self) -> Cx {
        Cx {
            holes: self.flash.take().map(|r| r.holes).unwrap_or_default(),
            may_fetch: !self.fetched,
            remote: self.remote.take(),
            ..Cx::new(self.reg.id)
        }
    }

    /// Takes back what the executor left for the connection to wait for.
    fn keep(&mut self, mut cx: Cx) {
        self.remote = cx.remote.take();
        if let Some(Remote::Route(p)) = self.remote.as_deref_mut() {
            p.end_request();
        }
        if !cx.holes.is_empty() || cx.fetch.is_some() {
            self.flash = Some(Box::new(Reads {
                holes: cx.holes,
                fetch: cx.fetch,
                results: Results::default(),
            }));
        }
    }

    /// [`Self::step`] once the protocol is known.
    fn step_in(&mut self, cx: &mut Cx, wire: Wire) -> Step {
        let sh = &self.reg.sh;
        match wire {
            Wire::Binary => crate::binary::step(&self.rbuf, sh, cx, &mut self.sasl, &mut self.out),
            Wire::Text => {
                if self.scanned > 0 && !self.rbuf[self.scanned..].contains(&b'\n') {
                    // Still no end of line: only the length decides (a line too long).
                    self.scanned = self.rbuf.len();
                    if memkit_protocol::unterminated(&self.rbuf, &sh.limits) {
                        return Step::Incomplete;
                    }
                }
                let step = text_step(&self.rbuf, sh, cx, &mut self.out);
                if step == Step::Incomplete && !self.rbuf.contains(&b'\n') {
                    self.scanned = self.rbuf.len();
                }
                step
            }
        }
    }

    /// The output not written yet.
    pub fn unsent(&self) -> &[u8] {
        &self.out[self.sent..]
    }

    /// `n` more bytes of the output were written: counted; once all of it is, the output is
    /// emptied, keeping a modest buffer and giving back what one huge reply needed.
    pub fn wrote(&mut self, n: usize) {
        let sh = &self.reg.sh;
        sh.counters.bytes_written.add(n as u64);
        self.sent += n;
        if self.sent < self.out.len() {
            return;
        }
        self.sent = 0;
        self.out.clear();
        if self.out.capacity() > 4 * FLUSH_AT {
            self.out.shrink_to(pool::READ_CHUNK);
        }
    }

    /// The output, for a backend that sends it whole: its buffer is the kernel's until the
    /// send completes and [`Session::output_back`] returns it.
    pub fn take_output(&mut self) -> Vec<u8> {
        if self.sent > 0 {
            self.out.drain(..self.sent);
            self.sent = 0;
        }
        std::mem::take(&mut self.out)
    }

    /// A send of [`Session::take_output`]'s buffer completed: counted, and the buffer
    /// serves the next output (or goes to the worker's spares).
    pub fn output_back(&mut self, mut buf: Vec<u8>, spare: &mut Spare) {
        let sh = &self.reg.sh;
        sh.counters.bytes_written.add(buf.len() as u64);
        buf.clear();
        if self.out.capacity() == 0 && buf.capacity() <= 4 * FLUSH_AT {
            self.out = buf;
        } else {
            spare.put_out(buf);
        }
    }

    /// The output was written whole.
    pub fn written(&mut self) {
        self.wrote(self.out.len() - self.sent);
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

    /// Where a connection with nothing to do but read is, for `stats conns`.
    pub fn waiting_state(&self) -> ConnState {
        match self.state {
            State::Swallow(_) => ConnState::Swallow,
            State::Parked(_) => ConnState::IoQueue,
            State::Login(_) if self.rbuf.is_empty() => ConnState::NewCmd,
            _ if self.rbuf.is_empty() => ConnState::Waiting,
            _ => ConnState::Read,
        }
    }

    /// Records where the connection is now, for `stats conns`.
    pub fn mark(&self, state: ConnState) {
        self.live.set(state);
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
    /// together on average (`docs/BENCHMARKS.md`), some polls many more. Past these,
    /// buffers come from the thread's pool.
    const KEEPS: usize = 32;

    /// An output buffer for a send, or an empty one.
    pub fn take_out(&mut self) -> Vec<u8> {
        self.outs.pop().unwrap_or_default()
    }

    /// Takes back an output buffer a send is done with, while the worker keeps fewer than
    /// its bound of them.
    pub fn put_out(&mut self, mut b: Vec<u8>) {
        b.clear();
        if self.outs.len() < Spare::KEEPS && pool::keeps_out(b.capacity()) {
            self.outs.push(b);
        }
    }
}
