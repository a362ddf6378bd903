//! The proposer: many clients' writes in one log entry.
//!
//! openraft 0.9 makes each `client_write` an entry of its own, with its own append, fsync
//! and replication round, and its core takes them one after the other: a write an entry
//! holds a group to about a thousand writes a second however many clients write. So every
//! write a node takes goes through its proposer, a task that takes whatever writes are
//! waiting (up to [`MAX_WRITES`] and [`UNIT_BYTES`]) and hands them on as one unit:
//! - on the leader, proposed as one entry: handed to openraft (`client_write_ff`) in the
//!   order the units were formed, so the log keeps that order, and awaited apart;
//! - on a follower, forwarded to the leader in one call ([`Request::Writes`]), whose
//!   proposer takes them as one submission, perhaps in a unit with others.
//!
//! At most [`IN_FLIGHT`] units are out at once; meanwhile writes queue, and the next unit
//! takes them all. A lone write waits for nothing; under load, units grow with it. A
//! submission is never split: a caller's writes land in one entry, in its order.
//!
//! A unit fails as a whole: each of its callers gets the error, and [`crate::Node::write`]
//! retries only what surely was not proposed (the error says which).

use std::sync::Arc;
use std::time::Duration;

use memkit_types::{Clock, SystemClock};
use openraft::error::ClientWriteError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::error::ClusterError;
use crate::leader::not_leader;
use crate::network::{CallError, Pool, Request, Response};
use crate::types::{MAX_WRITES, NodeId, Outcomes, Proposal, Raft, Reply, Write};

/// Units out at once (proposed and not yet applied, or forwarded and not yet answered).
/// Enough to keep the log busy while one unit waits for its fsyncs; more would only make
/// units smaller. The forwarding pool keeps as many connections idle.
pub const IN_FLIGHT: usize = 4;

/// A unit stops growing past this many bytes of keys and values (a single larger write is
/// a unit of its own): the entry must reach a follower within one heartbeat (see
/// `network::APPEND_BUDGET`).
pub const UNIT_BYTES: usize = 64 << 10;

/// Writes submitted together, and where their outcome goes.
struct Submission {
    writes: Vec<Write>,
    /// Forwarded by a peer: proposed here or refused, never forwarded again.
    local_only: bool,
    reply: oneshot::Sender<Result<Outcomes, ClusterError>>,
}

/// A node's proposer; clones submit to the same task.
#[derive(Debug, Clone)]
pub struct Proposer {
    tx: mpsc::UnboundedSender<Submission>,
}

impl Proposer {
    /// Starts node `me`'s proposer. `timeout` bounds the wait for a unit's outcome.
    pub fn start(
        me: NodeId,
        raft: Raft,
        pool: Arc<Pool>,
        timeout: Duration,
    ) -> (Proposer, JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = Task {
            me,
            raft,
            pool,
            timeout,
            slots: Arc::new(Semaphore::new(IN_FLIGHT)),
        };
        (Proposer { tx }, tokio::spawn(task.run(rx)))
    }

    /// Proposes `writes` in one entry, through the leader; `local_only` for writes a peer
    /// forwarded (refused unless this node leads).
    pub async fn submit(
        &self,
        writes: Vec<Write>,
        local_only: bool,
    ) -> Result<Outcomes, ClusterError> {
        let (reply, rx) = oneshot::channel();
        let s = Submission {
            writes,
            local_only,
            reply,
        };
        self.tx
            .send(s)
            .map_err(|_| ClusterError::Stopped("the node is shutting down".into()))?;
        rx.await.unwrap_or_else(|_| {
            Err(ClusterError::Indeterminate(
                "the node stopped with the write under way".into(),
            ))
        })
    }
}

struct Task {
    me: NodeId,
    raft: Raft,
    pool: Arc<Pool>,
    timeout: Duration,
    slots: Arc<Semaphore>,
}

impl Task {
    async fn run(self, mut rx: mpsc::UnboundedReceiver<Submission>) {
        let mut held = None;
        loop {
            let first = match held.take() {
                Some(s) => s,
                None => match rx.recv().await {
                    Some(s) => s,
                    None => return,
                },
            };
            let permit = (self.slots.clone().acquire_owned().await).expect("never closed");
            let mut unit = vec![first];
            let (mut writes, mut bytes) = size(&unit[0]);
            while writes < MAX_WRITES && bytes < UNIT_BYTES {
                let Ok(s) = rx.try_recv() else { break };
                let (w, b) = size(&s);
                if writes + w > MAX_WRITES {
                    held = Some(s);
                    break;
                }
                (writes, bytes) = (writes + w, bytes + b);
                unit.push(s);
            }
            self.send(unit, permit).await;
        }
    }

