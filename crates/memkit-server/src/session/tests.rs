//! The session's own behaviour, without a driver: buffers lent and given back, the output
//! written in pieces, a line arriving in pieces.

use std::sync::Arc;

use super::*;
use crate::state::{ConnLive, Registered};

fn shared() -> Arc<Shared> {
    let settings = crate::Settings::default();
    Shared::new(Arc::new(crate::backend::engine_for(&settings)), settings)
}

fn session() -> Session {
    let reg = Registered {
        sh: shared(),
        id: 1,
    };
    Session::new(reg, Arc::new(ConnLive::new(0, None, false)))
}

/// A worker's buffers go to the connection it drives and come back when the connection
/// is left with nothing to read; a partial request keeps its input buffer.
#[test]
fn a_worker_lends_its_buffers_for_a_turn() {
    let mut spare = Spare::default();
    let mut s = session();
    s.room_to_read();
    s.out = pool::take_out();
    s.give_back(&mut spare);
    assert!(!s.holds_buffers(), "empty buffers go back to the worker");
    assert_eq!((spare.rbufs.len(), spare.outs.len()), (1, 1));
    assert!(spare.rbufs[0].capacity() >= pool::READ_CHUNK);
    let (rptr, optr) = (spare.rbufs[0].as_ptr(), spare.outs[0].as_ptr());

    let mut other = session();
    other.lend(&mut spare);
    assert_eq!((spare.rbufs.len(), spare.outs.len()), (0, 0));
    assert_eq!((other.rbuf.as_ptr(), other.out.as_ptr()), (rptr, optr));

    // The start of a request stays with its connection; the empty output goes back.
    other.rbuf.extend_from_slice(b"get fo");
    other.give_back(&mut spare);
    assert_eq!(&other.rbuf[..], b"get fo");
    assert_eq!((spare.rbufs.len(), spare.outs.len()), (0, 1));
    assert_eq!(spare.outs[0].as_ptr(), optr);

    // Driven again, it keeps its own input buffer and borrows only an output buffer.
    other.lend(&mut spare);
    assert_eq!(&other.rbuf[..], b"get fo");
    assert_eq!(other.out.as_ptr(), optr);
    assert!(spare.outs.is_empty());
}

/// Connections woken together each hold a worker's buffers at once, and the worker
/// keeps no more than its bound of them.
#[test]
fn a_worker_keeps_a_bounded_stack_of_buffers() {
    let mut spare = Spare::default();
    let mut conns: Vec<Session> = (0..Spare::KEEPS + 8).map(|_| session()).collect();
    for c in &mut conns {
        c.room_to_read();
        c.out = pool::take_out();
    }
    let ptrs: std::collections::HashSet<_> = conns.iter().map(|c| c.rbuf.as_ptr()).collect();
    assert_eq!(
        ptrs.len(),
        conns.len(),
        "each connection has its own buffer"
    );
    for c in &mut conns {
        c.give_back(&mut spare);
    }
    assert_eq!(
        (spare.rbufs.len(), spare.outs.len()),
        (Spare::KEEPS, Spare::KEEPS)
    );
    let kept = conns.iter().filter(|c| c.holds_buffers()).count();
    assert_eq!(kept, 8, "the buffers past the bound stay for the pool");
    let mut woken: Vec<Session> = (0..3).map(|_| session()).collect();
    for c in &mut woken {
        c.lend(&mut spare);
    }
    let lent: std::collections::HashSet<_> = woken.iter().map(|c| c.out.as_ptr()).collect();
    assert_eq!(lent.len(), 3);
    assert_eq!(spare.outs.len(), Spare::KEEPS - 3);
}

/// A write that takes part of the output moves a cursor: the rest is not moved to the
/// buffer's front (a partial write of a large output then costs what it wrote, not what is
/// left), and the output empties once all of it is written.
#[test]
fn a_partial_write_moves_a_cursor() {
    let mut s = session();
    s.out = b"VALUE k 0 5\r\nhello\r\nEND\r\n".to_vec();
    let at = s.out.as_ptr();
    s.wrote(6);
    assert_eq!(s.unsent(), b"k 0 5\r\nhello\r\nEND\r\n");
    assert_eq!((s.out.as_ptr(), s.out.len()), (at, 25), "nothing moved");
    s.wrote(19);
    assert!(s.unsent().is_empty() && s.out.is_empty());
    let written = s.sh().counters.bytes_written.load();
    assert_eq!(written, 25);
}

/// A text line arriving a byte at a time is searched for its newline only in the bytes
/// that arrived since the last search, and is answered once it ends.
#[test]
fn a_line_arriving_in_pieces_is_searched_from_where_it_stopped() {
    let mut s = session();
    let line = format!("get {}\r\n", "k".repeat(200));
    for (i, b) in line.bytes().enumerate() {
        s.rbuf.extend_from_slice(&[b]);
        let next = s.pump();
        if i + 1 < line.len() {
            assert_eq!(next, Next::Read);
            assert_eq!(s.scanned, s.rbuf.len(), "searched up to what arrived");
        } else {
            assert_eq!(next, Next::Read);
            assert_eq!(s.out, b"END\r\n");
            assert!(s.rbuf.is_empty() && s.scanned == 0);
        }
    }
}

/// A line with no newline past the codec's limit is refused for its length alone, however
/// it arrived (a request that could never end closes the connection).
#[test]
fn a_line_too_long_closes_however_it_arrived() {
    let mut s = session();
    let max = s.sh().limits.max_line_len;
    s.rbuf.extend_from_slice(b"set ");
    assert_eq!(s.pump(), Next::Read);
    s.rbuf.extend_from_slice(&vec![b'k'; max + 10]);
    assert_eq!(s.pump(), Next::Close);
}
