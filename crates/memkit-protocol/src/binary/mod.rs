//! memcached's binary protocol: frames, the server's request decoder and reply writers, and
//! the client side's request encoder and reply decoder.
//!
//! Deprecated since memcached 1.6.0 but still served by default (`-B auto`), and the default
//! of several clients (PHP's session handler, .NET's EnyimMemcached) and the only carrier of
//! SASL. Every frame is a 24-byte header (all integers big-endian), then extras, key, value:
//! ```text
//! magic opcode keylen(2) extlen datatype vbucket|status(2) bodylen(4) opaque(4) cas(8)
//! ```
//! The decoder follows memcached 1.6.18's `try_read_command_binary` and
//! `dispatch_bin_command` step for step, because the order of its checks is observable: it
//! waits for header, extras and key; checks the lengths add up (else `UNKNOWN_COMMAND` and
//! close), then SASL (`AUTH_ERROR` and close), then the key length (`EINVAL` and close), then
//! each opcode's shape (`EINVAL` and close). A command without a value consumes header,
//! extras and key only: memcached reads nothing more, so surplus body bytes are read as the
//! next request, here as there. A value over `-I` is refused from its header and swallowed as
//! it arrives, never buffered.
//!
//! Map: this file has the frame (constants, [`op`], [`Status`], [`Header`]); `decode` the
//! server's [`decode_request`] and the [`Request`] it returns; `logical` the mapping to and
//! from the logical [`crate::Command`]s; `reply` the server's reply writers; `client` the
//! client side's encoders and [`decode_response`].

use memkit_types::{
    ArithMode, ArithOptions, DeleteOptions, Exptime, GetOptions, StoreMode, StoreOptions,
};

use crate::Limits;

mod client;
mod decode;
mod logical;
mod reply;
#[cfg(test)]
mod tests;

pub use client::*;
pub use decode::*;
pub use logical::*;
pub use reply::*;

/// Length of a frame header.
pub const HEADER_LEN: usize = 24;
/// First byte of a request: on a new connection under `-B auto` it selects this protocol.
pub const REQUEST_MAGIC: u8 = 0x80;
/// First byte of a response.
pub const RESPONSE_MAGIC: u8 = 0x81;
/// Longest SASL mechanism name memcached accepts (`MAX_SASL_MECH_LEN`).
pub const MAX_SASL_MECH_LEN: usize = 32;
/// Longest SASL data (`SASL_AUTH` / `SASL_STEP` value) read, as `-Y` bounds its credentials
/// block: a PLAIN message is two names and a password. memcached reads up to an item's size
/// and fails such data in authentication; longer data gets that `AUTH_ERROR` from its
/// header and is discarded as it arrives, never buffered.
pub const MAX_SASL_DATA: usize = 16 * 1024;

/// Opcodes memcached 1.6.18 serves, by their protocol names.
#[allow(missing_docs)]
pub mod op {
    pub const GET: u8 = 0x00;
    pub const SET: u8 = 0x01;
    pub const ADD: u8 = 0x02;
    pub const REPLACE: u8 = 0x03;
    pub const DELETE: u8 = 0x04;
    pub const INCREMENT: u8 = 0x05;
    pub const DECREMENT: u8 = 0x06;
    pub const QUIT: u8 = 0x07;
    pub const FLUSH: u8 = 0x08;
    pub const GETQ: u8 = 0x09;
    pub const NOOP: u8 = 0x0a;
    pub const VERSION: u8 = 0x0b;
    pub const GETK: u8 = 0x0c;
    pub const GETKQ: u8 = 0x0d;
    pub const APPEND: u8 = 0x0e;
    pub const PREPEND: u8 = 0x0f;
    pub const STAT: u8 = 0x10;
    pub const SETQ: u8 = 0x11;
    pub const ADDQ: u8 = 0x12;
    pub const REPLACEQ: u8 = 0x13;
    pub const DELETEQ: u8 = 0x14;
    pub const INCREMENTQ: u8 = 0x15;
    pub const DECREMENTQ: u8 = 0x16;
    pub const QUITQ: u8 = 0x17;
    pub const FLUSHQ: u8 = 0x18;
    pub const APPENDQ: u8 = 0x19;
    pub const PREPENDQ: u8 = 0x1a;
    /// Defined by the protocol; memcached 1.6.18 answers it `UNKNOWN_COMMAND`.
    pub const VERBOSITY: u8 = 0x1b;
    pub const TOUCH: u8 = 0x1c;
    pub const GAT: u8 = 0x1d;
    pub const GATQ: u8 = 0x1e;
    pub const SASL_LIST_MECHS: u8 = 0x20;
    pub const SASL_AUTH: u8 = 0x21;
    pub const SASL_STEP: u8 = 0x22;
    pub const GATK: u8 = 0x23;
    pub const GATKQ: u8 = 0x24;
}

