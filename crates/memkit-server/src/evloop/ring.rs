//! A worker loop's io_uring: the receives and sends of its connections, submitted together
//! and completed together, in place of an `epoll_wait` and a `read` and a `send` each.
//!
//! Why: at one request in flight a request is a readiness event, a read and a send, three
//! system calls (two, with the readiness events of a busy loop shared). On the machines
//! measured here a system call's entry and exit alone cost about 170 ns, on both sides of
//! the boundary (`docs/BENCHMARKS.md`). Through the ring, a loop's pass is one
//! `io_uring_enter` for all the connections it serves: their sends are issued in it, their
//! receives completed by it.
//!
//! **What the kernel holds is the ring's.** Every operation submitted gets an entry in the
//! ring's in-flight table, and a buffer the kernel reads from moves into that entry: a
//! send's output ([`Ring::send`]) or a quiet reply's copy ([`Ring::send_quiet`]). It comes
//! back with the operation's completion ([`Done`]) and not before, so no caller can free or
//! reuse memory the kernel still reads. Receives write into the ring's own provided buffers
//! ([`BUFS`] of [`BUF_LEN`] bytes, taken by the kernel when bytes arrive, so a connection
//! waiting for a request holds no memory of its own); a completed receive's bytes are lent
//! to the caller by [`Ring::take_input`], which gives the buffer back. Every `unsafe` of
//! io_uring is in this file, each with its argument. A ring with operations in flight is
//! never freed under them: dropping it cancels them all and waits for their completions
//! (or aborts the process, should the kernel never complete them).
//!
//! The ring is set up with `SINGLE_ISSUER` and `DEFER_TASKRUN`: only the worker thread
//! submits, and completions are made only when it asks for them, instead of interrupting it.
//!
//! A busy worker sleeps in the ring's own wait: [`Ring::enter`] submits and waits in one
//! system call. A light one sleeps in its epoll (`super::light`), the ring signalling an
//! eventfd there ([`Ring::register_eventfd`]) for what it still completes.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use io_uring::types::{BufRingEntry, CancelBuilder, Fd, SubmitArgs, Timespec};
use io_uring::{IoUring, cqueue, opcode, squeue};

/// Provided buffers a ring keeps (a power of two).
const BUFS: u16 = 256;
/// Each buffer's length: a typical request fits (memcaslap's are under 200 bytes; a PHP
/// session's set is a few KiB and is read on by the connection).
const BUF_LEN: usize = 2048;
/// io_uring_enter(2)'s `IORING_ENTER_GETEVENTS`.
const ENTER_GETEVENTS: u32 = 1;
/// The buffer group's id.
const GROUP: u16 = 0;
/// How long a pass that made counted sends waits for them and one more completion before
/// it takes what it has: the delay a send stuck on a full socket may add to its neighbours'
/// turn.
const SEND_WAIT: Duration = Duration::from_micros(200);
/// The longest reply sent quietly ([`Ring::send_quiet`]): a copy of it stays in the ring
/// until the connection's next request, so an idle connection holds at most this.
pub(super) const QUIET_MAX: usize = 1024;
/// How long a dropped ring waits for the kernel to complete what it cancelled.
const DRAIN_LIMIT: Duration = Duration::from_secs(10);

/// What an operation was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Recv,
    Send,
    /// A quiet send failed: it completes only then, in place of the receive linked behind
    /// it.
    Quiet,
    /// The poll on the worker's waker.
    Wake,
    /// The poll on the worker's epoll ([`Ring::watch_light`]): a connection waiting there
    /// has an event.
    Light,
}

/// The connection an operation works for: its slot and generation in the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Key {
    pub slot: usize,
    pub era: u32,
}

/// Bytes a receive left in one of the ring's buffers, until [`Ring::take_input`] gives the
/// buffer back.
#[derive(Debug)]
#[must_use = "the buffer goes back to the kernel through Ring::take_input or Ring::discard"]
pub(super) struct Input {
    bid: u16,
    len: usize,
}

