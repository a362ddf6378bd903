//! memkit-protocol: a sans-IO codec for memcached 1.6's text, meta and binary protocols.
//!
//! One codec serves both ends of the wire: the server decodes requests and encodes replies,
//! the client encodes requests and decodes replies. It never touches a socket or storage.
//!
//! Map:
//! - [`command`]: the logical [`Command`]s all three encodings decode into, and the text
//!   encoding's mapping to the store's options (meta's is in [`meta`], binary's in
//!   [`binary`]).
//! - [`decode`]: [`decode_request`] — one request per call, zero-copy, with memcached's exact
//!   error replies and byte accounting ([`DecodeError`], [`Reject`]); [`first_key`], a
//!   request's first key guessed ahead of decoding, for cache warming.
//! - [`request`]: [`Request`] and [`encode_request`] (client side).
//! - [`meta`]: [`MetaFlags`], the flags of `mg`/`ms`/`md`/`ma`, in request order.
//! - [`render`]: the server's reply writers — hot-path functions (`VALUE`, `STORED`, numbers,
//!   `STAT`), meta replies built from the request's flags and an [`ItemMeta`], and the quiet
//!   (`q`) suppression rules.
//! - [`response`]: [`Response`], its `encode`, and [`decode_response`] (client side).
//! - [`error`]: [`ErrorReply`] (every error line), [`Reject`], [`DecodeError`].
//! - [`binary`]: the binary protocol: frames, [`binary::decode_request`] with memcached's
//!   order of checks, the reply writers, and the client side's encoder and reply decoder.
//! - [`check`]: the invariants the fuzzer and the stable fuzz test assert.
//! - `token`, `num`, `base64`: memcached's line splitting, number parsing and base64, quirks
//!   included, because they are observable.
//!
//! Goals: byte-exact agreement with memcached 1.6.18 (the reference binary) on every reply
//! and on how many bytes each command consumes; no panic, no unbounded loop and no allocation
//! proportional to an untrusted length on any input.
//!
//! Non-goals: SASL's mechanisms (the server checks credentials), UDP framing, the proxy's commands; deciding
//! anything that depends on server state (that lives in the server's dispatch). Differences
//! from memcached are listed in `docs/protocol-notes.md`.

pub mod base64;
pub mod binary;
pub mod check;
pub mod command;
pub mod decode;
pub mod error;
pub mod meta;
mod num;
pub mod render;
pub mod request;
pub mod response;
mod token;

pub use command::Command;
pub use decode::{decode_request, first_key, unterminated};
pub use error::{DecodeError, ErrorReply, Reject};
pub use memkit_types::MAX_KEY_LEN;
pub use meta::MetaFlags;
pub use num::{write_i64, write_u64};
pub use render::{ItemMeta, MetaCmd, MetaStatus};
pub use request::{
    AdminCmd, KeyBuf, Request, ShutdownMode, StoreCmd, encode_get, encode_request, meta_key,
};
pub use response::{MetaCode, Response, decode_response};
pub use token::{MAX_TOKENS, Words, WordsIter};

/// Size limits the decoder enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// memcached's `-I`: the largest item, header and key included.
    pub max_item_size: usize,
    /// Bytes without a newline after which only a multi-get may keep buffering (2048).
    pub max_line_len: usize,
    /// Cap on a multi-get line without a newline. memcached has none (it reallocs its read
    /// buffer without bound); we close the connection past this.
    pub max_multiget_line: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_item_size: memkit_types::DEFAULT_ITEM_SIZE_MAX,
            max_line_len: 2048,
            max_multiget_line: 4 * 1024 * 1024,
        }
    }
}

impl Limits {
    /// Whether an item with this key length, value length and client flags fits under
    /// `max_item_size`: memcached's `item_size_ok`, the rule the engine applies too
    /// ([`memkit_types::item_fits`]).
    pub fn item_fits(&self, key_len: usize, value_len: usize, flags: u32) -> bool {
        memkit_types::item_fits(self.max_item_size, key_len, value_len, flags)
    }
}
