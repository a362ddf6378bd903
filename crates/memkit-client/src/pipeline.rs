//! [`Client::pipeline`]: many logical commands to one server, in order, on one connection.
//!
//! A router forwards a client connection's pipelined requests, and they must reach each
//! server in the order the client sent them (a `set` then a `get` of the same key). The
//! [`memkit_types::Memcache`] calls each pick a pooled connection in turn, so two calls
//! made at once may overtake each other; a pipeline takes one connection and queues its
//! commands on it one after another, where the server answers them in that order.
//!
//! Commands are memkit's logical ones ([`memkit_protocol::Command`], what every encoding
//! decodes into), so a request decoded from any protocol is forwarded in the client's
//! ([`crate::Dialect`], [`crate::Protocol`]). Consecutive reads with the same options go as
//! one multi-key request; a classic read (`get`, `gats`...) goes as one over text, since
//! memcached treats it apart from `mg` (it neither wins nor takes a stale item's token).
//! A key is what a server took: any 1 to 250 bytes; one the text protocol cannot carry (a
//! space, a line end) goes in base64 with meta's `b` flag. Each command gets its own outcome: a key the client refuses or an
//! option the wire cannot say fails that command alone; a connection that fails or a
//! pipeline past the request timeout fails every command not yet answered.

use memkit_protocol::Command;
use memkit_types::{ArithOutcome, DeleteOutcome, Error, Item, Result, Stored};

use crate::client::Client;
use crate::command::{Dialect, text_safe};
use crate::conn::{Job, Protocol};
use crate::reply::Reply;
use crate::{binary, command};

/// What one command of a [`Client::pipeline`] came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A read: the item, or `None` on a miss.
    Item(Option<Item>),
    /// A store.
    Stored(Stored),
    /// A delete.
    Deleted(DeleteOutcome),
    /// An increment or decrement.
    Arith(ArithOutcome),
    /// A touch: whether the item was there.
    Touched(bool),
    /// A flush was done.
    Flushed,
}

/// One request of the pipeline: the commands `at..at + n` (several only for a run of reads).
struct Sent {
    at: usize,
    n: usize,
    dialect: Dialect,
}

