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
//! On Linux the loop submits its connections' receives and sends through io_uring
//! (`ring`, driven by `ring_worker`): a pass of the loop is one `io_uring_enter` for
//! all the connections it serves, instead of an `epoll_wait` and a `read` and a `send` for
//! each request. A connection waiting for a request has a receive armed; a reply is one
//! send, with the connection's next receive linked behind it. That is under load: at light
//! load, where nearly every request wakes the worker, epoll's wake-up and `read` answer
//! sooner than the ring's, so a ring worker that measures a light load waits in an epoll of
//! its own (`light`) and its connections move there. `--io epoll`, or a kernel
//! without io_uring, polls with epoll (mio), edge-triggered: a connection reads until a read
//! comes back short (the socket is drained: the next arrival is a new edge) and writes until
//! the socket takes no more, then waits for the next edge. Either way, a connection that
//! keeps sending gives way to its neighbours after `-R` requests of one arrival (memcached's
//! `reqs_per_event`, counted in `conn_yields`) or `READS_PER_TURN` reads (a large value or a
//! swallowed one arriving), and is driven again after the others' events. `sock` holds the
//! system calls both make.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc;

use memkit_engine::Prefetch;
use mio::net::{TcpStream, UnixStream};
use mio::{Events, Interest, Poll, Token};

use crate::config::Io;
use crate::exec::Action;
use crate::session::{Pump, Session, Spare};
use crate::state::{ConnLive, ConnState, Moved, Registered, Shared};

#[cfg(target_os = "linux")]
mod light;
#[cfg(target_os = "linux")]
mod ring;
#[cfg(target_os = "linux")]
mod ring_worker;
mod sock;

#[cfg(target_os = "linux")]
use ring::next_era;
use sock::{Sock, Waker, read_into, write_now};

#[cfg(not(target_os = "linux"))]
fn next_era(era: u32) -> u32 {
    era.wrapping_add(1)
}

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
    waker: Arc<Waker>,
}

impl Loop {
    /// Starts a loop on a thread named `name`, waiting through `io` (as
    /// [`Io::effective`] found it); `runtime` serves its connections that turn into `watch`
    /// streams.
    pub fn start(
        name: String,
        runtime: tokio::runtime::Handle,
        io: Io,
    ) -> io::Result<(Loop, std::thread::JoinHandle<()>)> {
        let waker = Arc::new(Waker::new()?);
        let (tx, rx) = mpsc::channel();
        let wake = waker.clone();
        // The ring is set up on its thread: with `SINGLE_ISSUER` its creator is its only
        // submitter.
        let (ready_tx, ready) = mpsc::sync_channel(1);
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            let backend = match Backend::new(io, &wake) {
                Ok(b) => b,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let _ = ready_tx.send(Ok(()));
            Worker {
                backend,
                waker: wake,
                rx,
                slots: Vec::new(),
                free: Vec::new(),
                again: Vec::new(),
                spare: Spare::default(),
                runtime,
                era: 0,
                sh: None,
            }
            .run()
        })?;
        ready
            .recv()
            .unwrap_or_else(|_| Err(io::Error::other("worker loop ended at its start")))?;
        let tx = Some(tx);
        Ok((Loop { tx, waker }, thread))
    }

    /// Hands a connection to the loop. If the loop is gone the connection is dropped, which
    /// undoes its registration.
    pub fn send(&self, h: Handoff) {
        if let Some(tx) = &self.tx
            && tx.send(h).is_ok()
        {
            self.waker.wake();
        }
    }

    /// Tells the loop to close its connections and end.
    pub fn stop(&mut self) {
        self.tx = None;
        self.waker.wake();
    }
}

/// What a worker waits with.
enum Backend {
    Epoll(Poll),
    #[cfg(target_os = "linux")]
    Ring(Box<ring::Ring>, Box<light::Light>),
}

