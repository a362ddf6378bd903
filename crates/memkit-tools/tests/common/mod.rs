//! Shared by the `memkit` binary's tests: memkitd as a process (the harness's
//! `TestServer::process`, which finds or builds the `memkitd` of this checkout) from
//! memcached-style flags (`-Y FILE`, `-Z -o ssl_...`) on a free loopback port, and running
//! the binary with a bounded wait.
//!
//! A process rather than the server in-process: memkit-tools does not depend on
//! memkit-server, not even for its tests, so that `cargo tree -p memkit-tools` shows a
//! client tool's dependencies only.

#![allow(dead_code, unused_imports)]

use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use memkit_testkit::TestServer;
pub use memkit_testkit::server::memkitd_bin;

/// memkitd as a child process on 127.0.0.1, killed when dropped.
#[derive(Debug)]
pub struct Memkitd {
    pub port: u16,
    server: TestServer,
}

impl Memkitd {
    /// memkitd started with `args` (memcached's flags, as `memkitd` takes them), returned
    /// once it has told `NOTIFY_SOCKET` it is ready (so it accepts and answers).
    pub fn start(args: &[&str]) -> Memkitd {
        let server = TestServer::process(args);
        Memkitd {
            port: server.port(),
            server,
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

/// A loopback port nothing listens on.
pub fn dead_addr() -> String {
    format!("127.0.0.1:{}", memkit_testkit::server::free_port())
}

/// Runs `memkit --servers SERVERS --timeout-ms 3000 ARGS...` with `stdin`, killed after 30 s.
pub fn memkit(servers: &str, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_memkit"))
        .args(["--servers", servers, "--timeout-ms", "3000"])
        .args(args)
        .env_remove("MEMCACHED_SERVERS")
        .env_remove("MEMKIT_USERNAME")
        .env_remove("MEMKIT_PASSWORD")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(data) = stdin {
        input.write_all(data).unwrap();
    }
    drop(input);
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let e = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("memkit {args:?} did not finish within 30 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: o.join().unwrap(),
        stderr: e.join().unwrap(),
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