/// One completion, taken out of the queue with what the operation owned.
#[derive(Debug)]
pub(super) struct Done {
    pub op: Op,
    /// The connection, for receives and sends.
    pub key: Key,
    pub res: i32,
    flags: u32,
    /// A receive's bytes.
    pub input: Option<Input>,
    /// A send's output buffer, back from the kernel.
    pub output: Option<Vec<u8>>,
}

impl Done {
    /// The socket held more than the receive took.
    pub fn more_input(&self) -> bool {
        cqueue::sock_nonempty(self.flags)
    }

    /// A multishot operation (the waker's poll) is still armed.
    pub fn armed(&self) -> bool {
        cqueue::more(self.flags)
    }
}

/// What an entry of the in-flight table keeps alive for the kernel.
#[derive(Debug)]
enum Owned {
    Nothing,
    Output(Vec<u8>),
    Copy(#[allow(dead_code)] Box<[u8]>),
}

/// An operation the kernel holds.
#[derive(Debug)]
struct InFlight {
    op: Op,
    key: Key,
    owned: Owned,
}

/// `user_data` of operations outside the table (the top bit set), and the bit that marks a
/// quiet pair's send (its receive carries the pair's plain table index).
const UNTABLED: u64 = 1 << 63;
const WAKE: u64 = UNTABLED | 1;
const LIGHT: u64 = UNTABLED | 2;
const CANCEL: u64 = UNTABLED | 3;
const QUIET_SEND: u64 = 1 << 62;

/// The provided buffers: the buffer ring shared with the kernel and the memory behind it.
struct Provided {
    /// `BUFS` entries, page-aligned.
    entries: *mut BufRingEntry,
    memory: Box<[u8]>,
    /// The tail as published, and buffers added since.
    tail: u16,
    added: u16,
}

fn entries_layout() -> std::alloc::Layout {
    let size = usize::from(BUFS) * std::mem::size_of::<BufRingEntry>();
    std::alloc::Layout::from_size_align(size, 4096).expect("buffer ring layout")
}

impl Provided {
    fn new() -> io::Result<Provided> {
        let layout = entries_layout();
        // SAFETY: the layout has a non-zero size.
        let entries = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<BufRingEntry>();
        if entries.is_null() {
            return Err(io::ErrorKind::OutOfMemory.into());
        }
        Ok(Provided {
            entries,
            memory: vec![0u8; usize::from(BUFS) * BUF_LEN].into_boxed_slice(),
            tail: 0,
            added: 0,
        })
    }

    /// Hands buffer `bid` to the kernel (at the next [`Provided::publish`]).
    fn give_back(&mut self, bid: u16) {
        let at = self.tail.wrapping_add(self.added) & (BUFS - 1);
        // SAFETY: `at` < BUFS, inside the entries' allocation; the kernel reads entries only
        // up to the published tail, which this one is past.
        let e = unsafe { &mut *self.entries.add(usize::from(at)) };
        e.set_addr(self.memory.as_ptr() as u64 + (usize::from(bid) * BUF_LEN) as u64);
        e.set_len(BUF_LEN as u32);
        e.set_bid(bid);
        self.added += 1;
    }

    /// Publishes the buffers given back since the last call.
    fn publish(&mut self) {
        if self.added == 0 {
            return;
        }
        self.tail = self.tail.wrapping_add(self.added);
        self.added = 0;
        // SAFETY: the tail is the first entry's reserved field, a u16 the kernel reads
        // atomically; the entries written before it are released with it.
        unsafe {
            let tail = BufRingEntry::tail(self.entries).cast::<AtomicU16>();
            (*tail).store(self.tail, Ordering::Release);
        }
    }

