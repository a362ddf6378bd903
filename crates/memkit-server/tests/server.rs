//! memkitd end to end, in-process: listener on port 0, shutdown by future, raw sockets.
//! Byte-exact comparison with real memcached lives in tests/interop (Python, run by .ci/run).

use std::time::Duration;

use memkit_testkit::TestServer;
use memkit_testkit::wire::{Until, Wire};

#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    let s = TestServer::start(&[]);
    let mut c = s.wire().await;
    let mut req = Vec::new();
    let mut want = String::new();
    for i in 0..200 {
        req.extend_from_slice(
            format!("set k{i} {i} 0 {}\r\nv{i}\r\n", format!("v{i}").len()).as_bytes(),
        );
        want.push_str("STORED\r\n");
    }
    for i in 0..200 {
        req.extend_from_slice(format!("get k{i}\r\n").as_bytes());
        want.push_str(&format!(
            "VALUE k{i} {i} {}\r\nv{i}\r\nEND\r\n",
            format!("v{i}").len()
        ));
    }
    req.extend_from_slice(b"mn\r\n");
    want.push_str("MN\r\n");
    assert_eq!(c.ask(&req, Until::End(b"MN\r\n")).await, want);
    s.stop().await;
}

#[tokio::test]
async fn a_large_multi_get_returns_every_key() {
    let s = TestServer::start(&[]);
    let mut c = s.wire().await;
    let mut req = Vec::new();
    for i in 0..1000 {
        req.extend_from_slice(format!("set key:{i:04} 0 0 4\r\n{i:04}\r\n").as_bytes());
    }
    c.send(&req).await;
    c.read(Until::Lines(1000)).await;
    let keys: Vec<String> = (0..1000).map(|i| format!("key:{i:04}")).collect();
    let line = format!("get {} missing\r\n", keys.join(" "));
    assert!(
        line.len() > 2048,
        "longer than memcached's line guard, as multi-gets may be"
    );
    let reply = c.ask(line.as_bytes(), Until::END).await;
    // Every key in order, each value its own: the keys are warmed eight at a time ahead of
    // their lookups (`dispatch::warm`), which must change neither the reply nor the counts.
    let want: String = (0..1000)
        .map(|i| format!("VALUE key:{i:04} 0 4\r\n{i:04}\r\n"))
        .chain(["END\r\n".to_string()])
        .collect();
    assert!(reply == want, "the multi-get's reply differs");
    let counters = s.shared().engine.stats().counters;
    assert_eq!((counters.get_hits, counters.get_misses), (1000, 1));
    s.stop().await;
}

#[tokio::test]
async fn bad_input_gets_memcached_errors_and_the_connection_goes_on() {
    let s = TestServer::start(&[]);
    let mut c = s.wire().await;
    let mut neighbour = s.wire().await;
    let reply = c
        .ask(
            b"bogus\r\nset k 0 0 2\r\nabcd\r\nincr\r\nmn\r\n",
            Until::End(b"MN\r\n"),
        )
        .await;
    assert_eq!(
        reply,
        "ERROR\r\nCLIENT_ERROR bad data chunk\r\nERROR\r\nERROR\r\nMN\r\n"
    );
    // A value over -I is refused and its data swallowed, even when it arrives later.
    c.send(b"set big 0 0 2000000\r\n").await;
    c.send(&vec![b'x'; 1_000_000]).await;
    c.send(&vec![b'x'; 1_000_000]).await;
    let reply = c.ask(b"\r\nget big\r\n", Until::END).await;
    assert_eq!(reply, "SERVER_ERROR object too large for cache\r\nEND\r\n");
    assert_eq!(
        neighbour.ask(b"version\r\n", Until::LINE).await,
        format!("{}\r\n", memkit_server::VERSION_LINE)
    );
    s.stop().await;
}

#[tokio::test]
async fn a_huge_line_without_newline_closes_only_that_connection() {
    let s = TestServer::start(&[]);
    let mut c = s.wire().await;
    let mut other = s.wire().await;
    c.send(&vec![b'a'; 10_000]).await;
    assert!(c.closed().await);
    assert_eq!(other.ask(b"mn\r\n", Until::End(b"MN\r\n")).await, "MN\r\n");
    s.stop().await;
}

