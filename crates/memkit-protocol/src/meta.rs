//! Meta-command flags (`mg`/`ms`/`md`/`ma`), parsed the way memcached's
//! `_meta_flag_preparse` parses them.
//!
//! Wire format: after the key (and, for `ms`, the data length) come space-separated tokens
//! whose first byte is the flag and whose remaining bytes are its argument: `v`, `T30`,
//! `Oabc`. Every flag may appear once. memcached accepts the same flag alphabet for every
//! meta command and ignores what a command does not use, so we parse one [`MetaFlags`] for
//! all of them, keeping the request order because return flags come back in that order.
//!
//! Beyond 1.6.18 we accept `E` (new CAS) and `x` (remove value), which newer memcached
//! documents and memkit's types model; 1.6.18 answers `CLIENT_ERROR invalid flag` to them.

use memkit_types::{
    ArithMode, ArithOptions, DeleteOptions, Exptime, GetOptions, StoreMode, StoreOptions,
};

use crate::command::exp32;
use crate::error::ErrorReply;
use crate::num::{parse_i32, parse_u32, parse_u64, write_i64, write_u64};

/// memcached's `MFLAG_MAX_OPAQUE_LENGTH`: the `O` token, flag byte included.
pub const MAX_OPAQUE_TOKEN: usize = 32;
/// memcached's `MFLAG_MAX_OPT_LENGTH`: the largest allowed `ntokens` of a meta command.
pub const MAX_META_NTOKENS: usize = 20;
/// Flags a request can carry: the token cap leaves at most this many.
pub const MAX_FLAGS: usize = MAX_META_NTOKENS;

/// Every flag of one meta request.
///
/// Boolean flags are `bool`; flags with an argument are `Option`s holding the argument as
/// memcached converts it (TTLs as `int32_t`, client flags as `uint32_t`, CAS/delta/initial as
/// `uint64_t`). `order` lists the flag bytes as they appeared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetaFlags<'a> {
    /// `b`: the key is base64.
    pub base64: bool,
    /// `c`: return the CAS.
    pub ret_cas: bool,
    /// `f`: return the client flags.
    pub ret_flags: bool,
    /// `h`: return whether the item was hit before.
    pub ret_hit: bool,
    /// `k`: return the key.
    pub ret_key: bool,
    /// `l`: return seconds since last access.
    pub ret_last_access: bool,
    /// `s`: return the value size.
    pub ret_size: bool,
    /// `t`: return the remaining TTL.
    pub ret_ttl: bool,
    /// `v`: return the value.
    pub value: bool,
    /// `q`: quiet mode, see [`crate::render::suppressed`].
    pub quiet: bool,
    /// `u`: do not bump the item.
    pub no_bump: bool,
    /// `I`: invalidate / mark stale.
    pub invalidate: bool,
    /// `x`: remove the value, keep the item.
    pub remove_value: bool,
    /// `C`: compare CAS.
    pub compare_cas: Option<u64>,
    /// `E`: explicit new CAS.
    pub new_cas: Option<u64>,
    /// `F`: client flags to store.
    pub client_flags: Option<u32>,
    /// `J`: initial value for an auto-created counter.
    pub initial: Option<u64>,
    /// `D`: arithmetic delta.
    pub delta: Option<u64>,
    /// `M`: mode byte.
    pub mode: Option<u8>,
    /// `N`: vivify on miss with this TTL.
    pub vivify: Option<i32>,
    /// `R`: win a recache when the remaining TTL is below this.
    pub recache: Option<i32>,
    /// `T`: new TTL.
    pub ttl: Option<i32>,
    /// `O`: opaque, without the `O` (at most 31 bytes).
    pub opaque: Option<&'a [u8]>,
    /// `P`: proxy hint, ignored by the server.
    pub proxy_p: Option<&'a [u8]>,
    /// `L`: proxy hint, ignored by the server.
    pub proxy_l: Option<&'a [u8]>,
    order: [u8; MAX_FLAGS],
    n: u8,
}

impl<'a> MetaFlags<'a> {
    /// The flag bytes in request order.
    pub fn order(&self) -> &[u8] {
        &self.order[..usize::from(self.n)]
    }

