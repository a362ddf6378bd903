//! The executor in a replicated group (`--raft-*`): a write becomes a `memkit_raft::Write`
//! for the log instead of running on the engine, and a linearizable read waits for a
//! barrier first.
//!
//! Neither can be answered at once, and a reply's bytes depend on the outcome (`STORED` or
//! `EXISTS`), so the request is run twice, as a request that needs a value back from flash
//! is: the first run renders nothing and notes what to wait for ([`Repl::job`]); the
//! connection parks ([`crate::exec::Action::Remote`]) and the node carries the job out;
//! the second run finds each write's outcome, in the order it made them, and renders it,
//! or finds the barrier passed and reads the engine. A barrier covers every request in the
//! connection's input when it began: until more input arrives, reads need no other. On the
//! leader, while its lease holds (`memkit_raft::lease`), reads need no barrier at all.
//!
//! Reads never change the replicated engine (every node's must stay the same): `gat`'s and
//! `mg T`'s touch is a replicated `touch` before the read; `mg N` (create on a miss) is
//! refused (`docs/replication.md`).

use std::collections::VecDeque;

use memkit_protocol::Command;
use memkit_raft::{Mode, Reply as Outcome, SetExptime, Vivify, Write, exptime_unix};
use memkit_types::{ArithMode, Error, Exptime, ReplicaRead, StoreMode, Stored};

use super::Reply;
use crate::detail::Op;
use crate::replica::{Admin, Done, Job, Replica};
use crate::state::Shared;
use crate::watch::Event;

/// What `mg N` is answered in a replicated group.
const NO_VIVIFY: &str = "mg N (create on a miss) is not replicated";

/// A connection's replication state across the runs of its requests.
#[derive(Debug, Default)]
pub struct Repl {
    /// What the request at the start of the input waits for.
    pub job: Job,
    /// The outcomes of its writes, for its second run, in order.
    replies: VecDeque<Result<Outcome, String>>,
    /// Why its reads are answered with an error (the barrier failed).
    read_error: Option<String>,
    /// A `cluster` command's reply, for its second run.
    admin: Option<Result<Vec<String>, String>>,
    /// A barrier passed after everything now in the input arrived.
    fresh: bool,
}

impl Repl {
    /// The job to park for, if the last request made one.
    pub fn take_job(&mut self) -> Option<Job> {
        self.waits().then(|| std::mem::take(&mut self.job))
    }

    /// What a finished job came to, for the request's second run.
    pub fn finish(&mut self, job: Job) {
        let Done {
            replies,
            barrier,
            admin,
        } = std::mem::take(&mut *job.done.lock());
        self.replies = replies.into();
        self.admin = admin;
        match barrier {
            Some(Ok(())) => self.fresh = true,
            Some(Err(e)) => self.read_error = Some(e),
            None => {}
        }
    }

    /// The request was answered. Its outcome is spent (taken as it rendered); those of the
    /// writes gathered behind it stay, for their second runs.
    pub fn answered(&mut self) {
        self.read_error = None;
        self.admin = None;
    }

    /// Whether more writes may join the job (`session::gather`): it holds writes only, and
    /// fewer than one entry takes.
    pub fn gathers(&self) -> bool {
        let j = &self.job;
        let bytes: usize = j.writes.iter().map(Write::size).sum();
        !j.barrier
            && j.admin.is_none()
            && j.writes.len() < memkit_raft::MAX_WRITES
            && bytes < memkit_raft::proposer::UNIT_BYTES
    }

    /// More input arrived: it came after the last barrier began.
    pub fn arrived(&mut self) {
        self.fresh = false;
    }

    /// Whether the request run last waits for its job.
    pub fn waits(&self) -> bool {
        let j = &self.job;
        !j.writes.is_empty() || j.barrier || j.admin.is_some()
    }

    /// `cluster ...`: on its second run, its reply lines (or why it failed); on its first,
    /// `None`, and the command is noted for the node to carry out.
    pub fn cluster(&mut self, admin: Admin) -> Option<Result<Vec<String>, String>> {
        let r = self.admin.take();
        if r.is_none() {
            self.job.admin = Some(admin);
        }
        r
    }
}

