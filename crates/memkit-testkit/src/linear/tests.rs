//! The checker accepts what is linearizable (concurrent overlaps in either order, answers
//! lost in flight either way) and rejects a stale read, a lost write, a `cas` that won on
//! an overwritten version and an `incr` that skipped an increment; it also checks the
//! histories of a real concurrent store (threads around a mutex) and of a broken one.

use std::collections::HashMap;
use std::sync::Mutex;

use super::*;

fn set(v: &str) -> Op {
    Op::Set {
        value: v.as_bytes().to_vec(),
    }
}

fn hit(v: &str) -> Ret {
    Ret::Hit {
        value: v.as_bytes().to_vec(),
        cas: None,
    }
}

fn hit_cas(v: &str, cas: u64) -> Ret {
    Ret::Hit {
        value: v.as_bytes().to_vec(),
        cas: Some(cas),
    }
}

fn cas(read: &str, token: u64, value: &str) -> Op {
    Op::Cas {
        read: read.as_bytes().to_vec(),
        token,
        value: value.as_bytes().to_vec(),
    }
}

/// Runs `op` on `key` by `client` start to end.
fn run(h: &mut History, client: u32, key: &str, op: Op, ret: Ret) {
    let id = h.invoke(client, key, op);
    h.complete(id, ret);
}

#[test]
fn accepts_a_sequential_history_of_every_operation() {
    let mut h = History::new();
    run(&mut h, 0, "k", Op::Get, Ret::Miss);
    run(&mut h, 0, "k", Op::Incr { delta: 1 }, Ret::NotFound);
    run(&mut h, 0, "k", set("10"), Ret::Stored);
    run(&mut h, 1, "k", Op::Incr { delta: 5 }, Ret::Number(15));
    run(&mut h, 1, "k", Op::Gets, hit_cas("15", 7));
    run(&mut h, 0, "k", cas("15", 7, "a"), Ret::Stored);
    run(&mut h, 1, "k", cas("15", 7, "b"), Ret::Exists);
    run(&mut h, 1, "k", Op::Incr { delta: 1 }, Ret::NonNumeric);
    run(&mut h, 0, "k", Op::Get, hit("a"));
    run(&mut h, 0, "k", Op::Delete, Ret::Deleted);
    run(&mut h, 1, "k", cas("a", 9, "c"), Ret::NotFound);
    run(&mut h, 1, "k", Op::Delete, Ret::NotFound);
    run(&mut h, 1, "other", Op::Get, Ret::Miss);
    assert_eq!(check(&h), Ok(()));
}

#[test]
fn accepts_overlapping_writes_seen_in_either_order() {
    // c0 |---- set a ----|
    // c1 |---- set b ----|
    // c2   |get b| |get a|      b, then a: both sets overlap both reads' span.
    let mut h = History::new();
    let a = h.invoke(0, "k", set("a"));
    let b = h.invoke(1, "k", set("b"));
    run(&mut h, 2, "k", Op::Get, hit("b"));
    run(&mut h, 2, "k", Op::Get, hit("a"));
    h.complete(a, Ret::Stored);
    h.complete(b, Ret::Stored);
    run(&mut h, 2, "k", Op::Get, hit("a"));
    assert_eq!(check(&h), Ok(()));
}

#[test]
fn accepts_a_read_overlapping_a_write_seeing_either_value() {
    let mut h = History::new();
    run(&mut h, 0, "k", set("old"), Ret::Stored);
    let w = h.invoke(0, "k", set("new"));
    run(&mut h, 1, "k", Op::Get, hit("new"));
    run(&mut h, 2, "k", Op::Get, hit("new"));
    h.complete(w, Ret::Stored);
    let w2 = h.invoke(0, "k", set("newer"));
    run(&mut h, 1, "k", Op::Get, hit("new"));
    h.complete(w2, Ret::Stored);
    assert_eq!(check(&h), Ok(()));
}

#[test]
fn an_unanswered_write_may_land_late_or_never() {
    // Landed long after its client gave up: a later read sees it.
    let mut h = History::new();
    h.invoke(0, "k", set("lost-in-flight"));
    run(&mut h, 1, "k", Op::Get, Ret::Miss);
    run(&mut h, 1, "k", Op::Get, hit("lost-in-flight"));
    // Never landed: the last write wins.
    h.invoke(0, "j", set("never"));
    run(&mut h, 1, "j", set("x"), Ret::Stored);
    run(&mut h, 1, "j", Op::Get, hit("x"));
    // An unanswered incr counted once, not twice; an unanswered read is ignored.
    run(&mut h, 0, "n", set("0"), Ret::Stored);
    h.invoke(0, "n", Op::Incr { delta: 1 });
    h.invoke(2, "n", Op::Get);
    run(&mut h, 1, "n", Op::Incr { delta: 1 }, Ret::Number(2));
    assert_eq!(check(&h), Ok(()));

    let mut twice = History::new();
    run(&mut twice, 0, "n", set("0"), Ret::Stored);
    twice.invoke(0, "n", Op::Incr { delta: 1 });
    run(&mut twice, 1, "n", Op::Incr { delta: 1 }, Ret::Number(3));
    assert!(check(&twice).is_err(), "one lost incr cannot count twice");
}

