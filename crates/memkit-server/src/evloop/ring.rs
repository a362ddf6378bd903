//! A worker loop's io_uring: the receives and sends of its connections, submitted together
//! and completed together, in place of an `epoll_wait` and a `read` and a `send` each.
//!
//! Why: at one request in flight a request is a readiness event, a read and a send, three
//! system calls (two, with the readiness events of a busy loop shared). On the machines
//! measured here a system call's entry and exit alone cost about 170 ns, on both sides of
//! the boundary (`docs/BENCHMARKS.md`, issue 19). Through the ring, a loop's pass is one
//! `io_uring_enter` for all the connections it serves: their sends are issued in it, their
//! receives completed by it.
//!
//! A receive takes its buffer from a ring of [`BUFS`] provided buffers of [`BUF_LEN`] bytes
//! when its bytes arrive, so that a connection waiting for a request holds no memory of its
//! own (memcached's idle connection holds none either). What arrives is copied into the
//! connection's input and the buffer goes back at once; a request larger than a buffer is
//! read the rest of the way by the connection's own reads.
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

use io_uring::types::{BufRingEntry, Fd, SubmitArgs, Timespec};
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
const SEND_WAIT: std::time::Duration = std::time::Duration::from_micros(200);
/// The longest reply sent quietly ([`Ring::send_quiet`]): a copy of it stays with its
/// connection until the next request, so an idle connection holds at most this.
pub(super) const QUIET_MAX: usize = 1024;

/// What an operation was, in the top byte of its `user_data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Recv = 1,
    Send = 2,
    Wake = 3,
    /// A quiet send: completes only if it fails, and then in place of the receive linked
    /// behind it.
    Quiet = 4,
    /// The poll on the worker's epoll ([`Ring::watch_light`]): a connection waiting there
    /// has an event.
    Light = 5,
}

/// One completion, copied out of the queue.
#[derive(Debug, Clone, Copy)]
pub(super) struct Done {
    pub op: Op,
    /// The connection's slot and generation, for receives and sends.
    pub slot: usize,
    pub era: u32,
    pub res: i32,
    pub flags: u32,
}

impl Done {
    /// The provided buffer a receive filled.
    pub fn buffer(&self) -> Option<u16> {
        cqueue::buffer_select(self.flags)
    }

    /// The socket held more than the receive took.
    pub fn more_input(&self) -> bool {
        cqueue::sock_nonempty(self.flags)
    }

    /// A multishot operation (the waker's poll) is still armed.
    pub fn armed(&self) -> bool {
        cqueue::more(self.flags)
    }
}

/// An operation's `user_data`: its kind, and the slot and generation of its connection.
fn user_data(op: Op, slot: usize, era: u32) -> u64 {
    ((op as u64) << 56) | (u64::from(era & 0xFF_FFFF) << 32) | (slot as u32 as u64)
}

fn unpack(ud: u64) -> Option<(Op, usize, u32)> {
    let op = match ud >> 56 {
        1 => Op::Recv,
        2 => Op::Send,
        3 => Op::Wake,
        4 => Op::Quiet,
        5 => Op::Light,
        _ => return None,
    };
    Some((op, ud as u32 as usize, ((ud >> 32) & 0xFF_FFFF) as u32))
}

/// Generations wrap at 24 bits (the room left in `user_data`).
pub(super) fn next_era(era: u32) -> u32 {
    era.wrapping_add(1) & 0xFF_FFFF
}

/// The ring, its provided buffers, and a count of the operations the kernel still holds.
pub(super) struct Ring {
    ring: IoUring,
    /// The buffer ring shared with the kernel: `BUFS` entries, page-aligned.
    entries: *mut BufRingEntry,
    /// The buffers' memory.
    bufs: Box<[u8]>,
    /// The buffer ring's tail as published, and buffers added since.
    tail: u16,
    added: u16,
    /// Receives and sends submitted and not completed: their memory must outlive them.
    pub inflight: usize,
    /// Counted sends queued since the last [`Ring::enter`].
    sends: usize,
    /// Quiet sends' copies whose connection closed before the pair completed, by slot and
    /// era: the kernel may still read them until then.
    parked: Vec<(usize, u32, Box<[u8]>)>,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("inflight", &self.inflight)
            .finish_non_exhaustive()
    }
}

