//! TCP-NV ("New Vegas", Lawrence Brakmo, Linux 4.8; netdev 1.2 talk
//! "TCP-NV: An Update to TCP-Vegas") with the behaviour of Linux's
//! net/ipv4/tcp_nv.c.
//!
//! Like Vegas, NV avoids congestion by watching the queue it builds, but it
//! measures it differently: from each ACK it takes the sending rate
//! (bytes in flight / smoothed RTT) and keeps the largest per RTT; with the
//! minimum RTT (over 3.75–6.25 s windows, randomised) that rate predicts
//! the window the path needs, cwnd_by_slope. Once per RTT, after enough
//! samples (20–60 ACKs, ≥ 2 RTTs):
//! * cwnd > cwnd_by_slope + pad (10 segments): congestion — ssthresh =
//!   that window, cwnd drops by 30 % of the excess (≥ 2), growth stops;
//! * cwnd ≤ that − 2: no congestion — grow like Reno (faster again after
//!   a loss slowed the growth rate);
//! * in between: hold.
//!
//! Slow start exits on the same test. A loss cuts cwnd to 80 % (and an RTO
//! halves the growth rate). NV is meant for data centres where every flow
//! is NV.
//!
//! Units as Linux: rates in 100 bit/s, RTTs in µs, stamps in jiffies
//! (HZ = 1000). No BPF program supplies a base RTT. The rate's numerator is
//! Linux's `ack_sample.in_flight`: the data delivered since the newest
//! segment the ACK covers was sent (`AckSample::in_flight`).
//!
//! Faithful behaviour that makes NV look erratic in shared, shallow
//! queues (studies/netdev/README.md):
//! * `tcpnv_reset`, after every loss, recovery or ECN reduction, clears
//!   `nv_last_rtt`, and the next sample sets `nv_min_rtt` to twice the
//!   current (queue-inflated) RTT; from then on the minimum of the
//!   smoothed RTT. NV takes the standing queue for the base RTT, sees no
//!   congestion and grows like Reno until the next loss, whose reset
//!   starts the cycle again.
//! * Every 3.75–6.25 s `nv_min_rtt` becomes the smallest smoothed RTT of
//!   the last period, so a queue that stood for a whole period becomes the
//!   base RTT too, and a flow that joins a standing queue never sees the
//!   base RTT at all.
//! * A decrease needs 60 ACKs (30 in slow start) since the last decision
//!   and 2 RTTs, and every loss restarts the count: losses every few RTTs
//!   leave NV no chance to decrease.
//! * Each flow keeps up to nv_pad (10) segments queued: n flows need
//!   about 10·n packets of buffer before NV holds them without loss.
//!
//! Not modelled (the engine's limits): Linux's TSO/GSO bursts and GRO at
//! 10 Gbit/s give NV a few ACKs per round trip (what its `nv_min_cwnd`
//! logic is for), where this engine ACKs every second segment.
//! `nv_catchup` is never set in Linux either; no undo (the engine has none).

use super::util::jiffies;
use netcore::rng::Rng;
use super::{AckSample, CaState, CongestionControl, Conn, INFINITE_SSTHRESH};

/// Linux module parameters at their defaults.
const NV_PAD: u32 = 10;
const NV_PAD_BUFFER: u32 = 2;
const NV_RESET_PERIOD: u64 = 5; // seconds
const NV_MIN_CWND_PARAM: u32 = 2;
const NV_CONG_DEC_MULT: u32 = 30 * 128 / 100;
const NV_SSTHRESH_FACTOR: u32 = 8;
const NV_RTT_FACTOR: u64 = 128;
const NV_LOSS_DEC_FACTOR: u32 = 819;
const NV_CWND_GROWTH_RATE_NEG: i32 = 8;
const NV_CWND_GROWTH_RATE_POS: i32 = 0;
const NV_DEC_EVAL_MIN_CALLS: u32 = 60;
const NV_INC_EVAL_MIN_CALLS: u32 = 20;
const NV_SSTHRESH_EVAL_MIN_CALLS: u32 = 30;
const NV_STOP_RTT_CNT: u32 = 10;
const NV_RTT_MIN_CNT: u32 = 2;
/// Internal constants.
const NV_INIT_RTT: u32 = u32::MAX;
const NV_MIN_CWND: u32 = 4;
const NV_MIN_CWND_GROW: u32 = 2;
const NV_TSO_CWND_BOUND: u32 = 80;

