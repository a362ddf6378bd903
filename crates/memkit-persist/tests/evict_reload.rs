//! The model property test under the two things memory mode never does: items evicted from
//! RAM and reloaded from disk in the middle of a sequence, and the store closed and reopened
//! at random points. RAM is cut to 1 MiB and, where a step says so, filler writes push the
//! sequence's keys out of it, so the next command on them reads through from disk.

use std::sync::Arc;

use memkit_engine::{Embedded, EngineConfig};
use memkit_persist::{Durability, PersistOptions, Persistent};
use memkit_testkit::ops::{self, KEYS, Op};
use memkit_testkit::tempdir::{self, TempDir};
use memkit_types::blocking::block_on;
use memkit_types::{
    ArithOptions, ArithOutcome, DeleteOptions, DeleteOutcome, Exptime, GetOptions, Item,
    ManualClock, Memcache, Result, StoreOptions, Stored,
};
use parking_lot::Mutex;
use proptest::prelude::*;

/// What happens to the backend before an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Disturb {
    Nothing,
    /// Filler writes until none of the sequence's keys is resident in RAM.
    Evict,
    /// Close the store (dropping the engine and its RAM) and open it again.
    Reopen,
}

fn disturb() -> impl Strategy<Value = Disturb> {
    prop_oneof![
        // A reopen costs ~0.1-0.2 s (fjall's directory lock is retried every 100 ms while
        // the closed store's threads wind down): about two per sequence.
        8 => Just(Disturb::Nothing),
        2 => Just(Disturb::Evict),
        1 => Just(Disturb::Reopen),
    ]
}

/// A persistent engine that can be closed and reopened under the test's feet.
struct Reopening {
    dir: TempDir,
    clock: ManualClock,
    durability: Durability,
    cur: Mutex<Option<Persistent>>,
    /// Keys pushed out of RAM, and reopenings, over the run (checked to be non-zero).
    evicted: std::sync::atomic::AtomicU64,
    reopened: std::sync::atomic::AtomicU64,
}

impl Reopening {
    fn new(durability: Durability) -> Reopening {
        let r = Reopening {
            dir: tempdir::in_memory("persist-evict"),
            clock: ManualClock::default(),
            durability,
            cur: Mutex::new(None),
            evicted: Default::default(),
            reopened: Default::default(),
        };
        r.open();
        r
    }

    fn open(&self) {
        let opts = PersistOptions {
            durability: self.durability,
            ..PersistOptions::new(self.dir.path().join("store"))
        };
        let cfg = EngineConfig::with_memory(16 << 20).clock(Arc::new(self.clock.clone()));
        let p = memkit_persist::open(&opts, cfg).unwrap();
        // RAM far below what the fillers write: 1 MiB (the engine's floor).
        p.engine.set_memory_limit(1 << 20);
        *self.cur.lock() = Some(p);
    }

    fn now(&self) -> Embedded {
        Embedded::from(self.cur.lock().as_ref().expect("open").engine.clone())
    }

    fn resident(&self) -> usize {
        let mut n = 0;
        let p = self.cur.lock();
        p.as_ref().unwrap().engine.for_each_item(|m| {
            n += usize::from(KEYS.iter().any(|k| k.as_bytes() == m.key));
        });
        n
    }

    fn disturb(&self, d: Disturb) {
        use std::sync::atomic::Ordering::Relaxed;
        match d {
            Disturb::Nothing => {}
            Disturb::Evict => {
                let before = self.resident();
                let engine = self.cur.lock().as_ref().unwrap().engine.clone();
                let filler = vec![b'f'; 16 << 10];
                for round in 0..8 {
                    if self.resident() == 0 {
                        break;
                    }
                    for i in 0..64 {
                        let key = format!("filler:{}", (round * 64 + i) % 256);
                        // Fillers are outside KEYS: the model never sees them.
                        engine
                            .store(key.as_bytes(), &filler, &StoreOptions::default())
                            .unwrap();
                    }
                }
                self.evicted
                    .fetch_add((before - self.resident()) as u64, Relaxed);
            }
            Disturb::Reopen => {
                // Drop every handle first: fjall allows one open database per directory.
                drop(self.cur.lock().take());
                self.open();
                self.reopened.fetch_add(1, Relaxed);
            }
        }
    }
}

impl Memcache for Reopening {
    async fn get_multi(&self, keys: &[&[u8]], opts: &GetOptions) -> Result<Vec<Option<Item>>> {
        self.now().get_multi(keys, opts).await
    }
    async fn store(&self, key: &[u8], value: &[u8], opts: &StoreOptions) -> Result<Stored> {
        self.now().store(key, value, opts).await
    }
    async fn delete_with(&self, key: &[u8], opts: &DeleteOptions) -> Result<DeleteOutcome> {
        self.now().delete_with(key, opts).await
    }
    async fn arithmetic(&self, key: &[u8], opts: &ArithOptions) -> Result<ArithOutcome> {
        self.now().arithmetic(key, opts).await
    }
    async fn touch(&self, key: &[u8], exptime: Exptime) -> Result<bool> {
        self.now().touch(key, exptime).await
    }
    async fn flush_all(&self, delay: u32) -> Result<()> {
        self.now().flush_all(delay).await
    }
}

