//! Tag invalidation: exactly the caches that carry a tag, also after the tag key was
//! evicted; a property test over random tag sets against a model.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use memkit_types::{Clock, ManualClock, Memcache};
use proptest::prelude::*;

use crate::caching::{Cache, Policy, Source, Tags, tag_key};
use crate::testing::{At, Op as TestOp, Scripted};

fn policy(tags: &[&str]) -> Policy {
    Policy::ttl(Duration::from_secs(3600)).tags(tags.iter().copied())
}

fn manual() -> (Cache<memkit_engine::Embedded>, ManualClock) {
    let clock = ManualClock::default();
    let c: Arc<dyn Clock> = Arc::new(clock.clone());
    (
        Cache::builder(super::embedded(c.clone())).clock(c).build(),
        clock,
    )
}

/// Reads `key` and says whether it was served from the cache (`true`) or rebuilt.
async fn cached(cache: &Cache<memkit_engine::Embedded>, key: &str, p: &Policy) -> bool {
    let f = cache
        .fetch(key, p, |_| async { Ok::<_, std::io::Error>(key.len()) })
        .await
        .unwrap();
    f.source == Source::Hit
}

#[tokio::test]
async fn invalidating_a_tag_drops_exactly_its_caches() {
    let (cache, clock) = manual();
    let caches: [(&str, &[&str]); 5] = [
        ("posts:page1", &["blog:35", "posts"]),
        ("posts:page2", &["blog:35", "posts"]),
        ("calendar", &["blog:35"]),
        ("rss", &["posts"]),
        ("other-blog", &["blog:36"]),
    ];
    for (k, t) in caches {
        assert!(!cached(&cache, k, &policy(t)).await);
        assert!(cached(&cache, k, &policy(t)).await);
    }
    clock.advance_millis(1);
    cache.invalidate_tag("blog:35").await.unwrap();
    for (k, t) in caches {
        let hit = cached(&cache, k, &policy(t)).await;
        assert_eq!(hit, !t.contains(&"blog:35"), "{k}");
    }
    // Same millisecond, second invalidation: still a new version.
    let v1 = cache.invalidate_tag("posts").await.unwrap();
    for (k, t) in caches {
        cached(&cache, k, &policy(t)).await;
    }
    let v2 = cache.invalidate_tag("posts").await.unwrap();
    assert!(v2 > v1);
    assert!(!cached(&cache, "rss", &policy(&["posts"])).await);
}

#[tokio::test]
async fn an_evicted_tag_key_invalidates_instead_of_validating() {
    let (cache, clock) = manual();
    let p = policy(&["blog:35"]);
    assert!(!cached(&cache, "calendar", &p).await);
    assert!(cached(&cache, "calendar", &p).await);
    assert!(!cached(&cache, "rss", &policy(&["posts"])).await);
    clock.advance_millis(1);
    // memcached evicts the tag key.
    assert!(
        cache
            .store()
            .delete(tag_key("blog:35").as_bytes())
            .await
            .unwrap()
    );
    assert!(
        !cached(&cache, "calendar", &p).await,
        "missing tag -> invalid"
    );
    assert!(
        cached(&cache, "calendar", &p).await,
        "rebuilt with a new tag version"
    );
    assert!(
        cached(&cache, "rss", &policy(&["posts"])).await,
        "other tags unaffected"
    );
    // Evicted, then invalidated: the new version (a timestamp) is still newer.
    cache
        .store()
        .delete(tag_key("blog:35").as_bytes())
        .await
        .unwrap();
    clock.advance_millis(1);
    cache.invalidate_tag("blog:35").await.unwrap();
    assert!(!cached(&cache, "calendar", &p).await);
}

#[tokio::test]
async fn an_invalidation_during_the_load_wins() {
    let (cache, clock) = manual();
    let p = policy(&["t"]);
    let c2 = cache.clone();
    // The loader reads the old rows; meanwhile the data changes and the tag is bumped.
    let f = cache
        .fetch("k", &p, |_| async move {
            clock.advance_millis(5);
            c2.invalidate_tag("t").await.unwrap();
            Ok::<_, std::io::Error>(String::from("old rows"))
        })
        .await
        .unwrap();
    assert_eq!(f.value, "old rows");
    assert!(
        !cached(&cache, "k", &p).await,
        "stored under the pre-load version"
    );
}

#[tokio::test]
async fn a_local_version_cache_sees_own_invalidations_at_once() {
    let clock = ManualClock::default();
    let c: Arc<dyn Clock> = Arc::new(clock.clone());
    let mc = super::embedded(c.clone());
    let cache = Cache::builder(mc.clone())
        .clock(c.clone())
        .tag_local_ttl(Duration::from_millis(500))
        .build();
    let other = Cache::builder(mc).clock(c).build();
    let p = policy(&["t"]);
    assert!(!cached(&cache, "k", &p).await);
    assert!(cached(&cache, "k", &p).await);
    cache.invalidate_tag("t").await.unwrap();
    assert!(
        !cached(&cache, "k", &p).await,
        "own invalidation seen at once"
    );
    clock.advance_millis(1);
    other.invalidate_tag("t").await.unwrap();
    assert!(
        cached(&cache, "k", &p).await,
        "another process's: seen up to 500 ms late"
    );
    clock.advance_millis(600);
    assert!(!cached(&cache, "k", &p).await);
}

