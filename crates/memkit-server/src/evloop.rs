//! memcached's worker loop: one poller per worker thread drives the sessions of its
//! connections directly, as memcached's `event_base_loop` drives its `conn` state machines.
//!
//! Why not a tokio task per connection: at one request in flight per connection (a PHP or
//! Python worker's traffic) a request is one readiness event, and a runtime turns each event
//! into a task wake-up, a scheduler pass and a poll through the task's future: about half of
//! the user-space instructions a request cost (`docs/BENCHMARKS.md`). Here an event is a slot
//! lookup, a read, [`Session::pump`] and a write. An idle connection is its slot (a socket,
//! a session with no buffers, its registry entry) and nothing else.
//!
//! Two workers share this module's `Core` (the connections, their turns, the mailbox, the
//! completions of parked requests) behind one small trait, `Backend`:
//! - `epoll::Epoll` (`--io epoll`, or a kernel without io_uring) polls with epoll (mio),
//!   edge-triggered: a connection reads until a read comes back short (the socket is
//!   drained: the next arrival is a new edge) and writes until the socket takes no more,
//!   then waits for the next edge.
//! - `ring_worker::Uring` submits its connections' receives and sends through io_uring
//!   (`ring`): a pass of the loop is one `io_uring_enter` for all the connections it serves.
//!   At light load, where nearly every request wakes the worker, epoll's wake-up and `read`
//!   answer sooner, so a ring worker that measures a light load waits in an epoll of its own
//!   (`light`) and its connections move there.
//!
//! A turn of a connection carries out what its session asks ([`Next`]): write, read, give
//! way after `-R` requests of one event (memcached's `reqs_per_event`) or
//! `READS_PER_TURN` reads, park, close. A parked connection's completion comes back
//! through the worker's `Inbox`, which wakes the worker; the connection is then resumed
//! and driven. The connections one poll wakes are read first, then answered and written
//! one by one; between its read and its answer, each connection's first lookup is warmed
//! ([`memkit_engine::Engine::prefetch`]), so a get's two cache misses overlap the other
//! connections' work. A connection that becomes a `watch` stream moves to the worker's
//! tokio runtime. `sock` holds the system calls both workers make.

use std::io;
use std::sync::Arc;
use std::sync::mpsc;

use memkit_engine::Prefetch;
use mio::net::{TcpStream, UnixStream};
use parking_lot::Mutex;

use crate::config::Io;
use crate::session::{Completer, Next, Outcome, Session, Spare};
use crate::state::{ConnLive, ConnState, Moved, Registered, Shared};

mod epoll;
#[cfg(target_os = "linux")]
mod light;
#[cfg(target_os = "linux")]
mod ring;
#[cfg(target_os = "linux")]
mod ring_worker;
mod sock;

use sock::{Sock, Waker, read_into, write_now};

/// Reads a connection may make in one turn before its neighbours' events are served:
/// 1 MiB in 16 KiB reads.
const READS_PER_TURN: u32 = 64;

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
            #[cfg(target_os = "linux")]
            if io == Io::Uring {
                return match ring_worker::Uring::new(&wake) {
                    Ok(b) => {
                        let _ = ready_tx.send(Ok(()));
                        Worker::new(b, rx, wake, runtime).run()
                    }
                    Err(e) => drop(ready_tx.send(Err(e))),
                };
            }
            let _ = io;
            match epoll::Epoll::new(&wake) {
                Ok(b) => {
                    let _ = ready_tx.send(Ok(()));
                    Worker::new(b, rx, wake, runtime).run()
                }
                Err(e) => drop(ready_tx.send(Err(e))),
            }
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

/// Completions of parked requests, pushed from whatever thread completes them, taken by
/// the worker when its waker wakes it.
#[derive(Debug)]
struct Inbox {
    done: Mutex<Vec<(usize, u32, Outcome)>>,
    waker: Arc<Waker>,
}

impl Inbox {
    fn push(&self, slot: usize, era: u32, outcome: Outcome) {
        let first = {
            let mut d = self.done.lock();
            d.push((slot, era, outcome));
            d.len() == 1
        };
        // One wake-up for a batch: the worker takes the whole inbox when it wakes.
        if first {
            self.waker.wake();
        }
    }
}

