//! [`Relay`]: a TCP relay on 127.0.0.1 that a test puts between two peers (a client and
//! memkitd, two nodes of a replication group, a router and its pool) to cut them off from
//! each other, slow them down or reset their connections, while the test goes on.
//!
//! A relay listens on a free loopback port ([`RelayHandle::addr`]) and forwards every connection
//! it accepts to its target, bytes unchanged, both ways (a half close is passed on). Its
//! faults can be changed at any time, from any thread, through the relay or a
//! [`RelayHandle`] ([`Relay::handle`], `Clone`):
//!
//! - [`RelayHandle::cut`] (or [`RelayHandle::cut_with`] a [`Mode`]): a partition. Existing
//!   connections stop forwarding both ways: the relay stops reading, so what the peers send
//!   waits in the kernel's buffers and is never delivered. A new connection is accepted and
//!   held, nothing forwarded and no connection made to the target ([`Mode::Blackhole`], a
//!   partition where packets vanish), or accepted and reset at once ([`Mode::Refuse`]).
//! - [`RelayHandle::cut_one_way`]: an asymmetric partition, one [`Direction`] held back,
//!   the other forwarded (new connections are made to the target and behave the same).
//! - [`RelayHandle::heal`]: forwarding resumes for new connections. Every connection that
//!   lived through the cut is reset (closed with RST), and what it held back is dropped:
//!   a real partition loses packets, and TCP cannot deliver bytes later without the ones
//!   lost before them, so the endpoints must notice and reconnect, as they would after a
//!   partition long enough to time them out.
//! - [`RelayHandle::delay`]: every chunk forwarded waits that long first. Chunks wait in
//!   turn, so a delay also caps a connection's throughput (one read's worth a delay).
//! - [`RelayHandle::reset_all`]: every current connection is reset (`SO_LINGER` 0, so the
//!   peers see RST, not an orderly close); new ones work.
//! - [`RelayHandle::stats`]: connections accepted and open, bytes forwarded each way.
//!
//! A fault takes effect within one tick (20 ms): a chunk the relay is already writing when
//! a cut begins may still land. The relay runs on threads of its own (an acceptor, and two
//! a connection), so it serves `#[test]` and `#[tokio::test]` code alike, and it never
//! blocks for long: every read and write is bounded by the tick and checks the relay's
//! stop flag and the connection's close flag between tries, connecting to the target by a
//! 2 s timeout. Dropping the [`Relay`] closes its listener and every connection and joins
//! every thread it started before it returns ([`RelayHandle::threads`] counts them); inside a
//! runtime, that blocks the dropping thread for a tick or so (up to the connect timeout
//! while a connection to the target is being made).
//!
//! ```no_run
//! # let server_addr: std::net::SocketAddr = "127.0.0.1:11211".parse().unwrap();
//! use memkit_testkit::relay::{Direction, Relay};
//!
//! let relay = Relay::start(server_addr);
//! // ... connect the client to relay.addr() ...
//! relay.cut(); // the client's requests go unanswered
//! relay.heal(); // its connections are reset; new ones reach the server
//! relay.cut_one_way(Direction::FromTarget); // requests arrive, replies do not
//! ```

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How long any blocking call of the relay's threads waits before it checks its flags: the
/// bound on how late a fault or a stop takes effect.
const TICK: Duration = Duration::from_millis(20);

/// How long a connection to the target may take (the target's backlog may be full).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// What one read takes from a socket: one chunk, forwarded (and delayed) as a whole.
const CHUNK: usize = 64 * 1024;

/// A way through the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the connecting peer to the target.
    ToTarget,
    /// From the target back to the connecting peer.
    FromTarget,
}

/// What a full cut does with a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Accepted and held, nothing forwarded: the peer's connect succeeds and its requests
    /// go unanswered, as in a partition where packets vanish.
    #[default]
    Blackhole,
    /// Accepted and reset at once: the peer sees its connection fail (an error or an end of
    /// stream on its first read), as when the far side is down.
    Refuse,
}

