//! The memkitd binary as a service manager and a log collector see it: `READY=1` on
//! `NOTIFY_SOCKET` only once the port accepts, no connection accepted (and no pid file
//! written) before the store is open (`--persist`), `RUST_LOG` deciding over `-v`, and `--log-format json` lines that
//! parse as JSON.

use std::io::ErrorKind;
use std::net::TcpStream;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::time::{Duration, Instant};

#[path = "support/daemon.rs"]
mod daemon;

use daemon::free_port;
use memkit_testkit::wire::{BlockingWire, Until};
use memkit_testkit::{TestServer, tempdir};

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// memkitd on 127.0.0.1:`port` with `args` and `env`, standard error captured, not waited
/// for (the tests watch its start-up); killed when dropped.
fn spawn(port: u16, args: &[&str], env: &[(&str, &str)]) -> TestServer {
    let p = port.to_string();
    let mut argv = vec!["-p", &p, "-l", "127.0.0.1"];
    argv.extend_from_slice(args);
    if is_root() {
        argv.extend(["-u", "root"]);
    }
    let mut launch = daemon::launch(&argv).no_wait();
    for (k, v) in env {
        launch = launch.env(k, v);
    }
    launch.start()
}

/// SIGTERM, then everything it wrote to standard error.
fn stop(mut d: TestServer) -> String {
    let (status, err) = d.stop_with(libc::SIGTERM);
    assert!(
        status.code().is_some(),
        "memkitd did not stop on SIGTERM: {status}"
    );
    err
}

/// A datagram socket standing in for systemd's notify socket.
fn notify_socket(dir: &Path) -> (UnixDatagram, String) {
    let path = dir.join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(10)))
        .unwrap();
    (sock, path.to_string_lossy().into_owned())
}

/// The notice received, if any.
fn try_notice(sock: &UnixDatagram) -> Option<String> {
    let mut buf = [0u8; 512];
    match sock.recv(&mut buf) {
        Ok(n) => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => None,
        Err(e) => panic!("notify socket: {e}"),
    }
}

/// A bare connect, for the checks that the port refuses connections.
fn connect(port: u16) -> std::io::Result<TcpStream> {
    TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2))
}

fn wire(port: u16) -> std::io::Result<BlockingWire> {
    BlockingWire::tcp(("127.0.0.1", port))
}

/// Under `Type=notify`: `READY=1` arrives, and by then the port accepts and answers.
#[test]
fn ready_arrives_once_the_port_accepts() {
    let dir = tempdir("service-ready");
    let (sock, path) = notify_socket(dir.path());
    let port = free_port();
    let d = spawn(port, &[], &[("NOTIFY_SOCKET", &path)]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let notice = loop {
        if let Some(n) = try_notice(&sock) {
            break n;
        }
        assert!(Instant::now() < deadline, "no READY=1 within 20 s");
    };
    // Checked at once: nothing may be left to do after the notice.
    let mut s = wire(port).expect("the port accepts when READY=1 arrives");
    assert!(notice.lines().any(|l| l == "READY=1"), "{notice:?}");
    assert!(
        notice.lines().any(|l| l == format!("MAINPID={}", d.pid())),
        "{notice:?}"
    );
    assert!(s.ask(b"version\r\n", Until::LINE).starts_with("VERSION "));
    drop(d);
}

/// With `--persist`, the sockets are bound at start-up but listen only once the store is
/// open: held between the two (its `-Y` file is a FIFO the test has not written yet), and
/// then through the store's recovery, every connect is refused outright, never accepted
/// and left hanging; `READY=1` follows, and the first connection is served from the store.
#[test]
fn persist_refuses_connections_until_ready() {
    let dir = tempdir("service-persist");
    let store = dir.path().join("store");
    fill_store(&store);
    let fifo = dir.path().join("auth.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (sock, path) = notify_socket(dir.path());
    let port = free_port();
    let pidfile = dir.path().join("memkitd.pid");
    let args = [
        "--persist",
        store.to_str().unwrap(),
        "-m",
        "256",
        "-Y",
        fifo.to_str().unwrap(),
        "-P",
        pidfile.to_str().unwrap(),
    ];
    let d = spawn(port, &args, &[("NOTIFY_SOCKET", &path)]);

    // Until the FIFO is written, memkitd waits between bind and listen.
    let held = Instant::now();
    let mut refused = 0;
    while held.elapsed() < Duration::from_millis(500) {
        match connect(port) {
            Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}"),
            Ok(_) => panic!("accepted while the store was not open"),
        }
        refused += 1;
        assert_eq!(try_notice(&sock), None, "READY=1 before the store opened");
        // As memcached's, the pid file is written once the sockets listen.
        assert!(!pidfile.exists(), "pid file before the sockets listen");
    }
    // The port is bound (by memkitd): binding it here, without SO_REUSEADDR, fails.
    let probe = tokio::net::TcpSocket::new_v4().unwrap();
    let taken = probe.bind(([127, 0, 0, 1], port).into()).unwrap_err();
    assert_eq!(taken.kind(), ErrorKind::AddrInUse);
    drop(probe);
    std::fs::write(&fifo, "user:secret\n").unwrap();
    let held_refusals = refused;

    // Recovery, then READY=1: no connection gets in before the notice.
    let deadline = Instant::now() + Duration::from_secs(30);
    let notice = loop {
        if let Some(n) = try_notice(&sock) {
            break n;
        }
        match connect(port) {
            Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}"),
            Ok(_) => match try_notice(&sock) {
                // The notice can be sent between a connect and the check before it.
                Some(n) => break n,
                None => panic!("accepted before READY=1"),
            },
        }
        refused += 1;
        assert!(Instant::now() < deadline, "no READY=1 within 30 s");
    };
    assert!(notice.contains("READY=1"), "{notice:?}");
    let pid = std::fs::read_to_string(&pidfile).expect("pid file by READY=1");
    assert_eq!(pid.trim(), d.pid().to_string());
    let mut s = wire(port).expect("accepts after READY=1");
    let auth = s.ask(b"set auth 0 0 11\r\nuser secret\r\n", Until::LINE);
    assert_eq!(auth, "STORED\r\n");
    let got = s.ask(b"get key-42\r\n", Until::END);
    assert!(got.starts_with("VALUE key-42 0 "), "{got:?}");
    let err = stop(d);
    assert!(err.contains("recovered"), "{err}");
    eprintln!(
        "refused before READY=1: {held_refusals} while held, {} while recovering; {}",
        refused - held_refusals,
        err.lines().find(|l| l.contains("recovered")).unwrap_or("")
    );
}

