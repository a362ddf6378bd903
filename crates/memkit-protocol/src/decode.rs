//! Request decoding (server side), mirroring memcached 1.6.18's `try_read_command_ascii`,
//! `process_command_ascii` and the `process_*_command` functions in `proto_text.c`.
//!
//! The order of checks is memcached's, because it decides which error a doubly-broken
//! command gets and whether the data block is swallowed: a refused text store whose line
//! parsed far enough to read a length swallows the block only for `object too large`; a
//! refused `ms` swallows it for every error found after the length.

use crate::error::{DecodeError, ErrorReply, Reject};
use crate::meta::{MAX_META_NTOKENS, MetaFlags};
use crate::num::{parse_i32, parse_u32, parse_u64};
use crate::request::{AdminCmd, Request, ShutdownMode, StoreCmd};
use crate::token::{Line, Tokens, Words, find_line};
use crate::{Limits, MAX_KEY_LEN};

type Decoded<'a> = Result<(Request<'a>, usize), DecodeError<'a>>;

/// `get <key>`, the commonest request by far, without the tokenizer and in one pass over the
/// line: one key with no space or NUL in it, within the key length, on a complete line,
/// decodes exactly as the general path decodes it (`find_line`, then `Ctx::get`), with the
/// bytes the line takes; `None` sends anything else down that path.
fn single_get(buf: &[u8]) -> Option<(Request<'_>, usize)> {
    let rest = buf.strip_prefix(b"get ")?;
    let end = rest.iter().position(|&b| matches!(b, b'\n' | b' ' | 0))?;
    if rest[end] != b'\n' {
        return None;
    }
    let key = rest[..end].strip_suffix(b"\r").unwrap_or(&rest[..end]);
    let plain = !key.is_empty() && key.len() <= MAX_KEY_LEN;
    plain.then(|| {
        let keys = Words::one(key);
        let get = Request::Get {
            cas: false,
            touch: None,
            keys,
        };
        (get, b"get ".len() + end + 1)
    })
}

/// The key the text request at the start of `buf` names first, when its command names it
/// second (`get`, `gets`, the storage commands, `delete`, `incr`, `decr`, `touch`, `mg`,
/// `ms`, `md`, `ma`), for a driver that warms the cache for the lookup before it decodes the
/// request (memkitd's worker loop). A guess, not a decode: a request that turns out
/// malformed or a meta key in base64 names a key nobody looks up, which costs only the
/// warming. The key ends where the decoder ends it: at a space, a NUL or the line's end (a
/// carriage return just before the newline is not part of it; any other control byte is);
/// `None` for other commands, and for a key not yet ended in `buf` or longer than a key may
/// be.
pub fn first_key(buf: &[u8]) -> Option<&[u8]> {
    // The commonest commands by their bytes, the rest by name.
    let rest = match buf {
        [b'g', b'e', b't', b' ', rest @ ..]
        | [b's', b'e', b't', b' ', rest @ ..]
        | [b'm', b'g' | b's' | b'd' | b'a', b' ', rest @ ..] => rest,
        _ => {
            let sp = buf.iter().take(8).position(|&b| b == b' ')?;
            let named_second = matches!(
                &buf[..sp],
                b"gets"
                    | b"add"
                    | b"replace"
                    | b"append"
                    | b"prepend"
                    | b"cas"
                    | b"delete"
                    | b"incr"
                    | b"decr"
                    | b"touch"
            );
            if !named_second {
                return None;
            }
            &buf[sp + 1..]
        }
    };
    // A key of MAX_KEY_LEN bytes may be followed by "\r\n".
    let end = rest
        .iter()
        .take(MAX_KEY_LEN + 2)
        .position(|&b| matches!(b, b' ' | b'\n' | 0))?;
    let key = &rest[..end];
    let key = match rest[end] {
        b'\n' => key.strip_suffix(b"\r").unwrap_or(key),
        _ => key,
    };
    (!key.is_empty() && key.len() <= MAX_KEY_LEN).then_some(key)
}

