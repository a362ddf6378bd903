//! Canonical cache keys: a readable prefix plus a hash of the canonically serialized query
//! options (seed 004: `$key = md5(serialize($options))`, done so that it cannot surprise).
//!
//! `serialize()` in the seed's PHP depends on the order the options were put into the array,
//! on whether an id arrived as `1` or `"1"`, and on float formatting; two requests for the same
//! data then miss each other's cache, and an md5 collision — easy to make on purpose when the
//! options come from a search box — serves one query's rows for another. Here:
//!
//! - options are serialized with serde into a **canonical text**: maps and struct fields
//!   sorted by their canonical key text (so `HashMap` order, field order and "map vs struct"
//!   do not matter); every integer type is one decimal number (`1u8 == 1i64`); a float equal to
//!   an integer is that integer (`2.0 == 2`), `-0.0` is `0`, other floats are the shortest text
//!   that round-trips the `f64`, all NaNs are one `nan`; `Option::None` and `()` are `null`.
//!   Strings and numbers stay **different** (`"1" != 1`): serde says which one a value is, and a
//!   query layer that treats them alike should normalize before it builds the options;
//! - a set serializes as a sequence, whose order counts: mark set fields with
//!   [`unordered`] (or wrap in [`Unordered`]) so the elements are sorted by canonical text;
//! - the text is hashed with **SHA-256** (160 bits kept, hex): a collision would serve wrong
//!   data, and options can be attacker-chosen, so a cryptographic hash is the right tool
//!   (the seed's md5 is broken for chosen prefixes). The prefix is hashed too, so two prefixes
//!   that look alike after sanitizing still get different keys;
//! - the key is `<prefix>:<40 hex>`, the prefix cut to [`MAX_PREFIX`] bytes with any byte that
//!   memcached forbids (space, control bytes, DEL) replaced by `_`.
//!   The result is always a valid memcached key of at most 200 bytes, leaving room for the
//!   `lock:` that the rebuild lock puts in front.
//!
//! ```
//! use std::collections::{BTreeMap, HashMap};
//! use memkit_cookbook::caching::cache_key;
//!
//! let mut a = HashMap::new();
//! a.insert("blog", 35u32);
//! a.insert("page", 2);
//! let mut b = BTreeMap::new();
//! b.insert("page", 2u64);
//! b.insert("blog", 35);
//! let k = cache_key("posts", &a)?;
//! assert_eq!(k, cache_key("posts", &b)?);           // order and int width do not matter
//! assert!(k.starts_with("posts:") && k.len() == 6 + 40);
//! assert_ne!(k, cache_key("posts", &[("blog", "35"), ("page", "2")])?); // "35" != 35
//! # Ok::<(), memkit_cookbook::Error>(())
//! ```

use std::fmt::Write as _;

use serde::Serialize;
use serde::ser;
use sha2::{Digest, Sha256};

use crate::{Error, Result};

/// The most bytes of the readable prefix kept in a key.
pub const MAX_PREFIX: usize = 150;
/// Hex digits of the hash in a key (160 bits).
pub const HASH_HEX: usize = 40;

/// The cache key for `options` under the readable `prefix`: `<prefix>:<hash>`.
///
/// Equal options (in the sense of the module docs) give one key, different options different
/// keys. The key is always a valid memcached key of at most `MAX_PREFIX + 41` bytes.
pub fn cache_key<O: Serialize + ?Sized>(prefix: &str, options: &O) -> Result<String> {
    let canon = canonical(options)?;
    let mut h = Sha256::new();
    h.update((prefix.len() as u64).to_be_bytes());
    h.update(prefix.as_bytes());
    h.update(canon.as_bytes());
    let digest = h.finalize();
    let mut key = String::with_capacity(MAX_PREFIX + 1 + HASH_HEX);
    for (i, c) in prefix.char_indices() {
        if i + c.len_utf8() > MAX_PREFIX {
            break;
        }
        if c.is_ascii_graphic() {
            key.push(c);
        } else if c.is_ascii() || c.is_control() || c.is_whitespace() {
            key.push('_');
        } else {
            key.push(c); // UTF-8 bytes are all >= 0x80: allowed in keys.
        }
    }
    key.push(':');
    for b in &digest[..HASH_HEX / 2] {
        let _ = write!(key, "{b:02x}");
    }
    Ok(key)
}

