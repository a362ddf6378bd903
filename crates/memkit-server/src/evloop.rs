//! memcached's worker loop: one poller per worker thread drives the sessions of its
//! connections directly, as memcached's `event_base_loop` drives its `conn` state machines.
//!
//! Why not a tokio task per connection: at one request in flight per connection (a PHP or
//! Python worker's traffic) a request is one readiness event, and a runtime turns each event
//! into a task wake-up, a scheduler pass and a poll through the task's future: about half of
//! the user-space instructions a request cost (`docs/BENCHMARKS.md`, issue 19). Here an
//! event is a slot lookup, a read, [`Session::pump`] and a write. An idle connection is its
//! slot (a socket, a session with no buffers, its registry entry) and nothing else.
//!
//! The connections one poll wakes are read first, then answered and written one by one.
//! Between its read and its answer, each connection's first lookup is warmed
//! ([`memkit_engine::Engine::prefetch`]), so a get's two cache misses (index bucket, record)
//! overlap the other connections' work instead of stalling its own.
//!
//! What a connection needs the runtime for (TLS, `-Y`, `-o idle_timeout`, `--persist`
//! `sync` mode) is served by [`crate::connection`] on the worker's tokio runtime instead; a
//! loop connection that becomes a `watch` stream moves there too.
//!
//! The poller is edge-triggered: a connection reads until a read comes back short (the
//! socket is drained: the next arrival is a new edge) and writes until the socket takes no
//! more, then waits for the next edge. A connection that keeps sending gives way to its
//! neighbours after `-R` requests (memcached's `reqs_per_event`, counted in `conn_yields`)
//! or [`READS_PER_TURN`] reads (a large value or a swallowed one arriving), and is driven
//! again after the others' events.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc;

use bytes::{BufMut, BytesMut};
use memkit_engine::Prefetch;
use mio::net::{TcpStream, UnixStream};
use mio::{Events, Interest, Poll, Token, Waker};

use crate::dispatch::Action;
use crate::server::{ConnLive, ConnState, Moved, Registered, Shared};
use crate::session::{Pump, Session, Spare};

/// Reads a connection may make in one turn before its neighbours' events are served:
/// 1 MiB in 16 KiB reads.
const READS_PER_TURN: u32 = 64;

/// The waker's token; connections' tokens are their slots.
const WAKE: Token = Token(usize::MAX);

/// An accepted connection on its way to a loop.
#[derive(Debug)]
pub(crate) struct Handoff {
    pub socket: Moved,
    pub registered: Registered,
    pub live: Arc<ConnLive>,
}

/// A worker loop's mailbox: new connections, and the stop (the sender dropped).
#[derive(Debug)]
pub(crate) struct Loop {
    tx: Option<mpsc::Sender<Handoff>>,
    waker: Waker,
}

impl Loop {
    /// Starts a loop on a thread named `name`; `runtime` serves its connections that turn
    /// into `watch` streams.
    pub fn start(
        name: String,
        runtime: tokio::runtime::Handle,
    ) -> io::Result<(Loop, std::thread::JoinHandle<()>)> {
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), WAKE)?;
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            Worker {
                poll,
                rx,
                slots: Vec::new(),
                free: Vec::new(),
                again: Vec::new(),
                spare: Spare::default(),
                runtime,
            }
            .run()
        })?;
        let tx = Some(tx);
        Ok((Loop { tx, waker }, thread))
    }

    /// Hands a connection to the loop. If the loop is gone the connection is dropped, which
    /// undoes its registration.
    pub fn send(&self, h: Handoff) {
        if let Some(tx) = &self.tx
            && tx.send(h).is_ok()
        {
            let _ = self.waker.wake();
        }
    }

    /// Tells the loop to close its connections and end.
    pub fn stop(&mut self) {
        self.tx = None;
        let _ = self.waker.wake();
    }
}

