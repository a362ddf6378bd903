//! `-o`: memcached's extended options. Each is taken with memcached's checks and messages
//! (`return 1` in its `main`, so exit status 1); those that tune machinery memkitd does not
//! have are accepted with a warning. An option memcached does not know is refused, as it is.
//! The flash tier's `ext_*` are read in `flash.rs`.

use super::numbers::{atof, atoi};
use super::{Settings, Tuning};

/// memcached's `safe_strtoul`: all digits (surrounding space allowed), fits in 32 bits.
fn strtoul32(v: &str) -> Option<u32> {
    v.trim().parse().ok()
}

/// One `name[=value]` of a `-o` list. `Err` is memcached's message (exit 1).
pub(super) fn option(
    s: &mut Settings,
    t: &mut Tuning,
    opt: &str,
    warn: &mut Vec<String>,
) -> Result<(), String> {
    let (k, v) = match opt.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (opt, None),
    };
    let need = |what: &str| v.ok_or_else(|| format!("Missing {what}"));
    let no_effect =
        |warn: &mut Vec<String>| warn.push(format!("-o {k}: accepted, no effect in memkitd"));
    if slab_lru(t, k, v, warn)? {
        return Ok(());
    }
    match k {
        "idle_timeout" => {
            let v = need("numeric argument for idle_timeout")?;
            s.idle_timeout = atoi(v).max(0) as u64;
        }
        "hashpower" => {
            let n = atoi(need("numeric argument for hashpower")?);
            if n < 12 {
                return Err(format!("Initial hashtable multiplier of {n} is too low"));
            }
            if n > 32 {
                return Err(format!(
                    "Initial hashtable multiplier of {n} is too high\nChoose a value based on \
                     \"STAT hash_power_level\" from a running instance"
                ));
            }
            no_effect(warn);
        }
        "hash_algorithm" => match need("hash_algorithm argument")? {
            "jenkins" | "murmur3" | "xxh3" => no_effect(warn),
            _ => return Err("Unknown hash_algorithm option (jenkins, murmur3, xxh3)".into()),
        },
        "watcher_logbuf_size" | "worker_logbuf_size" | "read_buf_mem_limit" | "ssl_wbuf_size" => {
            let v = need(&format!("{k} argument"))?;
            strtoul32(v).ok_or_else(|| format!("could not parse argument to {k}"))?;
            no_effect(warn);
        }
        "resp_obj_mem_limit" => warn
            .push("DEPRECATED: resp_obj_mem_limit no longer used. See read_buf_mem_limit,".into()),
        k if k.starts_with("ssl_") => ssl_option(s, k, v, warn)?,
        // The flash tier's options (memcached's extstore).
        k if k.starts_with("ext_") && super::flash::option(&mut t.flash, k, v, warn)? => {
            t.flash_given = true
        }
        // Tuning of memcached machinery memkitd does not have, or defaults it already has.
        "maxconns_fast"
        | "no_maxconns_fast"
        | "no_hashexpand"
        | "slab_reassign"
        | "no_slab_reassign"
        | "no_slab_automove"
        | "lru_crawler"
        | "no_lru_crawler"
        | "slab_sizes"
        | "track_sizes"
        | "no_inline_ascii_resp"
        | "inline_ascii_resp"
        | "modern"
        | "no_drop_privileges"
        | "drop_privileges"
        | "sock_cookie_id"
        | "slab_automove_freeratio" => no_effect(warn),
        "" => {}
        _ => return Err(format!("Illegal suboption \"{opt}\"")),
    }
    Ok(())
}

