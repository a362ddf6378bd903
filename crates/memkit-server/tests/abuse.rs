//! Limits under abuse, against the memkitd binary (its RSS is read from /proc, so it runs
//! as its own process): clients that never read, slow-loris senders, a flood of 10,000
//! connections, a flood past `-c`. Each test states its bound and finishes in bounded time;
//! the limits themselves are described in docs/limits.md.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

#[path = "support/daemon.rs"]
mod daemon;

use memkit_testkit::TestServer;
use memkit_testkit::wire::{BlockingWire, Until};

/// The harness's memkitd child on a free loopback port, killed (by its PID) when dropped.
struct Memkitd {
    addr: SocketAddr,
    server: TestServer,
}

impl Memkitd {
    /// Started with `args`, once it has said it is ready (so every listener accepts: a
    /// probe connection could be reset while 10,000 sockets come and go next door).
    fn start(args: &[&str]) -> Memkitd {
        let server = daemon::launch(args).start();
        Memkitd {
            addr: server.tcp_addr(),
            server,
        }
    }

    /// VmRSS in KiB.
    fn rss_kib(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.server.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap()
    }

    fn stats(&self) -> HashMap<String, u64> {
        self.try_stats().expect("stats answered")
    }

    /// `stats`, or `None` when the connection is refused (at the connection limit: an
    /// `ERROR` line, then the close).
    fn try_stats(&self) -> Option<HashMap<String, u64>> {
        let mut c = client(self.addr).ok()?;
        let reply = c.try_ask(b"stats\r\n", Until::END).ok()?;
        let mut map = HashMap::new();
        for line in reply.lines() {
            if line.starts_with("ERROR") {
                return None;
            }
            let mut w = line.split_whitespace();
            if let (Some("STAT"), Some(k), Some(v)) = (w.next(), w.next(), w.next())
                && let Ok(v) = v.parse()
            {
                map.insert(k.to_string(), v);
            }
        }
        Some(map)
    }

    /// Waits until `curr_connections` (which counts the asking connection) is `n`;
    /// returns how many of its `stats` connections were refused on the way.
    fn await_connections(&self, n: u64, within: Duration) -> u64 {
        let until = Instant::now() + within;
        let mut refused = 0;
        loop {
            match self.try_stats() {
                Some(s) if s["curr_connections"] == n => return refused,
                Some(s) => assert!(
                    Instant::now() < until,
                    "curr_connections {}, want {n}",
                    s["curr_connections"]
                ),
                None => refused += 1,
            }
            assert!(Instant::now() < until, "stats refused until the deadline");
            thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A text-protocol client whose replies may take 10 s.
fn client(addr: SocketAddr) -> std::io::Result<BlockingWire> {
    Ok(BlockingWire::tcp(addr)?.with_timeout(Duration::from_secs(10)))
}

/// Whether the server closes `s` within `within` (reading and dropping what it sends).
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let until = Instant::now() + within;
    let mut buf = vec![0u8; 1 << 16];
    while Instant::now() < until {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return true,
            Ok(_) => {}
        }
    }
    false
}

/// A well-behaved client on its own thread: set then get of its own keys until `stop`,
/// failing on any wrong or late (10 s) reply. Returns the number of round trips.
fn well_behaved(addr: SocketAddr, stop: Arc<AtomicBool>) -> thread::JoinHandle<u64> {
    thread::spawn(move || {
        let mut c = client(addr).unwrap();
        let mut n = 0u64;
        let mut worst = Duration::ZERO;
        while !stop.load(Ordering::Relaxed) || n < 10 {
            let t = Instant::now();
            let v = format!("value-{n}");
            let set = format!("set wb:{n} 0 0 {}\r\n{v}\r\n", v.len());
            assert_eq!(c.ask(set.as_bytes(), Until::LINE), "STORED\r\n");
            let got = c.ask(format!("get wb:{n}\r\n").as_bytes(), Until::END);
            assert_eq!(got, format!("VALUE wb:{n} 0 {}\r\n{v}\r\nEND\r\n", v.len()));
            worst = worst.max(t.elapsed());
            n += 1;
            thread::sleep(Duration::from_millis(2));
        }
        eprintln!("well-behaved client: {n} round trips, slowest {worst:?}");
        n
    })
}

/// Raises this process's open-file soft limit to its hard limit (memkitd inherits it);
/// returns the new limit.
fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = lim.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
    }
    lim.rlim_cur
}

/// Sends as much of `data` as the server takes within `within` (it stops reading from a
/// client that does not read its replies); returns the bytes it took.
fn push_without_reading(s: &mut TcpStream, data: &[u8], within: Duration) -> usize {
    s.set_write_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let until = Instant::now() + within;
    let mut sent = 0;
    while sent < data.len() && Instant::now() < until {
        match s.write(&data[sent..]) {
            Ok(n) => sent += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("write: {e}"),
        }
    }
    sent
}

