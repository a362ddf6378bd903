//! Warm restart end to end (`memkitd -e FILE`): the memkitd binary is filled,
//! stopped gracefully (SIGUSR1, or `shutdown graceful` with `-A`), started again with the
//! same flags, and read back: every item that had not expired, with its value, flags, CAS
//! and a TTL that kept counting while the server was down. A crash (SIGKILL), a plain stop,
//! a damaged file or changed `-m`/`-I` start empty and healthy, with the reason on stderr.

#[path = "support/daemon.rs"]
mod daemon;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use daemon::{Daemon, spawn, wait_ready};
use memkit_testkit::tempdir;
use memkit_testkit::wire::{BlockingWire, Until};

/// What `mg key v f c t` found: value, flags, CAS, TTL (-1 for none); `None` for a miss.
type Got = Option<(Vec<u8>, u32, u64, i64)>;

/// A blocking text-protocol connection, pipelining requests in batches.
struct Conn(BlockingWire);

impl Conn {
    fn open(port: u16) -> Conn {
        let w = wait_ready(|| BlockingWire::tcp(("127.0.0.1", port)));
        Conn(w.with_timeout(Duration::from_secs(30)))
    }

    fn line(&mut self) -> String {
        let l = self.0.read(Until::LINE);
        String::from_utf8_lossy(&l).trim_end().to_string()
    }

    /// `ms` of each item (`T` when it has a TTL), pipelined; the CAS of each.
    fn set_all(&mut self, items: &[(String, Vec<u8>, u32, Option<u64>)]) -> Vec<u64> {
        let mut cas = Vec::with_capacity(items.len());
        for batch in items.chunks(2000) {
            let mut req = Vec::new();
            for (key, value, flags, ttl) in batch {
                let t = ttl.map(|t| format!(" T{t}")).unwrap_or_default();
                write!(req, "ms {key} {} F{flags}{t} c\r\n", value.len()).unwrap();
                req.extend_from_slice(value);
                req.extend_from_slice(b"\r\n");
            }
            self.0.send(&req);
            for _ in batch {
                let l = self.line();
                cas.push(l.strip_prefix("HD c").expect(&l).parse().unwrap());
            }
        }
        cas
    }

    /// `mg key v f c t` of each key, pipelined: (value, flags, cas, ttl) or `None`.
    fn get_all(&mut self, keys: &[&str]) -> Vec<Got> {
        let mut out = Vec::with_capacity(keys.len());
        for batch in keys.chunks(2000) {
            let req: String = batch
                .iter()
                .map(|k| format!("mg {k} v f c t\r\n"))
                .collect();
            self.0.send(req.as_bytes());
            for _ in batch {
                let head = self.line();
                if head == "EN" {
                    out.push(None);
                    continue;
                }
                let mut parts = head.split(' ');
                assert_eq!(parts.next(), Some("VA"), "{head}");
                let len: usize = parts.next().unwrap().parse().unwrap();
                let (mut flags, mut cas, mut ttl) = (0, 0, 0);
                for p in parts {
                    match p.as_bytes()[0] {
                        b'f' => flags = p[1..].parse().unwrap(),
                        b'c' => cas = p[1..].parse().unwrap(),
                        b't' => ttl = p[1..].parse().unwrap(),
                        _ => {}
                    }
                }
                let mut value = self.0.read(Until::Bytes(len + 2));
                value.truncate(len);
                out.push(Some((value, flags, cas, ttl)));
            }
        }
        out
    }

    fn stat(&mut self, what: &str, name: &str) -> String {
        self.0.send(format!("{what}\r\n").as_bytes());
        let mut found = String::new();
        loop {
            let l = self.line();
            if l == "END" {
                return found;
            }
            if let Some(v) = l.strip_prefix(&format!("STAT {name} ")) {
                found = v.to_string();
            }
        }
    }

    fn curr_items(&mut self) -> u64 {
        self.stat("stats", "curr_items").parse().unwrap()
    }
}

