//! A job's commands through the routes.
//!
//! Order: a client's pipelined requests must reach each server in the order it sent them.
//! The job is cut into runs of consecutive commands taking the same route; runs go one
//! after another. Within a run each server gets its commands as one pipeline on one
//! connection ([`memkit_client::Client::pipeline`]), every server at once. A replicated
//! route goes further: its reads and its writes form runs of their own, since a read goes to
//! one server and a write to all.
//!
//! What each route kind does is in `docs/router.md`; here, how:
//! - hash: the key's server in the pool; with a gutter, a command its server could not
//!   take (refused, timed out, marked down) goes to the gutter pool, a store's expiry capped
//!   at the gutter's TTL;
//! - failover: the first pool, then the commands that failed (or, with `on_miss`, the
//!   reads that missed) to the next, and so on; the gutter after the last;
//! - all-*: writes to every server of the pool at once, the reply once as many answered as
//!   the route waits for (the rest finish in the background); reads from the key's server,
//!   then the next servers of its ring walk on a failure;
//! - warm-up: reads from the cold pool, a miss read from the warm pool and, if found there,
//!   added to the cold one in the background;
//! - shadow: the chosen fraction of keys sent to the shadow pool as well, in the
//!   background, replies dropped.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use memkit_client::Outcome;
use memkit_types::{Error, Exptime, Result, StoreMode, StoreOptions, StoreOutcome};

use super::config::{Kind, RouteSpec, Wait, class};
use super::pool::Pool;
use super::{Counters, Op, OpKind, Table, split};

type Outcomes = Vec<Result<Outcome>>;

/// Carries out `ops` by `table`'s routes; the outcomes are aligned with `ops`.
pub async fn run(table: &Arc<Table>, c: &Arc<Counters>, ops: Vec<Op>) -> Outcomes {
    let mut out = Vec::with_capacity(ops.len());
    let mut at = 0;
    while at < ops.len() {
        if let OpKind::Flush(_) = ops[at].kind {
            out.push(flush(table, &ops[at]).await);
            at += 1;
            continue;
        }
        let r = table.route_of(&ops[at]);
        let len = 1 + ops[at + 1..]
            .iter()
            .take_while(|o| !matches!(o.kind, OpKind::Flush(_)) && table.route_of(o) == r)
            .count();
        let run = &ops[at..at + len];
        match r {
            None => {
                c.unrouted.fetch_add(len as u64, Relaxed);
                let e = Error::Server("no route for this key".into());
                out.extend(run.iter().map(|_| Err(e.clone())));
            }
            Some(i) => {
                let spec = &table.routes[i];
                if let Some((pool, fraction)) = &spec.shadow {
                    shadow(table.pool(pool), *fraction, run, c);
                }
                match spec.split_above {
                    Some(limit) => out.extend(splitting(table, c, spec, limit, run).await),
                    None => out.extend(route(table, c, spec, run).await),
                }
            }
        }
        at += len;
    }
    out
}

/// `run` through route `spec`, which splits values above `limit` bytes (`super::split`):
/// the big stores' chunks first, then every command with the big stores' index records in
/// their place, then the chunks of the indexes the reads found.
async fn splitting(
    table: &Table,
    c: &Counters,
    spec: &RouteSpec,
    limit: usize,
    run: &[Op],
) -> Outcomes {
    let mut out: Vec<Option<Result<Outcome>>> = vec![None; run.len()];
    let (mut chunks, mut owners, mut ops) = (Vec::new(), Vec::new(), Vec::new());
    for (i, op) in run.iter().enumerate() {
        if let Some(e) = split::refused(op) {
            out[i] = Some(Err(e));
            continue;
        }
        match split::split(op, limit) {
            Some(s) => {
                owners.extend(std::iter::repeat_n(i, s.chunks.len()));
                chunks.extend(s.chunks);
                ops.push((i, s.index));
            }
            None => ops.push((i, op.clone())),
        }
    }
    if !chunks.is_empty() {
        let stored = route(table, c, spec, &chunks).await;
        for (r, &i) in stored.iter().zip(&owners) {
            let ok = matches!(r, Ok(Outcome::Stored(s)) if s.outcome == StoreOutcome::Stored);
            if !ok && out[i].is_none() {
                let why = r
                    .as_ref()
                    .err()
                    .map_or_else(String::new, |e| format!(": {e}"));
                out[i] = Some(Err(Error::Server(format!(
                    "a chunk of the value was not stored{why}"
                ))));
            }
        }
    }
    ops.retain(|(i, _)| out[*i].is_none());
    let sent: Vec<Op> = ops.iter().map(|(_, o)| o.clone()).collect();
    let results = route(table, c, spec, &sent).await;
    let (mut reads, mut joins) = (Vec::new(), Vec::new());
    for ((i, op), r) in ops.iter().zip(results) {
        if let (OpKind::Get(g), Ok(Outcome::Item(Some(item)))) = (&op.kind, &r)
            && let Some(index) = split::Index::of(item)
        {
            let start = reads.len();
            reads.extend(index.reads(&op.key, g));
            joins.push((*i, index, item.clone(), start..reads.len()));
            continue;
        }
        out[*i] = Some(r);
    }
    if !reads.is_empty() {
        let got = route(table, c, spec, &reads).await;
        for (i, index, item, range) in joins {
            out[i] = Some(index.join(item, &got[range]));
        }
    }
    out.into_iter()
        .map(|o| o.unwrap_or_else(|| Err(Error::Server("no outcome".into()))))
        .collect()
}

