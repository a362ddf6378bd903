//! `memkit trace FILE...`: renders the cookbook's per-key trace files (seed 003's debugging
//! trick; format in `memkit_cookbook::caching::trace`): one ASCII letter per action,
//!
//! | letter | action |
//! |---|---|
//! | `M` | miss (absent, expired, tag-invalidated, undecodable) |
//! | `L` | lock attempt (rebuild lock or lease) |
//! | `W` | the loader ran and the value was written |
//! | `U` | the lock or lease was released |
//! | `H` | a fresh value was served |
//! | `S` | a stale value was served (memkit extension) |
//! | `E` | the loader failed (memkit extension) |
//!
//! Any other byte is skipped. The rendering splits the letters into *episodes*, each from a
//! miss to the next, and tells each one's story in words, as the seed reads its example
//! line: `MLWUHHHHHHHHHHHHHHHMLLHHHHHHHHHH` is "miss, locked, rebuilt, unlocked, 15 hits",
//! then "miss, lock busy ×2, someone else's value read, 9 hits".

use std::fmt::Write as _;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// The letters a reader keeps.
pub const LETTERS: &[u8] = b"MLWUHSE";

/// Keeps the trace letters of `bytes`, in order.
pub fn letters(bytes: &[u8]) -> String {
    bytes
        .iter()
        .filter(|b| LETTERS.contains(b))
        .map(|b| *b as char)
        .collect()
}

/// Counts per letter, in [`LETTERS`] order.
fn counts(s: &str) -> [usize; 7] {
    let mut c = [0; 7];
    for b in s.bytes() {
        if let Some(i) = LETTERS.iter().position(|l| *l == b) {
            c[i] += 1;
        }
    }
    c
}

/// `MLWUHHH` → `M L W U H×3`.
pub fn run_length(s: &str) -> String {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let mut j = i;
        while j < b.len() && b[j] == b[i] {
            j += 1;
        }
        let n = j - i;
        out.push(if n == 1 {
            (b[i] as char).to_string()
        } else {
            format!("{}×{n}", b[i] as char)
        });
        i = j;
    }
    out.join(" ")
}

