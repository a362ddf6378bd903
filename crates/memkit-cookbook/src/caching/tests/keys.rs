//! Property tests of the canonical key function.

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;
use serde_json::{Map, Number, Value};

use crate::caching::{cache_key, canonical};

/// JSON-shaped options. Floats are finite and non-integral, so structural equality of two
/// values is exactly the canonical equality the key promises (integral floats are covered
/// by a separate property).
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| Value::Number(i.into())),
        any::<u64>().prop_map(|u| Value::Number(u.into())),
        (-1e12f64..1e12)
            .prop_filter("non-integral", |f| f.fract() != 0.0)
            .prop_map(|f| Value::Number(Number::from_f64(f).unwrap())),
        "[a-z0-9 :\"\\\\\n\u{e9}]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[a-e]{1,3}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A value and a small mutation of it (often equal, often different in one leaf).
fn pair() -> impl Strategy<Value = (Value, Value)> {
    prop_oneof![
        value().prop_map(|v| (v.clone(), v)),
        (value(), value()),
        (value(), "[a-e]{1,3}", value()).prop_map(|(a, k, leaf)| {
            let mut b = a.clone();
            if let Value::Object(m) = &mut b {
                m.insert(k, leaf);
            } else if let Value::Array(v) = &mut b {
                v.push(leaf);
            } else {
                b = leaf;
            }
            (a, b)
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn equal_options_one_key_different_options_different_keys((a, b) in pair()) {
        let ka = cache_key("q", &a).unwrap();
        let kb = cache_key("q", &b).unwrap();
        prop_assert_eq!(a == b, ka == kb, "{} vs {}", canonical(&a).unwrap(), canonical(&b).unwrap());
    }

    #[test]
    fn map_order_and_integer_width_do_not_matter(
        entries in prop::collection::vec(("[a-z]{1,6}", any::<i32>()), 0..12),
        shuffle_seed in any::<u64>(),
    ) {
        let sorted: BTreeMap<String, i64> =
            entries.iter().map(|(k, v)| (k.clone(), i64::from(*v))).collect();
        // The same entries, inserted in another order into a randomly seeded HashMap.
        let mut shuffled: Vec<(String, i32)> =
            sorted.iter().map(|(k, v)| (k.clone(), *v as i32)).collect();
        let n = shuffled.len().max(1);
        shuffled.rotate_left((shuffle_seed as usize) % n);
        let hashed: HashMap<String, i32> = shuffled.into_iter().collect();
        // Integral floats are the same number.
        let floats: BTreeMap<String, f64> =
            sorted.iter().map(|(k, v)| (k.clone(), *v as f64)).collect();
        let k = cache_key("posts", &sorted).unwrap();
        prop_assert_eq!(&k, &cache_key("posts", &hashed).unwrap());
        prop_assert_eq!(&k, &cache_key("posts", &floats).unwrap());
    }

    #[test]
    fn numbers_and_strings_stay_apart(n in any::<i64>()) {
        prop_assert_ne!(cache_key("q", &n).unwrap(), cache_key("q", &n.to_string()).unwrap());
    }

    #[test]
    fn always_a_valid_key(prefix in any::<String>(), v in value()) {
        let k = cache_key(&prefix, &v).unwrap();
        prop_assert!(memkit_types::validate_key(k.as_bytes()).is_ok(), "{:?}", k);
        prop_assert!(k.len() <= crate::caching::key::MAX_PREFIX + 1 + crate::caching::key::HASH_HEX);
        // Room for the rebuild lock's `lock:` prefix.
        let lock_key = format!("lock:{k}");
        prop_assert!(memkit_types::validate_key(lock_key.as_bytes()).is_ok());
    }

    #[test]
    fn different_prefixes_different_keys(a in any::<String>(), b in any::<String>()) {
        prop_assume!(a != b);
        prop_assert_ne!(cache_key(&a, &1).unwrap(), cache_key(&b, &1).unwrap());
    }
}

#[derive(serde::Serialize)]
struct Search<'a> {
    query: &'a str,
    page: u32,
    sort: Option<&'a str>,
    filters: BTreeMap<&'a str, f32>,
}

#[derive(serde::Serialize)]
struct SearchReordered<'a> {
    filters: BTreeMap<&'a str, f32>,
    page: u64,
    query: &'a str,
    sort: Option<&'a str>,
}

#[test]
fn struct_field_order_does_not_matter() {
    let f: BTreeMap<&str, f32> = [("price", 9.5f32), ("rating", 4.0)].into();
    let a = Search {
        query: "rust",
        page: 2,
        sort: None,
        filters: f.clone(),
    };
    let b = SearchReordered {
        filters: f,
        page: 2,
        query: "rust",
        sort: None,
    };
    assert_eq!(cache_key("s", &a).unwrap(), cache_key("s", &b).unwrap());
    assert_eq!(
        canonical(&a).unwrap(),
        r#"{"filters":{"price":9.5,"rating":4},"page":2,"query":"rust","sort":null}"#
    );
}

/// Two `HashSet`s with the same elements iterate in different orders (each has its own
/// random hasher): through `Unordered` / `unordered` they give one key, and a set with
/// another element another key.
#[test]
fn sets_give_one_key_whatever_their_iteration_order() {
    use std::collections::HashSet;

    use crate::caching::{Unordered, unordered};

    #[derive(serde::Serialize)]
    struct Query {
        #[serde(serialize_with = "unordered")]
        ids: HashSet<u64>,
        page: u32,
    }
    let sets: Vec<HashSet<u64>> = (0..20).map(|_| (0..64u64).collect()).collect();
    let orders: HashSet<Vec<u64>> = sets.iter().map(|s| s.iter().copied().collect()).collect();
    assert!(orders.len() > 1, "the sets iterate in different orders");
    let keys: HashSet<String> = sets
        .iter()
        .map(|s| cache_key("q", &Unordered(s)).unwrap())
        .collect();
    assert_eq!(keys.len(), 1);
    let fields: HashSet<String> = sets
        .iter()
        .map(|s| {
            cache_key(
                "q",
                &Query {
                    ids: s.clone(),
                    page: 1,
                },
            )
            .unwrap()
        })
        .collect();
    assert_eq!(fields.len(), 1);
    let mut other = sets[0].clone();
    other.insert(64);
    assert!(!keys.contains(&cache_key("q", &Unordered(&other)).unwrap()));
}
