//! A ring worker's epoll, for light load: its connections then wait in epoll and read and
//! write by system call, as memcached's do, and the worker sleeps in `epoll_wait`.
//!
//! Why: a request that wakes a sleeping worker is answered sooner this way. The ring's
//! wake-up and deferred receive cost a few microseconds of the median more than epoll's
//! wake-up and a `read` (`docs/BENCHMARKS.md`, "Server: alternatives considered"), and at light load
//! nearly every request wakes the worker. Under load the ring wins: one `io_uring_enter` a
//! pass for the receives and sends of many connections, where epoll makes a `read` and a
//! `send` each. So the worker measures its load (how many connections a pass serves, over
//! [`WINDOW`] passes) and moves between the two; a connection follows at its next turn.
//!
//! While light, the ring still completes what it holds (receives armed before the move):
//! it signals an eventfd in this epoll. While busy, the worker waits in the ring, which
//! polls this epoll for the connections not moved yet. The worker's waker is watched both
//! here and by the ring ([`Light::new`] says why).

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use mio::{Events, Interest, Poll, Token};

use super::epoll::WAKE;
use super::ring::Ring;
use super::sock::Waker;

/// The ring's eventfd's token (connections' tokens are their slots, the waker's
/// `usize::MAX`).
pub(super) const RING: Token = Token(usize::MAX - 1);
/// Passes with input per load measurement.
const WINDOW: u32 = 256;
/// Connections with input per pass, on average over a window, at or above which a light
/// worker turns busy, in [`SUSTAINED`] windows in a row. Measured (30k requests a second
/// against 50 connections, the throughput bench's closed loop): 1.1-2.0 at that light load,
/// 4-35 in the closed loop.
const BUSY_AT: u32 = 3 * WINDOW;
/// Windows in a row over [`BUSY_AT`] that turn a light worker busy: a light load's requests
/// that pile up while the worker is off its core (a busy machine) must not move it, where a
/// load that fills the worker's passes stays.
const SUSTAINED: u8 = 4;
/// ... and under which a busy worker turns light again, in one window: the gap keeps a load
/// near the line from flapping.
const LIGHT_UNDER: u32 = 2 * WINDOW;

/// The epoll, the eventfd the ring signals into it, and the load measure.
pub(super) struct Light {
    pub poll: Poll,
    pub events: Events,
    /// Registered with the ring; never read (edge-triggered, each signal is a new edge).
    _signal: Waker,
    /// Connections wait here, not in the ring.
    pub on: bool,
    /// The waker's event came: new connections, or the stop.
    pub woke: bool,
    /// Connections registered here.
    pub polled: usize,
    /// The ring's poll on this epoll is armed.
    pub watched: bool,
    /// The next light pass must not sleep: completions the ring made before its signal was
    /// turned on are collected first.
    pub collect: bool,
    gauge: Gauge,
}

/// The load measure: connections with input per pass, over a window of passes.
#[derive(Debug, Default)]
struct Gauge {
    passes: u32,
    inputs: u32,
    /// Windows in a row over [`BUSY_AT`].
    over: u8,
}

impl Gauge {
    /// Counts a pass that served `inputs` connections with input (none: not counted) in a
    /// worker that is light (`on`) or not; `Some(light)` when the worker is to move.
    fn tally(&mut self, on: bool, inputs: usize) -> Option<bool> {
        if inputs == 0 {
            return None;
        }
        self.passes += 1;
        self.inputs = self.inputs.saturating_add(inputs as u32);
        if self.passes < WINDOW {
            return None;
        }
        let inputs = std::mem::take(&mut self.inputs);
        self.passes = 0;
        self.over = if inputs >= BUSY_AT {
            self.over.saturating_add(1)
        } else {
            0
        };
        match on {
            true if self.over >= SUSTAINED => {
                self.over = 0;
                Some(false)
            }
            false if inputs < LIGHT_UNDER => Some(true),
            _ => None,
        }
    }
}

impl std::fmt::Debug for Light {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Light")
            .field("on", &self.on)
            .field("polled", &self.polled)
            .finish_non_exhaustive()
    }
}

impl Light {
    /// An epoll for `ring`'s worker, with the ring's eventfd and the worker's `waker` in
    /// it. A worker starts light.
    ///
    /// The waker is watched here as well as by the ring: the ring's signal for a poll
    /// completed by an eventfd's write is deferred by the kernel (no eventfd is signalled
    /// from inside another's wake-up), and a worker asleep here must see new connections
    /// and its stop at once.
    pub fn new(ring: &mut Ring, waker: RawFd) -> io::Result<Light> {
        // An eventfd like the waker's, written by the kernel instead of another thread.
        let signal = Waker::new()?;
        let poll = Poll::new()?;
        let raw = signal.0.as_raw_fd();
        poll.registry()
            .register(&mut mio::unix::SourceFd(&raw), RING, Interest::READABLE)?;
        poll.registry()
            .register(&mut mio::unix::SourceFd(&waker), WAKE, Interest::READABLE)?;
        ring.register_eventfd(raw)?;
        ring.signal_eventfd(true);
        Ok(Light {
            poll,
            events: Events::with_capacity(256),
            _signal: signal,
            on: true,
            woke: false,
            polled: 0,
            watched: false,
            collect: false,
            gauge: Gauge::default(),
        })
    }

    pub fn fd(&self) -> RawFd {
        self.poll.as_raw_fd()
    }

    /// Counts a pass that served `inputs` connections with input; `Some(light)` when the
    /// worker is to move.
    pub fn tally(&mut self, inputs: usize) -> Option<bool> {
        self.gauge.tally(self.on, inputs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `windows` windows of passes of `per_pass` inputs; the moves asked for.
    fn feed(g: &mut Gauge, on: bool, per_pass: usize, windows: u32) -> Vec<bool> {
        (0..windows * WINDOW)
            .filter_map(|_| g.tally(on, per_pass))
            .collect()
    }

    #[test]
    fn the_gauge_turns_busy_on_a_sustained_load_and_light_at_once() {
        let mut g = Gauge::default();
        // Light at 1-2 connections a pass (the latency bench's load), busy from 3.
        assert!(feed(&mut g, true, 2, 3).is_empty());
        assert_eq!(feed(&mut g, true, 3, 8), [false; 2]);
        // Over the line for fewer windows in a row than it takes: no move.
        for _ in 0..3 {
            assert!(feed(&mut g, true, 3, 3).is_empty());
            assert!(feed(&mut g, true, 1, 1).is_empty());
        }
        // Busy stays busy down to 2, and turns light under it.
        assert!(feed(&mut g, false, 2, 3).is_empty());
        assert_eq!(feed(&mut g, false, 1, 2), [true; 2]);
        // Passes with no input (a wake-up for nothing) are not counted.
        assert!((0..10 * WINDOW).all(|_| g.tally(false, 0).is_none()));
        // A window counts on its average: one pass of 600 among ones is over the line.
        let mut g = Gauge::default();
        assert!(feed(&mut g, true, 3, 3).is_empty());
        assert_eq!(g.tally(true, 600), None);
        assert_eq!(feed(&mut g, true, 1, 1).last(), Some(&false));
    }
}
