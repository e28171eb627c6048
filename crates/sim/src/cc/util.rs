//! Small pieces several CCAs share: Linux's jiffies clock at the
//! connection's CONFIG_HZ and sequence-number helpers from include/net/tcp.h.
//! The algorithms that draw random numbers (BBR's ProbeBW phase, BBRv3's
//! probe wait, NV's min-RTT reset period) use `netcore::rng::Rng`, the one
//! generator of the simulator, seeded per flow.

use super::{CaState, Conn};

/// `tcp_jiffies32` / `jiffies` from the connection clock, at the modelled
/// kernel's CONFIG_HZ (`Conn::hz`, `[tcp] kernel_hz`, 1000 by default).
/// Linux's BBR (v1 and v3), BIC, CUBIC (epoch), H-TCP, NV and Westwood keep
/// time in jiffies; the others use µs stamps (`tcp_mstamp`, `rtt_us`).
pub fn jiffies(c: &Conn) -> u64 {
    jiffies_at(c, c.now_us)
}

/// The jiffies count at `us` on the connection clock (e.g. `tp->lsndtime`).
pub fn jiffies_at(c: &Conn, us: u64) -> u64 {
    jiffies_at_hz(us, c.hz)
}

/// `usecs_to_jiffies`: rounds up, like the kernel.
pub fn usecs_to_jiffies(c: &Conn, us: u64) -> u64 {
    usecs_to_jiffies_hz(us, c.hz)
}

/// The jiffies count at `us` at CONFIG_HZ `hz`, for code that keeps no
/// `Conn` (the receiver).
#[inline]
pub fn jiffies_at_hz(us: u64, hz: u64) -> u64 {
    us * hz / 1_000_000
}

/// `usecs_to_jiffies` at CONFIG_HZ `hz`.
#[inline]
pub fn usecs_to_jiffies_hz(us: u64, hz: u64) -> u64 {
    (us * hz).div_ceil(1_000_000)
}

/// When a Linux `timer_list` armed now for `usecs_to_jiffies(delay_us)`
/// jiffies fires (ns). The retransmission timer (RTO, tail loss probe,
/// RACK's reordering timeout) is such a timer; a timeout is at least one
/// jiffy, as `tcp_rearm_rto` makes it. The timer wheel files it one bucket
/// past its expiry (`timer_wheel_jiffy`), so it fires n to n + 1 jiffies
/// after it was armed, never sooner.
pub fn jiffies_timer_ns(c: &Conn, delay_us: u64) -> u64 {
    let now = jiffies(c);
    jiffy_start_us(timer_wheel_jiffy(now + usecs_to_jiffies(c, delay_us).max(1), now), c.hz) * 1000
}

/// The start of jiffy `j` on the µs clock `jiffies` reads, at CONFIG_HZ
/// `hz`. The usual HZ values get constant divisors: this runs once or twice
/// per ACK, and a division by a variable costs tens of cycles.
#[inline]
pub fn jiffy_start_us(j: u64, hz: u64) -> u64 {
    match hz {
        1000 => j * 1000,
        250 => j * 4000,
        100 => j * 10_000,
        hz => (j * 1_000_000).div_ceil(hz),
    }
}

/// The jiffy on whose tick a `timer_list` due at jiffy `expires` runs,
/// armed when the timer base's clock read `clk` (kernel/time/timer.c,
/// `calc_wheel_index` and `calc_index`). The wheel's level n holds timers
/// 63·8^(n-1) jiffies away or more, in buckets of 8^n jiffies, and a timer
/// goes into the bucket after the one its expiry falls in, so that one
/// armed just before a tick cannot fire early: under 63 jiffies away it
/// runs on jiffy `expires + 1`, further away on the next multiple of its
/// level's granularity after `expires` (up to 8 jiffies later at level 1,
/// the RTO's level at 1000 Hz). The clock is taken as the current jiffy
/// (the base is brought forward to jiffies when a timer is armed).
pub fn timer_wheel_jiffy(expires: u64, clk: u64) -> u64 {
    const LVL_CLK_SHIFT: u64 = 3;
    const LVL_DEPTH: u64 = 9;
    let delta = expires.saturating_sub(clk);
    let mut lvl = 0;
    while lvl + 1 < LVL_DEPTH && delta >= 63 << (LVL_CLK_SHIFT * lvl) {
        lvl += 1;
    }
    let shift = LVL_CLK_SHIFT * lvl;
    ((expires >> shift) + 1) << shift
}