    /// Parses the flag tokens. `Err` carries memcached's reply for the first fatal problem
    /// (unknown or duplicate flag) or the last argument error, as `_meta_flag_preparse` does.
    /// The opaque length is checked separately, see [`MetaFlags::check_opaque`].
    pub(crate) fn parse(tokens: &[&'a [u8]], key: &[u8]) -> Result<Self, ErrorReply> {
        let mut f = MetaFlags::default();
        let mut err: Option<ErrorReply> = None;
        for tok in tokens {
            let Some((&c, arg)) = tok.split_first() else {
                continue;
            };
            if c >= 127 || f.order().contains(&c) {
                return Err(ErrorReply::DuplicateFlag);
            }
            let bad_token = ErrorReply::BadToken;
            match c {
                b'b' => {
                    f.base64 = true;
                    let mut scratch = [0u8; 256];
                    let out = scratch.get_mut(..key.len()).unwrap_or(&mut []);
                    if crate::base64::decode_into(key, out).is_none() {
                        err = Some(ErrorReply::KeyDecode);
                    }
                }
                b'N' => parse_arg(&mut f.vivify, parse_i32(arg), bad_token, &mut err),
                b'T' => parse_arg(&mut f.ttl, parse_i32(arg), bad_token, &mut err),
                b'R' => parse_arg(&mut f.recache, parse_i32(arg), bad_token, &mut err),
                b'C' => parse_arg(&mut f.compare_cas, parse_u64(arg), bad_token, &mut err),
                b'E' => parse_arg(&mut f.new_cas, parse_u64(arg), bad_token, &mut err),
                b'J' => parse_arg(
                    &mut f.initial,
                    parse_u64(arg),
                    ErrorReply::BadInitial,
                    &mut err,
                ),
                b'D' => parse_arg(&mut f.delta, parse_u64(arg), ErrorReply::BadDelta, &mut err),
                b'F' => match parse_u32(arg) {
                    Some(v) => f.client_flags = Some(v),
                    // memcached flags the error without naming one: the default string stays.
                    None => err = err.or(Some(ErrorReply::BadFormat)),
                },
                b'M' => match arg {
                    [m] => f.mode = Some(*m),
                    _ => err = Some(ErrorReply::BadMLength),
                },
                b'O' => f.opaque = Some(arg),
                b'P' => f.proxy_p = Some(arg),
                b'L' => f.proxy_l = Some(arg),
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
                _ => return Err(ErrorReply::InvalidFlag),
            }
            if usize::from(f.n) < MAX_FLAGS {
                f.order[usize::from(f.n)] = c;
                f.n += 1;
            }
        }
        match err {
            Some(e) => Err(e),
            None => Ok(f),
        }
    }

    /// memcached checks the opaque length only when it renders the reply, after parsing.
    pub(crate) fn check_opaque(&self) -> Result<(), ErrorReply> {
        match self.opaque {
            Some(o) if o.len() + 1 > MAX_OPAQUE_TOKEN => Err(ErrorReply::OpaqueTooLong),
            _ => Ok(()),
        }
    }

    /// Adds a flag (client side). Flags already present are ignored, because memcached would
    /// reject the duplicate; an argument-taking flag takes its value from `self`'s field.
    pub fn push(&mut self, flag: u8) -> &mut Self {
        if !self.order().contains(&flag) && usize::from(self.n) < MAX_FLAGS {
            self.order[usize::from(self.n)] = flag;
            self.n += 1;
        }
        self
    }

    /// Appends ` <flag><arg>` for every flag in order (client side).
    pub fn encode(&self, out: &mut Vec<u8>) {
        for &c in self.order() {
            out.push(b' ');
            out.push(c);
            match c {
                b'N' => write_opt_i(out, self.vivify),
                b'T' => write_opt_i(out, self.ttl),
                b'R' => write_opt_i(out, self.recache),
                b'C' => write_opt_u(out, self.compare_cas),
                b'E' => write_opt_u(out, self.new_cas),
                b'J' => write_opt_u(out, self.initial),
                b'D' => write_opt_u(out, self.delta),
                b'F' => write_opt_u(out, self.client_flags.map(u64::from)),
                b'M' => out.push(self.mode.unwrap_or(b'S')),
                b'O' => out.extend_from_slice(self.opaque.unwrap_or_default()),
                b'P' => out.extend_from_slice(self.proxy_p.unwrap_or_default()),
                b'L' => out.extend_from_slice(self.proxy_l.unwrap_or_default()),
                _ => {}
            }
        }
    }
}

/// The meta flags as store options, each mapping beside its inverse: the server decodes
/// with `*_options`, the client encodes with `for_*` (which also asks for the return flags
/// it needs), and `tests/logical.rs` checks that one undoes the other.
impl MetaFlags<'_> {
    /// `mg`'s options. memcached applies `T` and `N` in request order: on a vivify, the
    /// later of the two sets the new item's TTL.
    pub fn get_options(&self) -> GetOptions {
        let pos = |c: u8| self.order().iter().position(|&x| x == c);
        let t_after_n = matches!((pos(b'N'), pos(b'T')), (Some(n), Some(t)) if t > n);
        let vivify = if t_after_n { self.ttl } else { self.vivify };
        let before = |c: u8| matches!((pos(b't'), pos(c)), (Some(t), Some(c)) if t < c);
        GetOptions {
            touch: self.ttl.map(|t| Exptime(t.into())),
            vivify: self.vivify.and(vivify).map(|t| Exptime(t.into())),
            recache_below: self.recache.map(|r| r.max(0) as u32),
            meta: self.ret_ttl || self.ret_hit || self.ret_last_access,
            ttl_before_touch: before(b'T'),
            ttl_before_vivify: before(b'N'),
            no_bump: self.no_bump,
            new_cas: self.new_cas,
            classic: false,
            replica: None,
        }
    }