/// The relay's counters; see [`RelayHandle::stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Connections accepted, whatever became of them.
    pub accepted: u64,
    /// Connections open now (held ones included).
    pub open: usize,
    /// Bytes written to the target.
    pub to_target: u64,
    /// Bytes written back to the connecting peers.
    pub from_target: u64,
}

/// A running relay; stopped (its threads joined) when dropped. Its faults are those of
/// its [`RelayHandle`], which it dereferences to. See the module notes.
#[derive(Debug)]
pub struct Relay {
    handle: RelayHandle,
    acceptor: Option<JoinHandle<()>>,
}

/// Changes a relay's faults and reads its counters, from any thread; cheap to clone. Once
/// the relay is dropped, its changes do nothing and its counters stay as they were.
#[derive(Debug, Clone)]
pub struct RelayHandle {
    shared: Arc<Shared>,
}

/// What the relay's threads and handles share.
#[derive(Debug)]
struct Shared {
    addr: SocketAddr,
    target: SocketAddr,
    stop: AtomicBool,
    /// Whether each direction is held back. Read lock-free by the forwarding threads;
    /// written under `state`'s lock, so that admitting a connection and a cut or a heal
    /// happen one after the other.
    to_target_cut: AtomicBool,
    from_target_cut: AtomicBool,
    delay_micros: AtomicU64,
    state: Mutex<State>,
    accepted: AtomicU64,
    to_target: AtomicU64,
    from_target: AtomicU64,
    threads: AtomicUsize,
}

#[derive(Debug, Default)]
struct State {
    mode: Mode,
    /// Every connection admitted, weakly: a connection belongs to the threads (or the
    /// acceptor's held list) that serve it, and closes when they let it go.
    conns: Vec<Weak<Conn>>,
}

/// One accepted connection and, once made, its connection to the target. The sockets are
/// read and written through shared references (`&TcpStream` is `Read + Write`), so each has
/// one descriptor, closed when the last owner drops this.
#[derive(Debug)]
struct Conn {
    client: TcpStream,
    target: OnceLock<TcpStream>,
    /// Its threads are to stop and let it close.
    closed: AtomicBool,
    /// Close it with RST rather than FIN.
    reset: AtomicBool,
    /// It lived through a cut: a heal resets it.
    tainted: AtomicBool,
}

impl Conn {
    fn close(&self, reset: bool) {
        if reset {
            self.reset.store(true, SeqCst);
        }
        self.closed.store(true, SeqCst);
    }

    fn is_closed(&self) -> bool {
        self.closed.load(SeqCst)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // The descriptors close right after this: with linger 0 the close sends RST.
        if self.reset.load(SeqCst) {
            set_linger_zero(&self.client);
            if let Some(t) = self.target.get() {
                set_linger_zero(t);
            }
        }
    }
}

