//! The io_uring worker: a pass submits the receives and sends of the connections it served
//! with one `io_uring_enter` ([`super::ring::Ring`]), waits, and serves the connections
//! whose operations completed. At light load it waits in its epoll instead
//! ([`super::light`]) and serves the connections waiting there as an epoll worker does.
//!
//! What the ring holds of a connection is its [`Held`] state; a connection is driven only
//! when the ring holds nothing of it.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use memkit_engine::Prefetch;
use mio::{Interest, Poll, Token};

use super::light::{Light, RING};
use super::ring::{Done, Key, Op, QUIET_MAX, Ring};
use super::sock::{Sock, Waker};
use super::{Backend, Core, LoopConn};
use crate::session::Next;

/// What the ring holds of a connection. The variants are the legal combinations: a
/// connection has at most one receive armed and one send in flight, and a send in flight
/// has the receive after it linked behind it or none.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum Held {
    /// Nothing: the worker drives it.
    #[default]
    Nothing,
    /// Nothing either: it waits in the worker's epoll (light load) and reads and writes by
    /// system call, as an epoll worker's connection does.
    Polled,
    /// A receive is armed: the kernel takes a provided buffer when bytes arrive.
    Recv,
    /// Its output is the kernel's until the send completes; `then_recv`: its next receive is
    /// linked behind it.
    Send { then_recv: bool },
    /// A short reply's copy, sent with the next receive linked behind it: one completion
    /// ends both.
    Quiet,
}

impl Held {
    /// Completions still to come for the operations held.
    fn pending(self) -> u8 {
        match self {
            Held::Nothing | Held::Polled => 0,
            Held::Recv | Held::Quiet => 1,
            Held::Send { then_recv } => 1 + u8::from(then_recv),
        }
    }
}

/// A closed connection's socket, kept open until the ring's last operation on it completes.
#[derive(Debug)]
struct Retiring {
    key: Key,
    _sock: Sock,
    pending: u8,
}

/// An io_uring worker's ring and its light-load epoll.
pub(super) struct Uring {
    // Declared first: dropped first, the ring finishes its operations before the sockets
    // they name (`retiring`, and the connections' in `Core`) close.
    ring: Ring,
    light: Light,
    retiring: Vec<Retiring>,
    waker: RawFd,
    done: Vec<Done>,
    /// Connections a pass's completions drive, and whether each is a new event of it.
    driven: Vec<(usize, bool)>,
    polled: Vec<(usize, bool, bool)>,
}

impl Uring {
    /// A ring and an epoll for a worker, both watching its `waker`.
    pub fn new(waker: &Waker) -> io::Result<Uring> {
        let fd = waker.0.as_raw_fd();
        let mut ring = Ring::new()?;
        ring.watch_waker(fd)?;
        let light = Light::new(&mut ring, fd)?;
        Ok(Uring {
            ring,
            light,
            retiring: Vec::new(),
            waker: fd,
            done: Vec::with_capacity(256),
            driven: Vec::with_capacity(256),
            polled: Vec::with_capacity(256),
        })
    }

    /// Waits for the next pass's work: in the epoll while light (collecting from the ring
    /// when it signalled), else in the ring (looking into the epoll when its poll
    /// completed). Never sleeps with connections that gave way (`idle` false).
    fn wait(&mut self, idle: bool) -> io::Result<()> {
        self.polled.clear();
        let (ring, light) = (&mut self.ring, &mut self.light);
        if light.on {
            let sleep = idle && !light.collect && !ring.pending();
            ring.flush();
            let rang = look(light, sleep, &mut self.polled)?;
            if rang || !sleep {
                ring.enter(false, None, &mut self.done)?;
            } else {
                self.done.clear();
            }
            // The kernel makes a bounded batch of deferred completions an enter, and
            // signals only for the first one deferred: collect until a collect is empty.
            light.collect = !self.done.is_empty();
        } else {
            if light.polled > 0 && !light.watched {
                ring.watch_light(light.fd())?;
                light.watched = true;
            }
            ring.enter(idle, None, &mut self.done)?;
        }
        if self.done.iter().any(|d| d.op == Op::Light) {
            light.watched = false;
            if !light.on {
                look(light, false, &mut self.polled)?;
            }
        }
        Ok(())
    }

