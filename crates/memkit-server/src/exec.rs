//! The one executor: runs a logical [`Command`] on the engine and hands the outcome to the
//! encoding's renderer.
//!
//! Text, meta and binary requests decode into the same [`Command`]s
//! (`memkit_protocol::command`); this is the only place they meet storage, so a storage
//! rule (what counts as a fetch for `watch`, which error a store can end in) is written once
//! for all three. A renderer ([`Reply`]) turns outcomes into its encoding's bytes; it
//! decides nothing about storage. Operator commands with no storage meaning (`stats`,
//! `watch`, SASL...) stay with their encodings.
//!
//! A read whose value is on flash (the flash tier) is rendered at once with the value's
//! bytes still to come: a reply's framing depends only on the value's length. The request
//! leaves a [`flash::Hole`] in its connection's [`Cx`]; the session parks until the reads are
//! done and fills the holes in (or turns them into misses) before the output may leave.

pub mod flash;
pub mod replicate;
pub mod route;

use memkit_engine::{Got, ItemView};
use memkit_protocol::Command;
use memkit_types::{ArithOutcome, DeleteOutcome, Error, Result, Stored};

use crate::detail::Op;
use crate::state::Shared;
use crate::watch::Event;

/// What the connection does after a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Go on reading requests.
    Continue,
    /// Flush what is written, then close (`quit`).
    Close,
    /// Become a `watch` stream for these event kinds.
    Watch(u8),
    /// Flush, close, and shut the server down (`shutdown` with `-A`).
    Shutdown,
    /// The request needs a value that is on flash (`append`, `incr`...): nothing was
    /// answered; bring [`Cx::fetch`] back to RAM, then run the request again.
    Fetch,
    /// The request is carried out elsewhere ([`Cx::remote`]'s job): in a replicated group,
    /// by the group (its writes committed, a read barrier: `replicate`); in router mode, by
    /// the backends (`route`). Nothing was answered; carry the job out, then run the request
    /// again.
    Remote,
    /// A multi-get's reply reached [`crate::dispatch::REPLY_CHUNK`] bytes: write out what
    /// is rendered, then go on with [`crate::dispatch::resume`] at this byte offset into
    /// the key list.
    More(usize),
    /// List the cache (`lru_crawler metadump` or `mgdump`), a bounded batch at a time as
    /// the client reads it.
    Dump(Dump),
}

/// Which listing of the cache a connection streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dump {
    /// `lru_crawler metadump`: a `key=... exp=... la=...` line an item, then `END`.
    Meta,
    /// `lru_crawler mgdump`: an `mg KEY` line an item, then `EN`.
    Mg,
}

/// What handling the request at the start of the input did (the text and meta
/// protocol's or the binary one's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The request is not complete yet: read more.
    Incomplete,
    /// A request was handled.
    Done {
        /// Input bytes it used.
        used: usize,
        /// Bytes after those to discard as they arrive.
        swallow: u64,
        /// What the connection does next.
        action: Action,
        /// It may have changed stored data (persistent `sync` mode waits for it).
        mutates: bool,
    },
}

/// What the executor knows of the connection a request came on.
#[derive(Debug, Default)]
pub struct Cx {
    /// The connection's id (`watch`, `-vv`).
    pub id: u64,
    /// Replies rendered with a value still to be read from flash.
    pub holes: Vec<flash::Hole>,
    /// The value a request needs in RAM before it can run ([`Action::Fetch`]).
    pub fetch: Option<(Vec<u8>, memkit_engine::FlashRead)>,
    /// Whether a request may ask for [`Self::fetch`]: not when it runs again after one
    /// (the value left RAM again at once), when it answers as memcached does.
    pub may_fetch: bool,
    /// In a replicated group or a router: what the request waits for, and what came of it.
    pub remote: Option<Box<Remote>>,
}

/// What requests carried out elsewhere ([`Action::Remote`]) wait for, and what came of
/// them: a server is a replicated group's node or a router, never both.
#[derive(Debug)]
pub enum Remote {
    Group(replicate::Repl),
    Route(route::Pending),
}

