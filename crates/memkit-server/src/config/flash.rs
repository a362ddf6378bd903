//! The flash tier's options (`-o ext_*`, memcached 1.6's extstore): read with memcached's
//! checks and messages (`storage_read_config`, `storage_conf_parse`, `storage_check_config`
//! and `extstore_init`), kept in [`FlashSettings`], turned into the flash store's
//! configuration and the engine's tier settings.
//!
//! One difference: memcached takes `ext_page_size` only before the first `ext_path` (it
//! sizes each path's pages as it reads it); memkitd reads every option first, so their
//! order does not matter.

use std::path::PathBuf;

use memkit_engine::memkit_flash::{FileSpec, FlashConfig};

use super::Refusal;

const MB: u64 = 1 << 20;

/// Why `-o ext_path` and `--persist` are refused together (`EX_USAGE`).
pub const FLASH_WITH_PERSIST: &str = "ERROR: the flash tier (-o ext_path) cannot be combined \
    with --persist: --persist already keeps every item on disk and serves RAM misses from it";

/// The `ext_*` options, with memcached's defaults. [`super::Settings::flash`] holds one when
/// `ext_path` was given (the tier is on); without it the other `ext_*` options are checked
/// and have no effect, as in memcached.
#[derive(Debug, Clone)]
pub struct FlashSettings {
    /// `ext_path=PATH:SIZE` (repeatable), SIZE in bytes, in the order given.
    pub files: Vec<FileSpec>,
    /// `ext_page_size`, in bytes (given in MB; default 64 MB).
    pub page_size: u64,
    /// `ext_wbuf_size`, in bytes (given in MB; default 4 MB).
    pub wbuf_size: u64,
    /// `ext_threads`: the store's reader threads (default 1).
    pub threads: u32,
    /// `ext_io_depth`: accepted and shown nowhere, as in memcached 1.6.18 (which reads it and
    /// never uses it).
    pub io_depth: u32,
    /// `ext_item_size`: values longer than this may go to flash (default 512).
    pub item_size: u32,
    /// `ext_item_age`: values idle at least this many seconds go to flash without memory
    /// pressure (default `u32::MAX`, shown as 4294967295: only under pressure).
    pub item_age: u32,
    /// `ext_low_ttl`: items with less TTL left than this stay out of flash (default 0).
    pub low_ttl: u32,
    /// `ext_recache_rate`: one flash read in this many brings the value back to RAM (default
    /// 2000; 0: never).
    pub recache_rate: u32,
    /// `ext_compact_under`: compact when fewer pages than this are free; 0 (the default)
    /// means a quarter of the pages ([`FlashSettings::compact_under`]).
    pub compact_under: u32,
    /// `ext_drop_under`: memcached's threshold for dropping cold items during compaction;
    /// shown in `stats settings`, no effect (memkit's compaction rescues or drops a record
    /// by `ext_drop_unread` alone). 0 (the default) means a quarter of the pages.
    pub drop_under: u32,
    /// `ext_max_sleep`: memcached's background threads' longest sleep, in µs (default
    /// 1000000); shown in `stats settings`, no effect (memkit's threads wait on work).
    pub max_sleep: u32,
    /// `ext_max_frag`: a page whose live share is under this is worth compacting (0.80).
    pub max_frag: f64,
    /// `ext_drop_unread`: compaction drops values never read since they were written.
    pub drop_unread: bool,
}

impl Default for FlashSettings {
    fn default() -> Self {
        FlashSettings {
            files: Vec::new(),
            page_size: 64 * MB,
            wbuf_size: 4 * MB,
            threads: 1,
            io_depth: 1,
            item_size: 512,
            item_age: u32::MAX,
            low_ttl: 0,
            recache_rate: 2000,
            compact_under: 0,
            drop_under: 0,
            max_sleep: 1_000_000,
            max_frag: 0.8,
            drop_unread: false,
        }
    }
}

