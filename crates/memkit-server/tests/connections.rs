//! A connection's life as the server sees it: where `stats conns` says each one is, and how
//! a stopping server ends idle and busy connections.

#[path = "support/inproc.rs"]
mod inproc;

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use inproc::conn;
use memkit_testkit::TestServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `stats conns` names where each connection is, as memcached's `state_text` does: the
/// asking one answering, an idle one waiting, one holding half a request reading, one
/// discarding a refused value swallowing, one streaming `watch` lines watching.
#[tokio::test]
async fn stats_conns_shows_each_connections_state() {
    let s = TestServer::start(&[]);
    let mut asker = conn(&s).await;
    let mut idle = conn(&s).await;
    assert!(
        idle.ask(b"version\r\n", b"\r\n")
            .await
            .starts_with("VERSION ")
    );
    let mut partial = conn(&s).await;
    partial.send(b"get half").await;
    let mut swallowing = conn(&s).await;
    let refused = swallowing.ask(b"set big 0 0 2000000\r\nxx", b"\r\n").await;
    assert_eq!(refused, "SERVER_ERROR object too large for cache\r\n");
    let mut watcher = conn(&s).await;
    assert_eq!(watcher.ask(b"watch\r\n", b"\r\n").await, "OK\r\n");

    let mut want = [
        "conn_parse_cmd",
        "conn_waiting",
        "conn_read",
        "conn_swallow",
        "conn_watch",
    ]
    .map(String::from)
    .to_vec();
    want.sort();
    // Each connection's state is stored by its own task: wait until all have settled.
    let mut states = Vec::new();
    for _ in 0..100 {
        let conns = asker.ask(b"stats conns\r\n", b"END\r\n").await;
        states = conns
            .lines()
            .filter_map(|l| l.split_once(":state ").map(|(_, s)| s.to_string()))
            .collect();
        states.sort();
        if states == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(states, want);
    drop((idle, partial, swallowing, watcher));
    s.stop().await;
}

/// A stopping server wakes its idle connections (their sockets' reading side shut) and cuts
/// off one whose client keeps sending, instead of waiting out its 2 s drain deadline.
#[tokio::test]
async fn a_stop_ends_idle_and_busy_connections_at_once() {
    let s = TestServer::start(&[]);
    let sh = s.shared().clone();
    let mut idle = conn(&s).await;
    assert!(
        idle.ask(b"version\r\n", b"\r\n")
            .await
            .starts_with("VERSION ")
    );
    let (mut busy_rd, mut busy_wr) = conn(&s).await.0.into_split();
    let sender =
        tokio::spawn(async move { while busy_wr.write_all(b"get k\r\n").await.is_ok() {} });
    let drain = tokio::spawn(async move {
        let mut b = vec![0u8; 65536];
        while matches!(busy_rd.read(&mut b).await, Ok(n) if n > 0) {}
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        sh.counters.bytes_written.load(Relaxed) > 1000,
        "the busy client is answered"
    );
    let t = Instant::now();
    s.stop().await;
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "the stop waited {:?} for its connections",
        t.elapsed()
    );
    assert_eq!(sh.counters.curr_connections.load(Relaxed), 0);
    assert!(idle.closed().await, "idle connection not closed");
    tokio::time::timeout(Duration::from_secs(2), drain)
        .await
        .expect("busy connection closed")
        .unwrap();
    sender.abort();
}