    /// The worker's load moved it: light (`on`), its connections move to the epoll at
    /// their next turn and it sleeps there, the ring signalling it; busy, back to the ring.
    fn turn_light(&mut self, core: &Core<Held>, on: bool) {
        self.light.on = on;
        self.ring.signal_eventfd(on);
        if let Some(sh) = &core.sh {
            sh.counters
                .io_moves
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        // What the ring made before its signal was on must not wait for the next one.
        self.light.collect = on;
    }

    /// Drives the connections a pass completed. Their input is already in (no system call
    /// comes between them now), so each one's record is warmed a connection ahead of its
    /// answer, its index bucket since its receive was copied in.
    ///
    /// The first connection's reply is submitted as soon as it is rendered, when others
    /// follow it: its request has waited longest, and at one request in flight it would
    /// otherwise wait for the whole pass too. One more `io_uring_enter` a pass of several,
    /// not one a reply, which the throughput bench pays for (`docs/BENCHMARKS.md`).
    fn serve_ring(&mut self, core: &mut Core<Held>, woken: &[(usize, bool)]) {
        let warm = woken.len() > 1;
        if warm {
            core.prefetch(woken[0].0, Prefetch::Record);
        }
        for (n, &(slot, fresh)) in woken.iter().enumerate() {
            if warm && let Some(&(next, _)) = woken.get(n + 1) {
                core.prefetch(next, Prefetch::Record);
            }
            core.drive(self, slot, fresh);
            if n == 0 && warm {
                self.ring.flush();
            }
        }
    }

    /// A completion came for a connection that is gone: one fewer operation holds its
    /// socket open.
    fn retired(&mut self, key: Key) {
        let Some(i) = self.retiring.iter().position(|r| r.key == key) else {
            // A connection closes with nothing in flight or retires its socket: no
            // completion can name a generation that is neither live nor retiring.
            debug_assert!(false, "a completion for {key:?}, which holds nothing");
            return;
        };
        self.retiring[i].pending -= 1;
        if self.retiring[i].pending == 0 {
            self.retiring.swap_remove(i);
        }
    }

    /// A receive completed: its bytes go into the connection's input, and (`warm`) its
    /// first lookup's index bucket starts loading. Whether the connection is to be driven.
    fn received(&mut self, core: &mut Core<Held>, d: Done, warm: bool) -> bool {
        let key = d.key;
        let more = d.more_input();
        let Core { slots, spare, .. } = core;
        let Some(conn) = live(slots, key) else {
            if let Some(input) = d.input {
                self.ring.discard(input);
            }
            self.retired(key);
            return false;
        };
        conn.held = Held::Nothing;
        match d.res {
            n if n > 0 => {
                let Some(input) = d.input else {
                    conn.next = Next::Close;
                    return true;
                };
                conn.session.lend(spare);
                conn.session.room_to_read();
                let rbuf = &mut conn.session.rbuf;
                self.ring.take_input(input, |b| rbuf.extend_from_slice(b));
                conn.drained = !more;
                conn.session.arrived(n as usize, more);
                if conn.next == Next::Read {
                    conn.next = Next::Write;
                }
                if warm {
                    conn.prefetch(Prefetch::Bucket);
                }
                true
            }
            e if e == -libc::ENOBUFS || e == -libc::EINTR || e == -libc::EAGAIN => {
                // No buffer was free in this pass: the ones it gave back are published
                // before the receive is submitted again.
                if self.ring.recv(conn.sock.fd(), key).is_err() {
                    conn.next = Next::Close;
                    return true;
                }
                conn.held = Held::Recv;
                false
            }
            _ => {
                // The peer's end (0) or a failed socket, read after any reply in flight.
                conn.next = Next::Close;
                true
            }
        }
    }

    /// A send completed. Whether the connection is to be driven: not when a receive is
    /// armed for it (linked behind the send).
    fn sent(&mut self, core: &mut Core<Held>, d: Done) -> bool {
        let Core { slots, spare, .. } = core;
        let Some(conn) = live(slots, d.key) else {
            self.retired(d.key);
            return false;
        };
        let Held::Send { then_recv } = conn.held else {
            debug_assert!(
                false,
                "a send completed for a connection with none in flight"
            );
            return false;
        };
        let Some(out) = d.output else {
            return false;
        };
        // MSG_WAITALL: anything short of the whole output is a failed socket; what was not
        // written is lost with it.
        if usize::try_from(d.res).ok() != Some(out.len()) {
            // The receive linked behind, if any, completes cancelled.
            conn.held = if then_recv { Held::Recv } else { Held::Nothing };
            conn.next = Next::Close;
            return !then_recv;
        }
        conn.session.output_back(out, spare);
        if !then_recv {
            conn.held = Held::Nothing;
            return true;
        }
        // Waiting for its next request, with its receive armed: it is not driven until
        // then, and holds no buffer meanwhile.
        conn.held = Held::Recv;
        conn.session.rest(spare);
        false
    }

    /// A quiet send failed. The receive linked behind it is cancelled with no completion of
    /// its own: a failed request that skips its success's completion skips those of the
    /// requests linked behind it (liburing's `skip-cqe` test pins this). Whether the
    /// connection is to be driven (closed).
    fn quiet_failed(&mut self, core: &mut Core<Held>, d: Done) -> bool {
        let Some(conn) = live(&mut core.slots, d.key) else {
            self.retired(d.key);
            return false;
        };
        conn.held = Held::Nothing;
        conn.next = Next::Close;
        true
    }
}

/// The connection a completion names, if it is still the one in its slot.
fn live(slots: &mut [Option<LoopConn<Held>>], key: Key) -> Option<&mut LoopConn<Held>> {
    match slots.get_mut(key.slot) {
        Some(Some(c)) if c.era == key.era => Some(c),
        _ => None,
    }
}

/// Moves a connection that the ring holds nothing of into the worker's epoll. Bytes that
/// arrived before are not lost: epoll reports a ready socket when it is added.
fn to_poll(light: &mut Light, conn: &mut LoopConn<Held>, slot: usize) -> io::Result<()> {
    let both = Interest::READABLE | Interest::WRITABLE;
    conn.sock.register(&light.poll, Token(slot), both)?;
    conn.held = Held::Polled;
    light.polled += 1;
    Ok(())
}

impl Backend for Uring {
    type Held = Held;