/// Decodes the first request in `buf`.
///
/// `Ok((request, consumed))`: drop `consumed` bytes (the line and any data block) after
/// handling it. `Err(Incomplete)`: read more and call again with the grown buffer. See
/// [`DecodeError`] for the rest. Never allocates and never panics.
pub fn decode_request<'a>(buf: &'a [u8], limits: &Limits) -> Decoded<'a> {
    if buf.is_empty() {
        return Err(DecodeError::Incomplete);
    }
    if let Some(get) = single_get(buf) {
        return Ok(get);
    }
    let Some(line) = find_line(buf) else {
        return Err(no_newline(buf, limits));
    };
    let t = Tokens::split(line.text);
    // By reference: the tokens are 24 slices, and a copy per request showed in profiles.
    let c = Ctx {
        buf,
        line: &line,
        t: &t,
    };
    let cmd = t.get(0);
    if t.ntokens() < 2 || cmd.len() < 2 {
        return c.reject(ErrorReply::Error, false);
    }
    let nt = t.ntokens();
    match cmd {
        b"get" | b"bget" | b"gets" | b"gat" | b"gats" => c.get(cmd),
        b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas" => c.store(cmd, limits),
        b"incr" | b"decr" => {
            c.want(nt == 4 || nt == 5)?;
            let noreply = t.noreply();
            let key = c.key(1, noreply)?;
            let delta = c.num(parse_u64(t.get(2)), ErrorReply::BadDeltaArgument, noreply)?;
            c.ok(Request::Arith {
                incr: cmd == b"incr",
                key,
                delta,
                noreply,
            })
        }
        b"touch" => {
            c.want(nt == 4 || nt == 5)?;
            let noreply = t.noreply();
            let key = c.key(1, noreply)?;
            let exptime = c.num(parse_i32(t.get(2)), ErrorReply::BadExptime, noreply)?;
            c.ok(Request::Touch {
                key,
                exptime,
                noreply,
            })
        }
        b"delete" => {
            c.want((3..=5).contains(&nt))?;
            let mut noreply = false;
            if nt > 3 {
                let zero = t.get(2) == b"0";
                noreply = t.noreply();
                let valid = (nt == 4 && (zero || noreply)) || (nt == 5 && zero && noreply);
                if !valid {
                    return c.reject(ErrorReply::DeleteUsage, noreply);
                }
            }
            let key = c.key(1, noreply)?;
            c.ok(Request::Delete { key, noreply })
        }
        b"flush_all" => {
            c.want((2..=4).contains(&nt))?;
            let noreply = t.noreply();
            let mut delay = None;
            if nt != if noreply { 3 } else { 2 } {
                delay = Some(c.num(parse_i32(t.get(1)), ErrorReply::BadExptime, noreply)?);
            }
            c.ok(Request::FlushAll { delay, noreply })
        }
        b"verbosity" => {
            c.want(nt == 3 || nt == 4)?;
            let noreply = t.noreply();
            let level = c.num(parse_u32(t.get(1)), ErrorReply::BadFormat, noreply)?;
            c.ok(Request::Verbosity { level, noreply })
        }
        b"cache_memlimit" => {
            c.want(nt == 3 || nt == 4)?;
            let noreply = t.noreply();
            let megabytes = c.num(parse_u32(t.get(1)), ErrorReply::Error, noreply)?;
            c.ok(Request::CacheMemlimit { megabytes, noreply })
        }
        b"version" => c.ok(Request::Version),
        b"quit" => c.ok(Request::Quit),
        b"shutdown" => c.ok(Request::Shutdown(match (nt, t.get(1)) {
            (2, _) => ShutdownMode::Immediate,
            (3, b"graceful") => ShutdownMode::Graceful,
            _ => ShutdownMode::Invalid,
        })),
        b"stats" => c.ok(Request::Stats {
            args: c.words_from(1),
        }),
        b"lru_crawler" => c.admin(AdminCmd::LruCrawler),
        b"watch" => c.admin(AdminCmd::Watch),
        b"slabs" => c.admin(AdminCmd::Slabs),
        b"cluster" => c.admin(AdminCmd::Cluster),
        b"lru" => {
            c.want(nt >= 3)?;
            c.admin(AdminCmd::Lru)
        }
        b"mg" | b"md" | b"ma" => c.meta(cmd[1]),
        b"ms" => c.meta_set(limits),
        b"mn" => c.ok(Request::MetaNoop),
        b"me" => c.meta_debug(),
        _ => {
            // Only the final `else` of memcached's dispatch looks for HTTP; commands whose
            // first letter has its own branch answer ERROR.
            let branch = matches!(cmd[0], b'g' | b's' | b'a' | b'c' | b'i' | b'd' | b't')
                || (cmd[0] == b'm' && cmd.len() == 2);
            if !branch && t.get(t.ntokens() - 2).starts_with(b"HTTP/") {
                return Err(DecodeError::Close);
            }
            c.reject(ErrorReply::Error, false)
        }
    }
}

/// memcached's guard for a buffer without a newline: past 2048 bytes only a multi-get may
/// keep growing (keys can be many); anything else is junk and the connection is closed.
/// For input that holds no newline: whether it may still become a request (`true`: wait
/// for more) or is refused for its length alone (`false`: close, as [`decode_request`]
/// would). A caller that already searched the input's start for a newline asks this instead
/// of decoding the whole of it again.
pub fn unterminated(buf: &[u8], limits: &Limits) -> bool {
    matches!(no_newline(buf, limits), DecodeError::Incomplete)
}