#[derive(Clone, Debug)]
pub struct Nv {
    rng: Rng,
    /// When to switch to nv_min_rtt_new (jiffies).
    min_rtt_reset_jiffies: u64,
    /// < 0: less than one segment per RTT of growth (after losses).
    cwnd_growth_factor: i32,
    allow_cwnd_growth: bool,
    reset: bool,
    catchup: bool,
    eval_call_cnt: u32,
    /// No decision below this cwnd (grows with ACK coalescing).
    min_cwnd: u32,
    /// RTTs without a decision.
    rtt_cnt: u32,
    /// Smoothed RTT (µs).
    last_rtt: u32,
    /// Active and next minimum RTT (µs).
    min_rtt: u32,
    min_rtt_new: u32,
    /// Largest rate this RTT (100 bit/s).
    rtt_max_rate: u32,
    /// The RTT ends when snd_una passes this (bytes).
    rtt_start_seq: u64,
    last_snd_una: u64,
    no_cong_cnt: u32,
}

impl Default for Nv {
    fn default() -> Self {
        Nv::with_seed(0x0000_4E56)
    }
}

impl Nv {
    /// An NV instance whose randomised min-RTT periods come from `seed`.
    pub fn with_seed(seed: u64) -> Self {
        Nv {
            rng: Rng::new(seed),
            min_rtt_reset_jiffies: 0,
            cwnd_growth_factor: 0,
            allow_cwnd_growth: true,
            reset: false,
            catchup: false,
            eval_call_cnt: 0,
            min_cwnd: NV_MIN_CWND,
            rtt_cnt: 0,
            last_rtt: 0,
            min_rtt: NV_INIT_RTT,
            min_rtt_new: NV_INIT_RTT,
            rtt_max_rate: 0,
            rtt_start_seq: 0,
            last_snd_una: 0,
            no_cong_cnt: 0,
        }
    }

    pub fn min_rtt_us(&self) -> u32 {
        self.min_rtt
    }

    pub fn growth_allowed(&self) -> bool {
        self.allow_cwnd_growth
    }

    fn nv_reset(&mut self, c: &Conn) {
        self.reset = false;
        self.no_cong_cnt = 0;
        self.rtt_cnt = 0;
        self.last_rtt = 0;
        self.rtt_max_rate = 0;
        self.rtt_start_seq = c.snd_una;
        self.eval_call_cnt = 0;
        self.last_snd_una = c.snd_una;
    }
}