    /// Proposes or forwards `unit`, as this node's role is now.
    async fn send(&self, unit: Vec<Submission>, permit: OwnedSemaphorePermit) {
        let leader = self.raft.metrics().borrow().current_leader;
        match leader {
            Some(l) if l == self.me => self.propose(unit, permit).await,
            Some(l) => {
                let (local, forward): (Vec<_>, Vec<_>) =
                    unit.into_iter().partition(|s| s.local_only);
                answer(local, Err(ClusterError::NotLeader(Some(l))));
                if !forward.is_empty() {
                    self.forward(l, forward, permit);
                }
            }
            None => answer(unit, Err(ClusterError::NoLeader)),
        }
    }

    async fn propose(&self, mut unit: Vec<Submission>, permit: OwnedSemaphorePermit) {
        let (counts, writes) = take_writes(&mut unit);
        let p = Proposal {
            stamp_ms: SystemClock.now_millis(),
            writes,
        };
        let rx = match self.raft.client_write_ff(p).await {
            Ok(rx) => rx,
            Err(fatal) => return answer(unit, Err(ClusterError::Stopped(fatal.to_string()))),
        };
        let timeout = self.timeout;
        tokio::spawn(async move {
            let r = match tokio::time::timeout(timeout, rx).await {
                Ok(Ok(Ok(resp))) => Ok((resp.data, resp.log_id.index)),
                Ok(Ok(Err(ClientWriteError::ForwardToLeader(f)))) => Err(not_leader(&f)),
                Ok(Ok(Err(e))) => Err(ClusterError::Stopped(e.to_string())),
                Ok(Err(_)) => Err(ClusterError::Indeterminate("raft stopped".into())),
                Err(_) => Err(ClusterError::Indeterminate("timed out".into())),
            };
            split(unit, &counts, r);
            drop(permit);
        });
    }

    fn forward(&self, leader: NodeId, mut unit: Vec<Submission>, permit: OwnedSemaphorePermit) {
        let (counts, writes) = take_writes(&mut unit);
        let (pool, timeout) = (self.pool.clone(), self.timeout);
        tokio::spawn(async move {
            let r = match pool.call(leader, Request::Writes(writes), timeout).await {
                Ok(Response::Writes(r)) => r,
                Ok(other) => Err(ClusterError::Unreachable(format!("{other:?}"))),
                Err(CallError::NotSent(e)) => Err(ClusterError::Unreachable(e.to_string())),
                Err(e @ CallError::Lost(_)) => Err(ClusterError::Indeterminate(e.to_string())),
            };
            split(unit, &counts, r);
            drop(permit);
        });
    }
}

/// A submission's writes and bytes.
fn size(s: &Submission) -> (usize, usize) {
    (s.writes.len(), s.writes.iter().map(Write::size).sum())
}

/// The unit's writes, in order, and how many each submission gave.
fn take_writes(unit: &mut [Submission]) -> (Vec<usize>, Vec<Write>) {
    let counts = unit.iter().map(|s| s.writes.len()).collect();
    let writes = unit
        .iter_mut()
        .flat_map(|s| std::mem::take(&mut s.writes))
        .collect();
    (counts, writes)
}

fn answer(unit: Vec<Submission>, r: Result<Outcomes, ClusterError>) {
    for s in unit {
        let _ = s.reply.send(r.clone());
    }
}

/// Hands each submission its share of the unit's replies (`counts[i]` writes each).
fn split(unit: Vec<Submission>, counts: &[usize], r: Result<Outcomes, ClusterError>) {
    let (mut replies, index) = match r {
        Ok((replies, index)) if replies.len() == counts.iter().sum::<usize>() => {
            (replies.into_iter(), index)
        }
        Ok((replies, _)) => {
            let e = format!(
                "{} replies for {} writes",
                replies.len(),
                counts.iter().sum::<usize>()
            );
            return answer(unit, Err(ClusterError::Indeterminate(e)));
        }
        Err(e) => return answer(unit, Err(e)),
    };
    for (s, &n) in unit.into_iter().zip(counts) {
        let mine: Vec<Reply> = replies.by_ref().take(n).collect();
        let _ = s.reply.send(Ok((mine, index)));
    }
}