fn entries_layout() -> std::alloc::Layout {
    let size = usize::from(BUFS) * std::mem::size_of::<BufRingEntry>();
    std::alloc::Layout::from_size_align(size, 4096).expect("buffer ring layout")
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
        let layout = entries_layout();
        // SAFETY: the layout has a non-zero size.
        let entries = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<BufRingEntry>();
        if entries.is_null() {
            return Err(io::ErrorKind::OutOfMemory.into());
        }
        let mut r = Ring {
            ring,
            entries,
            bufs: vec![0u8; usize::from(BUFS) * BUF_LEN].into_boxed_slice(),
            tail: 0,
            added: 0,
            inflight: 0,
            sends: 0,
            parked: Vec::new(),
        };
        // SAFETY: `entries` is page-aligned memory for `BUFS` entries that lives as long as
        // the registration (it is unregistered before it is freed, in `drop`).
        unsafe {
            r.ring
                .submitter()
                .register_buf_ring_with_flags(r.entries as u64, BUFS, GROUP, 0)?
        };
        for bid in 0..BUFS {
            r.give_back(bid);
        }
        r.publish();
        Ok(r)
    }

    /// The bytes a receive left in buffer `bid`.
    pub fn buffer(&self, bid: u16, len: usize) -> &[u8] {
        let at = usize::from(bid) * BUF_LEN;
        &self.bufs[at..at + len.min(BUF_LEN)]
    }

    /// Returns buffer `bid` to the kernel (at the next [`Ring::publish`]).
    pub fn give_back(&mut self, bid: u16) {
        let at = self.tail.wrapping_add(self.added) & (BUFS - 1);
        // SAFETY: `at` < BUFS, inside the entries' allocation; the kernel reads entries only
        // up to the published tail, which this one is past.
        let e = unsafe { &mut *self.entries.add(usize::from(at)) };
        e.set_addr(self.bufs.as_ptr() as u64 + (usize::from(bid) * BUF_LEN) as u64);
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
            self.ring.submit()?;
        }
        // SAFETY: the caller's contract; an empty queue has room for a chain of two.
        unsafe { self.ring.submission().push_multiple(es) }
            .map_err(|_| io::Error::from(io::ErrorKind::WouldBlock))
    }

    fn recv_entry(fd: RawFd, slot: usize, era: u32) -> squeue::Entry {
        opcode::Recv::new(Fd(fd), std::ptr::null_mut(), BUF_LEN as u32)
            .buf_group(GROUP)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT)
            .user_data(user_data(Op::Recv, slot, era))
    }

    fn send_entry(fd: RawFd, buf: *const u8, len: usize) -> squeue::Entry {
        opcode::Send::new(Fd(fd), buf, len.min(u32::MAX as usize) as u32)
            .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
            .build()
    }

    /// Arms a receive on `fd` for the connection at `slot`, into a provided buffer.
    pub fn recv(&mut self, fd: RawFd, slot: usize, era: u32) -> io::Result<()> {
        // SAFETY: the receive writes only into a provided buffer, which the ring owns.
        unsafe { self.push(&[Self::recv_entry(fd, slot, era)])? };
        self.inflight += 1;
        Ok(())
    }

    /// Sends `len` bytes at `buf` on `fd` for the connection at `slot`, and (`then_recv`)
    /// arms the connection's next receive behind it (linked: issued once the send is done,
    /// cancelled if it fails). The send's completion is counted: [`Ring::enter`] waits for
    /// it.
    ///
    /// `MSG_WAITALL`: the kernel sends all of it, waiting for room as it must, or fails; a
    /// completion with fewer bytes is a failed socket.
    ///
    /// # Safety
    /// `buf` must stay valid for reads of `len` bytes, and unchanged, until the send's
    /// completion.
    pub unsafe fn send(
        &mut self,
        fd: RawFd,
        buf: *const u8,
        len: usize,
        (slot, era): (usize, u32),
        then_recv: bool,
    ) -> io::Result<()> {
        let send = Self::send_entry(fd, buf, len).user_data(user_data(Op::Send, slot, era));
        // SAFETY: the caller keeps `buf` valid until the completion.
        unsafe {
            if then_recv {
                let send = send.flags(squeue::Flags::IO_LINK);
                self.push(&[send, Self::recv_entry(fd, slot, era)])?;
            } else {
                self.push(&[send])?;
            }
        }
        self.inflight += 1 + usize::from(then_recv);
        self.sends += 1;
        Ok(())
    }

    /// Sends `reply` on `fd` with the connection's next receive linked behind it, the send
    /// completing only if it fails: one completion ends the pair, the receive's or, if the
    /// send failed, the send's. So a pass of short replies waits for the next completion
    /// with no timer, where counted sends make [`Ring::enter`] wait for them, bounded by
    /// [`SEND_WAIT`]: arming that timer and cancelling it cost about 15 µs of a request's
    /// latency on the machines measured here (`docs/BENCHMARKS.md`).
    ///
    /// # Safety
    /// `reply` must stay where it is, unchanged, until the pair's completion ([`Ring::park`]
    /// keeps it for a connection that closes first).
    pub unsafe fn send_quiet(
        &mut self,
        fd: RawFd,
        reply: &[u8],
        (slot, era): (usize, u32),
    ) -> io::Result<()> {
        let send = Self::send_entry(fd, reply.as_ptr(), reply.len())
            .user_data(user_data(Op::Quiet, slot, era))
            .flags(squeue::Flags::IO_LINK | squeue::Flags::SKIP_SUCCESS);
        // SAFETY: the caller keeps `reply` valid until the receive's completion, which
        // comes after the send's end.
        unsafe { self.push(&[send, Self::recv_entry(fd, slot, era)])? };
        self.inflight += 1;
        Ok(())
    }

    /// Keeps a closed connection's quiet reply until its receive completes.
    pub fn park(&mut self, slot: usize, era: u32, reply: Box<[u8]>) {
        self.parked.push((slot, era, reply));
    }

    /// A completion came for a connection no longer in its slot: its quiet reply, if one was
    /// parked, is free.
    pub fn unpark(&mut self, slot: usize, era: u32) {
        self.parked.retain(|&(s, e, _)| (s, e) != (slot, era));
    }

    /// Polls the worker's waker (an eventfd); armed again whenever the poll ends.
    pub fn watch_waker(&mut self, fd: RawFd) -> io::Result<()> {
        let e = opcode::PollAdd::new(Fd(fd), libc::POLLIN as u32)
            .multi(true)
            .build()
            .user_data(user_data(Op::Wake, 0, 0));
        // SAFETY: a poll refers to no memory of ours.
        unsafe { self.push(&[e]) }
    }

    /// Polls the worker's epoll `fd` once: it completes when a connection waiting there has
    /// an event (armed by a busy loop, which waits in the ring).
    pub fn watch_light(&mut self, fd: RawFd) -> io::Result<()> {
        let e = opcode::PollAdd::new(Fd(fd), libc::POLLIN as u32)
            .build()
            .user_data(user_data(Op::Light, 0, 0));
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
        self.publish();
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
        timeout: Option<std::time::Duration>,
        done: &mut Vec<Done>,
    ) -> io::Result<()> {
        self.publish();
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
        done.clear();
        for c in self.ring.completion() {
            let Some((op, slot, era)) = unpack(c.user_data()) else {
                continue;
            };
            // A quiet send's completion (a failure) stands for its receive's, which is
            // skipped with it.
            if !matches!(op, Op::Wake | Op::Light) {
                self.inflight -= 1;
            }
            done.push(Done {
                op,
                slot,
                era,
                res: c.result(),
                flags: c.flags(),
            });
        }
        Ok(())
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        if self.inflight > 0 {
            // The kernel may still write into the buffers, read their ring or read a parked
            // reply: all leaked rather than freed under it.
            std::mem::forget(std::mem::take(&mut self.bufs));
            std::mem::forget(std::mem::take(&mut self.parked));
            return;
        }
        // The kernel stops using the entries once unregistered; the ring's own teardown
        // (closing its descriptor) follows when `ring` drops.
        let _ = self.ring.submitter().unregister_buf_ring(GROUP);
        // SAFETY: allocated in `new` with this layout; unregistered above.
        unsafe { std::alloc::dealloc(self.entries.cast(), entries_layout()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_round_trips() {
        for (op, slot, era) in [
            (Op::Recv, 0, 0),
            (Op::Send, 123_456, 0xFF_FFFF),
            (Op::Wake, 0, 7),
            (Op::Send, u32::MAX as usize, 1),
        ] {
            assert_eq!(unpack(user_data(op, slot, era)), Some((op, slot, era)));
        }
        assert_eq!(next_era(0xFF_FFFF), 0);
        assert_eq!(unpack(0), None);
    }
}
