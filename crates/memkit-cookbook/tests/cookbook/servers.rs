//! Test servers: memkitd in-process on its own runtime (so a test can kill it) and real
//! memcached as a child process killed by PID. Loopback only, free ports, bounded waits.

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const MEMCACHED: &str = "/usr/bin/memcached";

fn wait_for(port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// memkitd on its own runtime; `kill` drops the runtime, closing every socket at once.
#[derive(Debug)]
pub struct Memkitd {
    pub addr: String,
    rt: Option<tokio::runtime::Runtime>,
}

impl Memkitd {
    pub fn start() -> Memkitd {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        listener.set_nonblocking(true).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let settings = memkit_server::Settings::default();
            let engine = Arc::new(memkit_server::engine_for(&settings));
            let shared = memkit_server::Shared::new(engine, settings);
            memkit_server::run(listener, shared, std::future::pending()).await;
        });
        Memkitd { addr, rt: Some(rt) }
    }

    pub fn kill(&mut self) {
        if let Some(rt) = self.rt.take() {
            // Dropping a runtime blocks; do it off any async context.
            std::thread::spawn(move || rt.shutdown_timeout(Duration::from_secs(2)))
                .join()
                .unwrap();
        }
    }
}

impl Drop for Memkitd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Real memcached, killed by PID on drop. `None` when it is not installed.
#[derive(Debug)]
pub struct Memcached {
    pub addr: String,
    child: Child,
}

impl Memcached {
    pub fn start() -> Option<Memcached> {
        if !std::path::Path::new(MEMCACHED).exists() {
            memkit_testkit::interop::skip(MEMCACHED);
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut args = vec!["-l", "127.0.0.1", "-U", "0", "-m", "64"];
        let port_s = port.to_string();
        args.extend(["-p", &port_s]);
        // memcached refuses to run as root without -u.
        args.extend(["-u", "root"]);
        let child = Command::new(MEMCACHED)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let m = Memcached {
            addr: format!("127.0.0.1:{port}"),
            child,
        };
        assert!(wait_for(port), "memcached did not start on port {port}");
        Some(m)
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
