//! get/gets/multi-get, the storage commands, cas, delete, touch and gat.

use memkit_types::{DeleteOutcome, Exptime, GetOptions, StoreMode, StoreOptions, StoreOutcome};

use super::{case_table, check, check_eq};

case_table! {
    get_missing => |cx| {
        check_eq!(cx.store.get(&cx.key("nope")).await?, None);
    }

    set_then_get => |cx| {
        let k = cx.key("k");
        let cas = cx.store.set(&k, b"hello", 42, Exptime::NEVER).await?;
        let item = cx.store.get(&k).await?.ok_or("missing after set".to_string())?;
        check_eq!(&item.value[..], b"hello");
        check_eq!(item.flags, 42);
        check_eq!(item.cas, cas);
        check!(!item.win && !item.stale && !item.win_taken, "plain item has meta marks: {item:?}");
        check_eq!(item.ttl, None);
    }

    flags_full_32_bits => |cx| {
        let k = cx.key("k");
        cx.store.set(&k, b"v", u32::MAX, Exptime::NEVER).await?;
        check_eq!(cx.store.get(&k).await?.map(|i| i.flags), Some(u32::MAX));
    }

    get_multi_mixed_missing => |cx| {
        let (a, b, c) = (cx.key("a"), cx.key("b"), cx.key("c"));
        cx.store.set(&a, b"1", 1, Exptime::NEVER).await?;
        cx.store.set(&c, b"3", 3, Exptime::NEVER).await?;
        let keys: Vec<&[u8]> = vec![&b, &a, &b, &c, &a];
        let got = cx.store.get_multi(&keys, &GetOptions::default()).await?;
        let values: Vec<Option<Vec<u8>>> =
            got.iter().map(|i| i.as_ref().map(|i| i.value.to_vec())).collect();
        check_eq!(
            values,
            vec![None, Some(b"1".to_vec()), None, Some(b"3".to_vec()), Some(b"1".to_vec())]
        );
        check_eq!(got[1].as_ref().map(|i| i.flags), Some(1));
        check_eq!(got[3].as_ref().map(|i| i.flags), Some(3));
        check_eq!(cx.store.get_multi(&[], &GetOptions::default()).await?.len(), 0);
    }

    cas_unique_per_modification => |cx| {
        let (a, b) = (cx.key("a"), cx.key("b"));
        let c1 = cx.store.set(&a, b"1", 0, Exptime::NEVER).await?;
        let c2 = cx.store.set(&a, b"1", 0, Exptime::NEVER).await?;
        let c3 = cx.store.set(&b, b"1", 0, Exptime::NEVER).await?;
        // A CAS value is unique on its server: through a cluster `a` and `b` may live on two
        // servers whose counters meet, so only `a`'s are compared.
        check!(c1 != c2, "CAS repeated: {c1} {c2}");
        check!(c1 != 0 && c2 != 0 && c3 != 0, "CAS 0 means none");
        check_eq!(cx.store.get(&a).await?.map(|i| i.cas), Some(c2));
        cx.store.append(&a, b"2").await?;
        let c4 = cx.store.get(&a).await?.map(|i| i.cas).unwrap_or(0);
        check!(c4 != c2 && c4 != 0, "append kept CAS {c2}");
    }

    set_overwrites_everything => |cx| {
        let k = cx.key("k");
        cx.store.set(&k, b"first", 1, Exptime::secs(2)).await?;
        cx.store.set(&k, b"second", 2, Exptime::NEVER).await?;
        cx.time.advance(3).await;
        let item = cx.store.get(&k).await?.ok_or("set did not reset the TTL".to_string())?;
        check_eq!(&item.value[..], b"second");
        check_eq!(item.flags, 2);
    }

    add_only_if_absent => |cx| {
        let k = cx.key("k");
        check!(cx.store.add(&k, b"a", 1, Exptime::NEVER).await?, "add on absent key failed");
        check!(!cx.store.add(&k, b"b", 2, Exptime::NEVER).await?, "add on present key stored");
        let item = cx.store.get(&k).await?.ok_or("gone".to_string())?;
        check_eq!((&item.value[..], item.flags), (&b"a"[..], 1));
        let r = cx.store.store(&k, b"c", &StoreOptions::new(StoreMode::Add, 0, Exptime::NEVER)).await?;
        check_eq!(r.outcome, StoreOutcome::NotStored);
        check_eq!(r.cas, 0);
    }

    replace_only_if_present => |cx| {
        let k = cx.key("k");
        check!(!cx.store.replace(&k, b"a", 0, Exptime::NEVER).await?, "replace on absent key");
        check_eq!(cx.store.get(&k).await?, None);
        cx.store.set(&k, b"a", 1, Exptime::NEVER).await?;
        check!(cx.store.replace(&k, b"b", 2, Exptime::NEVER).await?, "replace on present key");
        let item = cx.store.get(&k).await?.ok_or("gone".to_string())?;
        check_eq!((&item.value[..], item.flags), (&b"b"[..], 2));
    }

    append_prepend => |cx| {
        let (k, missing) = (cx.key("k"), cx.key("missing"));
        check!(!cx.store.append(&missing, b"x").await?, "append on absent key stored");
        check!(!cx.store.prepend(&missing, b"x").await?, "prepend on absent key stored");
        check_eq!(cx.store.get(&missing).await?, None);
        cx.store.set(&k, b"mid", 7, Exptime::NEVER).await?;
        check!(cx.store.append(&k, b">>").await?, "append failed");
        check!(cx.store.prepend(&k, b"<<").await?, "prepend failed");
        let item = cx.store.get(&k).await?.ok_or("gone".to_string())?;
        check_eq!(&item.value[..], b"<<mid>>");
        check_eq!(item.flags, 7);
    }

    append_keeps_flags_and_ttl => |cx| {
        let k = cx.key("k");
        cx.store.set(&k, b"a", 9, Exptime::secs(2)).await?;
        // Flags and TTL given to append are ignored: the item keeps its own.
        let opts = StoreOptions::new(StoreMode::Append, 1234, Exptime::NEVER);
        check_eq!(cx.store.store(&k, b"b", &opts).await?.outcome, StoreOutcome::Stored);
        let item = cx.store.get(&k).await?.ok_or("gone".to_string())?;
        check_eq!((&item.value[..], item.flags), (&b"ab"[..], 9));
        cx.time.advance(3).await;
        check_eq!(cx.store.get(&k).await?, None);
    }

    cas_match_mismatch_missing => |cx| {
        let (k, missing) = (cx.key("k"), cx.key("missing"));
        let c1 = cx.store.set(&k, b"v1", 0, Exptime::NEVER).await?;
        check_eq!(cx.store.cas(&k, b"v2", 5, Exptime::NEVER, c1).await?, StoreOutcome::Stored);
        let item = cx.store.get(&k).await?.ok_or("gone".to_string())?;
        check_eq!((&item.value[..], item.flags), (&b"v2"[..], 5));
        check!(item.cas != c1, "cas did not change the CAS");
        check_eq!(cx.store.cas(&k, b"v3", 0, Exptime::NEVER, c1).await?, StoreOutcome::Exists);
        check_eq!(cx.store.get_value(&k).await?.as_deref(), Some(&b"v2"[..]));
        check_eq!(cx.store.cas(&missing, b"v", 0, Exptime::NEVER, c1).await?, StoreOutcome::NotFound);
        check_eq!(cx.store.get(&missing).await?, None);
    }

    cas_zero_never_matches => |cx| {
        let k = cx.key("k");
        cx.store.set(&k, b"v", 0, Exptime::NEVER).await?;
        check_eq!(cx.store.cas(&k, b"w", 0, Exptime::NEVER, 0).await?, StoreOutcome::Exists);
    }

    cas_returns_new_token => |cx| {
        let k = cx.key("k");
        let c1 = cx.store.set(&k, b"v", 0, Exptime::NEVER).await?;
        let opts = StoreOptions { cas: Some(c1), ..StoreOptions::new(StoreMode::Set, 0, Exptime::NEVER) };
        let r = cx.store.store(&k, b"w", &opts).await?;
        check_eq!(r.outcome, StoreOutcome::Stored);
        check_eq!(cx.store.get(&k).await?.map(|i| i.cas), Some(r.cas));
        let r2 = cx.store.store(&k, b"x", &opts).await?;
        check_eq!((r2.outcome, r2.cas), (StoreOutcome::Exists, 0));
    }

    cas_after_delete => |cx| {
        let k = cx.key("k");
        let c1 = cx.store.set(&k, b"v", 0, Exptime::NEVER).await?;
        check!(cx.store.delete(&k).await?, "delete failed");
        check_eq!(cx.store.cas(&k, b"w", 0, Exptime::NEVER, c1).await?, StoreOutcome::NotFound);
        let c2 = cx.store.set(&k, b"v", 0, Exptime::NEVER).await?;
        check!(c2 != c1, "re-created item reuses CAS {c1}");
        check_eq!(cx.store.cas(&k, b"w", 0, Exptime::NEVER, c1).await?, StoreOutcome::Exists);
    }

    replace_with_cas => |cx| {
        let k = cx.key("k");
        let c1 = cx.store.set(&k, b"v", 0, Exptime::NEVER).await?;
        let opts = |cas| StoreOptions { cas: Some(cas), ..StoreOptions::new(StoreMode::Replace, 0, Exptime::NEVER) };
        check_eq!(cx.store.store(&k, b"w", &opts(c1 + 1000)).await?.outcome, StoreOutcome::Exists);
        check_eq!(cx.store.store(&k, b"w", &opts(c1)).await?.outcome, StoreOutcome::Stored);
        check_eq!(cx.store.store(&cx.key("missing"), b"w", &opts(c1)).await?.outcome, StoreOutcome::NotFound);
    }

    delete_and_missing => |cx| {
        let k = cx.key("k");
        check!(!cx.store.delete(&k).await?, "delete of absent key reported success");
        cx.store.set(&k, b"v", 0, Exptime::NEVER).await?;
        check!(cx.store.delete(&k).await?, "delete failed");
        check_eq!(cx.store.get(&k).await?, None);
        check!(!cx.store.delete(&k).await?, "second delete succeeded");
        check!(cx.store.add(&k, b"again", 0, Exptime::NEVER).await?, "add after delete");
    }

    delete_cas => |cx| {
        let k = cx.key("k");
        check_eq!(cx.store.delete_cas(&k, 1).await?, DeleteOutcome::NotFound);
        let c1 = cx.store.set(&k, b"v", 0, Exptime::NEVER).await?;
        cx.store.set(&k, b"v", 0, Exptime::NEVER).await?;
        check_eq!(cx.store.delete_cas(&k, c1).await?, DeleteOutcome::Exists);
        check!(cx.store.get(&k).await?.is_some(), "mismatched delete_cas removed the item");
        let c2 = cx.store.get(&k).await?.map(|i| i.cas).unwrap_or(0);
        check_eq!(cx.store.delete_cas(&k, c2).await?, DeleteOutcome::Deleted);
        check_eq!(cx.store.get(&k).await?, None);
    }

    touch_moves_ttl => |cx| {
        let (k, missing) = (cx.key("k"), cx.key("missing"));
        check!(!cx.store.touch(&missing, Exptime::secs(10)).await?, "touch of absent key");
        let c1 = cx.store.set(&k, b"v", 0, Exptime::secs(2)).await?;
        check!(cx.store.touch(&k, Exptime::secs(100)).await?, "touch failed");
        cx.time.advance(3).await;
        let item = cx.store.get(&k).await?.ok_or("touch did not extend the TTL".to_string())?;
        check_eq!(item.cas, c1);
        check!(cx.store.touch(&k, Exptime::secs(1)).await?, "touch failed");
        cx.time.advance(2).await;
        check_eq!(cx.store.get(&k).await?, None);
    }

    touch_into_the_past => |cx| {
        let k = cx.key("k");
        cx.store.set(&k, b"v", 0, Exptime::NEVER).await?;
        check!(cx.store.touch(&k, Exptime::EXPIRED).await?, "touch failed");
        check_eq!(cx.store.get(&k).await?, None);
    }

    gat_reads_and_moves_ttl => |cx| {
        let (k, missing) = (cx.key("k"), cx.key("missing"));
        check_eq!(cx.store.gat(&missing, Exptime::secs(10)).await?, None);
        let c1 = cx.store.set(&k, b"v", 3, Exptime::secs(2)).await?;
        let item = cx.store.gat(&k, Exptime::secs(100)).await?.ok_or("gat missed".to_string())?;
        check_eq!((&item.value[..], item.flags, item.cas), (&b"v"[..], 3, c1));
        cx.time.advance(3).await;
        check!(cx.store.get(&k).await?.is_some(), "gat did not extend the TTL");
        let opts = GetOptions { touch: Some(Exptime::NEVER), meta: true, ..Default::default() };
        let item = cx.store.get_with(&k, &opts).await?.ok_or("gone".to_string())?;
        check_eq!(item.ttl, Some(memkit_types::Ttl::Never));
    }
}
