//! Pipelined writes in a replicated group, and pipelined requests for a router's backends,
//! gathered into one job.
//!
//! A write at the start of the input parks the connection until the group has its outcome
//! (`Action::Remote`). Had it parked alone, a client pipelining writes would get one
//! group round trip (a forward, an entry, a majority's fsyncs) per write. So before parking,
//! the writes right behind it in the input run their first run too: each adds its write to
//! the same job, in order, and renders nothing; the node proposes the job's writes in one
//! entry. On resuming, the requests run again one by one from the start of the input as
//! ever, each rendering the next outcome.
//!
//! Gathering stops at the first request that is not a whole, single write: a read (its
//! barrier must come after the writes, and a multi-key `gat` answers key by key), anything
//! answered here at once, a request not all in yet. That one runs after the job, as before.
//! A request is decoded before it runs, so one that would be answered at once (and counted
//! in `stats`) never runs early.
//!
//! A router gathers reads as well as writes: the job keeps each server's commands in the
//! connection's order (`crate::router::run`), so a read behind a write of its key still
//! sees it.

use memkit_protocol::binary::{self, Auth};
use memkit_protocol::{Command, Request, decode_request};

use super::{Session, Wire, text_step};
use crate::exec::{Action, Step};

impl Session {
    /// Runs the first run of every write behind the one that parked (`used` bytes at the
    /// start of the input), adding each to the connection's job, while the job takes more.
    pub(super) fn gather(&mut self, used: usize) {
        let Some(wire) = self.wire else { return };
        // Nothing behind it (a client waiting for each reply): no decoding to find out
        // whether the one that parked could be joined.
        if used >= self.rbuf.len() || !self.gatherable(0, wire) {
            return;
        }
        let mut at = used;
        let mut scratch = Vec::new();
        while at < self.rbuf.len() && self.job_gathers() && self.gatherable(at, wire) {
            let mut cx = self.cx();
            let sh = &self.reg.sh;
            let buf = &self.rbuf[at..];
            let step = match wire {
                Wire::Text => text_step(buf, sh, &mut cx, &mut scratch),
                Wire::Binary => crate::binary::step(buf, sh, &mut cx, &mut self.sasl, &mut scratch),
            };
            self.keep(cx);
            match step {
                Step::Done {
                    used,
                    swallow: 0,
                    action: Action::Remote,
                    ..
                } if scratch.is_empty() => at += used,
                // Answered at once after all (nothing ran: a refusal), so it will be again
                // when its turn comes, after the job.
                _ => break,
            }
        }
    }

    /// Whether the job takes more requests.
    fn job_gathers(&self) -> bool {
        self.remote.as_ref().is_some_and(|r| r.gathers())
    }

    /// Whether the request at `at` in the input is whole and one the job takes: a single
    /// write for the group; any storage command for a router.
    fn gatherable(&self, at: usize, wire: Wire) -> bool {
        let routing = self.reg.sh.router().is_some();
        let write = |c: Option<Command<'_>>| {
            c.is_some_and(|c| routing || (c.mutates() && !matches!(c, Command::Get { .. })))
        };
        let (buf, sh) = (&self.rbuf[at..], &self.reg.sh);
        match wire {
            Wire::Text => {
                let multi_get = |r: &Request<'_>| routing && matches!(r, Request::Get { .. });
                matches!(decode_request(buf, &sh.limits), Ok((req, _)) if multi_get(&req) || write(req.command(&[])))
            }
            Wire::Binary => {
                let auth = Auth {
                    sasl: sh.settings.sasl,
                    authenticated: self.sasl.authenticated,
                };
                matches!(binary::decode_request(buf, &sh.limits, auth), Ok((req, _)) if write(req.command()))
            }
        }
    }
}