/// What differs between a worker that waits in epoll and one that waits in its ring: how a
/// connection's bytes move and where it waits. The rest is `Core`'s.
trait Backend: Sized {
    /// What the backend holds of a connection between its turns.
    type Held: Default + std::fmt::Debug;

    /// Starts waiting for a connection handed over.
    fn add(&mut self, conn: &mut LoopConn<Self::Held>, slot: usize) -> io::Result<()>;

    /// Waits for the next pass's work and serves it; `Ok(false)` once told to stop.
    fn pass(&mut self, core: &mut Core<Self::Held>) -> io::Result<bool>;

    /// Whether the connection may take a turn now (not while the kernel holds its output).
    fn may_drive(conn: &LoopConn<Self::Held>) -> bool;

    /// Whether its output goes out through [`Backend::send`] rather than a `send(2)`.
    fn sends_itself(conn: &LoopConn<Self::Held>) -> bool;

    /// At the start of a turn: moves the connection to where the worker's load says it
    /// should wait. `Err` if it could not (it is closed).
    fn follow(&mut self, conn: &mut LoopConn<Self::Held>, slot: usize) -> io::Result<()>;

    /// Hands the connection's output to the backend ([`Backend::sends_itself`]); whether it
    /// went out from a copy (the connection's output buffer is free again).
    fn send(&mut self, conn: &mut LoopConn<Self::Held>, slot: usize) -> io::Result<bool>;

    /// The connection waits for input, its output written.
    fn wait_input(&mut self, conn: &mut LoopConn<Self::Held>, slot: usize) -> io::Result<()>;

    /// The connection leaves the worker (it closes, or moves to a `watch` stream): what the
    /// backend holds of it is let go. With operations of it still in flight the backend
    /// keeps its socket open until they complete (so its descriptor's number cannot name
    /// another socket under them) and returns `None`; else the connection comes back.
    fn close(&mut self, conn: LoopConn<Self::Held>, slot: usize) -> Option<LoopConn<Self::Held>>;

    /// The epoll the connection is registered with, if any (`into_watch` takes it out).
    fn poll_of(&self, conn: &LoopConn<Self::Held>) -> Option<&mio::Poll>;

    /// The worker stops: the backend finishes what it holds before the connections go.
    fn finish(&mut self, core: &mut Core<Self::Held>);
}

/// A worker thread: its backend and its connections. The backend is dropped first (fields
/// drop in order), so a ring finishes its operations before the sockets they name close.
struct Worker<B: Backend> {
    backend: B,
    core: Core<B::Held>,
}

impl<B: Backend> Worker<B> {
    fn new(
        backend: B,
        rx: mpsc::Receiver<Handoff>,
        waker: Arc<Waker>,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        Worker {
            backend,
            core: Core::new(rx, waker, runtime),
        }
    }

    fn run(mut self) {
        loop {
            match self.backend.pass(&mut self.core) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    tracing::error!("worker loop failed: {e}");
                    break;
                }
            }
        }
        self.backend.finish(&mut self.core);
    }
}

/// What every worker keeps: its connections and its mailboxes.
struct Core<H> {
    rx: mpsc::Receiver<Handoff>,
    waker: Arc<Waker>,
    inbox: Arc<Inbox>,
    /// Connections by slot; `None` slots are listed in `free`.
    slots: Vec<Option<LoopConn<H>>>,
    free: Vec<usize>,
    /// Connections that gave way with input left, driven again after this round's events.
    again: Vec<usize>,
    /// Buffers for the connection being driven, when it has none of its own.
    spare: Spare,
    runtime: tokio::runtime::Handle,
    /// The generation the next connection gets: a completion names its connection by slot
    /// and generation, and one that arrives after its connection closed finds a different
    /// generation, or none, in the slot.
    era: u32,
    /// The server's state, from the first connection handed over (a worker serves one
    /// server): the worker's own counters go there.
    sh: Option<Arc<Shared>>,
    /// Completions taken from the inbox, being served.
    resumed: Vec<(usize, u32, Outcome)>,
}

