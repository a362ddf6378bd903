//! nutcracker (twemproxy) for the router bench: its configuration, the process (started on
//! loopback, killed by its PID when dropped), its version; and the scratch directory both
//! proxies' files live in.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::procs;

/// nutcracker's configuration: one pool listening on `listen` over `backends` (weight 1
/// each), ketama over md5, no ejection, a 1 s timeout (memkitd's default batch deadline).
pub fn nutcracker_yaml(listen: SocketAddr, backends: &[SocketAddr]) -> String {
    let mut y = format!(
        "main:\n  listen: {listen}\n  hash: md5\n  distribution: ketama\n  \
         auto_eject_hosts: false\n  timeout: 1000\n  servers:\n"
    );
    for b in backends {
        y.push_str(&format!("   - {b}:1\n"));
    }
    y
}

/// A scratch directory for the configuration files, removed when dropped.
pub(super) struct Scratch(pub(super) PathBuf);

impl Scratch {
    pub(super) fn new() -> io::Result<Scratch> {
        let dir = std::env::temp_dir().join(format!("memkit-router-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether `addr` answers a text `get` of a key nobody sets with `END`.
pub(super) fn answers_get(addr: SocketAddr) -> bool {
    let probe = || -> io::Result<bool> {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        s.write_all(b"get memkit-bench-router-probe\r\n")?;
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line)?;
        Ok(line == "END\r\n")
    };
    probe().unwrap_or(false)
}

/// A running nutcracker, killed when dropped.
#[derive(Debug)]
pub struct Nutcracker {
    /// Where it listens.
    pub addr: SocketAddr,
    child: Child,
    log: PathBuf,
}

impl Nutcracker {
    /// Writes the configuration into `dir`, starts `bin` on free loopback ports (the pool's
    /// and the stats port) and waits until it answers a `get`.
    pub fn start(bin: &Path, dir: &Path, backends: &[SocketAddr]) -> io::Result<Nutcracker> {
        let mut last_err = None;
        for attempt in 0..5 {
            let addr = SocketAddr::from(([127, 0, 0, 1], procs::free_port()?));
            let conf = dir.join(format!("nutcracker-{attempt}.yml"));
            std::fs::write(&conf, nutcracker_yaml(addr, backends))?;
            let log = dir.join(format!("nutcracker-{attempt}.log"));
            let stats = procs::free_port()?.to_string();
            let child = Command::new(bin)
                .arg("-c")
                .arg(&conf)
                .args(["-s", &stats, "-a", "127.0.0.1", "-v", "4"])
                .arg("-o")
                .arg(&log)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| {
                    io::Error::new(e.kind(), format!("cannot start {}: {e}", bin.display()))
                })?;
            let mut n = Nutcracker { addr, child, log };
            match n.wait_ready(Duration::from_secs(10)) {
                Ok(()) => return Ok(n),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("nutcracker did not start")))
    }

    fn wait_ready(&mut self, limit: Duration) -> io::Result<()> {
        let until = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait()? {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                return Err(io::Error::other(format!(
                    "nutcracker exited at start-up: {status}; its log ends: {}",
                    tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
                )));
            }
            if answers_get(self.addr) {
                return Ok(());
            }
            if Instant::now() > until {
                return Err(io::Error::other(format!(
                    "nutcracker did not answer on {}",
                    self.addr
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Nutcracker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `nutcracker -V`'s version, e.g. `0.5.0`.
pub(super) fn nutcracker_version(bin: &Path) -> String {
    Command::new(bin)
        .arg("-V")
        .output()
        .ok()
        .map(|o| {
            let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
            s.push_str(&String::from_utf8_lossy(&o.stderr));
            s
        })
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("This is nutcracker-").map(str::to_string))
        })
        .unwrap_or_default()
}
