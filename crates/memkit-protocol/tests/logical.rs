//! One logical command set, three encodings: every [`Command`] an encoding can carry
//! survives encode → decode in it. The client encodes with the same mappings
//! (`MetaFlags::for_*`, `StoreCmd::for_options`, `binary::encode_command`) that the server
//! decodes with (`MetaFlags::*_options`, `Request::command`, `binary::Request::command`),
//! so a drift between the two ends fails here.

use memkit_protocol::binary::{self, Auth};
use memkit_protocol::command::{exp32, get_options};
use memkit_protocol::{
    Command, Limits, MetaFlags, Request, StoreCmd, Words, decode_request, encode_request,
};
use memkit_types::{
    ArithMode, ArithOptions, DeleteOptions, Exptime, GetOptions, StoreMode, StoreOptions,
};
use proptest::prelude::*;

/// A command's owned material: key, value and options.
#[derive(Debug, Clone)]
enum Owned {
    Get(Vec<u8>, GetOptions),
    Store(Vec<u8>, Vec<u8>, StoreOptions),
    Delete(Vec<u8>, DeleteOptions),
    Arith(Vec<u8>, ArithOptions),
    Touch(Vec<u8>, Exptime),
    Flush(u32),
}

impl Owned {
    fn command(&self) -> Command<'_> {
        match self {
            Owned::Get(k, o) => Command::Get {
                key: k,
                opts: o.clone(),
            },
            Owned::Store(k, d, o) => Command::Store {
                key: k,
                data: d,
                opts: o.clone(),
            },
            Owned::Delete(k, o) => Command::Delete {
                key: k,
                opts: o.clone(),
            },
            Owned::Arith(k, o) => Command::Arith {
                key: k,
                opts: o.clone(),
            },
            Owned::Touch(k, e) => Command::Touch {
                key: k,
                exptime: *e,
            },
            Owned::Flush(d) => Command::Flush { delay: *d },
        }
    }
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![b'a'..=b'z', b'0'..=b'9', Just(b':'), Just(b'_')],
        1..=250,
    )
}

fn data() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..64)
}

fn exptime() -> impl Strategy<Value = Exptime> {
    prop_oneof![
        Just(0i64),
        -5i64..5,
        1i64..2_592_000,
        any::<i32>().prop_map(i64::from)
    ]
    .prop_map(Exptime)
}

fn mode() -> impl Strategy<Value = StoreMode> {
    prop_oneof![
        Just(StoreMode::Set),
        Just(StoreMode::Add),
        Just(StoreMode::Replace),
        Just(StoreMode::Append),
        Just(StoreMode::Prepend),
    ]
}

fn arith_mode() -> impl Strategy<Value = ArithMode> {
    prop_oneof![Just(ArithMode::Incr), Just(ArithMode::Decr)]
}

/// Every option the meta protocol can carry.
fn meta_command() -> impl Strategy<Value = Owned> {
    let get = (
        key(),
        proptest::option::of(exptime()),
        proptest::option::of(exptime()),
        proptest::option::of(0..=i32::MAX as u32),
        any::<(bool, bool, bool, bool)>(),
        proptest::option::of(1..u64::MAX),
    )
        .prop_map(
            |(k, touch, vivify, recache, (meta, no_bump, t_first, tv_first), new_cas)| {
                // `t` before `T` (`N`) says something only with a `t` and a `T` (`N`); and
                // with `N` before `t` before `T`, the later `T` gives a created item its TTL.
                let ttl_before_touch = t_first && meta && touch.is_some();
                let ttl_before_vivify = tv_first && meta && vivify.is_some();
                let vivify = match (ttl_before_touch, ttl_before_vivify, vivify) {
                    (true, false, Some(_)) => touch,
                    (.., v) => v,
                };
                let opts = GetOptions {
                    touch,
                    vivify,
                    recache_below: recache,
                    meta,
                    ttl_before_touch,
                    ttl_before_vivify,
                    no_bump,
                    new_cas,
                    classic: false,
                    replica: None,
                };
                Owned::Get(k, opts)
            },
        );
    let store = (
        key(),
        data(),
        mode(),
        any::<u32>(),
        exptime(),
        proptest::option::of(1..u64::MAX),
        any::<bool>(),
        proptest::option::of(exptime()),
        proptest::option::of(1..u64::MAX),
    )
        .prop_map(
            |(k, d, mode, flags, exptime, cas, invalidate, vivify, new_cas)| {
                let opts = StoreOptions {
                    mode,
                    flags,
                    exptime,
                    cas,
                    invalidate,
                    vivify,
                    new_cas,
                };
                Owned::Store(k, d, opts)
            },
        );
    let delete = (
        key(),
        proptest::option::of(1..u64::MAX),
        any::<(bool, bool)>(),
        proptest::option::of(exptime()),
        proptest::option::of(1..u64::MAX),
    )
        .prop_map(|(k, cas, (invalidate, remove_value), stale_ttl, new_cas)| {
            let opts = DeleteOptions {
                cas,
                invalidate,
                stale_ttl,
                remove_value,
                new_cas,
            };
            Owned::Delete(k, opts)
        });
    let arith = (
        key(),
        arith_mode(),
        any::<u64>(),
        proptest::option::of((any::<u64>(), exptime())),
        proptest::option::of(1..u64::MAX),
        proptest::option::of(exptime()),
        proptest::option::of(1..u64::MAX),
    )
        .prop_map(|(k, mode, delta, vivify, cas, update_ttl, new_cas)| {
            let opts = ArithOptions {
                mode,
                delta,
                vivify,
                cas,
                update_ttl,
                new_cas,
            };
            Owned::Arith(k, opts)
        });
    prop_oneof![get, store, delete, arith]
}

