//! `--persist` durability as `docs/persistence.md` promises it, whatever the store was
//! created with, and what a failed journal fsync does to the replies.
//!
//! - A store created with one `--durability` and reopened with another runs in the mode
//!   of the command line: memkitd is killed with SIGKILL under writers in the reopened
//!   mode, and every acknowledged write must be there afterwards (every mode promises that
//!   for `kill -9`). fjall keeps the journal settings a keyspace was created with on every
//!   reopen, so the store applies the mode itself (`docs/persistence.md`).
//! - After an injected fsync failure (the persist crate's fault hook, reached through the
//!   in-process server's `Shared`), every write answers its protocol's `SERVER_ERROR`,
//!   reads go on, and `stats` says `persist_failed 1`.
//!
//! Only 127.0.0.1; only our own children are killed.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[path = "support/daemon.rs"]
mod daemon;
#[path = "support/lines.rs"]
mod lines;

use lines::Lines;
use memkit_testkit::TestServer;
use memkit_testkit::wire::{BlockingWire, Until};

const WRITERS: usize = 3;
const KEYS: u64 = 32;
const MODES: [&str; 3] = ["sync", "periodic:1000", "none"];

/// A text-protocol connection, one request at a time.
type Conn = Lines;

/// What one writer had acknowledged (key -> value) and had in flight when memkitd died.
#[derive(Default)]
struct Acked {
    sets: HashMap<u64, String>,
    in_flight: Option<(u64, String)>,
    ops: u64,
}

/// Sets its own keys one request at a time until `stop` or until the server dies.
fn writer(port: u16, w: usize, round: usize, stop: Arc<AtomicBool>) -> Acked {
    let mut st = Acked::default();
    let Ok(mut c) = Conn::connect(port) else {
        return st;
    };
    while !stop.load(Ordering::Relaxed) {
        let k = st.ops % KEYS;
        let v = format!("r{round}-w{w}-{}", st.ops);
        st.in_flight = Some((k, v.clone()));
        match c.set(&format!("w{w}:k{k}"), &v) {
            Ok(r) => assert_eq!(r, "STORED"),
            Err(_) => return st, // the server died with this set in flight
        }
        st.sets.insert(k, v);
        st.in_flight = None;
        st.ops += 1;
    }
    st
}

/// memkitd over `dir` in `mode`, ready (recovered and listening).
fn start(dir: &Path, mode: &str) -> TestServer {
    let d = dir.to_str().unwrap();
    daemon::launch(&["-t", "2", "--persist", d, "--durability", mode]).start()
}

/// Writers in `mode` on `dir` for a while, then SIGKILL; then every acknowledged set must be
/// read back (the one in flight per writer may or may not have landed). Returns how many
/// sets were acknowledged.
fn kill_under_writers(
    dir: &Path,
    (created, mode): (&str, &str),
    round: usize,
    previous: &mut [Acked],
) -> u64 {
    let mut server = start(dir, mode);
    let port = server.port();
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..WRITERS)
        .map(|w| {
            let stop = stop.clone();
            std::thread::spawn(move || writer(port, w, round, stop))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(400));
    server.kill(); // SIGKILL, with the writers busy
    stop.store(true, Ordering::Relaxed);
    let acked: Vec<Acked> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let server = start(dir, mode);
    let mut c = Conn::connect(server.port()).unwrap();
    let mut lost = Vec::new();
    let mut total = 0;
    for (w, (now, before)) in acked.into_iter().zip(previous.iter_mut()).enumerate() {
        total += now.ops;
        for (k, v) in &now.sets {
            before.sets.insert(*k, v.clone());
        }
        for k in 0..KEYS {
            let got = c.get(&format!("w{w}:k{k}")).unwrap();
            let want = before.sets.get(&k);
            let landed_in_flight = now
                .in_flight
                .as_ref()
                .is_some_and(|(fk, fv)| *fk == k && got.as_ref() == Some(fv));
            if landed_in_flight {
                before.sets.insert(k, got.clone().unwrap());
            } else if got.as_ref() != want {
                lost.push(format!("w{w}:k{k}: got {got:?}, acknowledged {want:?}"));
            }
        }
    }
    assert!(
        lost.is_empty(),
        "created {created}, reopened {mode}, round {round}: {} acknowledged sets missing of \
         {total}, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(3)]
    );
    total
}

