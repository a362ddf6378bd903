//! Shared by the `memkit` binary's tests: memkitd in-process from memcached-style flags
//! (`-Y FILE`, `-Z -o ssl_...`) on a free loopback port, and running the binary with a
//! bounded wait.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// memkitd on its own runtime, stopped when dropped.
pub struct Memkitd {
    pub port: u16,
    rt: Option<tokio::runtime::Runtime>,
}

impl Memkitd {
    /// memkitd started with `args` (memcached's flags, as `memkitd` takes them).
    pub fn start(args: &[&str]) -> Memkitd {
        let mut argv = vec!["memkitd"];
        argv.extend_from_slice(args);
        let (settings, _) = memkit_server::Settings::from_args(
            <memkit_server::Args as clap::Parser>::parse_from(argv),
        );
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let shared = memkit_server::Shared::new(
                Arc::new(memkit_server::engine_for(&settings)),
                settings,
            );
            memkit_server::run(listener, shared, std::future::pending()).await;
        });
        Memkitd { port, rt: Some(rt) }
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Memkitd {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(2));
        }
    }
}

/// A loopback port nothing listens on.
pub fn dead_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("127.0.0.1:{}", l.local_addr().unwrap().port())
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