/// memkitd with `-e file` and `args` on a free port (the harness's), not waited for: a
/// restore can take a while, and some tests signal it before it listens.
fn start(file: &Path, args: &[&str]) -> (Daemon, u16) {
    let mut argv = vec!["-e", file.to_str().unwrap()];
    argv.extend_from_slice(args);
    let d = spawn(&argv);
    let port = d.port();
    (d, port)
}

/// `n` items of mixed shapes: binary values (with `\r\n` and NULs), flags, no TTL, relative
/// TTLs, absolute expiry times.
fn items(n: usize) -> Vec<(String, Vec<u8>, u32, Option<u64>)> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    (0..n)
        .map(|i| {
            let value = (0..(i * 13) % 180).map(|j| (i + j * 31) as u8).collect();
            let flags = (i as u32).wrapping_mul(2_654_435_761) % 7;
            let ttl = match i % 4 {
                0 => None,
                1 => Some(1000),
                2 => Some(100_000),
                _ => Some(now + 5000),
            };
            (format!("warm:{i}"), value, flags, ttl)
        })
        .collect()
}

fn graceful_stop(d: &mut Daemon) -> String {
    let (status, err) = d.stop_with(libc::SIGUSR1);
    assert!(status.success(), "{status}: {err}");
    assert!(err.contains("Gracefully stopping"), "{err}");
    err
}

#[test]
fn sigusr1_keeps_every_item_with_flags_cas_and_counting_ttl() {
    const N: usize = 200_000;
    let dir = tempdir("warm");
    let file = dir.path().join("cache");
    let (mut d, port) = start(&file, &["-m", "64"]);
    let mut c = Conn::open(port);
    let all = items(N);
    let cas = c.set_all(&all);
    // Short-lived items, set last: expired by the time the restart loads them.
    let short: Vec<_> = (0..1000)
        .map(|i| (format!("short:{i}"), b"s".to_vec(), 0, Some(2)))
        .collect();
    c.set_all(&short);
    let keys: Vec<&str> = all.iter().map(|(k, ..)| k.as_str()).collect();
    let sample: Vec<&str> = keys.iter().copied().step_by(97).collect();
    let ttl_before = c.get_all(&sample);
    let stopped = Instant::now();
    let err = graceful_stop(&mut d);
    assert!(err.contains("warm restart: saved"), "{err}");
    assert!(file.exists());
    // A gap the TTLs must count through, and the short items' end.
    std::thread::sleep(Duration::from_millis(2500));
    let (mut d, port) = start(&file, &["-m", "64"]);
    let mut c = Conn::open(port);
    assert!(!file.exists(), "the snapshot is removed once loaded");
    assert_eq!(c.curr_items(), N as u64, "every item, and no expired one");
    let got = c.get_all(&keys);
    for (i, ((key, value, flags, ttl), g)) in all.iter().zip(&got).enumerate() {
        let (v, f, cs, _) = g.as_ref().unwrap_or_else(|| panic!("{key} lost"));
        assert_eq!((v, f, cs), (value, flags, &cas[i]), "{key}");
        assert_eq!(ttl.is_none(), g.as_ref().unwrap().3 == -1, "{key}");
    }
    let ttl_after = c.get_all(&sample);
    let gap = stopped.elapsed().as_secs();
    for (before, after) in ttl_before.iter().zip(ttl_after) {
        let (t0, t1) = (before.as_ref().unwrap().3, after.unwrap().3);
        if t0 == -1 {
            assert_eq!(t1, -1);
        } else {
            // Down for `gap` seconds (at least 2): the TTL went down by about as much.
            assert!(t1 <= t0 - 2 && t1 >= t0 - gap as i64 - 2, "{t0} -> {t1}");
        }
    }
    let shorts: Vec<&str> = short.iter().map(|(k, ..)| k.as_str()).collect();
    assert!(c.get_all(&shorts).iter().all(Option::is_none));
    // New CAS values go above every restored one.
    let max = cas.iter().max().unwrap();
    let new = c.set_all(&[("fresh".into(), b"v".to_vec(), 0, None)]);
    assert!(new[0] > *max, "{} <= {max}", new[0]);
    let (_, err) = d.stop_with(libc::SIGTERM);
    assert!(
        err.contains(&format!("warm restart: restored {N} items")),
        "{err}"
    );
    assert!(!file.exists(), "a plain stop writes nothing");
}