fn run(ops: &[Op], disturbs: &[Disturb], durability: Durability) -> (u64, u64, u64) {
    let r = Reopening::new(durability);
    let clock = r.clock.clone();
    let between = |i: usize| r.disturb(disturbs.get(i).copied().unwrap_or(Disturb::Nothing));
    // `h` (fetched) is a RAM-only hint in persistent mode: persisting it would cost a disk
    // write on the first read of every version. Everything else must match.
    let opts = ops::CompareOptions {
        ignore_fetched: true,
        ..Default::default()
    };
    let res = block_on(ops::compare_with(&r, &clock, ops, &opts, between));
    if let Err(e) = res {
        panic!("{e}\n  disturbances: {disturbs:?}");
    }
    use std::sync::atomic::Ordering::Relaxed;
    let loads = r.cur.lock().as_ref().unwrap().store.stats().loads;
    (r.evicted.load(Relaxed), r.reopened.load(Relaxed), loads)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn evicted_reloaded_and_reopened_the_engine_agrees_with_the_model(
        steps in prop::collection::vec((ops::op(), disturb()), 1..40),
        sync in any::<bool>(),
    ) {
        let (ops, disturbs): (Vec<Op>, Vec<Disturb>) = steps.into_iter().unzip();
        let durability = if sync { Durability::Sync } else { Durability::None };
        run(&ops, &disturbs, durability);
    }
}

/// The property above only means something if RAM really lost keys the sequence then
/// needed from disk: a fixed sequence that must evict, reload and reopen.
#[test]
fn the_disturbances_really_evict_and_reload() {
    let set = |key| Op::Store {
        key,
        value: b"1".to_vec(),
        opts: StoreOptions::default(),
        cas: None,
    };
    let get = Op::Get {
        keys: KEYS.to_vec(),
        opts: GetOptions::default(),
    };
    let ops = [set("a"), set("b"), get.clone(), set("num"), get];
    let d = [
        Disturb::Nothing,
        Disturb::Nothing,
        Disturb::Evict,
        Disturb::Reopen,
        Disturb::Evict,
    ];
    let (evicted, reopened, loads) = run(&ops, &d, Durability::Sync);
    assert!(evicted >= 2, "evicted {evicted}");
    assert_eq!(reopened, 1);
    assert!(loads >= 2, "loads {loads}");
}

/// Found by the property: a delayed `flush_all` that comes due in the second it was given
/// (memcached's `realtime(delay) - 1`), an item written in that second, then a restart.
#[test]
fn delayed_flush_in_its_own_second_across_a_reopen() {
    let ops = [
        Op::FlushAll { delay: 1 },
        Op::Arith {
            key: "a",
            opts: ArithOptions {
                vivify: Some((0, Exptime(0))),
                ..ArithOptions::default()
            },
            cas: None,
        },
        Op::Get {
            keys: vec!["a"],
            opts: GetOptions::default(),
        },
    ];
    let d = [Disturb::Nothing, Disturb::Reopen, Disturb::Nothing];
    run(&ops, &d, Durability::None);
}

/// Found by the property: `flush_all 1` then `flush_all 0` in one second, a `set`, and an
/// eviction: the disk kept the delayed flush's second and voided the acknowledged `set`.
#[test]
fn an_immediate_flush_replaces_a_delayed_one_on_disk() {
    let ops = [
        Op::FlushAll { delay: 1 },
        Op::FlushAll { delay: 0 },
        Op::Store {
            key: "a",
            value: Vec::new(),
            opts: StoreOptions::default(),
            cas: None,
        },
        Op::Get {
            keys: vec!["a"],
            opts: GetOptions::default(),
        },
    ];
    let d = [
        Disturb::Nothing,
        Disturb::Nothing,
        Disturb::Nothing,
        Disturb::Evict,
    ];
    run(&ops, &d, Durability::None);
}

/// Found by the property: `flush_all 1` then `flush_all 2` in one second, a `set`, and an
/// eviction: the disk let the first (due) flush go on voiding the rest of its second.
#[test]
fn a_delayed_flush_replaces_a_due_one_on_disk() {
    let ops = [
        Op::FlushAll { delay: 1 },
        Op::FlushAll { delay: 2 },
        Op::Store {
            key: "a",
            value: Vec::new(),
            opts: StoreOptions::default(),
            cas: None,
        },
        Op::Get {
            keys: vec!["a"],
            opts: GetOptions::default(),
        },
        Op::Advance { millis: 2000 },
        Op::Get {
            keys: vec!["a"],
            opts: GetOptions::default(),
        },
    ];
    use Disturb::*;
    run(
        &ops,
        &[Nothing, Nothing, Nothing, Evict, Nothing, Reopen],
        Durability::None,
    );
}