/// A store with enough in its journal that recovery takes a moment.
fn fill_store(dir: &Path) {
    use memkit_types::{Blocking, Exptime};
    let opts = memkit_persist::PersistOptions {
        durability: memkit_persist::Durability::None,
        ..memkit_persist::PersistOptions::new(dir)
    };
    let p =
        memkit_persist::open(&opts, memkit_engine::EngineConfig::with_memory(256 << 20)).unwrap();
    let c = Blocking(memkit_engine::Embedded::from(p.engine.clone()));
    let value = vec![b'v'; 1000];
    for i in 0..20_000 {
        c.set(format!("key-{i}").as_bytes(), &value, 0, Exptime::NEVER)
            .unwrap();
    }
    // Durability none: every write has reached the OS already, which the next open reads.
}

fn lines_of(err: &str) -> Vec<&str> {
    err.lines().filter(|l| !l.trim().is_empty()).collect()
}

/// `RUST_LOG` decides over `-v`: `-vv` under `RUST_LOG=error` logs no requests and no
/// warnings; `RUST_LOG=memkitd::requests=debug` without `-v` logs the requests only.
#[test]
fn rust_log_filters() {
    let run = |args: &[&str], rust_log: &str| {
        let port = free_port();
        let d = spawn(port, args, &[("RUST_LOG", rust_log)]);
        let mut s = wait_accepting(port);
        s.ask(b"version\r\n", Until::LINE);
        drop(s);
        stop(d)
    };
    // -C: a flag that draws a start-up warning.
    let quiet = run(&["-vv", "-C"], "error");
    assert!(lines_of(&quiet).is_empty(), "{quiet}");
    let requests = run(&["-C"], "memkitd::requests=debug");
    assert!(
        requests
            .lines()
            .any(|l| l.contains("memkitd::requests") && l.ends_with(" version")),
        "{requests}"
    );
    assert!(!requests.contains("CAS stays enabled"), "{requests}");
    // Without RUST_LOG, -vv is memcached's: the warning and every request.
    let vv = run(&["-vv", "-C"], "");
    assert!(vv.contains("CAS stays enabled"), "{vv}");
    assert!(vv.lines().any(|l| l.ends_with(" version")), "{vv}");
    // And without -v: the warning only.
    let plain = run(&["-C"], "");
    assert!(plain.contains("CAS stays enabled"), "{plain}");
    assert!(!plain.lines().any(|l| l.ends_with(" version")), "{plain}");
}

/// `--log-format json`: every line is one JSON object with a timestamp, level, target and
/// message, warnings, listeners, requests and the shutdown alike.
#[test]
fn json_lines_parse() {
    let port = free_port();
    let d = spawn(port, &["--log-format", "json", "-vv", "-C"], &[]);
    let mut s = wait_accepting(port);
    s.ask(b"version\r\n", Until::LINE);
    drop(s);
    let err = stop(d);
    let events: Vec<serde_json::Value> = lines_of(&err)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    let message = |v: &serde_json::Value| v["fields"]["message"].as_str().unwrap_or("").to_owned();
    for v in &events {
        assert!(v["timestamp"].is_string(), "{v}");
        assert!(v["level"].is_string(), "{v}");
        assert!(v["target"].is_string(), "{v}");
    }
    let find = |level: &str, target: &str, text: &str| {
        events
            .iter()
            .any(|v| v["level"] == level && v["target"] == target && message(v).contains(text))
    };
    assert!(
        find("WARN", "memkitd::lifecycle", "CAS stays enabled"),
        "{err}"
    );
    assert!(find("INFO", "memkitd", "listening on 127.0.0.1:"), "{err}");
    assert!(find("DEBUG", "memkitd::requests", " version"), "{err}");
    assert!(find("INFO", "memkitd", "shutting down"), "{err}");
}

/// Connects once memkitd accepts (10 s at most).
fn wait_accepting(port: u16) -> BlockingWire {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(s) = wire(port) {
            return s;
        }
        assert!(Instant::now() < deadline, "memkitd did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}
