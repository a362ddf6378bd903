//! incr/decr/ma: memcached's exact arithmetic, including its in-place rewrite.

use memkit_types::{ArithMode, ArithOptions, ArithOutcome, Error, Exptime, GetOptions, Ttl};

use super::{case_table, check, check_eq};

case_table! {
    incr_decr_basic => |cx| {
        let k = cx.key("k");
        cx.store.set(&k, b"5", 3, Exptime::NEVER).await?;
        check_eq!(cx.store.incr(&k, 10).await?, Some(15));
        check_eq!(cx.store.decr(&k, 4).await?, Some(11));
        check_eq!(cx.store.incr(&k, 0).await?, Some(11));
        let item = cx.store.get(&k).await?.ok_or("gone".to_string())?;
        check_eq!((&item.value[..], item.flags), (&b"11"[..], 3));
    }

    incr_missing => |cx| {
        let k = cx.key("k");
        check_eq!(cx.store.incr(&k, 1).await?, None);
        check_eq!(cx.store.decr(&k, 1).await?, None);
        check_eq!(cx.store.arithmetic(&k, &ArithOptions::incr(1)).await?, ArithOutcome::NotFound);
        check_eq!(cx.store.get(&k).await?, None);
    }

    incr_wraps_at_2_64 => |cx| {
        let k = cx.key("k");
        cx.store.set(&k, b"18446744073709551615", 0, Exptime::NEVER).await?;
        check_eq!(cx.store.incr(&k, 1).await?, Some(0));
        cx.store.set(&k, b"18446744073709551610", 0, Exptime::NEVER).await?;
        check_eq!(cx.store.incr(&k, 10).await?, Some(4));
        cx.store.set(&k, b"1", 0, Exptime::NEVER).await?;
        check_eq!(cx.store.incr(&k, u64::MAX).await?, Some(0));
    }

    decr_floors_at_zero => |cx| {
        let k = cx.key("k");
        cx.store.set(&k, b"5", 0, Exptime::NEVER).await?;
        check_eq!(cx.store.decr(&k, 10).await?, Some(0));
        check_eq!(cx.store.decr(&k, 1).await?, Some(0));
        check_eq!(cx.store.decr(&k, u64::MAX).await?, Some(0));
    }

    incr_huge_values => |cx| {
        let k = cx.key("k");
        cx.store.set(&k, b"0", 0, Exptime::NEVER).await?;
        check_eq!(cx.store.incr(&k, u64::MAX).await?, Some(u64::MAX));
        check_eq!(cx.store.get_value(&k).await?.as_deref(), Some(&b"18446744073709551615"[..]));
        check_eq!(cx.store.decr(&k, u64::MAX - 1).await?, Some(1));
        // One past 2^64-1 is not a number memcached can hold.
        cx.store.set(&k, b"18446744073709551616", 0, Exptime::NEVER).await?;
        check_eq!(cx.store.arithmetic(&k, &ArithOptions::incr(1)).await?, ArithOutcome::NonNumeric);
    }

    incr_non_numeric => |cx| {
        let k = cx.key("k");
        for bad in [&b"abc"[..], b"12abc", b"-1", b"", b" ", b"0x10"] {
            cx.store.set(&k, bad, 0, Exptime::NEVER).await?;
            let out = cx.store.arithmetic(&k, &ArithOptions::incr(1)).await?;
            check_eq!((bad, out), (bad, ArithOutcome::NonNumeric));
            let out = cx.store.arithmetic(&k, &ArithOptions::decr(1)).await?;
            check_eq!((bad, out), (bad, ArithOutcome::NonNumeric));
            check_eq!(cx.store.get_value(&k).await?.as_deref(), Some(bad));
        }
        let err = cx.store.incr(&k, 1).await;
        check!(matches!(err, Err(Error::Client(_))), "incr on non-numeric gave {err:?}");
    }

    incr_parses_like_strtoull => |cx| {
        // memcached reads the number with strtoull: leading whitespace and a sign are
        // skipped, anything after whitespace is ignored.
        let k = cx.key("k");
        for (stored, want) in [(&b"  5"[..], 6), (b"+12", 13), (b"5 x", 6), (b"007", 8)] {
            cx.store.set(&k, stored, 0, Exptime::NEVER).await?;
            check_eq!((stored, cx.store.incr(&k, 1).await?), (stored, Some(want)));
        }
    }

    decr_shrink_pads_with_spaces => |cx| {
        // memcached 1.6 rewrites a shorter result in place and pads it with spaces; a
        // longer one replaces the item.
        let k = cx.key("k");
        cx.store.set(&k, b"10", 0, Exptime::NEVER).await?;
        check_eq!(cx.store.decr(&k, 1).await?, Some(9));
        check_eq!(cx.store.get_value(&k).await?.as_deref(), Some(&b"9 "[..]));
        check_eq!(cx.store.incr(&k, 1).await?, Some(10));
        check_eq!(cx.store.get_value(&k).await?.as_deref(), Some(&b"10"[..]));
        check_eq!(cx.store.incr(&k, 90).await?, Some(100));
        check_eq!(cx.store.get_value(&k).await?.as_deref(), Some(&b"100"[..]));
        cx.store.set(&k, b"18446744073709551615", 0, Exptime::NEVER).await?;
        check_eq!(cx.store.incr(&k, 2).await?, Some(1));
        check_eq!(cx.store.get_value(&k).await?.as_deref(), Some(&b"1                   "[..]));
        cx.store.set(&k, b"  5", 0, Exptime::NEVER).await?;
        check_eq!(cx.store.incr(&k, 1).await?, Some(6));
        check_eq!(cx.store.get_value(&k).await?.as_deref(), Some(&b"6  "[..]));
    }

    incr_changes_cas_keeps_flags_and_ttl => |cx| {
        let k = cx.key("k");
        let c1 = cx.store.set(&k, b"99", 8, Exptime::secs(2)).await?;
        let out = cx.store.arithmetic(&k, &ArithOptions::incr(1)).await?;
        let ArithOutcome::Value { value, cas, .. } = out else {
            return Err(format!("incr gave {out:?}").into());
        };
        check_eq!(value, 100);
        check!(cas != c1, "incr kept the CAS");
        let item = cx.store.get(&k).await?.ok_or("gone".to_string())?;
        check_eq!((item.cas, item.flags), (cas, 8));
        let out = cx.store.arithmetic(&k, &ArithOptions::decr(1)).await?;
        check!(out.value() == Some(99), "decr gave {out:?}");
        check_eq!(cx.store.get(&k).await?.map(|i| i.flags), Some(8));
        cx.time.advance(3).await;
        check_eq!(cx.store.get(&k).await?, None);
    }

    incr_vivify => |cx| {
        let k = cx.key("k");
        let viv = ArithOptions { vivify: Some((10, Exptime::NEVER)), ..ArithOptions::incr(5) };
        let out = cx.store.arithmetic(&k, &viv).await?;
        // A created counter holds the initial value; the delta applies from the next call.
        check!(matches!(out, ArithOutcome::Value { value: 10, ttl: None, .. }), "vivify gave {out:?}");
        check_eq!(cx.store.get_value(&k).await?.as_deref(), Some(&b"10"[..]));
        check_eq!(cx.store.arithmetic(&k, &viv).await?.value(), Some(15));
        let k2 = cx.key("k2");
        let viv = ArithOptions { vivify: Some((3, Exptime::secs(100))), ..ArithOptions::decr(1) };
        let out = cx.store.arithmetic(&k2, &viv).await?;
        check!(matches!(out, ArithOutcome::Value { value: 3, ttl: Some(99..=100), .. }), "vivify gave {out:?}");
        let item = cx.store.get(&k2).await?.ok_or("gone".to_string())?;
        check_eq!(item.flags, 0);
    }

    arith_with_cas => |cx| {
        let k = cx.key("k");
        let c1 = cx.store.set(&k, b"1", 0, Exptime::NEVER).await?;
        let with = |cas| ArithOptions { cas: Some(cas), ..ArithOptions::incr(1) };
        check_eq!(cx.store.arithmetic(&k, &with(c1 + 1000)).await?, ArithOutcome::Exists);
        let out = cx.store.arithmetic(&k, &with(c1)).await?;
        check_eq!(out.value(), Some(2));
        check_eq!(cx.store.arithmetic(&k, &with(c1)).await?, ArithOutcome::Exists);
        check_eq!(cx.store.arithmetic(&cx.key("missing"), &with(c1)).await?, ArithOutcome::NotFound);
    }

    arith_update_ttl => |cx| {
        let k = cx.key("k");
        cx.store.set(&k, b"1", 0, Exptime::secs(2)).await?;
        let opts = ArithOptions { update_ttl: Some(Exptime::secs(100)), ..ArithOptions::incr(1) };
        let out = cx.store.arithmetic(&k, &opts).await?;
        check!(matches!(out, ArithOutcome::Value { value: 2, ttl: Some(99..=100), .. }), "got {out:?}");
        cx.time.advance(3).await;
        check_eq!(cx.store.get_value(&k).await?.as_deref(), Some(&b"2"[..]));
        let opts = ArithOptions { update_ttl: Some(Exptime::NEVER), mode: ArithMode::Decr, ..ArithOptions::default() };
        let out = cx.store.arithmetic(&k, &opts).await?;
        check!(matches!(out, ArithOutcome::Value { value: 1, ttl: None, .. }), "got {out:?}");
        let meta = GetOptions { meta: true, ..Default::default() };
        check_eq!(cx.store.get_with(&k, &meta).await?.and_then(|i| i.ttl), Some(Ttl::Never));
    }

    touch_and_reads_keep_cas_incr_changes_it => |cx| {
        let k = cx.key("k");
        let c1 = cx.store.set(&k, b"1", 0, Exptime::NEVER).await?;
        cx.store.touch(&k, Exptime::secs(100)).await?;
        cx.store.gat(&k, Exptime::secs(100)).await?;
        check_eq!(cx.store.get(&k).await?.map(|i| i.cas), Some(c1));
        cx.store.incr(&k, 1).await?;
        let c2 = cx.store.get(&k).await?.map(|i| i.cas).unwrap_or(c1);
        check!(c2 != c1, "incr kept the CAS");
    }
}