#[test]
fn a_client_that_never_reads_cannot_make_the_server_buffer() {
    let m = Memkitd::start(&["-m", "64"]);
    let mut setup = client(m.addr).unwrap();
    let big = "x".repeat(512 * 1024);
    let set = format!("set big 0 0 {}\r\n{big}\r\n", big.len());
    assert_eq!(setup.ask(set.as_bytes(), Until::LINE), "STORED\r\n");
    let kib = "y".repeat(1024);
    let set = format!("set kib 0 0 1024\r\n{kib}\r\n");
    assert_eq!(setup.ask(set.as_bytes(), Until::LINE), "STORED\r\n");
    assert_eq!(
        setup.ask(b"set small 0 0 3\r\nabc\r\n", Until::LINE),
        "STORED\r\n"
    );
    let base = m.rss_kib();

    // One multi-get whose reply is 2,000 x 512 KiB = 1 GiB: written out in pieces, so the
    // server holds a piece, not the reply.
    let mut huge = TcpStream::connect(m.addr).unwrap();
    let line = format!("get{}\r\n", " big".repeat(2000));
    huge.write_all(line.as_bytes()).unwrap();
    // Pipelined gets, never read: 16 MiB of requests ask for 1.5 GiB of replies.
    let mut pipe = TcpStream::connect(m.addr).unwrap();
    let reqs = "get kib\r\n".repeat(2_000_000);
    let sent = push_without_reading(&mut pipe, reqs.as_bytes(), Duration::from_secs(3));
    thread::sleep(Duration::from_millis(500));

    let grown = m.rss_kib().saturating_sub(base);
    eprintln!("RSS grew {grown} KiB with two clients that do not read");
    // Per client at most FLUSH_AT (256 KiB) plus one value plus an input buffer; 32 MiB
    // leaves room for the allocator's slack, and is far below the 1 GiB asked for.
    assert!(grown < 32 * 1024, "RSS grew {grown} KiB");
    // The server stopped reading once the replies were stuck (what it did read is what
    // socket buffers could take of the replies, about 1/100 of their size).
    let read = m.stats()["bytes_read"];
    eprintln!("the client got {sent} bytes of requests out; the server read {read}");
    assert!(read < reqs.len() as u64 / 4, "the server read {read} bytes");
    assert!(sent < reqs.len(), "everything was taken");

    // Others are served meanwhile.
    assert_eq!(
        setup.ask(b"get small\r\n", Until::END),
        "VALUE small 0 3\r\nabc\r\nEND\r\n"
    );
    drop((huge, pipe));
    m.await_connections(2, Duration::from_secs(10));
}

#[test]
fn a_multi_get_written_in_pieces_keeps_its_order() {
    let m = Memkitd::start(&[]);
    let mut c = client(m.addr).unwrap();
    // 200 KiB values: the reply is cut after every second value or so.
    let keys = ["a", "b", "a", "c", "d", "b", "e", "a"];
    let value = |k: &str| k.repeat(200 * 1024);
    for k in ["a", "b", "c", "d", "e"] {
        let v = value(k);
        let set = format!("set {k} 0 0 {}\r\n{v}\r\n", v.len());
        assert_eq!(c.ask(set.as_bytes(), Until::LINE), "STORED\r\n");
    }
    let reply = c.ask(format!("get {}\r\n", keys.join(" ")).as_bytes(), Until::END);
    let want: String = keys
        .iter()
        .map(|k| format!("VALUE {k} 0 {}\r\n{}\r\n", 200 * 1024, value(k)))
        .chain(["END\r\n".to_string()])
        .collect();
    assert!(reply == want, "the multi-get's reply differs");
    assert_eq!(m.stats()["cmd_get"], keys.len() as u64);
}

#[test]
fn a_stuck_writer_is_closed_after_the_idle_timeout() {
    let m = Memkitd::start(&["-o", "idle_timeout=1"]);
    let mut setup = client(m.addr).unwrap();
    let big = "x".repeat(256 * 1024);
    let set = format!("set big 0 0 {}\r\n{big}\r\n", big.len());
    assert_eq!(setup.ask(set.as_bytes(), Until::LINE), "STORED\r\n");
    let mut stuck = TcpStream::connect(m.addr).unwrap();
    stuck
        .write_all(format!("get{}\r\n", " big".repeat(400)).as_bytes())
        .unwrap();
    thread::sleep(Duration::from_millis(300));
    // 100 MiB of replies cannot fit in socket buffers: the write stalls, and the stall
    // counts as idle (memcached leaves a connection stuck in conn_mwrite open).
    // One connection left: the asking one (the idle setup client is closed too). Each
    // reading is taken by its own connection, and the previous asker's close may still be
    // on its way to the server, so one low reading is not trusted over the next.
    m.await_connections(1, Duration::from_secs(6));
    // The server's side of the stuck socket is gone: after what the socket buffers held,
    // the client reads end of stream (or a reset), not a stall.
    stuck
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut sink = vec![0u8; 1 << 20];
    let mut got = 0usize;
    loop {
        match stuck.read(&mut sink) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the stuck writer's socket was not closed: {e} after {got} bytes"),
        }
    }
    assert!(got < 100 << 20, "the whole reply arrived: {got} bytes");
}

