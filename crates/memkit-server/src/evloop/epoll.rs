//! The epoll worker (`--io epoll`, or a kernel without io_uring): every connection waits in
//! the worker's epoll (mio), edge-triggered, and reads and writes by system call.

use std::io;
use std::os::fd::AsRawFd;

use mio::{Events, Interest, Poll, Token};

use super::sock::Waker;
use super::{Backend, Core, LoopConn};

/// The waker's token; connections' tokens are their slots.
pub(super) const WAKE: Token = Token(usize::MAX);

/// An epoll worker's poller.
pub(super) struct Epoll {
    poll: Poll,
    events: Events,
    /// Connections woken by a poll: (slot, input, closed).
    woken: Vec<(usize, bool, bool)>,
}

impl Epoll {
    /// A poller watching the worker's `waker`.
    pub fn new(waker: &Waker) -> io::Result<Epoll> {
        let poll = Poll::new()?;
        let fd = waker.0.as_raw_fd();
        poll.registry()
            .register(&mut mio::unix::SourceFd(&fd), WAKE, Interest::READABLE)?;
        Ok(Epoll {
            poll,
            events: Events::with_capacity(256),
            woken: Vec::with_capacity(256),
        })
    }
}

impl Backend for Epoll {
    type Held = ();

    /// Both interests at once: edge-triggered, a socket that stays writable costs nothing,
    /// and a write that fills the socket needs no re-registration. Bytes that arrived
    /// before the registration are not lost: epoll reports a ready socket when it is added.
    fn add(&mut self, conn: &mut LoopConn<()>, slot: usize) -> io::Result<()> {
        let both = Interest::READABLE | Interest::WRITABLE;
        conn.sock.register(&self.poll, Token(slot), both)
    }

    fn pass(&mut self, core: &mut Core<()>) -> io::Result<bool> {
        // Connections that gave way must not wait for an edge that already came.
        let timeout = (!core.again.is_empty()).then_some(std::time::Duration::ZERO);
        if let Err(e) = self.poll.poll(&mut self.events, timeout)
            && e.kind() != io::ErrorKind::Interrupted
        {
            return Err(e);
        }
        core.drive_again(self);
        self.woken.clear();
        let mut go_on = true;
        let mut rang = false;
        for ev in self.events.iter() {
            if ev.token() == WAKE {
                rang = true;
                continue;
            }
            let closed = ev.is_read_closed() || ev.is_error();
            self.woken
                .push((ev.token().0, closed || ev.is_readable(), closed));
        }
        if rang {
            go_on = core.woken(self);
        }
        let woken = std::mem::take(&mut self.woken);
        core.serve(self, &woken);
        self.woken = woken;
        Ok(go_on)
    }

    fn may_drive(_: &LoopConn<()>) -> bool {
        true
    }

    fn sends_itself(_: &LoopConn<()>) -> bool {
        false
    }

    fn follow(&mut self, _: &mut LoopConn<()>, _: usize) -> io::Result<()> {
        Ok(())
    }

    fn send(&mut self, _: &mut LoopConn<()>, _: usize) -> io::Result<bool> {
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Edge-triggered: the next arrival is an event; nothing to arm.
    fn wait_input(&mut self, _: &mut LoopConn<()>, _: usize) -> io::Result<()> {
        Ok(())
    }

    /// Its descriptor leaves the epoll when it closes, or in `into_watch`.
    fn close(&mut self, conn: LoopConn<()>, _: usize) -> Option<LoopConn<()>> {
        Some(conn)
    }

    fn poll_of(&self, _: &LoopConn<()>) -> Option<&Poll> {
        Some(&self.poll)
    }

    fn finish(&mut self, _: &mut Core<()>) {}
}