/// A worker thread's loop state.
struct Worker {
    poll: Poll,
    rx: mpsc::Receiver<Handoff>,
    /// Connections by token; `None` slots are listed in `free`.
    slots: Vec<Option<LoopConn>>,
    free: Vec<usize>,
    /// Connections that gave way with input left, driven again after this round's events.
    again: Vec<usize>,
    /// Buffers for the connection being driven, when it has none of its own.
    spare: Spare,
    runtime: tokio::runtime::Handle,
}

impl Worker {
    fn run(mut self) {
        let mut events = Events::with_capacity(256);
        let mut woken = Vec::with_capacity(256);
        loop {
            // Connections that gave way must not wait for an edge that already came.
            let timeout = (!self.again.is_empty()).then_some(std::time::Duration::ZERO);
            if let Err(e) = self.poll.poll(&mut events, timeout)
                && e.kind() != io::ErrorKind::Interrupted
            {
                tracing::error!("worker poll failed: {e}");
                return;
            }
            for i in std::mem::take(&mut self.again) {
                self.drive(i);
            }
            woken.clear();
            for ev in events.iter() {
                if ev.token() == WAKE {
                    if !self.take_new() {
                        return;
                    }
                    continue;
                }
                let closed = ev.is_read_closed() || ev.is_error();
                woken.push((ev.token().0, closed || ev.is_readable(), closed));
            }
            self.serve(&woken);
        }
    }

    /// Serves the connections one poll woke: first every read, then each connection's
    /// answer and write. Between a connection's read and its answer, the two cache misses of
    /// its first lookup (index bucket, then record) are started a step apart, each while a
    /// system call or another connection's work runs, so that its lookup does not wait for
    /// memory (`docs/BENCHMARKS.md`, issue 19). A connection woken alone has nothing to
    /// overlap its misses with, and is not warmed.
    fn serve(&mut self, woken: &[(usize, bool, bool)]) {
        let last = woken.len().wrapping_sub(1);
        for (n, &(slot, input, closed)) in woken.iter().enumerate() {
            self.read_ahead(slot, input, closed, last > 0);
            if n > 0 {
                self.prefetch(woken[n - 1].0, Prefetch::Record);
            }
        }
        for (n, &(slot, ..)) in woken.iter().enumerate() {
            self.drive(slot);
            if n == 0 && last > 0 {
                self.prefetch(woken[last].0, Prefetch::Record);
            }
        }
    }

    /// Registers the connections handed over; `false` once the loop is told to stop.
    fn take_new(&mut self) -> bool {
        loop {
            match self.rx.try_recv() {
                Ok(h) => self.add(h),
                Err(mpsc::TryRecvError::Empty) => return true,
                Err(mpsc::TryRecvError::Disconnected) => return false,
            }
        }
    }

    fn add(&mut self, h: Handoff) {
        let sock = match h.socket {
            Moved::Tcp(s, ..) => Sock::Tcp(TcpStream::from_std(s)),
            Moved::Unix(s) => Sock::Unix(UnixStream::from_std(s)),
        };
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        let mut conn = LoopConn {
            session: Session::new(h.registered.sh.settings.protocol),
            sock,
            live: h.live,
            reg: h.registered,
            next: Some(Action::Continue),
            drained: false,
            closed: false,
        };
        // Both interests at once: edge-triggered, a socket that stays writable costs
        // nothing, and a write that fills the socket needs no re-registration.
        let both = Interest::READABLE | Interest::WRITABLE;
        if conn.sock.register(&self.poll, Token(slot), both).is_err() {
            self.free.push(slot);
            return;
        }
        self.slots[slot] = Some(conn);
        // Bytes may have arrived before the registration: the edge is not lost (epoll
        // reports a ready socket when it is added), so nothing is read here.
    }

