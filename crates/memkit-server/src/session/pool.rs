//! Per-thread caches of connection buffers, so that connections going idle and busy again
//! do not allocate per batch, and idle ones hold nothing (memcached's per-thread rbuf cache).
//! A connection stays on its worker thread (`server::Workers`), so its buffers come and go
//! from that thread's pool; the embedded server's multi-thread runtime (no workers) may move
//! a task, and a buffer then lands in another thread's pool, which only changes where it is
//! cached.

use std::cell::RefCell;

use bytes::BytesMut;

/// A fresh buffer's size, memcached's `READ_BUFFER_SIZE`.
pub const READ_CHUNK: usize = 16 * 1024;
/// A read first makes room for another `READ_CHUNK` when less than this is free.
pub const MIN_ROOM: usize = 4096;
/// Buffers grown past this for one large request or reply are freed, not kept.
const KEEP_MAX: usize = 4 * READ_CHUNK;
/// Buffers of each kind a worker thread keeps.
const POOLED: usize = 64;

thread_local! {
    static READ: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
    static OUT: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

pub fn take_read() -> BytesMut {
    READ.with_borrow_mut(|p| p.pop())
        .unwrap_or_else(|| BytesMut::with_capacity(READ_CHUNK))
}

pub fn take_out() -> Vec<u8> {
    OUT.with_borrow_mut(|p| p.pop())
        .unwrap_or_else(|| Vec::with_capacity(READ_CHUNK))
}

/// The connection has nothing to read: give back its (empty) output buffer, and its
/// input buffer unless it holds the start of a request, in which case a large one is
/// swapped for a small one (memcached's `conn_shrink`).
pub fn release(rbuf: &mut BytesMut, out: &mut Vec<u8>) {
    if rbuf.is_empty() {
        // No buffer at all when a worker loop took it back (`Session::give_back`).
        let mut b = std::mem::take(rbuf);
        if b.capacity() > 0 && tidy_read(&mut b) {
            READ.with_borrow_mut(|p| (p.len() < POOLED).then(|| p.push(b)));
        }
    } else if rbuf.capacity() > KEEP_MAX && rbuf.len() < READ_CHUNK / 2 {
        let mut small = take_read();
        small.extend_from_slice(rbuf);
        *rbuf = small;
    }
    if out.capacity() > 0 {
        let mut b = std::mem::take(out);
        b.clear();
        if keeps_out(b.capacity()) {
            OUT.with_borrow_mut(|p| (p.len() < POOLED).then(|| p.push(b)));
        }
    }
}

/// Readies an empty input buffer for its next connection: whether it is one to keep.
pub fn tidy_read(b: &mut BytesMut) -> bool {
    // Reclaims the space `advance` consumed, in place: nothing is copied.
    b.clear();
    b.reserve(READ_CHUNK);
    b.capacity() <= KEEP_MAX
}

/// Whether an output buffer of this capacity is one to keep for the next connection.
pub fn keeps_out(capacity: usize) -> bool {
    (READ_CHUNK..=KEEP_MAX).contains(&capacity)
}
