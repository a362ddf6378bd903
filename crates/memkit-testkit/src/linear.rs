//! Linearizability checking of memcached histories: concurrent clients' `set`, `get`,
//! `gets` + `cas`, `incr` and `delete` on a few keys, recorded while faults are injected,
//! then checked against a sequential model of memcached.
//!
//! Why: a replicated store's promise is that every operation seems to take effect at one
//! instant between its call and its return, in one order all clients agree on. Tests that
//! compare single replies cannot see a stale read on a deposed leader, a write lost in a
//! leader change or a `cas` that won against a version already overwritten; a checker
//! that searches for such an order over a whole concurrent history can.
//!
//! - [`Recorder`] (thread-safe, `Clone`) and [`History`] record each operation's call
//!   ([`Recorder::invoke`], before the request is sent) and return ([`Recorder::complete`],
//!   after the reply arrived), in one total order that respects real time. An operation
//!   that failed or timed out is simply never completed: it may or may not have taken
//!   effect, and the checker allows both (a read that never returned observed nothing and
//!   is left out).
//! - [`check`] returns `Ok(())` if some order of the operations, each placed between its
//!   call and its return, gives every recorded answer under the model (`model.rs`), else a
//!   readable counterexample: the first return nothing can explain, and the operations
//!   around it.
//!
//! The vocabulary ([`Op`], [`Ret`]) is memcached's text protocol's, not any backend's
//! types, so the same recorder serves an in-process group (memkit-raft's tests) and real
//! memkitd processes driven over a socket.
//!
//! # CAS tokens
//!
//! A server's CAS numbers cannot be predicted by a model (memkit-raft's come from log indexes).
//! So the model names a version by its value, and the history must keep values unique:
//! every `set` and `cas` writes a value never written to that key before, and numeric
//! values are far enough apart that `incr` never reaches another write's value. Then:
//!
//! - a `gets` observes `(value, token)`, and the `cas` made from it carries both
//!   ([`Op::Cas`]'s `read` and `token`). The model answers `STORED` exactly when the
//!   key's current value is `read`, that is when the version the token was read from is
//!   still current at the `cas`'s linearization point; `EXISTS` when another version is;
//!   `NOT_FOUND` when the key is missing;
//! - what ties a token to a version is checked over the whole history before the search:
//!   every `gets` that saw a value saw the same token, and no two values share a token.
//!   A server whose `cas` compared against anything else than the version's identity (a
//!   token not renewed by `incr`, say) answers `STORED` where the model says `EXISTS`.
//!
//! [`check`] verifies the uniqueness it relies on (values written twice, an `incr` landing
//! on a written value) and reports a history that breaks it instead of checking it.
//!
//! # Why todc-utils
//!
//! The search is todc-utils' [`WGLChecker`]: Wing and Gong's
//! algorithm with Lowe's memoization (the one Porcupine and Knossos-style checkers use),
//! zero dependencies, under a second to build. stateright's `LinearizabilityTester` was
//! measured first on the same register histories (4 clients, release build): it accepts a
//! valid history of 1,000 operations in 1 s (todc-utils: 22 ms), but rejecting a stale read
//! near the end of a 30-operation history took it 17 s, and 60 operations did not finish in
//! a minute (todc-utils: 1,000 operations in 50 ms). Without memoization it tries every
//! order of the commuting operations before the violation, so it could not report a
//! violation in a real history; and it brings 12 dependencies (an HTTP server among them,
//! 24 s to build on one core). Linearizability is compositional, so each key is checked
//! on its own (what Porcupine calls P-compositionality), which keeps each search small.

mod model;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use todc_utils::{Action, History as TodcHistory, WGLChecker};

use model::{KeySpec, Step};

/// A client's request on one key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Op {
    /// `set`: stores `value` (unique in the history, see the module docs).
    Set {
        /// The value stored.
        value: Vec<u8>,
    },
    /// `get`.
    Get,
    /// `gets`: the value and its CAS token.
    Gets,
    /// `cas`, made from an earlier `gets` that saw `read` with `token`; stores `value`.
    Cas {
        /// The value the `gets` saw (names the version the token belongs to).
        read: Vec<u8>,
        /// The token the `gets` saw, sent with the `cas`.
        token: u64,
        /// The value stored (unique in the history).
        value: Vec<u8>,
    },
    /// `incr` by `delta`.
    Incr {
        /// The amount added (wrapping at 2^64, as memcached does).
        delta: u64,
    },
    /// `delete`.
    Delete,
}

