//! The flags as memcached reads them: accepted, applied, refused with its messages.

use super::*;

#[test]
fn memcached_command_lines_parse() {
    let a = Args::parse_from([
        "memkitd",
        "-p",
        "12345",
        "-U",
        "0",
        "-m",
        "128",
        "-c",
        "10",
        "-t",
        "2",
        "-I",
        "2m",
        "-M",
        "-A",
        "-vv",
        "-o",
        "idle_timeout=30,modern",
        "-B",
        "ascii",
        "-R",
        "5",
    ]);
    let (s, warn) = Settings::from_args(a);
    assert_eq!(
        (s.port, s.memory_limit, s.conn_limit, s.threads),
        (12345, 128 << 20, 10, 2)
    );
    assert_eq!(
        (s.item_size_max, s.evict, s.enable_shutdown, s.verbose),
        (2 << 20, false, true, 2)
    );
    assert_eq!(s.idle_timeout, 30);
    assert_eq!(s.listen, vec!["127.0.0.1"]);
    assert_eq!(warn.len(), 1, "{warn:?}");
    assert!(s.check().is_ok());
}

fn refusal(argv: &[&str]) -> Refusal {
    let argv = std::iter::once("memkitd").chain(argv.iter().copied());
    Settings::from_args(Args::parse_from(argv))
        .0
        .check()
        .unwrap_err()
}

#[test]
fn values_memcached_refuses_are_refused_with_its_message_and_status() {
    for (argv, code, msg) in [
        (
            &["-o", "frobnicate=1"][..],
            1,
            "Illegal suboption \"frobnicate=1\"",
        ),
        (
            &["-c", "0"],
            1,
            "Maximum connections must be greater than 0",
        ),
        (
            &["-c", "abc"],
            1,
            "Maximum connections must be greater than 0",
        ),
        (&["-t", "0"], 1, "Number of threads must be greater than 0"),
        (
            &["-R", "0"],
            1,
            "Number of requests per event must be greater than 0",
        ),
        (&["-f", "1"], 1, "Factor must be greater than 1"),
        (&["-n", "0"], 1, "Chunk size must be greater than 0"),
        (&["-D", ""], 1, "No delimiter specified"),
        (
            &["-o", "hashpower=5"],
            1,
            "Initial hashtable multiplier of 5 is too low",
        ),
        (
            &["-o", "idle_timeout"],
            1,
            "Missing numeric argument for idle_timeout",
        ),
        (
            &["-I", "512"],
            64,
            "Item max size cannot be less than 1024 bytes.",
        ),
        (
            &["-I", "lots"],
            64,
            "Item max size cannot be less than 1024 bytes.",
        ),
        (
            &["-I", "1k"],
            64,
            "slab_chunk_max (bytes: 524288) cannot be larger than -I (item_size_max 1024)",
        ),
        (
            &["-I", "1000k"],
            64,
            "-I (item_size_max: 1024000) must be evenly divisible by slab_chunk_max (bytes: 524288)",
        ),
        (
            &["-m", "1", "-I", "1m"],
            64,
            "Cannot set item size limit higher than 1/2 of memory max.",
        ),
        (
            &["-m", "0"],
            64,
            "Cannot set item size limit higher than 1/2 of memory max.",
        ),
        (
            &["-m", "5000", "-I", "2000m"],
            64,
            "Cannot set item size limit higher than a gigabyte.",
        ),
        (
            &["-B", "foo"],
            64,
            "Invalid value for binding protocol: foo\n -- should be one of auto, binary, or ascii",
        ),
        (&["-p", "70000"], 64, "ERROR: Invalid port number 70000."),
        (
            &["-N", "8"],
            64,
            "Number of napi_ids(8) cannot be greater than number of threads(4)",
        ),
        (
            &["-o", "hot_lru_pct=50,warm_lru_pct=40"],
            64,
            "hot_lru_pct + warm_lru_pct cannot be more than 80% combined",
        ),
        (
            &["-o", "temporary_ttl=5,no_lru_maintainer"],
            64,
            "temporary_ttl requires lru_maintainer to be enabled",
        ),
    ] {
        assert_eq!(refusal(argv), Refusal::new(code, msg), "{argv:?}");
    }
}