impl<H: Default + std::fmt::Debug> Core<H> {
    fn new(
        rx: mpsc::Receiver<Handoff>,
        waker: Arc<Waker>,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        let inbox = Arc::new(Inbox {
            done: Mutex::new(Vec::new()),
            waker: waker.clone(),
        });
        Core {
            rx,
            waker,
            inbox,
            slots: Vec::new(),
            free: Vec::new(),
            again: Vec::new(),
            spare: Spare::default(),
            runtime,
            era: 0,
            sh: None,
            resumed: Vec::new(),
        }
    }

    /// The waker rang: registers the connections handed over, and resumes the parked ones
    /// whose waits completed. `false` once the loop is told to stop.
    fn woken<B: Backend<Held = H>>(&mut self, b: &mut B) -> bool {
        self.waker.clear();
        std::mem::swap(&mut *self.inbox.done.lock(), &mut self.resumed);
        for (slot, era, outcome) in std::mem::take(&mut self.resumed) {
            if let Some(Some(conn)) = self.slots.get_mut(slot)
                && conn.era == era
            {
                conn.next = conn.session.resume(outcome);
                self.drive(b, slot, false);
            }
        }
        loop {
            match self.rx.try_recv() {
                Ok(h) => self.add(b, h),
                Err(mpsc::TryRecvError::Empty) => return true,
                Err(mpsc::TryRecvError::Disconnected) => return false,
            }
        }
    }

    fn add<B: Backend<Held = H>>(&mut self, b: &mut B, h: Handoff) {
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
            session: Session::new(h.registered, h.live),
            sock,
            next: Next::Read,
            drained: false,
            closed: false,
            era: self.era,
            held: H::default(),
        };
        self.era = next_era(self.era);
        if b.add(&mut conn, slot).is_err() {
            self.free.push(slot);
            return;
        }
        self.slots[slot] = Some(conn);
    }

    /// Serves the connections one poll woke (slot, input, closed): first every read, then
    /// each connection's answer and write. Between a connection's read and its answer, the
    /// two cache misses of its first lookup (index bucket, then record) are started a step
    /// apart, each while a system call or another connection's work runs, so that its
    /// lookup does not wait for memory (`docs/BENCHMARKS.md`). A connection woken alone has
    /// nothing to overlap its misses with, and is not warmed.
    fn serve<B: Backend<Held = H>>(&mut self, b: &mut B, woken: &[(usize, bool, bool)]) {
        let last = woken.len().wrapping_sub(1);
        for (n, &(slot, input, closed)) in woken.iter().enumerate() {
            self.read_ahead::<B>(slot, input, closed, last > 0);
            if n > 0 {
                self.prefetch(woken[n - 1].0, Prefetch::Record);
            }
        }
        for (n, &(slot, ..)) in woken.iter().enumerate() {
            self.drive(b, slot, true);
            if n == 0 && last > 0 {
                self.prefetch(woken[last].0, Prefetch::Record);
            }
        }
    }

    /// Marks what the poller saw (`input`: bytes or the end arrived; `closed`: the end or an
    /// error among them) and, for a connection that was waiting for nothing but input,
    /// makes its read and (`prefetch`) starts loading its first lookup's index bucket.
    fn read_ahead<B: Backend<Held = H>>(
        &mut self,
        slot: usize,
        input: bool,
        closed: bool,
        prefetch: bool,
    ) {
        let Some(Some(conn)) = self.slots.get_mut(slot) else {
            return;
        };
        if B::sends_itself(conn) {
            // Its bytes are the ring's to receive: an event from before it left the epoll.
            return;
        }
        if input {
            conn.drained = false;
        }
        conn.closed |= closed;
        let waits_for_input = conn.next == Next::Read && conn.session.unsent().is_empty();
        if !input || !waits_for_input || conn.session.sh().stopping() {
            return;
        }
        conn.session.lend(&mut self.spare);
        match conn.read() {
            Read::Got => {
                // The turn answers what was read before it reads again.
                conn.next = Next::Write;
                if prefetch {
                    conn.prefetch(Prefetch::Bucket);
                }
            }
            Read::Again => {}
            Read::End => conn.next = Next::Close,
        }
    }

    /// [`LoopConn::prefetch`] on the connection at `slot`, if it read ahead and is not
    /// answered yet.
    fn prefetch(&self, slot: usize, what: Prefetch) {
        if let Some(Some(conn)) = self.slots.get(slot)
            && conn.next == Next::Write
        {
            conn.prefetch(what);
        }
    }

    /// Gives a connection its turn (`fresh`: a new event of it, from which `-R` counts).
    fn drive<B: Backend<Held = H>>(&mut self, b: &mut B, slot: usize, fresh: bool) {
        let Some(Some(conn)) = self.slots.get_mut(slot) else {
            return;
        };
        if !B::may_drive(conn) || conn.session.is_parked() {
            return;
        }
        if b.follow(conn, slot).is_err() {
            self.close(b, slot);
            return;
        }
        if fresh {
            conn.session.event();
        }
        conn.session.lend(&mut self.spare);
        let turn = conn.turn(B::sends_itself(conn));
        conn.session.give_back(&mut self.spare);
        match turn {
            Turn::Wait => return,
            Turn::Send => match b.send(conn, slot) {
                Ok(true) => {
                    // Its reply went out from a copy.
                    conn.session.rest(&mut self.spare);
                    return;
                }
                Ok(false) => return,
                Err(_) => {}
            },
            Turn::Idle => {
                if b.wait_input(conn, slot).is_ok() {
                    // An idle connection holds no buffer.
                    conn.session.rest(&mut self.spare);
                    return;
                }
            }
            Turn::GiveWay => {
                self.again.push(slot);
                return;
            }
            Turn::Park => {
                let inbox = self.inbox.clone();
                let era = conn.era;
                conn.session.park(Completer::new(move |outcome| {
                    inbox.push(slot, era, outcome)
                }));
                return;
            }
            Turn::Close | Turn::Watch(_) => {}
        }
        let Some(conn) = self.close(b, slot) else {
            return;
        };
        if let Turn::Watch(mask) = turn {
            let poll = b.poll_of(&conn);
            conn.into_watch(poll, &self.runtime, mask);
        }
    }

    /// Takes the connection at `slot` out of the loop; the caller drops it (closing it) or
    /// moves it ([`LoopConn::into_watch`]). The backend lets go of what it holds of it.
    fn close<B: Backend<Held = H>>(&mut self, b: &mut B, slot: usize) -> Option<LoopConn<H>> {
        let conn = self.slots.get_mut(slot)?.take()?;
        self.free.push(slot);
        b.close(conn, slot)
    }

    /// Drives the connections that gave way last round.
    fn drive_again<B: Backend<Held = H>>(&mut self, b: &mut B) {
        for slot in std::mem::take(&mut self.again) {
            self.drive(b, slot, true);
        }
    }
}

