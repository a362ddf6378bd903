//! Property tests: request and response round trips, prefixes are Incomplete, arbitrary
//! bytes never panic.

use memkit_protocol::{
    AdminCmd, DecodeError, Limits, MetaCode, MetaFlags, Request, Response, ShutdownMode, StoreCmd,
    Words, check, decode_request, decode_response, encode_get, encode_request,
};
use proptest::prelude::*;

/// Owned material a [`Request`] borrows from.
#[derive(Debug, Clone)]
struct Spec {
    kind: u8,
    key: Vec<u8>,
    words: Vec<u8>,
    data: Vec<u8>,
    n1: i32,
    n2: u32,
    n3: u64,
    b1: bool,
    b2: bool,
    flags: Vec<u8>,
    opaque: Vec<u8>,
    mode: u8,
}

fn key_bytes() -> impl Strategy<Value = Vec<u8>> {
    // Anything memcached accepts in a key: no space, newline or NUL.
    proptest::collection::vec(
        any::<u8>().prop_filter("key byte", |b| !matches!(b, b' ' | b'\n' | 0)),
        1..40,
    )
}

fn word_list() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(key_bytes(), 1..5).prop_map(|ws| ws.join(&b' '))
}

fn spec() -> impl Strategy<Value = Spec> {
    let flag_letters = b"bcfhklstvquIxCEFJDMNRTOPL".to_vec();
    (
        (
            0u8..20,
            key_bytes(),
            word_list(),
            proptest::collection::vec(any::<u8>(), 0..64),
        ),
        (
            any::<i32>(),
            any::<u32>(),
            any::<u64>(),
            any::<bool>(),
            any::<bool>(),
        ),
        (
            Just(flag_letters).prop_shuffle(),
            0usize..16,
            proptest::collection::vec(b'!'..=b'~', 0..31),
            any::<u8>(),
        ),
    )
        .prop_map(
            |((kind, key, words, data), (n1, n2, n3, b1, b2), (letters, nf, opaque, mode))| Spec {
                kind,
                key,
                words,
                data,
                n1,
                n2,
                n3,
                b1,
                b2,
                flags: letters[..nf].to_vec(),
                opaque,
                mode,
            },
        )
}

impl Spec {
    fn meta_flags(&self, cmd: u8) -> (MetaFlags<'_>, Vec<u8>) {
        let mut f = MetaFlags::default();
        for &c in &self.flags {
            match c {
                b'b' => f.base64 = true,
                b'N' => f.vivify = Some(self.n1),
                b'T' => f.ttl = Some(self.n1 / 2),
                b'R' => f.recache = Some(-self.n1.saturating_abs()),
                b'C' => f.compare_cas = Some(self.n3),
                b'E' => f.new_cas = Some(self.n3 / 3),
                b'J' => f.initial = Some(self.n3 / 5),
                b'D' => f.delta = Some(self.n3 / 7),
                b'F' => f.client_flags = Some(self.n2),
                b'M' => {
                    let modes: &[u8] = match cmd {
                        b's' => b"EAPRS",
                        b'a' => b"I+D-",
                        _ => b"xyz",
                    };
                    f.mode = Some(modes[usize::from(self.mode) % modes.len()]);
                }
                b'O' => f.opaque = Some(&self.opaque),
                b'P' => f.proxy_p = Some(&self.opaque),
                b'L' => f.proxy_l = Some(b"path/x"),
                b'c' => f.ret_cas = true,
                b'f' => f.ret_flags = true,
                b'h' => f.ret_hit = true,
                b'k' => f.ret_key = true,
                b'l' => f.ret_last_access = true,
                b's' => f.ret_size = true,
                b't' => f.ret_ttl = true,
                b'v' => f.value = true,
                b'q' => f.quiet = true,
                b'u' => f.no_bump = true,
                b'I' => f.invalidate = true,
                b'x' => f.remove_value = true,
                _ => {}
            }
            f.push(c);
        }
        // A base64 key must decode; encode the spec key (cut so the encoding fits 250).
        let key = if f.base64 {
            let mut k = Vec::new();
            memkit_protocol::base64::encode_into(&self.key, &mut k);
            k
        } else {
            self.key.clone()
        };
        (f, key)
    }

