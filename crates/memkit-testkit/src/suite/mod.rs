//! ONE behavioural conformance suite, written once against [`Memcache`].
//!
//! Every backend runs the same table: the model, the embedded engine, memkitd through the
//! client, and real memcached through the client. Each case is an async function over a
//! [`Ctx`] that hands out keys under a prefix unique to this run and this case, so several
//! runs may share one server. Cases that call `flush_all` run last.
//!
//! Time moves only through [`TimeControl`]: a [`ManualClock`] for in-process backends,
//! [`WallClock`] (sleeping) for servers. Expiry cases therefore ask for a few seconds in
//! total and tolerate memcached's one-second granularity, whose tick is not aligned with
//! the wall clock's: "TTL 2, still there at once, gone after 3 more seconds".

mod arith;
mod basic;
mod expiry;
mod limits;
mod meta;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use memkit_types::{Clock, Error, ManualClock, Memcache, SystemClock};

/// How a suite moves time for the backend under test.
pub trait TimeControl: Send + Sync {
    /// Lets `secs` seconds pass as far as the backend can tell.
    fn advance(&self, secs: u64) -> impl Future<Output = ()> + Send;
    /// The backend's current Unix time in seconds (for absolute expiry times).
    fn now_unix(&self) -> u64;
    /// Whether cases may run interleaved. Only when time passes by itself: with a manual
    /// clock one case's `advance` would age another case's items.
    fn interleave_cases(&self) -> bool {
        false
    }
}

impl TimeControl for ManualClock {
    fn advance(&self, secs: u64) -> impl Future<Output = ()> + Send {
        ManualClock::advance(self, secs);
        std::future::ready(())
    }
    fn now_unix(&self) -> u64 {
        self.now_secs()
    }
}

/// Real time, for a backend behind a socket: `advance` sleeps on the tokio timer, so the
/// suite must run inside a tokio runtime with time enabled.
#[derive(Debug, Clone, Copy, Default)]
pub struct WallClock;

impl TimeControl for WallClock {
    fn advance(&self, secs: u64) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(std::time::Duration::from_secs(secs))
    }
    fn now_unix(&self) -> u64 {
        SystemClock.now_secs()
    }
    fn interleave_cases(&self) -> bool {
        true
    }
}

/// Why a case failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure(pub String);

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure(format!("unexpected error: {e:?}"))
    }
}

impl From<String> for Failure {
    fn from(s: String) -> Self {
        Failure(s)
    }
}

type CaseResult = Result<(), Failure>;
type CaseFuture<'a> = Pin<Box<dyn Future<Output = CaseResult> + Send + 'a>>;

/// Which memcached release a case needs. memcached 1.6.18 (Debian 12) lacks `E`, `md x`
/// and `ms` append-vivify; newer releases and memkit have them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Needs {
    /// Anything memcached 1.6 does.
    Base,
    /// Meta flags newer than 1.6.18: `E` (explicit CAS), `md ... x`, `ms ... MA N`.
    NewerMeta,
}

/// One named case.
pub struct Case<M, T> {
    /// Stable name, also the key prefix.
    pub name: &'static str,
    /// What the backend must support.
    pub needs: Needs,
    /// Whether the case calls `flush_all` (and so runs last).
    pub flushes: bool,
    run: for<'a> fn(&'a Ctx<'a, M, T>) -> CaseFuture<'a>,
}

impl<M, T> fmt::Debug for Case<M, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Case")
            .field("name", &self.name)
            .field("needs", &self.needs)
            .field("flushes", &self.flushes)
            .finish()
    }
}

/// What a case sees: the backend, time, and its own key space.
#[derive(Debug)]
pub struct Ctx<'a, M, T> {
    /// The backend under test.
    pub store: &'a M,
    /// Time control for the backend.
    pub time: &'a T,
    prefix: String,
}

impl<M, T> Ctx<'_, M, T> {
    /// A key unique to this run and case.
    pub fn key(&self, suffix: &str) -> Vec<u8> {
        format!("{}:{}", self.prefix, suffix).into_bytes()
    }
}

/// Which cases to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteOptions {
    /// Skip cases that need more than this (e.g. [`Needs::Base`] for memcached 1.6.18).
    pub max_needs: Needs,
    /// Run the `flush_all` cases (they wipe the whole backend).
    pub flush: bool,
    /// Run only cases whose name contains this.
    pub filter: Option<String>,
}

impl Default for SuiteOptions {
    fn default() -> Self {
        SuiteOptions {
            max_needs: Needs::NewerMeta,
            flush: true,
            filter: None,
        }
    }
}

/// The outcome of a suite run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Names of the cases that passed.
    pub passed: Vec<&'static str>,
    /// Names of the failed cases with what went wrong.
    pub failed: Vec<(&'static str, String)>,
    /// Names of the cases not run (by [`SuiteOptions`]).
    pub skipped: Vec<&'static str>,
}

impl Report {
    /// Panics listing every failure, if there is one.
    pub fn assert_all_passed(&self) {
        if !self.failed.is_empty() {
            panic!("{self}");
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} passed, {} failed, {} skipped",
            self.passed.len(),
            self.failed.len(),
            self.skipped.len()
        )?;
        for (name, msg) in &self.failed {
            writeln!(f, "FAILED {name}: {msg}")?;
        }
        Ok(())
    }
}

/// Runs every case against `store`. See [`run_with`].
pub async fn run<M: Memcache, T: TimeControl>(store: &M, time: &T) -> Report {
    run_with(store, time, &SuiteOptions::default()).await
}