/// `run` through route `spec`.
async fn route(table: &Table, c: &Counters, spec: &RouteSpec, run: &[Op]) -> Outcomes {
    let mut out = match &spec.kind {
        Kind::Hash { pool } => hash(table.pool(pool), run).await,
        Kind::Failover { pools, on_miss } => failover(table, c, pools, *on_miss, run).await,
        Kind::All { pool, wait } => all(table.pool(pool), *wait, run).await,
        Kind::WarmUp {
            cold,
            warm,
            exptime,
        } => warm_up(table.pool(cold), table.pool(warm), *exptime, c, run).await,
    };
    if let Some((gutter, ttl)) = &spec.gutter {
        let failed = failed_at(&out, |_| true);
        if !failed.is_empty() {
            c.gutter.fetch_add(failed.len() as u64, Relaxed);
            let ops: Vec<Op> = failed.iter().map(|&i| capped(&run[i], *ttl)).collect();
            let again = hash(table.pool(gutter), &ops).await;
            for (i, r) in failed.into_iter().zip(again) {
                out[i] = r;
            }
        }
    }
    out
}

/// Indices of the commands whose server could not take them (and that `also` allows).
fn failed_at(out: &Outcomes, also: impl Fn(usize) -> bool) -> Vec<usize> {
    (0..out.len())
        .filter(|&i| out[i].as_ref().is_err_and(Error::is_unavailable) && also(i))
        .collect()
}

/// Sends each command to its key's server in `pool`: one pipeline a server, all at once.
pub async fn hash(pool: &Arc<Pool>, ops: &[Op]) -> Outcomes {
    if let [op] = ops {
        // One command (a connection at depth 1): no lists to place it.
        return pool
            .pipeline(pool.server_for(&op.key), &[op.command()])
            .await;
    }
    let servers = pool.servers_of(&keys_of(ops));
    by_server(pool, ops, &servers).await
}

/// The ops' keys.
fn keys_of(ops: &[Op]) -> Vec<&[u8]> {
    ops.iter().map(|o| &o.key[..]).collect()
}

/// Sends `ops[i]` to server `servers[i]` of `pool`, each server's commands in order.
async fn by_server(pool: &Arc<Pool>, ops: &[Op], servers: &[usize]) -> Outcomes {
    if ops.is_empty() {
        return Vec::new();
    }
    if servers.iter().all(|&s| s == servers[0]) {
        let cmds: Vec<_> = ops.iter().map(Op::command).collect();
        return pool.pipeline(servers[0], &cmds).await;
    }
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, &s) in servers.iter().enumerate() {
        match groups.iter_mut().find(|(g, _)| *g == s) {
            Some((_, idx)) => idx.push(i),
            None => groups.push((s, vec![i])),
        }
    }
    // Every server's pipeline at once, on this task: the job's task is already off the
    // client's worker, and a spawn a server would cost a task each.
    let pipelines = groups.iter().map(|(s, idx)| async move {
        let cmds: Vec<_> = idx.iter().map(|&i| ops[i].command()).collect();
        pool.pipeline(*s, &cmds).await
    });
    let results = futures_util::future::join_all(pipelines).await;
    let mut out: Vec<Option<Result<Outcome>>> = vec![None; ops.len()];
    for ((_, idx), res) in groups.iter().zip(results) {
        for (&i, r) in idx.iter().zip(res) {
            out[i] = Some(r);
        }
    }
    out.into_iter()
        .map(|o| o.unwrap_or_else(|| Err(Error::Server("no reply".into()))))
        .collect()
}

