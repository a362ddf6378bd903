//! [`TestServer`]: memkitd for a test, in this process or as a child process, shut down when
//! dropped, with the address it serves on.
//!
//! - In-process (feature `server`), `TestServer::start`: memcached-style flags parsed as
//!   memkitd parses them, the store memkitd would open (`--persist` included), served as
//!   memkitd serves it (an acceptor runtime on a thread of its own, `-t` worker threads) on
//!   127.0.0.1 (a free port, or `TestServer::start_on`'s) and, with `-s`, on that UNIX
//!   socket too. Its `memkit_server::server::Shared` state is there to inspect. Dropping
//!   it or [`TestServer::kill`] stops it and closes every connection, so a test can take a
//!   server away under a client and start another on the same port.
//! - A child process, [`TestServer::process`] or [`TestServer::launch`] for more control:
//!   for what only a process shows (start-up, users, signals, RSS, crashes) and for crates
//!   that must not link the server (memkit-tools). See [`process`] for how the binary is
//!   found.
//!
//! [`group::Group`]: a replicated group of such children (`--raft-*`), cut off from each
//! other through relays at the test's word. [`router::Router`]: a router child
//! (`--route`), its file written by the test and reloaded at its word.
//!
//! The helpers both modes and [`crate::memcached`] use are here: [`free_port`],
//! [`wait_for_tcp`].

pub mod group;
#[cfg(feature = "server")]
mod inproc;
pub mod process;
pub mod router;

use std::fmt;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::wire::Wire;

pub use group::{Group, GroupOptions};
pub use process::{Launch, memkitd_bin};

/// Where a test server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl fmt::Display for Addr {
    /// `127.0.0.1:PORT`, or the socket's path.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Addr::Tcp(a) => write!(f, "{a}"),
            Addr::Unix(p) => write!(f, "{}", p.display()),
        }
    }
}

/// memkitd for one test; see the module notes.
#[derive(Debug)]
pub struct TestServer {
    addr: Addr,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    #[cfg(feature = "server")]
    InProcess(inproc::InProcess),
    Process(process::Running),
}

impl TestServer {
    /// Where it listens: TCP on 127.0.0.1, or the UNIX socket of a child started with `-s`.
    pub fn addr(&self) -> &Addr {
        &self.addr
    }

    /// The TCP address. Panics for a child listening only on a UNIX socket.
    pub fn tcp_addr(&self) -> SocketAddr {
        match &self.addr {
            Addr::Tcp(a) => *a,
            Addr::Unix(p) => panic!("listening on {} only", p.display()),
        }
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.tcp_addr().port()
    }

    /// A raw connection to the TCP address. Panics if it cannot connect.
    pub async fn wire(&self) -> Wire<tokio::net::TcpStream> {
        let addr = self.tcp_addr();
        Wire::tcp(addr)
            .await
            .unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
    }

    /// The UNIX socket (`-s`), if any; an in-process server serves TCP beside it.
    pub fn unix_path(&self) -> Option<&Path> {
        match (&self.addr, &self.kind) {
            (Addr::Unix(p), _) => Some(p),
            #[cfg(feature = "server")]
            (Addr::Tcp(_), Kind::InProcess(s)) => s.unix.as_deref(),
            _ => None,
        }
    }

    /// Stops it now: in-process, a graceful stop that closes every connection (bounded by
    /// memkitd's 2 s drain); a child is killed (SIGKILL). Dropping it does the same.
    pub fn kill(&mut self) {
        match &mut self.kind {
            #[cfg(feature = "server")]
            Kind::InProcess(s) => s.stop_blocking(),
            Kind::Process(p) => p.kill(),
        }
    }

    /// The child's process. Panics for an in-process server.
    pub fn child(&mut self) -> &mut process::Running {
        match &mut self.kind {
            Kind::Process(p) => p,
            #[cfg(feature = "server")]
            Kind::InProcess(_) => panic!("an in-process server has no process of its own"),
        }
    }

    /// The child's process id. Panics for an in-process server.
    pub fn pid(&self) -> u32 {
        match &self.kind {
            Kind::Process(p) => p.pid(),
            #[cfg(feature = "server")]
            Kind::InProcess(_) => panic!("an in-process server has no process of its own"),
        }
    }

    /// Sends `signal` to the child and waits (30 s at most) for it to exit: its status and
    /// everything it wrote to standard error.
    pub fn stop_with(&mut self, signal: i32) -> (std::process::ExitStatus, String) {
        self.child().stop_with(signal)
    }

    /// Waits (30 s at most) for the child to exit by itself: its status and standard error.
    pub fn wait_exit(&mut self) -> (std::process::ExitStatus, String) {
        self.child().wait_exit()
    }
}

/// A free loopback port (bound, then released: another process can still take it, so the
/// launchers retry with another when a bind fails). It is taken below the kernel's
/// ephemeral range: a port from that range can meanwhile become the source port of any
/// outgoing connection, and a group's nodes are told each other's ports before they start,
/// so a node whose port went that way could not move. Calls in one process walk the range
/// from a random start, so they hand out no port twice before the range is walked through.
pub fn free_port() -> u16 {
    static BASE: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    const LOW: u32 = 20000;
    let high = ephemeral_low().unwrap_or(32768);
    if high > LOW + 1000 {
        let span = high - LOW;
        let base = *BASE.get_or_init(rand::random::<u32>);
        for _ in 0..span {
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let port = (LOW + base.wrapping_add(n) % span) as u16;
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// The first port of the kernel's ephemeral range (`ip_local_port_range`), if it says.
fn ephemeral_low() -> Option<u32> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

/// Waits until 127.0.0.1:`port` accepts a connection, for `within` at most and while
/// `alive()` holds; whether it did.
pub fn wait_for_tcp(port: u16, within: Duration, mut alive: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline && alive() {
        let to = ([127, 0, 0, 1], port).into();
        if TcpStream::connect_timeout(&to, Duration::from_millis(200)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Whether this process runs as root, where memcached and memkitd want `-u`.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
