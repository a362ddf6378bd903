//! A worker loop driven through its ring ([`super::ring::Ring`]): a pass submits the
//! receives and sends of the connections it served with one `io_uring_enter`, waits, and
//! serves the connections whose operations completed.
//!
//! Kept apart from the ring itself, which knows operations and buffers but not connections.

use std::io;
use std::os::fd::AsRawFd;

use memkit_engine::Prefetch;
use mio::{Interest, Token};

use super::light::{Light, RING};
use super::ring::{Done, Op, QUIET_MAX, Ring};
use super::{Backend, LoopConn, WAKE, Worker};
use crate::exec::Action;

/// Arms a receive for a connection that waits for input, unless one is armed or it waits
/// in the epoll.
pub(super) fn arm(ring: &mut Ring, conn: &mut LoopConn, slot: usize) -> io::Result<()> {
    let Some(st) = conn.ring.as_mut() else {
        return Ok(());
    };
    if !st.armed && !st.polled {
        ring.recv(conn.sock.fd(), slot, conn.era)?;
        st.armed = true;
    }
    Ok(())
}

/// Moves a connection that the ring holds nothing of into the worker's epoll. Bytes that
/// arrived before are not lost: epoll reports a ready socket when it is added.
pub(super) fn to_poll(light: &mut Light, conn: &mut LoopConn, slot: usize) -> io::Result<()> {
    let both = Interest::READABLE | Interest::WRITABLE;
    conn.sock.register(&light.poll, Token(slot), both)?;
    if let Some(st) = conn.ring.as_mut() {
        st.polled = true;
    }
    light.polled += 1;
    Ok(())
}

/// At the start of a connection's turn, moves it to where the worker's load says it
/// should wait (the epoll while light, the ring while busy), if the ring holds nothing of
/// it; `Err` if it could not move (it is closed).
pub(super) fn follow(light: &mut Light, conn: &mut LoopConn, slot: usize) -> io::Result<()> {
    let Some(st) = conn.ring.as_mut() else {
        return Ok(());
    };
    if st.polled == light.on || st.armed || st.sending || st.quiet.is_some() {
        return Ok(());
    }
    if light.on {
        return to_poll(light, conn, slot);
    }
    conn.sock.deregister(&light.poll);
    st.polled = false;
    st.event = conn.session.requests;
    light.polled -= 1;
    Ok(())
}

/// How a connection's output left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sent {
    /// Copied and sent quietly: the connection waits for its next request, its output
    /// buffer free.
    Quiet,
    /// Sent from its output buffer, which is the kernel's until the send's completion.
    Counted,
}

/// Sends the rest of a connection's output. A connection that will wait for its next
/// request once this is written has its receive linked behind the send: one submission for
/// both; its reply, if short, is sent quietly from a copy.
pub(super) fn send(ring: &mut Ring, conn: &mut LoopConn, slot: usize) -> io::Result<Sent> {
    let waits = conn.next == Some(Action::Continue) && conn.drained && !conn.closed;
    let waits = waits && !conn.reg.sh.stopping();
    let Some(st) = conn.ring.as_mut() else {
        return Err(io::ErrorKind::Unsupported.into());
    };
    let then_recv = waits && !st.armed;
    let out = &conn.session.out;
    let fd = conn.sock.fd();
    if then_recv && out.len() <= QUIET_MAX {
        let reply = st.quiet.insert(Box::from(&out[..]));
        // SAFETY: the copy stays in the connection's ring state, untouched, until the pair
        // completes ([`Worker::received`], [`Worker::quiet_failed`]), or, the connection
        // closed, among the ring's parked replies ([`Worker::close`]).
        if let Err(e) = unsafe { ring.send_quiet(fd, reply, (slot, conn.era)) } {
            st.quiet = None;
            return Err(e);
        }
        st.armed = true;
        conn.session.written(&conn.reg.sh);
        conn.live.set(conn.session.waiting_state());
        return Ok(Sent::Quiet);
    }
    // SAFETY: while `sending` is set the connection is not driven ([`Worker::drive`]) and
    // nothing else touches its output, which stays where it is until the send is done
    // ([`Worker::sent`]); a stopping worker waits for its sends ([`Worker::finish_ring`]).
    unsafe { ring.send(fd, out.as_ptr(), out.len(), (slot, conn.era), then_recv)? };
    st.sending = true;
    st.armed |= then_recv;
    if then_recv {
        // It is not driven again before its next input: it waits from here.
        conn.live.set(conn.session.waiting_state());
    }
    Ok(Sent::Counted)
}

impl Worker {
    fn ring(&mut self) -> &mut Ring {
        match &mut self.backend {
            Backend::Ring(r, _) => r,
            Backend::Epoll(_) => unreachable!("an epoll worker has no ring"),
        }
    }

    fn light(&mut self) -> &mut Light {
        match &mut self.backend {
            Backend::Ring(_, l) => l,
            Backend::Epoll(_) => unreachable!("an epoll worker has no ring"),
        }
    }