#[test]
fn rejects_a_stale_read() {
    let mut h = History::new();
    run(&mut h, 0, "k", set("v1"), Ret::Stored);
    run(&mut h, 0, "k", set("v2"), Ret::Stored);
    run(&mut h, 1, "k", Op::Get, hit("v2"));
    run(&mut h, 2, "k", Op::Get, hit("v1"));
    let err = check(&h).unwrap_err();
    assert!(err.contains("#3 client 2"), "names the stale read: {err}");
    assert!(
        err.contains("<- here") && err.contains("set \"v2\""),
        "{err}"
    );
}

#[test]
fn rejects_a_lost_write() {
    let mut h = History::new();
    run(&mut h, 0, "k", set("v1"), Ret::Stored);
    run(&mut h, 1, "k", Op::Get, Ret::Miss);
    let err = check(&h).unwrap_err();
    assert!(err.contains("#1 client 1") && err.contains("miss"), "{err}");

    // Overwritten by nothing: a later write's read-back shows the earlier value.
    let mut h = History::new();
    run(&mut h, 0, "k", set("v1"), Ret::Stored);
    run(&mut h, 0, "k", set("v2"), Ret::Stored);
    run(&mut h, 1, "k", Op::Incr { delta: 1 }, Ret::NonNumeric);
    run(&mut h, 1, "k", Op::Get, hit("v1"));
    assert!(check(&h).is_err());
}

#[test]
fn rejects_a_cas_that_won_on_an_overwritten_version() {
    let mut h = History::new();
    run(&mut h, 0, "k", set("v1"), Ret::Stored);
    run(&mut h, 1, "k", Op::Gets, hit_cas("v1", 10));
    run(&mut h, 0, "k", set("v2"), Ret::Stored);
    run(&mut h, 1, "k", cas("v1", 10, "v3"), Ret::Stored);
    let err = check(&h).unwrap_err();
    assert!(
        err.contains("cas \"v3\"") && err.contains("<- here"),
        "{err}"
    );

    // An incr makes a new version too: a token read before it is stale.
    let mut h = History::new();
    run(&mut h, 0, "k", set("5"), Ret::Stored);
    run(&mut h, 1, "k", Op::Gets, hit_cas("5", 3));
    run(&mut h, 0, "k", Op::Incr { delta: 1 }, Ret::Number(6));
    run(&mut h, 1, "k", cas("5", 3, "w"), Ret::Stored);
    assert!(check(&h).is_err());

    // Concurrent with the overwrite, either outcome is fine.
    for ret in [Ret::Stored, Ret::Exists] {
        let mut h = History::new();
        run(&mut h, 0, "k", set("v1"), Ret::Stored);
        run(&mut h, 1, "k", Op::Gets, hit_cas("v1", 10));
        let w = h.invoke(0, "k", set("v2"));
        run(&mut h, 1, "k", cas("v1", 10, "v3"), ret);
        h.complete(w, Ret::Stored);
        assert_eq!(check(&h), Ok(()));
    }
}

#[test]
fn rejects_an_incr_that_skipped_an_increment() {
    let mut h = History::new();
    run(&mut h, 0, "k", set("100"), Ret::Stored);
    run(&mut h, 0, "k", Op::Incr { delta: 1 }, Ret::Number(101));
    run(&mut h, 1, "k", Op::Incr { delta: 1 }, Ret::Number(103));
    assert!(check(&h).is_err());

    // Two overlapping increments may not both see 100 (a lost update).
    let mut h = History::new();
    run(&mut h, 0, "k", set("100"), Ret::Stored);
    let a = h.invoke(0, "k", Op::Incr { delta: 1 });
    let b = h.invoke(1, "k", Op::Incr { delta: 1 });
    h.complete(a, Ret::Number(101));
    h.complete(b, Ret::Number(101));
    assert!(check(&h).is_err());
}