/// What the server answered.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Ret {
    /// `STORED`.
    Stored,
    /// `EXISTS` (a `cas` whose token is not the current version's).
    Exists,
    /// `NOT_FOUND`.
    NotFound,
    /// A hit: the value, and the CAS token for `gets` (`None` for `get`).
    Hit {
        /// The value.
        value: Vec<u8>,
        /// The token (`gets`).
        cas: Option<u64>,
    },
    /// A miss (`END` alone).
    Miss,
    /// `incr`'s new value.
    Number(u64),
    /// `incr` on a value that is not a number (`CLIENT_ERROR`).
    NonNumeric,
    /// `DELETED`.
    Deleted,
}

impl Ret {
    fn without_cas(&self) -> Ret {
        match self {
            Ret::Hit { value, .. } => Ret::Hit {
                value: value.clone(),
                cas: None,
            },
            other => other.clone(),
        }
    }
}

/// Names an operation in its [`History`] (returned by `invoke`, given to `complete`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub usize);

/// One recorded operation.
#[derive(Debug, Clone)]
pub struct Operation {
    /// The client that issued it (for the report; a client may issue an operation while an
    /// earlier one of its own never returned).
    pub client: u32,
    /// The key.
    pub key: Vec<u8>,
    /// The request.
    pub op: Op,
    /// The answer, `None` if none came back (failed, timed out: outcome unknown).
    pub ret: Option<Ret>,
    /// When it was called, since the history began.
    pub invoked: Duration,
    /// When it returned.
    pub returned: Option<Duration>,
}

#[derive(Debug, Clone, Copy)]
enum Event {
    Invoke(usize),
    Return(usize),
}

/// A history: operations and the order of their calls and returns. Build one by hand with
/// [`History::invoke`] and [`History::complete`] (a unit test), or record one from many
/// threads or tasks with a [`Recorder`].
#[derive(Debug, Clone)]
pub struct History {
    start: Instant,
    ops: Vec<Operation>,
    events: Vec<Event>,
}

impl Default for History {
    fn default() -> Self {
        History::new()
    }
}

impl History {
    /// An empty history; its clock starts now.
    pub fn new() -> History {
        History {
            start: Instant::now(),
            ops: Vec::new(),
            events: Vec::new(),
        }
    }

    /// Records that `client` called `op` on `key`, now.
    pub fn invoke(&mut self, client: u32, key: impl Into<Vec<u8>>, op: Op) -> OpId {
        let id = self.ops.len();
        self.ops.push(Operation {
            client,
            key: key.into(),
            op,
            ret: None,
            invoked: self.start.elapsed(),
            returned: None,
        });
        self.events.push(Event::Invoke(id));
        OpId(id)
    }

    /// Records that operation `id` returned `ret`, now.
    ///
    /// # Panics
    ///
    /// If `id` is not of this history or already returned.
    pub fn complete(&mut self, id: OpId, ret: Ret) {
        let op = &mut self.ops[id.0];
        assert!(op.ret.is_none(), "operation {} returned twice", id.0);
        op.ret = Some(ret);
        op.returned = Some(self.start.elapsed());
        self.events.push(Event::Return(id.0));
    }

    /// The operations, in the order they were called.
    pub fn operations(&self) -> &[Operation] {
        &self.ops
    }

    /// How many operations never returned (outcome unknown).
    pub fn unknown(&self) -> usize {
        self.ops.iter().filter(|o| o.ret.is_none()).count()
    }
}