    /// Marks what the poller saw (`input`: bytes or the end arrived; `closed`: the end or an
    /// error among them) and, for a connection that was waiting for nothing but input,
    /// makes its read and (`prefetch`) starts loading its first lookup's index bucket.
    fn read_ahead(&mut self, slot: usize, input: bool, closed: bool, prefetch: bool) {
        let Some(Some(conn)) = self.slots.get_mut(slot) else {
            return;
        };
        if input {
            conn.drained = false;
        }
        conn.closed |= closed;
        let waits_for_input = conn.next == Some(Action::Continue) && conn.session.out.is_empty();
        if !input || !waits_for_input || conn.reg.sh.stopping() {
            return;
        }
        conn.session.lend(&mut self.spare);
        match conn.read() {
            Read::Got => {
                // The turn answers what was read before it reads again.
                conn.next = None;
                if prefetch {
                    conn.prefetch(Prefetch::Bucket);
                }
            }
            Read::Again => {}
            Read::End => conn.next = Some(Action::Close),
        }
    }

    /// [`LoopConn::prefetch`] on the connection at `slot`, if it read ahead and is not answered
    /// yet.
    fn prefetch(&self, slot: usize, what: Prefetch) {
        if let Some(Some(conn)) = self.slots.get(slot)
            && conn.next.is_none()
        {
            conn.prefetch(what);
        }
    }

    /// Gives a connection its turn.
    fn drive(&mut self, slot: usize) {
        let Some(Some(conn)) = self.slots.get_mut(slot) else {
            return;
        };
        conn.session.lend(&mut self.spare);
        let turn = conn.turn();
        conn.session.give_back(&mut self.spare);
        match turn {
            Turn::Wait => return,
            Turn::Idle => {
                // An idle connection holds no buffer: what the worker could not take back
                // goes to the thread's pool.
                if conn.session.holds_buffers() {
                    conn.session.release();
                }
                return;
            }
            Turn::GiveWay => {
                self.again.push(slot);
                return;
            }
            Turn::Close | Turn::Watch(_) => {}
        }
        let Some(conn) = self.slots[slot].take() else {
            return;
        };
        self.free.push(slot);
        if let Turn::Watch(mask) = turn {
            conn.into_watch(&self.poll, &self.runtime, mask);
        }
    }
}

/// What a connection's turn came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// Waiting for room to write.
    Wait,
    /// Waiting for input, with nothing to write.
    Idle,
    /// May have input left after `-R` requests or [`READS_PER_TURN`] reads.
    GiveWay,
    Close,
    Watch(u8),
}

/// What a read came to.
enum Read {
    /// Bytes arrived.
    Got,
    /// Nothing yet (the socket is drained, or the read was interrupted).
    Again,
    /// The peer's end, or a failed socket.
    End,
}

/// A plain TCP or UNIX socket.
enum Sock {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Sock {
    fn register(&mut self, poll: &Poll, token: Token, interest: Interest) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => poll.registry().register(s, token, interest),
            Sock::Unix(s) => poll.registry().register(s, token, interest),
        }
    }

    fn deregister(&mut self, poll: &Poll) {
        let _ = match self {
            Sock::Tcp(s) => poll.registry().deregister(s),
            Sock::Unix(s) => poll.registry().deregister(s),
        };
    }

    fn fd(&self) -> RawFd {
        match self {
            Sock::Tcp(s) => s.as_raw_fd(),
            Sock::Unix(s) => s.as_raw_fd(),
        }
    }
}