/// Serializes an unordered collection (a `HashSet`, or any collection whose order means
/// nothing) with its elements sorted by their canonical text, so that [`cache_key`] does not
/// depend on iteration order. serde serializes a set exactly as a sequence, and a sequence's
/// order is meaningful (`[a, b]` is not `[b, a]`), so the key function cannot tell a set by
/// itself: mark set fields with
/// `#[serde(serialize_with = "memkit_cookbook::caching::unordered")]`, or wrap a set passed
/// directly in [`Unordered`]. (Maps need nothing: their entries are always sorted.)
///
/// ```
/// use std::collections::HashSet;
/// use memkit_cookbook::caching::{Unordered, cache_key};
///
/// #[derive(serde::Serialize)]
/// struct Query {
///     #[serde(serialize_with = "memkit_cookbook::caching::unordered")]
///     tags: HashSet<String>,
/// }
/// let a: HashSet<String> = ["rust", "go", "c"].map(String::from).into();
/// let b: HashSet<String> = ["c", "rust", "go"].map(String::from).into();
/// assert_eq!(
///     cache_key("q", &Query { tags: a.clone() })?,
///     cache_key("q", &Query { tags: b.clone() })?
/// );
/// assert_eq!(cache_key("q", &Unordered(&a))?, cache_key("q", &Unordered(&b))?);
/// # Ok::<(), memkit_cookbook::Error>(())
/// ```
pub fn unordered<'a, C, T, S>(items: &'a C, s: S) -> Result<S::Ok, S::Error>
where
    &'a C: IntoIterator<Item = &'a T>,
    T: Serialize + 'a,
    S: ser::Serializer,
{
    let mut sorted: Vec<(String, &T)> = Vec::new();
    for item in items {
        sorted.push((canonical(item).map_err(ser::Error::custom)?, item));
    }
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    s.collect_seq(sorted.into_iter().map(|(_, item)| item))
}

/// An unordered collection to pass to [`cache_key`] directly; see [`unordered`].
#[derive(Debug, Clone, Copy)]
pub struct Unordered<'a, C>(pub &'a C);

impl<'a, C, T> Serialize for Unordered<'a, C>
where
    &'a C: IntoIterator<Item = &'a T>,
    T: Serialize + 'a,
{
    fn serialize<S: ser::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        unordered(self.0, s)
    }
}

/// The canonical text of `options` (what [`cache_key`] hashes). Useful for debugging a key.
pub fn canonical<O: Serialize + ?Sized>(options: &O) -> Result<String> {
    let mut out = String::new();
    options.serialize(Canon { out: &mut out })?;
    Ok(out)
}

#[derive(Debug)]
struct CanonError(String);

impl std::fmt::Display for CanonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for CanonError {}
impl ser::Error for CanonError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        CanonError(msg.to_string())
    }
}
impl From<CanonError> for Error {
    fn from(e: CanonError) -> Self {
        Error::Codec(format!("cache key options: {e}"))
    }
}

/// Writes the canonical text into `out`.
struct Canon<'a> {
    out: &'a mut String,
}

fn push_str(out: &mut String, s: &str) {
    // JSON string escaping: unambiguous and readable.
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn push_f64(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("nan");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "inf" } else { "-inf" });
    } else if v.fract() == 0.0 && v.abs() < 1e19 {
        // Integral: the same text as the integer (also turns -0.0 into 0).
        let _ = write!(out, "{}", v as i128);
    } else {
        // Rust's `{}` for f64 is the shortest text that round-trips, never exponent-dependent
        // on the source: one value, one text.
        let _ = write!(out, "{v}");
    }
}

