//! The compare harness: two models agree on every sequence, a backend that numbers CAS
//! tokens differently still agrees, and a wrong backend is caught.

use std::future::Future;

use memkit_testkit::Model;
use memkit_testkit::ops::{self, CasRef, Op, compare};
use memkit_types::{
    ArithOptions, ArithOutcome, Cas, DeleteOptions, DeleteOutcome, Exptime, GetOptions, Item,
    ManualClock, Memcache, Result, StoreMode, StoreOptions, Stored, blocking::block_on,
};
use proptest::prelude::*;

/// The model, with every counter-issued CAS shifted: a legal, different numbering.
#[derive(Debug)]
struct Shifted(Model);

const SHIFT: Cas = 1_000_000;

fn out(c: Cas) -> Cas {
    if c == 0 || c >= 1 << 62 { c } else { c + SHIFT }
}

fn inn(c: Option<Cas>) -> Option<Cas> {
    c.map(|c| {
        if (SHIFT..1 << 62).contains(&c) {
            c - SHIFT
        } else {
            c
        }
    })
}

impl Memcache for Shifted {
    fn get_multi(
        &self,
        keys: &[&[u8]],
        opts: &GetOptions,
    ) -> impl Future<Output = Result<Vec<Option<Item>>>> + Send {
        let r = self.0.get_multi_now(keys, opts).map(|items| {
            items
                .into_iter()
                .map(|i| {
                    i.map(|i| Item {
                        cas: out(i.cas),
                        ..i
                    })
                })
                .collect()
        });
        std::future::ready(r)
    }
    fn store(
        &self,
        key: &[u8],
        value: &[u8],
        opts: &StoreOptions,
    ) -> impl Future<Output = Result<Stored>> + Send {
        let opts = StoreOptions {
            cas: inn(opts.cas),
            ..opts.clone()
        };
        let r = self.0.store_now(key, value, &opts).map(|s| Stored {
            cas: out(s.cas),
            ..s
        });
        std::future::ready(r)
    }
    fn delete_with(
        &self,
        key: &[u8],
        opts: &DeleteOptions,
    ) -> impl Future<Output = Result<DeleteOutcome>> + Send {
        let opts = DeleteOptions {
            cas: inn(opts.cas),
            ..opts.clone()
        };
        std::future::ready(self.0.delete_now(key, &opts))
    }
    fn arithmetic(
        &self,
        key: &[u8],
        opts: &ArithOptions,
    ) -> impl Future<Output = Result<ArithOutcome>> + Send {
        let opts = ArithOptions {
            cas: inn(opts.cas),
            ..opts.clone()
        };
        let r = self.0.arithmetic_now(key, &opts).map(|o| match o {
            ArithOutcome::Value { value, cas, ttl } => ArithOutcome::Value {
                value,
                cas: out(cas),
                ttl,
            },
            o => o,
        });
        std::future::ready(r)
    }
    fn touch(&self, key: &[u8], exptime: Exptime) -> impl Future<Output = Result<bool>> + Send {
        std::future::ready(self.0.touch_now(key, exptime))
    }
    fn flush_all(&self, delay: u32) -> impl Future<Output = Result<()>> + Send {
        std::future::ready(self.0.flush_all_now(delay))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn model_agrees_with_model(ops in ops::ops(1..80)) {
        let clock = ManualClock::default();
        let backend = Model::new(clock.clone());
        block_on(compare(&backend, &clock, &ops)).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn cas_numbering_does_not_matter(ops in ops::ops(1..80)) {
        let clock = ManualClock::default();
        let backend = Shifted(Model::new(clock.clone()));
        block_on(compare(&backend, &clock, &ops)).map_err(TestCaseError::fail)?;
    }
}

fn set(key: &'static str, value: &[u8]) -> Op {
    Op::Store {
        key,
        value: value.to_vec(),
        opts: StoreOptions::new(StoreMode::Set, 0, Exptime::NEVER),
        cas: None,
    }
}

#[test]
fn a_wrong_value_is_reported_with_its_index() {
    let clock = ManualClock::default();
    let backend = Model::new(clock.clone());
    // The backend already holds something the model does not.
    block_on(backend.set(b"b", b"x", 0, Exptime::NEVER)).unwrap();
    let ops = [
        set("a", b"1"),
        Op::Get {
            keys: vec!["b"],
            opts: GetOptions::default(),
        },
    ];
    let err = block_on(compare(&backend, &clock, &ops)).unwrap_err();
    assert!(err.starts_with("op #1 "), "{err}");
}

#[test]
fn a_reused_cas_is_reported() {
    // A backend that answers every read with the same CAS breaks "unique per modification".
    #[derive(Debug)]
    struct SameCas(Model);
    impl Memcache for SameCas {
        fn get_multi(
            &self,
            keys: &[&[u8]],
            opts: &GetOptions,
        ) -> impl Future<Output = Result<Vec<Option<Item>>>> + Send {
            let r = self.0.get_multi_now(keys, opts).map(|items| {
                items
                    .into_iter()
                    .map(|i| i.map(|i| Item { cas: 42, ..i }))
                    .collect()
            });
            std::future::ready(r)
        }
        fn store(
            &self,
            k: &[u8],
            v: &[u8],
            o: &StoreOptions,
        ) -> impl Future<Output = Result<Stored>> + Send {
            std::future::ready(self.0.store_now(k, v, o))
        }
        fn delete_with(
            &self,
            k: &[u8],
            o: &DeleteOptions,
        ) -> impl Future<Output = Result<DeleteOutcome>> + Send {
            std::future::ready(self.0.delete_now(k, o))
        }
        fn arithmetic(
            &self,
            k: &[u8],
            o: &ArithOptions,
        ) -> impl Future<Output = Result<ArithOutcome>> + Send {
            std::future::ready(self.0.arithmetic_now(k, o))
        }
        fn touch(&self, k: &[u8], e: Exptime) -> impl Future<Output = Result<bool>> + Send {
            std::future::ready(self.0.touch_now(k, e))
        }
        fn flush_all(&self, d: u32) -> impl Future<Output = Result<()>> + Send {
            std::future::ready(self.0.flush_all_now(d))
        }
    }
    let clock = ManualClock::default();
    let backend = SameCas(Model::new(clock.clone()));
    let read = |k| Op::Get {
        keys: vec![k],
        opts: GetOptions::default(),
    };
    let ops = [set("a", b"1"), set("b", b"2"), read("a"), read("b")];
    let err = block_on(compare(&backend, &clock, &ops)).unwrap_err();
    assert!(
        err.starts_with("op #2 ") || err.starts_with("op #3 "),
        "{err}"
    );
    // And cas ops resolve against each side's own tokens.
    let ops = [
        set("a", b"1"),
        read("a"),
        Op::Store {
            key: "a",
            value: b"2".to_vec(),
            opts: StoreOptions::default(),
            cas: Some(CasRef::LastSeen),
        },
    ];
    assert!(block_on(compare(&backend, &clock, &ops)).is_err());
}

#[test]
fn suite_does_not_depend_on_cas_numbering() {
    let clock = ManualClock::default();
    let backend = Shifted(Model::new(clock.clone()));
    block_on(memkit_testkit::suite::run(&backend, &clock)).assert_all_passed();
}
