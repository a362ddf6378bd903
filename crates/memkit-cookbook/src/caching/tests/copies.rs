//! Hot-key duplication and replicated keys ([`Policy::hot_copies`], [`Policy::replicas`])
//! on the embedded store, time on tokio's paused clock.

use std::collections::BTreeMap;
use std::time::Duration;

use memkit_engine::Embedded;
use memkit_types::Memcache;

use super::{TokioClock, embedded};
use crate::Error;
use crate::caching::stampede::run;
use crate::caching::{Cache, Copies, MAX_COPIES, Policy, Protection, Source, copy_key};

const KEY: &str = "front-page";

fn cache(seed: u64) -> Cache<Embedded> {
    let clock = TokioClock::new();
    Cache::builder(embedded(clock.clone()))
        .clock(clock)
        .seed(seed)
        .build()
}

async fn raw(cache: &Cache<Embedded>, key: &str) -> Option<Vec<u8>> {
    cache
        .store()
        .get(key.as_bytes())
        .await
        .unwrap()
        .map(|i| i.value.to_vec())
}

async fn read(cache: &Cache<Embedded>, p: &Policy, v: u32) -> (u32, Source) {
    let f = cache
        .fetch(KEY, p, |_| async move { Ok::<_, std::io::Error>(v) })
        .await
        .unwrap();
    (f.value, f.source)
}

#[test]
fn options_and_names() {
    let p = Policy::ttl(Duration::from_secs(1));
    assert_eq!(p.copies, Copies::One);
    assert_eq!(p.clone().hot_copies(1).copies, Copies::One);
    assert_eq!(p.clone().replicas(0).copies, Copies::One);
    assert_eq!(p.clone().hot_copies(4).copies, Copies::Hot(4));
    assert_eq!(p.clone().replicas(3).copies, Copies::Replicas(3));
    assert_eq!(Copies::Hot(1000).count(), MAX_COPIES);
    assert_eq!(p.item_keys("k"), ["k"]);
    assert_eq!(p.clone().replicas(3).item_keys("k"), ["k#0", "k#1", "k#2"]);
    assert_eq!(copy_key("k", 7), "k#7");
}

#[tokio::test(start_paused = true)]
async fn every_copy_is_written_and_removed() {
    for p in [
        Policy::ttl(Duration::from_secs(60)).hot_copies(4),
        Policy::ttl(Duration::from_secs(60)).replicas(4),
    ] {
        let c = cache(1);
        assert_eq!(read(&c, &p, 1).await, (1, Source::Computed));
        let first = raw(&c, &copy_key(KEY, 0)).await.expect("copy 0");
        for i in 1..4 {
            assert_eq!(raw(&c, &copy_key(KEY, i)).await.as_ref(), Some(&first));
        }
        assert_eq!(raw(&c, &copy_key(KEY, 4)).await, None);
        assert_eq!(
            raw(&c, KEY).await,
            None,
            "the logical key itself holds nothing"
        );
        assert_eq!(read(&c, &p, 2).await, (1, Source::Hit));
        // put writes every copy too.
        c.put(KEY, &p, &5u32).await.unwrap();
        for _ in 0..20 {
            assert_eq!(read(&c, &p, 2).await, (5, Source::Hit));
        }
        assert!(c.remove_with(KEY, &p).await.unwrap());
        for i in 0..4 {
            assert_eq!(raw(&c, &copy_key(KEY, i)).await, None);
        }
        assert!(!c.remove_with(KEY, &p).await.unwrap());
        assert_eq!(c.stats().loads, 1);
    }
}

