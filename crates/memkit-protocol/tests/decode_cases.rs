//! Wire cases, each checked against memcached 1.6.18 (`/usr/bin/memcached`) by hand: the
//! comment next to a case is what the real server answered.

use memkit_protocol::{
    DecodeError, ErrorReply as E, Limits, Request, ShutdownMode, StoreCmd, decode_request,
};

/// Decodes a whole stream; a reject shows as its reply line ("" when noreply), a request as
/// `ok`, and swallowed bytes are skipped the way memcached's conn_swallow skips them.
fn run(input: &[u8]) -> Vec<String> {
    let limits = Limits::default();
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < input.len() {
        match decode_request(&input[pos..], &limits) {
            Ok((_, used)) => {
                out.push("ok".to_string());
                pos += used;
            }
            Err(DecodeError::Reject(r)) => {
                out.push(if r.noreply {
                    String::new()
                } else {
                    r.reply.as_str().into()
                });
                pos += r.consumed + r.swallow as usize;
            }
            Err(DecodeError::Close) => {
                out.push("close".into());
                break;
            }
            Err(e) => {
                out.push(format!("{e:?}"));
                break;
            }
        }
    }
    out
}

fn one(input: &[u8]) -> Request<'_> {
    match decode_request(input, &Limits::default()) {
        Ok((r, used)) => {
            assert_eq!(used, input.len());
            r
        }
        Err(e) => panic!("{e:?}"),
    }
}

#[test]
fn storage() {
    match one(b"set k 5 -1 3 noreply\r\nabc\r\n") {
        Request::Store {
            cmd: StoreCmd::Set,
            key: b"k",
            flags: 5,
            exptime: -1,
            data: b"abc",
            noreply: true,
        } => {}
        r => panic!("{r:?}"),
    }
    match one(b"cas k 0 0 1 99\r\na\r\n") {
        Request::Store {
            cmd: StoreCmd::Cas(99),
            ..
        } => {}
        r => panic!("{r:?}"),
    }
    // STORED: the length is an int32_t, truncated.
    assert!(matches!(
        one(b"set k 0 0 4294967297\r\na\r\n"),
        Request::Store { data: b"a", .. }
    ));
    // STORED: a 7th token that is not "noreply" is ignored.
    assert!(matches!(
        one(b"set k 0 0 1 junk\r\na\r\n"),
        Request::Store { noreply: false, .. }
    ));
    // CLIENT_ERROR bad command line format, then the data line is a command: ERROR.
    assert_eq!(
        run(b"set k -1 0 1\r\na\r\n"),
        ["CLIENT_ERROR bad command line format", "ERROR"]
    );
    let long = [b"set ".as_slice(), &[b'k'; 251], b" 0 0 1\r\na\r\n"].concat();
    assert_eq!(
        run(&long),
        ["CLIENT_ERROR bad command line format", "ERROR"]
    );
    // CLIENT_ERROR bad data chunk: len + 2 bytes eaten, "\r\n" left is an empty command.
    assert_eq!(
        run(b"set k 0 0 1\r\nabc\r\nmn\r\n"),
        [E::BadDataChunk.as_str(), "ERROR", "ok"]
    );
    assert_eq!(
        run(b"set k 0 0 1\nab\r\n"),
        [E::BadDataChunk.as_str(), "ERROR"]
    );
    assert_eq!(run(b"set k 0 0\r\n"), ["ERROR"]);
    assert_eq!(run(b"set k 0 0 x noreply\r\n"), [""]);
}

#[test]
fn too_large_swallows_the_block_without_buffering_it() {
    let limits = Limits::default();
    // memcached's largest 1-byte-key value with -I 1m is 1048516 bytes.
    let ok = format!("set k 0 0 {}\r\n", 1_048_516);
    assert_eq!(
        decode_request(ok.as_bytes(), &limits),
        Err(DecodeError::Incomplete)
    );
    let line = b"set k 0 0 1048517\r\n";
    match decode_request(line, &limits) {
        Err(DecodeError::Reject(r)) => {
            assert_eq!(r.reply, E::TooLarge);
            assert_eq!((r.consumed, r.swallow), (line.len(), 1_048_519));
            assert_eq!(r.unlink, Some((&b"k"[..], false)));
        }
        r => panic!("{r:?}"),
    }
    match decode_request(b"ms k 2000000000 T0\r\n", &limits) {
        Err(DecodeError::Reject(r)) => {
            assert_eq!((r.reply, r.swallow), (E::TooLarge, 2_000_000_002))
        }
        r => panic!("{r:?}"),
    }
    // add does not unlink.
    match decode_request(b"add k 0 0 2000000\r\n", &limits) {
        Err(DecodeError::Reject(r)) => assert_eq!(r.unlink, None),
        r => panic!("{r:?}"),
    }
}