impl FlashSettings {
    /// Pages in all the files (each file holds as many whole pages as fit, as in memcached).
    pub fn pages(&self) -> u64 {
        match self.page_size {
            0 => 0,
            p => self.files.iter().map(|f| f.size / p).sum(),
        }
    }

    /// `ext_compact_under` in effect: as given, or a quarter of the pages. (memcached takes
    /// the quarter of the last `ext_path` given; the same with one file.)
    pub fn compact_under(&self) -> u32 {
        match self.compact_under {
            0 => (self.pages() / 4) as u32,
            n => n,
        }
    }

    /// `ext_drop_under` as `stats settings` shows it (see [`FlashSettings::compact_under`]).
    pub fn drop_under(&self) -> u32 {
        match self.compact_under {
            0 => (self.pages() / 4) as u32,
            _ => self.drop_under,
        }
    }

    /// The flash store's configuration.
    pub fn store_config(&self) -> FlashConfig {
        FlashConfig {
            files: self.files.clone(),
            page_size: self.page_size,
            wbuf_size: self.wbuf_size as usize,
            // memcached's write buffers: one per page bucket, four.
            wbufs: 4,
            io_threads: self.threads.max(1) as usize,
            compact_under: self.compact_under() as usize,
            max_frag: self.max_frag,
            drop_unread: self.drop_unread,
        }
    }

    /// The engine's side of the tier, `ext_item_age` as it is (memcached's `u32::MAX`: no
    /// value goes before eviction would drop it; 0: every value goes as it is stored).
    pub fn tier(
        &self,
        store: std::sync::Arc<memkit_engine::memkit_flash::FlashStore>,
    ) -> memkit_engine::FlashTier {
        memkit_engine::FlashTier {
            item_size: self.item_size as usize,
            item_age: self.item_age,
            low_ttl: self.low_ttl,
            recache_rate: self.recache_rate,
            ..memkit_engine::FlashTier::new(store)
        }
    }

    /// memcached's `storage_check_config` (`EX_USAGE`): `-I` against the write buffer, and
    /// UDP.
    pub(super) fn check_usage(&self, item_size_max: i64, udp_port: i64) -> Result<(), Refusal> {
        let usage = |m: String| Err(Refusal::new(super::EX_USAGE, m));
        if item_size_max > self.wbuf_size as i64 {
            return usage(format!(
                "-I (item_size_max: {item_size_max}) cannot be larger than ext_wbuf_size: {}",
                self.wbuf_size
            ));
        }
        if udp_port != 0 {
            return usage("Cannot use UDP with extstore enabled (-U 0 to disable)".into());
        }
        Ok(())
    }

    /// What memcached's `extstore_init` refuses (exit status 1, "Failed to initialize
    /// external storage: ..."). Values memcached divides by unchecked (an `ext_page_size`
    /// of 0: it dies of SIGFPE) and a tier of no pages are refused too.
    pub(super) fn check_init(&self) -> Result<(), Refusal> {
        let init = |m: &str| {
            Err(Refusal::new(
                1,
                format!("Failed to initialize external storage: {m}"),
            ))
        };
        if self.page_size == 0 {
            return init("ext_page_size must be greater than 0");
        }
        if !self.page_size.is_multiple_of(self.wbuf_size) {
            return init("page_size must be divisible by wbuf_size");
        }
        if !self.page_size.is_multiple_of(2 * MB) || !self.wbuf_size.is_multiple_of(2 * MB) {
            return init("page_size and wbuf_size must be divisible by 1024*1024*2");
        }
        if self.pages() >= u64::from(u16::MAX) {
            return init(
                "page_count must total to < 65536. Increase page_size or lower path sizes",
            );
        }
        if self.pages() == 0 {
            return init(&format!(
                "no ext_path holds a page of ext_page_size ({} MB): give a SIZE of at least \
                 one page, with its unit (ext_path=PATH:1G)",
                self.page_size / MB
            ));
        }
        Ok(())
    }
}