#[tokio::test(start_paused = true)]
async fn hot_reads_spread_across_copies() {
    let c = cache(3);
    let one = Policy::ttl(Duration::from_secs(60));
    let hot = one.clone().hot_copies(4);
    // Mark each copy with its own value to see which one a read was served from.
    for i in 0..4 {
        c.put(&copy_key(KEY, i), &one, &(i as u32)).await.unwrap();
    }
    let mut seen = BTreeMap::new();
    for _ in 0..400 {
        let (v, s) = read(&c, &hot, 99).await;
        assert_eq!(s, Source::Hit);
        *seen.entry(v).or_insert(0) += 1;
    }
    assert_eq!(seen.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert!(seen.values().all(|&n| n >= 50), "{seen:?}");
    assert_eq!(c.stats().loads, 0);
    // Replicas always read copy 0 while it is there.
    let rep = one.clone().replicas(4);
    for _ in 0..50 {
        assert_eq!(read(&c, &rep, 99).await, (0, Source::Hit));
    }
}

#[tokio::test(start_paused = true)]
async fn a_lost_copy_is_served_from_another() {
    let c = cache(4);
    let rep = Policy::ttl(Duration::from_secs(60)).replicas(3);
    assert_eq!(read(&c, &rep, 1).await, (1, Source::Computed));
    c.store().delete(copy_key(KEY, 0).as_bytes()).await.unwrap();
    assert_eq!(read(&c, &rep, 2).await, (1, Source::Hit));
    c.store().delete(copy_key(KEY, 1).as_bytes()).await.unwrap();
    assert_eq!(read(&c, &rep, 2).await, (1, Source::Hit));
    c.store().delete(copy_key(KEY, 2).as_bytes()).await.unwrap();
    assert_eq!(read(&c, &rep, 2).await, (2, Source::Computed));
    assert_eq!(c.stats().loads, 2);

    // Hot keys fall back the same way when the random copy was evicted.
    let c = cache(5);
    let hot = Policy::ttl(Duration::from_secs(60)).hot_copies(4);
    assert_eq!(read(&c, &hot, 1).await, (1, Source::Computed));
    for i in [0, 1, 3] {
        c.store().delete(copy_key(KEY, i).as_bytes()).await.unwrap();
    }
    for _ in 0..40 {
        assert_eq!(read(&c, &hot, 2).await, (1, Source::Hit));
    }
    assert_eq!(c.stats().loads, 1);
}

#[tokio::test(start_paused = true)]
async fn tag_invalidation_covers_every_copy() {
    let c = cache(6);
    let hot = Policy::ttl(Duration::from_secs(60))
        .tags(["posts"])
        .hot_copies(3);
    // Each copy, read alone with the same tags, is a valid record.
    let alone = Policy::ttl(Duration::from_secs(60)).tags(["posts"]);
    assert_eq!(read(&c, &hot, 1).await, (1, Source::Computed));
    for i in 0..3 {
        assert_eq!(
            c.get::<u32>(&copy_key(KEY, i), &alone).await.unwrap(),
            Some(1)
        );
    }
    tokio::time::advance(Duration::from_millis(5)).await;
    c.invalidate_tag("posts").await.unwrap();
    for i in 0..3 {
        assert_eq!(
            c.get::<u32>(&copy_key(KEY, i), &alone).await.unwrap(),
            None,
            "copy {i} invalidated"
        );
    }
    assert_eq!(read(&c, &hot, 2).await, (2, Source::Computed));
    for _ in 0..30 {
        assert_eq!(read(&c, &hot, 3).await, (2, Source::Hit));
    }
    for i in 0..3 {
        assert_eq!(
            c.get::<u32>(&copy_key(KEY, i), &alone).await.unwrap(),
            Some(2)
        );
    }
    assert_eq!(c.stats().loads, 2);
}

#[tokio::test(start_paused = true)]
async fn the_stampede_still_loads_once_with_copies() {
    for (name, p) in [
        ("hot", Policy::ttl(Duration::from_secs(10)).hot_copies(4)),
        ("replicas", Policy::ttl(Duration::from_secs(10)).replicas(3)),
        (
            "hot + lease (runs as the lock)",
            Policy::ttl(Duration::from_secs(10))
                .protection(Protection::Lease)
                .hot_copies(4),
        ),
    ] {
        let p = p.no_jitter().max_wait(Duration::from_secs(1));
        // Cold.
        let c = cache(7);
        let r = run(&c, KEY, &p, 1000, Duration::from_millis(200)).await;
        assert_eq!(
            (r.loads, r.errors, r.stale, r.computed),
            (1, 0, 0, 1),
            "{name}"
        );
        for i in 0..p.copies.count() {
            assert!(
                raw(&c, &copy_key(KEY, i)).await.is_some(),
                "{name}: copy {i}"
            );
        }
        // Soft-expired, stale serving: one rebuild, everyone else stale.
        let p = p.serve_stale();
        tokio::time::advance(Duration::from_secs(11)).await;
        let r = run(&c, KEY, &p, 1000, Duration::from_millis(200)).await;
        assert_eq!(
            (r.loads, r.computed, r.stale, r.errors),
            (1, 1, 999, 0),
            "{name}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_copy_key_longer_than_250_bytes_is_refused() {
    let c = cache(8);
    let p = Policy::ttl(Duration::from_secs(10)).replicas(2);
    let long = "k".repeat(248);
    let r = c
        .fetch(&long, &p, |_| async { Ok::<_, std::io::Error>(1u8) })
        .await;
    assert!(
        matches!(r, Err(Error::Store(memkit_types::Error::InvalidKey))),
        "{r:?}"
    );
    // 247 bytes + "#1" fits.
    let ok = "k".repeat(247);
    c.put(&ok, &p, &1u8).await.unwrap();
    assert_eq!(c.get::<u8>(&ok, &p).await.unwrap(), Some(1));
}

/// A stand-in for a cluster's ring of `servers` servers: a key's server is a hash of it.
fn fake_ring(servers: usize) -> impl Fn(&[u8]) -> Option<usize> + Send + Sync + 'static {
    move |k: &[u8]| {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        k.hash(&mut h);
        Some((h.finish() % servers as u64) as usize)
    }
}

#[tokio::test(start_paused = true)]
async fn without_a_placement_copy_names_are_the_policys() {
    let p = Policy::ttl(Duration::from_secs(60));
    let unknown = Cache::builder(Embedded::with_defaults())
        .placement(|_| None)
        .build();
    for c in [cache(1), unknown] {
        for p in [p.clone(), p.clone().hot_copies(4), p.clone().replicas(3)] {
            assert_eq!(c.item_keys(KEY, &p).unwrap(), p.item_keys(KEY));
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_placement_spreads_copies_over_distinct_servers() {
    let ring = fake_ring(3);
    let c = Cache::builder(Embedded::with_defaults())
        .placement(fake_ring(3))
        .build();
    let servers = |names: &[String]| {
        let mut per = BTreeMap::new();
        for k in names {
            *per.entry(ring(k.as_bytes()).unwrap()).or_insert(0) += 1;
        }
        per.into_values().collect::<Vec<usize>>()
    };
    let mut crowded = 0;
    for i in 0..200 {
        let key = format!("hot:{i}");
        let three = Policy::ttl(Duration::from_secs(60)).hot_copies(3);
        if servers(&three.item_keys(&key)) != [1, 1, 1] {
            crowded += 1;
        }
        let names = c.item_keys(&key, &three).unwrap();
        assert_eq!(names[0], copy_key(&key, 0));
        assert_eq!(servers(&names), [1, 1, 1], "{names:?}");
        // More copies than servers: every server, evenly.
        let seven = c.item_keys(&key, &three.clone().hot_copies(7)).unwrap();
        let mut per = servers(&seven);
        per.sort();
        assert_eq!(per, [2, 2, 3], "{seven:?}");
        let distinct: std::collections::HashSet<_> = seven.iter().collect();
        assert_eq!(distinct.len(), 7);
    }
    assert!(
        crowded > 50,
        "the hash alone crowds copies: {crowded} of 200"
    );
}

#[tokio::test(start_paused = true)]
async fn copies_named_by_the_placement_are_written_read_and_removed() {
    let clock = TokioClock::new();
    let c = Cache::builder(embedded(clock.clone()))
        .clock(clock)
        .placement(fake_ring(3))
        .build();
    let hot = Policy::ttl(Duration::from_secs(60)).hot_copies(3);
    // A key the placement renames (a copy name other than `<key>#<i>`).
    let key = (0..1000)
        .map(|i| format!("hot:{i}"))
        .find(|k| c.item_keys(k, &hot).unwrap() != hot.item_keys(k))
        .expect("the placement renames some copies");
    let names = c.item_keys(&key, &hot).unwrap();
    c.put(&key, &hot, &7u32).await.unwrap();
    for k in &names {
        assert!(c.store().get(k.as_bytes()).await.unwrap().is_some(), "{k}");
    }
    for _ in 0..20 {
        let f = c
            .fetch(&key, &hot, |_| async { Ok::<_, std::io::Error>(8u32) })
            .await
            .unwrap();
        assert_eq!((f.value, f.source), (7, Source::Hit));
    }
    assert!(c.remove_with(&key, &hot).await.unwrap());
    for k in &names {
        assert!(c.store().get(k.as_bytes()).await.unwrap().is_none(), "{k}");
    }
}