impl<'a> ser::Serializer for Canon<'a> {
    type Ok = ();
    type Error = CanonError;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Seq<'a>;
    type SerializeMap = Map<'a>;
    type SerializeStruct = Map<'a>;
    type SerializeStructVariant = Map<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), CanonError> {
        self.out.push_str(if v { "true" } else { "false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), CanonError> {
        self.serialize_i128(i128::from(v))
    }
    fn serialize_i16(self, v: i16) -> Result<(), CanonError> {
        self.serialize_i128(i128::from(v))
    }
    fn serialize_i32(self, v: i32) -> Result<(), CanonError> {
        self.serialize_i128(i128::from(v))
    }
    fn serialize_i64(self, v: i64) -> Result<(), CanonError> {
        self.serialize_i128(i128::from(v))
    }
    fn serialize_i128(self, v: i128) -> Result<(), CanonError> {
        let _ = write!(self.out, "{v}");
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<(), CanonError> {
        self.serialize_u128(u128::from(v))
    }
    fn serialize_u16(self, v: u16) -> Result<(), CanonError> {
        self.serialize_u128(u128::from(v))
    }
    fn serialize_u32(self, v: u32) -> Result<(), CanonError> {
        self.serialize_u128(u128::from(v))
    }
    fn serialize_u64(self, v: u64) -> Result<(), CanonError> {
        self.serialize_u128(u128::from(v))
    }
    fn serialize_u128(self, v: u128) -> Result<(), CanonError> {
        let _ = write!(self.out, "{v}");
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), CanonError> {
        push_f64(self.out, f64::from(v));
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Result<(), CanonError> {
        push_f64(self.out, v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), CanonError> {
        push_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), CanonError> {
        push_str(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), CanonError> {
        // The same text as a sequence of numbers: `serde_bytes` or not, one key.
        let mut seq = ser::Serializer::serialize_seq(self, Some(v.len()))?;
        for b in v {
            ser::SerializeSeq::serialize_element(&mut seq, b)?;
        }
        ser::SerializeSeq::end(seq)
    }
    fn serialize_none(self) -> Result<(), CanonError> {
        self.out.push_str("null");
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), CanonError> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), CanonError> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), CanonError> {
        self.serialize_none()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), CanonError> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), CanonError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), CanonError> {
        self.out.push('{');
        push_str(self.out, variant);
        self.out.push(':');
        value.serialize(Canon { out: self.out })?;
        self.out.push('}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Seq<'a>, CanonError> {
        Ok(Seq {
            out: self.out,
            variant: None,
            items: Vec::new(),
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'a>, CanonError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Seq<'a>, CanonError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Seq<'a>, CanonError> {
        Ok(Seq {
            out: self.out,
            variant: Some(variant),
            items: Vec::new(),
        })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Map<'a>, CanonError> {
        Ok(Map::new(self.out, None))
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Map<'a>, CanonError> {
        Ok(Map::new(self.out, None))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Map<'a>, CanonError> {
        Ok(Map::new(self.out, Some(variant)))
    }
}

fn text_of<T: Serialize + ?Sized>(value: &T) -> Result<String, CanonError> {
    let mut s = String::new();
    value.serialize(Canon { out: &mut s })?;
    Ok(s)
}

/// A sequence (or tuple, or the fields of a tuple variant): elements in order.
struct Seq<'a> {
    out: &'a mut String,
    variant: Option<&'static str>,
    items: Vec<String>,
}

impl Seq<'_> {
    fn finish(self) {
        let mut body = String::from("[");
        body.push_str(&self.items.join(","));
        body.push(']');
        match self.variant {
            None => self.out.push_str(&body),
            Some(v) => {
                self.out.push('{');
                push_str(self.out, v);
                self.out.push(':');
                self.out.push_str(&body);
                self.out.push('}');
            }
        }
    }
}

macro_rules! seq_impl {
    ($tr:ident, $m:ident) => {
        impl ser::$tr for Seq<'_> {
            type Ok = ();
            type Error = CanonError;
            fn $m<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), CanonError> {
                self.items.push(text_of(value)?);
                Ok(())
            }
            fn end(self) -> Result<(), CanonError> {
                self.finish();
                Ok(())
            }
        }
    };
}
seq_impl!(SerializeSeq, serialize_element);
seq_impl!(SerializeTuple, serialize_element);
seq_impl!(SerializeTupleStruct, serialize_field);
seq_impl!(SerializeTupleVariant, serialize_field);

/// A map, struct, or struct variant: entries sorted by the canonical text of their keys.
struct Map<'a> {
    out: &'a mut String,
    variant: Option<&'static str>,
    entries: Vec<(String, String)>,
    pending_key: Option<String>,
}