/// The slab and LRU options: memcached's checks, no effect here (memkitd has no slab
/// classes or LRU threads), but for what memcached checks `-I` against. `Ok(false)` when `k`
/// is not one of them.
fn slab_lru(
    t: &mut Tuning,
    k: &str,
    v: Option<&str>,
    warn: &mut Vec<String>,
) -> Result<bool, String> {
    let need = |what: &str| v.ok_or_else(|| format!("Missing {what}"));
    let no_effect =
        |warn: &mut Vec<String>| warn.push(format!("-o {k}: accepted, no effect in memkitd"));
    match k {
        "slab_automove" => {
            if v.is_some_and(|v| !(0..=2).contains(&atoi(v))) {
                return Err("slab_automove must be between 0 and 2".into());
            }
            no_effect(warn);
        }
        "slab_automove_ratio" => {
            let r = atof(need("slab_automove_ratio argument")?);
            if r <= 0.0 || r > 1.0 {
                return Err("slab_automove_ratio must be > 0 and < 1".into());
            }
            no_effect(warn);
        }
        "slab_automove_window" => {
            if atoi(need("slab_automove_window argument")?) < 3 {
                return Err("slab_automove_window must be > 2".into());
            }
            no_effect(warn);
        }
        "tail_repair_time" => {
            if atoi(need("numeric argument for tail_repair_time")?) < 10 {
                return Err("Cannot set tail_repair_time to less than 10 seconds".into());
            }
            no_effect(warn);
        }
        "lru_crawler_sleep" => {
            let n = atoi(need("lru_crawler_sleep value")?);
            if !(0..=1_000_000).contains(&n) {
                return Err("LRU crawler sleep must be between 0 and 1 second".into());
            }
            no_effect(warn);
        }
        "lru_crawler_tocrawl" => {
            strtoul32(need("lru_crawler_tocrawl value")?)
                .ok_or("lru_crawler_tocrawl takes a numeric 32bit value")?;
            no_effect(warn);
        }
        "lru_maintainer" => {
            t.lru_maintainer = true;
            no_effect(warn);
        }
        "no_lru_maintainer" => {
            t.lru_maintainer = false;
            no_effect(warn);
        }
        "hot_lru_pct" | "warm_lru_pct" => {
            let n = atoi(need(&format!("{k} argument"))?);
            if !(1..80).contains(&n) {
                return Err(format!("{k} must be > 1 and < 80"));
            }
            if k == "hot_lru_pct" {
                t.hot_lru_pct = n;
            } else {
                t.warm_lru_pct = n;
            }
            no_effect(warn);
        }
        "hot_max_factor" | "warm_max_factor" => {
            if atof(need(&format!("{k} argument"))?) <= 0.0 {
                return Err(format!("{k} must be > 0"));
            }
            no_effect(warn);
        }
        "temporary_ttl" => {
            need("temporary_ttl argument")?;
            t.temp_lru = true;
            no_effect(warn);
        }
        "slab_chunk_max" => {
            // memcached reads it in bytes, whatever its help says, and checks -I against it.
            t.slab_chunk_max = atoi(v.unwrap_or("0")).into();
            t.slab_chunk_changed = true;
            no_effect(warn);
        }
        "no_chunked_items" => {
            t.slab_chunk_max = Tuning::SLAB_PAGE;
            no_effect(warn);
        }
        "no_modern" => {
            if !t.slab_chunk_changed {
                t.slab_chunk_max = Tuning::SLAB_PAGE;
            }
            t.lru_maintainer = false;
            no_effect(warn);
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// One `-o ssl_*` option; memcached's messages for the values it refuses.
fn ssl_option(
    s: &mut Settings,
    k: &str,
    v: Option<&str>,
    warn: &mut Vec<String>,
) -> Result<(), String> {
    let ssl = &mut s.ssl;
    let v = v.ok_or_else(|| match k {
        "ssl_session_cache" | "ssl_kernel_tls" => String::new(),
        _ => format!("Missing {k} argument"),
    });
    match k {
        "ssl_chain_cert" => ssl.chain_cert = Some(v?.to_string()),
        "ssl_key" => ssl.key = Some(v?.to_string()),
        "ssl_ca_cert" => ssl.ca_cert = Some(v?.to_string()),
        "ssl_verify_mode" => match v?.trim().parse::<i64>() {
            Ok(n @ 0..=3) => ssl.verify_mode = n as u8,
            Ok(_) => return Err("Invalid ssl_verify_mode. Use help to see valid options.".into()),
            Err(_) => return Err("could not parse argument to ssl_verify_mode".into()),
        },
        "ssl_min_version" => match v?.trim().parse::<i64>() {
            Ok(n @ 2..=3) => ssl.min_version = n as u8,
            Ok(n @ 0..=1) => {
                warn.push(format!(
                    "-o ssl_min_version={n}: TLS 1.0/1.1 are not supported; TLS 1.2 is the minimum"
                ));
                ssl.min_version = 2;
            }
            Ok(_) => return Err("Invalid ssl_min_version. Use help to see valid options.".into()),
            Err(_) => return Err("could not parse argument to ssl_min_version".into()),
        },
        // SSL_FILETYPE_PEM is 1; DER and ENGINE keys are not supported.
        "ssl_keyformat" => match v?.trim().parse::<i64>() {
            Ok(1) => {}
            Ok(n) => return Err(format!("-o ssl_keyformat={n}: only PEM (1) is supported")),
            Err(_) => return Err("could not parse argument to ssl_keyformat".into()),
        },
        "ssl_ciphers" => {
            v?;
            warn.push(
                "-o ssl_ciphers: accepted, ignored (rustls's safe default suites are used)".into(),
            )
        }
        "ssl_wbuf_size" => unreachable!("read with the other buffer sizes"),
        "ssl_session_cache" | "ssl_kernel_tls" => {
            warn.push(format!("-o {k}: accepted, no effect in memkitd"))
        }
        _ => {
            let opt = match v {
                Ok(v) => format!("{k}={v}"),
                Err(_) => k.to_string(),
            };
            return Err(format!("Illegal suboption \"{opt}\""));
        }
    }
    Ok(())
}
