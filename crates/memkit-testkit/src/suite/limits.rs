//! Keys and values at and past their limits, and binary safety.

use memkit_types::{
    ArithOptions, DeleteOptions, Error, Exptime, GetOptions, MAX_KEY_LEN, StoreMode, StoreOptions,
};

use super::{case_table, check, check_eq};

/// Pads the case's key to exactly `len` bytes.
fn key_of_len<M, T>(cx: &super::Ctx<'_, M, T>, len: usize) -> Vec<u8> {
    let mut k = cx.key("");
    k.resize(len, b'x');
    k
}

case_table! {
    binary_values => |cx| {
        let k = cx.key("k");
        let all: Vec<u8> = (0..=255u8).collect();
        cx.store.set(&k, &all, 0, Exptime::NEVER).await?;
        check_eq!(cx.store.get_value(&k).await?.as_deref(), Some(&all[..]));
        for tricky in [&b"a\r\nb"[..], b"\r\n", b"END\r\n", b"VALUE x 0 1\r\nEND\r\n", b"\0\0\0", b" "] {
            cx.store.set(&k, tricky, 0, Exptime::NEVER).await?;
            check_eq!(cx.store.get_value(&k).await?.as_deref(), Some(tricky));
        }
        cx.store.set(&k, b"\r\n", 0, Exptime::NEVER).await?;
        check!(cx.store.append(&k, b"\r\n").await?, "append failed");
        check_eq!(cx.store.get_value(&k).await?.as_deref(), Some(&b"\r\n\r\n"[..]));
    }

    empty_values => |cx| {
        let k = cx.key("k");
        cx.store.set(&k, b"", 5, Exptime::NEVER).await?;
        let item = cx.store.get(&k).await?.ok_or("empty value lost".to_string())?;
        check_eq!((item.value.len(), item.flags), (0, 5));
        check!(cx.store.append(&k, b"").await?, "empty append failed");
        check!(cx.store.append(&k, b"x").await?, "append to empty failed");
        check_eq!(cx.store.get_value(&k).await?.as_deref(), Some(&b"x"[..]));
    }

    key_250_bytes_ok => |cx| {
        let k = key_of_len(cx, MAX_KEY_LEN);
        cx.store.set(&k, b"v", 0, Exptime::NEVER).await?;
        check_eq!(cx.store.get_value(&k).await?.as_deref(), Some(&b"v"[..]));
        check!(cx.store.delete(&k).await?, "delete of a 250-byte key");
    }

    key_251_bytes_invalid => |cx| {
        let k = key_of_len(cx, MAX_KEY_LEN + 1);
        check_eq!(cx.store.set(&k, b"v", 0, Exptime::NEVER).await, Err(Error::InvalidKey));
        check_eq!(cx.store.get(&k).await, Err(Error::InvalidKey));
        check_eq!(cx.store.delete(&k).await, Err(Error::InvalidKey));
        check_eq!(cx.store.incr(&k, 1).await, Err(Error::InvalidKey));
        check_eq!(cx.store.touch(&k, Exptime::NEVER).await, Err(Error::InvalidKey));
    }

    key_with_space_or_control_invalid => |cx| {
        let ok = cx.key("ok");
        for suffix in [&b" x"[..], b"\r\nx", b"\tx", b"\x00x", b"\x7f"] {
            let bad = [&ok[..], suffix].concat();
            check_eq!((suffix, cx.store.set(&bad, b"v", 0, Exptime::NEVER).await), (suffix, Err(Error::InvalidKey)));
            check_eq!((suffix, cx.store.get(&bad).await), (suffix, Err(Error::InvalidKey)));
        }
        check_eq!(cx.store.set(b"", b"v", 0, Exptime::NEVER).await, Err(Error::InvalidKey));
        // One bad key fails the whole multi-get.
        let keys: Vec<&[u8]> = vec![&ok, b"bad key"];
        check_eq!(cx.store.get_multi(&keys, &GetOptions::default()).await, Err(Error::InvalidKey));
    }

    utf8_key_ok => |cx| {
        let k = [cx.key("k"), "ключ-キー".as_bytes().to_vec()].concat();
        cx.store.set(&k, b"v", 0, Exptime::NEVER).await?;
        check_eq!(cx.store.get_value(&k).await?.as_deref(), Some(&b"v"[..]));
    }

    invalid_key_everywhere => |cx| {
        let bad = b"has space";
        check_eq!(cx.store.store(bad, b"v", &StoreOptions::default()).await, Err(Error::InvalidKey));
        check_eq!(cx.store.delete_with(bad, &DeleteOptions::default()).await, Err(Error::InvalidKey));
        check_eq!(cx.store.arithmetic(bad, &ArithOptions::default()).await, Err(Error::InvalidKey));
        check_eq!(cx.store.gat(bad, Exptime::NEVER).await, Err(Error::InvalidKey));
    }

    value_512k_ok => |cx| {
        let k = cx.key("k");
        let v: Vec<u8> = (0..512 * 1024).map(|i| (i % 251) as u8).collect();
        cx.store.set(&k, &v, 0, Exptime::NEVER).await?;
        check!(cx.store.get_value(&k).await?.as_deref() == Some(&v[..]), "512 KiB value corrupted");
    }

    value_just_under_1m_ok => |cx| {
        // memcached charges ~60 bytes plus the key per item: 1 MiB minus 1 KiB always fits.
        let k = cx.key("k");
        let v = vec![b'x'; 1024 * 1024 - 1024];
        cx.store.set(&k, &v, 0, Exptime::NEVER).await?;
        check_eq!(cx.store.get(&k).await?.map(|i| i.value.len()), Some(v.len()));
    }

    value_over_1m_too_large => |cx| {
        let k = cx.key("k");
        let v = vec![b'x'; 1024 * 1024 + 1];
        check_eq!(cx.store.set(&k, &v, 0, Exptime::NEVER).await, Err(Error::TooLarge));
        check_eq!(cx.store.get(&k).await?, None);
        let add = StoreOptions::new(StoreMode::Add, 0, Exptime::NEVER);
        check_eq!(cx.store.store(&k, &v, &add).await, Err(Error::TooLarge));
        check_eq!(cx.store.get(&k).await?, None);
    }

    set_too_large_drops_old_value => |cx| {
        // memcached removes the old item rather than keep serving stale data.
        let k = cx.key("k");
        cx.store.set(&k, b"old", 0, Exptime::NEVER).await?;
        let v = vec![b'x'; 2 * 1024 * 1024];
        check_eq!(cx.store.set(&k, &v, 0, Exptime::NEVER).await, Err(Error::TooLarge));
        check_eq!(cx.store.get(&k).await?, None);
    }

    append_past_limit_not_stored => |cx| {
        let k = cx.key("k");
        let v = vec![b'x'; 1024 * 1024 - 1024];
        cx.store.set(&k, &v, 0, Exptime::NEVER).await?;
        check!(!cx.store.append(&k, &[b'y'; 2048]).await?, "append past the item size limit");
        check_eq!(cx.store.get(&k).await?.map(|i| i.value.len()), Some(v.len()));
    }
}