/// A response status, with memcached's numbering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum Status {
    /// Success.
    Ok = 0x00,
    /// `KEY_ENOENT`.
    KeyNotFound = 0x01,
    /// `KEY_EEXISTS`.
    KeyExists = 0x02,
    /// `E2BIG`.
    TooLarge = 0x03,
    /// `EINVAL`.
    Invalid = 0x04,
    /// `NOT_STORED`.
    NotStored = 0x05,
    /// `DELTA_BADVAL`.
    DeltaBadval = 0x06,
    /// `AUTH_ERROR`.
    AuthError = 0x20,
    /// `AUTH_CONTINUE`.
    AuthContinue = 0x21,
    /// `UNKNOWN_COMMAND`.
    UnknownCommand = 0x81,
    /// `ENOMEM`.
    OutOfMemory = 0x82,
}

impl Status {
    /// The status with this code, if memcached uses it.
    pub fn from_u16(v: u16) -> Option<Status> {
        Some(match v {
            0x00 => Status::Ok,
            0x01 => Status::KeyNotFound,
            0x02 => Status::KeyExists,
            0x03 => Status::TooLarge,
            0x04 => Status::Invalid,
            0x05 => Status::NotStored,
            0x06 => Status::DeltaBadval,
            0x20 => Status::AuthError,
            0x21 => Status::AuthContinue,
            0x81 => Status::UnknownCommand,
            0x82 => Status::OutOfMemory,
            _ => return None,
        })
    }

    /// The body memcached's `write_bin_error` sends with this status.
    pub fn message(self) -> &'static [u8] {
        match self {
            Status::Ok | Status::AuthContinue => b"",
            Status::KeyNotFound => b"Not found",
            Status::KeyExists => b"Data exists for key.",
            Status::TooLarge => b"Too large.",
            Status::Invalid => b"Invalid arguments",
            Status::NotStored => b"Not stored.",
            Status::DeltaBadval => b"Non-numeric server-side value for incr or decr",
            Status::AuthError => b"Auth failure.",
            Status::UnknownCommand => b"Unknown command",
            Status::OutOfMemory => b"Out of memory",
        }
    }
}

/// A frame header, integers in host order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
    /// [`REQUEST_MAGIC`] or [`RESPONSE_MAGIC`].
    pub magic: u8,
    /// The opcode.
    pub opcode: u8,
    /// Key length.
    pub key_len: u16,
    /// Extras length.
    pub extras_len: u8,
    /// Data type (always 0, raw bytes).
    pub data_type: u8,
    /// vbucket in a request, status in a response.
    pub status: u16,
    /// Extras + key + value.
    pub body_len: u32,
    /// Echoed back in the response.
    pub opaque: u32,
    /// CAS.
    pub cas: u64,
}

impl Header {
    /// Parses the first [`HEADER_LEN`] bytes of `b`; `None` if there are fewer.
    pub fn parse(b: &[u8]) -> Option<Header> {
        let b: &[u8; HEADER_LEN] = b.get(..HEADER_LEN)?.try_into().ok()?;
        Some(Header {
            magic: b[0],
            opcode: b[1],
            key_len: u16::from_be_bytes([b[2], b[3]]),
            extras_len: b[4],
            data_type: b[5],
            status: u16::from_be_bytes([b[6], b[7]]),
            body_len: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            opaque: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
            cas: u64::from_be_bytes([b[16], b[17], b[18], b[19], b[20], b[21], b[22], b[23]]),
        })
    }

    /// Appends the header's 24 bytes, and reserves room for the body that follows, so a
    /// reply is one append into a buffer that grows at most once.
    pub fn write(&self, out: &mut Vec<u8>) {
        let mut h = [0u8; HEADER_LEN];
        h[0] = self.magic;
        h[1] = self.opcode;
        h[2..4].copy_from_slice(&self.key_len.to_be_bytes());
        h[4] = self.extras_len;
        h[5] = self.data_type;
        h[6..8].copy_from_slice(&self.status.to_be_bytes());
        h[8..12].copy_from_slice(&self.body_len.to_be_bytes());
        h[12..16].copy_from_slice(&self.opaque.to_be_bytes());
        h[16..24].copy_from_slice(&self.cas.to_be_bytes());
        out.reserve(HEADER_LEN + self.body_len as usize);
        out.extend_from_slice(&h);
    }
}
