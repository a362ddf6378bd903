//! Errors: what is not a normal outcome of a command.
//!
//! A miss, `NOT_STORED`, `EXISTS` and a non-numeric incr are outcomes (see [`crate::outcome`]);
//! these are failures of the request itself. Each variant knows which memcached reply it is,
//! so the server can render it and the client can map a reply back to it.

/// The result type of every backend call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a request could not be carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Empty, longer than 250 bytes, or holding whitespace/control bytes.
    #[error("CLIENT_ERROR bad command line format")]
    InvalidKey,
    /// The item would exceed the maximum item size (`-I`).
    #[error("SERVER_ERROR object too large for cache")]
    TooLarge,
    /// The memory limit is reached and eviction is off (`-M`) or could not free enough.
    #[error("SERVER_ERROR out of memory storing object")]
    OutOfMemory,
    /// The peer answered `CLIENT_ERROR <msg>`.
    #[error("CLIENT_ERROR {0}")]
    Client(String),
    /// The peer answered `SERVER_ERROR <msg>`.
    #[error("SERVER_ERROR {0}")]
    Server(String),
    /// The peer answered something the protocol does not allow here.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A connection or socket failed; for a cluster this means "treat as a miss".
    #[error("I/O error: {0}")]
    Io(String),
    /// A connect or request deadline passed.
    #[error("timed out")]
    Timeout,
    /// No server is available for this key (all ejected, or an empty pool).
    #[error("no server available")]
    NoServer,
}

impl Error {
    /// Whether the failure is about reaching a server rather than about the request: a
    /// cluster treats these reads as misses and may eject the server.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Io(_) | Error::Timeout | Error::NoServer)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::TimedOut {
            Error::Timeout
        } else {
            Error::Io(e.to_string())
        }
    }
}