    /// `C<cas>` when `cas` is set.
    fn with_compare_cas(&mut self, cas: Option<u64>) -> &mut Self {
        if let Some(c) = cas {
            self.compare_cas = Some(c);
            self.push(b'C');
        }
        self
    }

    /// `E<cas>` when `cas` is set.
    fn with_new_cas(&mut self, cas: Option<u64>) -> &mut Self {
        if let Some(e) = cas {
            self.new_cas = Some(e);
            self.push(b'E');
        }
        self
    }

    /// The flags of an `mg` for `o`, returning value, flags and CAS (and `t h l` when
    /// `o.meta`), `T`, `N`, `R` in the order memcached applies them: `t` before `T` or `N`
    /// where `o` says it came first ([`GetOptions::ttl_before_touch`],
    /// [`GetOptions::ttl_before_vivify`]), `T` before `N` unless `t` sits between them.
    pub fn for_get(o: &GetOptions) -> MetaFlags<'static> {
        let mut f = MetaFlags::default();
        f.push(b'v').push(b'f').push(b'c');
        let before_t = o.meta && o.ttl_before_touch && o.touch.is_some();
        let before_n = o.meta && o.ttl_before_vivify && o.vivify.is_some();
        let meta = |f: &mut MetaFlags<'_>| {
            f.push(b't').push(b'h').push(b'l');
        };
        let touch = |f: &mut MetaFlags<'_>| {
            if let Some(t) = o.touch {
                f.ttl = Some(exp32(t));
                f.push(b'T');
            }
        };
        let vivify = |f: &mut MetaFlags<'_>| {
            if let Some(n) = o.vivify {
                f.vivify = Some(exp32(n));
                f.push(b'N');
            }
        };
        match (before_t, before_n) {
            (true, true) => {
                meta(&mut f);
                touch(&mut f);
                vivify(&mut f);
            }
            (false, true) => {
                touch(&mut f);
                meta(&mut f);
                vivify(&mut f);
            }
            (true, false) => {
                vivify(&mut f);
                meta(&mut f);
                touch(&mut f);
            }
            (false, false) => {
                touch(&mut f);
                vivify(&mut f);
            }
        }
        if let Some(r) = o.recache_below {
            f.recache = Some(r.min(i32::MAX as u32) as i32);
            f.push(b'R');
        }
        f.with_new_cas(o.new_cas);
        if o.meta && !before_t && !before_n {
            meta(&mut f);
        }
        if o.no_bump {
            f.push(b'u');
        }
        f
    }

    /// `ms`'s options.
    pub fn store_options(&self) -> StoreOptions {
        let mode = match self.mode {
            Some(b'E' | b'e') => StoreMode::Add,
            Some(b'A' | b'a') => StoreMode::Append,
            Some(b'P' | b'p') => StoreMode::Prepend,
            Some(b'R' | b'r') => StoreMode::Replace,
            _ => StoreMode::Set,
        };
        StoreOptions {
            mode,
            flags: self.client_flags.unwrap_or(0),
            exptime: Exptime(self.ttl.unwrap_or(0).into()),
            cas: self.compare_cas,
            invalidate: self.invalidate,
            vivify: self.vivify.map(|t| Exptime(t.into())),
            new_cas: self.new_cas,
        }
    }

    /// The flags of an `ms` for `o`, returning the new CAS.
    pub fn for_store(o: &StoreOptions) -> MetaFlags<'static> {
        let mut f = MetaFlags::default();
        f.push(b'c');
        f.ttl = Some(exp32(o.exptime));
        f.client_flags = Some(o.flags);
        f.mode = Some(match o.mode {
            StoreMode::Set => b'S',
            StoreMode::Add => b'E',
            StoreMode::Replace => b'R',
            StoreMode::Append => b'A',
            StoreMode::Prepend => b'P',
        });
        f.push(b'T').push(b'F').push(b'M');
        f.with_compare_cas(o.cas);
        if o.invalidate {
            f.invalidate = true;
            f.push(b'I');
        }
        if let Some(n) = o.vivify {
            f.vivify = Some(exp32(n));
            f.push(b'N');
        }
        f.with_new_cas(o.new_cas);
        f
    }

    /// `md`'s options.
    pub fn delete_options(&self) -> DeleteOptions {
        DeleteOptions {
            cas: self.compare_cas,
            invalidate: self.invalidate,
            stale_ttl: self.ttl.map(|t| Exptime(t.into())),
            remove_value: self.remove_value,
            new_cas: self.new_cas,
        }
    }

    /// The flags of an `md` for `o`.
    pub fn for_delete(o: &DeleteOptions) -> MetaFlags<'static> {
        let mut f = MetaFlags::default();
        f.with_compare_cas(o.cas);
        if o.invalidate {
            f.invalidate = true;
            f.push(b'I');
        }
        if let Some(t) = o.stale_ttl {
            f.ttl = Some(exp32(t));
            f.push(b'T');
        }
        if o.remove_value {
            f.remove_value = true;
            f.push(b'x');
        }
        f.with_new_cas(o.new_cas);
        f
    }

    /// `ma`'s options.
    pub fn arith_options(&self) -> ArithOptions {
        ArithOptions {
            mode: match self.mode {
                Some(b'D' | b'd' | b'-') => ArithMode::Decr,
                _ => ArithMode::Incr,
            },
            delta: self.delta.unwrap_or(1),
            vivify: self
                .vivify
                .map(|t| (self.initial.unwrap_or(0), Exptime(t.into()))),
            cas: self.compare_cas,
            update_ttl: self.ttl.map(|t| Exptime(t.into())),
            new_cas: self.new_cas,
        }
    }

    /// The flags of an `ma` for `o`, returning value, CAS and TTL.
    pub fn for_arith(o: &ArithOptions) -> MetaFlags<'static> {
        let mut f = MetaFlags {
            mode: Some(match o.mode {
                ArithMode::Incr => b'I',
                ArithMode::Decr => b'D',
            }),
            delta: Some(o.delta),
            ..Default::default()
        };
        f.push(b'M').push(b'D');
        if let Some((initial, ttl)) = o.vivify {
            f.vivify = Some(exp32(ttl));
            f.initial = Some(initial);
            f.push(b'N').push(b'J');
        }
        f.with_compare_cas(o.cas);
        if let Some(t) = o.update_ttl {
            f.ttl = Some(exp32(t));
            f.push(b'T');
        }
        f.with_new_cas(o.new_cas);
        f.push(b'v').push(b'c').push(b't');
        f
    }
}