#[test]
fn slow_loris_senders_do_not_hold_up_others() {
    let m = Memkitd::start(&[]);
    let stop = Arc::new(AtomicBool::new(false));
    let good = well_behaved(m.addr, stop.clone());
    // 200 connections each trickle a set, one byte per round, 20 ms apart.
    let mut loris: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(m.addr).unwrap())
        .collect();
    let reqs: Vec<String> = (0..200)
        .map(|i| format!("set loris:{i:03} 0 0 5\r\nv{i:04}\r\n"))
        .collect();
    for at in 0..reqs[0].len() {
        for (s, r) in loris.iter_mut().zip(&reqs) {
            s.write_all(&r.as_bytes()[at..at + 1]).unwrap();
        }
        thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    assert!(good.join().unwrap() >= 10);
    // Trickled requests are still requests: each completes.
    for s in &mut loris {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut reply = [0u8; 8];
        s.read_exact(&mut reply).unwrap();
        assert_eq!(&reply, b"STORED\r\n");
    }
    let mut c = client(m.addr).unwrap();
    assert_eq!(
        c.ask(b"get loris:007\r\n", Until::END),
        "VALUE loris:007 0 5\r\nv0007\r\nEND\r\n"
    );
}

#[test]
fn the_idle_timeout_cuts_off_a_request_trickled_for_longer() {
    let m = Memkitd::start(&["-o", "idle_timeout=1"]);
    let mut s = TcpStream::connect(m.addr).unwrap();
    // A byte every 300 ms: never a second without input, but no request completes. The
    // timeout counts from the last complete request, so the connection is closed.
    let t = Instant::now();
    let req = format!("set k 0 0 100\r\n{}", "v".repeat(100));
    let mut closed = false;
    for b in req.as_bytes() {
        if s.write_all(std::slice::from_ref(b)).is_err()
            || closed_within(&mut s, Duration::from_millis(300))
        {
            closed = true;
            break;
        }
    }
    assert!(closed, "still open after {:?}", t.elapsed());
    let took = t.elapsed();
    assert!(took < Duration::from_secs(4), "closed after {took:?}");
}

#[test]
fn a_flood_of_10_000_connections_leaves_memory_bounded_and_others_served() {
    const FLOOD: usize = 10_000;
    let limit = raise_nofile();
    assert!(
        limit >= FLOOD as u64 + 2500,
        "RLIMIT_NOFILE hard limit {limit} is too low"
    );
    let m = Memkitd::start(&["-c", "11000", "-m", "64"]);
    let base = m.rss_kib();
    let stop = Arc::new(AtomicBool::new(false));
    let good = well_behaved(m.addr, stop.clone());
    let t = Instant::now();
    let mut flood = Vec::with_capacity(FLOOD);
    for i in 0..FLOOD {
        let mut s = TcpStream::connect(m.addr).unwrap();
        // One in ten sends a request and leaves: its buffers must be given back.
        if i % 10 == 0 {
            s.write_all(b"get nothing\r\n").unwrap();
        }
        flood.push(s);
    }
    for s in flood.iter_mut().step_by(10) {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut end = [0u8; 5];
        s.read_exact(&mut end).unwrap();
        assert_eq!(&end, b"END\r\n");
    }
    let opened = t.elapsed();
    thread::sleep(Duration::from_millis(300));
    let rss = m.rss_kib();
    let per_conn = (rss.saturating_sub(base)) as f64 / FLOOD as f64;
    eprintln!(
        "{FLOOD} connections opened in {opened:?}: RSS {base} -> {rss} KiB, {per_conn:.1} KiB each"
    );
    // The flood, the well-behaved client, and the asker.
    m.await_connections(FLOOD as u64 + 2, Duration::from_secs(10));
    // An idle connection holds no buffers: its task, socket registration and stats entry.
    // 6 KiB a connection (debug build) is well under the 32 KiB it cost with buffers.
    assert!(per_conn < 6.0, "{per_conn:.1} KiB per idle connection");
    assert!(
        rss < 128 * 1024,
        "RSS {rss} KiB under a 10,000-connection flood"
    );
    drop(flood);
    m.await_connections(2, Duration::from_secs(20));
    stop.store(true, Ordering::Relaxed);
    assert!(good.join().unwrap() >= 10);
    let stats = m.stats();
    // The readiness probe, the well-behaved client, the flood, and this run's `stats`.
    assert!(stats["total_connections"] >= FLOOD as u64 + 2);
    assert_eq!(stats["rejected_connections"], 0);
}