#[test]
fn every_memcached_flag_is_accepted() {
    let argv = [
        "memkitd",
        "-a",
        "777",
        "-A",
        "-p",
        "1",
        "-U",
        "0",
        "-m",
        "64m",
        "-M",
        "-c",
        "10x",
        "-k",
        "-r",
        "-v",
        "-d",
        "-l",
        "127.0.0.1",
        "-l",
        "::1",
        "-u",
        "nobody",
        "-P",
        "p",
        "-f",
        "1.5",
        "-n",
        "40",
        "-t",
        "2",
        "-D",
        "/",
        "-L",
        "-R",
        "5",
        "-C",
        "-b",
        "10",
        "-B",
        "auto",
        "-I",
        "2m",
        "-F",
        "-X",
        "-W",
        "-e",
        "f",
        "-N",
        "1",
        "-o",
        "modern,no_lru_crawler,ext_path=/x:1G,slab_chunk_max=16384,sock_cookie_id=1",
        "--verbose",
        "--enable-coredumps",
        "--unix-mask=700",
        "--disable-flush-all",
    ];
    let (s, warn) = Settings::from_args(Args::parse_from(argv));
    assert_eq!(s.check(), Ok(()));
    assert_eq!(
        (s.unix_mask, s.flush_enabled, s.conn_limit),
        (0o700, false, 10) // the last -a wins, as with getopt
    );
    assert_eq!(s.listen, vec!["127.0.0.1", "::1"]);
    assert_eq!(
        (s.user.as_deref(), s.verbose, s.prefix_delimiter),
        (Some("nobody"), 2, b'/')
    );
    // -e is warm restart now: taken, not warned about.
    assert_eq!(s.memory_file.as_deref(), Some(std::path::Path::new("f")));
    assert!(!warn.iter().any(|w| w.starts_with("-e")), "{warn:?}");
    // memcached does not add an -l its list already contains.
    let (s, _) = Settings::from_args(Args::parse_from([
        "memkitd",
        "-l",
        "127.0.0.1:7",
        "-l",
        "127.0.0.1",
    ]));
    assert_eq!(s.listen, vec!["127.0.0.1:7"]);
    // -U alone moves the TCP port too, as in memcached.
    let (s, _) = Settings::from_args(Args::parse_from(["memkitd", "-U", "7"]));
    assert_eq!(s.port, 7);
}

#[test]
fn security_flags_parse_like_memcached() {
    let (s, warn) = Settings::from_args(Args::parse_from([
        "memkitd",
        "-Y",
        "users",
        "-Z",
        "-o",
        "ssl_chain_cert=c.pem,ssl_key=k.pem,ssl_ca_cert=ca.pem,ssl_verify_mode=2",
        "-o",
        "ssl_min_version=1,ssl_ciphers=HIGH",
    ]));
    assert_eq!(s.auth_file.as_deref(), Some("users"));
    assert_eq!(
        s.ssl,
        SslSettings {
            enabled: true,
            chain_cert: Some("c.pem".into()),
            key: Some("k.pem".into()),
            ca_cert: Some("ca.pem".into()),
            verify_mode: 2,
            min_version: 2,
        }
    );
    assert_eq!(warn.len(), 2, "{warn:?}");
    assert!(s.check().is_ok());
    let refused = |o: &str| {
        Settings::from_args(Args::parse_from(["memkitd", "-o", o]))
            .0
            .check()
            .unwrap_err()
            .message
    };
    assert_eq!(refused("ssl_chain_cert"), "Missing ssl_chain_cert argument");
    assert_eq!(
        refused("ssl_verify_mode=4"),
        "Invalid ssl_verify_mode. Use help to see valid options."
    );
    assert_eq!(
        refused("ssl_min_version=x"),
        "could not parse argument to ssl_min_version"
    );
}

#[test]
fn tls_on_a_replicated_node_needs_a_ca_for_the_peers() {
    let raft = [
        "--persist",
        "/d",
        "--raft-node",
        "1",
        "--raft-listen",
        "127.0.0.1:7000",
        "--raft-peers",
        "1=127.0.0.1:7000",
    ];
    let with = |o: &'static str| ["-Z", "-o", o].into_iter().chain(raft).collect::<Vec<_>>();
    let r = refusal(&with("ssl_chain_cert=c.pem,ssl_key=k.pem"));
    assert_eq!(
        (r.code, r.message.as_str()),
        (64, crate::tls::PEER_CA_REQUIRED)
    );
    let argv = with("ssl_chain_cert=c.pem,ssl_key=k.pem,ssl_ca_cert=ca.pem");
    let argv = std::iter::once("memkitd").chain(argv);
    assert!(
        Settings::from_args(Args::parse_from(argv))
            .0
            .check()
            .is_ok()
    );
    // Without replication, -Z alone needs no CA, as in memcached.
    let argv = ["memkitd", "-Z", "-o", "ssl_chain_cert=c.pem,ssl_key=k.pem"];
    assert!(
        Settings::from_args(Args::parse_from(argv))
            .0
            .check()
            .is_ok()
    );
}

fn flash_of(o: &str) -> (Settings, Vec<String>) {
    Settings::from_args(Args::parse_from(["memkitd", "-o", o]))
}