/// The generation after `era`; generations wrap at 24 bits (the room a ring's `user_data`
/// had for them; kept so that a slot's generations are never confused within 16 M
/// connections).
fn next_era(era: u32) -> u32 {
    era.wrapping_add(1) & 0xFF_FFFF
}

/// What a connection's turn came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// Waiting for room to write.
    Wait,
    /// Output to hand to the backend (a ring worker's connection does not write itself).
    Send,
    /// Waiting for input, with nothing to write.
    Idle,
    /// May have input left after `-R` requests or `READS_PER_TURN` reads.
    GiveWay,
    /// A request waits for a completion.
    Park,
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

/// A loop's connection: its socket, its session, what its session last asked that is not
/// carried out yet, and what the backend holds of it.
#[derive(Debug)]
struct LoopConn<H> {
    sock: Sock,
    session: Session,
    /// The session's last [`Next`], done once the output is written (`Write`: pump again).
    next: Next,
    /// The last read came back short: nothing to read until the poller says so.
    drained: bool,
    /// The poller saw the peer's end (or an error). It says so once, edge-triggered, and
    /// the end may sit behind bytes a short read took: it is read whatever `drained` says
    /// (tokio keeps its closed readiness for the same reason).
    closed: bool,
    /// Its generation, which completions carry.
    era: u32,
    held: H,
}