#[test]
fn shutdown_graceful_saves_too() {
    let dir = tempdir("warm");
    let file = dir.path().join("cache");
    let (mut d, port) = start(&file, &["-A"]);
    let mut c = Conn::open(port);
    let all = items(500);
    let cas = c.set_all(&all);
    let shown = c.stat("stats settings", "memory_file");
    assert_eq!(shown, file.to_str().unwrap());
    c.0.send(b"shutdown graceful\r\n");
    let rest = c.0.try_read(Until::Closed);
    assert!(
        rest.as_ref().is_ok_and(|r| r.is_empty()),
        "memcached closes without a reply: {rest:?}"
    );
    let (status, err) = d.wait_exit();
    assert!(
        status.success() && err.contains("warm restart: saved 500 items"),
        "{err}"
    );
    let (_d, port) = start(&file, &["-A"]);
    let mut c = Conn::open(port);
    let keys: Vec<&str> = all.iter().map(|(k, ..)| k.as_str()).collect();
    for ((_, value, ..), (g, cas)) in all.iter().zip(c.get_all(&keys).iter().zip(&cas)) {
        let (v, _, cs, _) = g.as_ref().unwrap();
        assert_eq!((v, cs), (value, cas));
    }
}

/// Healthy and empty: nothing left from before, and it stores and serves.
fn assert_empty_and_healthy(c: &mut Conn) {
    assert_eq!(c.curr_items(), 0);
    assert_eq!(c.get_all(&["warm:1"]), vec![None]);
    c.set_all(&[("after".into(), b"ok".to_vec(), 3, None)]);
    let got = c.get_all(&["after"]);
    assert_eq!(
        got[0].as_ref().map(|g| (&g.0[..], g.1)),
        Some((&b"ok"[..], 3))
    );
}

#[test]
fn sigkill_starts_empty_and_never_reuses_an_older_snapshot() {
    let dir = tempdir("warm");
    let file = dir.path().join("cache");
    let (mut d, port) = start(&file, &[]);
    Conn::open(port).set_all(&items(1000));
    graceful_stop(&mut d);
    let (mut d, port) = start(&file, &[]);
    let mut c = Conn::open(port);
    assert_eq!(c.curr_items(), 1000);
    c.set_all(&[("newer".into(), b"n".to_vec(), 0, None)]);
    let (status, _) = d.stop_with(libc::SIGKILL);
    assert!(!status.success());
    let (mut d, port) = start(&file, &[]);
    let mut c = Conn::open(port);
    assert_empty_and_healthy(&mut c);
    let (_, err) = d.stop_with(libc::SIGTERM);
    assert!(
        err.contains("does not exist") && err.contains("starting empty"),
        "{err}"
    );
}

#[test]
fn damaged_file_or_changed_flags_start_empty_with_the_reason() {
    let dir = tempdir("warm");
    let file = dir.path().join("cache");
    let (mut d, port) = start(&file, &["-m", "16"]);
    Conn::open(port).set_all(&items(2000));
    graceful_stop(&mut d);
    let good = std::fs::read(&file).unwrap();
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 1;
    let mut version = good.clone();
    version[8] = 9;
    let cases: [(&str, Vec<u8>, &[&str], &str); 6] = [
        (
            "truncated",
            good[..good.len() - 100].to_vec(),
            &["-m", "16"],
            "is corrupted: truncated",
        ),
        (
            "a flipped bit",
            flipped,
            &["-m", "16"],
            "is corrupted: shard",
        ),
        (
            "another version",
            version,
            &["-m", "16"],
            "format version 9",
        ),
        (
            "-m changed",
            good.clone(),
            &["-m", "32"],
            "was saved with -m 16 (now -m 32)",
        ),
        (
            "-I changed",
            good.clone(),
            &["-m", "16", "-I", "2m"],
            "was saved with -I 1048576",
        ),
        (
            "intact",
            good,
            &["-m", "16"],
            "warm restart: restored 2000 items",
        ),
    ];
    for (what, bytes, args, reason) in cases {
        std::fs::write(&file, &bytes).unwrap();
        let (mut d, port) = start(&file, args);
        let mut c = Conn::open(port);
        if what == "intact" {
            assert_eq!(c.curr_items(), 2000);
        } else {
            assert_empty_and_healthy(&mut c);
        }
        assert!(!file.exists(), "{what}: removed once opened");
        let (_, err) = d.stop_with(libc::SIGTERM);
        assert!(err.contains(reason), "{what}: {err}");
    }
}