/// `SO_LINGER` 0: closing the socket resets the connection and drops unsent bytes.
fn set_linger_zero(s: &TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: the descriptor is `s`'s, open for the whole call; the option's value points to
    // a live `linger` whose size is the length passed. A failure leaves an orderly close.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast::<libc::c_void>(),
            size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

impl Relay {
    /// A relay on a free 127.0.0.1 port forwarding to `target`, forwarding nothing held
    /// back and without delay. It accepts connections once this returns (they wait in the
    /// listener's backlog until its acceptor takes them). Panics if it cannot listen.
    pub fn start(target: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        // Non-blocking, so that the acceptor polls its stop flag between tries.
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("local address");
        let shared = Arc::new(Shared {
            addr,
            target,
            stop: AtomicBool::new(false),
            to_target_cut: AtomicBool::new(false),
            from_target_cut: AtomicBool::new(false),
            delay_micros: AtomicU64::new(0),
            state: Mutex::new(State::default()),
            accepted: AtomicU64::new(0),
            to_target: AtomicU64::new(0),
            from_target: AtomicU64::new(0),
            threads: AtomicUsize::new(0),
        });
        let sh = shared.clone();
        let name = format!("relay-{}", addr.port());
        let acceptor = spawn(&shared, name, move || accept_loop(&sh, listener));
        Relay {
            handle: RelayHandle { shared },
            acceptor: Some(acceptor),
        }
    }

    /// A handle to change its faults from elsewhere (another thread, a task).
    pub fn handle(&self) -> RelayHandle {
        self.handle.clone()
    }
}

impl std::ops::Deref for Relay {
    type Target = RelayHandle;

    fn deref(&self) -> &RelayHandle {
        &self.handle
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.handle.shared.stop.store(true, SeqCst);
        // The acceptor joins the connections' threads before it ends.
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

impl RelayHandle {
    /// Where the relay listens: what the peer connects to instead of the target.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// Where the relay forwards to.
    pub fn target(&self) -> SocketAddr {
        self.shared.target
    }

    /// A partition both ways, new connections held ([`Mode::Blackhole`]).
    pub fn cut(&self) {
        self.cut_with(Mode::Blackhole);
    }

    /// A partition both ways, new connections treated as `mode` says.
    pub fn cut_with(&self, mode: Mode) {
        let mut state = self.shared.lock();
        state.mode = mode;
        self.shared.to_target_cut.store(true, SeqCst);
        self.shared.from_target_cut.store(true, SeqCst);
        taint(&state);
    }

    /// `direction` held back, the other still forwarded. Adds to a cut already made: both
    /// directions cut one way each make a full cut (in the last [`Mode`] set, Blackhole
    /// unless told).
    pub fn cut_one_way(&self, direction: Direction) {
        let state = self.shared.lock();
        self.shared.flag(direction).store(true, SeqCst);
        taint(&state);
    }

    /// Ends every cut: every connection that lived through one is reset, what it held back
    /// is dropped, and new connections are forwarded. See the module notes for why.
    pub fn heal(&self) {
        let state = self.shared.lock();
        // Closed before the flags clear: a forwarding thread that sees its direction open
        // again checks the close flag next, so held-back bytes are never delivered.
        for conn in live(&state) {
            if conn.tainted.load(SeqCst) {
                conn.close(true);
            }
        }
        self.shared.to_target_cut.store(false, SeqCst);
        self.shared.from_target_cut.store(false, SeqCst);
    }

    /// Every chunk forwarded from now on waits `delay` first (`Duration::ZERO`: none).
    pub fn delay(&self, delay: Duration) {
        let micros = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.shared.delay_micros.store(micros, SeqCst);
    }

    /// Resets every current connection (the peers see RST within a tick); new connections
    /// are served as before.
    pub fn reset_all(&self) {
        for conn in live(&self.shared.lock()) {
            conn.close(true);
        }
    }

    /// The counters now.
    pub fn stats(&self) -> Stats {
        let sh = &self.shared;
        Stats {
            accepted: sh.accepted.load(SeqCst),
            open: live(&sh.lock()).count(),
            to_target: sh.to_target.load(SeqCst),
            from_target: sh.from_target.load(SeqCst),
        }
    }

    /// How many of the relay's threads are running: 0 once the relay is dropped.
    pub fn threads(&self) -> usize {
        self.shared.threads.load(SeqCst)
    }
}

/// Marks every open connection as having lived through a cut.
fn taint(state: &State) {
    for conn in live(state) {
        conn.tainted.store(true, SeqCst);
    }
}

fn live(state: &State) -> impl Iterator<Item = Arc<Conn>> + '_ {
    state.conns.iter().filter_map(Weak::upgrade)
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking test thread must not take the relay's faults away from the others.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn flag(&self, direction: Direction) -> &AtomicBool {
        match direction {
            Direction::ToTarget => &self.to_target_cut,
            Direction::FromTarget => &self.from_target_cut,
        }
    }

    fn is_cut(&self, direction: Direction) -> bool {
        self.flag(direction).load(SeqCst)
    }

    fn stopping(&self) -> bool {
        self.stop.load(SeqCst)
    }

    fn counter(&self, direction: Direction) -> &AtomicU64 {
        match direction {
            Direction::ToTarget => &self.to_target,
            Direction::FromTarget => &self.from_target,
        }
    }

    /// Whether `conn` is still to be served, after a tick's wait.
    fn pause(&self, conn: &Conn) -> bool {
        thread::sleep(TICK);
        !conn.is_closed() && !self.stopping()
    }

    /// Waits until `deadline` a tick at a time: whether `conn` is still to be served.
    fn wait_until(&self, conn: &Conn, deadline: Instant) -> bool {
        loop {
            if conn.is_closed() || self.stopping() {
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            thread::sleep(TICK.min(deadline - now));
        }
    }

    /// Takes in a new connection: resets it, holds it, or registers it for forwarding
    /// (returned for a thread to serve).
    fn admit(&self, client: TcpStream, held: &mut Vec<Arc<Conn>>) -> Option<Arc<Conn>> {
        // An accepted socket does not inherit the listener's non-blocking mode on Linux;
        // set it anyway, as the forwarding threads count on timeouts instead.
        let _ = client.set_nonblocking(false);
        let _ = client.set_nodelay(true);
        let mut state = self.lock();
        let full = self.is_cut(Direction::ToTarget) && self.is_cut(Direction::FromTarget);
        if full && state.mode == Mode::Refuse {
            set_linger_zero(&client);
            return None;
        }
        let cut = self.is_cut(Direction::ToTarget) || self.is_cut(Direction::FromTarget);
        let conn = Arc::new(Conn {
            client,
            target: OnceLock::new(),
            closed: AtomicBool::new(false),
            reset: AtomicBool::new(false),
            tainted: AtomicBool::new(cut),
        });
        state.conns.retain(|c| c.strong_count() > 0);
        state.conns.push(Arc::downgrade(&conn));
        if full {
            held.push(conn);
            return None;
        }
        Some(conn)
    }
}

/// Starts a thread counted in [`RelayHandle::threads`]. Panics if it cannot.
fn spawn<F>(shared: &Arc<Shared>, name: String, f: F) -> JoinHandle<()>
where
    F: FnOnce() + Send + 'static,
{
    let count = Counted::new(shared);
    thread::Builder::new()
        .name(name)
        .spawn(move || {
            let _count = count;
            f()
        })
        .expect("start a relay thread")
}

/// One running thread in the count, until dropped (by the thread, as it ends).
struct Counted(Arc<Shared>);

impl Counted {
    fn new(shared: &Arc<Shared>) -> Counted {
        shared.threads.fetch_add(1, SeqCst);
        Counted(shared.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.threads.fetch_sub(1, SeqCst);
    }
}

/// The acceptor: takes connections until the relay stops, then closes the listener and
/// the held connections and joins every connection's thread.
fn accept_loop(sh: &Arc<Shared>, listener: TcpListener) {
    let mut workers: Vec<JoinHandle<()>> = Vec::new();
    // Connections held by a full cut (Blackhole): no thread serves them, so they live here
    // until a heal or a reset closes them.
    let mut held: Vec<Arc<Conn>> = Vec::new();
    let mut n = 0u64;
    while !sh.stopping() {
        match listener.accept() {
            Ok((client, _)) => {
                sh.accepted.fetch_add(1, SeqCst);
                n += 1;
                if let Some(conn) = sh.admit(client, &mut held) {
                    let s = sh.clone();
                    let name = format!("relay-{}-{n}", sh.addr.port());
                    workers.push(spawn(sh, name, move || serve(&s, conn, n)));
                }
                continue; // more may be waiting
            }
            // Nothing to accept, or a failure that passes (no descriptors left for now).
            Err(_) => thread::sleep(TICK / 4),
        }
        held.retain(|c| !c.is_closed());
        // Finished threads are joined as the relay goes, so a long test keeps no handles.
        let (done, running) = workers.into_iter().partition(JoinHandle::is_finished);
        workers = running;
        join_all(done);
    }
    drop(listener);
    drop(held);
    join_all(workers);
}

fn join_all(threads: Vec<JoinHandle<()>>) {
    for t in threads {
        // A forwarding thread that panicked has nothing to report beyond its own message.
        let _ = t.join();
    }
}

/// Serves one connection: connects to the target, then forwards the two directions, one
/// on this thread and one on a scoped thread of its own.
fn serve(sh: &Arc<Shared>, conn: Arc<Conn>, n: u64) {
    let target = match TcpStream::connect_timeout(&sh.target, CONNECT_TIMEOUT) {
        Ok(t) => t,
        Err(_) => {
            // The target is away: the peer sees its connection reset, as if refused.
            conn.close(true);
            return;
        }
    };
    for s in [&conn.client, &target] {
        let _ = s.set_nodelay(true);
        let _ = s.set_read_timeout(Some(TICK));
        let _ = s.set_write_timeout(Some(TICK));
    }
    let _ = conn.target.set(target);
    thread::scope(|scope| {
        let count = Counted::new(sh);
        let back = thread::Builder::new()
            .name(format!("relay-{}-{n}b", sh.addr.port()))
            .spawn_scoped(scope, || {
                let _count = count;
                pump(sh, &conn, Direction::FromTarget);
            });
        if back.is_err() {
            conn.close(true); // no thread for the way back: this connection cannot work
        }
        pump(sh, &conn, Direction::ToTarget);
    });
}

/// Forwards one direction of `conn` until its source ends, it fails, the connection is
/// closed or the relay stops.
fn pump(sh: &Shared, conn: &Conn, direction: Direction) {
    let Some(target) = conn.target.get() else {
        return;
    };
    let (src, dst) = match direction {
        Direction::ToTarget => (&conn.client, target),
        Direction::FromTarget => (target, &conn.client),
    };
    let mut buf = vec![0; CHUNK];
    loop {
        // Held back while cut: nothing is read, so the sender's bytes wait in the kernel's
        // buffers (and its writes stall once they fill), to be dropped by the heal.
        if sh.is_cut(direction) {
            if !sh.pause(conn) {
                return;
            }
            continue;
        }
        if conn.is_closed() || sh.stopping() {
            return;
        }
        let n = match (&*src).read(&mut buf) {
            Ok(0) => {
                // The source's half close, passed on; the other direction goes on.
                let _ = dst.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => n,
            Err(e) if retry(&e) => continue,
            Err(e) => {
                // A reset is passed on as a reset; any other failure as a close.
                conn.close(e.kind() == io::ErrorKind::ConnectionReset);
                return;
            }
        };
        if !deliver(sh, conn, direction, dst, &buf[..n]) {
            return;
        }
    }
}

/// Writes one chunk to `dst` after the delay, holding it while its direction is cut:
/// whether the connection is still to be served.
fn deliver(sh: &Shared, conn: &Conn, direction: Direction, dst: &TcpStream, chunk: &[u8]) -> bool {
    let delay = Duration::from_micros(sh.delay_micros.load(SeqCst));
    if !delay.is_zero() && !sh.wait_until(conn, Instant::now() + delay) {
        return false;
    }
    let mut written = 0;
    while written < chunk.len() {
        // A chunk read just before a cut is held with the rest (and dropped by the heal).
        // The cut is checked before the close flag: see `RelayHandle::heal`.
        while sh.is_cut(direction) {
            if !sh.pause(conn) {
                return false;
            }
        }
        if conn.is_closed() || sh.stopping() {
            return false;
        }
        match (&*dst).write(&chunk[written..]) {
            Ok(0) => {
                conn.close(false);
                return false;
            }
            Ok(n) => {
                written += n;
                sh.counter(direction).fetch_add(n as u64, SeqCst);
            }
            Err(e) if retry(&e) => {}
            Err(e) => {
                conn.close(e.kind() == io::ErrorKind::ConnectionReset);
                return false;
            }
        }
    }
    true
}

/// Whether a failed read or write only ran out of its tick (or was interrupted).
fn retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}