/// Reads what the socket holds into `buf`'s spare capacity (which the caller made room
/// in), without initialising it first.
fn read_into(fd: RawFd, buf: &mut BytesMut) -> io::Result<usize> {
    let spare = buf.spare_capacity_mut();
    // SAFETY: read(2) writes at most `spare.len()` bytes into the spare capacity, which is
    // valid for writes of that length.
    let n = unsafe { sys::read(fd, spare.as_mut_ptr().cast(), spare.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: read(2) initialised the first `n` bytes of the spare capacity.
    unsafe { buf.advance_mut(n as usize) };
    Ok(n as usize)
}

/// Sends what it can of `buf` on the socket.
fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: send(2) reads at most `buf.len()` bytes from `buf`.
    let n = unsafe { sys::send(fd, buf.as_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// The loop's two system calls a request. On Linux they bypass glibc's `read` and `send`:
/// each of those is a thread-cancellation point, bracketing the call with enabling and
/// disabling asynchronous cancellation (about 45 instructions a call, two calls a request),
/// and no thread here is ever cancelled.
#[cfg(target_os = "linux")]
mod sys {
    use std::os::fd::RawFd;

    /// read(2).
    ///
    /// # Safety
    /// `buf` must be valid for writes of `len` bytes.
    pub unsafe fn read(fd: RawFd, buf: *mut libc::c_void, len: usize) -> isize {
        // SAFETY: the caller's contract is read(2)'s.
        unsafe { libc::syscall(libc::SYS_read, fd, buf, len) as isize }
    }

    /// send(2) without SIGPIPE.
    ///
    /// # Safety
    /// `buf` must be valid for reads of `len` bytes.
    pub unsafe fn send(fd: RawFd, buf: *const libc::c_void, len: usize) -> isize {
        let (to, to_len) = (std::ptr::null::<libc::sockaddr>(), 0 as libc::socklen_t);
        // SAFETY: the caller's contract is send(2)'s; sendto(2) with no address is send(2).
        unsafe {
            libc::syscall(
                libc::SYS_sendto,
                fd,
                buf,
                len,
                libc::MSG_NOSIGNAL,
                to,
                to_len,
            ) as isize
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    use std::os::fd::RawFd;

    pub unsafe fn read(fd: RawFd, buf: *mut libc::c_void, len: usize) -> isize {
        // SAFETY: the caller's contract is read(2)'s.
        unsafe { libc::read(fd, buf, len) }
    }

    pub unsafe fn send(fd: RawFd, buf: *const libc::c_void, len: usize) -> isize {
        // SAFETY: the caller's contract is send(2)'s.
        unsafe { libc::send(fd, buf, len, 0) }
    }
}

/// A loop's connection: its socket, its session, and what its last request asked for.
struct LoopConn {
    sock: Sock,
    session: Session,
    live: Arc<ConnLive>,
    /// Its registry entry and `curr_connections`, undone when it is dropped.
    reg: Registered,
    /// What the last pump asked of the connection, taken once the output is written:
    /// `Continue` reads next; `None` pumps again (replies were written out mid-input).
    next: Option<Action>,
    /// The last read came back short: nothing to read until the poller says so.
    drained: bool,
    /// The poller saw the peer's end (or an error). It says so once, edge-triggered, and
    /// the end may sit behind bytes a short read took: it is read whatever `drained` says
    /// (tokio keeps its closed readiness for the same reason).
    closed: bool,
}

impl LoopConn {
    /// Moves the connection as far as its socket lets it: write what is pending, act on
    /// the last request, read, answer; repeat.
    fn turn(&mut self) -> Turn {
        let mut reads = 0;
        let first_request = self.session.requests;
        loop {
            if !self.session.out.is_empty() {
                // A write that completes at once is no state a snapshot could see: the
                // connection says it is writing only while it waits to.
                match write_now(&mut self.sock, &mut self.session, &self.reg.sh) {
                    Ok(true) => {}
                    Ok(false) => {
                        self.live.set(ConnState::Write);
                        return Turn::Wait;
                    }
                    Err(_) => return Turn::Close,
                }
            }
            match self.next.take() {
                None => {}
                Some(Action::Continue | Action::More(_)) => {
                    if self.reg.sh.stopping() {
                        return Turn::Close;
                    }
                    if self.drained && !self.closed {
                        self.next = Some(Action::Continue);
                        self.live.set(self.session.waiting_state());
                        return Turn::Idle;
                    }
                    let answered = self.session.requests.wrapping_sub(first_request) as usize;
                    let yields = answered >= self.reg.sh.settings.reqs_per_event;
                    if yields || reads == READS_PER_TURN {
                        if yields {
                            self.reg.sh.counters.conn_yields.fetch_add(1, Relaxed);
                        }
                        self.next = Some(Action::Continue);
                        return Turn::GiveWay;
                    }
                    reads += 1;
                    match self.read() {
                        Read::Got => {}
                        Read::Again => {
                            self.next = Some(Action::Continue);
                            continue;
                        }
                        Read::End => return Turn::Close,
                    }
                }
                Some(Action::Close) => return Turn::Close,
                Some(Action::Shutdown) => {
                    self.reg.sh.shutdown.notify_one();
                    return Turn::Close;
                }
                Some(Action::Watch(mask)) => return Turn::Watch(mask),
            }
            if let Pump::Done(a) = self.session.pump(&self.reg.sh, self.reg.id) {
                self.next = Some(a);
            }
        }
    }

    /// Reads what the socket holds into the session's input.
    fn read(&mut self) -> Read {
        let sh: &Shared = &self.reg.sh;
        self.session.room_to_read();
        let spare = self.session.rbuf.capacity() - self.session.rbuf.len();
        match read_into(self.sock.fd(), &mut self.session.rbuf) {
            Ok(0) => Read::End,
            Ok(n) => {
                self.drained = n < spare;
                sh.counters.bytes_read.fetch_add(n as u64, Relaxed);
                self.live
                    .last_cmd
                    .store(sh.uptime_secs.load(Relaxed), Relaxed);
                self.live.set(ConnState::ParseCmd);
                Read::Got
            }
            Err(e) => match e.kind() {
                io::ErrorKind::WouldBlock => {
                    (self.drained, self.closed) = (true, false);
                    Read::Again
                }
                io::ErrorKind::Interrupted => Read::Again,
                _ => Read::End,
            },
        }
    }

    /// [`memkit_engine::Engine::prefetch`] for the first key in the connection's input (text
    /// requests: a binary request's key is not guessed).
    fn prefetch(&self, what: Prefetch) {
        if let Some(key) = memkit_protocol::first_key(&self.session.rbuf) {
            self.reg.sh.engine.prefetch(key, what);
        }
    }

    /// Moves a connection that sent `watch` to the worker's runtime, which streams the log
    /// to it (rare, and waits on two things at once: a task's work).
    fn into_watch(mut self, poll: &Poll, runtime: &tokio::runtime::Handle, mask: u8) {
        self.sock.deregister(poll);
        self.live.set(ConnState::Watch);
        let LoopConn { sock, reg, .. } = self;
        // The descriptor changes owner and is never closed in between.
        drop(match sock {
            Sock::Tcp(s) => {
                // SAFETY: `into_raw_fd` gave up its ownership of a TCP socket.
                let s = unsafe { std::net::TcpStream::from_raw_fd(s.into_raw_fd()) };
                runtime.spawn(
                    async move { watch(tokio::net::TcpStream::from_std(s), reg, mask).await },
                )
            }
            Sock::Unix(s) => {
                // SAFETY: as above, of a UNIX socket.
                let s = unsafe { std::os::unix::net::UnixStream::from_raw_fd(s.into_raw_fd()) };
                runtime.spawn(
                    async move { watch(tokio::net::UnixStream::from_std(s), reg, mask).await },
                )
            }
        });
    }
}

/// A `watch` stream on the runtime; the connection's registration ends with it.
async fn watch<S>(socket: io::Result<S>, reg: Registered, mask: u8)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    if let Ok(s) = socket {
        crate::connection::watch_stream(s, &reg.sh, mask).await;
    }
}

/// Writes the session's output until done (`true`) or the socket is full (`false`: the
/// rest stays, and the poller's next writable edge resumes it).
fn write_now(sock: &mut Sock, session: &mut Session, sh: &Shared) -> io::Result<bool> {
    let mut at = 0;
    let out = &session.out;
    while at < out.len() {
        match send(sock.fd(), &out[at..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                sh.counters.bytes_written.fetch_add(at as u64, Relaxed);
                session.out.drain(..at);
                return Ok(false);
            }
            Err(e) => return Err(e),
        }
    }
    session.written(sh);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An idle loop connection is its slot, its registry entry and the kernel's socket:
    /// this keeps the slot from growing back toward a task's size (`docs/limits.md` has the
    /// RSS figures).
    #[test]
    fn an_idle_connection_slot_stays_small() {
        let size = std::mem::size_of::<Option<LoopConn>>();
        eprintln!("loop connection slot: {size} bytes");
        assert!(size <= 192, "a loop connection's slot holds {size} bytes");
    }
}