/// Splits letters into episodes. An episode starts at a miss (`M`) that follows an outcome
/// (`H`, `S`, `W`, `U`, `E`); misses and lock attempts in a row stay together, so a group
/// file where many callers missed at once (`MLMLML...LLWUHHH`) reads as one rebuild. A first
/// episode may start without a miss (the trace began while the cache was warm).
pub fn episodes(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut prev = 0u8;
    for (i, b) in s.bytes().enumerate() {
        if b == b'M' && i > start && !matches!(prev, b'M' | b'L') {
            out.push(&s[start..i]);
            start = i;
        }
        prev = b;
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

/// An episode's letters for the listing: run-length encoded (`M L W U H×15`), or as
/// counts per letter when that would be long (interleaved callers).
pub fn shape(ep: &str) -> String {
    let rl = run_length(ep);
    if rl.chars().count() <= 24 {
        return rl;
    }
    LETTERS
        .iter()
        .zip(counts(ep))
        .filter(|(_, n)| *n > 0)
        .map(|(l, n)| {
            if n == 1 {
                (*l as char).to_string()
            } else {
                format!("{}×{n}", *l as char)
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// One episode in words.
pub fn story(ep: &str) -> String {
    let [m, l, w, u, h, s, e] = counts(ep);
    let mut parts: Vec<String> = Vec::new();
    let once = |n: usize, what: &str| {
        if n == 1 {
            what.to_string()
        } else {
            format!("{what} ×{n}")
        }
    };
    match m {
        0 => parts.push("(already cached)".into()),
        1 => parts.push("miss".into()),
        m => parts.push(format!("{m} misses together")),
    }
    if l > 0 {
        if m > 1 {
            parts.push(plural(l, "lock attempt"));
        } else if w > 0 || e > 0 {
            parts.push(if l == 1 {
                "locked".into()
            } else {
                format!("locked after {l} attempts")
            });
        } else {
            parts.push(once(l, "lock busy"));
        }
    }
    if e > 0 {
        parts.push(once(e, "loader failed"));
    }
    if w > 0 {
        parts.push(if w == 1 && m > 1 {
            "rebuilt once".into()
        } else {
            once(w, "rebuilt")
        });
    }
    if u > 0 {
        parts.push("unlocked".into());
    }
    if s > 0 {
        parts.push(format!("{} served stale", plural(s, "value")));
    }
    if h > 0 {
        if w == 0 && m == 1 {
            parts.push("someone else's value read".into());
            if h > 1 {
                parts.push(plural(h - 1, "hit"));
            }
        } else {
            parts.push(plural(h, "hit"));
        }
    }
    parts.join(", ")
}

/// The whole report for one file's letters.
pub fn render(name: &str, s: &str, width: usize) -> String {
    let mut out = String::new();
    let c = counts(s);
    let served = c[0] + c[4] + c[5];
    let ratio = if served == 0 {
        "-".to_string()
    } else {
        format!("{:.1}%", 100.0 * (c[4] + c[5]) as f64 / served as f64)
    };
    let summary: Vec<String> = LETTERS
        .iter()
        .zip(c)
        .filter(|(_, n)| *n > 0)
        .map(|(l, n)| format!("{}={n}", *l as char))
        .collect();
    let _ = writeln!(
        out,
        "{name}: {} letters ({}), hit ratio {ratio} ((H+S)/(H+S+M))",
        s.len(),
        summary.join(" ")
    );
    let width = width.max(8);
    for chunk in s.as_bytes().chunks(width) {
        let _ = writeln!(out, "  {}", String::from_utf8_lossy(chunk));
    }
    let eps = episodes(s);
    let num_w = eps.len().to_string().len();
    for (i, ep) in eps.iter().enumerate() {
        let _ = writeln!(out, "  {:>num_w$}. {:<24} {}", i + 1, shape(ep), story(ep));
    }
    out
}

/// The files named by `paths` (a directory means every `*.trace` in it, sorted).
fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| format!("{}: {e}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "trace"))
                .collect();
            v.sort();
            out.extend(v);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// `memkit trace`: renders each file; with `follow`, then prints letters as they are
/// appended, one line per file per poll, until interrupted.
pub async fn run(paths: &[PathBuf], follow: bool, width: usize) -> Result<ExitCode, String> {
    let files = expand(paths)?;
    let mut out = std::io::stdout().lock();
    let mut ok = true;
    let mut offsets = Vec::new();
    for f in &files {
        match std::fs::read(f) {
            Ok(bytes) => {
                let _ = out.write_all(
                    render(&f.display().to_string(), &letters(&bytes), width).as_bytes(),
                );
                offsets.push(bytes.len() as u64);
            }
            Err(e) => {
                eprintln!("memkit: {}: {e}", f.display());
                ok = false;
                offsets.push(0);
            }
        }
    }
    let _ = out.flush();
    if !follow {
        return Ok(if ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    drop(out);
    let several = files.len() > 1;
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let mut out = std::io::stdout().lock();
        for (f, off) in files.iter().zip(offsets.iter_mut()) {
            let Ok(mut file) = std::fs::File::open(f) else {
                continue;
            };
            let len = file.metadata().map_or(0, |m| m.len());
            if len < *off {
                *off = 0; // truncated or replaced: start over
            }
            if len == *off {
                continue;
            }
            let mut buf = Vec::new();
            if file.seek(SeekFrom::Start(*off)).is_err() || file.read_to_end(&mut buf).is_err() {
                continue;
            }
            *off += buf.len() as u64;
            let new = letters(&buf);
            if new.is_empty() {
                continue;
            }
            let r = if several {
                writeln!(out, "{}: {new}", f.display())
            } else {
                writeln!(out, "{new}")
            };
            if r.is_err() || out.flush().is_err() {
                return Ok(ExitCode::SUCCESS);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_line() {
        let s = letters(b"MLWUHHHHHHHHHHHHHHHMLLHHHHHHHHHH\n");
        let eps = episodes(&s);
        assert_eq!(eps, ["MLWUHHHHHHHHHHHHHHH", "MLLHHHHHHHHHH"]);
        assert_eq!(run_length(eps[0]), "M L W U H×15");
        assert_eq!(story(eps[0]), "miss, locked, rebuilt, unlocked, 15 hits");
        assert_eq!(
            story(eps[1]),
            "miss, lock busy ×2, someone else's value read, 9 hits"
        );
        let r = render("k", &s, 64);
        assert!(r.starts_with("k: 32 letters (M=2 L=3 W=1 U=1 H=25), hit ratio 92.6%"));
        assert_eq!(story("HHH"), "(already cached), 3 hits");
        assert_eq!(story("MLE"), "miss, locked, loader failed");
        // Callers missing together in a group file: one episode.
        let group = "MLMLMLLLLWUHHHHMLWU";
        assert_eq!(episodes(group), ["MLMLMLLLLWUHHHH", "MLWU"]);
        assert_eq!(shape(episodes(group)[0]), "M L M L M L×4 W U H×4");
        assert_eq!(shape(&"ML".repeat(20)), "M×20 L×20");
        assert_eq!(
            story(episodes(group)[0]),
            "3 misses together, 6 lock attempts, rebuilt once, unlocked, 4 hits"
        );
        assert_eq!(
            story("MLSWU"),
            "miss, locked, rebuilt, unlocked, 1 value served stale"
        );
    }
}