impl Remote {
    /// Whether the request run last waits.
    pub fn waits(&self) -> bool {
        match self {
            Remote::Group(r) => r.waits(),
            Remote::Route(p) => p.waits(),
        }
    }

    /// Whether more requests may join the job (`session::gather`).
    pub fn gathers(&self) -> bool {
        match self {
            Remote::Group(r) => r.gathers(),
            Remote::Route(p) => p.gathers(),
        }
    }

    /// The request at the start of the input was answered.
    pub fn answered(&mut self) {
        match self {
            Remote::Group(r) => r.answered(),
            Remote::Route(p) => p.answered(),
        }
    }
}

impl Cx {
    pub fn new(id: u64) -> Cx {
        Cx {
            id,
            holes: Vec::new(),
            fetch: None,
            may_fetch: true,
            remote: None,
        }
    }

    /// Whether the request run last waits for the group or the backends (see
    /// [`Action::Remote`]).
    pub fn remote(&self) -> bool {
        self.remote.as_ref().is_some_and(|r| r.waits())
    }

    /// The replicated group's state of the connection.
    pub fn group(&mut self) -> &mut replicate::Repl {
        let r = self
            .remote
            .get_or_insert_with(|| Box::new(Remote::Group(Default::default())));
        if !matches!(**r, Remote::Group(_)) {
            **r = Remote::Group(Default::default());
        }
        match &mut **r {
            Remote::Group(g) => g,
            Remote::Route(_) => unreachable!("set to a group just above"),
        }
    }

    /// The router's state of the connection.
    pub fn routing(&mut self) -> &mut route::Pending {
        let r = self
            .remote
            .get_or_insert_with(|| Box::new(Remote::Route(Default::default())));
        if !matches!(**r, Remote::Route(_)) {
            **r = Remote::Route(Default::default());
        }
        match &mut **r {
            Remote::Route(p) => p,
            Remote::Group(_) => unreachable!("set to a route just above"),
        }
    }

    /// Whether `cmd` needs its item's value and that value is on flash: then it is noted
    /// in [`Self::fetch`] and the command must not run yet.
    fn needs_fetch(&mut self, cmd: &Command<'_>, sh: &Shared) -> bool {
        use memkit_types::StoreMode;
        let key = match cmd {
            Command::Store { key, opts, .. }
                if matches!(opts.mode, StoreMode::Append | StoreMode::Prepend) =>
            {
                key
            }
            Command::Arith { key, .. } => key,
            _ => return false,
        };
        if !self.may_fetch {
            return false;
        }
        match sh.engine.flash_value(key) {
            Some(read) => {
                self.fetch = Some((key.to_vec(), read));
                true
            }
            None => false,
        }
    }
}