impl Backend {
    /// A poller or ring for `io`, watching `waker`.
    fn new(io: Io, waker: &Waker) -> io::Result<Backend> {
        let fd = waker.0.as_raw_fd();
        #[cfg(target_os = "linux")]
        if io == Io::Uring {
            let mut ring = ring::Ring::new()?;
            ring.watch_waker(fd)?;
            let light = light::Light::new(&mut ring, fd)?;
            return Ok(Backend::Ring(Box::new(ring), Box::new(light)));
        }
        let _ = io;
        let poll = Poll::new()?;
        let mut src = mio::unix::SourceFd(&fd);
        poll.registry()
            .register(&mut src, WAKE, Interest::READABLE)?;
        Ok(Backend::Epoll(poll))
    }
}

/// A worker thread's loop state.
struct Worker {
    backend: Backend,
    waker: Arc<Waker>,
    rx: mpsc::Receiver<Handoff>,
    /// Connections by token; `None` slots are listed in `free`.
    slots: Vec<Option<LoopConn>>,
    free: Vec<usize>,
    /// Connections that gave way with input left, driven again after this round's events.
    again: Vec<usize>,
    /// Buffers for the connection being driven, when it has none of its own.
    spare: Spare,
    runtime: tokio::runtime::Handle,
    /// The generation the next connection gets: a ring's completion names its connection
    /// by slot and generation, and one that arrives after its connection closed (a receive
    /// ended by the close) finds a different generation, or none, in the slot.
    era: u32,
    /// The server's state, from the first connection handed over (a worker serves one
    /// server): the worker's own counters go there (`memkit_io_moves`: a ring worker's).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    sh: Option<Arc<Shared>>,
}

impl Worker {
    fn run(self) {
        match self.backend {
            Backend::Epoll(_) => self.run_epoll(),
            #[cfg(target_os = "linux")]
            Backend::Ring(..) => self.run_ring(),
        }
    }

    fn run_epoll(mut self) {
        let mut events = Events::with_capacity(256);
        let mut woken = Vec::with_capacity(256);
        loop {
            // Connections that gave way must not wait for an edge that already came.
            let timeout = (!self.again.is_empty()).then_some(std::time::Duration::ZERO);
            let Backend::Epoll(poll) = &mut self.backend else {
                return;
            };
            if let Err(e) = poll.poll(&mut events, timeout)
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
                    self.waker.clear();
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
        if self.sh.is_none() {
            self.sh = Some(h.registered.sh.clone());
        }
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
            era: self.era,
            ring: None,
        };
        self.era = next_era(self.era);
        let added = match &mut self.backend {
            Backend::Epoll(poll) => {
                // Both interests at once: edge-triggered, a socket that stays writable costs
                // nothing, and a write that fills the socket needs no re-registration.
                // Bytes that arrived before the registration are not lost: epoll reports a
                // ready socket when it is added.
                let both = Interest::READABLE | Interest::WRITABLE;
                conn.sock.register(poll, Token(slot), both)
            }
            #[cfg(target_os = "linux")]
            Backend::Ring(ring, light) => {
                conn.ring = Some(RingState::default());
                if light.on {
                    ring_worker::to_poll(light, &mut conn, slot)
                } else {
                    ring_worker::arm(ring, &mut conn, slot)
                }
            }
        };
        if added.is_err() {
            self.free.push(slot);
            return;
        }
        self.slots[slot] = Some(conn);
    }