#[test]
fn retrieval() {
    match one(b"get a  b\tc\r\n") {
        Request::Get {
            cas: false,
            touch: None,
            keys,
        } => {
            assert_eq!(keys.iter().collect::<Vec<_>>(), [&b"a"[..], b"b\tc"]);
        }
        r => panic!("{r:?}"),
    }
    // `gat 10` with no key is valid (END).
    assert!(
        matches!(one(b"gat 10\r\n"), Request::Get { touch: Some(10), keys, .. } if keys.is_empty())
    );
    assert!(matches!(
        one(b"bget k\r\n"),
        Request::Get { cas: false, .. }
    ));
    assert!(matches!(one(b"get k\0junk\r\n"), Request::Get { keys, .. } if keys.len() == 1));
    assert_eq!(run(b"get\r\ngets\r\ngat\r\n"), ["ERROR", "ERROR", "ERROR"]);
    assert_eq!(run(b"gat x k\r\n"), [E::BadExptime.as_str()]);
    let long = [b"get a ".as_slice(), &[b'k'; 251], b"\r\n"].concat();
    assert_eq!(run(&long), [E::BadFormat.as_str()]);
    // One key (the tokenizer-free path) decodes as the general path does: the same key at
    // 250 bytes, the same refusal at 251, the same key with spaces around it.
    for pad in [&b""[..], b" ", b"  "] {
        let key = [b'k'; 250];
        let line = [b"get ".as_slice(), pad, &key, pad, b"\r\n"].concat();
        assert!(
            matches!(one(&line), Request::Get { cas: false, touch: None, keys }
                if keys.iter().collect::<Vec<_>>() == [&key[..]]),
            "{pad:?}"
        );
        let line = [b"get ".as_slice(), pad, &[b'k'; 251], pad, b"\r\n"].concat();
        assert_eq!(run(&line), [E::BadFormat.as_str()], "{pad:?}");
    }
    assert_eq!(run(b"get \r\n"), ["ERROR"]);
    // A carriage return inside the key is part of it; only the one before the newline goes.
    assert!(matches!(one(b"get a\rb\r\r\n"), Request::Get { keys, .. }
            if keys.iter().collect::<Vec<_>>() == [&b"a\rb\r"[..]]));
    // More than 23 tokens: a multi-get keeps splitting.
    let many: Vec<u8> = [b"get".as_slice(), &b" a".repeat(3000), b"\r\n"].concat();
    assert!(matches!(one(&many), Request::Get { keys, .. } if keys.len() == 3000));
}

#[test]
fn long_lines_without_newline() {
    let limits = Limits::default();
    let junk = b"xyz ".repeat(1000);
    assert_eq!(decode_request(&junk, &limits), Err(DecodeError::Close));
    let get = [b"get ".as_slice(), &[b'a'; 3000]].concat();
    assert_eq!(decode_request(&get, &limits), Err(DecodeError::Incomplete));
    let spaced = [&[b' '; 101][..], &get].concat();
    assert_eq!(decode_request(&spaced, &limits), Err(DecodeError::Close));
    assert_eq!(
        decode_request(&[b'x'; 2048], &limits),
        Err(DecodeError::Incomplete)
    );
    assert_eq!(
        decode_request(b"GET / HTTP/1.1\r\n", &limits),
        Err(DecodeError::Close)
    );
}

