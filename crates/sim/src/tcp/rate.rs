//! Delivery-rate sampling (draft-cheng-iccrg-delivery-rate-estimation, as
//! Linux's tcp_rate.c): each transmission snapshots how much had been
//! delivered and when; an ACK turns the snapshot of the most recently sent
//! segment it delivers into a rate sample for the CCA.

use crate::cc::{Conn, RateSample};
use netcore::{Nanos, NS_PER_US};

/// What a segment remembers of its last transmission (Linux `tcp_skb_cb.tx`
/// plus the send time). 32 bytes, so that a retransmit-queue segment fits
/// in 48: with many flows each segment's slot is a cold line when it is
/// sent and when it is acknowledged. The counts keep their low bits, as
/// Linux's `tx.delivered` (u32) and `tx.delivered_ce` (20 bits) do; the
/// full values come back from the connection's own counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct TxState {
    pub sent_ns: Nanos,
    /// Start of the send phase of the sampling interval.
    first_tx_ns: Nanos,
    /// Time and count (low 32 bits) of the latest delivery before this
    /// transmission.
    delivered_ns: Nanos,
    delivered: u32,
    /// The CE count's low 30 bits, `APP_LIMITED` and `DONE`.
    ce_flags: u32,
}

const CE_MASK: u32 = (1 << 30) - 1;
const APP_LIMITED: u32 = 1 << 30;
/// Already counted in a rate sample (Linux clears `delivered_mstamp`).
const DONE: u32 = 1 << 31;

/// The full count whose low bits are `low` (`mask` wide), given the
/// current count `now`, which is at most one wrap ahead of it.
fn unwrap_count(now: u64, low: u32, mask: u32) -> u64 {
    now - ((now as u32).wrapping_sub(low) & mask) as u64
}

/// The connection's sampling state (Linux `first_tx_mstamp`,
/// `delivered_mstamp`) and the sample being built for the current ACK.
#[derive(Clone, Debug, Default)]
pub struct RateSampler {
    first_tx_ns: Nanos,
    delivered_ns: Nanos,
    /// `delivered_ns` snapshot of the segment the sample is taken from
    /// (Linux `rs->prior_mstamp`).
    prior_ns: Nanos,
    /// Send time and end sequence of that segment.
    key: (Nanos, u64),
    /// Latest delivery rate in bits/s kept like `tcpi_delivery_rate`.
    delivery_rate_bps: f64,
}

impl RateSampler {
    /// `tcp_rate_skb_sent`: the snapshot of a segment sent at `now`, taken
    /// before `packets_out` counts it. A send into an empty pipe starts a
    /// new sampling interval.
    pub fn on_send(&mut self, c: &Conn, now: Nanos) -> TxState {
        if c.packets_out == 0 {
            self.first_tx_ns = now;
            self.delivered_ns = now;
        }
        TxState {
            sent_ns: now,
            first_tx_ns: self.first_tx_ns,
            delivered_ns: self.delivered_ns,
            delivered: c.delivered as u32,
            ce_flags: (c.delivered_ce as u32 & CE_MASK) | if c.app_limited != 0 { APP_LIMITED } else { 0 },
        }
    }

    /// Start the sample of a new ACK.
    pub fn begin_ack(&mut self) {
        self.key = (0, 0);
    }

    /// `tcp_rate_skb_delivered`: a segment ending at `end_seq` (ever
    /// retransmitted or not) was delivered. The sample comes from the most
    /// recently sent delivered segment; each transmission counts once.
    pub fn on_delivered(&mut self, c: &Conn, rs: &mut RateSample, tx: &mut TxState, end_seq: u64, ever_retrans: bool) {
        if tx.ce_flags & DONE != 0 {
            return;
        }
        tx.ce_flags |= DONE;
        if rs.delivered < 0 || (tx.sent_ns, end_seq) > self.key {
            self.key = (tx.sent_ns, end_seq);
            rs.prior_delivered = unwrap_count(c.delivered, tx.delivered, u32::MAX);
            rs.delivered = 0; // marks the sample as started; set in `gen`
            rs.delivered_ce = unwrap_count(c.delivered_ce, tx.ce_flags & CE_MASK, CE_MASK) as i64;
            rs.is_app_limited = tx.ce_flags & APP_LIMITED != 0;
            rs.is_retrans = ever_retrans;
            rs.interval_us = (tx.sent_ns.saturating_sub(tx.first_tx_ns) / NS_PER_US) as i64;
            self.prior_ns = tx.delivered_ns;
            self.first_tx_ns = tx.sent_ns;
        }
    }

    /// `tcp_rate_gen`: close the sample once `c.delivered` counts this ACK
    /// and `rs.acked_sacked` holds how many it delivered. An interval shorter
    /// than the min RTT comes from ACK compression and is unusable.
    pub fn gen(&mut self, c: &mut Conn, rs: &mut RateSample, now: Nanos) {
        if c.app_limited != 0 && c.delivered > c.app_limited {
            c.app_limited = 0;
        }
        if rs.acked_sacked > 0 {
            self.delivered_ns = now;
        }
        if rs.delivered < 0 || rs.interval_us < 0 {
            rs.delivered = -1;
            rs.interval_us = -1;
            return;
        }
        rs.delivered = (c.delivered - rs.prior_delivered) as i64;
        rs.delivered_ce = c.delivered_ce as i64 - rs.delivered_ce;
        let snd_us = rs.interval_us;
        let ack_us = (now.saturating_sub(self.prior_ns) / NS_PER_US) as i64;
        rs.interval_us = snd_us.max(ack_us);
        if rs.interval_us < c.min_rtt_us as i64 {
            rs.interval_us = -1;
            return;
        }
        if rs.interval_us > 0 {
            let bps = rs.delivered as f64 * c.mss as f64 * 8.0 * 1e6 / rs.interval_us as f64;
            if !rs.is_app_limited || bps >= self.delivery_rate_bps {
                self.delivery_rate_bps = bps;
            }
        }
    }

