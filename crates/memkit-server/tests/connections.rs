//! A connection's life as the server sees it: where `stats conns` says each one is, and how
//! a stopping server ends idle and busy connections.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

#[path = "support/lines.rs"]
mod lines;

use memkit_testkit::TestServer;
use memkit_testkit::wire::{Until, Wire};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The worker loops' two ways of waiting (`--io`, `stats settings`'s `memkit_io`): the
/// tests of a connection's life run under both.
const IO: [(&str, &str); 2] = [("uring", "io_uring"), ("epoll", "epoll")];

/// Starts a server waiting through `io` (where the kernel allows it), with `args`; `task`:
/// connections served as tokio tasks (an embedder's server without workers, and TLS).
async fn start(io: &str, args: &[&str]) -> TestServer {
    if io == "task" {
        return TestServer::start_tasks(args);
    }
    let mut all = vec!["--io", io];
    all.extend_from_slice(args);
    TestServer::start(&all)
}

/// `--io` chooses what the worker loops wait with, and `stats settings` says which: epoll
/// when asked for, io_uring by default where this kernel has it.
#[tokio::test]
async fn the_worker_loops_wait_through_what_io_names() {
    for (io, name) in IO {
        let s = start(io, &[]).await;
        let mut c = s.wire().await;
        let settings = c.ask(b"stats settings\r\n", Until::END).await;
        let shown = settings
            .lines()
            .find_map(|l| l.strip_prefix("STAT memkit_io "))
            .expect("memkit_io");
        let allowed = memkit_server::config::Io::Uring.effective().name();
        assert_eq!(shown, if io == "epoll" { name } else { allowed });
        eprintln!("--io {io}: {shown}");
        s.stop().await;
    }
}

/// `stats conns` names where each connection is, as memcached's `state_text` does: the
/// asking one answering, an idle one waiting, one holding half a request reading, one
/// discarding a refused value swallowing, one streaming `watch` lines watching.
#[tokio::test]
async fn stats_conns_shows_each_connections_state() {
    for (io, _) in IO {
        stats_conns_under(io).await;
    }
}