#[test]
fn a_store_reopened_in_another_mode_loses_no_acknowledged_write_on_sigkill() {
    for created in MODES {
        for reopened in MODES.iter().filter(|m| **m != created) {
            let scratch = memkit_testkit::tempdir("persist-modes");
            let dir = scratch.path().to_path_buf();
            {
                // Create the store in `created` mode, with something in it.
                let server = start(&dir, created);
                let mut c = Conn::connect(server.port()).unwrap();
                assert_eq!(c.set("created", created).unwrap(), "STORED");
            }
            let mut acked: Vec<Acked> = (0..WRITERS).map(|_| Acked::default()).collect();
            for round in 0..2 {
                let n = kill_under_writers(&dir, (created, reopened), round, &mut acked);
                assert!(n > 0, "{created} -> {reopened}: the writers wrote nothing");
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// The line every write is answered with after the store failed.
const REFUSED: &str = "SERVER_ERROR persistent store failed, writes refused until restart";

fn fail_fsyncs(server: &TestServer) {
    let store = server.shared().persist.clone().expect("a persistent store");
    store.set_sync_fault(Some(Arc::new(|| {
        Err(std::io::Error::other("injected fsync failure"))
    })));
}

/// `STAT name value` from `stats`.
fn stat(c: &mut Conn, name: &str) -> String {
    c.0.send(b"stats\r\n");
    let mut found = None;
    loop {
        let l = c.line().unwrap();
        if l == "END" {
            return found.unwrap_or_else(|| panic!("no STAT {name}"));
        }
        if let Some(v) = l.strip_prefix(&format!("STAT {name} ")) {
            found = Some(v.to_string());
        }
    }
}

/// Waits until `stats` says the store failed (a bound only so that a hang fails the test).
fn await_failed(c: &mut Conn) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while stat(c, "persist_failed") != "1" {
        assert!(
            std::time::Instant::now() < deadline,
            "persist_failed stays 0"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A binary-protocol `SET` on a connection of its own (its first byte, 0x80, picks the
/// protocol): (status, body), or `None` if the connection was closed without a reply.
fn binary_set(port: u16, key: &str, value: &str) -> Option<(u16, String)> {
    use memkit_protocol::binary::{decode_response, encode_request, op};
    let mut w = BlockingWire::tcp(("127.0.0.1", port)).unwrap();
    let mut frame = Vec::new();
    encode_request(
        &mut frame,
        op::SET,
        9,
        0,
        &[0; 8],
        key.as_bytes(),
        value.as_bytes(),
    );
    w.send(&frame);
    let reply = match w.try_read(Until::Frame) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return None,
        Err(e) => panic!("binary SET: {e}"),
    };
    let (r, _) = decode_response(&reply).unwrap().unwrap();
    assert_eq!(r.header.opaque, 9);
    Some((
        r.header.status,
        String::from_utf8_lossy(r.value).into_owned(),
    ))
}

/// The binary protocol's form of [`REFUSED`]: memcached's `ENOMEM` status with the message.
fn binary_refused() -> Option<(u16, String)> {
    let enomem = memkit_protocol::binary::Status::OutOfMemory as u16;
    Some((enomem, REFUSED.to_string()))
}

#[test]
fn after_a_failed_fsync_every_write_answers_server_error_in_each_protocol_and_reads_go_on() {
    let scratch = memkit_testkit::tempdir("persist-fault");
    let dir = scratch.path().to_path_buf();
    let d = dir.to_str().unwrap();
    let server = TestServer::start(&["--persist", d, "--durability", "periodic:20"]);
    let port = server.port();
    let mut c = Conn::connect(port).unwrap();
    assert_eq!(c.set("old", "kept").unwrap(), "STORED");
    assert_eq!(c.ask("set n 0 0 1\r\n5\r\n").unwrap(), "STORED");
    fail_fsyncs(&server);
    // Acknowledged at once (periodic); the next periodic fsync fails.
    assert_eq!(c.set("pending", "x").unwrap(), "STORED");
    await_failed(&mut c);
    // Text, meta and binary writes: each protocol's SERVER_ERROR, nothing applied.
    assert_eq!(c.set("old", "new").unwrap(), REFUSED);
    assert_eq!(c.ask("ms old 3 T0\r\nnew\r\n").unwrap(), REFUSED);
    assert_eq!(c.ask("ms fresh 1\r\nx\r\n").unwrap(), REFUSED);
    assert_eq!(c.ask("incr n 1\r\n").unwrap(), REFUSED);
    assert_eq!(c.ask("ma n\r\n").unwrap(), REFUSED);
    assert_eq!(c.ask("delete old\r\n").unwrap(), REFUSED);
    assert_eq!(c.ask("md old\r\n").unwrap(), REFUSED);
    assert_eq!(c.ask("touch old 100\r\n").unwrap(), REFUSED);
    assert_eq!(c.ask("flush_all\r\n").unwrap(), REFUSED);
    assert_eq!(binary_set(port, "old", "new"), binary_refused());
    // Reads go on, and see what was stored before.
    assert_eq!(c.get("old").unwrap().as_deref(), Some("kept"));
    assert_eq!(c.get("n").unwrap().as_deref(), Some("5"));
    assert_eq!(c.get("fresh").unwrap(), None);
    assert_eq!(c.ask("mg old v\r\n").unwrap(), "VA 4");
    assert_eq!(c.line().unwrap(), "kept");
    assert_eq!(stat(&mut c, "persist_failed"), "1");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// In `sync` mode a write's reply waits for the fsync that covers it: the writes whose
/// fsync failed are never acknowledged (their connections are closed with the replies
/// unsent), and every write after it is refused before it is applied and answered its
/// protocol's `SERVER_ERROR` at once: a refused write takes no ticket, so its reply does not
/// wait for the failed fsync.
#[test]
fn after_a_failed_fsync_in_sync_mode_no_write_is_acknowledged_or_applied() {
    let scratch = memkit_testkit::tempdir("persist-fault");
    let dir = scratch.path().to_path_buf();
    let d = dir.to_str().unwrap();
    let server = TestServer::start(&["--persist", d, "--durability", "sync"]);
    let port = server.port();
    let mut c = Conn::connect(port).unwrap();
    assert_eq!(c.set("old", "kept").unwrap(), "STORED");
    fail_fsyncs(&server);
    let mut doomed = Conn::connect(port).unwrap();
    assert!(doomed.set("doomed", "x").is_err(), "closed without a reply");
    await_failed(&mut c);
    for req in [
        "set old 0 0 3\r\nnew\r\n",
        "ms old 3\r\nnew\r\n",
        "delete old\r\n",
    ] {
        let mut w = Conn::connect(port).unwrap();
        assert_eq!(w.ask(req).unwrap(), REFUSED, "{req:?}");
    }
    assert_eq!(binary_set(port, "old", "new"), binary_refused());
    assert_eq!(c.get("old").unwrap().as_deref(), Some("kept"));
    assert_eq!(stat(&mut c, "persist_failed"), "1");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