/// A [`History`] shared by concurrent clients (threads or tasks); `Clone` shares it. Each
/// event is recorded under one lock, so the order of events is consistent with real time:
/// call [`Recorder::invoke`] before sending a request and [`Recorder::complete`] after its
/// reply arrived.
#[derive(Debug, Clone, Default)]
pub struct Recorder(Arc<Mutex<History>>);

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Recorder {
        Recorder::default()
    }

    /// [`History::invoke`].
    pub fn invoke(&self, client: u32, key: impl Into<Vec<u8>>, op: Op) -> OpId {
        self.lock().invoke(client, key, op)
    }

    /// [`History::complete`]. An operation that failed or timed out is not completed.
    pub fn complete(&self, id: OpId, ret: Ret) {
        self.lock().complete(id, ret)
    }

    /// A copy of the history so far.
    pub fn history(&self) -> History {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, History> {
        // A client that panicked mid-record leaves a history still worth checking.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Checks that `history` is linearizable under memcached's semantics, every key starting
/// absent. `Err` describes why not: a broken assumption of the model (see the module docs),
/// or the first return on a key that no order of the operations can explain, with the
/// operations around it.
pub fn check(history: &History) -> Result<(), String> {
    let mut by_key: BTreeMap<&[u8], Vec<Event>> = BTreeMap::new();
    for e in &history.events {
        let (Event::Invoke(i) | Event::Return(i)) = *e;
        by_key.entry(&history.ops[i].key).or_default().push(*e);
    }
    for (key, events) in &by_key {
        assumptions(history, key, events)?;
    }
    for (key, events) in &by_key {
        if !linearizable(history, events) {
            return Err(counterexample(history, key, events));
        }
    }
    Ok(())
}

/// The key's operations (by id) in the order they were called.
fn ops_of(events: &[Event]) -> impl Iterator<Item = usize> + '_ {
    events.iter().filter_map(|e| match e {
        Event::Invoke(i) => Some(*i),
        Event::Return(_) => None,
    })
}

/// Values written once, tokens consistent with values: what naming versions by value needs.
fn assumptions(history: &History, key: &[u8], events: &[Event]) -> Result<(), String> {
    let k = show(key);
    let mut written: HashMap<&[u8], usize> = HashMap::new();
    let mut token_of: HashMap<&[u8], (u64, usize)> = HashMap::new();
    let mut value_of: HashMap<u64, (&[u8], usize)> = HashMap::new();
    for i in ops_of(events) {
        let o = &history.ops[i];
        if let Op::Set { value } | Op::Cas { value, .. } = &o.op
            && let Some(j) = written.insert(value, i)
        {
            return Err(format!(
                "key {k}: value {} written twice (#{j} and #{i}): the model names versions \
                 by value, so every write must be unique",
                show(value)
            ));
        }
        if let Some(Ret::Hit {
            value,
            cas: Some(t),
        }) = &o.ret
        {
            if let Some((t0, j)) = token_of.insert(value, (*t, i))
                && t0 != *t
            {
                return Err(format!(
                    "key {k}: one version, two tokens: #{j} read {} with CAS {t0}, #{i} with CAS {t}",
                    show(value)
                ));
            }
            if let Some((v0, j)) = value_of.insert(*t, (value, i))
                && v0 != value.as_slice()
            {
                return Err(format!(
                    "key {k}: one token, two versions: #{j} read {} with CAS {t}, #{i} read {}",
                    show(v0),
                    show(value)
                ));
            }
        }
    }
    for i in ops_of(events) {
        if let Some(Ret::Number(n)) = &history.ops[i].ret
            && let Some(j) = written.get(n.to_string().as_bytes())
        {
            return Err(format!(
                "key {k}: incr #{i} reached {n}, the value #{j} wrote: versions would be \
                 ambiguous (space numeric values further apart)"
            ));
        }
    }
    Ok(())
}

/// Whether the key's history is linearizable.
fn linearizable(history: &History, events: &[Event]) -> bool {
    prefix_linearizable(history, events, events.len())
}

/// Whether the first `cut` events of a key's history are linearizable, taking operations
/// that return later as never returning (prefix-closed: if a prefix fails, so does every
/// longer one).
fn prefix_linearizable(history: &History, events: &[Event], cut: usize) -> bool {
    let events = &events[..cut];
    let returned: std::collections::HashSet<usize> = events
        .iter()
        .filter_map(|e| match e {
            Event::Return(i) => Some(*i),
            Event::Invoke(_) => None,
        })
        .collect();
    // todc-utils pairs calls and returns per process: one process per operation, so that an
    // open operation's return can go at the end.
    let mut process: HashMap<usize, usize> = HashMap::new();
    let mut actions = Vec::new();
    let mut open = Vec::new();
    for e in events {
        match *e {
            Event::Invoke(i) => {
                let o = &history.ops[i];
                let done = returned.contains(&i);
                if !done && matches!(o.op, Op::Get | Op::Gets) {
                    continue; // a read that never returned observed nothing
                }
                let p = process.len();
                process.insert(i, p);
                let step = Step {
                    op: o.op.clone(),
                    ret: if done { o.ret.clone() } else { None },
                };
                actions.push((p, Action::Call(step.clone())));
                if !done {
                    open.push((p, Action::Response(step)));
                }
            }
            Event::Return(i) => {
                let o = &history.ops[i];
                let step = Step {
                    op: o.op.clone(),
                    ret: o.ret.clone(),
                };
                actions.push((process[&i], Action::Response(step)));
            }
        }
    }
    actions.extend(open);
    if actions.is_empty() {
        return true;
    }
    WGLChecker::<KeySpec>::is_linearizable(TodcHistory::from_actions(actions))
}

/// How many operations before the culprit a counterexample lists.
const CONTEXT: usize = 16;

/// The first return on the key that no order explains (binary search over prefixes, which
/// are prefix-closed), and the operations around it.
fn counterexample(history: &History, key: &[u8], events: &[Event]) -> String {
    let returns: Vec<usize> = (0..events.len())
        .filter(|&p| matches!(events[p], Event::Return(_)))
        .collect();
    let (mut lo, mut hi) = (0, returns.len().saturating_sub(1));
    while lo < hi {
        let mid = (lo + hi) / 2;
        if prefix_linearizable(history, events, returns[mid] + 1) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let Some(&cut) = returns.get(lo) else {
        return format!(
            "key {}: not linearizable (no operation returned)",
            show(key)
        );
    };
    let Event::Return(culprit) = events[cut] else {
        unreachable!("returns holds return events")
    };
    let mut out = format!(
        "key {}: not linearizable. No order of the operations explains what #{culprit} \
         returned (the first such return):\n  {}\nThe operations on the key before it \
         (the last {CONTEXT} that returned, and those that had not):\n",
        show(key),
        line(history, culprit)
    );
    // Operations called before the culprit returned: those still open at the cut, and the
    // last few that had returned.
    let called: Vec<usize> = ops_of(&events[..=cut]).collect();
    let finished_before: Vec<usize> = events[..cut]
        .iter()
        .filter_map(|e| match e {
            Event::Return(i) => Some(*i),
            Event::Invoke(_) => None,
        })
        .collect();
    let recent = &finished_before[finished_before.len().saturating_sub(CONTEXT)..];
    for i in called {
        let open = !finished_before.contains(&i);
        if i == culprit || open || recent.contains(&i) {
            let mark = if i == culprit { "  <- here" } else { "" };
            let _ = writeln!(out, "  {}{mark}", line(history, i));
        }
    }
    out
}

/// One operation as a report line.
fn line(history: &History, i: usize) -> String {
    let o = &history.ops[i];
    let when = match o.returned {
        Some(r) => format!("{}..{}", ms(o.invoked), ms(r)),
        None => format!("{}..", ms(o.invoked)),
    };
    let ret = match &o.ret {
        None => "? (no answer: may or may not have happened)".to_string(),
        Some(r) => show_ret(r),
    };
    format!(
        "#{i} client {} [{when}] {} -> {ret}",
        o.client,
        show_op(&o.op)
    )
}

/// A time since the history began, in milliseconds.
fn ms(d: Duration) -> String {
    format!("{:.1}ms", d.as_secs_f64() * 1000.0)
}

fn show_op(op: &Op) -> String {
    match op {
        Op::Set { value } => format!("set {}", show(value)),
        Op::Get => "get".into(),
        Op::Gets => "gets".into(),
        Op::Cas { read, token, value } => {
            format!(
                "cas {} (token {token}, read with {})",
                show(value),
                show(read)
            )
        }
        Op::Incr { delta } => format!("incr {delta}"),
        Op::Delete => "delete".into(),
    }
}

fn show_ret(ret: &Ret) -> String {
    match ret {
        Ret::Stored => "STORED".into(),
        Ret::Exists => "EXISTS".into(),
        Ret::NotFound => "NOT_FOUND".into(),
        Ret::Hit { value, cas: None } => format!("hit {}", show(value)),
        Ret::Hit {
            value,
            cas: Some(c),
        } => format!("hit {} cas {c}", show(value)),
        Ret::Miss => "miss".into(),
        Ret::Number(n) => n.to_string(),
        Ret::NonNumeric => "non-numeric".into(),
        Ret::Deleted => "DELETED".into(),
    }
}

/// Bytes as a quoted, escaped string, cut at 40 characters.
fn show(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let mut out: String = s.chars().take(40).collect();
    if s.chars().count() > 40 {
        out.push_str("...");
    }
    format!("{out:?}")
}

/// A soak's plan: how many rounds (`MEMKIT_LINEAR_ROUNDS`, else `default_rounds`) and the
/// first round's seed (`MEMKIT_LINEAR_SEED`, decimal or `0x` hex, else the clock). Round
/// `n` runs with seed `first + n`, so a failing round runs again from its printed seed.
pub fn soak_plan(default_rounds: u64) -> (u64, u64) {
    let env = |name: &str| {
        let v = std::env::var(name).ok()?;
        let v = v.trim();
        match v.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => v.parse().ok(),
        }
    };
    let rounds = env("MEMKIT_LINEAR_ROUNDS").unwrap_or(default_rounds);
    let first = env("MEMKIT_LINEAR_SEED").unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        t.map_or(0, |t| t.as_nanos() as u64)
    });
    (rounds, first)
}