/// Whole µs from now to the next departure (`tcp_wstamp_ns`, never
/// before now), as BBR's `bbr_packets_in_net_at_edt` measures it: a paced
/// sender's next burst may be due later than the ACK being processed.
pub fn us_to_edt(c: &Conn) -> u64 {
    c.wstamp_ns.saturating_sub(c.now_ns) / 1000
}

/// `msecs_to_jiffies`: rounds up.
pub fn msecs_to_jiffies(c: &Conn, ms: u64) -> u64 {
    (ms * c.hz).div_ceil(1000)
}

/// `tcp_in_cwnd_reduction()`: in CWR or Recovery.
pub fn in_cwnd_reduction(c: &Conn) -> bool {
    matches!(c.ca_state, CaState::Cwr | CaState::Recovery)
}

/// `tcp_current_ssthresh()`: during a reduction the target itself, else
/// at least 3/4 of cwnd (what a later loss would fall back to).
pub fn current_ssthresh(c: &Conn) -> u32 {
    if in_cwnd_reduction(c) {
        c.ssthresh
    } else {
        c.ssthresh.max((c.cwnd >> 1) + (c.cwnd >> 2))
    }
}

/// Windowed min or max filter keeping the best three samples (Kathleen
/// Nichols' algorithm, Linux lib/win_minmax.c); time in the caller's unit
/// (BBR's bandwidth filter counts rounds, the min RTT counts jiffies).
#[derive(Clone, Copy, Debug, Default)]
pub struct MinMax {
    s: [(u32, u64); 3], // (time, value), best first
}

impl MinMax {
    pub fn reset(&mut self, t: u32, v: u64) {
        self.s = [(t, v); 3];
    }

    pub fn get(&self) -> u64 {
        self.s[0].1
    }

    /// `minmax_running_max`.
    pub fn running_max(&mut self, win: u32, t: u32, v: u64) {
        // A new maximum, or everything has aged out: start over.
        if v >= self.s[0].1 || t.wrapping_sub(self.s[2].0) > win {
            self.reset(t, v);
            return;
        }
        if v >= self.s[1].1 {
            self.s[1] = (t, v);
            self.s[2] = (t, v);
        } else if v >= self.s[2].1 {
            self.s[2] = (t, v);
        }
        self.subwin_update(win, (t, v));
    }

    /// `minmax_running_min`.
    pub fn running_min(&mut self, win: u32, t: u32, v: u64) {
        if v <= self.s[0].1 || t.wrapping_sub(self.s[2].0) > win {
            self.reset(t, v);
            return;
        }
        if v <= self.s[1].1 {
            self.s[1] = (t, v);
            self.s[2] = (t, v);
        } else if v <= self.s[2].1 {
            self.s[2] = (t, v);
        }
        self.subwin_update(win, (t, v));
    }