impl<H> LoopConn<H> {
    /// Moves the connection as far as its socket lets it: write what is pending, do what
    /// the session asked, read, answer; repeat. `sends_itself`: its output goes to the
    /// backend ([`Turn::Send`]) instead of a `send(2)`.
    fn turn(&mut self, sends_itself: bool) -> Turn {
        let mut reads = 0;
        loop {
            if !self.session.unsent().is_empty() {
                // `watch` is answered by its stream, which subscribes before it sends the
                // OK (memcached's order): nothing logged after the client reads OK is lost.
                if let Next::Watch(mask) = self.next {
                    return Turn::Watch(mask);
                }
                if sends_itself {
                    return Turn::Send;
                }
                // A write that completes at once is no state a snapshot could see: the
                // connection says it is writing only while it waits to.
                match write_now(&self.sock, &mut self.session) {
                    Ok(true) => {}
                    Ok(false) => {
                        self.session.mark(ConnState::Write);
                        return Turn::Wait;
                    }
                    Err(_) => return Turn::Close,
                }
            }
            match self.next {
                Next::Write => {}
                Next::Read | Next::GiveWay => {
                    if self.session.sh().stopping() {
                        return Turn::Close;
                    }
                    if self.next == Next::GiveWay {
                        self.next = Next::Read;
                        return Turn::GiveWay;
                    }
                    if self.drained && !self.closed {
                        self.session.mark(self.session.waiting_state());
                        return Turn::Idle;
                    }
                    if reads == READS_PER_TURN {
                        return Turn::GiveWay;
                    }
                    reads += 1;
                    match self.read() {
                        Read::Got => {}
                        Read::Again => continue,
                        Read::End => return Turn::Close,
                    }
                }
                Next::Park => return Turn::Park,
                Next::Close => return Turn::Close,
                Next::Shutdown => {
                    self.session.sh().shutdown.notify_one();
                    return Turn::Close;
                }
                Next::Watch(mask) => return Turn::Watch(mask),
            }
            self.next = self.session.pump();
            if self.next == Next::Park {
                return Turn::Park;
            }
        }
    }

    /// Reads what the socket holds into the session's input.
    fn read(&mut self) -> Read {
        self.session.room_to_read();
        let spare = self.session.rbuf.capacity() - self.session.rbuf.len();
        match read_into(self.sock.fd(), &mut self.session.rbuf) {
            Ok(0) => Read::End,
            Ok(n) => {
                self.drained = n < spare;
                self.session.arrived(n, !self.drained);
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
    /// requests: a binary request's key is not guessed). A router's connections are not the
    /// loop's (`crate::server`'s hand-over).
    fn prefetch(&self, what: Prefetch) {
        if let Some(key) = memkit_protocol::first_key(&self.session.rbuf) {
            self.session.sh().engine.prefetch(key, what);
        }
    }

    /// Moves a connection that sent `watch` to the worker's runtime, which streams the log
    /// to it (rare, and waits on two things at once: a task's work).
    fn into_watch(self, poll: Option<&mio::Poll>, runtime: &tokio::runtime::Handle, mask: u8) {
        let LoopConn {
            mut sock, session, ..
        } = self;
        if let Some(poll) = poll {
            sock.deregister(poll);
        }
        session.mark(ConnState::Watch);
        let pending = session.unsent().to_vec();
        let reg = session.into_registration();
        // The socket changes owner and is never closed in between.
        drop(match sock {
            Sock::Tcp(s) => {
                let s = std::net::TcpStream::from(s);
                runtime.spawn(async move {
                    watch(tokio::net::TcpStream::from_std(s), reg, mask, pending).await
                })
            }
            Sock::Unix(s) => {
                let s = std::os::unix::net::UnixStream::from(s);
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
        crate::task::watch_stream(s, &reg.sh, mask, &pending).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An idle loop connection is its slot, its registry entry and the kernel's socket:
    /// this keeps the slot from growing back toward a task's size (`docs/limits.md` has the
    /// RSS figures).
    #[test]
    fn an_idle_connection_slot_stays_small() {
        #[cfg(target_os = "linux")]
        let size = std::mem::size_of::<Option<LoopConn<ring_worker::Held>>>();
        #[cfg(not(target_os = "linux"))]
        let size = std::mem::size_of::<Option<LoopConn<()>>>();
        eprintln!("loop connection slot: {size} bytes");
        assert!(size <= 208, "a loop connection's slot holds {size} bytes");
    }
}
