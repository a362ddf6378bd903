//! The metrics listener (`--metrics-addr`) is bounded: past its connection limit a client
//! gets `503` at once, a client that never sends its request is closed after the head
//! timeout, and however many clients it has, the memcached port keeps accepting: the
//! metrics listener cannot take the descriptors the process has.

#[path = "support/daemon.rs"]
mod daemon;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::time::Duration;

use memkit_server::metrics::{Bounds, bind, serve_with};
use memkit_testkit::TestServer;

/// Generous: what a test waits for something that happens at once, or after a timeout of
/// a few seconds, before it fails.
const PATIENCE: Duration = Duration::from_secs(30);

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s
}

/// Everything the server sends until it closes the connection.
fn read_to_close(s: &mut TcpStream) -> String {
    let mut got = Vec::new();
    match s.read_to_end(&mut got) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("not closed ({e}); got {:?}", String::from_utf8_lossy(&got)),
    }
    String::from_utf8_lossy(&got).into_owned()
}

fn scrape(port: u16) -> String {
    let mut s = connect(port);
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    read_to_close(&mut s)
}

/// `version` and a `stats` figure on a new connection to the memcached port.
fn memcached_stat(port: u16, name: &str) -> u64 {
    let mut s = connect(port);
    s.write_all(b"version\r\nstats\r\n").unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while !got.ends_with(b"END\r\n") {
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("VERSION "), "{text}");
    let prefix = format!("STAT {name} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix)?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// At the limit, a new client gets `503` at once; idle clients are closed after the head
/// timeout, which frees their slots for a scrape; the memcached port answers throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_limit_a_client_gets_503_and_idle_ones_are_closed() {
    let s = TestServer::start(&[]);
    let listener = bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let bounds = Bounds {
        connections: 4,
        head: Duration::from_millis(300),
        reply: Duration::from_secs(5),
    };
    let served = tokio::spawn(serve_with(listener, s.shared().clone(), bounds));
    let mc = s.port();
    tokio::task::spawn_blocking(move || {
        // Each connection is accepted in turn: the fifth finds the four slots taken.
        let mut idle: Vec<TcpStream> = (0..4).map(|_| connect(port)).collect();
        let mut extra = connect(port);
        let busy = read_to_close(&mut extra);
        assert!(busy.starts_with("HTTP/1.1 503 "), "{busy:?}");
        assert_eq!(memcached_stat(mc, "listen_disabled_num"), 0);
        // Closed by the 300 ms head timeout: 5 s is a generous bound for it, and shorter
        // than any other deadline a connection has.
        for c in &mut idle {
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            assert_eq!(read_to_close(c), "", "an idle client gets no reply");
        }
        let text = scrape(port);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("\nprocess_open_fds "), "{text}");
    })
    .await
    .unwrap();
    served.abort();
}

/// memkitd with `--metrics-addr` and 256 descriptors: 300 idle metrics clients take at
/// most the listener's 64 of them, the rest are answered `503`, and the memcached port
/// never fails an accept (`listen_disabled_num` stays 0). Once the head timeout has closed
/// the idle ones, a scrape is served.
#[test]
fn idle_metrics_clients_cannot_starve_the_memcached_port() {
    let metrics = daemon::free_port();
    let addr = format!("127.0.0.1:{metrics}");
    let s = daemon::launch(&["-c", "100", "--metrics-addr", &addr])
        .command(|cmd| {
            // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
            unsafe {
                cmd.pre_exec(|| {
                    let rl = libc::rlimit {
                        rlim_cur: 256,
                        rlim_max: 256,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        })
        .start();
    let mut clients: Vec<TcpStream> = (0..300).map(|_| connect(metrics)).collect();
    // Accepted in turn: once the last has its 503, every one was accepted.
    let last = read_to_close(clients.last_mut().unwrap());
    assert!(last.starts_with("HTTP/1.1 503 "), "{last:?}");
    assert_eq!(memcached_stat(s.port(), "listen_disabled_num"), 0);
    let (mut busy, mut idle) = (1, 0);
    for c in &mut clients[..299] {
        match read_to_close(c) {
            r if r.starts_with("HTTP/1.1 503 ") => busy += 1,
            r if r.is_empty() => idle += 1,
            r => panic!("{r:?}"),
        }
    }
    assert!(idle <= 64, "{idle} connections held");
    assert_eq!(busy + idle, 300);
    let text = scrape(metrics);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert_eq!(memcached_stat(s.port(), "listen_disabled_num"), 0);
}