#[test]
fn refuses_a_history_that_breaks_the_models_assumptions() {
    let mut h = History::new();
    run(&mut h, 0, "k", set("v"), Ret::Stored);
    run(&mut h, 0, "k", set("v"), Ret::Stored);
    assert!(check(&h).unwrap_err().contains("written twice"));

    let mut h = History::new();
    run(&mut h, 0, "k", set("v"), Ret::Stored);
    run(&mut h, 0, "k", Op::Gets, hit_cas("v", 1));
    run(&mut h, 0, "k", Op::Gets, hit_cas("v", 2));
    assert!(check(&h).unwrap_err().contains("two tokens"));

    let mut h = History::new();
    run(&mut h, 0, "k", set("v"), Ret::Stored);
    run(&mut h, 0, "k", Op::Gets, hit_cas("v", 1));
    run(&mut h, 0, "k", set("w"), Ret::Stored);
    run(&mut h, 0, "k", Op::Gets, hit_cas("w", 1));
    assert!(check(&h).unwrap_err().contains("two versions"));

    let mut h = History::new();
    run(&mut h, 0, "k", set("1"), Ret::Stored);
    run(&mut h, 0, "k", Op::Incr { delta: 1 }, Ret::Number(2));
    run(&mut h, 0, "k", set("2"), Ret::Stored);
    assert!(check(&h).unwrap_err().contains("ambiguous"));
}

/// A store to drive from threads: the model itself behind one mutex (linearizable by
/// construction), or with reads served from a copy refreshed every few writes (stale).
struct Store {
    /// The items (value, CAS) and the next CAS.
    items: Mutex<(Items, u64)>,
    stale_copy: Option<Mutex<Items>>,
}

type Items = HashMap<String, (Vec<u8>, u64)>;

impl Store {
    fn apply(&self, key: &str, op: &Op) -> Ret {
        let mut g = self.items.lock().unwrap();
        let (items, next_cas) = &mut *g;
        *next_cas += 1;
        let cur = items.get(key).cloned();
        if matches!(op, Op::Get | Op::Gets)
            && let Some(copy) = &self.stale_copy
        {
            let mut copy = copy.lock().unwrap();
            if *next_cas % 7 == 0 {
                *copy = items.clone();
            }
            return match copy.get(key) {
                None => Ret::Miss,
                Some((v, c)) => Ret::Hit {
                    value: v.clone(),
                    cas: matches!(op, Op::Gets).then_some(*c),
                },
            };
        }
        if let Op::Cas { token, value, .. } = op {
            return match &cur {
                None => Ret::NotFound,
                Some((_, c)) if c == token => {
                    items.insert(key.to_string(), (value.clone(), *next_cas));
                    Ret::Stored
                }
                Some(_) => Ret::Exists,
            };
        }
        let (ret, next) = model::apply(op, &cur.as_ref().map(|(v, _)| v.clone()));
        let ret = match (ret, &cur) {
            (Ret::Hit { value, .. }, Some((_, c))) if matches!(op, Op::Gets) => Ret::Hit {
                value,
                cas: Some(*c),
            },
            (ret, _) => ret,
        };
        let changed = next.as_ref() != cur.as_ref().map(|(v, _)| v);
        match next {
            None => {
                items.remove(key);
            }
            Some(v) if changed => {
                items.insert(key.to_string(), (v, *next_cas));
            }
            Some(_) => {}
        }
        ret
    }
}

/// Four threads, 250 operations each on two keys, recorded; returns the history.
fn drive(store: &Store) -> History {
    let rec = Recorder::new();
    std::thread::scope(|s| {
        for client in 0..4u32 {
            let rec = rec.clone();
            s.spawn(move || {
                let mut rng = crate::fuzz::Rng(0x9e37_79b9 + u64::from(client));
                let mut seen: HashMap<&str, (Vec<u8>, u64)> = HashMap::new();
                for seq in 0..250u64 {
                    let key = ["a", "b"][rng.below(2)];
                    let unique = (u64::from(client) + 1) << 40 | seq << 20;
                    let op = match rng.below(6) {
                        0 => set(&unique.to_string()),
                        1 => set(&format!("t{client}-{seq}")),
                        2 => Op::Gets,
                        3 => match seen.get(key) {
                            Some((v, t)) => {
                                cas(&String::from_utf8_lossy(v), *t, &format!("c{unique}"))
                            }
                            None => Op::Get,
                        },
                        4 => Op::Incr { delta: 1 },
                        _ => Op::Delete,
                    };
                    let id = rec.invoke(client, key, op.clone());
                    let ret = store.apply(key, &op);
                    if let Ret::Hit {
                        value,
                        cas: Some(t),
                    } = &ret
                    {
                        seen.insert(key, (value.clone(), *t));
                    }
                    rec.complete(id, ret);
                }
            });
        }
    });
    rec.history()
}

#[test]
fn checks_a_concurrent_store_and_catches_a_stale_one() {
    let good = Store {
        items: Mutex::default(),
        stale_copy: None,
    };
    let h = drive(&good);
    assert_eq!(h.operations().len(), 1000);
    assert_eq!(check(&h), Ok(()));

    let stale = Store {
        items: Mutex::default(),
        stale_copy: Some(Mutex::default()),
    };
    let err = check(&drive(&stale)).unwrap_err();
    assert!(err.contains("<- here"), "{err}");
}