/// `n` `set`s of `size`-byte values, noreply and pipelined, then `mn` to know they are in.
fn fill_quiet(port: u16, n: usize, size: usize) {
    let mut c = Conn::open(port);
    let value = vec![b'v'; size];
    let mut req = Vec::with_capacity(1 << 20);
    for i in 0..n {
        write!(req, "set fill:{i} {i} 0 {size} noreply\r\n").unwrap();
        req.extend_from_slice(&value);
        req.extend_from_slice(b"\r\n");
        if req.len() >= 1 << 20 || i + 1 == n {
            c.0.send(&req);
            req.clear();
        }
    }
    c.0.send(b"mn\r\n");
    assert_eq!(c.line(), "MN");
}

/// Starts memkitd on `file` and, as soon as the restore has it open (it unlinks the file
/// then), sends `signal`: the restore is under way, the sockets do not listen yet.
fn signal_during_restore(file: &Path, signal: libc::c_int) -> (std::process::ExitStatus, String) {
    let (mut d, _) = start(file, &["-m", "256", "-v"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while file.exists() {
        assert!(
            Instant::now() < deadline,
            "the restore never opened the file"
        );
        std::hint::spin_loop();
    }
    d.stop_with(signal)
}

#[test]
fn a_stop_during_the_restore_waits_for_it_and_loses_nothing() {
    // About 190 MiB of records: a restore that takes a moment.
    const N: usize = 400_000;
    let dir = tempdir("warm");
    let file = dir.path().join("cache");
    let (mut d, port) = start(&file, &["-m", "256"]);
    fill_quiet(port, N, 400);
    let items = Conn::open(port).curr_items();
    assert!(items > N as u64 * 9 / 10, "{items}");
    graceful_stop(&mut d);
    // SIGUSR1 while restoring: once the restore is done, a graceful stop that saves it all
    // again, without ever listening. Before the handler was installed first, the signal's
    // default action killed the process (and the cache: the file is unlinked once open).
    let (status, err) = signal_during_restore(&file, libc::SIGUSR1);
    assert!(status.success(), "{status}: {err}");
    assert!(
        err.contains(&format!("restored {items} items"))
            && err.contains("Gracefully stopping")
            && err.contains(&format!("saved {items} items")),
        "{err}"
    );
    assert!(
        !err.contains("listening on"),
        "stopped before listening: {err}"
    );
    let (mut d, port) = start(&file, &["-m", "256"]);
    let mut c = Conn::open(port);
    assert_eq!(c.curr_items(), items);
    assert_eq!(
        c.get_all(&[&format!("fill:{}", N - 1)])[0]
            .as_ref()
            .unwrap()
            .1,
        (N - 1) as u32
    );
    graceful_stop(&mut d);
    // SIGTERM while restoring: a plain stop, once the restore is done (exit 0, nothing saved).
    let (status, err) = signal_during_restore(&file, libc::SIGTERM);
    assert!(status.success(), "{status}: {err}");
    assert!(
        err.contains("signal received") && !err.contains("saved"),
        "{err}"
    );
    assert!(!file.exists());
}

/// A client that pipelines sets (each followed by a get of two 64 KiB values, so its
/// replies pile up in the server) and reads slowly, across SIGUSR1: the server stops
/// executing its requests before it saves the cache, so every `STORED` the client received
/// is in the restarted cache. (Saved while the connection still executed, 4 runs in 6 lost
/// the last 4-26 acknowledged sets.)
#[test]
fn every_store_acknowledged_before_a_graceful_stop_is_restored() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    let dir = tempdir("warm");
    let file = dir.path().join("cache");
    let (mut d, port) = start(&file, &["-m", "64", "-t", "1"]);
    // A cache whose save takes a while: the window a straggler would have.
    fill_quiet(port, 40_000, 1000);
    let mut c = Conn::open(port);
    let mid = vec![b'm'; 64 << 10];
    c.set_all(&[("mid".to_string(), mid, 0, None)]);
    let s = connect_small_window(port);
    // 100 pairs, 14 KB: the server reads them at once (so its socket holds no unread
    // input, which a close would answer with a reset), and 13 MB of replies follow.
    let mut req = Vec::new();
    for i in 0..100 {
        write!(
            req,
            "set s:{i} 0 0 100\r\n{}\r\nget mid mid\r\n",
            "v".repeat(100)
        )
        .unwrap();
    }
    (&s).write_all(&req).unwrap();
    let stored = Arc::new(AtomicU64::new(0));
    let seen = stored.clone();
    let reader = std::thread::spawn(move || {
        let mut r = s;
        r.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut buf = Vec::new();
        let mut chunk = vec![0u8; 4096];
        loop {
            // At most 4 MB/s: the server's replies wait in its buffers.
            std::thread::sleep(Duration::from_millis(1));
            let n = match r.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            buf.extend_from_slice(&chunk[..n]);
            let mut at = 0;
            loop {
                let rest = &buf[at..];
                if rest.starts_with(b"STORED\r\n") {
                    seen.fetch_add(1, Relaxed);
                    at += 8;
                } else if rest.starts_with(b"VALUE mid 0 65536\r\n") {
                    let whole = 2 * (19 + 65536 + 2) + 5;
                    if rest.len() < whole {
                        break;
                    }
                    assert!(rest[..whole].ends_with(b"\r\nEND\r\n"));
                    at += whole;
                } else if rest.starts_with(b"END\r\n") {
                    // Executed after the cache was saved and cleared: a miss.
                    at += 5;
                } else {
                    assert!(rest.len() < 19, "unexpected reply {:?}", &rest[..19]);
                    break;
                }
            }
            buf.drain(..at);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while stored.load(Relaxed) < 20 {
        assert!(Instant::now() < deadline, "no set was acknowledged");
        std::thread::sleep(Duration::from_millis(10));
    }
    let err = graceful_stop(&mut d);
    reader.join().unwrap();
    let acked = stored.load(Relaxed) as usize;
    assert!(err.contains("warm restart: saved"), "{err}");
    let (_d, port) = start(&file, &["-m", "64", "-t", "1"]);
    let mut c = Conn::open(port);
    let keys: Vec<String> = (0..acked).map(|i| format!("s:{i}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let lost: Vec<_> = keys
        .iter()
        .zip(c.get_all(&keys))
        .filter(|(_, g)| g.is_none())
        .map(|(k, _)| *k)
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {acked} acknowledged sets lost: {lost:?}",
        lost.len()
    );
}

/// A connection whose receive buffer holds 4 KiB, so that the server's replies wait in the
/// server rather than in the kernel's buffers while the client reads slowly.
fn connect_small_window(port: u16) -> TcpStream {
    use std::os::fd::FromRawFd;
    // SAFETY: socket(2), setsockopt(2) and connect(2) with pointers to live locals of the
    // sizes given; the descriptor is owned by the stream made from it.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let s = TcpStream::from_raw_fd(fd);
        let size: libc::c_int = 4096;
        let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        let r = libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&raw const size).cast(),
            len,
        );
        assert_eq!(r, 0);
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be(),
            },
            sin_zero: [0; 8],
        };
        let alen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let r = libc::connect(fd, (&raw const addr).cast(), alen);
        assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
        s
    }
}
