//! A connection's entry in the server's registry ([`ConnLive`]): what `stats conns` shows
//! of it, and its socket, which a stopping server shuts; [`Registered`], the guard that
//! keeps the entry for the connection's life.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use super::Shared;

/// A connection as `stats conns` shows it. Its state and last command time are written by
/// the connection without the registry lock; its addresses are read from the socket when
/// asked for: keeping them would cost every connection about 150 bytes for a command
/// operators run by hand.
#[derive(Debug)]
pub struct ConnLive {
    /// Seconds since server start of the connection's last read.
    pub last_cmd: AtomicU64,
    state: AtomicU8,
    /// The connection's socket; `None` for a connection not made by the acceptor.
    fd: Option<RawFd>,
    /// The socket's cookie (`SO_COOKIE`, unique while the kernel runs), to tell it from
    /// another socket given the same descriptor number after the connection closed; 0
    /// where the kernel has none.
    cookie: u64,
    unix: bool,
}

/// A socket's cookie (`SO_COOKIE`, Linux 4.12 and later); 0 where there is none.
fn socket_cookie(fd: RawFd) -> u64 {
    #[cfg(target_os = "linux")]
    {
        let mut cookie = 0u64;
        let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
        // SAFETY: getsockopt(2) writes at most `len` bytes into `cookie`.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_COOKIE,
                (&raw mut cookie).cast(),
                &mut len,
            )
        };
        if r == 0 { cookie } else { 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = fd;
        0
    }
}

/// A connection's addresses, as the socket gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnAddrs {
    /// The peer's and the listener's address.
    Tcp(SocketAddr, SocketAddr),
    /// The `-s` socket's path (a UNIX client has no address of its own).
    Unix(Option<std::path::PathBuf>),
}

/// Where a connection is, under memcached's names for its states (`state_text`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ConnState {
    /// Accepted, nothing read yet.
    NewCmd,
    /// Between requests, waiting for the next one.
    Waiting,
    /// Holds part of a request and waits for the rest.
    Read,
    /// Answering what it has read.
    ParseCmd,
    /// Writing replies out.
    Write,
    /// Discarding a refused store's data block as it arrives.
    Swallow,
    /// Streaming `watch` log lines.
    Watch,
    /// A request waits for something other than its socket (a durable commit): memcached's
    /// state for a connection waiting on its I/O queue.
    IoQueue,
}

impl ConnState {
    const ALL: [ConnState; 8] = [
        ConnState::NewCmd,
        ConnState::Waiting,
        ConnState::Read,
        ConnState::ParseCmd,
        ConnState::Write,
        ConnState::Swallow,
        ConnState::Watch,
        ConnState::IoQueue,
    ];

    /// memcached's name for the state.
    pub fn name(self) -> &'static str {
        match self {
            ConnState::NewCmd => "conn_new_cmd",
            ConnState::Waiting => "conn_waiting",
            ConnState::Read => "conn_read",
            ConnState::ParseCmd => "conn_parse_cmd",
            ConnState::Write => "conn_write",
            ConnState::Swallow => "conn_swallow",
            ConnState::Watch => "conn_watch",
            ConnState::IoQueue => "conn_io_queue",
        }
    }
}

impl ConnLive {
    pub(crate) fn new(uptime_secs: u64, fd: Option<RawFd>, unix: bool) -> Self {
        ConnLive {
            last_cmd: AtomicU64::new(uptime_secs),
            state: AtomicU8::new(ConnState::NewCmd as u8),
            fd,
            cookie: fd.map_or(0, socket_cookie),
            unix,
        }
    }

