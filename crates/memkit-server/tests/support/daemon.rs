//! The memkitd binary as a child process, for the tests of what only a real process shows
//! (start-up, users, sockets, signals): spawned with its stderr kept, killed when dropped.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A fresh directory of this test thread's own.
pub fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "memkit-test-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The memkitd binary with `args`; killed when dropped.
pub struct Daemon(pub Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Daemon {
    /// Sends `signal` and waits (30 s at most) for the process to exit; its status and
    /// everything it wrote to stderr.
    pub fn stop_with(&mut self, signal: libc::c_int) -> (ExitStatus, String) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.0.id() as libc::pid_t, signal) };
        self.wait_exit()
    }

    /// Waits (30 s at most) for the process to exit; its status and its stderr.
    pub fn wait_exit(&mut self) -> (ExitStatus, String) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = self.0.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "memkitd did not exit");
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut err = String::new();
        if let Some(mut e) = self.0.stderr.take() {
            e.read_to_string(&mut err).unwrap();
        }
        (status, err)
    }
}

pub fn spawn(args: &[&str]) -> Daemon {
    let child = Command::new(env!("CARGO_BIN_EXE_memkitd"))
        .args(args)
        // Its log is memkitd's default (the tests read lines from it), whatever the caller's.
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn memkitd");
    Daemon(child)
}

/// Waits until `connect` succeeds (5 s at most) and answers `version`.
pub fn wait_ready<S: Read + Write>(mut connect: impl FnMut() -> std::io::Result<S>) -> S {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(mut s) = connect() {
            s.write_all(b"version\r\n").unwrap();
            let mut buf = [0u8; 64];
            let n = s.read(&mut buf).unwrap();
            assert!(buf[..n].starts_with(b"VERSION "));
            return s;
        }
        assert!(Instant::now() < deadline, "memkitd did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
