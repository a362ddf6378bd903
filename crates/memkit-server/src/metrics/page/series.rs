//! The last 15 minutes, once a second: a ring buffer of `stats` counters the sampler fills,
//! served as per-second rates. 901 points of 18 integers: about 150 KiB whatever the
//! traffic.

use std::collections::VecDeque;

use super::Stats;
use super::json::Json;

/// Points kept: 15 minutes of rates need one point more than their seconds.
pub const POINTS: usize = 15 * 60 + 1;

/// What each point holds, in order: the name the page knows it by, and how it is read
/// from `stats`. Counters become rates; the last three are gauges.
const FIELDS: [(&str, Read); 18] = [
    ("get", Read::One("cmd_get")),
    ("set", Read::One("cmd_set")),
    ("delete", Read::Sum(&["delete_hits", "delete_misses"])),
    ("incr", Read::Sum(&["incr_hits", "incr_misses"])),
    ("decr", Read::Sum(&["decr_hits", "decr_misses"])),
    ("cas", Read::Sum(&["cas_hits", "cas_misses", "cas_badval"])),
    ("touch", Read::One("cmd_touch")),
    ("flush", Read::One("cmd_flush")),
    ("hits", Read::One("get_hits")),
    ("misses", Read::One("get_misses")),
    ("evictions", Read::One("evictions")),
    // Dead items (expired or flushed) whose memory was taken back.
    ("expired", Read::One("reclaimed")),
    ("bytes_read", Read::One("bytes_read")),
    ("bytes_written", Read::One("bytes_written")),
    ("total_connections", Read::One("total_connections")),
    ("conns", Read::One("curr_connections")),
    ("items", Read::One("curr_items")),
    ("bytes", Read::One("bytes")),
];
/// The first gauge of [`FIELDS`].
const GAUGES: usize = 15;
/// The rates of commands (a stacked chart on the page): [`FIELDS`]' first eight.
const COMMANDS: usize = 8;

#[derive(Debug, Clone, Copy)]
enum Read {
    One(&'static str),
    Sum(&'static [&'static str]),
}

#[derive(Debug, Clone)]
struct Point {
    seq: u64,
    /// Unix time of the sample, in seconds.
    unix: u64,
    /// Seconds since the dashboard started (monotonic), for the rates.
    secs: f64,
    values: [u64; FIELDS.len()],
}

/// The ring buffer.
#[derive(Debug, Default)]
pub struct Series {
    points: VecDeque<Point>,
    next_seq: u64,
}

impl Series {
    /// Adds a sample taken `secs` after the dashboard started, dropping the oldest past
    /// [`POINTS`].
    pub fn push(&mut self, secs: f64, st: &Stats) {
        let values = FIELDS.map(|(_, read)| match read {
            Read::One(name) => st.u(name),
            Read::Sum(names) => names.iter().map(|n| st.u(n)).sum(),
        });
        if self.points.len() == POINTS {
            self.points.pop_front();
        }
        self.next_seq += 1;
        self.points.push_back(Point {
            seq: self.next_seq,
            unix: st.u("time"),
            secs,
            values,
        });
    }

    /// Points held.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Whether no sample was taken yet.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Writes the rates after point `since` (every one held without it) as columns:
    /// `{"seq": last, "t": [unix...], "get": [per second...], ..., "hit_ratio": [...]}`.
    /// A rate is over the second before its point; a counter that went down (`stats
    /// reset`) gives 0. `hit_ratio` is hits over gets of that second, `null` without any.
    pub fn write(&self, since: Option<u64>, j: &mut Json) {
        let pairs: Vec<(&Point, &Point)> = self
            .points
            .iter()
            .zip(self.points.iter().skip(1))
            .filter(|(_, p)| since.is_none_or(|s| p.seq > s))
            .collect();
        j.open();
        j.field_u("seq", self.points.back().map_or(0, |p| p.seq));
        j.key("t").open_array();
        for (_, p) in &pairs {
            j.u(p.unix);
        }
        j.close_array();
        for (i, (name, _)) in FIELDS.iter().enumerate() {
            j.key(name).open_array();
            for (a, b) in &pairs {
                if i >= GAUGES {
                    j.u(b.values[i]);
                } else {
                    j.f(Some(rate(a, b, i)));
                }
            }
            j.close_array();
        }
        j.key("hit_ratio").open_array();
        for (a, b) in &pairs {
            let (hits, misses) = (rate(a, b, 8), rate(a, b, 9));
            j.f((hits + misses > 0.0).then(|| hits / (hits + misses)));
        }
        j.close_array();
        j.key("commands").open_array();
        for (name, _) in &FIELDS[..COMMANDS] {
            j.s(name);
        }
        j.close_array();
        j.close();
    }
}

/// Field `i` per second between points `a` and `b`.
fn rate(a: &Point, b: &Point, i: usize) -> f64 {
    let dt = (b.secs - a.secs).max(1e-3);
    let d = b.values[i].saturating_sub(a.values[i]) as f64 / dt;
    // Two decimals are what a chart can show.
    (d * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(pairs: &[(&str, u64)]) -> Stats {
        Stats(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    /// Rates are deltas over the seconds between samples; a reset counter gives 0; the
    /// buffer holds 15 minutes and no more; `since` returns only newer points.
    #[test]
    fn rates_between_samples_within_fifteen_minutes() {
        let mut s = Series::default();
        let at = |get: u64, hits: u64, misses: u64| {
            stats(&[
                ("cmd_get", get),
                ("get_hits", hits),
                ("get_misses", misses),
                ("curr_connections", 7),
                ("time", 1000 + get),
            ])
        };
        s.push(0.0, &at(0, 0, 0));
        s.push(2.0, &at(10, 6, 4));
        s.push(3.0, &at(5, 6, 4));
        let mut j = Json::new();
        s.write(None, &mut j);
        let text = j.finish();
        assert!(text.contains(r#""get":[5,0]"#), "{text}");
        assert!(text.contains(r#""hit_ratio":[0.6,null]"#), "{text}");
        assert!(text.contains(r#""conns":[7,7]"#), "{text}");
        assert!(text.starts_with(r#"{"seq":3,"t":[1010,1005]"#), "{text}");
        let mut j = Json::new();
        s.write(Some(2), &mut j);
        assert!(j.finish().contains(r#""get":[0]"#));
        for i in 0..2000 {
            s.push(4.0 + f64::from(i), &at(0, 0, 0));
        }
        assert_eq!(s.len(), POINTS);
    }
}
