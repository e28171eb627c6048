//! Data Center TCP (RFC 8257; Alizadeh et al., SIGCOMM 2010) with the
//! behaviour of Linux's net/ipv4/tcp_dctcp.c.
//!
//! The receiver echoes every CE mark exactly (the engine's receiver does
//! DCTCP's accurate echo for CCAs whose `needs_ecn()` is true), so the
//! sender knows the fraction F of its segments the switch marked. Once per
//! window of data (when snd_una passes the snd_nxt recorded a window ago)
//! it updates
//!     α ← (1 − g)·α + g·F,        g = 1/16
//! from the engine's `delivered` / `delivered_ce` counters, and on an ECN
//! congestion signal (the engine's CWR reduction calls `ssthresh`) cuts
//!     cwnd ← cwnd · (1 − α/2).
//! α starts at 1 (Linux's dctcp_alpha_on_init = 1024), so a flow starting
//! into a congested queue backs off like Reno. Packet loss is answered like
//! Reno: ssthresh = cwnd/2 on entering Recovery (set_state) and on RTO
//! (CA_EVENT_LOSS). Growth is Reno's. Without ECN on the connection
//! DCTCP falls back to plain Reno, like Linux's "dctcp-reno".
//!
//! Fixed point as Linux: α in 1/1024; the update's integer steps (including
//! α decaying to 0 once α < 16) are kept. Protective load balancing (PLB)
//! is not modelled: the simulator has a single path.

use super::reno::Reno;
use super::{CaEvent, CaState, CongestionControl, Conn};

const MAX_ALPHA: u32 = 1024;
/// g = 1/2^4.
const SHIFT_G: u32 = 4;
/// Linux's dctcp_alpha_on_init: start at α = 1.
const ALPHA_ON_INIT: u32 = MAX_ALPHA;

#[derive(Clone, Debug)]
pub struct Dctcp {
    /// Counters at the start of the current observation window.
    old_delivered: u64,
    old_delivered_ce: u64,
    /// α × 1024.
    alpha: u32,
    /// The window ends when snd_una reaches this (bytes).
    next_seq: u64,
    /// cwnd before the last loss reduction (for undo).
    loss_cwnd: u32,
    /// No ECN on this connection: behave as Reno (Linux's dctcp_reno).
    reno_fallback: bool,
}

impl Default for Dctcp {
    fn default() -> Self {
        Dctcp {
            old_delivered: 0,
            old_delivered_ce: 0,
            alpha: ALPHA_ON_INIT,
            next_seq: 0,
            loss_cwnd: 0,
            reno_fallback: false,
        }
    }
}

/// Linux `min_not_zero`.
fn min_not_zero(a: u32, b: u32) -> u32 {
    match (a, b) {
        (0, b) => b,
        (a, 0) => a,
        (a, b) => a.min(b),
    }
}

impl Dctcp {
    /// α as a fraction in [0, 1].
    pub fn alpha(&self) -> f64 {
        self.alpha as f64 / MAX_ALPHA as f64
    }

    fn reset(&mut self, c: &Conn) {
        self.next_seq = c.snd_nxt;
        self.old_delivered = c.delivered;
        self.old_delivered_ce = c.delivered_ce;
    }

    /// `dctcp_update_alpha`: once per window of data.
    fn update_alpha(&mut self, c: &Conn) {
        if c.snd_una < self.next_seq {
            return;
        }
        let delivered = (c.delivered - self.old_delivered) as u32;
        let mut delivered_ce = (c.delivered_ce - self.old_delivered_ce) as u32;
        let mut alpha = self.alpha;
        // α ← α − α·g (all of α once that rounds to zero) ...
        alpha -= min_not_zero(alpha, alpha >> SHIFT_G);
        if delivered_ce > 0 {
            // ... + g·F, with F scaled to 1024.
            delivered_ce <<= 10 - SHIFT_G;
            delivered_ce /= delivered.max(1);
            alpha = (alpha + delivered_ce).min(MAX_ALPHA);
        }
        self.alpha = alpha;
        self.reset(c);
    }

    /// `dctcp_react_to_loss`: Reno's halving.
    fn react_to_loss(&mut self, c: &mut Conn) {
        self.loss_cwnd = c.cwnd;
        c.ssthresh = (c.cwnd >> 1).max(2);
    }
}