impl Client {
    /// Sends `cmds` to this server in order, on one connection, and returns each one's
    /// outcome (aligned with `cmds`); see the module docs.
    pub async fn pipeline(&self, cmds: &[Command<'_>]) -> Vec<Result<Outcome>> {
        if !cmds.is_empty() && self.run_of_reads(cmds) == cmds.len() {
            return self.one_request(cmds).await;
        }
        let mut out: Vec<Option<Result<Outcome>>> = vec![None; cmds.len()];
        let mut jobs = Vec::new();
        let mut sent = Vec::new();
        let mut at = 0;
        while at < cmds.len() {
            let n = self.run_of_reads(&cmds[at..]);
            let dialect = self.dialect_for(&cmds[at..at + n]);
            match self.encode(&cmds[at..at + n], dialect) {
                Ok(job) => {
                    jobs.push(job);
                    sent.push(Sent { at, n, dialect });
                }
                Err(e) => out[at..at + n].fill(Some(Err(e))),
            }
            at += n;
        }
        let replies = match jobs.is_empty() {
            true => Vec::new(),
            false => self.call_in_order(jobs).await,
        };
        for (s, r) in sent.into_iter().zip(replies) {
            let cmds = &cmds[s.at..s.at + s.n];
            let decoded = r.and_then(|r| self.decode(cmds, s.dialect, r));
            match decoded {
                Ok(outcomes) => {
                    for (slot, o) in out[s.at..].iter_mut().zip(outcomes) {
                        *slot = Some(Ok(o));
                    }
                }
                Err(e) => out[s.at..s.at + s.n].fill(Some(Err(e))),
            }
        }
        out.into_iter()
            .map(|o| o.unwrap_or_else(|| Err(Error::Io("no reply".into()))))
            .collect()
    }

    /// [`Client::pipeline`] of commands that make one request (one command, or a run of
    /// reads): the common case, sent without the bookkeeping of several.
    async fn one_request(&self, cmds: &[Command<'_>]) -> Vec<Result<Outcome>> {
        let dialect = self.dialect_for(cmds);
        let outcomes = match self.encode(cmds, dialect) {
            Ok(job) => self
                .call(job)
                .await
                .and_then(|r| self.decode(cmds, dialect, r)),
            Err(e) => Err(e),
        };
        match outcomes {
            Ok(o) => {
                let mut out: Vec<Result<Outcome>> = o.into_iter().map(Ok).collect();
                out.resize_with(cmds.len(), || Err(Error::Io("no reply".into())));
                out
            }
            Err(e) => vec![Err(e); cmds.len()],
        }
    }

    /// How many commands from the start of `cmds` go as one request: a run of valid reads
    /// with the same options (a multi-key `mg`/`get`), or one command.
    fn run_of_reads(&self, cmds: &[Command<'_>]) -> usize {
        let Command::Get { opts, key } = &cmds[0] else {
            return 1;
        };
        if check_key(key).is_err() {
            return 1;
        }
        1 + cmds[1..]
            .iter()
            .take_while(|c| {
                matches!(c, Command::Get { opts: o, key } if o == opts && check_key(key).is_ok())
            })
            .count()
    }

    /// The dialect `cmds` go in: classic for a classic read the text protocol can carry.
    fn dialect_for(&self, cmds: &[Command<'_>]) -> Dialect {
        match &cmds[0] {
            Command::Get { opts, .. }
                if opts.classic && cmds.iter().filter_map(Command::key).all(text_safe) =>
            {
                Dialect::Classic
            }
            _ => self.config().dialect,
        }
    }

    /// The request for `cmds` (one command, or a run of reads) in `dialect`
    /// ([`Client::dialect_for`] them).
    fn encode(&self, cmds: &[Command<'_>], dialect: Dialect) -> Result<Job> {
        let binary = self.config().protocol == Protocol::Binary;
        if let Some(key) = cmds[0]
            .key()
            .filter(|_| !matches!(cmds[0], Command::Flush { .. }))
        {
            check_key(key)?;
        }
        match &cmds[0] {
            Command::Get { opts, .. } => {
                let keys: Vec<&[u8]> = cmds.iter().filter_map(Command::key).collect();
                match binary {
                    true => binary::get(&keys, opts),
                    false => command::get(dialect, &keys, opts),
                }
            }
            Command::Store { key, data, opts } => match binary {
                true => binary::store(key, data, opts),
                false => command::store(dialect, key, data, opts),
            },
            Command::Delete { key, opts } => match binary {
                true => binary::delete(key, opts),
                false => command::delete(dialect, key, opts),
            },
            Command::Arith { key, opts } => match binary {
                true => binary::arith(key, opts),
                false => command::arith(dialect, key, opts),
            },
            Command::Touch { key, exptime } => match binary {
                true => binary::touch(key, *exptime),
                false if text_safe(key) => Ok(command::touch(key, *exptime)),
                false => Err(Error::InvalidKey),
            },
            Command::Flush { delay } => Ok(match binary {
                true => binary::flush_all(*delay),
                false => command::flush_all(*delay),
            }),
        }
    }

    /// The outcomes of `cmds` from the replies to their request, sent in `dialect`.
    fn decode(
        &self,
        cmds: &[Command<'_>],
        dialect: Dialect,
        r: Vec<Reply>,
    ) -> Result<Vec<Outcome>> {
        let binary = self.config().protocol == Protocol::Binary;
        let one = |o: Outcome| Ok(vec![o]);
        match &cmds[0] {
            Command::Get { .. } => {
                let keys: Vec<&[u8]> = cmds.iter().filter_map(Command::key).collect();
                let items = match binary {
                    true => binary::get_replies(&keys, r)?,
                    false => command::get_replies(dialect, &keys, r)?,
                };
                Ok(items.into_iter().map(Outcome::Item).collect())
            }
            Command::Store { opts, .. } => one(Outcome::Stored(match binary {
                true => binary::store_reply(opts, r)?,
                false => command::store_reply(r)?,
            })),
            Command::Delete { .. } => one(Outcome::Deleted(match binary {
                true => binary::delete_reply(r)?,
                false => command::delete_reply(r)?,
            })),
            Command::Arith { opts, .. } => one(Outcome::Arith(match binary {
                true => binary::arith_reply(opts, r)?,
                false => command::arith_reply(r)?,
            })),
            Command::Touch { .. } => one(Outcome::Touched(match binary {
                true => binary::touch_reply(r)?,
                false => command::touch_reply(r)?,
            })),
            Command::Flush { .. } => {
                match binary {
                    true => binary::flush_reply(r)?,
                    false => command::ok_reply(r)?,
                }
                one(Outcome::Flushed)
            }
        }
    }
}

/// A key as a server may hold it: 1 to 250 bytes, any bytes.
fn check_key(key: &[u8]) -> Result<()> {
    match key.len() {
        1..=memkit_types::MAX_KEY_LEN => Ok(()),
        _ => Err(Error::InvalidKey),
    }
}
