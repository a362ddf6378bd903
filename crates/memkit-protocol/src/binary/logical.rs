//! Binary requests as logical commands ([`crate::Command`]), and back (client side).

use super::*;

/// `INCREMENT`/`DECREMENT`'s expiry that means "do not create a missing item".
pub const NO_CREATE: u32 = 0xffff_ffff;

impl<'a> Request<'a> {
    /// The logical command of a storage request (`None` for `NOOP`, `STAT`, SASL...).
    /// memcached turns a `SET`, `ADD` or `REPLACE` with a CAS into its `cas` command;
    /// `TOUCH` is a read that sets the expiry, because its reply carries the flags.
    pub fn command(&self) -> Option<crate::Command<'a>> {
        use crate::Command as C;
        let cas = (self.cas != 0).then_some(self.cas);
        Some(match self.cmd {
            Command::Get { key, touch, .. } => C::Get {
                key,
                opts: GetOptions {
                    touch: touch.map(|t| Exptime(t.into())),
                    classic: true,
                    ..Default::default()
                },
            },
            Command::Store {
                kind,
                key,
                flags,
                exptime,
                data,
            } => {
                let mode = match kind {
                    StoreKind::Append => StoreMode::Append,
                    StoreKind::Prepend => StoreMode::Prepend,
                    _ if cas.is_some() => StoreMode::Set,
                    StoreKind::Set => StoreMode::Set,
                    StoreKind::Add => StoreMode::Add,
                    StoreKind::Replace => StoreMode::Replace,
                };
                let opts = StoreOptions {
                    cas,
                    ..StoreOptions::new(mode, flags, Exptime(exptime.into()))
                };
                C::Store { key, data, opts }
            }
            Command::Delete { key } => C::Delete {
                key,
                opts: DeleteOptions {
                    cas,
                    ..Default::default()
                },
            },
            Command::Arith {
                incr,
                key,
                delta,
                initial,
                exptime,
            } => C::Arith {
                key,
                opts: ArithOptions {
                    mode: if incr {
                        ArithMode::Incr
                    } else {
                        ArithMode::Decr
                    },
                    delta,
                    vivify: (exptime != NO_CREATE).then(|| (initial, Exptime(exptime.into()))),
                    cas,
                    ..Default::default()
                },
            },
            Command::Flush { delay } => C::Flush {
                delay: delay.unwrap_or(0),
            },
            _ => return None,
        })
    }
}

/// Client side: the frame that carries a logical command, `None` for what the binary
/// protocol cannot say (meta-only options, a CAS with add or replace, an expiry beyond
/// `u32`, `touch` without a read). The inverse of [`Request::command`].
pub fn encode_command(cmd: &crate::Command<'_>, opaque: u32, out: &mut Vec<u8>) -> Option<()> {
    use crate::Command as C;
    let exp = |e: Exptime| u32::try_from(e.0).ok();
    let (opcode, cas, cmd) = match cmd {
        C::Get { key, opts } => {
            let plain = GetOptions {
                touch: opts.touch,
                classic: true,
                ..Default::default()
            };
            if *opts != plain {
                return None;
            }
            let touch = match opts.touch {
                Some(t) => Some(exp(t)?),
                None => None,
            };
            let opcode = if touch.is_some() { op::GAT } else { op::GET };
            let cmd = Command::Get {
                key,
                with_key: false,
                touch,
                value: true,
            };
            (opcode, 0, cmd)
        }
        C::Store { key, data, opts } => {
            let plain = StoreOptions {
                cas: opts.cas,
                ..StoreOptions::new(opts.mode, opts.flags, opts.exptime)
            };
            if *opts != plain {
                return None;
            }
            let (opcode, kind) = match opts.mode {
                StoreMode::Set => (op::SET, StoreKind::Set),
                StoreMode::Add if opts.cas.is_none() => (op::ADD, StoreKind::Add),
                StoreMode::Replace if opts.cas.is_none() => (op::REPLACE, StoreKind::Replace),
                StoreMode::Append => (op::APPEND, StoreKind::Append),
                StoreMode::Prepend => (op::PREPEND, StoreKind::Prepend),
                _ => return None,
            };
            let appending = matches!(kind, StoreKind::Append | StoreKind::Prepend);
            if appending && (opts.flags != 0 || opts.exptime != Exptime(0)) {
                return None;
            }
            let cmd = Command::Store {
                kind,
                key,
                flags: opts.flags,
                exptime: exp(opts.exptime)?,
                data,
            };
            (opcode, opts.cas.unwrap_or(0), cmd)
        }
        C::Delete { key, opts } => {
            if *opts
                != (DeleteOptions {
                    cas: opts.cas,
                    ..Default::default()
                })
            {
                return None;
            }
            (op::DELETE, opts.cas.unwrap_or(0), Command::Delete { key })
        }
        C::Arith { key, opts } => {
            if opts.update_ttl.is_some() || opts.new_cas.is_some() {
                return None;
            }
            let (initial, exptime) = match opts.vivify {
                Some((i, e)) => (i, exp(e).filter(|&e| e != NO_CREATE)?),
                None => (0, NO_CREATE),
            };
            let incr = opts.mode == ArithMode::Incr;
            let cmd = Command::Arith {
                incr,
                key,
                delta: opts.delta,
                initial,
                exptime,
            };
            let opcode = if incr { op::INCREMENT } else { op::DECREMENT };
            (opcode, opts.cas.unwrap_or(0), cmd)
        }
        C::Flush { delay } => {
            let delay = (*delay != 0).then_some(*delay);
            (op::FLUSH, 0, Command::Flush { delay })
        }
        C::Touch { .. } => return None,
    };
    let req = Request {
        opcode,
        opaque,
        cas,
        quiet: false,
        cmd,
    };
    encode(&req, out);
    Some(())
}