    /// The loop through the ring: one `io_uring_enter` submits the pass's receives and
    /// sends and waits for completions; the connections completed are then served, their
    /// lookups warmed as in [`Worker::serve`]. At light load the worker waits in its epoll
    /// instead ([`super::light`]), and serves the connections waiting there as an epoll
    /// worker does.
    pub(super) fn run_ring(mut self) {
        let mut done = Vec::with_capacity(256);
        let mut woken = Vec::with_capacity(256);
        let mut polled = Vec::with_capacity(256);
        loop {
            if let Err(e) = self.wait(&mut done, &mut polled) {
                tracing::error!("worker ring failed: {e}");
                break;
            }
            for i in std::mem::take(&mut self.again) {
                self.drive(i);
            }
            woken.clear();
            let mut stop = false;
            if std::mem::take(&mut self.light().woke) {
                self.waker.clear();
                stop |= !self.take_new();
            }
            // A connection completed alone has nothing to overlap its misses with.
            let warm = done.len() > 1;
            let mut inputs = polled.iter().filter(|&&(_, input, _)| input).count();
            for d in &done {
                let drive = match d.op {
                    Op::Wake => {
                        self.waker.clear();
                        if !d.armed() && self.rewatch().is_err() {
                            stop = true;
                        }
                        stop |= !self.take_new();
                        false
                    }
                    Op::Light => false,
                    Op::Recv => {
                        inputs += usize::from(d.res > 0);
                        self.received(d, warm)
                    }
                    Op::Send => self.sent(d),
                    Op::Quiet => self.quiet_failed(d),
                };
                if drive {
                    woken.push(d.slot);
                }
            }
            self.serve(&polled);
            self.serve_ring(&woken);
            if let Some(on) = self.light().tally(inputs) {
                self.turn_light(on);
            }
            if stop {
                break;
            }
        }
        self.finish_ring();
    }

    /// Waits for the next pass's work: in the epoll while light (collecting from the ring
    /// when it signalled), else in the ring (looking into the epoll when its poll
    /// completed). Never sleeps with connections that gave way.
    fn wait(
        &mut self,
        done: &mut Vec<Done>,
        polled: &mut Vec<(usize, bool, bool)>,
    ) -> io::Result<()> {
        polled.clear();
        let idle = self.again.is_empty();
        let Backend::Ring(ring, light) = &mut self.backend else {
            unreachable!("an epoll worker has no ring");
        };
        if light.on {
            let sleep = idle && !light.collect && !ring.pending();
            ring.flush();
            let rang = look(light, sleep, polled)?;
            if rang || !sleep {
                ring.enter(false, None, done)?;
            } else {
                done.clear();
            }
            // The kernel makes a bounded batch of deferred completions an enter, and
            // signals only for the first one deferred: collect until a collect is empty.
            light.collect = !done.is_empty();
        } else {
            if light.polled > 0 && !light.watched {
                ring.watch_light(light.fd())?;
                light.watched = true;
            }
            ring.enter(idle, None, done)?;
        }
        if done.iter().any(|d| d.op == Op::Light) {
            light.watched = false;
            if !light.on {
                look(light, false, polled)?;
            }
        }
        Ok(())
    }