    /// The bytes a receive left in buffer `bid`: the kernel gave the buffer up when it
    /// completed the receive, and gets it back only through [`Provided::give_back`].
    fn bytes(&self, input: &Input) -> &[u8] {
        let at = usize::from(input.bid) * BUF_LEN;
        &self.memory[at..at + input.len.min(BUF_LEN)]
    }
}

impl Drop for Provided {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; the ring that used it unregistered
        // it (or was closed) before this drop (`Ring` drops its `IoUring` first).
        unsafe { std::alloc::dealloc(self.entries.cast(), entries_layout()) };
    }
}

/// The ring, its provided buffers, and the operations the kernel holds.
pub(super) struct Ring {
    // Declared first so that it is dropped (closed) before the memory it points into.
    ring: IoUring,
    bufs: Provided,
    /// The in-flight table: `None` entries are listed in `vacant`.
    table: Vec<Option<InFlight>>,
    vacant: Vec<u32>,
    /// Operations of the table the kernel holds.
    inflight: usize,
    /// Counted sends queued since the last [`Ring::enter`].
    sends: usize,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("inflight", &self.inflight)
            .finish_non_exhaustive()
    }
}

impl Ring {
    /// A ring for one worker thread, its buffers registered; `Err` where the kernel has no
    /// io_uring (before 6.1, or disabled: `kernel.io_uring_disabled`, seccomp).
    pub fn new() -> io::Result<Ring> {
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_taskrun_flag()
            .setup_cqsize(4096)
            .build(1024)?;
        let mut r = Ring {
            ring,
            bufs: Provided::new()?,
            table: Vec::new(),
            vacant: Vec::new(),
            inflight: 0,
            sends: 0,
        };
        // SAFETY: `entries` is page-aligned memory for `BUFS` entries that lives as long as
        // the registration: the ring is closed before `Provided` frees it.
        unsafe {
            r.ring.submitter().register_buf_ring_with_flags(
                r.bufs.entries as u64,
                BUFS,
                GROUP,
                0,
            )?
        };
        for bid in 0..BUFS {
            r.bufs.give_back(bid);
        }
        r.bufs.publish();
        Ok(r)
    }

    /// Whether the kernel holds any operation of a connection.
    #[cfg(test)]
    pub fn busy(&self) -> bool {
        self.inflight > 0
    }

    /// Enters an operation in the table; its `user_data`.
    fn enter_op(&mut self, op: Op, key: Key, owned: Owned) -> u64 {
        let e = Some(InFlight { op, key, owned });
        let at = match self.vacant.pop() {
            Some(at) => {
                self.table[at as usize] = e;
                at
            }
            None => {
                self.table.push(e);
                (self.table.len() - 1) as u32
            }
        };
        self.inflight += 1;
        u64::from(at)
    }

    /// Takes an entry out of the table, returning what it owned.
    fn leave_op(&mut self, at: u32) -> Option<InFlight> {
        let e = self.table.get_mut(at as usize)?.take()?;
        self.vacant.push(at);
        self.inflight -= 1;
        Some(e)
    }

    /// Queues entries together (a linked chain must not be split by a submission), first
    /// submitting what is queued if there is no room for them all.
    ///
    /// # Safety
    /// Whatever memory the entries point to must stay valid until their completions.
    unsafe fn push(&mut self, es: &[squeue::Entry]) -> io::Result<()> {
        let room = {
            let sq = self.ring.submission();
            sq.capacity() - sq.len()
        };
        if room < es.len() {
            self.bufs.publish();
            self.ring.submit()?;
        }
        // SAFETY: the caller's contract; an empty queue has room for a chain of two.
        unsafe { self.ring.submission().push_multiple(es) }
            .map_err(|_| io::Error::from(io::ErrorKind::WouldBlock))
    }