/// This process reads a tag's version with a multi-get whose answer arrives late, and
/// meanwhile invalidates the tag itself. The late answer holds the older version: the
/// process-local cache must keep the newer one, or a value recorded under the older version
/// would pass as valid for the local cache's TTL.
#[tokio::test]
async fn a_local_version_cache_never_goes_back() {
    let clock = ManualClock::default();
    let c: Arc<dyn Clock> = Arc::new(clock.clone());
    let store = Scripted::new(super::embedded(c.clone()));
    let other = Tags::new(store.clone(), c.clone());
    let this = store.actor("this process");
    let tags = Tags::new(this.clone(), c).with_local_ttl(Duration::from_secs(60));
    let names = vec!["t".to_owned()];
    let v1 = other.invalidate("t").await.unwrap();
    let answer = this.pause(At::after(TestOp::Get, 1));
    let read = tokio::spawn({
        let (tags, names) = (tags.clone(), names.clone());
        async move { tags.versions(&names).await }
    });
    answer.reached().await; // the multi-get read v1; its answer is on its way
    clock.advance_millis(5);
    let v2 = tags.invalidate("t").await.unwrap();
    assert!(v2 > v1);
    answer.release();
    assert_eq!(read.await.unwrap().unwrap()[0].map(|v| v.version), Some(v1));
    assert_eq!(
        tags.versions(&names).await.unwrap()[0].map(|v| v.version),
        Some(v2),
        "the local cache went back to the older version"
    );
    assert!(!tags.still_valid(&[("t".to_owned(), v1)]).await.unwrap());
}

#[derive(Debug, Clone)]
enum Op {
    Read(usize),
    Invalidate(usize),
    EvictTag(usize),
    Tick(u64),
}

fn ops() -> impl Strategy<Value = (Vec<BTreeSet<usize>>, Vec<Op>)> {
    let tagsets = prop::collection::vec(prop::collection::btree_set(0..5usize, 0..4), 1..8);
    (tagsets, prop::collection::vec(0..4u8, 1..40)).prop_flat_map(|(sets, kinds)| {
        let n = sets.len();
        let ops: Vec<_> = kinds
            .into_iter()
            .map(move |k| match k {
                0 => (0..n).prop_map(Op::Read).boxed(),
                1 => (0..5usize).prop_map(Op::Invalidate).boxed(),
                2 => (0..5usize).prop_map(Op::EvictTag).boxed(),
                _ => (0..3u64).prop_map(Op::Tick).boxed(),
            })
            .collect();
        (Just(sets), ops)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Model: a cache is valid iff it was built and none of its tags was invalidated or
    /// lost since. Every read must agree (hit iff valid).
    #[test]
    fn reads_agree_with_the_model((sets, ops) in ops()) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let (cache, clock) = manual();
            let name = |t: usize| format!("tag{t}");
            let pol = |i: usize| {
                Policy::ttl(Duration::from_secs(3600)).tags(sets[i].iter().map(|&t| name(t)))
            };
            let mut valid = vec![false; sets.len()];
            for op in ops {
                match op {
                    Op::Read(i) => {
                        let hit = cached(&cache, &format!("c{i}"), &pol(i)).await;
                        prop_assert_eq!(hit, valid[i], "cache {} tags {:?}", i, sets[i]);
                        valid[i] = true;
                    }
                    Op::Invalidate(t) => {
                        cache.invalidate_tag(&name(t)).await.unwrap();
                        for (i, s) in sets.iter().enumerate() {
                            if s.contains(&t) { valid[i] = false; }
                        }
                    }
                    Op::EvictTag(t) => {
                        // The seed's assumption: a lost tag is re-created at a later
                        // millisecond than its last version (see the tags module docs).
                        // Versions can run ahead of the clock (`old + 1` when several
                        // invalidations share a millisecond), so step past the version,
                        // not merely past the clock's last reading.
                        let key = tag_key(&name(t));
                        let last = match cache.store().get(key.as_bytes()).await.unwrap() {
                            Some(it) => std::str::from_utf8(&it.value).unwrap().parse().unwrap(),
                            None => 0u64,
                        };
                        let now = clock.now_millis();
                        clock.advance_millis(last.max(now) + 1 - now);
                        cache.store().delete(key.as_bytes()).await.unwrap();
                        for (i, s) in sets.iter().enumerate() {
                            if s.contains(&t) { valid[i] = false; }
                        }
                    }
                    Op::Tick(ms) => clock.advance_millis(ms),
                }
            }
            Ok(())
        })?;
    }
}