    fn with<R>(&self, go: impl FnOnce(Request<'_>) -> R) -> R {
        let key = &self.key[..];
        let (nr, n1, n2, n3) = (self.b1, self.n1, self.n2, self.n3);
        let req = match self.kind {
            0 => Request::Get {
                cas: self.b1,
                touch: self.b2.then_some(n1),
                keys: Words::new(&self.words),
            },
            1 => {
                let cmd = [
                    StoreCmd::Set,
                    StoreCmd::Add,
                    StoreCmd::Replace,
                    StoreCmd::Append,
                    StoreCmd::Prepend,
                    StoreCmd::Cas(n3),
                ][usize::from(self.mode) % 6];
                Request::Store {
                    cmd,
                    key,
                    flags: n2,
                    exptime: n1,
                    data: &self.data,
                    noreply: nr,
                }
            }
            2 => Request::Arith {
                incr: self.b2,
                key,
                delta: n3,
                noreply: nr,
            },
            3 => Request::Touch {
                key,
                exptime: n1,
                noreply: nr,
            },
            4 => Request::Delete { key, noreply: nr },
            5 => Request::FlushAll {
                delay: self.b2.then_some(n1),
                noreply: nr,
            },
            6 => Request::Verbosity {
                level: n2,
                noreply: nr,
            },
            7 => Request::CacheMemlimit {
                megabytes: n2,
                noreply: nr,
            },
            8 => Request::Version,
            9 => Request::Quit,
            10 => Request::Shutdown(
                [
                    ShutdownMode::Immediate,
                    ShutdownMode::Graceful,
                    ShutdownMode::Invalid,
                ][usize::from(self.mode) % 3],
            ),
            11 => Request::Stats {
                args: Words::new(if self.b1 { &self.words } else { b"" }),
            },
            12 => Request::Admin {
                cmd: [
                    AdminCmd::LruCrawler,
                    AdminCmd::Watch,
                    AdminCmd::Slabs,
                    AdminCmd::Lru,
                ][usize::from(self.mode) % 4],
                args: Words::new(&self.words),
            },
            13 => Request::MetaNoop,
            14 => Request::MetaDebug { key, base64: false },
            _ => {
                let cmd = [b'g', b's', b'd', b'a', b'g'][usize::from(self.kind - 15)];
                let (flags, key) = self.meta_flags(cmd);
                return match cmd {
                    b'g' => go(Request::MetaGet { key: &key, flags }),
                    b's' => go(Request::MetaSet {
                        key: &key,
                        flags,
                        data: &self.data,
                    }),
                    b'd' => go(Request::MetaDelete { key: &key, flags }),
                    _ => go(Request::MetaArith { key: &key, flags }),
                };
            }
        };
        go(req)
    }
}

fn response_spec() -> impl Strategy<Value = (u8, Vec<u8>, Vec<u8>, Vec<u8>, u64, bool)> {
    let text = proptest::collection::vec(b' '..=b'~', 0..40).prop_map(|mut v| {
        // Messages never start with a space and are never empty.
        v.insert(0, b'm');
        v
    });
    let tokens = proptest::collection::vec(proptest::collection::vec(b'0'..=b'z', 1..8), 0..5)
        .prop_map(|ts| ts.join(&b' '));
    (
        0u8..22,
        key_bytes().prop_map(|k| k.into_iter().filter(|b| *b != b'\r').collect::<Vec<_>>()),
        text,
        tokens,
        any::<u64>(),
        any::<bool>(),
    )
}

fn build_response<'a>(
    s: &'a (u8, Vec<u8>, Vec<u8>, Vec<u8>, u64, bool),
    data: &'a [u8],
) -> Option<Response<'a>> {
    let (kind, key, text, toks, n, b) = s;
    let key: &[u8] = key;
    Some(match kind {
        0 => Response::Value {
            key: if key.is_empty() { return None } else { key },
            flags: *n as u32,
            cas: b.then_some(*n),
            data,
        },
        1 => Response::End,
        2 => Response::Stored,
        3 => Response::NotStored,
        4 => Response::Exists,
        5 => Response::NotFound,
        6 => Response::Deleted,
        7 => Response::Touched,
        8 => Response::Ok,
        9 => Response::Reset,
        10 => Response::Number(*n),
        11 => Response::Version(text),
        12 => Response::Stat {
            name: b"curr_items",
            value: text,
        },
        13 => Response::Error,
        14 => Response::ClientError(text),
        15 => Response::ServerError(text),
        16 => Response::Meta {
            code: MetaCode::Va,
            flags: toks,
            data: Some(data),
        },
        17 => Response::Meta {
            code: [
                MetaCode::Hd,
                MetaCode::En,
                MetaCode::Nf,
                MetaCode::Ns,
                MetaCode::Ex,
            ][(*n % 5) as usize],
            flags: toks,
            data: None,
        },
        18 => Response::MetaNoop,
        19 => Response::MetaDebug {
            key: if key.is_empty() { return None } else { key },
            info: b"exp=-1 la=0 cas=1 fetch=no cls=1 size=60",
        },
        20 => Response::Other(b"BUSY currently processing crawler request"),
        _ => Response::Other(b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m"),
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn request_roundtrip_and_prefixes(s in spec()) {
        let limits = Limits::default();
        s.with(|req| {
            let mut enc = Vec::new();
            encode_request(&req, &mut enc);
            let (back, used) = decode_request(&enc, &limits)
                .unwrap_or_else(|e| panic!("{e:?} for {:?}", String::from_utf8_lossy(&enc)));
            assert_eq!(back, req);
            assert_eq!(used, enc.len());
            for cut in 0..enc.len() {
                assert_eq!(decode_request(&enc[..cut], &limits), Err(DecodeError::Incomplete), "prefix {cut}");
            }
        });
    }

    #[test]
    fn encode_get_renders_separate_keys_as_encode_request_does(
        keys in proptest::collection::vec(key_bytes(), 1..8),
        cas in any::<bool>(),
        touch in proptest::option::of(any::<i32>()),
    ) {
        let joined = keys.join(&b' ');
        let mut want = Vec::new();
        encode_request(&Request::Get { cas, touch, keys: Words::new(&joined) }, &mut want);
        let mut got = Vec::new();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        encode_get(&mut got, cas, touch, &refs);
        prop_assert_eq!(got, want);
    }

    #[test]
    fn response_roundtrip_and_prefixes(s in response_spec(), data in proptest::collection::vec(any::<u8>(), 0..64)) {
        let limits = Limits::default();
        if let Some(resp) = build_response(&s, &data) {
            let mut enc = Vec::new();
            resp.encode(&mut enc);
            let (back, used) = decode_response(&enc, &limits).unwrap();
            prop_assert_eq!(back, resp);
            prop_assert_eq!(used, enc.len());
            for cut in 0..enc.len() {
                prop_assert_eq!(decode_response(&enc[..cut], &limits), Err(DecodeError::Incomplete));
            }
        }
    }

    #[test]
    fn arbitrary_bytes_hold_the_invariants(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        check::fuzz_one(&bytes);
        // Responses: never panic, consume within bounds.
        let limits = Limits::default();
        if let Ok((_, used)) = decode_response(&bytes, &limits) {
            prop_assert!(used >= 1 && used <= bytes.len());
        }
    }

    #[test]
    fn mutated_commands_hold_the_invariants(
        specs in proptest::collection::vec(spec(), 1..6),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
    ) {
        let mut input = Vec::new();
        for s in &specs {
            s.with(|r| encode_request(&r, &mut input));
        }
        for (at, b) in flips {
            let i = at.index(input.len());
            input[i] = b;
        }
        check::fuzz_one(&input);
    }
}
