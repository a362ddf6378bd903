//! `--io`: what the worker threads wait with, and whether this kernel lets them use
//! io_uring.

use std::io;

/// How a worker loop waits for its connections (`--io`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Io {
    /// io_uring where the kernel has it (Linux 6.1 and later, not disabled), else epoll.
    #[default]
    Uring,
    /// epoll (mio), edge-triggered.
    Epoll,
}

impl Io {
    /// What a worker will use: `Uring` only where a ring can be set up.
    pub fn effective(self) -> Io {
        self.resolve().0
    }

    /// What a worker will use, and, where io_uring was asked for and this Linux kernel
    /// refused it (too old, `kernel.io_uring_disabled`, a seccomp filter), a warning that
    /// says so: the loops then work the same through epoll, and an operator who measures
    /// should know which one ran.
    pub fn resolve(self) -> (Io, Option<String>) {
        #[cfg(target_os = "linux")]
        if self == Io::Uring {
            return match probe() {
                Ok(()) => (Io::Uring, None),
                Err(e) => (
                    Io::Epoll,
                    Some(format!(
                        "io_uring is not available ({e}): the worker loops wait with epoll"
                    )),
                ),
            };
        }
        (Io::Epoll, None)
    }

    /// The name `stats settings` shows as `memkit_io`.
    pub fn name(self) -> &'static str {
        match self {
            Io::Uring => "io_uring",
            Io::Epoll => "epoll",
        }
    }
}

#[cfg(target_os = "linux")]
/// Whether this kernel sets up a ring as a worker's ring is set up (the buffer ring needs 5.19,
/// `DEFER_TASKRUN` 6.1), and if not, the kernel's refusal. The kernel is asked once per
/// process: the settings resolve `--io` and the workers resolve it again for embedders
/// that pass it unresolved.
fn probe() -> io::Result<()> {
    static ANSWER: std::sync::OnceLock<Result<(), (io::ErrorKind, String)>> =
        std::sync::OnceLock::new();
    ANSWER
        .get_or_init(|| ask_kernel().map_err(|e| (e.kind(), e.to_string())))
        .clone()
        .map_err(|(kind, msg)| io::Error::new(kind, msg))
}

/// Sets up and closes a ring like a worker's.
///
/// The ring is made and closed on a thread of its own. A ring's creator is registered with
/// it, and the kernel's clean-up after the close queues work to every registered thread
/// with `TWA_SIGNAL`: on the caller's thread that interrupts the next blocking system call
/// in progress. A socket read with a timeout (`SO_RCVTIMEO`) is not restarted then: it
/// fails with `EINTR`, so an embedder's timed read right after starting a server would
/// fail. A thread that exits unregisters itself, so nothing reaches the caller.
#[cfg(target_os = "linux")]
fn ask_kernel() -> io::Result<()> {
    let made = std::thread::Builder::new()
        .name("memkit-io-probe".into())
        .spawn(|| {
            io_uring::IoUring::<io_uring::squeue::Entry, io_uring::cqueue::Entry>::builder()
                .setup_single_issuer()
                .setup_defer_taskrun()
                .build(2)
                .map(drop)
        })?;
    made.join()
        .unwrap_or_else(|_| Err(io::Error::other("the io_uring probe panicked")))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The probe leaves the caller's thread alone: a blocking read with a timeout right
    /// after it waits out its timeout instead of failing with `EINTR` (with the ring made on
    /// the caller's thread, this test fails on a 6.18 kernel).
    #[test]
    fn a_probe_does_not_interrupt_the_callers_next_read() {
        use std::io::Read;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _peer = l.accept().unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_millis(5)))
            .unwrap();
        for _ in 0..40 {
            if ask_kernel().is_err() {
                return; // no io_uring here: nothing to interrupt with
            }
            let err = s.read(&mut [0u8; 8]).unwrap_err();
            assert_ne!(err.kind(), io::ErrorKind::Interrupted, "{err}");
        }
    }
}
