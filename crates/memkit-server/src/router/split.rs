//! Big values split across keys (`split_above = BYTES` on a route; mcrouter's
//! BigValueRoute): a value above the size is stored as chunks of at most that size under
//! keys of their own, and the key itself holds an index record naming them.
//!
//! - A store of a big value (`set`, `add`, `replace`, `cas`) first stores its chunks, each
//!   under `KEY:memkit-chunk:VERSION:I` with the store's expiry (VERSION a random number
//!   a store, so chunks of two stores never mix); once every chunk is stored, the index
//!   record goes to KEY with the store's mode, flags, expiry and CAS, and its outcome is the
//!   reply. A chunk not stored fails the store (`SERVER_ERROR`) and the index is not sent.
//! - A read that finds an index record reads the chunks and answers the whole value with
//!   the index's flags and CAS; a chunk missing (evicted, expired) makes it a miss. A
//!   `gat`'s touch reaches the chunks too.
//! - `append` and `prepend` on such a route are refused: the value there may be an index.
//!   `delete` removes the index (the chunks age out); `touch` touches the index only.
//!
//! The index record is `MKSPLIT1 VERSION CHUNKS LENGTH` after a NUL byte: a value that
//! starts so is taken for an index.

use std::hash::{BuildHasher, RandomState};

use bytes::{Bytes, BytesMut};
use memkit_client::Outcome;
use memkit_types::{Error, GetOptions, Item, Result, StoreMode, StoreOptions};

use super::{Op, OpKind};

const MAGIC: &[u8] = b"\0MKSPLIT1 ";

/// What a split store is made of.
#[derive(Debug)]
pub struct Split {
    /// The chunks' stores, in order.
    pub chunks: Vec<Op>,
    /// The index record's store (the original store's mode, flags, expiry and CAS).
    pub index: Op,
}

/// Whether `op` is refused on a splitting route, and why.
pub fn refused(op: &Op) -> Option<Error> {
    match &op.kind {
        OpKind::Store(o) if matches!(o.mode, StoreMode::Append | StoreMode::Prepend) => Some(
            Error::Server("append and prepend are not supported where big values split".into()),
        ),
        _ => None,
    }
}

/// `op` split into chunks of at most `limit` bytes, if it is a store of more.
pub fn split(op: &Op, limit: usize) -> Option<Split> {
    let OpKind::Store(opts) = &op.kind else {
        return None;
    };
    if op.data.len() <= limit {
        return None;
    }
    let version = RandomState::new().hash_one(op.key.as_ref());
    let n = op.data.len().div_ceil(limit);
    let chunks = (0..n)
        .map(|i| Op {
            key: chunk_key(&op.key, version, i),
            data: op
                .data
                .slice(i * limit..((i + 1) * limit).min(op.data.len())),
            kind: OpKind::Store(StoreOptions::new(StoreMode::Set, 0, opts.exptime)),
        })
        .collect();
    let mut record = BytesMut::from(MAGIC);
    record.extend_from_slice(format!("{version} {n} {}", op.data.len()).as_bytes());
    Some(Split {
        chunks,
        index: Op {
            key: op.key.clone(),
            data: record.freeze(),
            kind: op.kind.clone(),
        },
    })
}

fn chunk_key(key: &[u8], version: u64, i: usize) -> Bytes {
    let mut k = BytesMut::from(key);
    k.extend_from_slice(format!(":memkit-chunk:{version}:{i}").as_bytes());
    k.freeze()
}

/// An index record read back: the chunks' version, count and the whole value's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Index {
    version: u64,
    chunks: usize,
    len: usize,
}

impl Index {
    /// The index `item` holds, if its value is one.
    pub fn of(item: &Item) -> Option<Index> {
        let rest = item.value.strip_prefix(MAGIC)?;
        let text = std::str::from_utf8(rest).ok()?;
        let mut f = text.split(' ').map(str::parse::<u64>);
        let (Some(Ok(version)), Some(Ok(chunks)), Some(Ok(len)), None) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            return None;
        };
        Some(Index {
            version,
            chunks: usize::try_from(chunks).ok()?,
            len: usize::try_from(len).ok()?,
        })
    }

    /// The reads of the chunks (a `gat`'s touch included).
    pub fn reads(&self, key: &[u8], opts: &GetOptions) -> Vec<Op> {
        let opts = GetOptions {
            touch: opts.touch,
            ..Default::default()
        };
        (0..self.chunks)
            .map(|i| Op {
                key: chunk_key(key, self.version, i),
                data: Bytes::new(),
                kind: OpKind::Get(opts.clone()),
            })
            .collect()
    }

    /// The whole item from the index's and the chunks' reads; a miss if a chunk is
    /// missing or the lengths disagree.
    pub fn join(&self, index: Item, chunks: &[Result<Outcome>]) -> Result<Outcome> {
        let mut value = BytesMut::with_capacity(self.len);
        for c in chunks {
            match c {
                Ok(Outcome::Item(Some(part))) => value.extend_from_slice(&part.value),
                Ok(_) => return Ok(Outcome::Item(None)),
                Err(e) => return Err(e.clone()),
            }
        }
        if value.len() != self.len {
            return Ok(Outcome::Item(None));
        }
        Ok(Outcome::Item(Some(Item {
            value: value.freeze(),
            ..index
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memkit_types::Exptime;

    #[test]
    fn a_big_store_splits_and_its_index_reads_back() {
        let data = Bytes::from(vec![7u8; 2500]);
        let op = Op {
            key: Bytes::from_static(b"k"),
            data: data.clone(),
            kind: OpKind::Store(StoreOptions::new(StoreMode::Add, 9, Exptime(60))),
        };
        assert!(split(&op, 2500).is_none());
        let s = split(&op, 1000).unwrap();
        let sizes: Vec<usize> = s.chunks.iter().map(|c| c.data.len()).collect();
        assert_eq!(sizes, [1000, 1000, 500]);
        assert!(
            matches!(&s.index.kind, OpKind::Store(o) if o.mode == StoreMode::Add && o.flags == 9)
        );
        let item = Item {
            value: s.index.data.clone(),
            flags: 9,
            cas: 4,
            ..Default::default()
        };
        let idx = Index::of(&item).unwrap();
        let reads = idx.reads(b"k", &GetOptions::default());
        let keys: Vec<&[u8]> = reads.iter().map(|r| &r.key[..]).collect();
        let want: Vec<&[u8]> = s.chunks.iter().map(|c| &c.key[..]).collect();
        assert_eq!(keys, want);
        let parts: Vec<Result<Outcome>> = s
            .chunks
            .iter()
            .map(|c| {
                Ok(Outcome::Item(Some(Item {
                    value: c.data.clone(),
                    ..Default::default()
                })))
            })
            .collect();
        let whole = idx.join(item.clone(), &parts).unwrap();
        assert_eq!(
            whole,
            Outcome::Item(Some(Item {
                value: data,
                flags: 9,
                cas: 4,
                ..Default::default()
            }))
        );
        let mut short = parts.clone();
        short[1] = Ok(Outcome::Item(None));
        assert_eq!(idx.join(item, &short).unwrap(), Outcome::Item(None));
        // A value that is not an index is not taken for one.
        let plain = Item {
            value: Bytes::from_static(b"MKSPLIT1 1 2 3"),
            ..Default::default()
        };
        assert_eq!(Index::of(&plain), None);
    }
}
