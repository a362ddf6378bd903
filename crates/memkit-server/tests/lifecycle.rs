//! The request lifecycle's waiting state, under every driver (the io_uring worker, the epoll
//! worker, the tokio task): a connection whose replies wait on the server's gate parks, its
//! pipelined requests wait behind it, the worker serves everyone else meanwhile, and the
//! completion resumes it with its replies in order, whenever and in whatever order the
//! gate's tickets complete; a failed wait closes the connection with its replies unsent; a
//! connection closed or a server stopped while parked releases everything and never hangs.
//!
//! The gate here is the test's own ([`Scripted`]): the same mechanism `--persist` `sync`
//! waits through (tests/crash.rs and tests/persist_conformance.rs run that one).

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use memkit_server::state::gate::{Completer, Gate, Outcome};
use memkit_testkit::TestServer;
use memkit_testkit::wire::Until;

/// A gate whose tickets the test completes: in any order, late, or with a failure.
#[derive(Debug, Default)]
struct Scripted {
    next: AtomicU64,
    waits: Mutex<Vec<(u64, Completer)>>,
}

impl Gate for Scripted {
    fn ticket(&self) -> u64 {
        self.next.fetch_add(1, SeqCst) + 1
    }

    fn passed(&self, _: u64) -> bool {
        false
    }

    fn when(&self, ticket: u64, done: Completer) {
        self.waits.lock().unwrap().push((ticket, done));
    }
}

impl Scripted {
    /// Waits (5 s at most) until `n` connections wait; their tickets, oldest first.
    async fn parked(&self, n: usize) -> Vec<u64> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let tickets: Vec<u64> = self.waits.lock().unwrap().iter().map(|w| w.0).collect();
            if tickets.len() >= n {
                return tickets;
            }
            assert!(Instant::now() < deadline, "{} of {n} parked", tickets.len());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Completes the wait on `ticket`.
    fn complete(&self, ticket: u64, outcome: Outcome) {
        let mut waits = self.waits.lock().unwrap();
        let at = waits.iter().position(|w| w.0 == ticket).expect("a wait");
        let (_, done) = waits.remove(at);
        drop(waits);
        done.complete(outcome);
    }
}

/// A server of each driver, one worker each (so that the connections a test opens share
/// it), with a scripted gate.
fn servers() -> Vec<(&'static str, TestServer, Arc<Scripted>)> {
    [
        ("io_uring", TestServer::start(&["-t", "1"])),
        ("epoll", TestServer::start(&["-t", "1", "--io", "epoll"])),
        ("task", TestServer::start_tasks(&[])),
    ]
    .into_iter()
    .map(|(name, s)| {
        let gate = Arc::new(Scripted::default());
        assert!(s.shared().set_gate(gate.clone()));
        (name, s, gate)
    })
    .collect()
}

const NOTHING_FOR: Duration = Duration::from_millis(150);

#[tokio::test]
async fn replies_wait_for_the_gate_and_leave_in_order_while_others_are_served() {
    for (name, s, gate) in servers() {
        let mut c = s.wire().await;
        c.send(b"set a 0 0 1\r\n1\r\nget a\r\nset b 0 0 2\r\n22\r\nget b\r\n")
            .await;
        let t = gate.parked(1).await;
        assert!(
            c.pending(NOTHING_FOR).await.is_empty(),
            "{name}: sent early"
        );
        // A request behind the parked ones waits behind them.
        c.send(b"mn\r\n").await;
        // The worker serves everyone else meanwhile; reads see the writes already.
        let mut other = s.wire().await;
        let got = other.ask(b"get a b\r\n", Until::END).await;
        assert_eq!(
            got, "VALUE a 0 1\r\n1\r\nVALUE b 0 2\r\n22\r\nEND\r\n",
            "{name}"
        );
        let conns = other.ask(b"stats conns\r\n", Until::END).await;
        assert!(conns.contains("conn_io_queue"), "{name}: {conns}");
        assert!(
            c.pending(NOTHING_FOR).await.is_empty(),
            "{name}: sent early"
        );
        gate.complete(t[0], Ok(()));
        let want =
            "STORED\r\nVALUE a 0 1\r\n1\r\nEND\r\nSTORED\r\nVALUE b 0 2\r\n22\r\nEND\r\nMN\r\n";
        assert_eq!(
            c.read(Until::End(b"MN\r\n")).await,
            want.as_bytes(),
            "{name}"
        );
        // The connection goes on as usual.
        c.send(b"get a\r\n").await;
        assert_eq!(c.read(Until::END).await, b"VALUE a 0 1\r\n1\r\nEND\r\n");
        s.stop().await;
    }
}

#[tokio::test]
async fn completions_in_any_order_resume_their_own_connections() {
    for (name, s, gate) in servers() {
        let mut first = s.wire().await;
        first.send(b"set x 0 0 1\r\n1\r\n").await;
        let t1 = gate.parked(1).await[0];
        let mut second = s.wire().await;
        second.send(b"incr n 1\r\nset y 0 0 1\r\n2\r\n").await;
        let t2 = gate.parked(2).await[1];
        assert!(t2 > t1);
        gate.complete(t2, Ok(()));
        assert_eq!(
            second.read(Until::Lines(2)).await,
            b"NOT_FOUND\r\nSTORED\r\n"
        );
        assert!(first.pending(NOTHING_FOR).await.is_empty(), "{name}");
        // Late, from another thread.
        let g = gate.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            g.complete(t1, Ok(()));
        });
        assert_eq!(first.read(Until::LINE).await, b"STORED\r\n", "{name}");
        s.stop().await;
    }
}

#[tokio::test]
async fn a_failed_wait_closes_the_connection_with_its_replies_unsent() {
    for (name, s, gate) in servers() {
        let mut c = s.wire().await;
        c.send(b"set k 0 0 1\r\nv\r\nget k\r\n").await;
        let t = gate.parked(1).await;
        gate.complete(t[0], Err("the journal could not be flushed".into()));
        assert_eq!(c.read(Until::Closed).await, b"", "{name}: replies sent");
        // The others are unaffected.
        let mut other = s.wire().await;
        assert_eq!(other.ask(b"mn\r\n", Until::LINE).await, "MN\r\n", "{name}");
        s.stop().await;
    }
}

/// Waits (5 s at most) until the server counts `n` connections.
async fn await_connections(s: &TestServer, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = s.shared().counters.curr_connections.load(SeqCst);
        if now == n {
            return;
        }
        assert!(Instant::now() < deadline, "{now} connections, not {n}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_connection_closed_while_parked_releases_everything() {
    for (name, s, gate) in servers() {
        let mut c = s.wire().await;
        c.send(b"set k 0 0 1\r\nv\r\n").await;
        let t = gate.parked(1).await;
        drop(c);
        gate.complete(t[0], Ok(()));
        await_connections(&s, 0).await;
        let mut other = s.wire().await;
        assert_eq!(other.ask(b"mn\r\n", Until::LINE).await, "MN\r\n", "{name}");
        s.stop().await;
    }
}

#[tokio::test]
async fn a_stop_while_requests_are_parked_does_not_hang() {
    for (name, s, gate) in servers() {
        let mut c = s.wire().await;
        c.send(b"set k 0 0 1\r\nv\r\n").await;
        gate.parked(1).await;
        // Never completed: the harness's stop fails after 5 s if the server hangs.
        s.stop().await;
        assert_eq!(
            c.read(Until::Closed).await,
            b"",
            "{name}: unacknowledged reply sent"
        );
        // A completion after the stop goes nowhere, harmlessly.
        let t = gate.parked(1).await;
        gate.complete(t[0], Ok(()));
    }
}