impl<'a> Map<'a> {
    fn new(out: &'a mut String, variant: Option<&'static str>) -> Self {
        Map {
            out,
            variant,
            entries: Vec::new(),
            pending_key: None,
        }
    }

    fn finish(mut self) {
        // Sort by key text, then value text: duplicate keys (a Vec of pairs serialized as a
        // map) still give one order.
        self.entries.sort();
        let mut body = String::from("{");
        for (i, (k, v)) in self.entries.iter().enumerate() {
            if i > 0 {
                body.push(',');
            }
            body.push_str(k);
            body.push(':');
            body.push_str(v);
        }
        body.push('}');
        match self.variant {
            None => self.out.push_str(&body),
            Some(v) => {
                self.out.push('{');
                push_str(self.out, v);
                self.out.push(':');
                self.out.push_str(&body);
                self.out.push('}');
            }
        }
    }
}

impl ser::SerializeMap for Map<'_> {
    type Ok = ();
    type Error = CanonError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), CanonError> {
        self.pending_key = Some(text_of(key)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), CanonError> {
        let k = self
            .pending_key
            .take()
            .ok_or_else(|| CanonError("map value without a key".into()))?;
        self.entries.push((k, text_of(value)?));
        Ok(())
    }
    fn end(self) -> Result<(), CanonError> {
        self.finish();
        Ok(())
    }
}

impl ser::SerializeStruct for Map<'_> {
    type Ok = ();
    type Error = CanonError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), CanonError> {
        self.entries.push((text_of(key)?, text_of(value)?));
        Ok(())
    }
    fn skip_field(&mut self, _key: &'static str) -> Result<(), CanonError> {
        // A skipped field (`skip_serializing_if`) is absent, like a missing map key.
        Ok(())
    }
    fn end(self) -> Result<(), CanonError> {
        self.finish();
        Ok(())
    }
}

impl ser::SerializeStructVariant for Map<'_> {
    type Ok = ();
    type Error = CanonError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), CanonError> {
        self.entries.push((text_of(key)?, text_of(value)?));
        Ok(())
    }
    fn end(self) -> Result<(), CanonError> {
        self.finish();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, HashMap};

    #[test]
    fn canonical_texts() {
        assert_eq!(canonical(&1u8).unwrap(), "1");
        assert_eq!(canonical(&1i64).unwrap(), "1");
        assert_eq!(canonical(&2.0f64).unwrap(), "2");
        assert_eq!(canonical(&-0.0f64).unwrap(), "0");
        assert_eq!(canonical(&0.5f32).unwrap(), "0.5");
        assert_eq!(canonical(&f64::NAN).unwrap(), "nan");
        assert_eq!(canonical(&"1").unwrap(), "\"1\"");
        assert_eq!(canonical(&None::<u8>).unwrap(), "null");
        let mut m = HashMap::new();
        m.insert("b", 1);
        m.insert("a", 2);
        assert_eq!(canonical(&m).unwrap(), "{\"a\":2,\"b\":1}");
    }

    #[test]
    fn keys_are_valid_and_bounded() {
        let long = "x y\r\n".repeat(100);
        let k = cache_key(&long, &BTreeMap::<u8, u8>::new()).unwrap();
        memkit_types::validate_key(k.as_bytes()).unwrap();
        assert!(k.len() <= MAX_PREFIX + 1 + HASH_HEX);
        assert_ne!(
            cache_key("a b", &1).unwrap(),
            cache_key("a_b", &1).unwrap(),
            "sanitized prefixes stay apart"
        );
        let k = cache_key("ключ", &1).unwrap();
        memkit_types::validate_key(k.as_bytes()).unwrap();
    }
}
