//! Owned replies, and the mapping of error replies to [`Error`].
//!
//! The codec's [`Response`] borrows the read buffer; the connection's reader turns each one
//! into a [`Reply`] before it consumes the bytes, so a caller's reply outlives the buffer.
//! A binary frame becomes a [`BinaryReply`]: the frame's bytes, copied once, with its parsed
//! header; its key and value are slices of them.

use bytes::Bytes;
use memkit_protocol::binary::{HEADER_LEN, Header, Status};
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
    /// A binary protocol response frame.
    Binary(BinaryReply),
}

/// One binary response frame: its header and its bytes (header included), owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryReply {
    header: Header,
    frame: Bytes,
}

impl BinaryReply {
    /// A frame whose header `header` was parsed from `frame`, which holds exactly the
    /// header and `header.body_len` bytes of body.
    pub fn new(header: Header, frame: Bytes) -> BinaryReply {
        debug_assert_eq!(frame.len(), HEADER_LEN + header.body_len as usize);
        BinaryReply { header, frame }
    }

    /// The header (its `status` field is the status code).
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The opcode the reply answers.
    pub fn opcode(&self) -> u8 {
        self.header.opcode
    }

    /// The status, `None` for a code memcached does not use.
    pub fn status(&self) -> Option<Status> {
        Status::from_u16(self.header.status)
    }

    /// Whether the status is success.
    pub fn is_ok(&self) -> bool {
        self.header.status == Status::Ok as u16
    }

    /// The header's CAS.
    pub fn cas(&self) -> u64 {
        self.header.cas
    }

    /// The request's opaque, echoed.
    pub fn opaque(&self) -> u32 {
        self.header.opaque
    }

    fn part(&self, from: usize, len: usize) -> Bytes {
        self.frame.slice(HEADER_LEN + from..HEADER_LEN + from + len)
    }

    /// Extras (a get hit's flags).
    pub fn extras(&self) -> Bytes {
        self.part(0, self.header.extras_len.into())
    }

    /// Key (a stat's name).
    pub fn key(&self) -> Bytes {
        self.part(self.header.extras_len.into(), self.header.key_len.into())
    }

    /// Value (a get hit's data, an error's message, a stat's value).
    pub fn value(&self) -> Bytes {
        let head = usize::from(self.header.extras_len) + usize::from(self.header.key_len);
        self.part(head, self.header.body_len as usize - head)
    }

    /// The [`Error`] for a status that is not a normal outcome of the request.
    pub fn into_error(self) -> Error {
        let msg = String::from_utf8_lossy(&self.value()).into_owned();
        match self.status() {
            Some(Status::TooLarge) => Error::TooLarge,
            Some(Status::OutOfMemory) if msg.starts_with("Out of memory") => Error::OutOfMemory,
            Some(Status::OutOfMemory) => Error::Server(msg),
            Some(Status::Invalid) => Error::Client(msg),
            // Before authentication (SASL), or a command the server refuses (`FLUSH` under
            // `-F`): memcached says the same for both.
            Some(Status::AuthError) => Error::Client(format!(
                "{msg} (the server requires SASL authentication, or refuses the command)"
            )),
            Some(Status::UnknownCommand) => {
                Error::Protocol("UNKNOWN_COMMAND: the server does not know the command".into())
            }
            _ => Error::Protocol(format!(
                "unexpected binary reply: opcode 0x{:02x}, status 0x{:04x}",
                self.header.opcode, self.header.status
            )),
        }
    }
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
        match self {
            Reply::Error | Reply::ClientError(_) | Reply::ServerError(_) => true,
            Reply::Binary(b) => !b.is_ok(),
            _ => false,
        }
    }

    /// Whether this reply ends a list (`get`'s values, `stats`): `END`, an error, or in
    /// the binary protocol the empty `STAT` frame.
    pub fn ends_list(&self) -> bool {
        match self {
            Reply::End => true,
            Reply::Binary(b) => !b.is_ok() || (b.header.key_len == 0 && b.header.body_len == 0),
            r => r.is_error(),
        }
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
            Reply::Binary(b) => b.into_error(),
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