fn parse_arg<T>(slot: &mut Option<T>, v: Option<T>, e: ErrorReply, err: &mut Option<ErrorReply>) {
    match v {
        Some(v) => *slot = Some(v),
        None => *err = Some(e),
    }
}

fn write_opt_i(out: &mut Vec<u8>, v: Option<i32>) {
    write_i64(out, i64::from(v.unwrap_or(0)));
}

fn write_opt_u(out: &mut Vec<u8>, v: Option<u64>) {
    write_u64(out, v.unwrap_or(0));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<MetaFlags<'_>, ErrorReply> {
        let toks: Vec<&[u8]> = s
            .split(' ')
            .filter(|t| !t.is_empty())
            .map(str::as_bytes)
            .collect();
        MetaFlags::parse(&toks, b"key")
    }

    #[test]
    fn order_and_args() {
        let f = p("s v T-1 Oab k C5 MA").unwrap();
        assert_eq!(f.order(), b"svTOkCM");
        assert_eq!(
            (f.ttl, f.opaque, f.compare_cas, f.mode),
            (Some(-1), Some(&b"ab"[..]), Some(5), Some(b'A'))
        );
        let mut out = Vec::new();
        f.encode(&mut out);
        assert_eq!(out, b" s v T-1 Oab k C5 MA");
    }

    #[test]
    fn errors_match_memcached() {
        assert_eq!(p("zz"), Err(ErrorReply::InvalidFlag));
        assert_eq!(p("v v"), Err(ErrorReply::DuplicateFlag));
        assert_eq!(p("N"), Err(ErrorReply::BadToken));
        assert_eq!(p("Fx"), Err(ErrorReply::BadFormat));
        assert_eq!(p("Mxx"), Err(ErrorReply::BadMLength));
        assert_eq!(p("Dx"), Err(ErrorReply::BadDelta));
        assert_eq!(p("Jx"), Err(ErrorReply::BadInitial));
        assert_eq!(
            p("Nx Tx ~"),
            Err(ErrorReply::InvalidFlag),
            "fatal errors win"
        );
        assert_eq!(
            p("\u{7f}"),
            Err(ErrorReply::DuplicateFlag),
            "memcached's >= 127 check"
        );
        assert_eq!(p("b"), Err(ErrorReply::KeyDecode), "`key` is not base64");
    }
}
