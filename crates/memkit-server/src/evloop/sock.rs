//! The worker loop's system calls: its sockets, their reads and sends, and the eventfd that
//! wakes it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use bytes::{BufMut, BytesMut};
use mio::net::{TcpStream, UnixStream};
use mio::{Interest, Poll, Token};

use crate::session::Session;

/// Wakes a worker loop from another thread: an eventfd, which both backends poll.
#[derive(Debug)]
pub(super) struct Waker(pub(super) OwnedFd);

impl Waker {
    pub(super) fn new() -> io::Result<Waker> {
        // SAFETY: eventfd(2) takes no pointers.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor just opened, owned by nothing else.
        Ok(Waker(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub(super) fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live array. A full counter (EAGAIN) is still a
        // pending wake-up.
        let _ = unsafe { libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    /// Resets the counter, so that the next wake is a new edge for epoll and a new event
    /// for the ring's poll.
    pub(super) fn clear(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live array.
        let _ = unsafe { libc::read(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
    }
}

/// A plain TCP or UNIX socket.
#[derive(Debug)]
pub(super) enum Sock {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Sock {
    pub(super) fn register(
        &mut self,
        poll: &Poll,
        token: Token,
        interest: Interest,
    ) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => poll.registry().register(s, token, interest),
            Sock::Unix(s) => poll.registry().register(s, token, interest),
        }
    }

    pub(super) fn deregister(&mut self, poll: &Poll) {
        let _ = match self {
            Sock::Tcp(s) => poll.registry().deregister(s),
            Sock::Unix(s) => poll.registry().deregister(s),
        };
    }

    /// Shuts both directions: whatever the kernel does with the socket ends at once.
    pub(super) fn shutdown(&self) {
        let _ = match self {
            Sock::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
            Sock::Unix(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }

    pub(super) fn fd(&self) -> RawFd {
        match self {
            Sock::Tcp(s) => s.as_raw_fd(),
            Sock::Unix(s) => s.as_raw_fd(),
        }
    }
}

/// Reads what the socket holds into `buf`'s spare capacity (which the caller made room
/// in), without initialising it first.
pub(super) fn read_into(fd: RawFd, buf: &mut BytesMut) -> io::Result<usize> {
    let spare = buf.spare_capacity_mut();
    // SAFETY: read(2) writes at most `spare.len()` bytes into the spare capacity, which is
    // valid for writes of that length.
    let n = unsafe { sys::read(fd, spare.as_mut_ptr().cast(), spare.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: read(2) initialised the first `n` bytes of the spare capacity.
    unsafe { buf.advance_mut(n as usize) };
    Ok(n as usize)
}

/// Sends what it can of `buf` on the socket.
fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: send(2) reads at most `buf.len()` bytes from `buf`.
    let n = unsafe { sys::send(fd, buf.as_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// The loop's two system calls a request. On Linux they bypass glibc's `read` and `send`:
/// each of those is a thread-cancellation point, bracketing the call with enabling and
/// disabling asynchronous cancellation (about 45 instructions a call, two calls a request),
/// and no thread here is ever cancelled.
#[cfg(target_os = "linux")]
mod sys {
    use std::os::fd::RawFd;

    /// read(2).
    ///
    /// # Safety
    /// `buf` must be valid for writes of `len` bytes.
    pub unsafe fn read(fd: RawFd, buf: *mut libc::c_void, len: usize) -> isize {
        // SAFETY: the caller's contract is read(2)'s.
        unsafe { libc::syscall(libc::SYS_read, fd, buf, len) as isize }
    }

    /// send(2) without SIGPIPE.
    ///
    /// # Safety
    /// `buf` must be valid for reads of `len` bytes.
    pub unsafe fn send(fd: RawFd, buf: *const libc::c_void, len: usize) -> isize {
        let (to, to_len) = (std::ptr::null::<libc::sockaddr>(), 0 as libc::socklen_t);
        // SAFETY: the caller's contract is send(2)'s; sendto(2) with no address is send(2).
        unsafe {
            libc::syscall(
                libc::SYS_sendto,
                fd,
                buf,
                len,
                libc::MSG_NOSIGNAL,
                to,
                to_len,
            ) as isize
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    use std::os::fd::RawFd;

    pub unsafe fn read(fd: RawFd, buf: *mut libc::c_void, len: usize) -> isize {
        // SAFETY: the caller's contract is read(2)'s.
        unsafe { libc::read(fd, buf, len) }
    }

    pub unsafe fn send(fd: RawFd, buf: *const libc::c_void, len: usize) -> isize {
        // SAFETY: the caller's contract is send(2)'s.
        unsafe { libc::send(fd, buf, len, 0) }
    }
}

/// Writes the session's output until done (`true`) or the socket is full (`false`: the
/// rest stays, and the poller's next writable edge resumes it where this write stopped).
pub(super) fn write_now(sock: &Sock, session: &mut Session) -> io::Result<bool> {
    loop {
        let out = session.unsent();
        if out.is_empty() {
            return Ok(true);
        }
        match send(sock.fd(), out) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => session.wrote(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) => return Err(e),
        }
    }
}
