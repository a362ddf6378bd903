//! Owned replies read through the protocol crate's types, and the mapping of error replies
//! to [`Error`].
//!
//! The codec's [`Response`] and [`binary::Response`] borrow the buffer they were decoded
//! from. The connection's reader copies the text replies a read completed out of its read
//! buffer in one piece (a reply a caller keeps must not pin that buffer, only the replies of
//! its own read), each binary frame on its own, and whoever reads a reply decodes its bytes
//! again with the same decoder: [`TextReply::response`], [`BinaryReply::response`]. A
//! value handed on (an [`memkit_types::Item`]'s) is a slice of the reply's bytes, not
//! another copy.

use bytes::Bytes;
use memkit_protocol::binary::{self, Header, Status};
use memkit_protocol::{DecodeError, Limits, Response, decode_response};
use memkit_types::Error;

/// One reply: a text line (with its data block) or a binary frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A text or meta protocol reply.
    Text(TextReply),
    /// A binary protocol response frame.
    Binary(BinaryReply),
}

/// The bytes of one text reply: its line and, after `VALUE` or `VA`, its data block.
#[derive(Clone, PartialEq, Eq)]
pub struct TextReply {
    bytes: Bytes,
    shape: Shape,
}

/// What a reply's first decoding (the reader's, to find where it ends) learnt that its
/// readers need: whether it ends a list, and a `VALUE`'s fields, so that a multi-get's
/// values are not decoded twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `END` or an error line: it ends a list ([`Reply::ends_list`]).
    Ends,
    /// A `VALUE`: its fields, the key and data as offsets into the reply's bytes.
    Value {
        key: (usize, usize),
        flags: u32,
        cas: Option<u64>,
        data: (usize, usize),
    },
    /// Anything else: decoded again when read.
    Other,
}

impl std::fmt::Debug for TextReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TextReply({:?})", String::from_utf8_lossy(&self.bytes))
    }
}

impl TextReply {
    /// The reply at the start of `buf` and how many bytes it took: [`decode_response`]'s
    /// answer, its bytes copied.
    pub fn decode<'a>(
        buf: &'a [u8],
        limits: &Limits,
    ) -> Result<(TextReply, usize), DecodeError<'a>> {
        let (used, shape) = TextReply::measure(buf, limits)?;
        Ok((
            TextReply::of(Bytes::copy_from_slice(&buf[..used]), shape),
            used,
        ))
    }

    /// How many bytes the reply at the start of `buf` takes, and its [`Shape`]: with
    /// [`TextReply::of`], a reader that copies many replies at once.
    pub fn measure<'a>(buf: &'a [u8], limits: &Limits) -> Result<(usize, Shape), DecodeError<'a>> {
        let (r, used) = decode_response(buf, limits)?;
        let at = |part: &[u8]| {
            let start = part.as_ptr() as usize - buf.as_ptr() as usize;
            (start, start + part.len())
        };
        let shape = match r {
            Response::End
            | Response::Error
            | Response::ClientError(_)
            | Response::ServerError(_) => Shape::Ends,
            Response::Value {
                key,
                flags,
                cas,
                data,
            } => Shape::Value {
                key: at(key),
                flags,
                cas,
                data: at(data),
            },
            _ => Shape::Other,
        };
        Ok((used, shape))
    }

    /// The reply `bytes` hold whole, as [`TextReply::measure`] found it.
    pub fn of(bytes: Bytes, shape: Shape) -> TextReply {
        TextReply { bytes, shape }
    }

    /// The reply, decoded from its bytes (a `VALUE`'s fields as the first decoding found
    /// them).
    pub fn response(&self) -> Response<'_> {
        if let Shape::Value {
            key,
            flags,
            cas,
            data,
        } = self.shape
        {
            return Response::Value {
                key: &self.bytes[key.0..key.1],
                flags,
                cas,
                data: &self.bytes[data.0..data.1],
            };
        }
        // The bytes are one whole reply the decoder took, and no data block in them is
        // longer than they are: under these limits it takes them the same way again.
        let n = self.bytes.len();
        let limits = Limits {
            max_item_size: n,
            max_line_len: n,
            ..Limits::default()
        };
        match decode_response(&self.bytes, &limits) {
            Ok((r, _)) => r,
            Err(_) => Response::Other(&self.bytes),
        }
    }

    /// A `VALUE` reply's key, without decoding it again.
    pub fn value_key(&self) -> Option<&[u8]> {
        match self.shape {
            Shape::Value { key, .. } => Some(&self.bytes[key.0..key.1]),
            _ => None,
        }
    }

    /// A `VALUE` reply as the item it carries, its value the reply's own bytes cut down
    /// (a multi-get's replies are many: no other reference is taken and dropped); a reply
    /// of another kind is given back.
    pub fn into_item(self) -> std::result::Result<memkit_types::Item, TextReply> {
        let Shape::Value {
            flags, cas, data, ..
        } = self.shape
        else {
            return Err(self);
        };
        let mut value = self.bytes;
        value.truncate(data.1);
        bytes::Buf::advance(&mut value, data.0);
        Ok(memkit_types::Item {
            value,
            flags,
            cas: cas.unwrap_or(0),
            ..Default::default()
        })
    }

    /// `part` of [`TextReply::response`] (a value, a key) as `Bytes` sharing the reply's.
    pub fn part(&self, part: &[u8]) -> Bytes {
        self.bytes.slice_ref(part)
    }

    /// The reply's line, without its `\r\n`, for messages.
    fn line(&self) -> String {
        let end = self.bytes.iter().position(|&b| b == b'\r' || b == b'\n');
        text(&self.bytes[..end.unwrap_or(self.bytes.len())])
    }

    /// Whether the reply is an error line: it ends a request whatever was asked.
    pub fn is_error(&self) -> bool {
        matches!(
            self.response(),
            Response::Error | Response::ClientError(_) | Response::ServerError(_)
        )
    }

    /// The [`Error`] for a reply that is not a normal outcome of the request.
    pub fn into_error(self) -> Error {
        match self.response() {
            Response::ServerError(m) => {
                let m = text(m);
                if m.contains("object too large") {
                    Error::TooLarge
                } else if m.contains("out of memory") {
                    Error::OutOfMemory
                } else {
                    Error::Server(m)
                }
            }
            // Keys are validated before sending, so this is the server's key check.
            Response::ClientError(m) if m.starts_with(b"bad command line format") => {
                Error::InvalidKey
            }
            Response::ClientError(m) => Error::Client(text(m)),
            Response::Error => {
                Error::Protocol("ERROR: the server does not know the command".into())
            }
            _ => Error::Protocol(format!("unexpected reply {:?}", self.line())),
        }
    }
}