    /// Marks what the poller saw (`input`: bytes or the end arrived; `closed`: the end or an
    /// error among them) and, for a connection that was waiting for nothing but input,
    /// makes its read and (`prefetch`) starts loading its first lookup's index bucket.
    fn read_ahead(&mut self, slot: usize, input: bool, closed: bool, prefetch: bool) {
        let Some(Some(conn)) = self.slots.get_mut(slot) else {
            return;
        };
        if conn.rides_ring() {
            // Its bytes are the ring's to receive: an event from before it left the epoll.
            return;
        }
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
        if conn.ring.as_ref().is_some_and(|r| r.sending) {
            // The send's completion drives it.
            return;
        }
        #[cfg(target_os = "linux")]
        if let Backend::Ring(_, light) = &mut self.backend
            && ring_worker::follow(light, conn, slot).is_err()
        {
            self.close(slot);
            return;
        }
        conn.session.lend(&mut self.spare);
        let turn = conn.turn();
        conn.session.give_back(&mut self.spare);
        match turn {
            Turn::Wait => return,
            #[cfg(target_os = "linux")]
            Turn::Send => {
                if let Backend::Ring(ring, _) = &mut self.backend
                    && let Ok(sent) = ring_worker::send(ring, conn, slot)
                {
                    if sent == ring_worker::Sent::Quiet {
                        // Its reply went out from a copy.
                        conn.session.rest(&mut self.spare);
                    }
                    return;
                }
            }
            #[cfg(not(target_os = "linux"))]
            Turn::Send => {}
            Turn::Idle => {
                #[cfg(target_os = "linux")]
                if let Backend::Ring(ring, _) = &mut self.backend
                    && ring_worker::arm(ring, conn, slot).is_err()
                {
                    self.close(slot);
                    return;
                }
                // An idle connection holds no buffer.
                conn.session.rest(&mut self.spare);
                return;
            }
            Turn::GiveWay => {
                if let Some(r) = conn.ring.as_mut() {
                    r.event = conn.session.requests;
                }
                self.again.push(slot);
                return;
            }
            Turn::Close | Turn::Watch(_) => {}
        }
        let Some(conn) = self.close(slot) else {
            return;
        };
        if let Turn::Watch(mask) = turn {
            let poll = self.poll_of(&conn);
            conn.into_watch(poll, &self.runtime, mask);
        }
    }

    /// Takes the connection at `slot` out of the loop; the caller drops it (closing it) or
    /// moves it. A receive still armed on it is ended by shutting the socket's reading side
    /// down: the ring holds the socket open until then, and its completion, which will find
    /// the slot empty or another connection's, gives its buffer back.
    fn close(&mut self, slot: usize) -> Option<LoopConn> {
        let mut conn = self.slots.get_mut(slot)?.take()?;
        self.free.push(slot);
        #[cfg(target_os = "linux")]
        if let (Some(st), Backend::Ring(_, light)) = (&conn.ring, &mut self.backend)
            && st.polled
        {
            // Its descriptor leaves the epoll when it closes, or in `into_watch`.
            light.polled -= 1;
        }
        if let Some(st) = conn.ring.as_mut()
            && st.armed
        {
            // SAFETY: shutdown(2) on a descriptor the connection owns.
            unsafe { libc::shutdown(conn.sock.fd(), libc::SHUT_RD) };
            #[cfg(target_os = "linux")]
            if let (Some(reply), Backend::Ring(ring, _)) = (st.quiet.take(), &mut self.backend) {
                ring.park(slot, conn.era, reply);
            }
        }
        Some(conn)
    }

    /// The epoll `conn` is registered with, if any (a connection riding the ring is in
    /// none).
    fn poll_of(&self, conn: &LoopConn) -> Option<&Poll> {
        match &self.backend {
            Backend::Epoll(p) => Some(p),
            #[cfg(target_os = "linux")]
            Backend::Ring(_, light) => conn.ring.as_ref()?.polled.then_some(&light.poll),
        }
    }
}

/// What a connection's turn came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// Waiting for room to write.
    Wait,
    /// Output to hand to the ring (a ring worker's connection does not write itself).
    Send,
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
    /// Its generation, which a ring's completions carry.
    era: u32,
    /// A ring worker's connection: what the ring holds of it.
    ring: Option<RingState>,
}

/// What a ring holds of a connection.
#[derive(Debug, Default)]
struct RingState {
    /// A receive is armed.
    armed: bool,
    /// The copy of a reply sent quietly, the kernel's until the receive linked behind it
    /// completes.
    quiet: Option<Box<[u8]>>,
    /// A send of the output is in flight: the output is the kernel's until it completes.
    sending: bool,
    /// `requests` when the connection's input last arrived: `-R` counts the requests of
    /// one arrival, across the sends that answer them.
    event: u32,
    /// It waits in the worker's epoll ([`light`]) and reads and writes by system call, as
    /// an epoll worker's connection does; the ring holds nothing of it.
    polled: bool,
}

