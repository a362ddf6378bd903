//! The memkitd binary as a child process, for the tests of what only a real process shows
//! (start-up, users, sockets, signals): the harness's [`TestServer`] with this build's
//! binary, its standard error kept, killed when dropped.
#![allow(dead_code, unused_imports)]

use std::time::{Duration, Instant};

use memkit_testkit::TestServer;
use memkit_testkit::server::Launch;
pub use memkit_testkit::server::free_port;
use memkit_testkit::wire::{BlockingWire, Until};
use tokio::io::{AsyncRead, AsyncWrite};

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

/// Waits until `connect` succeeds and answers `version` (5 s at most). A connection that
/// fails before the answer is tried again: the kernel may take a connection for a listening
/// socket before the process that holds it is ready, or lets go of it.
pub fn wait_ready<S: AsyncRead + AsyncWrite + Unpin>(
    mut connect: impl FnMut() -> std::io::Result<BlockingWire<S>>,
) -> BlockingWire<S> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = String::new();
    loop {
        if let Ok(mut w) = connect() {
            match w.try_ask(b"version\r\n", Until::LINE) {
                Ok(version) => {
                    assert!(version.starts_with("VERSION "), "{version:?}");
                    return w;
                }
                Err(e) => last = format!(" (version: {e})"),
            }
        }
        assert!(Instant::now() < deadline, "memkitd did not start{last}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