    fn recv_entry(fd: RawFd, ud: u64) -> squeue::Entry {
        opcode::Recv::new(Fd(fd), std::ptr::null_mut(), BUF_LEN as u32)
            .buf_group(GROUP)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT)
            .user_data(ud)
    }

    /// `MSG_WAITALL`: the kernel sends all of it, waiting for room as it must, or fails; a
    /// completion with fewer bytes is a failed socket.
    fn send_entry(fd: RawFd, buf: &[u8], ud: u64) -> squeue::Entry {
        let len = buf.len().min(u32::MAX as usize) as u32;
        opcode::Send::new(Fd(fd), buf.as_ptr(), len)
            .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
            .build()
            .user_data(ud)
    }

    /// Arms a receive on `fd` for connection `key`, into a provided buffer.
    pub fn recv(&mut self, fd: RawFd, key: Key) -> io::Result<()> {
        let ud = self.enter_op(Op::Recv, key, Owned::Nothing);
        // SAFETY: the receive writes only into a provided buffer, which the ring owns.
        let pushed = unsafe { self.push(&[Self::recv_entry(fd, ud)]) };
        if pushed.is_err() {
            self.leave_op(ud as u32);
        }
        pushed
    }

    /// Sends `out` on `fd` for connection `key`, and (`then_recv`) arms the connection's
    /// next receive behind it (linked: issued once the send is done, cancelled if it
    /// fails). The buffer is the ring's until the send's completion hands it back; the send
    /// is counted: [`Ring::enter`] waits for it. On failure the buffer comes back at once.
    pub fn send(
        &mut self,
        fd: RawFd,
        out: Vec<u8>,
        key: Key,
        then_recv: bool,
    ) -> Result<(), (io::Error, Vec<u8>)> {
        let ud = self.enter_op(Op::Send, key, Owned::Nothing);
        let recv_ud = then_recv.then(|| self.enter_op(Op::Recv, key, Owned::Nothing));
        // The entry owns the buffer before the kernel sees it; moving a Vec does not move
        // its heap memory, which the entry's pointer names.
        let entry = Self::send_entry(fd, &out, ud);
        self.table[ud as usize]
            .as_mut()
            .expect("just entered")
            .owned = Owned::Output(out);
        // SAFETY: the buffer lives in the table entry, untouched, until the completion
        // takes it out ([`Ring::collect`]); a ring is not freed with operations in flight.
        let pushed = unsafe {
            match recv_ud {
                Some(r) => {
                    let send = entry.flags(squeue::Flags::IO_LINK);
                    self.push(&[send, Self::recv_entry(fd, r)])
                }
                None => self.push(&[entry]),
            }
        };
        match pushed {
            Ok(()) => {
                self.sends += 1;
                Ok(())
            }
            Err(e) => {
                if let Some(r) = recv_ud {
                    self.leave_op(r as u32);
                }
                let Some(InFlight {
                    owned: Owned::Output(out),
                    ..
                }) = self.leave_op(ud as u32)
                else {
                    unreachable!("a send's entry owns its output");
                };
                Err((e, out))
            }
        }
    }

    /// Sends a copy of a short reply on `fd` with the connection's next receive linked
    /// behind it, the send completing only if it fails: one completion ends the pair, the
    /// receive's or, if the send failed, the send's. So a pass of short replies waits for
    /// the next completion with no timer, where counted sends make [`Ring::enter`] wait for
    /// them, bounded by [`SEND_WAIT`]: arming that timer and cancelling it cost about 15 µs
    /// of a request's latency on the machines measured here (`docs/BENCHMARKS.md`).
    pub fn send_quiet(&mut self, fd: RawFd, reply: &[u8], key: Key) -> io::Result<()> {
        let copy: Box<[u8]> = Box::from(reply);
        let ud = self.enter_op(Op::Recv, key, Owned::Nothing);
        let send = Self::send_entry(fd, &copy, ud | QUIET_SEND)
            .flags(squeue::Flags::IO_LINK | squeue::Flags::SKIP_SUCCESS);
        self.table[ud as usize]
            .as_mut()
            .expect("just entered")
            .owned = Owned::Copy(copy);
        // SAFETY: the copy lives in the pair's table entry until the pair's one completion
        // takes it out; a ring is not freed with operations in flight.
        let pushed = unsafe { self.push(&[send, Self::recv_entry(fd, ud)]) };
        if pushed.is_err() {
            self.leave_op(ud as u32);
        }
        pushed
    }

    /// Lends a completed receive's bytes to `f`, then gives the buffer back to the kernel.
    pub fn take_input<T>(&mut self, input: Input, f: impl FnOnce(&[u8]) -> T) -> T {
        let t = f(self.bufs.bytes(&input));
        self.bufs.give_back(input.bid);
        t
    }

    /// Gives a completed receive's buffer back unread (its connection closed).
    pub fn discard(&mut self, input: Input) {
        self.bufs.give_back(input.bid);
    }

    /// Polls the worker's waker (an eventfd); armed again whenever the poll ends.
    pub fn watch_waker(&mut self, fd: RawFd) -> io::Result<()> {
        let e = opcode::PollAdd::new(Fd(fd), libc::POLLIN as u32)
            .multi(true)
            .build()
            .user_data(WAKE);
        // SAFETY: a poll refers to no memory of ours.
        unsafe { self.push(&[e]) }
    }

    /// Polls the worker's epoll `fd` once: it completes when a connection waiting there has
    /// an event (armed by a busy loop, which waits in the ring).
    pub fn watch_light(&mut self, fd: RawFd) -> io::Result<()> {
        let e = opcode::PollAdd::new(Fd(fd), libc::POLLIN as u32)
            .build()
            .user_data(LIGHT);
        // SAFETY: a poll refers to no memory of ours.
        unsafe { self.push(&[e]) }
    }

    /// Has the kernel signal eventfd `fd` for each completion, and for each receive it
    /// defers until the next [`Ring::enter`]: a worker asleep in epoll wakes for them.
    pub fn register_eventfd(&mut self, fd: RawFd) -> io::Result<()> {
        self.ring.submitter().register_eventfd(fd)
    }

    /// Turns the registered eventfd's signals on (the worker will sleep in epoll) or off
    /// (it sleeps in the ring, and each completion's signal would be a wasted wake-up).
    pub fn signal_eventfd(&mut self, on: bool) {
        let cq = self.ring.completion();
        if on {
            cq.enable_eventfd();
        } else {
            cq.disable_eventfd();
        }
    }

    /// The kernel holds deferred work for the next enter that collects (`TASKRUN_FLAG`).
    pub fn pending(&mut self) -> bool {
        self.ring.submission().taskrun()
    }

    /// Submits what is queued, without waiting or collecting completions. A submission
    /// that fails leaves its entries queued for the next [`Ring::enter`], which reports it.
    pub fn flush(&mut self) {
        if self.ring.submission().is_empty() {
            return;
        }
        self.bufs.publish();
        let _ = self.ring.submit();
    }

    /// Publishes returned buffers, submits what is queued and (`wait`) waits for
    /// completions, or up to `timeout`; then moves the completions into `done`.
    ///
    /// The sends submitted complete as they are submitted, as a rule (a socket with room
    /// takes a reply at once), and their completions must not end the wait: the loop would
    /// make a second `io_uring_enter` a pass just to collect them (measured: it cost what
    /// the ring saves). So the wait is for one completion more than the sends, bounded by
    /// [`SEND_WAIT`] for a send that waits for room.
    pub fn enter(
        &mut self,
        wait: bool,
        timeout: Option<Duration>,
        done: &mut Vec<Done>,
    ) -> io::Result<()> {
        self.bufs.publish();
        let sends = std::mem::take(&mut self.sends);
        let want = if wait { 1 + sends } else { 0 };
        let timeout = match timeout {
            None if wait && sends > 0 => Some(SEND_WAIT),
            t => t,
        };
        let r = match timeout {
            // Deferred completions are made only by an enter that asks for events.
            None if !wait => {
                let queued = self.ring.submission().len() as u32;
                // SAFETY: no argument is passed; the flag is io_uring_enter(2)'s GETEVENTS.
                unsafe {
                    self.ring
                        .submitter()
                        .enter::<libc::sigset_t>(queued, 0, ENTER_GETEVENTS, None)
                }
            }
            Some(t) => {
                let ts = Timespec::from(t);
                let args = SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(want, &args)
            }
            None => self.ring.submit_and_wait(want),
        };
        match r {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) => {}
            Err(e) => return Err(e),
        }
        self.collect(done);
        Ok(())
    }

    /// Moves the completions in the queue into `done`, each with what its operation owned.
    fn collect(&mut self, done: &mut Vec<Done>) {
        done.clear();
        let Ring {
            ring,
            bufs,
            table,
            vacant,
            inflight,
            ..
        } = self;
        for c in ring.completion() {
            let ud = c.user_data();
            let (op, key, owned) = match ud {
                WAKE => (Op::Wake, Key { slot: 0, era: 0 }, Owned::Nothing),
                LIGHT => (Op::Light, Key { slot: 0, era: 0 }, Owned::Nothing),
                CANCEL => continue,
                ud => {
                    let at = (ud & !QUIET_SEND) as u32;
                    let Some(e) = table.get_mut(at as usize).and_then(Option::take) else {
                        continue;
                    };
                    vacant.push(at);
                    *inflight -= 1;
                    // A quiet send's completion (a failure) stands for its pair's.
                    let op = if ud & QUIET_SEND != 0 {
                        Op::Quiet
                    } else {
                        e.op
                    };
                    (op, e.key, e.owned)
                }
            };
            let input = match (op, cqueue::buffer_select(c.flags())) {
                (Op::Recv, Some(bid)) => Some(Input {
                    bid,
                    len: usize::try_from(c.result()).unwrap_or(0),
                }),
                (_, Some(bid)) => {
                    bufs.give_back(bid);
                    None
                }
                _ => None,
            };
            let output = match owned {
                Owned::Output(b) => Some(b),
                Owned::Nothing | Owned::Copy(_) => None,
            };
            done.push(Done {
                op,
                key,
                res: c.result(),
                flags: c.flags(),
                input,
                output,
            });
        }
    }

    /// Cancels every operation the kernel holds and waits until each has completed, its
    /// buffers back in the table and freed. A ring may then be dropped: nothing of it is in
    /// the kernel's hands.
    pub fn drain(&mut self) -> io::Result<()> {
        let started = Instant::now();
        let mut done = Vec::new();
        while self.inflight > 0 {
            if started.elapsed() > DRAIN_LIMIT {
                return Err(io::ErrorKind::TimedOut.into());
            }
            let cancel = opcode::AsyncCancel2::new(CancelBuilder::any())
                .build()
                .user_data(CANCEL);
            // SAFETY: a cancellation refers to no memory of ours.
            unsafe { self.push(&[cancel])? };
            self.enter(true, Some(Duration::from_millis(10)), &mut done)?;
            for d in done.drain(..) {
                if let Some(input) = d.input {
                    self.discard(input);
                }
            }
        }
        Ok(())
    }
}