impl CongestionControl for Nv {
    fn name(&self) -> &'static str {
        "nv"
    }

    fn init(&mut self, c: &mut Conn) {
        self.nv_reset(c);
        self.allow_cwnd_growth = true;
        self.min_rtt_reset_jiffies = jiffies(c) + 2 * c.hz;
        self.min_rtt = NV_INIT_RTT;
        self.min_rtt_new = NV_INIT_RTT;
        self.min_cwnd = NV_MIN_CWND;
        self.catchup = false;
        self.cwnd_growth_factor = 0;
    }

    fn cong_avoid(&mut self, c: &mut Conn, acked: u32) {
        if !c.is_cwnd_limited() || !self.allow_cwnd_growth {
            return;
        }
        let mut acked = acked;
        if c.in_slow_start() {
            acked = c.slow_start(acked);
            if acked == 0 {
                return;
            }
        }
        let cnt = if self.cwnd_growth_factor < 0 {
            c.cwnd << (-self.cwnd_growth_factor) as u32
        } else {
            (c.cwnd >> self.cwnd_growth_factor as u32).max(4)
        };
        c.cong_avoid_ai(cnt, acked);
    }

    fn ssthresh(&mut self, c: &mut Conn) -> u32 {
        (((c.cwnd as u64 * NV_LOSS_DEC_FACTOR as u64) >> 10) as u32).max(2)
    }

    fn set_state(&mut self, c: &mut Conn, new_state: CaState) {
        if new_state == CaState::Open && self.reset {
            self.nv_reset(c);
        } else if matches!(new_state, CaState::Loss | CaState::Cwr | CaState::Recovery) {
            self.reset = true;
            self.allow_cwnd_growth = false;
            if new_state == CaState::Loss {
                // Back to Reno's rate, then halve it.
                if self.cwnd_growth_factor > 0 {
                    self.cwnd_growth_factor = 0;
                }
                if NV_CWND_GROWTH_RATE_NEG > 0 && self.cwnd_growth_factor > -8 {
                    self.cwnd_growth_factor -= 1;
                }
            }
        }
    }

    /// `tcpnv_acked` (in `acked`): the congestion avoidance decisions.
    fn pkts_acked(&mut self, c: &mut Conn, s: &AckSample) {
        if s.rtt_us < 0 {
            return;
        }
        if !matches!(c.ca_state, CaState::Open | CaState::Disorder) {
            return;
        }
        let now = jiffies(c);
        if self.catchup && c.cwnd >= NV_MIN_CWND_PARAM {
            self.catchup = false;
            self.allow_cwnd_growth = false;
        }
        let bytes_acked = c.snd_una - self.last_snd_una;
        self.last_snd_una = c.snd_una;
        // No early return for in_flight 0 (Linux has none: the rate is then 0).
        let in_flight = s.in_flight as u64 * c.mss as u64;
        let rtt_us = s.rtt_us.min(u32::MAX as i64) as u32;
        // Smoothed RTT: ½ old + ½ new.
        let avg_rtt = if self.last_rtt > 0 {
            ((rtt_us as u64 * NV_RTT_FACTOR + self.last_rtt as u64 * (256 - NV_RTT_FACTOR)) >> 8)
                as u32
        } else {
            self.min_rtt = rtt_us.saturating_mul(2);
            rtt_us
        };
        self.last_rtt = avg_rtt;

        // Rate in 100 bit/s.
        let rate = (in_flight * 80_000 / avg_rtt.max(1) as u64).min(u32::MAX as u64) as u32;
        self.rtt_max_rate = self.rtt_max_rate.max(rate);
        if self.eval_call_cnt < 255 {
            self.eval_call_cnt += 1;
        }
        self.min_rtt = self.min_rtt.min(avg_rtt);
        self.min_rtt_new = self.min_rtt_new.min(avg_rtt);

        // Every 3.75–6.25 s, start over with the minimum of the last period.
        if now >= self.min_rtt_reset_jiffies {
            self.min_rtt = self.min_rtt_new;
            self.min_rtt_new = NV_INIT_RTT;
            let rand = self.rng.below(256) as u64;
            self.min_rtt_reset_jiffies = now + ((NV_RESET_PERIOD * (384 + rand) * c.hz) >> 9);
            self.min_cwnd = (self.min_cwnd / 2).max(NV_MIN_CWND);
        }

        // Once per RTT.
        if self.rtt_start_seq >= c.snd_una {
            return;
        }
        self.rtt_start_seq = c.snd_nxt;
        if self.rtt_cnt < 0xff {
            self.rtt_cnt += 1;
        }
        // Only one ACK in an RTT: cwnd is too small to judge (coalescing).
        if self.eval_call_cnt == 1
            && bytes_acked >= (self.min_cwnd - 1) as u64 * c.mss as u64
            && self.min_cwnd < NV_TSO_CWND_BOUND + 1
        {
            self.min_cwnd = (self.min_cwnd + NV_MIN_CWND_GROW).min(NV_TSO_CWND_BOUND + 1);
            self.rtt_start_seq = c.snd_nxt + self.min_cwnd as u64 * c.mss as u64;
            self.eval_call_cnt = 0;
            self.allow_cwnd_growth = true;
            return;
        }
        // The window the measured rate needs: rate / (80000·mss / min_rtt).
        let cwnd_by_slope =
            (self.rtt_max_rate as u64 * self.min_rtt as u64 / (80_000 * c.mss as u64)) as u32;
        let max_win = cwnd_by_slope + NV_PAD;

        if c.cwnd > max_win {
            // Congestion, if there is enough evidence.
            if self.rtt_cnt < NV_RTT_MIN_CNT {
                return;
            } else if c.ssthresh == INFINITE_SSTHRESH {
                if self.eval_call_cnt < NV_SSTHRESH_EVAL_MIN_CALLS {
                    return;
                }
            } else if self.eval_call_cnt < NV_DEC_EVAL_MIN_CALLS {
                if self.allow_cwnd_growth && self.rtt_cnt > NV_STOP_RTT_CNT {
                    self.allow_cwnd_growth = false;
                }
                return;
            }
            self.allow_cwnd_growth = false;
            c.ssthresh = (NV_SSTHRESH_FACTOR * max_win) >> 3;
            if c.cwnd - max_win > 2 {
                // Far above: cut 30 % of the excess.
                let dec = (((c.cwnd - max_win) * NV_CONG_DEC_MULT) >> 7).max(2);
                c.cwnd -= dec;
            } else if NV_CONG_DEC_MULT > 0 {
                c.cwnd = max_win;
            }
            if self.cwnd_growth_factor > 0 {
                self.cwnd_growth_factor = 0;
            }
            self.no_cong_cnt = 0;
        } else if c.cwnd <= max_win.saturating_sub(NV_PAD_BUFFER) {
            // No congestion: grow, and recover the growth rate after losses.
            if self.eval_call_cnt < NV_INC_EVAL_MIN_CALLS {
                return;
            }
            self.allow_cwnd_growth = true;
            self.no_cong_cnt += 1;
            // Below Reno's rate (after losses) and, if configured, above it.
            let (rate, grow_on) = if self.cwnd_growth_factor < 0 {
                (NV_CWND_GROWTH_RATE_NEG, true)
            } else {
                (NV_CWND_GROWTH_RATE_POS, NV_CWND_GROWTH_RATE_POS > 0)
            };
            if grow_on && rate > 0 && self.no_cong_cnt > rate as u32 {
                self.cwnd_growth_factor += 1;
                self.no_cong_cnt = 0;
            }
        } else {
            return; // in between: hold
        }

        self.eval_call_cnt = 0;
        self.rtt_cnt = 0;
        self.rtt_max_rate = 0;
        // NV's own cuts never take cwnd below the floor.
        if c.cwnd < NV_MIN_CWND_PARAM {
            c.cwnd = NV_MIN_CWND_PARAM;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testutil::{acks, QueuePipe};

    /// One NV flow on a FIFO bottleneck of `bdp` segments per base RTT.
    fn pipe(base_us: u64, bdp: u32, seed: u64) -> QueuePipe<Nv> {
        QueuePipe::new(Nv::with_seed(seed), base_us, bdp)
    }

    #[test]
    fn after_a_reduction_min_rtt_restarts_at_twice_the_rtt_as_in_linux() {
        // tcpnv_reset clears nv_last_rtt, so the first sample after a loss
        // episode sets nv_min_rtt to twice the (queue-inflated) RTT; only
        // nv_min_rtt_new keeps the base RTT, until the period switch.
        let mut p = pipe(20, 20, 1);
        p.run_for(0.5);
        assert!(p.cc.min_rtt <= 25, "{}", p.cc.min_rtt);
        let c = &mut p.c;
        p.cc.set_state(c, CaState::Recovery);
        c.ca_state = CaState::Recovery;
        p.cc.set_state(c, CaState::Open);
        c.ca_state = CaState::Open;
        c.now_us += 10;
        c.snd_una += c.mss as u64;
        c.delivered += 1;
        let s = AckSample {
            pkts_acked: 1,
            rtt_us: 90,
            in_flight: 0,
        };
        p.cc.pkts_acked(c, &s);
        assert_eq!(p.cc.min_rtt, 90);
        assert!(p.cc.min_rtt_new <= 25);
        assert!(!p.cc.growth_allowed());
    }

    #[test]
    fn keeps_the_queue_within_its_pad() {
        for (base_us, bdp) in [(100u64, 40u32), (200, 200), (1000, 100)] {
            let mut p = pipe(base_us, bdp, 1);
            p.run_for(3.0);
            assert!(!p.c.in_slow_start());
            // Settled: the queue (cwnd − BDP) stays at most about nv_pad,
            // and the link stays busy.
            let mut queued = Vec::new();
            for _ in 0..200 {
                p.run_for(0.01);
                queued.push(p.c.cwnd as i64 - bdp as i64);
            }
            let (lo, hi) = (*queued.iter().min().unwrap(), *queued.iter().max().unwrap());
            assert!(
                lo >= 0 && hi <= NV_PAD as i64 + 4,
                "bdp {bdp}: queue {lo}..{hi}"
            );
        }
    }

    #[test]
    fn slow_start_ends_on_the_slope_test_then_grows_to_the_pad() {
        let mut p = pipe(200, 200, 1);
        while p.c.in_slow_start() && p.now < 1e6 {
            p.ack();
        }
        assert!(!p.c.in_slow_start());
        // In slow start the rate measured at send time lags cwnd by a
        // factor of two, so (as in Linux) NV leaves slow start as soon as it
        // has 30 samples and 2 RTTs — at ssthresh = rate·min_rtt + pad.
        assert!(
            (NV_PAD..=200 + 2 * NV_PAD).contains(&p.c.ssthresh),
            "ssthresh {}",
            p.c.ssthresh
        );
        // Then grows (Reno-like) to the BDP plus its pad.
        p.run_for(1.0);
        let queued = p.c.cwnd as i64 - 200;
        assert!(
            (0..=NV_PAD as i64 + 4).contains(&queued),
            "cwnd {}",
            p.c.cwnd
        );
    }

    #[test]
    fn loss_cuts_to_eighty_percent_and_slows_growth() {
        let mut nv = Nv::default();
        let mut c = Conn::new(1448, 100);
        nv.init(&mut c);
        assert_eq!(nv.ssthresh(&mut c), 79);
        nv.set_state(&mut c, CaState::Loss);
        assert_eq!(nv.cwnd_growth_factor, -1);
        assert!(!nv.growth_allowed());
        // Half Reno's growth: one segment per two windows.
        nv.allow_cwnd_growth = true;
        c.ssthresh = 50;
        c.cwnd = 50;
        acks(&mut nv, &mut c, 100);
        assert_eq!(c.cwnd, 51);
    }

    #[test]
    fn no_growth_after_congestion_until_cleared() {
        let mut nv = Nv::default();
        let mut c = Conn::new(1448, 100);
        nv.init(&mut c);
        nv.allow_cwnd_growth = false;
        c.ssthresh = 10;
        c.is_cwnd_limited_flag = true;
        nv.cong_avoid(&mut c, 10);
        assert_eq!(c.cwnd, 100);
    }

    #[test]
    fn min_rtt_period_is_randomised_and_seeded() {
        let period = |seed| {
            let mut p = pipe(200, 100, seed);
            p.run_for(2.5);
            p.cc.min_rtt_reset_jiffies
        };
        let a = period(1);
        assert_eq!(a, period(1));
        // 2 s + 5 s·(384 + rand)/512: between 3.75 and 6.25 s later.
        assert!((2000 + 3750..=2600 + 6250).contains(&a), "{a}");
        assert!((1..20).any(|s| period(s) != a));
    }
}