fn flash_refusal(argv: &[&str]) -> (i32, String) {
    let r = refusal(argv);
    (r.code, r.message)
}

#[test]
fn flash_options_take_memcached_defaults_and_values() {
    // No ext_path: the tier is off, and nothing of it shows.
    let (s, warn) = Settings::from_args(Args::parse_from(["memkitd"]));
    assert!(s.flash.is_none());
    assert!(warn.is_empty(), "{warn:?}");
    // Defaults (memcached's storage_init_config) once ext_path is given.
    let (s, warn) = flash_of("ext_path=/d/f:1G");
    assert!(warn.is_empty(), "{warn:?}");
    assert_eq!(s.check(), Ok(()));
    let f = s.flash.expect("the tier is on");
    assert_eq!(f.files.len(), 1);
    assert_eq!(f.files[0].path, std::path::Path::new("/d/f"));
    assert_eq!(f.files[0].size, 1 << 30);
    assert_eq!((f.page_size, f.wbuf_size), (64 << 20, 4 << 20));
    assert_eq!((f.threads, f.io_depth), (1, 1));
    assert_eq!((f.item_size, f.item_age), (512, u32::MAX));
    assert_eq!((f.low_ttl, f.recache_rate), (0, 2000));
    assert_eq!(
        (f.max_sleep, f.max_frag, f.drop_unread),
        (1_000_000, 0.8, false)
    );
    // compact_under and drop_under default to a quarter of the pages (16 here).
    assert_eq!((f.compact_under(), f.drop_under()), (4, 4));
    let cfg = f.store_config();
    assert_eq!(
        (cfg.page_size, cfg.wbuf_size, cfg.io_threads),
        (64 << 20, 4 << 20, 1)
    );
    assert_eq!(
        (cfg.compact_under, cfg.max_frag, cfg.drop_unread),
        (4, 0.8, false)
    );

    // Every option, in any order (memcached wants ext_page_size before ext_path).
    let (s, warn) = Settings::from_args(Args::parse_from([
        "memkitd",
        "-o",
        "ext_path=/a:64m,ext_path=/b:1g:default,ext_page_size=8,ext_wbuf_size=8,ext_threads=3",
        "-o",
        "ext_io_depth=2,ext_item_size=1024,ext_item_age=60,ext_low_ttl=30,ext_recache_rate=0",
        "-o",
        "ext_compact_under=5,ext_drop_under=3,ext_max_sleep=500,ext_max_frag=0.5,ext_drop_unread",
    ]));
    assert_eq!(s.check(), Ok(()));
    // ext_drop_under and ext_max_sleep tune memcached threads memkitd does not have.
    assert_eq!(warn.len(), 2, "{warn:?}");
    let f = s.flash.expect("the tier is on");
    let sizes: Vec<u64> = f.files.iter().map(|f| f.size).collect();
    assert_eq!(sizes, [64 << 20, 1 << 30]);
    assert_eq!(
        (f.page_size, f.wbuf_size, f.threads, f.io_depth),
        (8 << 20, 8 << 20, 3, 2)
    );
    assert_eq!((f.item_size, f.item_age, f.low_ttl), (1024, 60, 30));
    assert_eq!(f.recache_rate, 0);
    assert_eq!(
        (f.compact_under(), f.drop_under(), f.max_sleep),
        (5, 3, 500)
    );
    assert_eq!((f.max_frag, f.drop_unread, f.pages()), (0.5, true, 8 + 128));
    // Units as memcached reads them (either case), and k besides.
    for (size, bytes) in [("2t", 2u64 << 40), ("1P", 1 << 50), ("512k", 512 << 10)] {
        let (s, _) = flash_of(&format!("ext_path=/x:{size}"));
        assert_eq!(s.flash.unwrap().files[0].size, bytes, "{size}");
    }
    // The options without ext_path: checked, one warning, no tier.
    let (s, warn) = flash_of("ext_item_size=100,ext_threads=2");
    assert!(s.flash.is_none());
    assert_eq!(warn.len(), 1, "{warn:?}");
    assert_eq!(s.check(), Ok(()));
    // ext_threads=0 would leave memcached no reader thread: one, with a warning.
    let (s, warn) = flash_of("ext_threads=0,ext_path=/x:1g");
    assert_eq!(s.flash.unwrap().threads, 1);
    assert_eq!(warn.len(), 1, "{warn:?}");
}

#[test]
fn flash_tier_maps_to_the_engine() {
    // ext_item_age unset: only under memory pressure, as memcached (its u32::MAX).
    let (s, _) = flash_of("ext_path=/x:1g");
    let f = s.flash.unwrap();
    assert_eq!(f.item_age, u32::MAX);
    let (s, _) = flash_of("ext_path=/x:1g,ext_item_age=30");
    assert_eq!(s.flash.unwrap().item_age, 30);
}

