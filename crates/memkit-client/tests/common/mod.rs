//! Test servers, the harness's (`memkit_testkit`): memkitd in-process (so a test can kill
//! it) and real memcached as a child process killed by PID on drop, each with the
//! `ServerSpec` the client takes. Loopback only, free ports, bounded waits.

#![allow(dead_code, unused_imports)]

use std::net::TcpStream;
use std::time::Duration;

use memkit_client::{ClientConfig, ServerSpec};
use memkit_testkit::{TestServer, memcached};

pub use memkit_testkit::server::free_port;

/// Where Debian installs memcached (the harness finds it on `PATH`).
pub const MEMCACHED: &str = "/usr/bin/memcached";

/// Whether something accepts on `port`.
pub fn port_open(port: u16) -> bool {
    TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200)).is_ok()
}

/// memkitd in-process; `kill` (or a drop) stops it and closes every socket at once.
#[derive(Debug)]
pub struct Memkitd {
    pub port: u16,
    server: TestServer,
}

impl Memkitd {
    pub fn start() -> Memkitd {
        Self::start_with(&[])
    }

    /// On a given port (0: any), the bind retried while the port is still held.
    pub fn start_on(port: u16) -> Option<Memkitd> {
        Some(Self::from(TestServer::start_on(port, &[])))
    }

    /// With memcached-style flags (`-Y FILE`, `-Z -o ssl_...`).
    pub fn start_with(args: &[&str]) -> Memkitd {
        Self::from(TestServer::start(args))
    }

    fn from(server: TestServer) -> Memkitd {
        Memkitd {
            port: server.port(),
            server,
        }
    }

    pub fn spec(&self) -> ServerSpec {
        ServerSpec::new("127.0.0.1", self.port)
    }

    pub fn kill(&mut self) {
        self.server.kill();
    }
}

/// Real memcached, killed by PID on drop.
#[derive(Debug)]
pub struct Memcached {
    pub port: u16,
    server: memcached::Memcached,
}

impl Memcached {
    /// On a free port; `None` (with a note) when memcached is not installed, a failure
    /// under CI.
    pub fn start() -> Option<Memcached> {
        Self::start_with(&[])
    }

    pub fn start_on(port: u16) -> Option<Memcached> {
        memcached::spawn_on(port, &[]).map(Self::from)
    }

    /// On a free port with extra flags (`-Y FILE`, `-Z -o ssl_...`).
    pub fn start_with(args: &[&str]) -> Option<Memcached> {
        memcached::spawn(args).map(Self::from)
    }

    fn from(server: memcached::Memcached) -> Memcached {
        Memcached {
            port: server.port,
            server,
        }
    }

    pub fn spec(&self) -> ServerSpec {
        ServerSpec::new("127.0.0.1", self.port)
    }

    pub fn kill(&mut self) {
        self.server.kill();
    }
}

/// Generous timeouts: the machine is shared.
pub fn config() -> ClientConfig {
    ClientConfig {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(5),
        ..ClientConfig::default()
    }
}

/// A server that accepts connections and never answers: its port, and the task holding them.
pub async fn black_hole() -> (u16, tokio::task::JoinHandle<()>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = l.accept().await {
            held.push(s);
        }
    });
    (port, task)
}
