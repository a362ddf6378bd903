//! Test servers: memkitd in-process on its own runtime (so a test can kill it), real
//! memcached as a child process killed by PID on drop. Loopback only, free ports, bounded
//! waits.

#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memkit_client::{ClientConfig, ServerSpec};

pub const MEMCACHED: &str = "/usr/bin/memcached";

/// A free loopback port (bound, read, released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether something accepts on `port`.
pub fn port_open(port: u16) -> bool {
    TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200)).is_ok()
}

fn wait_for(port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if port_open(port) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// memkitd on its own runtime; `kill` drops the runtime, closing every socket at once.
pub struct Memkitd {
    pub port: u16,
    rt: Option<tokio::runtime::Runtime>,
}

impl Memkitd {
    pub fn start() -> Memkitd {
        Self::start_on(0).expect("bind a free port")
    }

    /// On a given port (0: any); `None` if it cannot be bound.
    pub fn start_on(port: u16) -> Option<Memkitd> {
        Self::start_args(port, &[])
    }

    /// With memcached-style flags (`-Y FILE`, `-Z -o ssl_...`).
    pub fn start_with(args: &[&str]) -> Memkitd {
        Self::start_args(0, args).expect("bind a free port")
    }

    fn start_args(port: u16, args: &[&str]) -> Option<Memkitd> {
        let mut argv = vec!["memkitd"];
        argv.extend_from_slice(args);
        let (settings, _) = memkit_server::Settings::from_args(
            <memkit_server::Args as clap::Parser>::parse_from(argv),
        );
        let listener = TcpListener::bind(("127.0.0.1", port)).ok()?;
        let port = listener.local_addr().ok()?.port();
        listener.set_nonblocking(true).ok()?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .ok()?;
        rt.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            let shared = memkit_server::Shared::new(
                Arc::new(memkit_server::engine_for(&settings)),
                settings,
            );
            memkit_server::run(listener, shared, std::future::pending()).await;
        });
        Some(Memkitd { port, rt: Some(rt) })
    }

    pub fn spec(&self) -> ServerSpec {
        ServerSpec::new("127.0.0.1", self.port)
    }

    pub fn kill(&mut self) {
        if let Some(rt) = self.rt.take() {
            // Dropping a runtime blocks, which an async test may not do on its own thread.
            std::thread::spawn(move || rt.shutdown_timeout(Duration::from_secs(2)))
                .join()
                .expect("memkitd runtime shut down");
        }
    }
}

impl Drop for Memkitd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A real memcached child process, killed by PID on drop.
pub struct Memcached {
    pub port: u16,
    child: Option<Child>,
}

impl Memcached {
    /// On a free port; `None` (with a note) when memcached is not installed, a failure under CI.
    pub fn start() -> Option<Memcached> {
        Self::start_on(free_port())
    }

    pub fn start_on(port: u16) -> Option<Memcached> {
        Self::start_args(port, &[])
    }

    /// On a free port with extra flags (`-Y FILE`, `-Z -o ssl_...`).
    pub fn start_with(args: &[&str]) -> Option<Memcached> {
        Self::start_args(free_port(), args)
    }

    fn start_args(port: u16, args: &[&str]) -> Option<Memcached> {
        if !std::path::Path::new(MEMCACHED).exists() {
            memkit_testkit::interop::skip(MEMCACHED);
            return None;
        }
        let child = Command::new(MEMCACHED)
            .args([
                "-l",
                "127.0.0.1",
                "-U",
                "0",
                "-m",
                "64",
                "-u",
                "nobody",
                "-p",
            ])
            .arg(port.to_string())
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            // memcached is there (checked above): failing to start it is a failure, not a
            // reason to drop the memcached half of the test.
            .expect("start memcached");
        let m = Memcached {
            port,
            child: Some(child),
        };
        assert!(wait_for(port), "memcached did not start on {port}");
        Some(m)
    }

    pub fn spec(&self) -> ServerSpec {
        ServerSpec::new("127.0.0.1", self.port)
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        self.kill();
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