/// memcached's `safe_strtoul`: digits only (space around them allowed), 32 bits.
fn strtoul(k: &str, v: Option<&str>) -> Result<u32, String> {
    let v = v.ok_or_else(|| format!("Missing {k} argument"))?;
    v.trim()
        .parse()
        .map_err(|_| format!("could not parse argument to {k}"))
}

/// One `-o ext_*` option into `f`. `Ok(false)` when `k` is not one; `Err` is memcached's
/// message (exit status 1). `warn` gets what is accepted without effect.
pub(super) fn option(
    f: &mut FlashSettings,
    k: &str,
    v: Option<&str>,
    warn: &mut Vec<String>,
) -> Result<bool, String> {
    match k {
        "ext_page_size" => f.page_size = u64::from(strtoul(k, v)?) * MB,
        "ext_wbuf_size" => f.wbuf_size = u64::from(strtoul(k, v)?) * MB,
        "ext_threads" => {
            f.threads = strtoul(k, v)?;
            if f.threads == 0 {
                // memcached starts with no reader thread, and its flash reads never end.
                warn.push("-o ext_threads=0: at least one reader thread is needed; using 1".into());
                f.threads = 1;
            }
        }
        "ext_io_depth" => f.io_depth = strtoul(k, v)?,
        "ext_item_size" => f.item_size = strtoul(k, v)?,
        "ext_item_age" => f.item_age = strtoul(k, v)?,
        "ext_low_ttl" => f.low_ttl = strtoul(k, v)?,
        "ext_recache_rate" => f.recache_rate = strtoul(k, v)?,
        "ext_compact_under" => f.compact_under = strtoul(k, v)?,
        "ext_drop_under" => {
            f.drop_under = strtoul(k, v)?;
            warn.push("-o ext_drop_under: accepted, no effect in memkitd".into());
        }
        "ext_max_sleep" => {
            f.max_sleep = strtoul(k, v)?;
            warn.push("-o ext_max_sleep: accepted, no effect in memkitd".into());
        }
        "ext_max_frag" => {
            let v = v.ok_or("Missing ext_max_frag argument")?;
            f.max_frag = v
                .trim()
                .parse()
                .map_err(|_| "could not parse argument to ext_max_frag".to_string())?;
        }
        "ext_drop_unread" => f.drop_unread = true,
        "ext_path" => {
            let v = v.ok_or("missing argument to ext_path, ie: ext_path=/d/file:5G")?;
            let spec = path(v).map_err(|m| format!("{m}failed to parse ext_path argument"))?;
            f.files.push(spec);
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// `PATH:SIZE[:BUCKET]` as memcached's `storage_conf_parse` reads it: SIZE is `atoi` of all
/// but its last character, which is the unit (`m`, `g`, `t`, `p`, either case; memkitd also
/// takes `k`); another unit makes the size 0, as in memcached. The bucket may only be
/// `default` (memcached 1.6.18's rule). `Err`: memcached's first line, with its newline.
fn path(v: &str) -> Result<FileSpec, String> {
    let mut parts = v.split(':').filter(|p| !p.is_empty());
    let file = parts.next().ok_or("")?;
    let size = parts
        .next()
        .ok_or("must supply size to ext_path, ie: ext_path=/f/e:64m (M|G|T|P supported)\n")?;
    let (num, unit) = size.split_at(size.len() - size.chars().last().map_or(0, char::len_utf8));
    let shift = match unit.to_ascii_lowercase().as_str() {
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        "p" => 50,
        _ => 64,
    };
    let n = u64::try_from(super::numbers::atoi(num)).unwrap_or(0);
    let size = if shift == 64 {
        0
    } else {
        n.saturating_mul(1 << shift)
    };
    // memcached reads the bucket up to a comma; `-o` lists were split at commas already.
    match parts.next() {
        None | Some("default") => {}
        Some("compact" | "lowttl" | "chunked") => {
            return Err("ext_path only presently supports the default bucket\n".into());
        }
        Some(other) => return Err(format!("Unknown extstore bucket: {other}\n")),
    }
    Ok(FileSpec {
        path: PathBuf::from(file),
        size,
    })
}
