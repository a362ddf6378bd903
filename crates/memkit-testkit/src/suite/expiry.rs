//! Expiry in all its spellings, and flush_all (those cases run last).
//!
//! Real servers tick once a second at a phase of their own, so every check leaves a second
//! of slack on the side it cannot control: "still there" is checked at once, "gone" after
//! the TTL plus one.

use memkit_types::{Exptime, GetOptions, REALTIME_MAXDELTA, Ttl};

use super::{case_table, check, check_eq};

case_table! {
    expiry_relative => |cx| {
        let k = cx.key("k");
        cx.store.set(&k, b"v", 0, Exptime::secs(2)).await?;
        check!(cx.store.get(&k).await?.is_some(), "gone at once");
        cx.time.advance(3).await;
        check_eq!(cx.store.get(&k).await?, None);
        // An expired item is absent for every command.
        check!(!cx.store.replace(&k, b"w", 0, Exptime::NEVER).await?, "replace hit an expired item");
        check!(!cx.store.append(&k, b"w").await?, "append hit an expired item");
        check_eq!(cx.store.incr(&k, 1).await?, None);
        check!(!cx.store.touch(&k, Exptime::NEVER).await?, "touch hit an expired item");
        check!(!cx.store.delete(&k).await?, "delete hit an expired item");
        check!(cx.store.add(&k, b"new", 0, Exptime::NEVER).await?, "add over an expired item");
        check_eq!(cx.store.get_value(&k).await?.as_deref(), Some(&b"new"[..]));
    }

    expiry_never => |cx| {
        let k = cx.key("k");
        cx.store.set(&k, b"v", 0, Exptime::NEVER).await?;
        cx.time.advance(2).await;
        let meta = GetOptions { meta: true, ..Default::default() };
        let item = cx.store.get_with(&k, &meta).await?.ok_or("gone".to_string())?;
        check_eq!(item.ttl, Some(Ttl::Never));
    }

    expiry_negative => |cx| {
        let k = cx.key("k");
        cx.store.set(&k, b"old", 0, Exptime::NEVER).await?;
        cx.store.set(&k, b"v", 0, Exptime::EXPIRED).await?;
        check_eq!(cx.store.get(&k).await?, None);
        cx.store.set(&k, b"v", 0, Exptime(-1000)).await?;
        check_eq!(cx.store.get(&k).await?, None);
        check!(cx.store.add(&k, b"w", 0, Exptime::NEVER).await?, "add over a negative-TTL item");
    }

    expiry_absolute_past => |cx| {
        let k = cx.key("k");
        let now = cx.time.now_unix();
        cx.store.set(&k, b"v", 0, Exptime::at_unix(now - 10)).await?;
        check_eq!(cx.store.get(&k).await?, None);
        // Just past the 30-day line: an absolute time in 1970.
        cx.store.set(&k, b"v", 0, Exptime(REALTIME_MAXDELTA + 1)).await?;
        check_eq!(cx.store.get(&k).await?, None);
    }

    expiry_absolute_future => |cx| {
        let k = cx.key("k");
        let now = cx.time.now_unix();
        cx.store.set(&k, b"v", 0, Exptime::at_unix(now + 100)).await?;
        let meta = GetOptions { meta: true, ..Default::default() };
        let item = cx.store.get_with(&k, &meta).await?.ok_or("absolute future expired".to_string())?;
        // memcached converts through its start time; allow its skew of a second or two.
        check!(matches!(item.ttl, Some(Ttl::Secs(97..=102))), "ttl {:?}", item.ttl);
        cx.store.set(&k, b"v", 0, Exptime::at_unix(now + 2)).await?;
        cx.time.advance(4).await;
        check_eq!(cx.store.get(&k).await?, None);
    }

    expiry_30_days_is_relative => |cx| {
        let k = cx.key("k");
        cx.store.set(&k, b"v", 0, Exptime(REALTIME_MAXDELTA)).await?;
        let meta = GetOptions { meta: true, ..Default::default() };
        let item = cx.store.get_with(&k, &meta).await?.ok_or("30 days read as absolute".to_string())?;
        let max = REALTIME_MAXDELTA as u32;
        check!(matches!(item.ttl, Some(Ttl::Secs(t)) if t + 2 >= max && t <= max), "ttl {:?}", item.ttl);
    }

    ttl_counts_down => |cx| {
        let k = cx.key("k");
        cx.store.set(&k, b"v", 0, Exptime::secs(100)).await?;
        let meta = GetOptions { meta: true, ..Default::default() };
        let ttl = |i: Option<memkit_types::Item>| match i.and_then(|i| i.ttl) {
            Some(Ttl::Secs(t)) => t,
            _ => 0,
        };
        let t0 = ttl(cx.store.get_with(&k, &meta).await?);
        check!((99..=100).contains(&t0), "fresh ttl {t0}");
        cx.time.advance(2).await;
        let t1 = ttl(cx.store.get_with(&k, &meta).await?);
        check!((96..=98).contains(&t1), "ttl after 2 s: {t1}");
    }

    flush_all_now #flushes => |cx| {
        let (a, b) = (cx.key("a"), cx.key("b"));
        cx.store.set(&a, b"1", 0, Exptime::NEVER).await?;
        cx.store.set(&b, b"2", 0, Exptime::secs(100)).await?;
        cx.store.flush_all(0).await?;
        check_eq!(cx.store.get(&a).await?, None);
        check_eq!(cx.store.get(&b).await?, None);
        check!(cx.store.add(&a, b"new", 0, Exptime::NEVER).await?, "add after flush");
        check_eq!(cx.store.get_value(&a).await?.as_deref(), Some(&b"new"[..]));
    }

    flush_all_delayed #flushes => |cx| {
        // memcached flushes at `now + delay - 1`; with delay 3 the item is certainly still
        // there right away and certainly gone 4 seconds later.
        let (old, new) = (cx.key("old"), cx.key("new"));
        cx.store.set(&old, b"1", 0, Exptime::NEVER).await?;
        cx.store.flush_all(3).await?;
        check!(cx.store.get(&old).await?.is_some(), "delayed flush acted at once");
        cx.time.advance(4).await;
        check_eq!(cx.store.get(&old).await?, None);
        cx.store.set(&new, b"2", 0, Exptime::NEVER).await?;
        check_eq!(cx.store.get_value(&new).await?.as_deref(), Some(&b"2"[..]));
        cx.store.flush_all(0).await?;
        check_eq!(cx.store.get(&new).await?, None);
    }

    flush_all_absolute #flushes => |cx| {
        // The delay reads like an expiry time: above 30 days an absolute Unix time. The
        // engine-vs-model fuzzer found the embedded store taking it as a delay in seconds.
        let (old, past) = (cx.key("old"), cx.key("past"));
        let now = cx.time.now_unix();
        cx.store.set(&old, b"1", 0, Exptime::NEVER).await?;
        cx.store.flush_all((now + 3) as u32).await?;
        check!(cx.store.get(&old).await?.is_some(), "absolute flush acted at once");
        cx.time.advance(4).await;
        check_eq!(cx.store.get(&old).await?, None);
        // An absolute time already past (but after the server started) flushes now.
        cx.store.set(&past, b"2", 0, Exptime::NEVER).await?;
        cx.store.flush_all((cx.time.now_unix() - 10) as u32).await?;
        check_eq!(cx.store.get(&past).await?, None);
        cx.store.set(&past, b"3", 0, Exptime::NEVER).await?;
        check_eq!(cx.store.get_value(&past).await?.as_deref(), Some(&b"3"[..]));
    }
}
