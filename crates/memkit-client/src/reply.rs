//! Owned replies, and the mapping of error replies to [`Error`].
//!
//! The codec's [`Response`] borrows the read buffer; the connection's reader turns each one
//! into a [`Reply`] before it consumes the bytes, so a caller's reply outlives the buffer.

use bytes::Bytes;
use memkit_protocol::{MetaCode, Response};
use memkit_types::Error;

/// One reply line (with its data block), owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `VALUE <key> <flags> <bytes> [<cas>]` + data.
    Value {
        /// Key.
        key: Bytes,
        /// Client flags.
        flags: u32,
        /// CAS, for gets/gats.
        cas: Option<u64>,
        /// Data.
        data: Bytes,
    },
    /// `END`
    End,
    /// `STORED`
    Stored,
    /// `NOT_STORED`
    NotStored,
    /// `EXISTS`
    Exists,
    /// `NOT_FOUND`
    NotFound,
    /// `DELETED`
    Deleted,
    /// `TOUCHED`
    Touched,
    /// `OK`
    Ok,
    /// incr/decr result.
    Number(u64),
    /// `VERSION <v>`
    Version(String),
    /// `STAT <name> <value>`
    Stat(String, String),
    /// `ERROR`
    Error,
    /// `CLIENT_ERROR <msg>`
    ClientError(String),
    /// `SERVER_ERROR <msg>`
    ServerError(String),
    /// A meta reply: code, raw return flags, data for `VA`.
    Meta {
        /// Code.
        code: MetaCode,
        /// Return flags, space separated.
        flags: Bytes,
        /// The `VA` data block.
        data: Option<Bytes>,
    },
    /// `MN`
    MetaNoop,
    /// Anything else (`RESET`, `ME ...`, `BUSY ...`).
    Other(String),
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl Reply {
    /// Copies a decoded response out of the read buffer.
    pub fn from_response(r: &Response<'_>) -> Reply {
        match *r {
            Response::Value {
                key,
                flags,
                cas,
                data,
            } => Reply::Value {
                key: Bytes::copy_from_slice(key),
                flags,
                cas,
                data: Bytes::copy_from_slice(data),
            },
            Response::End => Reply::End,
            Response::Stored => Reply::Stored,
            Response::NotStored => Reply::NotStored,
            Response::Exists => Reply::Exists,
            Response::NotFound => Reply::NotFound,
            Response::Deleted => Reply::Deleted,
            Response::Touched => Reply::Touched,
            Response::Ok => Reply::Ok,
            Response::Number(n) => Reply::Number(n),
            Response::Version(v) => Reply::Version(text(v)),
            Response::Stat { name, value } => Reply::Stat(text(name), text(value)),
            Response::Error => Reply::Error,
            Response::ClientError(m) => Reply::ClientError(text(m)),
            Response::ServerError(m) => Reply::ServerError(text(m)),
            Response::Meta { code, flags, data } => Reply::Meta {
                code,
                flags: Bytes::copy_from_slice(flags),
                data: data.map(Bytes::copy_from_slice),
            },
            Response::MetaNoop => Reply::MetaNoop,
            Response::Reset => Reply::Other("RESET".into()),
            Response::MetaDebug { key, info } => {
                Reply::Other(format!("ME {} {}", text(key), text(info)))
            }
            Response::Other(l) => Reply::Other(text(l)),
        }
    }

    /// Whether this line ends a request whatever was asked (an error reply).
    pub fn is_error(&self) -> bool {
        matches!(
            self,
            Reply::Error | Reply::ClientError(_) | Reply::ServerError(_)
        )
    }

    /// The [`Error`] for a reply that is not a normal outcome of the request.
    pub fn into_error(self) -> Error {
        match self {
            Reply::ServerError(m) if m.contains("object too large") => Error::TooLarge,
            Reply::ServerError(m) if m.contains("out of memory") => Error::OutOfMemory,
            Reply::ServerError(m) => Error::Server(m),
            // Keys are validated before sending, so this is the server's key check.
            Reply::ClientError(m) if m.starts_with("bad command line format") => Error::InvalidKey,
            Reply::ClientError(m) => Error::Client(m),
            Reply::Error => Error::Protocol("ERROR: the server does not know the command".into()),
            other => Error::Protocol(format!("unexpected reply {other:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_types() {
        let e = |r: Reply| r.into_error();
        assert_eq!(
            e(Reply::ServerError("object too large for cache".into())),
            Error::TooLarge
        );
        assert_eq!(
            e(Reply::ServerError("out of memory storing object".into())),
            Error::OutOfMemory
        );
        assert_eq!(
            e(Reply::ClientError("bad command line format".into())),
            Error::InvalidKey
        );
        assert_eq!(
            e(Reply::ClientError("bad data chunk".into())),
            Error::Client("bad data chunk".into())
        );
        assert!(matches!(e(Reply::Stored), Error::Protocol(_)));
    }
}