/// What the classic text commands can carry.
fn text_command() -> impl Strategy<Value = Owned> {
    let get = (key(), proptest::option::of(any::<i32>()))
        .prop_map(|(k, touch)| Owned::Get(k, get_options(touch)));
    let store = (
        key(),
        data(),
        mode(),
        any::<u32>(),
        any::<i32>(),
        any::<u64>(),
    )
        .prop_map(|(k, d, mode, flags, exptime, cas)| {
            let cmd = match mode {
                StoreMode::Set if cas % 2 == 1 => StoreCmd::Cas(cas),
                StoreMode::Set => StoreCmd::Set,
                StoreMode::Add => StoreCmd::Add,
                StoreMode::Replace => StoreCmd::Replace,
                StoreMode::Append => StoreCmd::Append,
                StoreMode::Prepend => StoreCmd::Prepend,
            };
            Owned::Store(k, d, cmd.options(flags, exptime))
        });
    let arith = (key(), arith_mode(), any::<u64>()).prop_map(|(k, mode, delta)| {
        let opts = ArithOptions {
            mode,
            delta,
            ..Default::default()
        };
        Owned::Arith(k, opts)
    });
    let delete = key().prop_map(|k| Owned::Delete(k, DeleteOptions::default()));
    let touch = (key(), any::<i32>()).prop_map(|(k, e)| Owned::Touch(k, Exptime(e.into())));
    let flush = (0..=i32::MAX as u32).prop_map(Owned::Flush);
    prop_oneof![get, store, arith, delete, touch, flush]
}

/// What binary frames can carry.
fn binary_command() -> impl Strategy<Value = Owned> {
    let exp = any::<u32>().prop_map(|e| Exptime(e.into()));
    let get = (key(), proptest::option::of(exp.clone())).prop_map(|(k, touch)| {
        let opts = GetOptions {
            touch,
            classic: true,
            ..Default::default()
        };
        Owned::Get(k, opts)
    });
    let store = (
        key(),
        data(),
        mode(),
        any::<u32>(),
        exp.clone(),
        proptest::option::of(1..u64::MAX),
    )
        .prop_map(|(k, d, mode, flags, exptime, cas)| {
            let appending = matches!(mode, StoreMode::Append | StoreMode::Prepend);
            let plain = matches!(mode, StoreMode::Add | StoreMode::Replace);
            let opts = StoreOptions {
                cas: cas.filter(|_| !plain),
                ..StoreOptions::new(
                    mode,
                    if appending { 0 } else { flags },
                    if appending { Exptime(0) } else { exptime },
                )
            };
            Owned::Store(k, d, opts)
        });
    let delete = (key(), proptest::option::of(1..u64::MAX)).prop_map(|(k, cas)| {
        Owned::Delete(
            k,
            DeleteOptions {
                cas,
                ..Default::default()
            },
        )
    });
    let arith = (
        key(),
        arith_mode(),
        any::<u64>(),
        proptest::option::of((any::<u64>(), 0..u32::MAX)),
        proptest::option::of(1..u64::MAX),
    )
        .prop_map(|(k, mode, delta, vivify, cas)| {
            let opts = ArithOptions {
                mode,
                delta,
                vivify: vivify.map(|(i, e)| (i, Exptime(e.into()))),
                cas,
                ..Default::default()
            };
            Owned::Arith(k, opts)
        });
    let flush = any::<u32>().prop_map(Owned::Flush);
    prop_oneof![get, store, delete, arith, flush]
}

