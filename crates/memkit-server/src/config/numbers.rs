//! memcached reads its numeric flags with C's `atoi`/`atof`/`strtol`: leading digits count,
//! the rest is ignored, and no digits at all is 0. Reading them the same way keeps a value
//! memcached takes (`-c 10x`) from being a usage error here, and makes a value it refuses
//! (`-c abc` is `-c 0`) fail with its message. `Numbers` reads the flags that way.

use super::{Args, Refusal};

/// C's `atoi` as glibc does it: `(int) strtol(s, NULL, 10)` (out-of-range values clamp to
/// `long` and are then truncated to `int`).
pub fn atoi(s: &str) -> i32 {
    strtol(s, 10) as i32
}

/// C's `strtol` (base 8 or 10), clamped to `i64` like glibc's `long`.
pub fn strtol(s: &str, radix: u32) -> i64 {
    let s = s.trim_start();
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut v: i64 = 0;
    for c in digits.chars() {
        let Some(d) = c.to_digit(radix) else { break };
        v = v
            .saturating_mul(i64::from(radix))
            .saturating_add(i64::from(d));
    }
    if neg { v.saturating_neg() } else { v }
}

/// C's `atof` for the plain decimal forms a command line carries (`1.25`, `2`, `.5`).
pub fn atof(s: &str) -> f64 {
    let s = s.trim_start();
    let end = s
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || c == '.' || (i == 0 && (c == '-' || c == '+'))))
        .map_or(s.len(), |(i, _)| i);
    // `1.2.3` reads as 1.2, as strtod stops at the second dot.
    let mut num = &s[..end];
    if let Some(first) = num.find('.')
        && let Some(second) = num[first + 1..].find('.')
    {
        num = &num[..first + 1 + second];
    }
    num.parse().unwrap_or(0.0)
}

/// `-I`: memcached's reading: a trailing `k`/`m` (either case) multiplies what `atoi`
/// reads of the rest; anything else is `atoi` of the whole.
pub fn item_size(s: &str) -> i64 {
    match s.as_bytes().last() {
        Some(b'k' | b'K') => i64::from(atoi(&s[..s.len() - 1])) * 1024,
        Some(b'm' | b'M') => i64::from(atoi(&s[..s.len() - 1])) * 1024 * 1024,
        _ => i64::from(atoi(s)),
    }
}

/// `-m`: megabytes as memcached reads them (`atoi`, so `-m abc` is 0 and refused later).
/// memkitd also takes a size with a `k`/`m`/`g` suffix (`-m 512m`, `-m 2g`).
pub fn megabytes(s: &str) -> i64 {
    let t = s.trim();
    let shift = match t.as_bytes().last() {
        Some(b'k' | b'K') => 10,
        Some(b'm' | b'M') => 20,
        Some(b'g' | b'G') => 30,
        _ => return i64::from(atoi(s)).saturating_mul(1 << 20),
    };
    let num = &t[..t.len() - 1];
    match num.parse::<i64>() {
        Ok(n) => n.saturating_mul(1 << shift),
        Err(_) => i64::from(atoi(s)).saturating_mul(1 << 20),
    }
}

/// memcached's numeric flags, read as it reads them, with the refusals of its option loop
/// (exit status 1) in its order.
pub(super) struct Numbers {
    pub(super) port: i64,
    pub(super) udp_port: i64,
    pub(super) memory: i64,
    pub(super) conns: i32,
    pub(super) reqs: i32,
    pub(super) factor: f64,
    pub(super) min_size: i32,
    pub(super) threads: i32,
    pub(super) napi_ids: i32,
    pub(super) item_size: i64,
    pub(super) backlog: i32,
}

impl Numbers {
    pub(super) fn read(a: &Args, warn: &mut Vec<String>, refused: &mut Vec<Refusal>) -> Numbers {
        let mut refuse = |code: i32, msg: &str| refused.push(Refusal::new(code, msg));
        let pr = &a.process;
        let tcp_given = a.port.is_some();
        let mut port = a.port.as_deref().map_or(11211, |p| i64::from(atoi(p)));
        let udp_port = a.udp_port.as_deref().map_or(0, |p| i64::from(atoi(p)));
        if a.udp_port.is_some() && udp_port != 0 && !tcp_given {
            port = udp_port; // memcached's fallback: -U alone sets the TCP port too
        }
        let mut memory = megabytes(&a.memory_limit);
        if memory < 0 {
            warn.push(format!(
                "-m {}: a negative size; using 64 MB",
                a.memory_limit
            ));
            memory = 64 << 20;
        }
        let conns = atoi(&a.conn_limit);
        if conns <= 0 {
            refuse(1, "Maximum connections must be greater than 0");
        }
        let reqs = atoi(&a.reqs_per_event);
        if reqs == 0 {
            refuse(1, "Number of requests per event must be greater than 0");
        }
        let factor = a.factor.as_deref().map_or(1.25, atof);
        if factor <= 1.0 {
            refuse(1, "Factor must be greater than 1");
        }
        let min_size = a.min_size.as_deref().map_or(48, atoi);
        if min_size == 0 {
            refuse(1, "Chunk size must be greater than 0");
        }
        let threads = atoi(&a.threads);
        if threads <= 0 {
            refuse(1, "Number of threads must be greater than 0");
        } else if threads > 64 {
            warn.push(format!(
                "-t {threads}: a high number of worker threads is not recommended; set it to \
                 the number of cores or less"
            ));
        }
        if pr.delimiter.as_deref() == Some("") {
            refuse(1, "No delimiter specified");
        }
        let napi_ids = pr.napi_ids.as_deref().map_or(0, atoi);
        if pr.napi_ids.is_some() && napi_ids <= 0 {
            refuse(1, "Maximum number of NAPI IDs must be greater than 0");
        }
        let item_size = a.max_item_size.as_deref().map_or(1 << 20, item_size);
        let backlog = atoi(&a.backlog);
        Numbers {
            port,
            udp_port,
            memory,
            conns,
            reqs,
            factor,
            min_size,
            threads,
            napi_ids,
            item_size,
            backlog,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_numbers_as_c_does() {
        assert_eq!(atoi("10x"), 10);
        assert_eq!(atoi("abc"), 0);
        assert_eq!(atoi(" -3"), -3);
        assert_eq!(atoi("99999999999"), 99999999999i64 as i32);
        assert_eq!(strtol("755", 8), 0o755);
        assert_eq!(strtol("79", 8), 7);
        assert_eq!(atof("1.25"), 1.25);
        assert_eq!(atof("x"), 0.0);
        assert_eq!(atof("1.2.3"), 1.2);
        assert_eq!(item_size("2m"), 2 << 20);
        assert_eq!(item_size("1k"), 1024);
        assert_eq!(item_size("1g"), 1);
        assert_eq!(megabytes("64"), 64 << 20);
        assert_eq!(megabytes("2g"), 2 << 30);
        assert_eq!(megabytes("abc"), 0);
    }
}