async fn stats_conns_under(io: &str) {
    let s = start(io, &[]).await;
    let mut asker = s.wire().await;
    let mut idle = s.wire().await;
    assert!(
        idle.ask(b"version\r\n", Until::LINE)
            .await
            .starts_with("VERSION ")
    );
    let mut partial = s.wire().await;
    partial.send(b"get half").await;
    let mut swallowing = s.wire().await;
    let refused = swallowing
        .ask(b"set big 0 0 2000000\r\nxx", Until::LINE)
        .await;
    assert_eq!(refused, "SERVER_ERROR object too large for cache\r\n");
    let mut watcher = s.wire().await;
    assert_eq!(watcher.ask(b"watch\r\n", Until::LINE).await, "OK\r\n");

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
        let conns = asker.ask(b"stats conns\r\n", Until::END).await;
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
    let mut idle = s.wire().await;
    assert!(
        idle.ask(b"version\r\n", Until::LINE)
            .await
            .starts_with("VERSION ")
    );
    let (mut busy_rd, mut busy_wr) = TcpStream::connect(s.tcp_addr()).await.unwrap().into_split();
    let sender =
        tokio::spawn(async move { while busy_wr.write_all(b"get k\r\n").await.is_ok() {} });
    let drain = tokio::spawn(async move {
        let mut b = vec![0u8; 65536];
        while matches!(busy_rd.read(&mut b).await, Ok(n) if n > 0) {}
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        sh.counters.bytes_written.load() > 1000,
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

/// A server's state run again after a stop serves again: the stop's flag belongs to the run
/// that set it. The embedding API (`memkit_server::run` over one `Shared`, twice) is what is
/// tested here, so the test calls it rather than the harness.
#[tokio::test]
async fn a_state_serves_again_after_its_run_stopped() {
    use memkit_server::{Args, Settings, Shared};
    let argv = ["memkitd"];
    let (settings, _) = Settings::from_args(<Args as clap::Parser>::parse_from(argv));
    let sh = Shared::new(
        std::sync::Arc::new(memkit_server::engine_for(&settings)),
        settings,
    );
    for round in 0..2 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn(memkit_server::run(listener, sh.clone(), async move {
            let _ = rx.await;
        }));
        let mut c = Wire::tcp(addr).await.unwrap();
        let version = c.ask(b"version\r\n", Until::LINE).await;
        assert!(
            version.starts_with("VERSION "),
            "round {round}: {version:?}"
        );
        let _ = tx.send(());
        tokio::time::timeout(Duration::from_secs(5), run)
            .await
            .expect("the run stops")
            .unwrap();
    }
}

/// memkitd's workers run tokio's timer only when a connection may need it: with
/// `-o idle_timeout` an idle connection is still closed (the process, as memkitd starts
/// its workers), and without it connections are served with no timer at all.
#[tokio::test]
async fn workers_have_a_timer_when_an_idle_timeout_needs_one() {
    let mut plain = TestServer::process(&[]);
    let version = plain.wire().await.ask(b"version\r\n", Until::LINE).await;
    assert!(version.starts_with("VERSION "), "{version:?}");
    plain.kill();

    let mut timed = TestServer::process(&["-o", "idle_timeout=1"]);
    let mut c = timed.wire().await.with_timeout(Duration::from_secs(10));
    let t = Instant::now();
    assert!(c.closed().await, "an idle connection is closed");
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    timed.kill();
}

/// A client that keeps sending gives way to its neighbours after `-R` requests, as
/// memcached's `reqs_per_event` makes it, under every driver (the session decides it):
/// every request is still answered, in order, and the yields are counted in `conn_yields`.
#[tokio::test]
async fn a_connection_that_keeps_sending_gives_way_after_r_requests() {
    for io in ["uring", "epoll", "task"] {
        gives_way_under(io).await;
    }
}

async fn gives_way_under(io: &str) {
    let s = start(io, &["-R", "5"]).await;
    let mut asker = s.wire().await;
    let settings = asker.ask(b"stats settings\r\n", Until::END).await;
    assert!(settings.contains("STAT reqs_per_event 5\r\n"), "{settings}");
    assert!(asker.ask(b"set k 0 0 1\r\nv\r\n", Until::LINE).await == "STORED\r\n");

    // Far more than one 16 KiB read: the server reads, answers, and gives way in between.
    const N: usize = 20_000;
    let (mut rd, mut wr) = tokio::net::TcpStream::connect(s.tcp_addr())
        .await
        .unwrap()
        .into_split();
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        while got.len() < N * "VALUE k 0 1\r\nv\r\nEND\r\n".len() {
            let n = rd.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed after {} bytes", got.len());
            got.extend_from_slice(&buf[..n]);
        }
        got
    });
    wr.write_all(&b"get k\r\n".repeat(N)).await.unwrap();
    let got = reader.await.unwrap();
    assert_eq!(got, b"VALUE k 0 1\r\nv\r\nEND\r\n".repeat(N));

    let stats = asker.ask(b"stats\r\n", Until::END).await;
    let yields: u64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("STAT conn_yields "))
        .expect("conn_yields")
        .parse()
        .unwrap();
    assert!(yields >= 1, "no yield in {N} pipelined requests");
    s.stop().await;
}

/// A client that sends its requests and its end together (a half-close right behind them,
/// as `printf ... | nc -N` does) gets every reply and then the server's close, even when
/// the end arrived before the server's first read: a poller reports the end once, beside
/// the bytes.
#[tokio::test]
async fn requests_and_the_end_sent_together_are_answered_and_closed() {
    for (io, _) in IO {
        answered_and_closed_under(io).await;
    }
}

async fn answered_and_closed_under(io: &str) {
    let s = start(io, &[]).await;
    for _ in 0..50 {
        let mut c = s.wire().await;
        c.send(b"set k 0 0 1\r\nv\r\nget k\r\n").await;
        c.stream().shutdown().await.unwrap();
        // The server closes after answering.
        let got = c.read(Until::Closed).await;
        assert_eq!(got, b"STORED\r\nVALUE k 0 1\r\nv\r\nEND\r\n");
    }
    s.stop().await;
}