impl LoopConn {
    /// Moves the connection as far as its socket lets it: write what is pending, act on
    /// the last request, read, answer; repeat.
    fn turn(&mut self) -> Turn {
        let mut reads = 0;
        let first_request = match &self.ring {
            Some(r) if !r.polled => r.event,
            _ => self.session.requests,
        };
        loop {
            if !self.session.out.is_empty() {
                // `watch` is answered by its stream, which subscribes before it sends the
                // OK (memcached's order): nothing logged after the client reads OK is lost.
                if let Some(Action::Watch(mask)) = self.next {
                    return Turn::Watch(mask);
                }
                if self.rides_ring() {
                    return Turn::Send;
                }
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

    /// Its receives and sends go through the ring.
    fn rides_ring(&self) -> bool {
        self.ring.as_ref().is_some_and(|r| !r.polled)
    }

    /// Reads what the socket holds into the session's input.
    fn read(&mut self) -> Read {
        self.session.room_to_read();
        let spare = self.session.rbuf.capacity() - self.session.rbuf.len();
        match read_into(self.sock.fd(), &mut self.session.rbuf) {
            Ok(0) => Read::End,
            Ok(n) => {
                self.arrived(n, n < spare);
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

    /// Counts `n` bytes that arrived in the input (`drained`: the socket holds no more) and
    /// marks the connection as parsing them.
    fn arrived(&mut self, n: usize, drained: bool) {
        let sh: &Shared = &self.reg.sh;
        self.drained = drained;
        sh.counters.bytes_read.fetch_add(n as u64, Relaxed);
        self.live
            .last_cmd
            .store(sh.uptime_secs.load(Relaxed), Relaxed);
        self.live.set(ConnState::ParseCmd);
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
    fn into_watch(mut self, poll: Option<&Poll>, runtime: &tokio::runtime::Handle, mask: u8) {
        if let Some(poll) = poll {
            self.sock.deregister(poll);
        }
        self.live.set(ConnState::Watch);
        let LoopConn {
            sock, reg, session, ..
        } = self;
        let pending = session.out;
        // The descriptor changes owner and is never closed in between.
        drop(match sock {
            Sock::Tcp(s) => {
                // SAFETY: `into_raw_fd` gave up its ownership of a TCP socket.
                let s = unsafe { std::net::TcpStream::from_raw_fd(s.into_raw_fd()) };
                runtime.spawn(async move {
                    watch(tokio::net::TcpStream::from_std(s), reg, mask, pending).await
                })
            }
            Sock::Unix(s) => {
                // SAFETY: as above, of a UNIX socket.
                let s = unsafe { std::os::unix::net::UnixStream::from_raw_fd(s.into_raw_fd()) };
                runtime.spawn(async move {
                    watch(tokio::net::UnixStream::from_std(s), reg, mask, pending).await
                })
            }
        });
    }
}

/// A `watch` stream on the runtime, which first sends `pending` (the replies up to the
/// `watch` command's OK); the connection's registration ends with it.
async fn watch<S>(socket: io::Result<S>, reg: Registered, mask: u8, pending: Vec<u8>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    if let Ok(s) = socket {
        crate::connection::watch_stream(s, &reg.sh, mask, &pending).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An idle loop connection is its slot, its registry entry and the kernel's socket:
    /// this keeps the slot from growing back toward a task's size (`docs/limits.md` has the
    /// RSS figures). 184 bytes in memkit-server's own build, 200 in the workspace's (whose
    /// features add 16); 16 of them point at a quiet reply's copy (`RingState::quiet`).
    #[test]
    fn an_idle_connection_slot_stays_small() {
        let size = std::mem::size_of::<Option<LoopConn>>();
        eprintln!("loop connection slot: {size} bytes");
        assert!(size <= 208, "a loop connection's slot holds {size} bytes");
    }
}