#[tokio::test]
async fn the_connection_limit_is_enforced_like_memcached() {
    let s = TestServer::start(&["-c", "2"]);
    let mut a = s.wire().await;
    let mut b = s.wire().await;
    assert_eq!(a.ask(b"mn\r\n", Until::End(b"MN\r\n")).await, "MN\r\n");
    assert_eq!(b.ask(b"mn\r\n", Until::End(b"MN\r\n")).await, "MN\r\n");
    let mut c = s.wire().await;
    assert_eq!(
        c.read(Until::LINE).await,
        b"ERROR Too many open connections\r\n"
    );
    assert!(c.closed().await);
    drop(a);
    // Once a slot frees, new connections are served again.
    let mut ok = false;
    for _ in 0..100 {
        let mut d = s.wire().await;
        d.send(b"mn\r\n").await;
        if d.read(Until::LINE).await == b"MN\r\n" {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ok);
    let stats = b.ask(b"stats\r\n", Until::END).await;
    assert!(stats.contains("STAT rejected_connections "), "{stats}");
    assert!(!stats.contains("STAT rejected_connections 0\r"), "{stats}");
    s.stop().await;
}

#[tokio::test]
async fn idle_connections_are_closed_after_the_idle_timeout() {
    let s = TestServer::start(&["-o", "idle_timeout=1"]);
    let mut c = s.wire().await;
    assert_eq!(c.ask(b"mn\r\n", Until::End(b"MN\r\n")).await, "MN\r\n");
    assert!(c.closed().await, "an idle connection is closed");
    s.stop().await;
}

#[tokio::test]
async fn shutdown_needs_dash_a_and_then_stops_the_server() {
    let s = TestServer::start(&[]);
    let mut c = s.wire().await;
    assert_eq!(
        c.ask(b"shutdown\r\n", Until::LINE).await,
        "ERROR: shutdown not enabled\r\n"
    );
    s.stop().await;

    let s = TestServer::start(&["-A"]);
    let mut c = s.wire().await;
    c.send(b"shutdown\r\n").await;
    assert!(c.closed().await);
    s.stopped().await;
}

#[tokio::test]
async fn graceful_shutdown_answers_requests_already_sent() {
    let s = TestServer::start(&[]);
    let mut c = s.wire().await;
    assert_eq!(
        c.ask(b"set a 0 0 1\r\n1\r\n", Until::LINE).await,
        "STORED\r\n"
    );
    c.send(b"get a\r\n").await;
    let reply = c.read(Until::END).await;
    assert_eq!(reply, b"VALUE a 0 1\r\n1\r\nEND\r\n");
    s.stop().await;
    assert!(c.closed().await, "connections are closed at shutdown");
}

#[tokio::test]
async fn stats_subcommands_and_metadump() {
    let s = TestServer::start(&[]);
    let mut c = s.wire().await;
    c.ask(
        b"set alpha 1 0 5\r\nhello\r\nset beta 0 100 3\r\nabc\r\nget alpha nope\r\n",
        Until::END,
    )
    .await;
    let general = c.ask(b"stats\r\n", Until::END).await;
    for needle in [
        "STAT curr_items 2\r",
        "STAT get_hits 1\r",
        "STAT get_misses 1\r",
        "STAT cmd_set 2\r",
        "STAT limit_maxbytes 67108864\r",
    ] {
        assert!(general.contains(needle), "{needle} missing in {general}");
    }
    let settings = c.ask(b"stats settings\r\n", Until::END).await;
    assert!(
        settings.contains("STAT item_size_max 1048576\r")
            && settings.contains("STAT evictions on\r")
    );
    let items = c.ask(b"stats items\r\n", Until::END).await;
    assert!(items.contains(":number 2\r"), "{items}");
    let slabs = c.ask(b"stats slabs\r\n", Until::END).await;
    assert!(
        slabs.contains(":chunk_size 96\r") && slabs.contains("STAT active_slabs 1\r"),
        "{slabs}"
    );
    let sizes = c.ask(b"stats sizes\r\n", Until::END).await;
    assert!(sizes.contains("STAT sizes_status enabled\r"));
    let conns = c.ask(b"stats conns\r\n", Until::END).await;
    assert!(conns.contains(":addr tcp:127.0.0.1:"), "{conns}");
    let dump = c.ask(b"lru_crawler metadump all\r\n", Until::END).await;
    assert!(dump.contains("key=alpha exp=-1 "), "{dump}");
    assert!(
        dump.contains("key=beta exp=") && !dump.contains("key=beta exp=-1"),
        "{dump}"
    );
    assert_eq!(c.ask(b"stats reset\r\n", Until::LINE).await, "RESET\r\n");
    let after = c.ask(b"stats\r\n", Until::END).await;
    assert!(
        after.contains("STAT get_hits 0\r") && after.contains("STAT curr_items 2\r"),
        "{after}"
    );
    assert_eq!(c.ask(b"stats nonsense\r\n", Until::LINE).await, "ERROR\r\n");
    assert_eq!(
        c.ask(b"cache_memlimit 128\r\n", Until::LINE).await,
        "OK\r\n"
    );
    assert!(
        c.ask(b"stats\r\n", Until::END)
            .await
            .contains("STAT limit_maxbytes 134217728\r")
    );
    s.stop().await;
}

#[tokio::test]
async fn watch_streams_fetches_and_mutations() {
    let s = TestServer::start(&[]);
    let mut w = s.wire().await;
    assert_eq!(
        w.ask(b"watch fetchers mutations\r\n", Until::End(b"OK\r\n"))
            .await,
        "OK\r\n"
    );
    let mut c = s.wire().await;
    // The subscription is registered when the watcher's OK is written; keep sending until
    // the events show up rather than sleeping a guessed amount.
    let mut seen = String::new();
    for _ in 0..50 {
        c.ask(b"set wkey 0 0 1\r\nx\r\nget wkey\r\n", Until::END)
            .await;
        let events = w.pending(Duration::from_millis(100)).await;
        seen.push_str(&String::from_utf8_lossy(&events));
        if seen.contains("type=item_get key=wkey status=found")
            && seen.contains("type=item_store key=wkey status=stored")
        {
            break;
        }
    }
    assert!(
        seen.contains("type=item_get key=wkey status=found"),
        "{seen}"
    );
    assert!(
        seen.contains("type=item_store key=wkey status=stored"),
        "{seen}"
    );
    s.stop().await;
}

#[tokio::test]
async fn concurrent_clients_increment_exactly() {
    let s = TestServer::start(&["-t", "2"]);
    let mut c = s.wire().await;
    c.ask(b"set ctr 0 0 1\r\n0\r\n", Until::LINE).await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let mut conn = s.wire().await;
        tasks.push(tokio::spawn(async move {
            for _ in 0..250 {
                conn.ask(b"incr ctr 1\r\n", Until::LINE).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        c.ask(b"get ctr\r\n", Until::END).await,
        "VALUE ctr 0 4\r\n2000\r\nEND\r\n"
    );
    assert_eq!(s.shared().engine.stats().counters.incr_hits, 2000);
    s.stop().await;
}

#[tokio::test]
async fn watch_evictions_reports_evicted_keys() {
    let s = TestServer::start(&["-m", "8"]);
    let mut w = s.wire().await;
    assert_eq!(
        w.ask(b"watch evictions\r\n", Until::End(b"OK\r\n")).await,
        "OK\r\n"
    );
    let mut c = s.wire().await;
    let value = vec![b'v'; 1000];
    let mut seen = String::new();
    let mut i = 0u32;
    // Fill well past 8 MiB until the watcher hears of an eviction.
    while !seen.contains("type=eviction key=fill") && i < 100_000 {
        let mut batch = Vec::new();
        for _ in 0..500 {
            batch.extend_from_slice(format!("set fill{i} 0 0 1000 noreply\r\n").as_bytes());
            batch.extend_from_slice(&value);
            batch.extend_from_slice(b"\r\n");
            i += 1;
        }
        batch.extend_from_slice(b"mn\r\n");
        c.ask(&batch, Until::End(b"MN\r\n")).await;
        let events = w.pending(Duration::from_millis(50)).await;
        seen.push_str(&String::from_utf8_lossy(&events));
    }
    assert!(
        seen.contains("type=eviction key=fill"),
        "no eviction seen after {i} sets"
    );
    assert!(seen.contains(" fetch=no "), "{seen}");
    s.stop().await;
}

/// memkitd's own layout: connections pinned to single-threaded worker runtimes, the
/// acceptor on another. Sockets move to their worker's reactor; counts and shutdown hold.
#[tokio::test]
async fn connections_on_pinned_worker_threads() {
    let s = TestServer::start(&["-t", "2"]);
    let (addr, shared) = (s.tcp_addr(), s.shared().clone());
    let mut c = Wire::tcp(addr).await.unwrap();
    c.ask(b"set ctr 0 0 1\r\n0\r\n", Until::LINE).await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let mut conn = Wire::tcp(addr).await.unwrap();
        tasks.push(tokio::spawn(async move {
            for _ in 0..250 {
                conn.ask(b"incr ctr 1\r\n", Until::LINE).await;
            }
            conn
        }));
    }
    let mut open = Vec::new();
    for t in tasks {
        open.push(t.await.unwrap());
    }
    assert_eq!(
        c.ask(b"get ctr\r\n", Until::END).await,
        "VALUE ctr 0 4\r\n2000\r\nEND\r\n"
    );
    let stats = c.ask(b"stats\r\n", Until::END).await;
    assert!(stats.contains("STAT curr_connections 9\r\n"), "{stats}");
    // Shutdown with nine connections still open: each worker closes its own.
    s.stop().await;
    assert!(c.closed().await);
    for mut conn in open {
        assert!(conn.closed().await);
    }
    assert_eq!(
        shared
            .counters
            .curr_connections
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}