    /// The latest delivery rate (bits/s): a new sample replaces it unless it
    /// was app-limited and lower (Linux `tcp_rate_gen`'s `rate_delivered`).
    pub fn delivery_rate_bps(&self) -> f64 {
        self.delivery_rate_bps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    fn conn() -> Conn {
        let mut c = Conn::new(1000, 10);
        c.min_rtt_us = 10_000;
        c
    }

    /// Deliver `tx` at `now` as the only segment of its ACK.
    fn ack(r: &mut RateSampler, c: &mut Conn, tx: &mut TxState, end: u64, now: Nanos) -> RateSample {
        let mut rs = RateSample::default();
        r.begin_ack();
        c.delivered += 1;
        r.on_delivered(c, &mut rs, tx, end, false);
        rs.acked_sacked = 1;
        r.gen(c, &mut rs, now);
        rs
    }

    /// Ten segments sent back to back into an empty pipe at t = 0 and acked
    /// one per ms from t = 10 ms: the tenth ACK's sample counts ten
    /// deliveries over the longer phase: the send phase is 0, the ACK phase
    /// runs from the interval's start (t = 0) to 19 ms.
    #[test]
    fn sample_spans_the_longer_of_send_and_ack_phases() {
        let (mut r, mut c) = (RateSampler::default(), conn());
        let mut txs: Vec<TxState> = (0..10)
            .map(|_| {
                let tx = r.on_send(&c, 0);
                c.packets_out += 1;
                tx
            })
            .collect();
        let mut last = RateSample::default();
        for (i, tx) in txs.iter_mut().enumerate() {
            last = ack(&mut r, &mut c, tx, i as u64 + 1, (10 + i as u64) * MS);
        }
        assert_eq!(last.delivered, 10);
        assert_eq!(last.prior_delivered, 0);
        assert_eq!(last.interval_us, 19_000);
        let bps = 10.0 * 1000.0 * 8.0 / 0.019;
        assert!((r.delivery_rate_bps() - bps).abs() < 1.0, "{}", r.delivery_rate_bps());
    }

    /// The snapshot keeps only the counts' low bits; the sample still
    /// gets the exact counts across a wrap of those bits.
    #[test]
    fn counts_are_exact_across_the_snapshots_wrap() {
        let (mut r, mut c) = (RateSampler::default(), conn());
        c.delivered = (1 << 33) - 2;
        c.delivered_ce = (1 << 31) - 1;
        let mut tx = r.on_send(&c, 0);
        c.packets_out = 1;
        c.delivered += 4;
        c.delivered_ce += 3;
        let mut rs = RateSample::default();
        r.begin_ack();
        r.on_delivered(&c, &mut rs, &mut tx, 1, false);
        assert_eq!(rs.prior_delivered, (1 << 33) - 2);
        rs.acked_sacked = 1;
        r.gen(&mut c, &mut rs, 20 * MS);
        assert_eq!(rs.delivered, 4);
        assert_eq!(rs.delivered_ce, 3);
    }

    /// An interval shorter than the min RTT (ACK compression) gives no sample.
    #[test]
    fn interval_below_min_rtt_is_invalid() {
        let (mut r, mut c) = (RateSampler::default(), conn());
        let mut tx = r.on_send(&c, 0);
        c.packets_out = 1;
        let rs = ack(&mut r, &mut c, &mut tx, 1, 5 * MS);
        assert_eq!(rs.interval_us, -1);
        assert_eq!(r.delivery_rate_bps(), 0.0);
    }

    /// A transmission counts once: a second delivery report of the same
    /// snapshot (a SACK then the cumulative ACK) starts no sample.
    #[test]
    fn each_transmission_counts_once() {
        let (mut r, mut c) = (RateSampler::default(), conn());
        let mut tx = r.on_send(&c, 0);
        c.packets_out = 1;
        let first = ack(&mut r, &mut c, &mut tx, 1, 20 * MS);
        assert_eq!(first.delivered, 1);
        let again = ack(&mut r, &mut c, &mut tx, 1, 30 * MS);
        assert_eq!(again.delivered, -1);
    }

    /// Of several segments delivered by one ACK, the most recently sent one
    /// gives the sample; an app-limited sample below the current rate does
    /// not replace it.
    #[test]
    fn newest_segment_gives_the_sample_and_app_limited_low_rates_are_kept_out() {
        let (mut r, mut c) = (RateSampler::default(), conn());
        let mut a = r.on_send(&c, 0);
        c.packets_out = 1;
        c.app_limited = 5;
        let mut b = r.on_send(&c, 2 * MS);
        c.packets_out = 2;
        let mut rs = RateSample::default();
        r.begin_ack();
        c.delivered += 2;
        r.on_delivered(&c, &mut rs, &mut b, 2, true);
        r.on_delivered(&c, &mut rs, &mut a, 1, false);
        rs.acked_sacked = 2;
        r.gen(&mut c, &mut rs, 20 * MS);
        assert!(rs.is_app_limited && rs.is_retrans);
        assert_eq!(rs.interval_us, 20_000);
        // App-limited samples still count while there is no rate yet.
        let first = r.delivery_rate_bps();
        assert!(first > 0.0);
        let mut d = r.on_send(&c, 20 * MS);
        c.packets_out = 1;
        let _ = ack(&mut r, &mut c, &mut d, 3, 100 * MS);
        assert_eq!(r.delivery_rate_bps(), first, "a lower app-limited rate replaced the estimate");
    }
}
