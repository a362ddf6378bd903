//! Warm restart: the page table as bytes (`save_state`) and back (`restore`).
//!
//! Layout, little-endian: `MAGIC | format u32 | page_size u64 | files u32 | per file:
//! (path_len u32, path bytes, size u64) | pages u32 | next_seq u64 | per page: (version u32,
//! write_off u32, live_bytes u64, live_objects u64, seq u64, free u8) | crc32 of all before`.
//!
//! Restored, the page that was open is closed (appends start on a new page), and free pages
//! get a new version: a location handed out after the save cannot match a page reused after
//! the restore.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;

use crate::buffers::WriteState;
use crate::page::{PageMeta, PageState};
use crate::store::{Inner, Settings};

const MAGIC: &[u8; 8] = b"MKFLASH\0";
const FORMAT: u32 = 1;

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("flash state: {msg}"))
}

impl Inner {
    pub(crate) fn save_state(&self) -> io::Result<Vec<u8>> {
        self.flush()?;
        let ws = self.ws.lock();
        let mut out = Vec::with_capacity(64 + self.pages.len() * 37);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT.to_le_bytes());
        out.extend_from_slice(&self.set.page_size.to_le_bytes());
        out.extend_from_slice(&(self.set.files.len() as u32).to_le_bytes());
        for f in &self.set.files {
            let path = f.path.as_os_str().as_bytes();
            out.extend_from_slice(&(path.len() as u32).to_le_bytes());
            out.extend_from_slice(path);
            out.extend_from_slice(&f.size.to_le_bytes());
        }
        out.extend_from_slice(&(self.pages.len() as u32).to_le_bytes());
        out.extend_from_slice(&ws.next_seq.to_le_bytes());
        for (page, m) in self.pages.iter().zip(&ws.meta) {
            let (bytes, objects) = page.live();
            out.extend_from_slice(&page.version().to_le_bytes());
            out.extend_from_slice(&m.write_off.to_le_bytes());
            out.extend_from_slice(&bytes.to_le_bytes());
            out.extend_from_slice(&objects.to_le_bytes());
            out.extend_from_slice(&m.seq.to_le_bytes());
            out.push(u8::from(m.state == PageState::Free));
        }
        let sum = crc32fast::hash(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        Ok(out)
    }
}

/// A saved page: version, live bytes and objects, and what the appender knew.
pub(crate) struct SavedPage {
    pub(crate) version: u32,
    pub(crate) bytes: u64,
    pub(crate) objects: u64,
    pub(crate) meta: PageMeta,
}

/// Checks `state` against the settings and returns the write state and pages it describes.
pub(crate) fn parse(set: &Settings, state: &[u8]) -> io::Result<(WriteState, Vec<SavedPage>)> {
    let split = state
        .len()
        .checked_sub(4)
        .ok_or_else(|| invalid("truncated"))?;
    let (body, sum) = state.split_at(split);
    if crc32fast::hash(body).to_le_bytes() != sum {
        return Err(invalid("checksum mismatch (truncated or corrupted)"));
    }
    let mut d = Dec(body);
    if d.take(MAGIC.len())? != MAGIC {
        return Err(invalid("not a memkit flash state"));
    }
    let format = d.u32()?;
    if format != FORMAT {
        return Err(invalid(&format!(
            "format {format}, this build reads {FORMAT}"
        )));
    }
    let page_size = d.u64()?;
    if page_size != set.page_size {
        return Err(invalid(&format!(
            "saved with pages of {page_size} bytes, the configuration makes {}",
            set.page_size
        )));
    }
    let files = d.u32()? as usize;
    if files != set.files.len() {
        return Err(invalid(&format!(
            "saved with {files} files, configured {}",
            set.files.len()
        )));
    }
    for f in &set.files {
        let len = d.u32()? as usize;
        let path = OsStr::from_bytes(d.take(len)?);
        let size = d.u64()?;
        if path != f.path.as_os_str() || size != f.size {
            return Err(invalid(&format!(
                "saved with {}:{size}, configured {}:{}",
                path.to_string_lossy(),
                f.path.display(),
                f.size
            )));
        }
    }
    let pages = d.u32()? as usize;
    if pages != set.pages().len() {
        return Err(invalid(&format!(
            "{pages} pages saved, the files make another number"
        )));
    }
    let next_seq = d.u64()?;
    let mut saved = Vec::with_capacity(pages);
    let mut free = VecDeque::new();
    for p in 0..pages {
        let version = d.u32()?;
        let write_off = d.u32()?;
        let (bytes, objects, seq) = (d.u64()?, d.u64()?, d.u64()?);
        let is_free = d.take(1)?[0] != 0;
        if u64::from(write_off) > page_size || bytes > page_size || objects > page_size {
            return Err(invalid(&format!("page {p} is inconsistent")));
        }
        let meta = if is_free {
            free.push_back(p as u32);
            PageMeta::FREE
        } else {
            PageMeta {
                state: PageState::Used,
                write_off,
                seq,
            }
        };
        let version = if is_free {
            version.wrapping_add(1)
        } else {
            version
        };
        saved.push(SavedPage {
            version,
            bytes,
            objects,
            meta,
        });
    }
    if !d.0.is_empty() {
        return Err(invalid("trailing bytes"));
    }
    let meta = saved.iter().map(|s| s.meta).collect();
    Ok((WriteState::new(meta, free, next_seq), saved))
}

/// A reader of the state's fields; a short state is an error, never a panic.
struct Dec<'a>(&'a [u8]);

impl<'a> Dec<'a> {
    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        let (head, rest) = self
            .0
            .split_at_checked(n)
            .ok_or_else(|| invalid("truncated"))?;
        self.0 = rest;
        Ok(head)
    }

    fn u32(&mut self) -> io::Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> io::Result<u64> {
        let mut a = [0; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
}
