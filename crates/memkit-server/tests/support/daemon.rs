//! The memkitd binary as a child process, for the tests of what only a real process shows
//! (start-up, users, sockets, signals): the harness's [`TestServer`] with this build's
//! binary, its standard error kept, killed when dropped.
#![allow(dead_code, unused_imports)]

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use memkit_testkit::TestServer;
use memkit_testkit::server::Launch;
pub use memkit_testkit::server::free_port;

/// A memkitd child (the harness's), killed when dropped.
pub type Daemon = TestServer;

/// This build's memkitd with `args`, for the harness to start.
pub fn launch(args: &[&str]) -> Launch {
    TestServer::launch(args).bin(env!("CARGO_BIN_EXE_memkitd"))
}

/// This build's memkitd with `args`, started and not waited for (the caller watches its
/// start-up: [`wait_ready`], its exit status, its standard error).
pub fn spawn(args: &[&str]) -> Daemon {
    launch(args).no_wait().start()
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
