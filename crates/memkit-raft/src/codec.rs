//! The binary encoding of what this crate writes to disk or sends to peers: log entries and
//! the log's metadata, peer frames, a snapshot file's header. postcard: serde's data model
//! in a compact, documented wire format (integers as varints, a byte vector as its length
//! and its bytes, an enum variant as its index, struct fields in order with no names).
//!
//! What that asks of the types: nothing may need `deserialize_any` (no untagged or
//! internally tagged enums, no `flatten`), and every field is always written (no
//! `skip_serializing_if`; `#[serde(default)]` is harmless: a field is never missing).
//! openraft's messages and errors and this crate's own types are all plain derives; the
//! tests below round-trip every type that crosses, so a change that breaks this fails
//! there. The format has no field names: adding or reordering a field changes it, and the
//! log, the snapshot files and the peer protocol then need a new version.
//!
//! A snapshot's items are not encoded here but hand-framed (see [`crate::snapshot`]):
//! a million of them are streamed, each written and read with no allocation.

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use postcard::Error;

/// `v`'s encoding.
pub fn to_vec<T: Serialize + ?Sized>(v: &T) -> Result<Vec<u8>, Error> {
    postcard::to_allocvec(v)
}

/// `v`'s encoding after `prefix` zero bytes (room for a header the caller fills in), in
/// one buffer: a frame is written with one copy and one `write`.
pub fn to_vec_after<T: Serialize + ?Sized>(v: &T, prefix: usize) -> Result<Vec<u8>, Error> {
    postcard::serialize_with_flavor(v, Prefixed(vec![0; prefix]))
}

/// Decodes exactly `bytes`: trailing bytes are an error (a frame or a record is one value).
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    match postcard::take_from_bytes(bytes)? {
        (v, []) => Ok(v),
        _ => Err(Error::DeserializeBadEncoding),
    }
}

/// A postcard output that appends to a vector already holding a prefix.
struct Prefixed(Vec<u8>);

impl postcard::ser_flavors::Flavor for Prefixed {
    type Output = Vec<u8>;

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(data);
        Ok(())
    }

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.push(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<Vec<u8>> {
        Ok(self.0)
    }
}