impl CongestionControl for Dctcp {
    fn name(&self) -> &'static str {
        "dctcp"
    }

    fn needs_ecn(&self) -> bool {
        true
    }

    fn init(&mut self, c: &mut Conn) {
        *self = Dctcp::default();
        self.reno_fallback = !c.ecn;
        self.reset(c);
    }

    fn ssthresh(&mut self, c: &mut Conn) -> u32 {
        if self.reno_fallback {
            return (c.cwnd >> 1).max(2);
        }
        self.loss_cwnd = c.cwnd;
        // cwnd · (1 − α/2).
        let cut = ((c.cwnd as u64 * self.alpha as u64) >> 11) as u32;
        (c.cwnd - cut).max(2)
    }

    fn cong_avoid(&mut self, c: &mut Conn, acked: u32) {
        Reno::default().cong_avoid(c, acked);
    }

    fn in_ack_event(&mut self, c: &mut Conn, _flags: u32) {
        if !self.reno_fallback {
            self.update_alpha(c);
        }
    }

    fn set_state(&mut self, c: &mut Conn, new_state: CaState) {
        // Loss (fast recovery) halves like Reno, overriding the α-based
        // ssthresh the engine just took; a CWR (ECN) keeps the α cut.
        if !self.reno_fallback && new_state == CaState::Recovery && new_state != c.ca_state {
            self.react_to_loss(c);
        }
    }

    fn cwnd_event(&mut self, c: &mut Conn, ev: CaEvent) {
        // RTO: one Reno-like reduction, here rather than in set_state.
        if !self.reno_fallback && ev == CaEvent::Loss {
            self.react_to_loss(c);
        }
    }

    fn undo_cwnd(&mut self, c: &mut Conn) -> u32 {
        if self.reno_fallback {
            return c.cwnd.max(c.prior_cwnd);
        }
        c.cwnd.max(self.loss_cwnd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testutil::MSS;
    use crate::cc::ACK_ECE;

    fn flow(cwnd: u32) -> (Dctcp, Conn) {
        let mut d = Dctcp::default();
        let mut c = Conn::new(MSS as u32, cwnd);
        c.ecn = true;
        d.init(&mut c);
        (d, c)
    }

    /// One window of per-segment ACKs, `marked` of every `of` segments CE;
    /// the sender keeps cwnd in flight (snd_nxt a window ahead).
    fn window(d: &mut Dctcp, c: &mut Conn, marked: u32, of: u32) {
        let w = c.cwnd;
        for k in 0..w {
            c.snd_una += MSS;
            c.snd_nxt = c.snd_una + w as u64 * MSS;
            c.delivered += 1;
            let ce = k % of < marked;
            if ce {
                c.delivered_ce += 1;
            }
            d.in_ack_event(c, if ce { ACK_ECE } else { 0 });
        }
    }

    #[test]
    fn needs_ecn() {
        assert!(Dctcp::default().needs_ecn());
    }

    #[test]
    fn alpha_tracks_the_marked_fraction() {
        for (marked, of) in [(1, 10), (1, 4), (1, 2), (3, 4), (0, 1), (1, 1)] {
            let (mut d, mut c) = flow(100);
            for _ in 0..200 {
                window(&mut d, &mut c, marked, of);
            }
            let f = marked as f64 / of as f64;
            assert!((d.alpha() - f).abs() < 0.02, "F = {f}: α = {}", d.alpha());
        }
    }

    #[test]
    fn alpha_moves_by_g_per_window() {
        let (mut d, mut c) = flow(64);
        assert_eq!(d.alpha(), 1.0, "α starts at 1");
        // Window 1 ends at snd_nxt = 64 segments; the ACKs before do nothing.
        c.snd_nxt = 64 * MSS;
        d.in_ack_event(&mut c, 0); // snd_una 0 ≥ next_seq 0: closes the empty window
        assert_eq!(d.alpha, 1024 - 64);
        for k in 1..=64u64 {
            c.snd_una = k * MSS;
            c.delivered = k;
            let before = d.alpha;
            d.in_ack_event(&mut c, 0);
            if k < 64 {
                assert_eq!(d.alpha, before, "no update inside the window");
            }
        }
        // Unmarked window: α·(1 − 1/16).
        assert_eq!(d.alpha, 960 - 60);
        // Fully marked window: α + (1 − α)/16, in Linux's integer steps.
        c.snd_nxt = 128 * MSS;
        c.snd_una = 128 * MSS;
        c.delivered = 128;
        c.delivered_ce = 64;
        d.in_ack_event(&mut c, ACK_ECE);
        assert_eq!(d.alpha, 900 - (900 >> 4) + 64);
        // Half marked: + F·64.
        c.snd_nxt = 192 * MSS;
        c.snd_una = 192 * MSS;
        c.delivered = 192;
        c.delivered_ce = 96;
        let a = d.alpha;
        d.in_ack_event(&mut c, ACK_ECE);
        assert_eq!(d.alpha, a - (a >> 4) + 32);
    }

    #[test]
    fn window_cut_is_one_minus_half_alpha() {
        for (alpha, cwnd) in [
            (1024u32, 100u32),
            (512, 100),
            (256, 200),
            (100, 1000),
            (0, 50),
        ] {
            let (mut d, mut c) = flow(cwnd);
            d.alpha = alpha;
            let ss = d.ssthresh(&mut c) as f64;
            let want = cwnd as f64 * (1.0 - alpha as f64 / 1024.0 / 2.0);
            assert!((ss - want).abs() <= 1.0, "α={alpha}: {ss} vs {want}");
        }
    }

    #[test]
    fn loss_halves_like_reno() {
        let (mut d, mut c) = flow(100);
        d.alpha = 100;
        // Fast recovery: the engine takes ssthresh (α cut) then set_state.
        c.ssthresh = d.ssthresh(&mut c);
        assert_eq!(c.ssthresh, 100 - 100 * 100 / 2048);
        d.set_state(&mut c, CaState::Recovery);
        assert_eq!(c.ssthresh, 50);
        // An ECN CWR keeps the α cut.
        let (mut d, mut c) = flow(100);
        d.alpha = 100;
        c.ssthresh = d.ssthresh(&mut c);
        d.set_state(&mut c, CaState::Cwr);
        assert_eq!(c.ssthresh, 96);
        // RTO.
        d.cwnd_event(&mut c, CaEvent::Loss);
        assert_eq!(c.ssthresh, 50);
        assert_eq!(d.undo_cwnd(&mut c), 100);
    }

    #[test]
    fn without_ecn_it_is_reno() {
        let mut d = Dctcp::default();
        let mut c = Conn::new(MSS as u32, 100);
        d.init(&mut c);
        d.alpha = 0;
        assert_eq!(d.ssthresh(&mut c), 50);
        c.delivered_ce = 10;
        c.snd_una = 1 << 20;
        d.in_ack_event(&mut c, ACK_ECE);
        assert_eq!(d.alpha, 0);
    }
}
