//! The sweeper: purges expired and flushed items from disk over time.
//!
//! Reads already treat such items as gone (and remove them when they meet them); the
//! sweeper takes back the disk space of the ones nobody reads. It walks the `items`
//! keyspace in key order, a bounded slice per round, remembering where it stopped. A record
//! that looks dead is re-checked and removed with its key's shard locked, so a write racing
//! the sweeper is never undone.

use std::sync::{Arc, Weak};
use std::time::Duration;

use memkit_engine::Engine;

use crate::disk::DiskStore;

/// Records examined per round.
const PER_ROUND: usize = 10_000;

/// One round from `cursor` (exclusive); returns the number purged and the new cursor
/// (`None` when the walk wrapped around).
pub fn sweep_round(
    engine: &Engine,
    store: &DiskStore,
    cursor: Option<Vec<u8>>,
) -> (u64, Option<Vec<u8>>) {
    use std::ops::Bound;
    let now = store.clock.now_secs();
    let lower = cursor.map_or(Bound::Unbounded, Bound::Excluded);
    let mut dead = Vec::new();
    let mut last = None;
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
        }
        last = Some(k.to_vec());
    }
    let mut purged = 0;
    for key in &dead {
        if engine.with_key_locked(key, || store.purge_if_dead(key)) == Ok(true) {
            purged += 1;
        }
    }
    (purged, last)
}

/// Sweeps every `every` for as long as the engine lives.
pub(crate) fn spawn(engine: &Arc<Engine>, store: &Arc<DiskStore>, every: Duration) {
    let (we, ws): (Weak<Engine>, Weak<DiskStore>) = (Arc::downgrade(engine), Arc::downgrade(store));
    let _ = std::thread::Builder::new()
        .name("memkit-sweep".into())
        .spawn(move || {
            let mut cursor = None;
            loop {
                std::thread::sleep(every);
                let (Some(e), Some(s)) = (we.upgrade(), ws.upgrade()) else {
                    return;
                };
                cursor = sweep_round(&e, &s, cursor).1;
            }
        });
}