/// Runs the cases `opts` selects, one after another, `flush_all` cases last.
pub async fn run_with<M: Memcache, T: TimeControl>(
    store: &M,
    time: &T,
    opts: &SuiteOptions,
) -> Report {
    let run_id: u32 = rand::random();
    let mut cases = cases::<M, T>();
    // Stable sort: table order within each group.
    cases.sort_by_key(|c| c.flushes);
    let mut report = Report::default();
    let mut selected = Vec::new();
    for case in &cases {
        let wanted = case.needs <= opts.max_needs
            && (opts.flush || !case.flushes)
            && opts.filter.as_deref().is_none_or(|f| case.name.contains(f));
        if wanted {
            let cx = Ctx {
                store,
                time,
                prefix: format!("mkt{run_id:08x}:{}", case.name),
            };
            selected.push((case, cx));
        } else {
            report.skipped.push(case.name);
        }
    }
    let mut record = |name, result| match result {
        Ok(()) => report.passed.push(name),
        Err(Failure(msg)) => report.failed.push((name, msg)),
    };
    let (flushing, independent): (Vec<_>, Vec<_>) = selected.iter().partition(|(c, _)| c.flushes);
    if time.interleave_cases() {
        // With real time the sleeps overlap: the whole table takes about as long as its
        // slowest case instead of the sum of them.
        let futures = independent.iter().map(|(c, cx)| (c.run)(cx)).collect();
        for ((case, _), result) in independent.iter().zip(JoinAll::new(futures).await) {
            record(case.name, result);
        }
    } else {
        for (case, cx) in &independent {
            record(case.name, (case.run)(cx).await);
        }
    }
    for (case, cx) in &flushing {
        record(case.name, (case.run)(cx).await);
    }
    report
}

/// Polls every case future until all are done (no executor-specific join needed).
struct JoinAll<'a> {
    futures: Vec<Option<CaseFuture<'a>>>,
    results: Vec<Option<CaseResult>>,
}

impl<'a> JoinAll<'a> {
    fn new(futures: Vec<CaseFuture<'a>>) -> Self {
        let results = futures.iter().map(|_| None).collect();
        JoinAll {
            futures: futures.into_iter().map(Some).collect(),
            results,
        }
    }
}

impl Future for JoinAll<'_> {
    type Output = Vec<CaseResult>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        for (slot, result) in this.futures.iter_mut().zip(this.results.iter_mut()) {
            if let Some(fut) = slot
                && let Poll::Ready(r) = fut.as_mut().poll(cx)
            {
                *result = Some(r);
                *slot = None;
            }
        }
        if this.futures.iter().all(Option::is_none) {
            Poll::Ready(
                this.results
                    .iter_mut()
                    .map(|r| r.take().expect("done"))
                    .collect(),
            )
        } else {
            Poll::Pending
        }
    }
}

/// The whole table.
pub fn cases<M: Memcache, T: TimeControl>() -> Vec<Case<M, T>> {
    let mut all = Vec::new();
    all.extend(basic::cases());
    all.extend(arith::cases());
    all.extend(expiry::cases());
    all.extend(limits::cases());
    all.extend(meta::cases());
    all
}

/// Fails the case unless `cond` holds.
macro_rules! check {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err($crate::suite::Failure(format!(
                "line {}: {}", line!(), format!($($msg)+)
            )));
        }
    };
}

/// Fails the case unless the two sides are equal.
macro_rules! check_eq {
    ($left:expr, $right:expr $(,)?) => {
        match (&$left, &$right) {
            (l, r) => {
                if l != r {
                    return Err($crate::suite::Failure(format!(
                        "line {}: `{}` = {:?}, expected {:?}",
                        line!(),
                        stringify!($left),
                        l,
                        r
                    )));
                }
            }
        }
    };
}

/// Declares a table of cases: `name [needs] [flushes] => |cx| { body }`.
macro_rules! case_table {
    ($( $name:ident $(@$needs:ident)? $(#$flush:ident)? => |$cx:ident| $body:block )*) => {
        pub(super) fn cases<M: memkit_types::Memcache, T: $crate::suite::TimeControl>()
            -> Vec<$crate::suite::Case<M, T>> {
            vec![$(
                $crate::suite::Case::new(
                    stringify!($name),
                    case_table!(@needs $($needs)?),
                    case_table!(@flush $($flush)?),
                    {
                        fn run<'a, M: memkit_types::Memcache, T: $crate::suite::TimeControl>(
                            $cx: &'a $crate::suite::Ctx<'a, M, T>,
                        ) -> $crate::suite::CaseFuture<'a> {
                            Box::pin(async move {
                                #[allow(unused_imports)]
                                use memkit_types::Memcache as _;
                                #[allow(unused_imports)]
                                use $crate::suite::TimeControl as _;
                                $body
                                #[allow(unreachable_code)]
                                Ok(())
                            })
                        }
                        run::<M, T>
                    },
                ),
            )*]
        }
    };
    (@needs) => { $crate::suite::Needs::Base };
    (@needs $n:ident) => { $crate::suite::Needs::$n };
    (@flush) => { false };
    (@flush $f:ident) => { true };
}

pub(crate) use {case_table, check, check_eq};

impl<M, T> Case<M, T> {
    fn new(
        name: &'static str,
        needs: Needs,
        flushes: bool,
        run: for<'a> fn(&'a Ctx<'a, M, T>) -> CaseFuture<'a>,
    ) -> Self {
        Case {
            name,
            needs,
            flushes,
            run,
        }
    }
}
