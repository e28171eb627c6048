//! HighSpeed TCP (RFC 3649) with the behaviour of Linux's
//! net/ipv4/tcp_highspeed.c.
//!
//! Below 38 segments HighSpeed is Reno. Above, congestion avoidance adds
//! a(w) segments per window of ACKs and a loss cuts cwnd by the fraction
//! b(w), both taken from RFC 3649 Appendix B's table: a(w) grows from 1 to
//! 72 and b(w) falls from 0.5 to 0.1 as w goes from 38 to ~89 000 segments
//! (the response function w = 0.12 / p^0.835). Like Linux, the table index
//! moves with cwnd during congestion avoidance, a(w) is the table row + 1,
//! b(w) is kept ×256, and each ACK (whatever it acks) adds a(w) to the
//! window counter — so with delayed ACKs the increase is a(w)/2 per RTT, as
//! in Linux. Slow start is Linux's (no limited slow start, RFC 3742).

use super::{CongestionControl, Conn};

/// RFC 3649 Appendix B: (upper window of the row, b(w) × 256). Row i has
/// a(w) = i + 1. The same numbers as Linux's hstcp_aimd_vals.
const AIMD: [(u32, u32); 73] = [
    (38, 128),
    (118, 112),
    (221, 104),
    (347, 98),
    (495, 93),
    (663, 89),
    (851, 86),
    (1058, 83),
    (1284, 81),
    (1529, 78),
    (1793, 76),
    (2076, 74),
    (2378, 72),
    (2699, 71),
    (3039, 69),
    (3399, 68),
    (3778, 66),
    (4177, 65),
    (4596, 64),
    (5036, 62),
    (5497, 61),
    (5979, 60),
    (6483, 59),
    (7009, 58),
    (7558, 57),
    (8130, 56),
    (8726, 55),
    (9346, 54),
    (9991, 53),
    (10661, 52),
    (11358, 52),
    (12082, 51),
    (12834, 50),
    (13614, 49),
    (14424, 48),
    (15265, 48),
    (16137, 47),
    (17042, 46),
    (17981, 45),
    (18955, 45),
    (19965, 44),
    (21013, 43),
    (22101, 43),
    (23230, 42),
    (24402, 41),
    (25618, 41),
    (26881, 40),
    (28193, 39),
    (29557, 39),
    (30975, 38),
    (32450, 38),
    (33986, 37),
    (35586, 36),
    (37253, 36),
    (38992, 35),
    (40808, 35),
    (42707, 34),
    (44694, 33),
    (46776, 33),
    (48961, 32),
    (51258, 32),
    (53677, 31),
    (56230, 30),
    (58932, 30),
    (61799, 29),
    (64851, 28),
    (68113, 28),
    (71617, 27),
    (75401, 26),
    (79517, 26),
    (84035, 25),
    (89053, 24),
    // Sentinel: beyond the last row the last row's values apply.
    (u32::MAX, 24),
];

/// Rows of the real table (72); the sentinel only keeps lookups in bounds.
const AIMD_MAX: usize = 72;

#[derive(Clone, Debug, Default)]
pub struct HighSpeed {
    /// Current table row: a(w) = ai + 1, b(w) = AIMD[ai].1 / 256.
    ai: usize,
}

impl HighSpeed {
    /// a(w) in segments per RTT (per window of ACKs) for the current row.
    pub fn a(&self) -> u32 {
        self.ai as u32 + 1
    }

    /// b(w) × 256 for the current row.
    pub fn b_256(&self) -> u32 {
        AIMD[self.ai].1
    }

    /// Move the row so that AIMD[ai-1].0 < cwnd <= AIMD[ai].0.
    fn update_row(&mut self, cwnd: u32) {
        if cwnd > AIMD[self.ai].0 {
            while cwnd > AIMD[self.ai].0 && self.ai < AIMD_MAX - 1 {
                self.ai += 1;
            }
        } else {
            while self.ai > 0 && cwnd <= AIMD[self.ai - 1].0 {
                self.ai -= 1;
            }
        }
    }
}

