//! The sweeper: purges expired and flushed items from disk over time.
//!
//! Reads already treat such items as gone (and remove them when they meet them); the
//! sweeper takes back the disk space of the ones nobody reads. It walks the `items`
//! keyspace in key order, a bounded slice per round, remembering where it stopped. A record
//! that looks dead is re-checked and removed with its key's shard locked, so a write racing
//! the sweeper is never undone.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Weak};
use std::time::Duration;

use memkit_engine::Engine;

use crate::disk::DiskStore;

/// Records examined per round.
const PER_ROUND: usize = 10_000;

/// What one round did.
#[derive(Debug, Default)]
pub struct Round {
    /// Records purged.
    pub purged: u64,
    /// Live records seen (the pass's running count makes `persist_items`).
    pub live: u64,
    /// Where the next round starts; `None` when the walk reached the end.
    pub cursor: Option<Vec<u8>>,
}

/// One round from `cursor` (exclusive).
pub fn sweep_round(engine: &Engine, store: &DiskStore, cursor: Option<Vec<u8>>) -> Round {
    use std::ops::Bound;
    let now = store.clock.now_secs();
    let lower = cursor.map_or(Bound::Unbounded, Bound::Excluded);
    let mut dead = Vec::new();
    let mut last = None;
    let mut live = 0;
    for (seen, kv) in store
        .items
        .range::<Vec<u8>, _>((lower, Bound::Unbounded))
        .enumerate()
    {
        if seen == PER_ROUND {
            break;
        }
        let Ok((k, v)) = kv.into_inner() else { break };
        if store.is_dead_record(&v, now) {
            dead.push(k.to_vec());
        } else {
            live += 1;
        }
        last = Some(k.to_vec());
    }
    let mut purged = 0;
    for key in &dead {
        match engine.with_key_locked(key, || store.purge_if_dead(key)) {
            Ok(true) => purged += 1,
            // Rewritten meanwhile: alive after all.
            Ok(false) => live += 1,
            Err(_) => {}
        }
    }
    Round {
        purged,
        live,
        cursor: last,
    }
}

/// Sweeps every `every` for as long as the engine lives.
pub(crate) fn spawn(engine: &Arc<Engine>, store: &Arc<DiskStore>, every: Duration) {
    let (we, ws): (Weak<Engine>, Weak<DiskStore>) = (Arc::downgrade(engine), Arc::downgrade(store));
    let _ = std::thread::Builder::new()
        .name("memkit-sweep".into())
        .spawn(move || {
            let (mut cursor, mut live) = (None, 0);
            loop {
                std::thread::sleep(every);
                let (Some(e), Some(s)) = (we.upgrade(), ws.upgrade()) else {
                    return;
                };
                let r = sweep_round(&e, &s, cursor);
                // fjall's files made since the last round (`files.rs`).
                crate::files::make_private(&s.dir);
                live += r.live;
                cursor = r.cursor;
                if cursor.is_none() {
                    // A whole pass: publish its count of live records.
                    s.counted_items.store(std::mem::take(&mut live), Relaxed);
                }
            }
        });
}