impl Drop for Ring {
    /// Finishes what the kernel holds before any of its memory is freed: a ring dropped in
    /// the middle of its work (a worker that panicked) cancels its operations and waits for
    /// them; one that cannot tell that the kernel is done with its buffers aborts the
    /// process rather than free memory the kernel may still write.
    fn drop(&mut self) {
        if self.inflight == 0 {
            let _ = self.ring.submitter().unregister_buf_ring(GROUP);
            return;
        }
        if let Err(e) = self.drain() {
            eprintln!(
                "memkitd: a worker ring could not finish its {} operations in flight ({e}); \
                 aborting rather than free memory the kernel may still use",
                self.inflight
            );
            std::process::abort();
        }
        let _ = self.ring.submitter().unregister_buf_ring(GROUP);
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    use super::*;

    fn ring() -> Option<Ring> {
        Ring::new().ok()
    }

    const KEY: Key = Key { slot: 7, era: 3 };

    /// A send's buffer is the ring's until its completion, which hands it back with the
    /// connection's key; a receive's bytes are lent from a provided buffer.
    #[test]
    fn buffers_come_back_with_their_completions() {
        let Some(mut r) = ring() else { return };
        let (a, mut b) = UnixStream::pair().unwrap();
        let out = b"hello".to_vec();
        let at = out.as_ptr();
        r.send(a.as_raw_fd(), out, KEY, true)
            .map_err(|(e, _)| e)
            .unwrap();
        assert!(r.busy());
        let mut done = Vec::new();
        r.enter(true, Some(Duration::from_millis(100)), &mut done)
            .unwrap();
        let sent = done.iter_mut().find(|d| d.op == Op::Send).unwrap();
        assert_eq!((sent.key, sent.res), (KEY, 5));
        let back = sent.output.take().unwrap();
        assert_eq!(back.as_ptr(), at, "the same buffer");
        let mut got = [0u8; 5];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello");
        b.write_all(b"get k\r\n").unwrap();
        let mut recv = None;
        while recv.is_none() {
            r.enter(true, Some(Duration::from_secs(1)), &mut done)
                .unwrap();
            recv = done.drain(..).find(|d| d.op == Op::Recv);
        }
        let recv = recv.unwrap();
        assert_eq!(recv.key, KEY);
        let bytes = r.take_input(recv.input.unwrap(), |b| b.to_vec());
        assert_eq!(bytes, b"get k\r\n");
        assert!(!r.busy());
    }

    /// A ring dropped with operations in flight (a worker that panicked) cancels them and
    /// waits for them before its memory goes: the receive it had armed never takes bytes
    /// sent afterwards, a send stuck on a full socket ends, and the drop returns.
    #[test]
    fn a_ring_dropped_in_flight_finishes_its_operations_first() {
        if ring().is_none() {
            return;
        }
        let (a, mut b) = UnixStream::pair().unwrap();
        // A send that cannot finish: far more than the socket holds, nobody reading.
        let (stuck, _unread) = UnixStream::pair().unwrap();
        let (fa, fstuck) = (a.as_raw_fd(), stuck.as_raw_fd());
        let worker = std::thread::spawn(move || {
            let mut r = Ring::new().unwrap();
            r.recv(fa, KEY).unwrap();
            r.send(fstuck, vec![7u8; 8 << 20], KEY, false)
                .map_err(|(e, _)| e)
                .unwrap();
            r.flush();
            assert!(r.busy());
            panic!("a worker's panic unwinds through its ring");
        });
        assert!(worker.join().is_err());
        // The receive was cancelled: these bytes stay in the socket for whoever reads it.
        b.write_all(b"later").unwrap();
        let mut a = a;
        let mut got = [0u8; 5];
        a.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"later");
    }

    /// A quiet pair's copy is kept until the pair's one completion: the receive's when the
    /// send succeeded.
    #[test]
    fn a_quiet_pair_completes_once() {
        let Some(mut r) = ring() else { return };
        let (a, mut b) = UnixStream::pair().unwrap();
        r.send_quiet(a.as_raw_fd(), b"STORED\r\n", KEY).unwrap();
        let mut got = [0u8; 8];
        r.flush();
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"STORED\r\n");
        assert!(r.busy(), "the linked receive waits");
        b.write_all(b"mn\r\n").unwrap();
        let mut done = Vec::new();
        while done.is_empty() {
            r.enter(true, Some(Duration::from_secs(1)), &mut done)
                .unwrap();
        }
        assert_eq!(done.len(), 1);
        let d = done.pop().unwrap();
        assert_eq!((d.op, d.key), (Op::Recv, KEY));
        r.discard(d.input.unwrap());
        assert!(!r.busy());
    }
}