/// The failover route: see the module docs.
async fn failover(
    table: &Table,
    c: &Counters,
    pools: &[String],
    on_miss: bool,
    run: &[Op],
) -> Outcomes {
    let mut out = hash(table.pool(&pools[0]), run).await;
    for next in &pools[1..] {
        let miss = |i: usize| {
            on_miss
                && matches!(run[i].kind, OpKind::Get(_))
                && matches!(out[i], Ok(Outcome::Item(None)))
        };
        let again: Vec<usize> = (0..run.len())
            .filter(|&i| out[i].as_ref().is_err_and(Error::is_unavailable) || miss(i))
            .collect();
        if again.is_empty() {
            break;
        }
        c.failovers.fetch_add(again.len() as u64, Relaxed);
        let ops: Vec<Op> = again.iter().map(|&i| run[i].clone()).collect();
        let res = hash(table.pool(next), &ops).await;
        for (i, r) in again.into_iter().zip(res) {
            // A miss stays a miss when the next pool fails.
            if r.is_ok() || out[i].is_err() {
                out[i] = r;
            }
        }
    }
    out
}

/// A replicated pool: reads and writes in runs of their own, in order.
async fn all(pool: &Arc<Pool>, wait: Wait, run: &[Op]) -> Outcomes {
    let mut out = Vec::with_capacity(run.len());
    let mut at = 0;
    while at < run.len() {
        let writes = run[at].writes();
        let len = run[at..]
            .iter()
            .take_while(|o| o.writes() == writes)
            .count();
        let part = &run[at..at + len];
        match writes {
            true => out.extend(write_all(pool, wait, part).await),
            false => out.extend(read_any(pool, part).await),
        }
        at += len;
    }
    out
}

/// Reads from each key's server, then from the next servers of its ring walk while the
/// one tried could not answer.
async fn read_any(pool: &Arc<Pool>, ops: &[Op]) -> Outcomes {
    let n = pool.servers.len();
    let walks: Vec<Vec<usize>> = ops.iter().map(|o| pool.servers_for(&o.key, n)).collect();
    let first: Vec<usize> = walks.iter().map(|w| w[0]).collect();
    let mut out = by_server(pool, ops, &first).await;
    for step in 1..n {
        let again = failed_at(&out, |i| walks[i].len() > step);
        if again.is_empty() {
            break;
        }
        let sub: Vec<Op> = again.iter().map(|&i| ops[i].clone()).collect();
        let servers: Vec<usize> = again.iter().map(|&i| walks[i][step]).collect();
        let res = by_server(pool, &sub, &servers).await;
        for (i, r) in again.into_iter().zip(res) {
            out[i] = r;
        }
    }
    out
}

/// Writes to every server of the pool, and answers once the route's wait is over.
async fn write_all(pool: &Arc<Pool>, wait: Wait, ops: &[Op]) -> Outcomes {
    let n = pool.servers.len();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for s in 0..n {
        let (pool, tx, mine) = (pool.clone(), tx.clone(), ops.to_vec());
        // Spawned, not joined: servers a reply does not wait for still get the writes.
        tokio::spawn(async move {
            let cmds: Vec<_> = mine.iter().map(Op::command).collect();
            let _ = tx.send((s, pool.pipeline(s, &cmds).await));
        });
    }
    drop(tx);
    let homes = pool.servers_of(&keys_of(ops));
    let need = match wait {
        Wait::Sync => n,
        Wait::Majority => n / 2 + 1,
        Wait::Fastest | Wait::Async => 1,
    };
    let mut got: Vec<Option<Outcomes>> = vec![None; n];
    let ok_count =
        |got: &[Option<Outcomes>], j: usize| got.iter().flatten().filter(|r| r[j].is_ok()).count();
    let mut finished = 0;
    while let Some((s, res)) = rx.recv().await {
        got[s] = Some(res);
        finished += 1;
        let settled = |j: usize| match wait {
            Wait::Async => got[homes[j]].is_some(),
            _ => {
                let ok = ok_count(&got, j);
                ok >= need || finished - ok > n - need
            }
        };
        if finished == n || (0..ops.len()).all(settled) {
            break;
        }
    }
    (0..ops.len())
        .map(|j| {
            let ok = ok_count(&got, j);
            let home = got[homes[j]].as_ref().map(|r| &r[j]);
            if let Some(Err(e)) = home.filter(|_| wait == Wait::Async) {
                return Err(e.clone());
            }
            if ok < need && wait != Wait::Async {
                let e = got.iter().flatten().find_map(|r| r[j].as_ref().err());
                let why = e.map_or_else(String::new, |e| format!(": {e}"));
                return Err(Error::Server(format!(
                    "fewer than {need} of {n} servers took it{why}"
                )));
            }
            match home {
                Some(Ok(o)) => Ok(o.clone()),
                _ => got
                    .iter()
                    .flatten()
                    .find_map(|r| r[j].clone().ok())
                    .ok_or(Error::NoServer),
            }
        })
        .collect()
}

