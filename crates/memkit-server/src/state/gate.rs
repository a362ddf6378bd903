//! What a parked request waits for, and how its completion reaches the driver.
//!
//! A request parks when its reply may not leave before something outside the connection
//! happens: today, replies to writes under `--persist` `sync` wait until the writes are
//! durable. The thing waited for is the server's [`Gate`]: a source of tickets that
//! complete in any order, from any thread. The session decides that it must wait and on
//! which ticket (`crate::session`); the driver hands the gate a [`Completer`] of its own
//! making (the worker loop's pushes into its inbox and wakes it, the task driver's fills a
//! oneshot), and gives the session the outcome.
//!
//! A completer fires exactly once: dropped unfired (a gate shutting down, a store going
//! away) it reports a failure, so a parked connection is never left waiting for nothing.

use std::fmt;
use std::sync::Arc;

/// How a wait ended: `Err` with the reason when the replies waiting on it must not be sent
/// (the writes are not acknowledged).
pub type Outcome = Result<(), String>;

/// A source of tickets that a write's reply waits on before it may leave.
///
/// Tickets are totally ordered: a ticket taken later covers everything an earlier one does.
pub trait Gate: Send + Sync + fmt::Debug {
    /// The ticket covering every write made so far, by any connection.
    fn ticket(&self) -> u64;
    /// Whether every write up to `ticket` is acknowledged already (no wait needed).
    fn passed(&self, ticket: u64) -> bool;
    /// Calls `done` once every write up to `ticket` is acknowledged, or with an error once
    /// it cannot be. `done` may be called on any thread, before this returns or later.
    fn when(&self, ticket: u64, done: Completer);
}

/// The one-shot callback a parked connection's driver hands to a [`Gate`].
pub struct Completer(Option<Box<dyn FnOnce(Outcome) + Send>>);

impl Completer {
    pub fn new(f: impl FnOnce(Outcome) + Send + 'static) -> Completer {
        Completer(Some(Box::new(f)))
    }

    /// Reports the outcome to the parked connection's driver.
    pub fn complete(mut self, outcome: Outcome) {
        if let Some(f) = self.0.take() {
            f(outcome);
        }
    }
}

impl Drop for Completer {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f(Err("the wait was abandoned".into()));
        }
    }
}

impl fmt::Debug for Completer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Completer")
    }
}

/// `--persist` `sync`: replies to writes wait until the journal holding them is fsynced
/// (one fsync covers every connection's writes so far: group commit).
#[derive(Debug)]
pub struct Durable(pub Arc<memkit_persist::DiskStore>);

impl Gate for Durable {
    fn ticket(&self) -> u64 {
        self.0.ticket()
    }

    fn passed(&self, ticket: u64) -> bool {
        self.0.is_durable(ticket)
    }

    fn when(&self, ticket: u64, done: Completer) {
        self.0.when_durable(
            ticket,
            Box::new(move |r| done.complete(r.map_err(|e| e.to_string()))),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completer_fires_once_and_a_dropped_one_reports_a_failure() {
        let (tx, rx) = std::sync::mpsc::channel();
        let t = tx.clone();
        Completer::new(move |o| t.send(o).unwrap()).complete(Ok(()));
        drop(Completer::new(move |o| tx.send(o).unwrap()));
        assert_eq!(rx.recv().unwrap(), Ok(()));
        assert!(rx.recv().unwrap().is_err());
        assert!(rx.try_recv().is_err(), "each fired once");
    }
}
