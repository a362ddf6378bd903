//! Shared by the `memkit` binary's tests: memkitd as a process (the `memkitd` binary next
//! to `memkit`) from memcached-style flags (`-Y FILE`, `-Z -o ssl_...`) on a free loopback
//! port, and running the binary with a bounded wait.
//!
//! A process rather than the server in-process: memkit-tools does not depend on
//! memkit-server, not even for its tests, so that `cargo tree -p memkit-tools` shows a
//! client tool's dependencies only.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The memkitd binary of this build (same target directory and profile as `memkit`),
/// brought up to date once per test binary: `cargo test --workspace` has built it already
/// (memkit-server's own tests need it) and this is a no-op; `cargo test -p memkit-tools`
/// builds it here.
pub fn memkitd_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let dir = Path::new(env!("CARGO_BIN_EXE_memkit")).parent().unwrap();
        let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        cmd.args(["build", "-q", "-p", "memkit-server", "--bin", "memkitd"]);
        // The profile the test binary was built with: its directory's name (dev is "debug").
        match dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => {}
            Some(profile) => {
                cmd.args(["--profile", profile]);
            }
        }
        let st = cmd
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo to build memkitd");
        assert!(
            st.success(),
            "cargo build -p memkit-server --bin memkitd failed"
        );
        let bin = dir.join("memkitd");
        assert!(bin.exists(), "no memkitd at {}", bin.display());
        bin
    })
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// memkitd as a child process on 127.0.0.1, killed when dropped.
pub struct Memkitd {
    pub port: u16,
    child: Child,
}

impl Memkitd {
    /// memkitd started with `args` (memcached's flags, as `memkitd` takes them), returned
    /// once it has told `NOTIFY_SOCKET` it is ready (so it accepts and answers).
    pub fn start(args: &[&str]) -> Memkitd {
        // Another process can take the free port before memkitd binds it: then try another.
        for _ in 0..5 {
            if let Some(m) = Memkitd::try_start(args) {
                return m;
            }
        }
        panic!("memkitd {args:?} did not start");
    }

    fn try_start(args: &[&str]) -> Option<Memkitd> {
        let port = free_port();
        let sock_path = std::env::temp_dir().join(format!(
            "memkit-tools-notify-{}-{port}.sock",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&sock_path);
        let notify = UnixDatagram::bind(&sock_path).unwrap();
        notify
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let mut cmd = Command::new(memkitd_bin());
        cmd.args(["-p", &port.to_string(), "-l", "127.0.0.1"]);
        // SAFETY: geteuid cannot fail. As root, memkitd (as memcached) wants -u.
        if unsafe { libc::geteuid() } == 0 {
            cmd.args(["-u", "root"]);
        }
        let child = cmd
            .args(args)
            .env("NOTIFY_SOCKET", &sock_path)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn memkitd");
        let mut m = Memkitd { port, child };
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut buf = [0u8; 256];
        let ready = loop {
            if let Ok(n) = notify.recv(&mut buf) {
                break String::from_utf8_lossy(&buf[..n]).contains("READY=1");
            }
            if m.child.try_wait().unwrap().is_some() || Instant::now() > deadline {
                break false;
            }
        };
        let _ = std::fs::remove_file(&sock_path);
        ready.then_some(m)
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Memkitd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