/// The warm-up route: see the module docs.
async fn warm_up(
    cold: &Arc<Pool>,
    warm: &Arc<Pool>,
    exptime: u32,
    c: &Counters,
    run: &[Op],
) -> Outcomes {
    let mut out = Vec::with_capacity(run.len());
    let mut at = 0;
    while at < run.len() {
        let plain_read =
            |o: &Op| matches!(&o.kind, OpKind::Get(g) if g.touch.is_none() && g.vivify.is_none());
        let reads = plain_read(&run[at]);
        let len = run[at..]
            .iter()
            .take_while(|o| plain_read(o) == reads)
            .count();
        let part = &run[at..at + len];
        at += len;
        if !reads {
            let deletes: Vec<Op> = part
                .iter()
                .filter(|o| matches!(o.kind, OpKind::Delete(_)))
                .cloned()
                .collect();
            // Deleted from the warm pool too, or a later miss would fill the old value back.
            let (res, _) = tokio::join!(hash(cold, part), hash(warm, &deletes));
            out.extend(res);
            continue;
        }
        let mut res = hash(cold, part).await;
        let missed: Vec<usize> = (0..part.len())
            .filter(|&i| matches!(res[i], Ok(Outcome::Item(None))))
            .collect();
        if !missed.is_empty() {
            let ops: Vec<Op> = missed.iter().map(|&i| part[i].clone()).collect();
            let found = hash(warm, &ops).await;
            let mut fills = Vec::new();
            for (i, r) in missed.into_iter().zip(found) {
                if let Ok(Outcome::Item(Some(item))) = &r {
                    let mut opts =
                        StoreOptions::new(StoreMode::Add, item.flags, Exptime(i64::from(exptime)));
                    opts.cas = None;
                    fills.push(Op {
                        key: part[i].key.clone(),
                        data: item.value.clone(),
                        kind: OpKind::Store(opts),
                    });
                    res[i] = r;
                }
            }
            if !fills.is_empty() {
                c.warmed.fetch_add(fills.len() as u64, Relaxed);
                let cold = cold.clone();
                tokio::spawn(async move { hash(&cold, &fills).await });
            }
        }
        out.extend(res);
    }
    out
}

/// Sends the shadowed fraction of `run` to `pool` in the background.
fn shadow(pool: &Arc<Pool>, fraction: f64, run: &[Op], c: &Counters) {
    let picked: Vec<Op> = run
        .iter()
        .filter(|o| f64::from(pool.placement.key_hash(&o.key) % 10_000) < fraction * 10_000.0)
        .cloned()
        .collect();
    if picked.is_empty() {
        return;
    }
    c.shadowed.fetch_add(picked.len() as u64, Relaxed);
    let pool = pool.clone();
    tokio::spawn(async move { hash(&pool, &picked).await });
}

/// `flush_all` to every server of every pool the routes that take it use.
async fn flush(table: &Table, op: &Op) -> Result<Outcome> {
    let mut names: Vec<&str> = Vec::new();
    for r in table
        .routes
        .iter()
        .filter(|r| r.classes & class::FLUSH != 0)
    {
        match &r.kind {
            Kind::Hash { pool } | Kind::All { pool, .. } => names.push(pool),
            Kind::Failover { pools, .. } => names.extend(pools.iter().map(String::as_str)),
            Kind::WarmUp { cold, warm, .. } => names.extend([cold.as_str(), warm.as_str()]),
        }
    }
    names.sort_unstable();
    names.dedup();
    let mut tasks = Vec::new();
    for name in names {
        let pool = table.pool(name);
        for s in 0..pool.servers.len() {
            let (pool, op) = (pool.clone(), op.clone());
            tasks.push(tokio::spawn(async move {
                pool.pipeline(s, &[op.command()]).await.remove(0)
            }));
        }
    }
    let mut first_err = None;
    for t in tasks {
        let r = t
            .await
            .unwrap_or_else(|e| Err(Error::Server(format!("router task: {e}"))));
        if let Err(e) = r {
            first_err.get_or_insert(e);
        }
    }
    match first_err {
        None => Ok(Outcome::Flushed),
        Some(e) => Err(e),
    }
}

/// `op` for a gutter pool: a store's or touch's expiry at most `ttl` seconds.
fn capped(op: &Op, ttl: u32) -> Op {
    let cap = |e: Exptime| match e.0 {
        e if e < 0 => Exptime(e),
        e if e == 0 || e > i64::from(ttl) => Exptime(i64::from(ttl)),
        e => Exptime(e),
    };
    let mut op = op.clone();
    match &mut op.kind {
        OpKind::Store(o) => o.exptime = cap(o.exptime),
        OpKind::Touch(e) => *e = cap(*e),
        OpKind::Get(g) => g.touch = g.touch.map(cap),
        _ => {}
    }
    op
}
