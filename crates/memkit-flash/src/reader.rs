//! Reads: synchronous `read` (a pread, or a copy out of a buffer not yet written), and
//! batches submitted to the reader threads.
//!
//! A read takes the write lock only to look through the in-memory buffers (a copy of at most
//! one record); the pread itself runs under no lock. The page's version is checked before
//! and after it, because the page may be evicted and rewritten while the read is under way.

use std::io;
use std::os::unix::fs::FileExt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use crate::buffers::ReadJob;
use crate::record;
use crate::store::{Inner, bump};
use crate::{FlashLoc, ReadDone, ReadError};

impl Inner {
    pub(crate) fn read(&self, at: FlashLoc, key: &[u8]) -> Result<Vec<u8>, ReadError> {
        let page = self.pages.get(at.page as usize).ok_or(ReadError::BadCrc)?;
        if page.version() != at.version {
            return Err(ReadError::Stale);
        }
        let len = at.len as usize;
        if len < record::HEADER || u64::from(at.offset) + len as u64 > self.set.page_size {
            return Err(ReadError::BadCrc);
        }
        let found = self.ws.lock().lookup(at);
        let rec = match found {
            Some(Ok(copy)) => copy,
            Some(Err(buf)) => buf.find(at).map(<[u8]>::to_vec).ok_or(ReadError::BadCrc)?,
            None => {
                let mut rec = vec![0; len];
                let pos = page.file_off + u64::from(at.offset);
                match self.files[page.file].read_exact_at(&mut rec, pos) {
                    Ok(()) => rec,
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                        return Err(ReadError::BadCrc);
                    }
                    Err(e) => return Err(ReadError::Io(e)),
                }
            }
        };
        if page.version() != at.version {
            return Err(ReadError::Stale);
        }
        let value = record::into_value(rec, at.version, key).ok_or(ReadError::BadCrc)?;
        bump(&self.c.objects_read, 1);
        bump(&self.c.bytes_read, u64::from(at.len));
        Ok(value)
    }

    pub(crate) fn submit(&self, reads: Vec<(FlashLoc, Vec<u8>)>, done: ReadDone) {
        bump(&self.c.io_queue, 1);
        let job = ReadJob { reads, done };
        let mut q = self.reads.lock();
        if q.stopped {
            drop(q);
            self.run_job(job);
            return;
        }
        q.jobs.push_back(job);
        drop(q);
        self.read_cv.notify_one();
    }

    fn run_job(&self, job: ReadJob) {
        let results = job
            .reads
            .iter()
            .map(|(at, key)| self.read(*at, key))
            .collect();
        // The completion is the cache's code: a panic in it must not take a reader thread
        // (and every later batch) down with it.
        let _ = catch_unwind(AssertUnwindSafe(|| (job.done)(results)));
        self.c.io_queue.fetch_sub(1, Relaxed);
    }

    /// Stops the reader threads once the batches already queued are done.
    pub(crate) fn stop_readers(&self) {
        self.reads.lock().stopped = true;
        self.read_cv.notify_all();
    }
}

/// A reader thread.
pub(crate) fn run(inner: Arc<Inner>) {
    loop {
        let job = {
            let mut q = inner.reads.lock();
            loop {
                if let Some(job) = q.jobs.pop_front() {
                    break job;
                }
                if q.stopped {
                    return;
                }
                inner.read_cv.wait(&mut q);
            }
        };
        let slow = inner.slow_reads.load(Relaxed);
        if slow > 0 {
            std::thread::sleep(std::time::Duration::from_millis(slow));
        }
        inner.run_job(job);
    }
}