    fn add(&mut self, conn: &mut LoopConn<Held>, slot: usize) -> io::Result<()> {
        if self.light.on {
            return to_poll(&mut self.light, conn, slot);
        }
        self.wait_input(conn, slot)
    }

    /// The loop through the ring: one `io_uring_enter` submits the pass's receives and
    /// sends and waits for completions; the connections completed are then served, their
    /// lookups warmed as in [`Core::serve`].
    fn pass(&mut self, core: &mut Core<Held>) -> io::Result<bool> {
        self.wait(core.again.is_empty())?;
        core.drive_again(self);
        let mut rang = std::mem::take(&mut self.light.woke);
        let mut stop = false;
        // A connection completed alone has nothing to overlap its misses with.
        let warm = self.done.len() > 1;
        let mut inputs = self.polled.iter().filter(|&&(_, input, _)| input).count();
        let mut driven = std::mem::take(&mut self.driven);
        driven.clear();
        let mut done = std::mem::take(&mut self.done);
        for d in done.drain(..) {
            let slot = d.key.slot;
            match d.op {
                Op::Wake => {
                    rang = true;
                    if !d.armed() && self.ring.watch_waker(self.waker).is_err() {
                        stop = true;
                    }
                }
                Op::Light => {}
                Op::Recv => {
                    inputs += usize::from(d.res > 0);
                    if self.received(core, d, warm) {
                        driven.push((slot, true));
                    }
                }
                Op::Send => {
                    if self.sent(core, d) {
                        driven.push((slot, false));
                    }
                }
                Op::Quiet => {
                    if self.quiet_failed(core, d) {
                        driven.push((slot, false));
                    }
                }
            }
        }
        self.done = done;
        if rang {
            stop |= !core.woken(self);
        }
        let polled = std::mem::take(&mut self.polled);
        core.serve(self, &polled);
        self.polled = polled;
        self.serve_ring(core, &driven);
        self.driven = driven;
        if let Some(on) = self.light.tally(inputs) {
            self.turn_light(core, on);
        }
        Ok(!stop)
    }