/// How an encoding writes the outcomes of logical commands.
pub trait Reply {
    /// A read found the item; the view lives while the shard is locked. Returns where in
    /// the output the value's bytes went, if the reply carries them.
    fn hit(&mut self, v: &ItemView<'_>) -> Option<usize>;
    /// The output replies are appended to.
    fn out(&mut self) -> &mut Vec<u8>;
    /// A read found nothing.
    fn miss(&mut self);
    /// A store's outcome, with the new CAS when stored.
    fn stored(&mut self, s: &Stored);
    /// A delete's outcome.
    fn deleted(&mut self, d: DeleteOutcome);
    /// An increment's or decrement's outcome.
    fn arith(&mut self, a: &ArithOutcome);
    /// A `touch`: whether the item was there.
    fn touched(&mut self, found: bool);
    /// A flush was done.
    fn flushed(&mut self);
    /// A flush was refused: `-F` disables `flush_all`.
    fn flush_refused(&mut self);
    /// The engine refused the command.
    fn error(&mut self, e: &Error);
}

/// A store the codec refused as too large (`unlink`: the key of a `set`, whose old value
/// memcached drops). `true` when the request must wait: a router deletes the old value on
/// the backends first (the refusal is rendered when the request runs again, after the
/// job); otherwise it is counted, and the old value removed here ([`Shared::refuse_too_large`])
/// when the server is not a router.
pub fn refuse_too_large(sh: &Shared, cx: &mut Cx, unlink: Option<&[u8]>) -> bool {
    let Some(router) = sh.router() else {
        sh.refuse_too_large(unlink);
        return false;
    };
    let waits = unlink.is_some_and(|key| route::refused(key, cx.routing()));
    if !waits {
        router.tally.too_large();
    }
    waits
}

/// Runs `cmd` on the engine, reporting to `reply` and to `watch`.
pub fn execute(cmd: &Command<'_>, sh: &Shared, cx: &mut Cx, reply: &mut impl Reply) {
    if let Some(router) = sh.router() {
        if matches!(cmd, Command::Flush { .. }) && !sh.settings.flush_enabled {
            return reply.flush_refused();
        }
        return route::route(cmd, cx.routing(), &router.tally, &sh.detail, reply);
    }
    let routed;
    let cmd = match sh.replica() {
        None => cmd,
        Some(rep) => {
            let id = cx.id;
            match replicate::route(cmd, rep, cx.group(), sh, id, reply) {
                replicate::Route::Done => return,
                replicate::Route::Local(c) => {
                    routed = c;
                    &routed
                }
            }
        }
    };
    let engine = &sh.engine;
    let conn_id = cx.id;
    if engine.flash_store().is_some() && cx.needs_fetch(cmd, sh) {
        return;
    }
    match cmd {
        Command::Get { key, opts } => {
            let r = engine
                .get_or_flash(key, opts, |v| {
                    reply.hit(&v);
                    v.value.len()
                })
                .map(|got| {
                    got.map(|got| match got {
                        Got::Now(len) => len,
                        Got::Flash(read) => flash::render(cx, key, read, reply),
                    })
                });
            sh.detail.record(key, Op::Get(matches!(r, Ok(Some(_)))));
            sh.watchers
                .emit(|| Event::fetch(key, r.as_ref().ok().copied().flatten(), conn_id));
            sh.watchers.hot.fetched(key, matches!(r, Ok(Some(_))));
            match r {
                Ok(Some(_)) => {}
                Ok(None) => reply.miss(),
                Err(e) => reply.error(&e),
            }
        }
        Command::Store { key, data, opts } => {
            // Counted whatever the outcome, as memcached counts the command before it runs.
            sh.detail.record(key, Op::Set);
            let r = engine.store(key, data, opts);
            let ttl = memkit_protocol::command::exp32(opts.exptime);
            sh.watchers
                .emit(|| Event::store(key, &r, ttl, data.len(), conn_id));
            answer(r, reply, |reply, s| reply.stored(&s));
        }
        Command::Delete { key, opts } => {
            sh.detail.record(key, Op::Delete);
            answer(engine.delete(key, opts), reply, |reply, d| reply.deleted(d))
        }
        Command::Arith { key, opts } => answer(engine.arithmetic(key, opts), reply, |reply, a| {
            reply.arith(&a)
        }),
        Command::Touch { key, exptime } => {
            answer(engine.touch(key, *exptime), reply, |reply, found| {
                reply.touched(found)
            })
        }
        Command::Flush { .. } if !sh.settings.flush_enabled => reply.flush_refused(),
        Command::Flush { delay } => {
            // The delay is an expiry time like any other: relative, or an absolute Unix time.
            let now = engine.clock().now_secs();
            let delay = memkit_types::Exptime::flush_delay(*delay, now);
            answer(engine.try_flush_all(delay), reply, |reply, ()| {
                reply.flushed()
            })
        }
    }
}

fn answer<T, R: Reply>(r: Result<T>, reply: &mut R, ok: impl FnOnce(&mut R, T)) {
    match r {
        Ok(v) => ok(reply, v),
        Err(e) => reply.error(&e),
    }
}