/// One binary response frame (header included), owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryReply {
    header: Header,
    frame: Bytes,
}

impl BinaryReply {
    /// The frame at the start of `buf` and how many bytes it took:
    /// [`binary::decode_response`]'s answer (`Ok(None)` until the frame is whole), the
    /// frame copied.
    pub fn decode(buf: &[u8]) -> Result<Option<(BinaryReply, usize)>, &'static str> {
        Ok(binary::decode_response(buf)?.map(|(r, used)| {
            let frame = Bytes::copy_from_slice(&buf[..used]);
            let header = r.header;
            (BinaryReply { header, frame }, used)
        }))
    }

    /// The frame, decoded from its bytes.
    pub fn response(&self) -> binary::Response<'_> {
        match binary::decode_response(&self.frame) {
            Ok(Some((r, _))) => r,
            // Not reached: the frame is one the decoder took whole.
            _ => binary::Response {
                header: self.header,
                extras: &[],
                key: &[],
                value: &[],
            },
        }
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

    /// Extras (a get hit's flags).
    pub fn extras(&self) -> Bytes {
        self.frame.slice_ref(self.response().extras)
    }

    /// Key (a stat's name).
    pub fn key(&self) -> Bytes {
        self.frame.slice_ref(self.response().key)
    }

    /// Value (a get hit's data, an error's message, a stat's value).
    pub fn value(&self) -> Bytes {
        self.frame.slice_ref(self.response().value)
    }

    /// The [`Error`] for a status that is not a normal outcome of the request.
    pub fn into_error(self) -> Error {
        let msg = text(self.response().value);
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
    /// Whether this reply ends a request whatever was asked (an error reply).
    pub fn is_error(&self) -> bool {
        match self {
            Reply::Text(t) => t.is_error(),
            Reply::Binary(b) => !b.is_ok(),
        }
    }

    /// Whether this reply ends a list (`get`'s values, `stats`): `END`, an error, or in
    /// the binary protocol the empty `STAT` frame.
    pub fn ends_list(&self) -> bool {
        match self {
            Reply::Text(t) => t.shape == Shape::Ends,
            Reply::Binary(b) => !b.is_ok() || (b.header.key_len == 0 && b.header.body_len == 0),
        }
    }

    /// The [`Error`] for a reply that is not a normal outcome of the request.
    pub fn into_error(self) -> Error {
        match self {
            Reply::Text(t) => t.into_error(),
            Reply::Binary(b) => b.into_error(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The reply `wire` holds, whole.
    pub(crate) fn reply(wire: &str) -> Reply {
        let (r, used) = TextReply::decode(wire.as_bytes(), &Limits::default()).unwrap();
        assert_eq!(used, wire.len(), "one reply: {wire:?}");
        Reply::Text(r)
    }

    #[test]
    fn errors_map_to_types() {
        let e = |wire: &str| reply(wire).into_error();
        assert_eq!(
            e("SERVER_ERROR object too large for cache\r\n"),
            Error::TooLarge
        );
        assert_eq!(
            e("SERVER_ERROR out of memory storing object\r\n"),
            Error::OutOfMemory
        );
        assert_eq!(
            e("CLIENT_ERROR bad command line format\r\n"),
            Error::InvalidKey
        );
        assert_eq!(
            e("CLIENT_ERROR bad data chunk\r\n"),
            Error::Client("bad data chunk".into())
        );
        assert_eq!(
            e("STORED\r\n"),
            Error::Protocol("unexpected reply \"STORED\"".into())
        );
    }

    #[test]
    fn a_reply_reads_back_as_the_decoder_read_it() {
        let wire = b"VALUE k 5 2 9\r\nxy\r\nEND\r\n";
        let (r, used) = TextReply::decode(wire, &Limits::default()).unwrap();
        assert_eq!(used, 19, "the VALUE and its block, not the END");
        let Response::Value {
            key,
            flags,
            cas,
            data,
        } = r.response()
        else {
            panic!("{r:?}");
        };
        assert_eq!((key, flags, cas, data), (&b"k"[..], 5, Some(9), &b"xy"[..]));
        assert_eq!(r.part(data), Bytes::from_static(b"xy"));
        assert!(reply("END\r\n").ends_list());
        assert!(reply("SERVER_ERROR busy\r\n").ends_list());
        assert!(!reply("STAT pid 1\r\n").ends_list());
    }
}