#[test]
fn a_flood_past_the_connection_limit_is_refused_like_memcached() {
    const LIMIT: usize = 500;
    const FLOOD: usize = 2000;
    raise_nofile();
    let m = Memkitd::start(&["-c", &LIMIT.to_string()]);
    let stop = Arc::new(AtomicBool::new(false));
    let good = well_behaved(m.addr, stop.clone());
    thread::sleep(Duration::from_millis(100));
    let refused = Arc::new(AtomicU64::new(0));
    let mut flood = Vec::with_capacity(FLOOD);
    for _ in 0..FLOOD {
        let mut s = TcpStream::connect(m.addr).unwrap();
        s.write_all(b"mn\r\n").unwrap();
        flood.push(s);
    }
    let mut served = 0;
    for s in &mut flood {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut reply = Vec::new();
        let mut byte = [0u8; 1];
        while !reply.ends_with(b"\n") && s.read(&mut byte).unwrap_or(0) == 1 {
            reply.push(byte[0]);
        }
        match reply.as_slice() {
            b"MN\r\n" => served += 1,
            b"ERROR Too many open connections\r\n" => {
                refused.fetch_add(1, Ordering::Relaxed);
                assert!(
                    closed_within(s, Duration::from_secs(5)),
                    "refused and closed"
                );
            }
            other => panic!("unexpected reply {:?}", String::from_utf8_lossy(other)),
        }
    }
    let refused = refused.load(Ordering::Relaxed);
    eprintln!("{served} served, {refused} refused at -c {LIMIT}");
    // The well-behaved client holds one slot.
    assert_eq!(served, LIMIT - 1);
    assert_eq!(refused as usize, FLOOD - served);
    stop.store(true, Ordering::Relaxed);
    assert!(good.join().unwrap() >= 10);
    drop(flood);
    // The refused connections were counted, and every slot comes back.
    let refused_stats = m.await_connections(1, Duration::from_secs(10));
    assert_eq!(m.stats()["rejected_connections"], refused + refused_stats);
}

/// 2 M keys, and 20 connections that ask for a dump (`lru_crawler metadump`, `mgdump`,
/// `stats cachedump`) and never read it: each dump stops where the client stopped reading,
/// holding its bounded output and a cursor, so RSS grows by less than 64 MiB (a dump made
/// whole before it is sent would be ~130 MiB of lines per connection), and other clients'
/// gets go on.
#[test]
fn dumps_nobody_reads_stay_bounded_and_others_are_served() {
    const KEYS: usize = 2_000_000;
    let m = Memkitd::start(&["-m", "512", "-t", "2"]);
    let mut c = client(m.addr)
        .unwrap()
        .with_timeout(Duration::from_secs(120));
    let mut req = Vec::with_capacity(1 << 20);
    for i in 0..KEYS {
        write!(req, "set dump:key:{i:08} 0 0 1 noreply\r\nv\r\n").unwrap();
        if req.len() >= 1 << 20 || i + 1 == KEYS {
            c.send(&req);
            req.clear();
        }
    }
    assert_eq!(c.ask(b"mn\r\n", Until::LINE), "MN\r\n");
    assert_eq!(m.stats()["curr_items"], KEYS as u64);
    let base = m.rss_kib();
    let stop = Arc::new(AtomicBool::new(false));
    let good = well_behaved(m.addr, stop.clone());
    let dumps: Vec<TcpStream> = (0..20)
        .map(|i| {
            let mut s = TcpStream::connect(m.addr).unwrap();
            let req: &[u8] = match i % 3 {
                0 => b"lru_crawler metadump all\r\n",
                1 => b"lru_crawler mgdump\r\n",
                _ => b"stats cachedump 1 0\r\n",
            };
            s.write_all(req).unwrap();
            s
        })
        .collect();
    // Long enough for every dump to fill its socket buffers and stop.
    thread::sleep(Duration::from_secs(3));
    let grown = m.rss_kib().saturating_sub(base);
    stop.store(true, Ordering::Relaxed);
    assert!(good.join().unwrap() >= 10, "other clients were served");
    assert!(
        grown < 64 << 10,
        "RSS grew by {grown} KiB with 20 dumps unread"
    );
    // A dump read to its end lists every key once.
    drop(dumps);
    let mut reader = client(m.addr)
        .unwrap()
        .with_timeout(Duration::from_secs(120));
    let listing = reader.ask(b"lru_crawler mgdump\r\n", Until::End(b"EN\r\n"));
    assert_eq!(
        listing
            .lines()
            .filter(|l| l.starts_with("mg dump:key:"))
            .count(),
        KEYS
    );
}