impl CongestionControl for HighSpeed {
    fn name(&self) -> &'static str {
        "highspeed"
    }

    fn init(&mut self, c: &mut Conn) {
        self.ai = 0;
        // Keep cwnd · b(w) inside 32 bits, as Linux does.
        c.cwnd_clamp = c.cwnd_clamp.min(u32::MAX / 128);
    }

    fn ssthresh(&mut self, c: &mut Conn) -> u32 {
        // cwnd · (1 − b(w)), never below 2.
        let cut = ((c.cwnd as u64 * AIMD[self.ai].1 as u64) >> 8) as u32;
        (c.cwnd - cut).max(2)
    }

    fn cong_avoid(&mut self, c: &mut Conn, acked: u32) {
        if !c.is_cwnd_limited() {
            return;
        }
        if c.in_slow_start() {
            c.slow_start(acked);
            return;
        }
        self.update_row(c.cwnd);
        // cwnd += a(w) / cwnd per ACK.
        if c.cwnd < c.cwnd_clamp {
            c.cwnd_cnt += self.ai as u32 + 1;
            if c.cwnd_cnt >= c.cwnd {
                c.cwnd_cnt -= c.cwnd;
                c.cwnd += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testutil::acks;

    fn at_window(w: u32) -> (HighSpeed, Conn) {
        let mut h = HighSpeed::default();
        let mut c = Conn::new(1448, w);
        h.init(&mut c);
        c.ssthresh = w;
        c.is_cwnd_limited_flag = true;
        (h, c)
    }

    /// cwnd growth over `n` single-segment ACKs.
    fn grow(h: &mut HighSpeed, c: &mut Conn, n: u32) -> u32 {
        let before = c.cwnd;
        acks(h, c, n);
        c.cwnd - before
    }

    #[test]
    fn increase_follows_the_table() {
        // (window, a(w) from RFC 3649 Appendix B)
        for (w, a) in [
            (30, 1),
            (100, 2),
            (500, 6),
            (1000, 8),
            (5000, 20),
            (10_000, 30),
            (80_000, 71),
        ] {
            let (mut h, mut c) = at_window(w);
            // One window of ACKs adds about a(w) segments (the window grows
            // meanwhile, so allow one segment of slack).
            let got = grow(&mut h, &mut c, w);
            assert_eq!(h.a(), a, "w={w}");
            assert!(got + 1 >= a && got <= a, "w={w}: grew {got}, a(w)={a}");
        }
    }

    #[test]
    fn decrease_follows_the_table() {
        // (window, b(w) from RFC 3649 Appendix B)
        for (w, b) in [
            (30, 0.50),
            (100, 0.44),
            (1000, 0.33),
            (5000, 0.25),
            (10_000, 0.21),
            (80_000, 0.10),
        ] {
            let (mut h, mut c) = at_window(w);
            grow(&mut h, &mut c, 1); // the row is chosen in cong_avoid
            c.cwnd = w;
            let ss = h.ssthresh(&mut c) as f64;
            let want = w as f64 * (1.0 - b);
            assert!(
                (ss - want).abs() <= 0.012 * w as f64 + 1.0,
                "w={w}: ssthresh {ss}, want {want}"
            );
        }
    }

    #[test]
    fn reno_below_38_segments() {
        let (mut h, mut c) = at_window(20);
        assert_eq!(grow(&mut h, &mut c, 20), 1);
        c.cwnd = 20;
        assert_eq!(h.ssthresh(&mut c), 10);
    }

    #[test]
    fn row_moves_down_with_cwnd() {
        let (mut h, mut c) = at_window(10_000);
        grow(&mut h, &mut c, 1);
        assert_eq!(h.a(), 30);
        c.cwnd = 200;
        c.ssthresh = 200;
        grow(&mut h, &mut c, 1);
        assert_eq!(h.a(), 3);
        assert_eq!(h.b_256(), 104);
    }

    #[test]
    fn top_of_the_table_is_linuxs_last_row() {
        let (mut h, mut c) = at_window(200_000);
        grow(&mut h, &mut c, 1);
        assert_eq!(h.a(), 72);
        assert_eq!(h.b_256(), 24);
    }

    #[test]
    fn slow_start_is_standard() {
        let mut h = HighSpeed::default();
        let mut c = Conn::new(1448, 10);
        h.init(&mut c);
        c.max_packets_out = 10;
        h.cong_avoid(&mut c, 10);
        assert_eq!(c.cwnd, 20);
    }
}
