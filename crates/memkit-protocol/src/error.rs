//! What the decoder says instead of a request.
//!
//! [`DecodeError::Incomplete`] is not an error: wait for more bytes. [`DecodeError::Reject`]
//! is a request memcached answers with an error line, and it says exactly how many bytes
//! memcached would eat (the line, sometimes the data block too, possibly bytes that have not
//! arrived yet). [`DecodeError::Close`] is where memcached drops the connection.

/// Every error line memcached's text/meta parser can answer with (without `\r\n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorReply {
    /// `ERROR`: unknown command or wrong token count.
    Error,
    /// `CLIENT_ERROR bad command line format`
    BadFormat,
    /// `CLIENT_ERROR bad data chunk`
    BadDataChunk,
    /// `SERVER_ERROR object too large for cache`
    TooLarge,
    /// `CLIENT_ERROR invalid exptime argument`
    BadExptime,
    /// `CLIENT_ERROR invalid numeric delta argument`
    BadDeltaArgument,
    /// `CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]`
    DeleteUsage,
    /// `CLIENT_ERROR invalid shutdown mode`
    ShutdownMode,
    /// `CLIENT_ERROR bad token in command line format`
    BadToken,
    /// `CLIENT_ERROR invalid flag`
    InvalidFlag,
    /// `CLIENT_ERROR duplicate flag`
    DuplicateFlag,
    /// `CLIENT_ERROR invalid or duplicate flag` (md/ma report every flag error this way)
    InvalidOrDuplicateFlag,
    /// `CLIENT_ERROR error decoding key`
    KeyDecode,
    /// `CLIENT_ERROR incorrect length for M token`
    BadMLength,
    /// `CLIENT_ERROR invalid numeric initial value`
    BadInitial,
    /// `CLIENT_ERROR invalid numeric delta value`
    BadDelta,
    /// `CLIENT_ERROR opaque token too long`
    OpaqueTooLong,
    /// `CLIENT_ERROR options flags are too long` (mg's wording)
    MgFlagsTooLong,
    /// `CLIENT_ERROR options flags too long` (ms/md/ma wording)
    FlagsTooLong,
    /// `CLIENT_ERROR invalid mode for ms M token`
    BadMsMode,
    /// `CLIENT_ERROR invalid mode for ma M token`
    BadMaMode,
}

impl ErrorReply {
    /// The reply line without `\r\n`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorReply::Error => "ERROR",
            ErrorReply::BadFormat => "CLIENT_ERROR bad command line format",
            ErrorReply::BadDataChunk => "CLIENT_ERROR bad data chunk",
            ErrorReply::TooLarge => "SERVER_ERROR object too large for cache",
            ErrorReply::BadExptime => "CLIENT_ERROR invalid exptime argument",
            ErrorReply::BadDeltaArgument => "CLIENT_ERROR invalid numeric delta argument",
            ErrorReply::DeleteUsage => {
                "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]"
            }
            ErrorReply::ShutdownMode => "CLIENT_ERROR invalid shutdown mode",
            ErrorReply::BadToken => "CLIENT_ERROR bad token in command line format",
            ErrorReply::InvalidFlag => "CLIENT_ERROR invalid flag",
            ErrorReply::DuplicateFlag => "CLIENT_ERROR duplicate flag",
            ErrorReply::InvalidOrDuplicateFlag => "CLIENT_ERROR invalid or duplicate flag",
            ErrorReply::KeyDecode => "CLIENT_ERROR error decoding key",
            ErrorReply::BadMLength => "CLIENT_ERROR incorrect length for M token",
            ErrorReply::BadInitial => "CLIENT_ERROR invalid numeric initial value",
            ErrorReply::BadDelta => "CLIENT_ERROR invalid numeric delta value",
            ErrorReply::OpaqueTooLong => "CLIENT_ERROR opaque token too long",
            ErrorReply::MgFlagsTooLong => "CLIENT_ERROR options flags are too long",
            ErrorReply::FlagsTooLong => "CLIENT_ERROR options flags too long",
            ErrorReply::BadMsMode => "CLIENT_ERROR invalid mode for ms M token",
            ErrorReply::BadMaMode => "CLIENT_ERROR invalid mode for ma M token",
        }
    }
}

impl std::fmt::Display for ErrorReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request memcached refuses, and how the connection goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reject<'a> {
    /// The reply.
    pub reply: ErrorReply,
    /// Whether memcached stays silent (the command said `noreply`; text commands only).
    pub noreply: bool,
    /// Bytes of the buffer to drop now (the line, and the data block if it was checked).
    pub consumed: usize,
    /// Further bytes to discard as they arrive: a refused store's data block, which must not
    /// be buffered (its length is untrusted). Discard these *after* `consumed`.
    pub swallow: u64,
    /// For a refused too-large `set`/`ms`: memcached also unlinks the old item so a stale
    /// value does not outlive a failed overwrite. `(wire key, key is base64)`.
    pub unlink: Option<(&'a [u8], bool)>,
}

impl Reject<'_> {
    /// Appends the reply line (nothing for `noreply`).
    pub fn encode(&self, out: &mut Vec<u8>) {
        if !self.noreply {
            out.extend_from_slice(self.reply.as_str().as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// Why no request (or response) came out of the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError<'a> {
    /// Need more bytes; keep the buffer and read again.
    #[error("incomplete")]
    Incomplete,
    /// Answer with an error, drop `consumed` bytes, then swallow `swallow` more.
    #[error("{}", .0.reply)]
    Reject(Reject<'a>),
    /// memcached would close the connection: a long line without a newline that is not a
    /// multi-get, or an HTTP request line.
    #[error("close the connection")]
    Close,
    /// (Client side.) The server's reply is not valid protocol; drop the connection.
    #[error("malformed server reply")]
    Malformed,
}
