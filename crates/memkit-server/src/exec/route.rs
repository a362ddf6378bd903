//! The executor in router mode (`--route`): a command becomes an [`Op`] of the
//! connection's [`Job`] for the router ([`crate::router`]) instead of running on the engine.
//!
//! As in a replicated group (`replicate`), a request runs twice: its first run notes its
//! commands (a multi-get one per key) and renders nothing; the connection parks
//! ([`crate::exec::Action::Remote`]) with the requests pipelined behind it gathered into
//! the same job; the second run renders each command's outcome, in order. The outcomes are
//! kept a queue per request, so a request whose reply ends early (a text multi-get ends at
//! its first error, as memcached's does) leaves nothing for the next one.
//!
//! A read whose server could not be reached answers a miss (the client's rule, "a dead
//! server is a miss"); any other command answers `SERVER_ERROR` with the reason. A `set` the
//! codec refused as too large waits too: its old value is deleted through the routes, as
//! memcached drops it, before the refusal is answered ([`refused`]).

use std::collections::VecDeque;

use memkit_client::Outcome;
use memkit_engine::ItemView;
use memkit_protocol::Command;
use memkit_types::Result;

use super::Reply;
use crate::detail::{Detail, Op};
use crate::router::{Job, Tally};

/// Commands one job carries at most (more wait for the next).
const MAX_OPS: usize = 1024;
/// Key and value bytes one job carries at most.
const MAX_BYTES: usize = 1 << 20;
/// The arena's first chunk in a job: a key and a small value.
const FIRST_CHUNK: usize = 512;

/// A connection's routed requests across their two runs.
#[derive(Debug, Default)]
pub struct Pending {
    /// The job the first runs fill.
    job: Job,
    /// How many commands each request of the job made, in order.
    counts: Vec<usize>,
    /// The request being run first has made a command (its count is the last).
    open: bool,
    /// The outcomes for the second runs: one queue a request, in order.
    results: VecDeque<VecDeque<Result<Outcome>>>,
    /// The request at the front has rendered an outcome in its second run.
    started: bool,
    /// Where the ops' keys and small values are copied ([`crate::router::Op::of`]).
    arena: bytes::BytesMut,
}

impl Pending {
    /// The job to park for, if the requests run last made one.
    pub fn take_job(&mut self) -> Option<Job> {
        // The arena's spare room goes with the job: an idle connection keeps no chunk.
        self.waits().then(|| {
            self.arena = bytes::BytesMut::new();
            std::mem::take(&mut self.job)
        })
    }

    /// Whether the requests run last wait for the router.
    pub fn waits(&self) -> bool {
        !self.job.ops.is_empty()
    }

    /// Whether more requests may join the job.
    pub fn gathers(&self) -> bool {
        self.job.ops.len() < MAX_OPS && self.job.bytes < MAX_BYTES
    }

    /// The first run of a request is over (the session calls this after every run).
    pub fn end_request(&mut self) {
        self.open = false;
    }

    /// What the job came to, split by request, for the second runs.
    pub fn finish(&mut self, job: Job) {
        let mut all = std::mem::take(&mut *job.done.lock()).into_iter();
        for n in self.counts.drain(..) {
            self.results.push_back(all.by_ref().take(n).collect());
        }
        self.open = false;
        self.started = false;
    }

    /// The request at the front was answered: what is left of its outcomes is dropped.
    pub fn answered(&mut self) {
        if std::mem::take(&mut self.started) {
            self.results.pop_front();
        }
    }

    fn push(&mut self, cmd: &Command<'_>) {
        if !self.open {
            self.counts.push(0);
            self.open = true;
        }
        if let Some(n) = self.counts.last_mut() {
            *n += 1;
        }
        if self.job.ops.is_empty() && self.arena.capacity() == 0 {
            // A job's first chunk is small: most carry one request, and glibc sorts its
            // free chunks before handing out one of 4 KiB (`ARENA_CHUNK`).
            self.arena = bytes::BytesMut::with_capacity(FIRST_CHUNK);
        }
        let op = crate::router::Op::of(cmd, &mut self.arena);
        self.job.bytes += op.key.len() + op.data.len();
        self.job.ops.push(op);
    }
}

/// Routes `cmd`: on its first run, noted in the job; on its second, its outcome counted
/// (`tally` for `stats`, and `stats detail` as the engine's path counts it) and rendered.
pub fn route(
    cmd: &Command<'_>,
    p: &mut Pending,
    tally: &Tally,
    detail: &Detail,
    reply: &mut impl Reply,
) {
    let outcome = match p.results.front_mut() {
        Some(q) => {
            p.started = true;
            q.pop_front()
        }
        None => None,
    };
    match outcome {
        None if p.results.is_empty() => p.push(cmd),
        None => reply.error(&memkit_types::Error::Server("router: no outcome".into())),
        Some(r) => {
            tally.count(cmd, &r);
            match cmd {
                Command::Get { key, .. } => {
                    detail.record(key, Op::Get(matches!(r, Ok(Outcome::Item(Some(_))))));
                }
                Command::Store { key, .. } => detail.record(key, Op::Set),
                Command::Delete { key, .. } => detail.record(key, Op::Delete),
                _ => {}
            }
            render(cmd, r, reply)
        }
    }
}

/// A `set` of `key` refused as too large: memcached drops the key's old value, so on its
/// first run the request deletes it through the routes (`true`: it waits for the job); on
/// its second the delete's outcome is dropped (the reply is the refusal, whatever the
/// backends said, as memcached's is) and `false` is returned.
pub fn refused(key: &[u8], p: &mut Pending) -> bool {
    match p.results.front_mut() {
        Some(q) => {
            p.started = true;
            q.pop_front();
            false
        }
        None => {
            let opts = Default::default();
            p.push(&Command::Delete { key, opts });
            true
        }
    }
}

fn render(cmd: &Command<'_>, r: Result<Outcome>, reply: &mut impl Reply) {
    match r {
        Ok(Outcome::Item(Some(item))) => {
            reply.hit(&ItemView::of_item(cmd.key().unwrap_or_default(), &item));
        }
        Ok(Outcome::Item(None)) => reply.miss(),
        Ok(Outcome::Stored(s)) => reply.stored(&s),
        Ok(Outcome::Deleted(d)) => reply.deleted(d),
        Ok(Outcome::Arith(a)) => reply.arith(&a),
        Ok(Outcome::Touched(found)) => reply.touched(found),
        Ok(Outcome::Flushed) => reply.flushed(),
        Err(e) if e.is_unavailable() && matches!(cmd, Command::Get { .. }) => reply.miss(),
        Err(e) => reply.error(&e),
    }
}