    /// The worker's load moved it: light (`on`), its connections move to the epoll at
    /// their next turn and it sleeps there, the ring signalling it; busy, back to the ring.
    fn turn_light(&mut self, on: bool) {
        let Backend::Ring(ring, light) = &mut self.backend else {
            return;
        };
        light.on = on;
        ring.signal_eventfd(on);
        if let Some(sh) = &self.sh {
            sh.counters
                .io_moves
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        // What the ring made before its signal was on must not wait for the next one.
        light.collect = on;
    }

    fn rewatch(&mut self) -> io::Result<()> {
        let fd = self.waker.0.as_raw_fd();
        self.ring().watch_waker(fd)
    }

    /// Drives the connections a pass completed. Their input is already in (no system call
    /// comes between them now), so each one's record is warmed a connection ahead of its
    /// answer, its index bucket since its receive was copied in.
    ///
    /// The first connection's reply is submitted as soon as it is rendered, when others
    /// follow it: its request has waited longest, and at one request in flight it would
    /// otherwise wait for the whole pass too. One more `io_uring_enter` a pass of several,
    /// not one a reply, which the throughput bench pays for (`docs/BENCHMARKS.md`).
    fn serve_ring(&mut self, woken: &[usize]) {
        let warm = woken.len() > 1;
        if warm {
            self.prefetch(woken[0], Prefetch::Record);
        }
        for (n, &slot) in woken.iter().enumerate() {
            if warm && let Some(&next) = woken.get(n + 1) {
                self.prefetch(next, Prefetch::Record);
            }
            self.drive(slot);
            if n == 0 && warm {
                self.ring().flush();
            }
        }
    }

    /// A receive completed: its bytes go into the connection's input, and (`warm`) its
    /// first lookup's index bucket starts loading. Whether the connection is to be driven.
    fn received(&mut self, d: &Done, warm: bool) -> bool {
        let Backend::Ring(ring, _) = &mut self.backend else {
            return false;
        };
        let conn = match self.slots.get_mut(d.slot) {
            Some(Some(c)) if c.era == d.era => c,
            _ => {
                // Its connection closed while it was armed.
                if let Some(bid) = d.buffer() {
                    ring.give_back(bid);
                }
                ring.unpark(d.slot, d.era);
                return false;
            }
        };
        let Some(st) = conn.ring.as_mut() else {
            return false;
        };
        st.armed = false;
        // The send before it, if any, is over.
        st.quiet = None;
        st.event = conn.session.requests;
        match d.res {
            n if n > 0 => {
                let Some(bid) = d.buffer() else {
                    conn.next = Some(Action::Close);
                    return true;
                };
                let n = n as usize;
                conn.session.lend(&mut self.spare);
                conn.session.room_to_read();
                conn.session.rbuf.extend_from_slice(ring.buffer(bid, n));
                ring.give_back(bid);
                conn.arrived(n, !d.more_input());
                if conn.next == Some(Action::Continue) {
                    conn.next = None;
                }
                if warm {
                    conn.prefetch(Prefetch::Bucket);
                }
                true
            }
            e if e == -libc::ENOBUFS || e == -libc::EINTR || e == -libc::EAGAIN => {
                // No buffer was free in this pass: the ones it gave back are published
                // before the receive is submitted again.
                if arm(ring, conn, d.slot).is_err() {
                    conn.next = Some(Action::Close);
                    return true;
                }
                false
            }
            _ => {
                // The peer's end (0) or a failed socket, read after any reply in flight.
                conn.next = Some(Action::Close);
                true
            }
        }
    }

    /// A quiet send failed. The receive linked behind it is cancelled with no completion of
    /// its own: a failed request that skips its success's completion skips those of the
    /// requests linked behind it (liburing's `skip-cqe` test pins this). Whether the
    /// connection is to be driven (closed).
    fn quiet_failed(&mut self, d: &Done) -> bool {
        let Backend::Ring(ring, _) = &mut self.backend else {
            return false;
        };
        let conn = match self.slots.get_mut(d.slot) {
            Some(Some(c)) if c.era == d.era => c,
            _ => {
                ring.unpark(d.slot, d.era);
                return false;
            }
        };
        if let Some(st) = conn.ring.as_mut() {
            st.armed = false;
            st.quiet = None;
        }
        conn.next = Some(Action::Close);
        true
    }

    /// A send completed. Whether the connection is to be driven: not when a receive is armed
    /// for it (linked behind the send).
    fn sent(&mut self, d: &Done) -> bool {
        let conn = match self.slots.get_mut(d.slot) {
            Some(Some(c)) if c.era == d.era => c,
            _ => return false,
        };
        let Some(st) = conn.ring.as_mut() else {
            return false;
        };
        st.sending = false;
        // MSG_WAITALL: anything short of the whole output is a failed socket; what was not
        // written is lost with it.
        let whole = usize::try_from(d.res).is_ok_and(|n| n == conn.session.out.len());
        if !whole {
            conn.session.out.clear();
            conn.next = Some(Action::Close);
            return true;
        }
        conn.session.written(&conn.reg.sh);
        if !st.armed {
            return true;
        }
        // Waiting for its next request, with its receive armed: it is not driven until
        // then, and holds no buffer meanwhile.
        conn.session.rest(&mut self.spare);
        false
    }

    /// The loop is stopping: ends what the kernel still holds of its connections (their
    /// armed receives and sends in flight) and waits for those to complete, so that no
    /// buffer is freed while the kernel may use it. What does not complete in a second is
    /// leaked instead.
    fn finish_ring(&mut self) {
        for conn in self.slots.iter().flatten() {
            if conn.ring.as_ref().is_some_and(|r| r.armed || r.sending) {
                // SAFETY: shutdown(2) on a descriptor the connection owns.
                unsafe { libc::shutdown(conn.sock.fd(), libc::SHUT_RDWR) };
            }
        }
        let mut done = Vec::new();
        let tick = std::time::Duration::from_millis(10);
        for _ in 0..100 {
            let ring = self.ring();
            if ring.inflight == 0 {
                return;
            }
            if ring.enter(true, Some(tick), &mut done).is_err() {
                break;
            }
            for d in &done {
                if let Some(bid) = d.buffer() {
                    ring.give_back(bid);
                }
            }
        }
        if self.ring().inflight > 0 {
            tracing::warn!("worker ring: operations still in flight at stop; their buffers leak");
            std::mem::forget(std::mem::take(&mut self.slots));
        }
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
        if ev.token() == WAKE {
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
