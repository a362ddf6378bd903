//! Replies whose value is read from flash: rendered with the value's place held, filled in
//! once the read is done.
//!
//! A reply's framing depends only on the value's length, so the executor renders the hit at
//! once over zeroes and records where its value goes ([`Hole`]), with the bytes a miss would
//! have rendered instead. The session parks the connection with its holes
//! ([`submit`]), and on resuming fills them in ([`fill`]): the value where it read well, the
//! miss where it did not (the value was gone or corrupt). Nothing of the output is written
//! before then, so a client never sees the zeroes.

use std::sync::Arc;

use memkit_engine::FlashRead;
use memkit_engine::memkit_flash::ReadError;
use parking_lot::Mutex;

use super::{Cx, Reply};
use crate::state::Shared;
use crate::state::gate::Completer;

/// A reply in the output whose value is still on flash.
#[derive(Debug)]
pub struct Hole {
    /// The reply's bytes in the output, and where its value goes.
    start: usize,
    end: usize,
    value_at: usize,
    /// What the reply is if the value cannot be had.
    miss: Vec<u8>,
    key: Vec<u8>,
    read: FlashRead,
}

/// The outcome of a batch of reads, in the order of [`Reads`], once the readers are done.
pub type Results = Arc<Mutex<Vec<Result<Vec<u8>, ReadError>>>>;

/// What a parked connection reads from flash.
#[derive(Debug)]
pub struct Reads {
    /// The values its replies hold the place of.
    pub holes: Vec<Hole>,
    /// A value a request needs in RAM before it runs again (`Action::Fetch`).
    pub fetch: Option<(Vec<u8>, FlashRead)>,
    pub results: Results,
}

/// Renders the hit of `read` with its value's place held, or nothing more if the reply does
/// not carry the value. Returns the value's length (what a hit reports to `watch`).
pub(super) fn render(cx: &mut Cx, key: &[u8], read: FlashRead, reply: &mut impl Reply) -> usize {
    let start = reply.out().len();
    reply.miss();
    let miss = reply.out()[start..].to_vec();
    reply.out().truncate(start);
    let zeroes = vec![0u8; read.len];
    let value_at = reply.hit(&read.view(key, &zeroes));
    let len = read.len;
    if let Some(value_at) = value_at {
        cx.holes.push(Hole {
            start,
            end: reply.out().len(),
            value_at,
            miss,
            key: key.to_vec(),
            read,
        });
    }
    len
}

/// Hands the reads to the flash store's readers; `done` fires once all are in.
pub fn submit(sh: &Shared, reads: &Reads, done: Completer) {
    let Some(store) = sh.engine.flash_store() else {
        done.complete(Err("no flash store".into()));
        return;
    };
    let holes = reads.holes.iter().map(|h| (h.read.loc, h.key.clone()));
    let fetch = reads
        .fetch
        .iter()
        .map(|(key, read)| (read.loc, key.clone()));
    let results = reads.results.clone();
    store.submit(
        holes.chain(fetch).collect(),
        Box::new(move |r| {
            *results.lock() = r;
            done.complete(Ok(()));
        }),
    );
}

/// Fills the holes into `out` with the reads' results (a read without a result, as after
/// an abandoned wait, failed), reports each read to the engine, and brings the fetched
/// value back to RAM.
pub fn fill(sh: &Shared, out: &mut Vec<u8>, reads: Reads) {
    let Reads {
        holes,
        fetch,
        results,
    } = reads;
    let mut results = std::mem::take(&mut *results.lock()).into_iter();
    let mut next = || {
        results
            .next()
            .unwrap_or_else(|| Err(ReadError::Io(std::io::ErrorKind::Interrupted.into())))
    };
    let mut outcomes: Vec<Option<Vec<u8>>> = holes
        .iter()
        .map(|h| sh.engine.finish_flash_read(&h.key, &h.read, next()))
        .collect();
    if let Some((key, read)) = fetch {
        sh.engine.finish_flash_read(&key, &read, next());
    }
    // From the last hole back, so that a miss's change of length moves no hole still to do.
    for (h, value) in holes.iter().zip(outcomes.iter_mut()).rev() {
        match value.take() {
            Some(v) if v.len() == h.read.len => {
                out[h.value_at..h.value_at + v.len()].copy_from_slice(&v);
            }
            _ => {
                out.splice(h.start..h.end, h.miss.iter().copied());
            }
        }
    }
}