    fn may_drive(conn: &LoopConn<Held>) -> bool {
        matches!(conn.held, Held::Nothing | Held::Polled)
    }

    fn sends_itself(conn: &LoopConn<Held>) -> bool {
        conn.held != Held::Polled
    }

    /// Moves the connection to where the worker's load says it should wait (the epoll
    /// while light, the ring while busy); it is driven only when the ring holds nothing of
    /// it.
    fn follow(&mut self, conn: &mut LoopConn<Held>, slot: usize) -> io::Result<()> {
        match (conn.held, self.light.on) {
            (Held::Nothing, true) => to_poll(&mut self.light, conn, slot),
            (Held::Polled, false) => {
                conn.sock.deregister(&self.light.poll);
                conn.held = Held::Nothing;
                self.light.polled -= 1;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Sends the connection's output. A connection that will wait for its next request
    /// once this is written has its receive linked behind the send: one submission for
    /// both; its reply, if short, is sent quietly from a copy (its output buffer is then
    /// free at once: `true`).
    fn send(&mut self, conn: &mut LoopConn<Held>, slot: usize) -> io::Result<bool> {
        let waits = conn.next == Next::Read && conn.drained && !conn.closed;
        let then_recv = waits && !conn.session.sh().stopping();
        let key = Key {
            slot,
            era: conn.era,
        };
        let fd = conn.sock.fd();
        if then_recv && conn.session.unsent().len() <= QUIET_MAX {
            self.ring.send_quiet(fd, conn.session.unsent(), key)?;
            conn.held = Held::Quiet;
            conn.session.written();
            conn.session.mark(conn.session.waiting_state());
            return Ok(true);
        }
        let out = conn.session.take_output();
        self.ring
            .send(fd, out, key, then_recv)
            .map_err(|(e, _)| e)?;
        conn.held = Held::Send { then_recv };
        if then_recv {
            // It is not driven again before its next input: it waits from here.
            conn.session.mark(conn.session.waiting_state());
        }
        Ok(false)
    }

    /// Arms a receive, unless the connection waits in the epoll (edge-triggered there).
    fn wait_input(&mut self, conn: &mut LoopConn<Held>, slot: usize) -> io::Result<()> {
        if conn.held != Held::Nothing {
            return Ok(());
        }
        let key = Key {
            slot,
            era: conn.era,
        };
        self.ring.recv(conn.sock.fd(), key)?;
        conn.held = Held::Recv;
        Ok(())
    }

    /// A connection with operations in flight gives its socket to `retiring`, shut so that
    /// they end at once; the socket closes at their last completion.
    fn close(&mut self, conn: LoopConn<Held>, slot: usize) -> Option<LoopConn<Held>> {
        if conn.held == Held::Polled {
            // Its descriptor leaves the epoll when it closes, or in `into_watch`.
            self.light.polled -= 1;
        }
        let pending = conn.held.pending();
        if pending == 0 {
            return Some(conn);
        }
        conn.sock.shutdown();
        let LoopConn { sock, era, .. } = conn;
        self.retiring.push(Retiring {
            key: Key { slot, era },
            _sock: sock,
            pending,
        });
        None
    }

    fn poll_of(&self, conn: &LoopConn<Held>) -> Option<&Poll> {
        (conn.held == Held::Polled).then_some(&self.light.poll)
    }

    /// The worker stops: what the kernel holds of its connections (armed receives, sends in
    /// flight) is shut down, cancelled and waited for, so that no buffer is freed and no
    /// socket closed while the kernel may use it.
    fn finish(&mut self, core: &mut Core<Held>) {
        for conn in core.slots.iter().flatten() {
            if conn.held.pending() > 0 {
                conn.sock.shutdown();
            }
        }
        if let Err(e) = self.ring.drain() {
            tracing::error!("worker ring: operations still in flight at stop: {e}");
        }
        self.retiring.clear();
    }
}

/// Takes the epoll's events (`sleep`: waiting for one), the connections' into `polled` as
/// (slot, input, closed); whether the ring signalled.
fn look(light: &mut Light, sleep: bool, polled: &mut Vec<(usize, bool, bool)>) -> io::Result<bool> {
    let timeout = (!sleep).then_some(std::time::Duration::ZERO);
    if let Err(e) = light.poll.poll(&mut light.events, timeout)
        && e.kind() != io::ErrorKind::Interrupted
    {
        return Err(e);
    }
    let mut rang = false;
    for ev in light.events.iter() {
        if ev.token() == RING {
            rang = true;
            continue;
        }
        if ev.token() == super::epoll::WAKE {
            // The ring's poll on the waker completed too, unsignalled: until it is
            // collected, the ring signals nothing more.
            (light.woke, rang) = (true, true);
            continue;
        }
        let closed = ev.is_read_closed() || ev.is_error();
        polled.push((ev.token().0, closed || ev.is_readable(), closed));
    }
    Ok(rang)
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;
    use std::sync::Arc;

    use super::*;
    use crate::session::Session;
    use crate::state::{ConnLive, Registered, Shared};

    /// A connection closed while the ring holds a receive of it keeps its socket open until
    /// that receive completes: a descriptor number closed under an operation may be given
    /// to the next socket the process opens, and an operation issued later on it (a receive
    /// linked behind a send resolves its descriptor only then) would act on that stranger.
    #[test]
    fn a_socket_stays_open_until_the_ring_lets_go_of_it() {
        let waker = Waker::new().unwrap();
        let Ok(mut uring) = Uring::new(&waker) else {
            return; // no io_uring here: nothing the ring could hold
        };
        uring.light.on = false;
        let settings = crate::Settings::default();
        let sh = Shared::new(Arc::new(crate::backend::engine_for(&settings)), settings);
        let (ours, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let fd = ours.as_raw_fd();
        let mut conn = LoopConn {
            sock: Sock::Unix(mio::net::UnixStream::from_std(ours)),
            session: Session::new(
                Registered { sh, id: 1 },
                Arc::new(ConnLive::new(0, None, true)),
            ),
            next: Next::Read,
            drained: true,
            closed: false,
            era: 9,
            held: Held::Nothing,
        };
        uring.wait_input(&mut conn, 3).unwrap();
        assert_eq!(conn.held, Held::Recv);
        assert!(
            uring.close(conn, 3).is_none(),
            "kept while its receive is armed"
        );
        // SAFETY: fcntl(2) F_GETFD reads a descriptor's flags and touches no memory.
        let open = |fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0;
        assert!(open(fd), "closed under the ring's receive");
        // The receive ends (the socket was shut) and its completion lets the socket go.
        let mut done = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !uring.retiring.is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "the receive never ended"
            );
            uring
                .ring
                .enter(true, Some(std::time::Duration::from_millis(10)), &mut done)
                .unwrap();
            for d in done.drain(..) {
                assert_eq!((d.op, d.key), (Op::Recv, Key { slot: 3, era: 9 }));
                if let Some(input) = d.input {
                    uring.ring.discard(input);
                }
                uring.retired(d.key);
            }
        }
        assert!(!open(fd), "its socket closed with the last operation");
    }
}
