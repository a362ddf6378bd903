//! `--persist` durability as `docs/persistence.md` promises it, whatever the store was
//! created with.
//!
//! A store created with one `--durability` and reopened with another runs in the mode of
//! the command line: memkitd is killed with SIGKILL under writers in the reopened mode,
//! and every acknowledged write must be there afterwards (every mode promises that for
//! `kill -9`). fjall keeps the journal settings a keyspace was created with on every
//! reopen, so the store applies the mode itself (`docs/persistence.md`).
//!
//! Only 127.0.0.1; only our own children are killed.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[path = "support/daemon.rs"]
mod daemon;

use memkit_testkit::TestServer;

const WRITERS: usize = 3;
const KEYS: u64 = 32;
const MODES: [&str; 3] = ["sync", "periodic:1000", "none"];

struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Conn {
    fn connect(port: u16) -> std::io::Result<Conn> {
        let s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.set_nodelay(true)?;
        Ok(Conn {
            r: BufReader::new(s.try_clone()?),
            w: s,
        })
    }
    fn line(&mut self) -> std::io::Result<String> {
        let mut l = String::new();
        if self.r.read_line(&mut l)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        Ok(l.trim_end().to_string())
    }
    fn ask(&mut self, req: &str) -> std::io::Result<String> {
        self.w.write_all(req.as_bytes())?;
        self.line()
    }
    fn set(&mut self, key: &str, value: &str) -> std::io::Result<String> {
        self.ask(&format!("set {key} 0 0 {}\r\n{value}\r\n", value.len()))
    }
    /// The value of `key`, `None` on a miss.
    fn get(&mut self, key: &str) -> std::io::Result<Option<String>> {
        let head = self.ask(&format!("get {key}\r\n"))?;
        if head == "END" {
            return Ok(None);
        }
        assert!(head.starts_with("VALUE "), "{head}");
        let v = self.line()?;
        assert_eq!(self.line()?, "END");
        Ok(Some(v))
    }
}

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
            let dir = daemon::tempdir();
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