/// A value larger than a receive's buffer and a reply larger than the socket takes at once:
/// the request is read on past its first part, the reply sent whole, and the connection
/// serves the next request, at one request in flight and with requests pipelined behind.
#[tokio::test]
async fn large_values_cross_the_loop_whole() {
    for (io, _) in IO {
        let s = start(io, &[]).await;
        let mut c = s.wire().await;
        let value: Vec<u8> = (0..700_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let mut set = format!("set big 0 0 {}\r\n", value.len()).into_bytes();
        set.extend_from_slice(&value);
        set.extend_from_slice(b"\r\n");
        assert_eq!(c.ask(&set, Until::LINE).await, "STORED\r\n");
        let mut want = format!("VALUE big 0 {}\r\n", value.len()).into_bytes();
        want.extend_from_slice(&value);
        want.extend_from_slice(b"\r\nEND\r\n");
        for _ in 0..3 {
            let got = c.ask(b"get big\r\n", Until::END).await;
            assert!(got.as_bytes() == want, "{io}: {} bytes back", got.len());
        }
        // The meta no-op's MN marks the end: the value's letters are lower case.
        let got = c
            .ask(b"get big\r\nget big\r\nmn\r\n", Until::End(b"MN\r\n"))
            .await;
        assert!(got.as_bytes()[..want.len()] == want, "{io}");
        assert_eq!(got.len(), 2 * want.len() + "MN\r\n".len(), "{io}");
        s.stop().await;
    }
}

/// A client that sends a pipeline and leaves without reading: the replies the server sends
/// after it left fail, and each such connection is closed, its slot and count given back.
/// Its first receive takes part of the pipeline (a `stats` reply sent behind it); the
/// replies to the rest are short, so through the ring they leave as a quiet send with the
/// next receive linked behind it, and it is the send's failure that ends both.
#[tokio::test]
async fn a_client_gone_before_its_replies_is_closed() {
    for (io, _) in IO {
        let s = start(io, &[]).await;
        let mut asker = s.wire().await;
        let mut pipeline = b"stats\r\n".to_vec();
        pipeline.extend(b"get a\r\n".repeat(400));
        for _ in 0..20 {
            let mut c = tokio::net::TcpStream::connect(s.tcp_addr()).await.unwrap();
            c.write_all(&pipeline).await.unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let stats = asker.ask(b"stats\r\n", Until::END).await;
            let open = stats
                .lines()
                .find_map(|l| l.strip_prefix("STAT curr_connections "))
                .expect("curr_connections")
                .to_owned();
            if open == "1" {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{io}: {open} connections still open"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        s.stop().await;
    }
}

/// A client that asks one request at a time but stops reading: its replies (6 MB) fill
/// the sockets and the server's send waits for room, while another connection is served;
/// once it reads again, every reply arrives, in order, and the connection serves the next
/// request. Through the ring each reply here is short enough to leave as a quiet send.
#[tokio::test]
async fn a_reader_that_falls_behind_gets_every_reply() {
    const ASKS: usize = 6000;
    for (io, _) in IO {
        let s = start(io, &["-t", "1"]).await;
        let mut other = s.wire().await;
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        // A small window, so that the server's send, not this socket, holds the backlog.
        sock.set_recv_buffer_size(4096).unwrap();
        let stream = sock.connect(s.tcp_addr()).await.unwrap();
        let mut c = Wire::new(stream).with_timeout(Duration::from_secs(10));
        let value = "v".repeat(990);
        let set = format!("set k 0 0 {}\r\n{value}\r\n", value.len());
        assert_eq!(c.ask(set.as_bytes(), Until::LINE).await, "STORED\r\n");
        let reply = format!("VALUE k 0 {}\r\n{value}\r\nEND\r\n", value.len());
        for _ in 0..ASKS {
            c.send(b"get k\r\n").await;
            // Apart, so that each is read alone and answered as the connection's last.
            std::thread::sleep(Duration::from_micros(100));
        }
        assert_eq!(other.ask(b"mn\r\n", Until::LINE).await, "MN\r\n", "{io}");
        let got = c
            .try_read(Until::Bytes(ASKS * reply.len()))
            .await
            .unwrap_or_else(|e| panic!("{io}: {ASKS} replies: {e}"));
        assert!(
            got == reply.repeat(ASKS).into_bytes(),
            "{io}: replies differ"
        );
        assert_eq!(c.ask(b"mn\r\n", Until::LINE).await, "MN\r\n", "{io}");
        s.stop().await;
    }
}

/// Many connections asking at once, round after round: through the ring a pass then finds
/// more receives done than the kernel completes in one `io_uring_enter` (it runs a bounded
/// batch of deferred work), and those left over must be answered too: a worker that sleeps
/// anywhere but in the ring's wait with such work pending leaves a client waiting forever.
#[tokio::test]
async fn many_connections_asking_at_once_are_all_answered() {
    for (io, _) in IO {
        // One worker, so that it serves them all.
        let s = start(io, &["-t", "1"]).await;
        let mut conns = Vec::new();
        for _ in 0..300 {
            conns.push(s.wire().await);
        }
        for _ in 0..20 {
            for c in &mut conns {
                c.send(b"mn\r\n").await;
            }
            for c in &mut conns {
                assert_eq!(c.read(Until::End(b"MN\r\n")).await, b"MN\r\n", "{io}");
            }
        }
        s.stop().await;
    }
}

/// `memkit_io_moves` of a `stats` reply.
fn io_moves(stats: &str) -> u64 {
    lines::stat(stats, "memkit_io_moves")
}

/// Every connection of `conns` asks `mn` once, one after another: each is answered however
/// its connection waited (in the ring or in the epoll) when the worker last moved.
async fn each_answers(conns: &mut [Wire<TcpStream>], when: &str) {
    for (i, c) in conns.iter_mut().enumerate() {
        assert_eq!(
            c.ask(b"mn\r\n", Until::End(b"MN\r\n")).await,
            "MN\r\n",
            "{when}: conn {i}"
        );
    }
}

/// An io_uring worker waits in its epoll at light load and in its ring under load, and its
/// connections follow it at their next turn (`docs/architecture.md`). Across moves both
/// ways every request is answered, whether its connection waited in the ring or in the
/// epoll when the worker moved (a receive armed in the ring completes while the worker
/// sleeps in epoll), and `memkit_io_moves` counts the moves.
#[tokio::test]
async fn a_ring_worker_moves_between_its_epoll_and_its_ring_as_load_changes() {
    let s = start("uring", &["-t", "1"]).await;
    let mut asker = s.wire().await;
    let moves = io_moves(&asker.ask(b"stats\r\n", Until::END).await);
    if memkit_server::config::Io::Uring.effective() != memkit_server::config::Io::Uring {
        assert_eq!(moves, 0, "an epoll worker has nothing to move between");
        eprintln!("this kernel has no io_uring: the worker waits with epoll only");
        s.stop().await;
        return;
    }
    assert_eq!(moves, 0, "a worker starts light, in its epoll");
    let mut conns = Vec::new();
    for _ in 0..64 {
        conns.push(s.wire().await);
    }
    each_answers(&mut conns, "light, at the start").await;
    for cycle in 0..2u64 {
        // Many connections asking at once fill the worker's passes: it moves to the ring.
        let deadline = Instant::now() + Duration::from_secs(30);
        while io_moves(&asker.ask(b"stats\r\n", Until::END).await) < 2 * cycle + 1 {
            assert!(Instant::now() < deadline, "cycle {cycle}: never busy");
            for c in &mut conns {
                c.send(&b"mn\r\n".repeat(4)).await;
            }
            for c in &mut conns {
                assert_eq!(
                    c.read(Until::End(b"MN\r\nMN\r\nMN\r\nMN\r\n")).await.len(),
                    16
                );
            }
        }
        each_answers(&mut conns, "busy").await;
        // One request at a time: the worker moves back to its epoll.
        while io_moves(&asker.ask(b"stats\r\n", Until::END).await) < 2 * cycle + 2 {
            assert!(
                Instant::now() < deadline,
                "cycle {cycle}: never light again"
            );
            for _ in 0..64 {
                assert_eq!(asker.ask(b"mn\r\n", Until::End(b"MN\r\n")).await, "MN\r\n");
            }
        }
        // Their receives were armed in the ring; then, moved, they wait in the epoll.
        each_answers(&mut conns, "light, armed in the ring").await;
        each_answers(&mut conns, "light, in the epoll").await;
    }
    s.stop().await;
}