fn no_newline<'a>(buf: &[u8], limits: &Limits) -> DecodeError<'a> {
    if buf.len() <= limits.max_line_len {
        return DecodeError::Incomplete;
    }
    // Counted up to the refusal's bound, so that a line of spaces is not walked whole.
    let lead = buf.iter().take(101).take_while(|&&b| b == b' ').count();
    let rest = &buf[lead..];
    let is_get = rest.starts_with(b"get ") || rest.starts_with(b"gets ");
    if lead > 100 || !is_get || buf.len() > limits.max_multiget_line {
        DecodeError::Close
    } else {
        DecodeError::Incomplete
    }
}

/// memcached refuses a negative length and one that overflows `int` once `\r\n` is added.
fn data_len(v: i32) -> Option<usize> {
    if v > i32::MAX - 2 {
        None
    } else {
        usize::try_from(v).ok()
    }
}

struct Ctx<'a, 'l> {
    buf: &'a [u8],
    line: &'l Line<'a>,
    t: &'l Tokens<'a>,
}

impl<'a> Ctx<'a, '_> {
    fn ok(&self, r: Request<'a>) -> Decoded<'a> {
        Ok((r, self.line.consumed))
    }

    fn rej(&self, reply: ErrorReply, noreply: bool) -> DecodeError<'a> {
        DecodeError::Reject(Reject {
            reply,
            noreply,
            consumed: self.line.consumed,
            swallow: 0,
            unlink: None,
        })
    }

    fn reject(&self, reply: ErrorReply, noreply: bool) -> Decoded<'a> {
        Err(self.rej(reply, noreply))
    }

    /// memcached's `WANT_TOKENS*`: a wrong token count is a plain `ERROR`.
    fn want(&self, cond: bool) -> Result<(), DecodeError<'a>> {
        if cond {
            Ok(())
        } else {
            Err(self.rej(ErrorReply::Error, false))
        }
    }

    fn key(&self, i: usize, noreply: bool) -> Result<&'a [u8], DecodeError<'a>> {
        let k = self.t.get(i);
        if k.len() > MAX_KEY_LEN {
            return Err(self.rej(ErrorReply::BadFormat, noreply));
        }
        Ok(k)
    }

    fn num<T>(&self, v: Option<T>, e: ErrorReply, noreply: bool) -> Result<T, DecodeError<'a>> {
        v.ok_or_else(|| self.rej(e, noreply))
    }

    /// The words from token `i` to the end of the line, including what the tokenizer left.
    fn words_from(&self, i: usize) -> Words<'a> {
        let tok = self.t.get(i);
        if tok.is_empty() {
            return Words::new(&[]);
        }
        let text = self.line.text;
        let start = (tok.as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
        Words::new(text.get(start..).unwrap_or_default())
    }

    fn admin(&self, cmd: AdminCmd) -> Decoded<'a> {
        self.ok(Request::Admin {
            cmd,
            args: self.words_from(1),
        })
    }

    fn get(&self, cmd: &[u8]) -> Decoded<'a> {
        self.want(self.t.ntokens() >= 3)?;
        let cas = cmd == b"gets" || cmd == b"gats";
        let mut first = 1;
        let mut touch = None;
        if cmd.starts_with(b"gat") {
            touch = Some(self.num(parse_i32(self.t.get(1)), ErrorReply::BadExptime, false)?);
            first = 2;
        }
        let keys = self.words_from(first);
        if keys.iter().any(|k| k.len() > MAX_KEY_LEN) {
            return self.reject(ErrorReply::BadFormat, false);
        }
        self.ok(Request::Get { cas, touch, keys })
    }

    fn store(&self, cmd: &[u8], limits: &Limits) -> Decoded<'a> {
        let t = &self.t;
        let nt = t.ntokens();
        let is_cas = cmd == b"cas";
        self.want(if is_cas {
            nt == 7 || nt == 8
        } else {
            nt == 6 || nt == 7
        })?;
        let noreply = t.noreply();
        let key = self.key(1, noreply)?;
        let bad = ErrorReply::BadFormat;
        let flags = self.num(parse_u32(t.get(2)), bad, noreply)?;
        let exptime = self.num(parse_i32(t.get(3)), bad, noreply)?;
        let vlen = self.num(parse_i32(t.get(4)), bad, noreply)?;
        let cmd = match cmd {
            b"set" => StoreCmd::Set,
            b"add" => StoreCmd::Add,
            b"replace" => StoreCmd::Replace,
            b"append" => StoreCmd::Append,
            b"prepend" => StoreCmd::Prepend,
            _ => StoreCmd::Cas(self.num(parse_u64(t.get(5)), bad, noreply)?),
        };
        let vlen = data_len(vlen).ok_or_else(|| self.rej(bad, noreply))?;
        if !limits.item_fits(key.len(), vlen, flags) {
            let mut r = self.rej(ErrorReply::TooLarge, noreply);
            if let DecodeError::Reject(r) = &mut r {
                r.swallow = vlen as u64 + 2;
                r.unlink = (cmd == StoreCmd::Set).then_some((key, false));
            }
            return Err(r);
        }
        let (data, total) = self.data_block(vlen, noreply)?;
        Ok((
            Request::Store {
                cmd,
                key,
                flags,
                exptime,
                data,
                noreply,
            },
            total,
        ))
    }

    /// The data block after the line: `Incomplete` until `vlen + 2` bytes are there, then
    /// memcached's check that they end in `\r\n` (it eats them either way).
    fn data_block(&self, vlen: usize, noreply: bool) -> Result<(&'a [u8], usize), DecodeError<'a>> {
        let start = self.line.consumed;
        let total = start + vlen + 2;
        let Some(block) = self.buf.get(start..total) else {
            return Err(DecodeError::Incomplete);
        };
        if !block.ends_with(b"\r\n") {
            return Err(DecodeError::Reject(Reject {
                reply: ErrorReply::BadDataChunk,
                noreply,
                consumed: total,
                swallow: 0,
                unlink: None,
            }));
        }
        Ok((&block[..vlen], total))
    }

    /// Checks shared by mg/md/ma/ms before the flags: token count, key length, flag count.
    fn meta_head(&self, too_long: ErrorReply) -> Result<&'a [u8], DecodeError<'a>> {
        self.want(self.t.ntokens() >= 3)?;
        let key = self.key(1, false)?;
        if self.t.ntokens() > MAX_META_NTOKENS {
            return Err(self.rej(too_long, false));
        }
        Ok(key)
    }

    fn meta(&self, which: u8) -> Decoded<'a> {
        let too_long = if which == b'g' {
            ErrorReply::MgFlagsTooLong
        } else {
            ErrorReply::FlagsTooLong
        };
        let key = self.meta_head(too_long)?;
        let flags =
            MetaFlags::parse(self.t.all().get(2..).unwrap_or_default(), key).map_err(|e| {
                // md and ma report every flag problem with one string.
                self.rej(
                    if which == b'g' {
                        e
                    } else {
                        ErrorReply::InvalidOrDuplicateFlag
                    },
                    false,
                )
            })?;
        if which == b'a' && !matches!(flags.mode, None | Some(b'I' | b'+' | b'D' | b'-')) {
            return self.reject(ErrorReply::BadMaMode, false);
        }
        flags.check_opaque().map_err(|e| self.rej(e, false))?;
        self.ok(match which {
            b'g' => Request::MetaGet { key, flags },
            b'd' => Request::MetaDelete { key, flags },
            _ => Request::MetaArith { key, flags },
        })
    }

    fn meta_set(&self, limits: &Limits) -> Decoded<'a> {
        let key = self.meta_head(ErrorReply::FlagsTooLong)?;
        let bad = ErrorReply::BadFormat;
        if self.t.ntokens() == 3 {
            return self.reject(bad, false);
        }
        let vlen = self.num(parse_i32(self.t.get(2)), bad, false)?;
        let vlen = data_len(vlen).ok_or_else(|| self.rej(bad, false))?;
        // From here on memcached knows the length, and every error swallows the block.
        let swallow = |reply, unlink| {
            Err(DecodeError::Reject(Reject {
                reply,
                noreply: false,
                consumed: self.line.consumed,
                swallow: vlen as u64 + 2,
                unlink,
            }))
        };
        let flags = match MetaFlags::parse(self.t.all().get(3..).unwrap_or_default(), key) {
            Ok(f) => f,
            Err(e) => return swallow(e, None),
        };
        if !matches!(flags.mode, None | Some(b'E' | b'A' | b'P' | b'R' | b'S')) {
            return swallow(ErrorReply::BadMsMode, None);
        }
        if let Err(e) = flags.check_opaque() {
            return swallow(e, None);
        }
        let key_len = crate::request::meta_key(key, flags.base64).map_or(key.len(), |k| k.len());
        if !limits.item_fits(key_len, vlen, flags.client_flags.unwrap_or(0)) {
            return swallow(ErrorReply::TooLarge, Some((key, flags.base64)));
        }
        let (data, total) = self.data_block(vlen, false)?;
        Ok((Request::MetaSet { key, flags, data }, total))
    }

    fn meta_debug(&self) -> Decoded<'a> {
        let t = &self.t;
        if t.ntokens() < 3 || t.get(1).len() > MAX_KEY_LEN {
            return self.reject(ErrorReply::BadFormat, false);
        }
        let key = t.get(1);
        let base64 = t.ntokens() >= 4 && t.get(2) == b"b";
        if base64 && crate::request::meta_key(key, true).is_none() {
            return self.reject(ErrorReply::BadFormat, false);
        }
        self.ok(Request::MetaDebug { key, base64 })
    }
}