/// What the executor does with a command in a replicated group.
#[derive(Debug)]
pub enum Route<'a> {
    /// Answered (or waiting: nothing rendered).
    Done,
    /// Run it on the engine as usual: a read with nothing to wait for (without its touch,
    /// which was replicated), or a command that touches no data (`flush_all` under `-F`).
    Local(Command<'a>),
}

/// Routes `cmd` through the group, for connection `conn` of the server `sh`.
pub fn route<'a>(
    cmd: &Command<'a>,
    rep: &Replica,
    repl: &mut Repl,
    sh: &Shared,
    conn: u64,
    reply: &mut impl Reply,
) -> Route<'a> {
    let (flush_enabled, detail) = (sh.settings.flush_enabled, &sh.detail);
    match cmd {
        Command::Get { key, opts } => {
            if opts.vivify.is_some() {
                reply.error(&Error::Client(NO_VIVIFY.into()));
                return Route::Done;
            }
            // The touch's outcome first: it is spent whatever the read comes to, and must
            // not be left for the request after this one.
            let mut touched_from = None;
            if let Some(t) = opts.touch {
                match repl.replies.pop_front() {
                    None => {
                        repl.job.writes.push(Write::TouchRead {
                            key: key.to_vec(),
                            exptime_unix: exptime_unix(t, now_unix()),
                            classic: opts.classic,
                        });
                        repl.job.barrier |= rep.linearizable() && !repl.fresh;
                        return Route::Done;
                    }
                    Some(Ok(Outcome::TouchedRead(Some(before)))) => touched_from = Some(before),
                    Some(Ok(Outcome::TouchedRead(None))) => {
                        reply.miss();
                        return Route::Done;
                    }
                    Some(other) => {
                        render(other, reply);
                        return Route::Done;
                    }
                }
            }
            if let Some(e) = &repl.read_error {
                reply.error(&Error::Server(format!("replication: {e}")));
                return Route::Done;
            }
            if opts.touch.is_none() && rep.linearizable() && !repl.fresh && !rep.reads_by_lease() {
                repl.job.barrier = true;
                return Route::Done;
            }
            let mut opts = opts.clone();
            opts.touch = None;
            opts.replica = Some(ReplicaRead {
                at_unix: now_unix(),
                touched_from,
            });
            Route::Local(Command::Get { key, opts })
        }
        Command::Flush { .. } if !flush_enabled => Route::Local(cmd.clone()),
        _ => {
            match repl.replies.pop_front() {
                Some(r) => {
                    // `watch mutations` on the node that took the store, as the engine's
                    // path reports it there (the other nodes only apply it).
                    if let Command::Store { key, data, opts } = cmd {
                        let ttl = memkit_protocol::command::exp32(opts.exptime);
                        let r = as_stored(&r);
                        sh.watchers
                            .emit(|| Event::store(key, &r, ttl, data.len(), conn));
                    }
                    render(r, reply)
                }
                None => {
                    // `stats detail` counts a set or delete on the node the client sent it
                    // to, whatever its outcome, as the engine's path does (memcached counts
                    // the command before it runs): once, on the run that makes the write.
                    match cmd {
                        Command::Store { key, .. } => detail.record(key, Op::Set),
                        Command::Delete { key, .. } => detail.record(key, Op::Delete),
                        _ => {}
                    }
                    repl.job.writes.extend(to_write(cmd, now_unix()))
                }
            }
            Route::Done
        }
    }
}