#[test]
fn flash_values_memcached_refuses_are_refused_with_its_message_and_status() {
    let parse = |k: &str| format!("could not parse argument to {k}");
    for k in [
        "ext_page_size",
        "ext_wbuf_size",
        "ext_threads",
        "ext_io_depth",
        "ext_item_size",
        "ext_item_age",
        "ext_low_ttl",
        "ext_recache_rate",
        "ext_compact_under",
        "ext_drop_under",
        "ext_max_sleep",
        "ext_max_frag",
    ] {
        let bad = format!("{k}=abc");
        assert_eq!(flash_refusal(&["-o", &bad]), (1, parse(k)), "{k}");
        assert_eq!(
            flash_refusal(&["-o", k]),
            (1, format!("Missing {k} argument")),
            "{k}"
        );
    }
    for (o, code, msg) in [
        ("ext_page_size=-1", 1, parse("ext_page_size")),
        ("ext_item_size=-1", 1, parse("ext_item_size")),
        (
            "ext_path",
            1,
            "missing argument to ext_path, ie: ext_path=/d/file:5G".into(),
        ),
        (
            "ext_path=/x",
            1,
            "must supply size to ext_path, ie: ext_path=/f/e:64m (M|G|T|P supported)\n\
             failed to parse ext_path argument"
                .into(),
        ),
        (
            "ext_path=/x:64m:compact",
            1,
            "ext_path only presently supports the default bucket\nfailed to parse ext_path argument"
                .into(),
        ),
        (
            "ext_path=/x:64m:foo",
            1,
            "Unknown extstore bucket: foo\nfailed to parse ext_path argument".into(),
        ),
        (
            "ext_wbuf_size=0,ext_path=/x:64m",
            64,
            "-I (item_size_max: 1048576) cannot be larger than ext_wbuf_size: 0".into(),
        ),
        (
            "ext_page_size=8,ext_wbuf_size=16,ext_path=/x:64m",
            1,
            "Failed to initialize external storage: page_size must be divisible by wbuf_size"
                .into(),
        ),
        (
            "ext_page_size=1,ext_wbuf_size=1,ext_path=/x:64m",
            1,
            "Failed to initialize external storage: page_size and wbuf_size must be divisible \
             by 1024*1024*2"
                .into(),
        ),
        (
            "ext_page_size=2,ext_wbuf_size=2,ext_path=/x:200g",
            1,
            "Failed to initialize external storage: page_count must total to < 65536. \
             Increase page_size or lower path sizes"
                .into(),
        ),
        // What memcached starts without any page (a size in another unit, or under a page)
        // or dies of (SIGFPE: a page size of 0), memkitd refuses.
        (
            "ext_path=/x:64",
            1,
            "Failed to initialize external storage: no ext_path holds a page of \
             ext_page_size (64 MB): give a SIZE of at least one page, with its unit \
             (ext_path=PATH:1G)"
                .into(),
        ),
        (
            "ext_page_size=0,ext_path=/x:64m",
            1,
            "Failed to initialize external storage: ext_page_size must be greater than 0".into(),
        ),
    ] {
        assert_eq!(flash_refusal(&["-o", o]), (code, msg), "{o}");
    }
    // -I larger than the write buffer, and UDP (storage_check_config).
    assert_eq!(
        flash_refusal(&["-I", "8m", "-o", "ext_path=/x:1g"]),
        (
            64,
            "-I (item_size_max: 8388608) cannot be larger than ext_wbuf_size: 4194304".into()
        )
    );
    assert_eq!(
        flash_refusal(&["-U", "11211", "-o", "ext_path=/x:1g"]),
        (
            64,
            "Cannot use UDP with extstore enabled (-U 0 to disable)".into()
        )
    );
}

#[test]
fn flash_tier_and_persist_are_refused_together() {
    let (code, msg) = flash_refusal(&["--persist", "/tmp/p", "-o", "ext_path=/x:1g"]);
    assert_eq!((code, msg.as_str()), (EX_USAGE, FLASH_WITH_PERSIST));
    assert!(
        msg.contains("--persist") && msg.contains("ext_path"),
        "{msg}"
    );
    // Settings built around the command line meet the same refusal at start-up.
    let s = Settings {
        persist: Some("/tmp/p".into()),
        flash: flash_of("ext_path=/x:1g").0.flash,
        ..Settings::default()
    };
    let Err(err) = crate::backend_for(&s) else {
        panic!("refused")
    };
    assert_eq!(
        (err.code, err.message.as_str()),
        (EX_USAGE, FLASH_WITH_PERSIST)
    );
}