#[test]
fn other_text_commands() {
    // NOT_FOUND, usage error, (silent), (silent), ERROR
    assert_eq!(
        run(b"delete k 0\r\ndelete k 1\r\ndelete k noreply\r\ndelete k 0 noreply\r\ndelete k x y z\r\n"),
        ["ok", E::DeleteUsage.as_str(), "ok", "ok", "ERROR"]
    );
    assert!(matches!(
        one(b"delete k 0 noreply\r\n"),
        Request::Delete { noreply: true, .. }
    ));
    assert_eq!(
        run(b"incr k abc\r\nincr k -1\r\nincr k x noreply\r\n"),
        [
            E::BadDeltaArgument.as_str(),
            E::BadDeltaArgument.as_str(),
            ""
        ]
    );
    assert_eq!(run(b"touch k x\r\n"), [E::BadExptime.as_str()]);
    assert_eq!(run(b"flush_all x\r\n"), [E::BadExptime.as_str()]);
    assert!(matches!(
        one(b"flush_all 0 noreply\r\n"),
        Request::FlushAll {
            delay: Some(0),
            noreply: true
        }
    ));
    assert!(matches!(
        one(b"flush_all noreply\r\n"),
        Request::FlushAll {
            delay: None,
            noreply: true
        }
    ));
    assert_eq!(
        run(b"verbosity\r\nverbosity x\r\n"),
        ["ERROR", E::BadFormat.as_str()]
    );
    assert_eq!(
        run(b"cache_memlimit x\r\ncache_memlimit x noreply\r\n"),
        ["ERROR", ""]
    );
    assert_eq!(
        run(b"foo\r\nm\r\nmz k\r\n\r\n"),
        ["ERROR", "ERROR", "ERROR", "ERROR"]
    );
    assert!(matches!(
        one(b"shutdown x\r\n"),
        Request::Shutdown(ShutdownMode::Invalid)
    ));
    assert!(matches!(
        one(b"shutdown graceful\r\n"),
        Request::Shutdown(ShutdownMode::Graceful)
    ));
    assert!(matches!(one(b"stats detail on\r\n"), Request::Stats { args } if args.len() == 2));
    assert_eq!(run(b"lru\r\n"), ["ERROR"]);
    assert!(matches!(one(b"version\r\n"), Request::Version));
    assert!(matches!(one(b"quit\r\n"), Request::Quit));
}

#[test]
fn meta_errors() {
    let opaque32 = b"mg k v O12345678901234567890123456789012\r\n";
    assert_eq!(run(opaque32), [E::OpaqueTooLong.as_str()]);
    assert_eq!(run(b"mg k v O1234567890123456789012345678901\r\n"), ["ok"]);
    assert_eq!(
        run(b"mg k zz\r\nmg k v v\r\nmg k N\r\nmg k Fx\r\nmg k Mxx\r\nmg bm b\r\n"),
        [
            E::InvalidFlag,
            E::DuplicateFlag,
            E::BadToken,
            E::BadFormat,
            E::BadMLength,
            E::KeyDecode
        ]
        .map(E::as_str)
    );
    // ms: mode error wins over opaque; both swallow the block.
    assert_eq!(
        run(b"ms k 1 MZ O123456789012345678901234567890123\r\na\r\nmn\r\n"),
        [E::BadMsMode.as_str(), "ok"]
    );
    assert_eq!(
        run(b"ms k 1 O123456789012345678901234567890123 Fx\r\na\r\nmn\r\n"),
        [E::BadFormat.as_str(), "ok"]
    );
    assert_eq!(
        run(b"ms k 1 Mq\r\na\r\nms k\r\nms k x\r\na\r\nmn\r\n"),
        [
            E::BadMsMode.as_str(),
            E::BadFormat.as_str(),
            E::BadFormat.as_str(),
            "ERROR",
            "ok"
        ]
    );
    assert_eq!(
        run(b"md k zz\r\nma k Mx\r\nma k MI MD\r\n"),
        [
            E::InvalidOrDuplicateFlag,
            E::BadMaMode,
            E::InvalidOrDuplicateFlag
        ]
        .map(E::as_str)
    );
    assert_eq!(
        run(b"md k O123456789012345678901234567890123\r\n"),
        [E::OpaqueTooLong.as_str()]
    );
    assert_eq!(
        run(b"me\r\nme k b\r\n"),
        [E::BadFormat, E::BadFormat].map(E::as_str)
    );
    let many = [
        b"mg k".as_slice(),
        b" a b c d e f g h i j k l m n o p q r".as_slice(),
        b"\r\n",
    ]
    .concat();
    assert_eq!(run(&many), [E::MgFlagsTooLong.as_str()]);
    assert_eq!(run(b"ms k 1 c q\r\na\r\n"), ["ok"]);
    // Bad data chunk on ms: the reply is never silenced.
    assert_eq!(
        run(b"ms k 1 q\r\nab\r\n"),
        [E::BadDataChunk.as_str(), "ERROR"]
    );
}