/// The log's form of a write: every time in it absolute, read on this node's clock once.
/// `E` (a CAS the client chooses) is not carried: a replicated item's CAS comes from its
/// entry's log index (`memkit_raft::cas_for`), the same on every node.
pub fn to_write(cmd: &Command<'_>, now: u64) -> Option<Write> {
    let at = |e: Exptime| exptime_unix(e, now);
    Some(match cmd {
        Command::Get { .. } => return None,
        Command::Store { key, data, opts } => Write::Store {
            key: key.to_vec(),
            value: data.to_vec(),
            flags: opts.flags,
            exptime_unix: at(opts.exptime),
            mode: match opts.mode {
                StoreMode::Set => Mode::Set,
                StoreMode::Add => Mode::Add,
                StoreMode::Replace => Mode::Replace,
                StoreMode::Append => Mode::Append,
                StoreMode::Prepend => Mode::Prepend,
            },
            cas: opts.cas,
            invalidate: opts.invalidate,
            vivify: opts.vivify.map(|e| SetExptime {
                exptime_unix: at(e),
            }),
        },
        Command::Delete { key, opts } => Write::Delete {
            key: key.to_vec(),
            cas: opts.cas,
            invalidate: opts.invalidate,
            stale_exptime: opts.stale_ttl.map(|e| SetExptime {
                exptime_unix: at(e),
            }),
            remove_value: opts.remove_value,
        },
        Command::Arith { key, opts } => Write::Arith {
            key: key.to_vec(),
            incr: opts.mode == ArithMode::Incr,
            delta: opts.delta,
            cas: opts.cas,
            vivify: opts.vivify.map(|(initial, e)| Vivify {
                initial,
                exptime_unix: at(e),
            }),
            set_exptime: opts.update_ttl.map(|e| SetExptime {
                exptime_unix: at(e),
            }),
        },
        Command::Touch { key, exptime } => Write::Touch {
            key: key.to_vec(),
            exptime_unix: at(*exptime),
        },
        Command::Flush { delay } => {
            let d = Exptime::flush_delay(*delay, now);
            Write::Flush {
                at_unix: (d > 0).then(|| now + u64::from(d)),
            }
        }
    })
}

/// A store's outcome as the engine's path has it (for `watch`).
fn as_stored(r: &Result<Outcome, String>) -> memkit_types::Result<Stored> {
    match r {
        Ok(Outcome::Stored { outcome, cas }) => Ok(Stored {
            outcome: (*outcome).into(),
            cas: *cas,
        }),
        Ok(Outcome::Refused(r)) => Err(Error::from(r.clone())),
        Ok(_) => Err(Error::Server("not a store".into())),
        Err(e) => Err(Error::Server(e.clone())),
    }
}

/// Renders a write's outcome as its encoding does the engine's.
fn render(r: Result<Outcome, String>, reply: &mut impl Reply) {
    match r {
        Ok(Outcome::Stored { outcome, cas }) => reply.stored(&Stored {
            outcome: outcome.into(),
            cas,
        }),
        Ok(Outcome::Deleted(d)) => reply.deleted(d.into()),
        Ok(Outcome::Arith(a)) => reply.arith(&a.into()),
        Ok(Outcome::Touched(found)) => reply.touched(found),
        // A read's touch renders with its read (`route`); alone, it is a touch.
        Ok(Outcome::TouchedRead(before)) => reply.touched(before.is_some()),
        Ok(Outcome::Flushed) => reply.flushed(),
        Ok(Outcome::Refused(r)) => reply.error(&Error::from(r)),
        Err(e) => reply.error(&Error::Server(format!("replication: {e}"))),
    }
}

fn now_unix() -> u64 {
    use memkit_types::Clock;
    memkit_types::SystemClock.now_secs()
}

#[cfg(test)]
mod tests {
    use super::*;
    use memkit_types::{ArithOptions, StoreOptions};

    #[test]
    fn writes_carry_absolute_times_and_reads_none() {
        let now = 1_800_000_000;
        let opts = StoreOptions::new(StoreMode::Add, 7, Exptime(60));
        let w = to_write(
            &Command::Store {
                key: b"k",
                data: b"v",
                opts,
            },
            now,
        );
        assert!(matches!(
            w,
            Some(Write::Store { mode: Mode::Add, flags: 7, exptime_unix: Some(t), .. }) if t == now + 60
        ));
        let w = to_write(
            &Command::Arith {
                key: b"n",
                opts: ArithOptions::incr(3),
            },
            now,
        );
        assert!(matches!(
            w,
            Some(Write::Arith {
                incr: true,
                delta: 3,
                ..
            })
        ));
        assert_eq!(
            to_write(&Command::Flush { delay: 10 }, now),
            Some(Write::Flush {
                at_unix: Some(now + 10)
            })
        );
        assert_eq!(
            to_write(&Command::Flush { delay: 0 }, now),
            Some(Write::Flush { at_unix: None })
        );
        let get = Command::Get {
            key: b"k",
            opts: Default::default(),
        };
        assert_eq!(to_write(&get, now), None);
    }
}
