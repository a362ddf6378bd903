//! The cookbook's error: a store failure, a value that does not decode, or a structure's own
//! refusal (a lock not acquired in time, too much contention, an argument out of range).

/// The result type of every cookbook operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a cookbook operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The backend failed (I/O, out of memory, invalid key...).
    #[error(transparent)]
    Store(#[from] memkit_types::Error),
    /// A stored value could not be decoded (or a value could not be encoded).
    #[error("codec: {0}")]
    Codec(String),
    /// [`Lock::lock`](crate::Lock::lock) waited its whole budget without acquiring the lock.
    #[error("lock {0:?} not acquired within its wait budget")]
    LockTimeout(String),
    /// An optimistic loop (cas, add-or-append) lost the race this many times in a row; the
    /// key is probably being evicted as fast as it is created.
    #[error("gave up after {0} contended attempts")]
    Contended(u32),
    /// An argument outside what the structure supports (e.g. an event older than the log).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// The caller-supplied source of truth failed (view counter).
    #[error("source of truth: {0}")]
    Source(Box<dyn std::error::Error + Send + Sync>),
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::Codec(e.to_string())
    }
}