#[test]
fn meta_requests() {
    match one(b"mg a2V5 b k v t O99\r\n") {
        Request::MetaGet { key, flags } => {
            assert_eq!(key, b"a2V5");
            assert!(flags.base64 && flags.value && flags.ret_key && flags.ret_ttl);
            assert_eq!(flags.order(), b"bkvtO");
            assert_eq!(&*memkit_protocol::meta_key(key, true).unwrap(), b"key");
        }
        r => panic!("{r:?}"),
    }
    match one(b"ms k 2 T0 c k O1 F5 MA I\r\nab\r\n") {
        Request::MetaSet { data, flags, .. } => {
            assert_eq!(data, b"ab");
            assert_eq!(
                (flags.ttl, flags.client_flags, flags.mode),
                (Some(0), Some(5), Some(b'A'))
            );
        }
        r => panic!("{r:?}"),
    }
    assert!(
        matches!(one(b"ma k N0 J5 D10 MD q v\r\n"), Request::MetaArith { flags, .. } if flags.delta == Some(10) && flags.initial == Some(5))
    );
    assert!(
        matches!(one(b"md k I T30 x E7\r\n"), Request::MetaDelete { flags, .. } if flags.invalidate && flags.remove_value && flags.new_cas == Some(7))
    );
    assert!(matches!(one(b"mn\r\n"), Request::MetaNoop));
    assert!(matches!(
        one(b"me bmV3 b\r\n"),
        Request::MetaDebug { base64: true, .. }
    ));
}

/// The key a request names first, guessed ahead of decoding for cache warming: the second
/// word of the commands that name it there, ended where the decoder ends it (a space, a NUL,
/// the line's end; other control bytes stay in it, as memcaslap's keys have them); nothing
/// for other commands, a key not yet ended, or one longer than a key may be.
#[test]
fn first_key_is_the_second_word_of_a_keyed_command() {
    use memkit_protocol::first_key;
    let cases: &[(&[u8], Option<&[u8]>)] = &[
        (b"get foo\r\n", Some(b"foo")),
        (b"get foo bar\r\n", Some(b"foo")),
        (b"gets k\n", Some(b"k")),
        (b"set k 0 0 1\r\nx\r\n", Some(b"k")),
        (b"mg key v f t\r\n", Some(b"key")),
        (b"ms key 2 T0\r\nhi\r\n", Some(b"key")),
        (b"delete k noreply\r\n", Some(b"k")),
        (b"incr n 1\r\n", Some(b"n")),
        (b"touch k 10\r\n", Some(b"k")),
        (b"gat 10 k\r\n", None),
        (b"stats\r\n", None),
        (b"version\r\n", None),
        (b"get foo", None),
        (b"get \r\n", None),
        (b"get a\tb\r\n", Some(b"a\tb")),
        (b"get 3\xd3\x10\x10N\r\n", Some(b"3\xd3\x10\x10N")),
        (b"get a\rb\r\n", Some(b"a\rb")),
        (b"get a\0b\r\n", Some(b"a")),
        (b"get", None),
        (b"", None),
    ];
    for &(buf, want) in cases {
        assert_eq!(first_key(buf), want, "{}", String::from_utf8_lossy(buf));
    }
    let long = [b"get ".as_slice(), &[b'k'; 251], b"\r\n"].concat();
    assert_eq!(first_key(&long), None);
    for end in [b"\r\n".as_slice(), b"\n", b" x\r\n"] {
        let longest = [b"get ".as_slice(), &[b'k'; 250], end].concat();
        assert_eq!(first_key(&longest).map(<[u8]>::len), Some(250));
    }
    // The decoder agrees on the key of a one-key get.
    let req = b"get 3\xd3\x10\x10N\r\n";
    let (decoded, _) = decode_request(req, &Limits::default()).unwrap();
    let Request::Get { keys, .. } = decoded else {
        panic!("{decoded:?}");
    };
    assert_eq!(keys.iter().next(), first_key(req));
}