/// Client side of the text and meta encodings: the request carrying `cmd`.
fn text_request<'a>(cmd: &Command<'a>, meta: bool) -> Request<'a> {
    match cmd.clone() {
        Command::Get { key, opts } if meta => Request::MetaGet {
            key,
            flags: MetaFlags::for_get(&opts),
        },
        Command::Get { key, opts } => Request::Get {
            cas: false,
            touch: opts.touch.map(exp32),
            keys: Words::new(key),
        },
        Command::Store { key, data, opts } if meta => Request::MetaSet {
            key,
            flags: MetaFlags::for_store(&opts),
            data,
        },
        Command::Store { key, data, opts } => Request::Store {
            cmd: StoreCmd::for_options(&opts).expect("a text store"),
            key,
            flags: opts.flags,
            exptime: exp32(opts.exptime),
            data,
            noreply: false,
        },
        Command::Delete { key, opts } if meta => Request::MetaDelete {
            key,
            flags: MetaFlags::for_delete(&opts),
        },
        Command::Delete { key, .. } => Request::Delete {
            key,
            noreply: false,
        },
        Command::Arith { key, opts } if meta => Request::MetaArith {
            key,
            flags: MetaFlags::for_arith(&opts),
        },
        Command::Arith { key, opts } => Request::Arith {
            incr: opts.mode == ArithMode::Incr,
            key,
            delta: opts.delta,
            noreply: false,
        },
        Command::Touch { key, exptime } => Request::Touch {
            key,
            exptime: exp32(exptime),
            noreply: false,
        },
        Command::Flush { delay } => Request::FlushAll {
            delay: Some(delay as i32),
            noreply: false,
        },
    }
}

/// Encodes `owned` as text or meta, decodes it as the server does, compares.
fn text_round_trip(owned: &Owned, meta: bool) -> Result<(), TestCaseError> {
    let cmd = owned.command();
    let mut wire = Vec::new();
    encode_request(&text_request(&cmd, meta), &mut wire);
    let (req, used) = decode_request(&wire, &Limits::default()).map_err(|e| {
        TestCaseError::fail(format!("{e:?} for {:?}", String::from_utf8_lossy(&wire)))
    })?;
    prop_assert_eq!(used, wire.len());
    let key = owned
        .command()
        .key()
        .map(<[u8]>::to_vec)
        .unwrap_or_default();
    let key = &key[..];
    let back = match req {
        Request::Get { touch, keys, .. } => {
            prop_assert_eq!(keys.raw(), key);
            Command::Get {
                key,
                opts: get_options(touch),
            }
        }
        _ => req.command(key).expect("a storage command"),
    };
    prop_assert_eq!(back, cmd);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn text_commands_round_trip(owned in text_command()) {
        text_round_trip(&owned, false)?;
    }

    #[test]
    fn meta_commands_round_trip(owned in meta_command()) {
        text_round_trip(&owned, true)?;
    }

    #[test]
    fn binary_commands_round_trip(owned in binary_command(), opaque in any::<u32>()) {
        let cmd = owned.command();
        let mut wire = Vec::new();
        prop_assert!(binary::encode_command(&cmd, opaque, &mut wire).is_some(), "{:?}", cmd);
        let (req, used) = binary::decode_request(&wire, &Limits::default(), Auth::default())
            .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert_eq!(used, wire.len());
        prop_assert_eq!(req.opaque, opaque);
        prop_assert_eq!(req.command(), Some(cmd));
    }

    /// What one encoding cannot say, its encoder refuses rather than approximates.
    #[test]
    fn binary_refuses_meta_only_options(owned in meta_command()) {
        let cmd = owned.command();
        let mut wire = Vec::new();
        if binary::encode_command(&cmd, 0, &mut wire).is_some() {
            let (req, _) = binary::decode_request(&wire, &Limits::default(), Auth::default())
                .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            prop_assert_eq!(req.command(), Some(cmd));
        }
    }
}