    /// `minmax_subwin_update`: age the choices so the three stay spread
    /// over the window.
    fn subwin_update(&mut self, win: u32, val: (u32, u64)) {
        let dt = val.0.wrapping_sub(self.s[0].0);
        if dt > win {
            self.s[0] = self.s[1];
            self.s[1] = self.s[2];
            self.s[2] = val;
            if val.0.wrapping_sub(self.s[0].0) > win {
                self.s[0] = self.s[1];
                self.s[1] = self.s[2];
                self.s[2] = val;
            }
        } else if self.s[1].0 == self.s[0].0 && dt > win / 4 {
            self.s[1] = val;
            self.s[2] = val;
        } else if self.s[2].0 == self.s[1].0 && dt > win / 2 {
            self.s[2] = val;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jiffies_round_like_the_kernel() {
        let mut c = Conn::new(1448, 10);
        c.now_us = 2_999;
        assert_eq!(jiffies(&c), 2);
        assert_eq!(usecs_to_jiffies(&c, 1), 1);
        assert_eq!(usecs_to_jiffies(&c, 20_000), 20);
        assert_eq!(usecs_to_jiffies(&c, 20_001), 21);
        assert_eq!(msecs_to_jiffies(&c, 20), 20);
        // CONFIG_HZ=250: a jiffy is 4 ms.
        c.hz = 250;
        assert_eq!(jiffies(&c), 0);
        c.now_us = 4_000;
        assert_eq!(jiffies(&c), 1);
        assert_eq!(usecs_to_jiffies(&c, 4_001), 2);
        assert_eq!(msecs_to_jiffies(&c, 200), 50);
    }

    /// A timer fires on a tick, one jiffy after its expiry: 2.05 ms armed
    /// at 5.9 ms is one 4 ms jiffy at 250 Hz (expiry jiffy 2, the 8 ms
    /// tick), so it fires at 12 ms, 6.1 ms later; at 1000 Hz it is 3
    /// jiffies from jiffy 5, so 9 ms.
    #[test]
    fn timers_fire_on_ticks() {
        let mut c = Conn::new(1448, 10);
        c.now_us = 5_900;
        c.hz = 250;
        assert_eq!(jiffies_timer_ns(&c, 2_050), 12_000_000);
        assert_eq!(jiffies_timer_ns(&c, 4_001), 16_000_000);
        // The RTO's 200 ms: 50 jiffies, level 0.
        assert_eq!(jiffies_timer_ns(&c, 200_000), 208_000_000);
        c.hz = 1000;
        assert_eq!(jiffies_timer_ns(&c, 2_050), 9_000_000);
        assert_eq!(jiffies_timer_ns(&c, 0), 7_000_000);
        // 200 jiffies is level 1 (buckets of 8): expiry 205 runs on 208.
        assert_eq!(jiffies_timer_ns(&c, 200_000), 208_000_000);
        c.hz = 100;
        assert_eq!(jiffies_timer_ns(&c, 2_050), 20_000_000);
        // CONFIG_HZ=300: ticks at whole µs on the jiffies clock.
        c.hz = 300;
        let t = jiffies_timer_ns(&c, 1);
        c.now_us = t / 1000;
        assert_eq!(jiffies(&c), 3);
    }

    /// The wheel's levels (kernel/time/timer.c): one bucket past the
    /// expiry at the level the distance from the clock selects.
    #[test]
    fn timer_wheel_rounds_up_by_level() {
        assert_eq!(timer_wheel_jiffy(1, 0), 2);
        assert_eq!(timer_wheel_jiffy(62, 0), 63);
        // 63 jiffies away: level 1, granularity 8.
        assert_eq!(timer_wheel_jiffy(63, 0), 64);
        assert_eq!(timer_wheel_jiffy(64, 0), 72);
        assert_eq!(timer_wheel_jiffy(1000 + 503, 1000), 1504);
        // 504 away: level 2, granularity 64.
        assert_eq!(timer_wheel_jiffy(1000 + 504, 1000), 1536);
        // A timer due now still waits for the next tick.
        assert_eq!(timer_wheel_jiffy(7, 7), 8);
    }

    #[test]
    fn current_ssthresh_keeps_three_quarters_outside_reductions() {
        let mut c = Conn::new(1448, 100);
        c.ssthresh = 10;
        assert_eq!(current_ssthresh(&c), 75);
        c.ca_state = CaState::Recovery;
        assert_eq!(current_ssthresh(&c), 10);
    }

    #[test]
    fn every_registered_name_builds_itself() {
        for &name in crate::cc::ALGORITHMS {
            let a = crate::cc::by_name(name).unwrap_or_else(|| panic!("{name} not buildable"));
            assert_eq!(a.name(), name);
            assert_eq!(crate::cc::build(name, 42).unwrap().name(), name);
        }
        assert!(crate::cc::by_name("bbr2").is_none());
    }
}
