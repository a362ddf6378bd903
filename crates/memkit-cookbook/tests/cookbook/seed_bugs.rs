//! One test per flaw of the seeds' pseudocode (`docs/sources.md` lists the seeds), pinning
//! the fix.

use memkit_cookbook::*;
use memkit_types::{GetOptions, Memcache, Ttl};

use crate::support::{T0, dyn_clock, store};
use crate::units::{Ev, ev};

/// Seed: `unlock` deletes the key unconditionally. After our TTL ran out and B took the
/// lock, our late unlock freed B's lock and let C in beside B.
#[tokio::test]
async fn lock_unlock_never_frees_someone_elses_lock() {
    let (mc, clock) = store();
    let a = Lock::with_options(mc.clone(), "job", LockOptions::ttl_secs(2));
    let guard_a = a.try_lock().await.unwrap().unwrap();
    clock.advance(2); // A stalls past its TTL
    let guard_b = a
        .try_lock()
        .await
        .unwrap()
        .expect("B acquires the expired lock");
    assert!(
        !guard_a.unlock().await.unwrap(),
        "A's unlock reports the loss..."
    );
    assert!(
        guard_b.is_held().await.unwrap(),
        "...and leaves B's lock alone"
    );
    assert!(a.try_lock().await.unwrap().is_none(), "C still excluded");
    // What the seed did, for contrast: a plain delete would have freed it.
    assert!(mc.delete(a.key()).await.unwrap());
    assert!(a.try_lock().await.unwrap().is_some());
}

/// The seed's key-range arithmetic, transcribed: `firstKey < lastKey` reads the range,
/// anything else wraps — including `firstKey == lastKey`, which reads every key and the
/// first one twice.
fn seed_key_range(first: u64, last: u64, chunk: u64, n: u64) -> Vec<u64> {
    let (fk, lk) = (first / chunk % n, last / chunk % n);
    if fk < lk {
        (fk..=lk).collect()
    } else {
        (fk..n).chain(0..=lk).collect()
    }
}

/// Seed: `fetch` computed chunk indices modulo the ring before building the range, so a
/// range inside one chunk (firstKey == lastKey) read all keys and its own key twice,
/// returning its events twice. Here absolute chunk numbers are reduced only at the end.
#[tokio::test]
async fn event_log_fetch_reads_each_chunk_once() {
    let (mc, clock) = store();
    let log: EventLog<_, Ev> = EventLog::new(mc, "e", 10, 10, dyn_clock(&clock));
    clock.advance(35);
    for t in [31, 32, 33] {
        log.put(&ev(T0 + t, 0, t as u32)).await.unwrap();
    }
    let (first, last) = (T0 + 30, T0 + 35);
    let seed = seed_key_range(first, last, 10, 10);
    assert_eq!(seed.len(), 11, "the seed reads all 10 keys, key 3 twice");
    assert_eq!(seed.iter().filter(|&&k| k == 3).count(), 2);
    assert_eq!(
        log.chunks_for(Some(first), Some(last), T0 + 35),
        vec![(T0 + 30) / 10]
    );
    let got = log.fetch(Some(first), Some(last)).await.unwrap();
    assert_eq!(got.len(), 3, "no duplicates");

    // A range that wraps the ring reads exactly the chunks in order, each once.
    clock.advance(60); // now T0 + 95: chunks (T0+5..T0+95)/10 are in the ring
    let chunks = log.chunks_for(None, None, T0 + 95);
    assert_eq!(chunks.len(), 10);
    let slots: std::collections::BTreeSet<u64> = chunks.iter().map(|c| c % 10).collect();
    assert_eq!(slots.len(), 10, "ten distinct keys");
    assert!(chunks.windows(2).all(|w| w[1] == w[0] + 1));
    assert_eq!(log.fetch(None, None).await.unwrap().len(), 3);
}

/// Seed: array 2's `add` returned when `append` failed, so adding to a missing key did
/// nothing (and the `add` branch was unreachable). Here it falls through to `add`.
#[tokio::test]
async fn append_array_add_falls_through_to_add() {
    let (mc, _clock) = store();
    let a: AppendArray<_, u32> = AppendArray::new(mc.clone(), "first");
    assert!(mc.get(&a.keys()[0]).await.unwrap().is_none());
    a.add(&1).await.unwrap();
    assert_eq!(
        a.fetch().await.unwrap(),
        vec![1],
        "the first element is kept"
    );
    a.add(&2).await.unwrap();
    assert_eq!(a.fetch().await.unwrap(), vec![1, 2]);
}

/// Seed: `_active()` read `T` instead of `self.T`, and line 43 created the shadow key with
/// TTL `2T`, which outlives its read period when created late; the discussion's fix is
/// `2T - now % T`. The period is a field here; the shadow key lives to the end of the period
/// that reads it (plus the clock-skew margin), and the next period counts in a key of its
/// own, from zero.
#[tokio::test]
async fn visitor_counter_uses_its_period_and_compensates_expiry() {
    let (mc, clock) = store();
    let t = 60;
    let a = VisitorCounter::new(mc.clone(), "a", t, dyn_clock(&clock));
    let b = VisitorCounter::new(mc.clone(), "b", 300, dyn_clock(&clock));
    assert_eq!(a.period_at(T0 + 60), T0 / 60 + 1);
    assert_eq!(
        b.period_at(T0 + 60),
        T0 / 300,
        "each counter uses its own period"
    );

    clock.advance(t - 3); // 3 s before the end of a shadow period
    a.increment().await.unwrap();
    let [_, shadow] = a.keys_at(T0 + t - 3);
    let meta = GetOptions {
        meta: true,
        ..Default::default()
    };
    let ttl = mc.get_with(&shadow, &meta).await.unwrap().unwrap().ttl;
    let margin = MAX_CLOCK_SKEW_SECS as u32 + 1;
    assert_eq!(
        ttl,
        Some(Ttl::Secs((2 * t - (t - 3)) as u32 + margin)),
        "2T - now % T = T + 3, plus the margin"
    );
    clock.advance(3);
    assert_eq!(a.value().await.unwrap(), 1, "read during the next period");
    clock.advance(t);
    assert_eq!(a.value().await.unwrap(), 0, "the period after shows nobody");
    assert_eq!(
        a.increment().await.unwrap(),
        1,
        "a new period counts from zero"
    );
    clock.advance(u64::from(margin));
    assert!(
        mc.get(&shadow).await.unwrap().is_none(),
        "gone after the margin"
    );
}
