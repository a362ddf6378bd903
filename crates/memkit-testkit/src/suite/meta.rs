//! The meta protocol's extras: vivify and the win token, recache, stale items, explicit
//! CAS, tombstones and metadata.

use memkit_types::{
    ArithOptions, DeleteOptions, DeleteOutcome, Exptime, GetOptions, StoreMode, StoreOptions,
    StoreOutcome, Ttl,
};

use super::{case_table, check, check_eq};

fn vivify(secs: u32) -> GetOptions {
    GetOptions {
        vivify: Some(Exptime::secs(secs)),
        meta: true,
        ..Default::default()
    }
}

fn meta() -> GetOptions {
    GetOptions {
        meta: true,
        ..Default::default()
    }
}

case_table! {
    vivify_win_then_win_taken => |cx| {
        let k = cx.key("k");
        let first = cx.store.get_with(&k, &vivify(30)).await?.ok_or("vivify returned a miss".to_string())?;
        check!(first.win && !first.win_taken && !first.stale, "first vivify: {first:?}");
        check_eq!(first.value.len(), 0);
        check!(matches!(first.ttl, Some(Ttl::Secs(29..=30))), "vivified ttl {:?}", first.ttl);
        let second = cx.store.get_with(&k, &vivify(30)).await?.ok_or("vivified item gone".to_string())?;
        check!(!second.win && second.win_taken, "second vivify: {second:?}");
        check_eq!(second.cas, first.cas);
        let plain = cx.store.get(&k).await?.ok_or("vivified item gone".to_string())?;
        check!(!plain.win && plain.win_taken, "plain read: {plain:?}");
        // The winner fills it in; that clears the token.
        cx.store.set(&k, b"filled", 0, Exptime::secs(100)).await?;
        let after = cx.store.get_with(&k, &vivify(30)).await?.ok_or("gone".to_string())?;
        check!(!after.win && !after.win_taken, "after set: {after:?}");
        check_eq!(&after.value[..], b"filled");
    }

    vivify_expires => |cx| {
        let k = cx.key("k");
        let first = cx.store.get_with(&k, &vivify(2)).await?.ok_or("miss".to_string())?;
        check!(first.win, "no win");
        cx.time.advance(3).await;
        check_eq!(cx.store.get(&k).await?, None);
        let again = cx.store.get_with(&k, &vivify(2)).await?.ok_or("miss".to_string())?;
        check!(again.win && !again.win_taken, "after expiry: {again:?}");
    }

    recache_below => |cx| {
        let (k, never) = (cx.key("k"), cx.key("never"));
        cx.store.set(&k, b"v", 0, Exptime::secs(100)).await?;
        let r = |secs| GetOptions { recache_below: Some(secs), ..meta() };
        let above = cx.store.get_with(&k, &r(30)).await?.ok_or("gone".to_string())?;
        check!(!above.win && !above.win_taken, "ttl 100 > 30 won: {above:?}");
        let below = cx.store.get_with(&k, &r(200)).await?.ok_or("gone".to_string())?;
        check!(below.win && !below.win_taken, "ttl 100 < 200 did not win: {below:?}");
        let again = cx.store.get_with(&k, &r(200)).await?.ok_or("gone".to_string())?;
        check!(!again.win && again.win_taken, "second recache: {again:?}");
        cx.store.set(&never, b"v", 0, Exptime::NEVER).await?;
        let item = cx.store.get_with(&never, &r(200)).await?.ok_or("gone".to_string())?;
        check!(!item.win && !item.win_taken, "never-expiring item won recache: {item:?}");
    }

    stale_via_delete_invalidate => |cx| {
        let k = cx.key("k");
        let c1 = cx.store.set(&k, b"old", 7, Exptime::secs(100)).await?;
        let inv = DeleteOptions { invalidate: true, stale_ttl: Some(Exptime::secs(30)), ..Default::default() };
        check_eq!(cx.store.delete_with(&k, &inv).await?, DeleteOutcome::Deleted);
        let first = cx.store.get_with(&k, &meta()).await?.ok_or("stale item gone".to_string())?;
        check!(first.stale && first.win && !first.win_taken, "first stale read: {first:?}");
        check_eq!((&first.value[..], first.flags), (&b"old"[..], 7));
        check!(first.cas != c1, "invalidate kept the CAS");
        check!(matches!(first.ttl, Some(Ttl::Secs(29..=30))), "stale ttl {:?}", first.ttl);
        let second = cx.store.get_with(&k, &meta()).await?.ok_or("stale item gone".to_string())?;
        check!(second.stale && !second.win && second.win_taken, "second stale read: {second:?}");
        // A CAS update with the pre-invalidation token is refused...
        check_eq!(cx.store.cas(&k, b"x", 0, Exptime::NEVER, c1).await?, StoreOutcome::Exists);
        // ...a plain set makes the item fresh again.
        cx.store.set(&k, b"new", 0, Exptime::NEVER).await?;
        let fresh = cx.store.get_with(&k, &meta()).await?.ok_or("gone".to_string())?;
        check!(!fresh.stale && !fresh.win && !fresh.win_taken, "after set: {fresh:?}");
        check_eq!(cx.store.delete_with(&cx.key("missing"), &inv).await?, DeleteOutcome::NotFound);
    }

    invalidate_keeps_ttl_without_t => |cx| {
        let k = cx.key("k");
        cx.store.set(&k, b"v", 0, Exptime::secs(2)).await?;
        let inv = DeleteOptions { invalidate: true, ..Default::default() };
        check_eq!(cx.store.delete_with(&k, &inv).await?, DeleteOutcome::Deleted);
        check!(cx.store.get(&k).await?.is_some_and(|i| i.stale), "not stale");
        cx.time.advance(3).await;
        check_eq!(cx.store.get(&k).await?, None);
    }

    store_invalidate_with_lower_cas => |cx| {
        let k = cx.key("k");
        let c1 = cx.store.set(&k, b"v1", 0, Exptime::secs(100)).await?;
        let c2 = cx.store.set(&k, b"v2", 0, Exptime::secs(100)).await?;
        let stale = |cas| StoreOptions {
            cas: Some(cas),
            invalidate: true,
            ..StoreOptions::new(StoreMode::Set, 3, Exptime::secs(5))
        };
        // A newer-than-current token is simply wrong.
        check_eq!(cx.store.store(&k, b"x", &stale(c2 + 1000)).await?.outcome, StoreOutcome::Exists);
        let r = cx.store.store(&k, b"late", &stale(c1)).await?;
        check_eq!(r.outcome, StoreOutcome::Stored);
        let item = cx.store.get_with(&k, &meta()).await?.ok_or("gone".to_string())?;
        check_eq!((&item.value[..], item.flags, item.cas), (&b"late"[..], 3, r.cas));
        check!(item.stale && item.win, "stale store: {item:?}");
        // The TTL of the item it replaced stays (100, not the 5 sent).
        check!(matches!(item.ttl, Some(Ttl::Secs(98..=100))), "ttl {:?}", item.ttl);
        // The win token survives another stale store.
        let r2 = cx.store.store(&k, b"later", &stale(c2)).await?;
        check_eq!(r2.outcome, StoreOutcome::Stored);
        let item = cx.store.get(&k).await?.ok_or("gone".to_string())?;
        check!(item.stale && !item.win && item.win_taken, "second stale store: {item:?}");
        // Matching CAS: a normal store, fresh again.
        let plain = StoreOptions { cas: Some(r2.cas), ..StoreOptions::new(StoreMode::Set, 0, Exptime::NEVER) };
        check_eq!(cx.store.store(&k, b"fresh", &plain).await?.outcome, StoreOutcome::Stored);
        let item = cx.store.get(&k).await?.ok_or("gone".to_string())?;
        check!(!item.stale && !item.win_taken, "after matching cas: {item:?}");
    }

    metadata_fetched_and_ttl => |cx| {
        let (k, t) = (cx.key("k"), cx.key("t"));
        cx.store.set(&k, b"v", 0, Exptime::NEVER).await?;
        let quiet = GetOptions { no_bump: true, ..meta() };
        let first = cx.store.get_with(&k, &quiet).await?.ok_or("gone".to_string())?;
        check_eq!((first.ttl, first.fetched), (Some(Ttl::Never), Some(false)));
        check!(first.last_access.is_some(), "no last access reported");
        let second = cx.store.get_with(&k, &meta()).await?.ok_or("gone".to_string())?;
        check_eq!(second.fetched, Some(false));
        let third = cx.store.get_with(&k, &meta()).await?.ok_or("gone".to_string())?;
        check_eq!(third.fetched, Some(true));
        cx.store.set(&k, b"v2", 0, Exptime::NEVER).await?;
        check_eq!(cx.store.get_with(&k, &meta()).await?.and_then(|i| i.fetched), Some(false));
        cx.store.set(&t, b"v", 0, Exptime::secs(50)).await?;
        let item = cx.store.get_with(&t, &meta()).await?.ok_or("gone".to_string())?;
        check!(matches!(item.ttl, Some(Ttl::Secs(49..=50))), "ttl {:?}", item.ttl);
        let plain = cx.store.get(&t).await?.ok_or("gone".to_string())?;
        check_eq!((plain.ttl, plain.fetched, plain.last_access), (None, None, None));
    }

    explicit_new_cas @NewerMeta => |cx| {
        let k = cx.key("k");
        let e = 0x4000_0000_0000_0000_u64 + 77;
        let opts = StoreOptions { new_cas: Some(e), ..StoreOptions::default() };
        let r = cx.store.store(&k, b"1", &opts).await?;
        check_eq!((r.outcome, r.cas), (StoreOutcome::Stored, e));
        check_eq!(cx.store.get(&k).await?.map(|i| i.cas), Some(e));
        let arith = ArithOptions { new_cas: Some(e + 1), ..ArithOptions::incr(1) };
        let out = cx.store.arithmetic(&k, &arith).await?;
        check!(matches!(out, memkit_types::ArithOutcome::Value { value: 2, cas, .. } if cas == e + 1), "{out:?}");
        let inv = DeleteOptions { invalidate: true, new_cas: Some(e + 2), ..Default::default() };
        cx.store.delete_with(&k, &inv).await?;
        check_eq!(cx.store.get(&k).await?.map(|i| i.cas), Some(e + 2));
        let viv = GetOptions { new_cas: Some(e + 3), ..vivify(30) };
        let item = cx.store.get_with(&cx.key("viv"), &viv).await?.ok_or("miss".to_string())?;
        check_eq!(item.cas, e + 3);
    }

    delete_remove_value_tombstone @NewerMeta => |cx| {
        let k = cx.key("k");
        let c1 = cx.store.set(&k, b"payload", 9, Exptime::secs(100)).await?;
        let x = DeleteOptions { remove_value: true, ..Default::default() };
        check_eq!(cx.store.delete_with(&k, &x).await?, DeleteOutcome::Deleted);
        let item = cx.store.get_with(&k, &meta()).await?.ok_or("tombstone gone".to_string())?;
        // A fresh empty item: flags 0, no TTL unless given, the old CAS.
        check_eq!((item.value.len(), item.flags, item.cas), (0, 0, c1));
        check_eq!(item.ttl, Some(Ttl::Never));
        check_eq!(cx.store.delete_cas(&k, c1 + 1000).await?, DeleteOutcome::Exists);
        check_eq!(cx.store.delete(&k).await?, true);
    }

    append_vivify @NewerMeta => |cx| {
        let k = cx.key("k");
        let opts = StoreOptions {
            vivify: Some(Exptime::secs(100)),
            ..StoreOptions::new(StoreMode::Append, 4, Exptime::NEVER)
        };
        check_eq!(cx.store.store(&k, b"a", &opts).await?.outcome, StoreOutcome::Stored);
        check_eq!(cx.store.store(&k, b"b", &opts).await?.outcome, StoreOutcome::Stored);
        let item = cx.store.get_with(&k, &meta()).await?.ok_or("gone".to_string())?;
        check_eq!((&item.value[..], item.flags), (&b"ab"[..], 4));
        check!(matches!(item.ttl, Some(Ttl::Secs(99..=100))), "ttl {:?}", item.ttl);
    }
}
