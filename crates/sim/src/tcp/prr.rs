//! Proportional rate reduction (RFC 6937, as Linux's `tcp_cwnd_reduction`):
//! during a cwnd reduction, send in proportion to what is delivered so that
//! the window reaches ssthresh smoothly at the end of recovery.

#[derive(Clone, Debug, Default)]
pub struct Prr {
    /// Segments delivered and sent since the reduction began.
    delivered: u32,
    out: u32,
}

impl Prr {
    /// `tcp_init_cwnd_reduction`: a reduction starts.
    pub fn start(&mut self) {
        self.delivered = 0;
        self.out = 0;
    }

    /// A segment was sent during the reduction.
    pub fn on_sent(&mut self) {
        self.out += 1;
    }

    /// The cwnd that lets this ACK send its share. `prior_cwnd` is the cwnd
    /// when the reduction began. `None` when the ACK delivered nothing: Linux
    /// leaves cwnd alone then, even if it revealed a loss.
    pub fn cwnd(&mut self, in_flight: u32, ssthresh: u32, prior_cwnd: u32, newly_acked_sacked: u32, newly_lost: bool, una_advanced: bool) -> Option<u32> {
        if newly_acked_sacked == 0 {
            return None;
        }
        let in_flight = in_flight as i64;
        let ssthresh = ssthresh as i64;
        let delta = ssthresh - in_flight;
        self.delivered += newly_acked_sacked;
        let prr_delivered = self.delivered as i64;
        let prr_out = self.out as i64;
        let mut sndcnt = if delta < 0 {
            // Above ssthresh: proportional, ssthresh/prior_cwnd per delivery.
            let prior = (prior_cwnd as i64).max(1);
            (ssthresh * prr_delivered + prior - 1) / prior - prr_out
        } else {
            // Below: catch up to what was delivered since the reduction
            // began (conservative, RFC 6937bis's PRR-CRB), one more when the
            // cumulative ACK moved without a new loss (slow start back up,
            // PRR-SSRB); never past ssthresh. As Linux 6.x; older kernels
            // let an ACK with a new loss send only what it delivered.
            let mut n = (prr_delivered - prr_out).max(newly_acked_sacked as i64);
            if una_advanced && !newly_lost {
                n += 1;
            }
            delta.min(n)
        };
        // Always allow the fast retransmit itself.
        sndcnt = sndcnt.max(if self.out == 0 { 1 } else { 0 });
        Some((in_flight + sndcnt).max(1) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From 20 segments to ssthresh 10: each delivery above ssthresh lets
    /// half a segment out, rounded up over the reduction.
    #[test]
    fn proportional_above_ssthresh() {
        let mut p = Prr::default();
        p.start();
        // First ACK: 1 delivered, 19 in flight; ceil(10·1/20) = 1 to send.
        assert_eq!(p.cwnd(19, 10, 20, 1, true, false), Some(20));
        p.on_sent();
        // Second: ceil(10·2/20) − 1 = 0: cwnd is what is in flight.
        assert_eq!(p.cwnd(18, 10, 20, 1, false, false), Some(18));
        // Third: ceil(10·3/20) − 1 = 1.
        assert_eq!(p.cwnd(17, 10, 20, 1, false, false), Some(18));
    }

    #[test]
    fn below_ssthresh_slow_starts_back_or_stays_conservative() {
        let mut p = Prr::default();
        p.start();
        p.on_sent();
        // Cumulative progress without new loss: up to max(delivered − out,
        // newly delivered) + 1 = 4.
        assert_eq!(p.cwnd(4, 10, 20, 3, false, true), Some(4 + 4));
        for _ in 0..4 {
            p.on_sent();
        }
        // A new loss: no slow-start step, but still up to what was delivered
        // and not yet sent: max(4 − 5, 1) = 1.
        assert_eq!(p.cwnd(4, 10, 20, 1, true, false), Some(5));
        // Nothing delivered: no change, even with a loss.
        assert_eq!(p.cwnd(4, 10, 20, 0, false, false), None);
        assert_eq!(p.cwnd(4, 10, 20, 0, true, false), None);
    }

    /// Where Linux 6.x's rule differs from the older one: an ACK
    /// with a new loss, below ssthresh, after ACKs that earned more than was
    /// sent (the application or the window held the sender back). The old
    /// rule allowed only this ACK's deliveries; now the backlog may go.
    #[test]
    fn a_new_loss_below_ssthresh_may_send_the_backlog() {
        let mut p = Prr::default();
        p.start();
        p.on_sent(); // the fast retransmit
        // 6 delivered: up to 6 may go, but the sender sends nothing (held back).
        assert_eq!(p.cwnd(2, 10, 20, 6, false, false), Some(2 + 6));
        // A new loss and 1 delivered: the backlog max(7 − 1, 1) = 6 may go
        // (the older rule: only this ACK's 1).
        assert_eq!(p.cwnd(2, 10, 20, 1, true, false), Some(2 + 6));
        // Never past ssthresh: in flight 9, delta 1.
        assert_eq!(p.cwnd(9, 10, 20, 1, true, false), Some(10));
    }

    #[test]
    fn the_fast_retransmit_always_goes() {
        let mut p = Prr::default();
        p.start();
        // Far above ssthresh, the first delivery earns ceil(5·1/40) = 1
        // and the retransmit would go anyway.
        assert_eq!(p.cwnd(30, 5, 40, 1, true, false), Some(31));
        // Far above ssthresh after the retransmit: nothing earned yet.
        let mut p = Prr::default();
        p.start();
        assert_eq!(p.cwnd(39, 1, 40, 1, true, false), Some(40));
    }
}