    /// The connection's socket, through a descriptor of its own; `None` once it is gone.
    ///
    /// The connection closes its descriptor before its registry entry is removed, and in
    /// between the number may be given to another socket of this process: another
    /// server's connection, an embedder's client. A duplicate holds whatever the number
    /// names now and cannot be swapped under it, so its cookie says whether it is still
    /// this connection's socket; only then is it used.
    fn socket(&self) -> Option<std::os::fd::OwnedFd> {
        use std::os::fd::FromRawFd;
        // SAFETY: fcntl(2) F_DUPFD_CLOEXEC takes any number and changes no memory.
        let dup = unsafe { libc::fcntl(self.fd?, libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return None;
        }
        // SAFETY: a new descriptor nothing else owns.
        let dup = unsafe { std::os::fd::OwnedFd::from_raw_fd(dup) };
        (self.cookie == 0 || socket_cookie(dup.as_raw_fd()) == self.cookie).then_some(dup)
    }

    /// Shuts the reading side of the connection's socket (a stopping server).
    pub(crate) fn shut_reading(&self) {
        self.shut(std::net::Shutdown::Read);
    }

    /// Shuts the connection's socket in direction `how`, if it is still the connection's;
    /// whether it was.
    fn shut(&self, how: std::net::Shutdown) -> bool {
        let Some(s) = self.socket() else {
            return false;
        };
        // shutdown(2) is the same call for either kind of socket.
        let _ = std::net::TcpStream::from(s).shutdown(how);
        true
    }

    /// Shuts both sides of the connection's socket (the idle timeout): whatever its driver
    /// waits for ends. Whether the socket was still the connection's.
    pub(crate) fn shut_both(&self) -> bool {
        self.shut(std::net::Shutdown::Both)
    }

    /// The connection's addresses, read from its socket; `None` once the socket is gone.
    pub fn addrs(&self) -> Option<ConnAddrs> {
        let s = self.socket()?;
        if self.unix {
            let local = std::os::unix::net::UnixStream::from(s).local_addr().ok()?;
            Some(ConnAddrs::Unix(
                local.as_pathname().map(|p| p.to_path_buf()),
            ))
        } else {
            let s = std::net::TcpStream::from(s);
            Some(ConnAddrs::Tcp(s.peer_addr().ok()?, s.local_addr().ok()?))
        }
    }

    /// Records where the connection is: a relaxed byte store, as `stats conns` is a snapshot
    /// that may be a request behind.
    #[inline]
    pub fn set(&self, state: ConnState) {
        self.state.store(state as u8, Ordering::Relaxed);
    }

    /// Where the connection last said it was.
    pub fn state(&self) -> ConnState {
        ConnState::ALL[self.state.load(Ordering::Relaxed) as usize]
    }
}

/// A connection's registry entry and its place in `curr_connections`, undone on drop: every
/// driver holds one for the connection's whole life.
#[derive(Debug)]
pub struct Registered {
    pub sh: Arc<Shared>,
    pub id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.sh.conns.lock().remove(&self.id);
        self.sh
            .counters
            .curr_connections
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// An accepted socket between the acceptor's reactor and a worker's.
#[derive(Debug)]
pub enum Moved {
    Tcp(std::net::TcpStream, SocketAddr, bool),
    Unix(std::os::unix::net::UnixStream),
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    use super::*;

    /// A connected pair: (client, server side).
    fn pair(l: &TcpListener) -> (TcpStream, TcpStream) {
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (c, l.accept().unwrap().0)
    }

    /// A stopping server shuts only its own connections: once a connection's descriptor
    /// names another socket (closed, and the number given again), its entry leaves that
    /// socket alone, and `stats conns` reports it gone.
    #[test]
    fn an_entry_leaves_alone_a_socket_that_took_its_descriptor() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let (_c1, s1) = pair(&l);
        let live = ConnLive::new(0, Some(s1.as_raw_fd()), false);
        assert!(matches!(live.addrs(), Some(ConnAddrs::Tcp(..))));
        let (mut c2, mut s2) = pair(&l);
        // The other socket takes the number, as a socket opened after a close would.
        // SAFETY: dup2(2) onto a descriptor `s1` owns: `s1` closes that socket's number and
        // then owns the other socket's duplicate, as it would own a number reused.
        assert!(unsafe { libc::dup2(s2.as_raw_fd(), s1.as_raw_fd()) } >= 0);
        live.shut_reading();
        // A shut socket would read the end of input at once; this one still waits.
        s2.set_nonblocking(true).unwrap();
        let mut got = [0u8; 10];
        let waits = s2.read(&mut got).unwrap_err();
        assert_eq!(waits.kind(), std::io::ErrorKind::WouldBlock);
        s2.set_nonblocking(false).unwrap();
        c2.write_all(b"still here").unwrap();
        s2.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"still here");
        assert_eq!(live.addrs(), None);
        drop(s1);
        // Its own socket, still open, is shut.
        let (_c3, mut s3) = pair(&l);
        ConnLive::new(0, Some(s3.as_raw_fd()), false).shut_reading();
        assert_eq!(s3.read(&mut got).unwrap(), 0, "end of input after the shut");
    }
}
