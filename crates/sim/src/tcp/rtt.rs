//! RTT smoothing and the retransmission timeout (RFC 6298 as Linux's
//! `tcp_rtt_estimator` and `tcp_set_rto` compute it), with exponential
//! backoff; and the windowed minimum RTT (`tcp_update_rtt_min`).

use crate::cc::util::{jiffies, MinMax};
use crate::cc::Conn;
use netcore::{Nanos, NS_PER_SEC};

/// Linux TCP_TIMEOUT_INIT and TCP_RTO_MAX.
pub const RTO_INIT: Nanos = NS_PER_SEC;
pub const RTO_MAX: Nanos = 120 * NS_PER_SEC;
/// Linux measures RTT in µs and counts a 0 µs sample as 1 µs.
const MIN_SAMPLE: Nanos = 1_000;

#[derive(Clone, Debug)]
pub struct RttEstimator {
    srtt_ns: Nanos,
    rttvar_ns: Nanos,
    rto_ns: Nanos,
    min_rto_ns: Nanos,
    /// Consecutive timeouts without an RTT-advancing ACK (`icsk_backoff`).
    pub backoff: u32,
}

impl RttEstimator {
    pub fn new(min_rto_ns: Nanos) -> RttEstimator {
        RttEstimator { srtt_ns: 0, rttvar_ns: 0, rto_ns: RTO_INIT, min_rto_ns, backoff: 0 }
    }

    /// Smoothed RTT, 0 before the first sample.
    pub fn srtt_ns(&self) -> Nanos {
        self.srtt_ns
    }

    /// The RTO before backoff.
    pub fn rto_ns(&self) -> Nanos {
        self.rto_ns
    }

    /// Feed one RTT measurement; returns it as used (floored at 1 µs).
    pub fn sample(&mut self, rtt: Nanos) -> Nanos {
        let rtt = rtt.max(MIN_SAMPLE);
        if self.srtt_ns == 0 {
            self.srtt_ns = rtt;
            self.rttvar_ns = rtt / 2;
        } else {
            let err = rtt.abs_diff(self.srtt_ns);
            self.rttvar_ns = (3 * self.rttvar_ns + err) / 4;
            self.srtt_ns = (7 * self.srtt_ns + rtt) / 8;
        }
        self.update_rto();
        rtt
    }

    /// Linux: RTO = srtt + max(4·rttvar, rto_min), so rto_min acts as a floor
    /// on the variance term rather than on the whole timeout.
    pub fn update_rto(&mut self) {
        if self.srtt_ns == 0 {
            return;
        }
        self.rto_ns = (self.srtt_ns + (4 * self.rttvar_ns).max(self.min_rto_ns)).min(RTO_MAX);
    }

    /// A SYN timed out: without an RTT yet, the base RTO itself doubles.
    pub fn syn_timeout(&mut self) {
        self.backoff += 1;
        self.rto_ns = (self.rto_ns * 2).min(RTO_MAX);
    }

    /// The timeout to arm now: the RTO doubled per backoff, capped.
    pub fn current_rto(&self) -> Nanos {
        (self.rto_ns << self.backoff.min(16)).min(RTO_MAX)
    }
}

/// `tcp_rtt_tsopt_us`: the RTT an echoed timestamp gives, on Linux's
/// millisecond TCP timestamp clock (TCP_TS_HZ = 1000; microsecond
/// timestamps only when a route enables `tcp_usec_ts`, which ccbench's
/// linux backend does not): the difference of whole milliseconds, 0
/// counting as 1. `ts_ecr` is the echoed send time on the same clock as
/// `now`.
pub fn ts_echo_rtt(now: Nanos, ts_ecr: Nanos) -> Nanos {
    (now / TS_TICK_NS).saturating_sub(ts_ecr / TS_TICK_NS).max(1) * TS_TICK_NS
}

/// One tick of Linux's TCP timestamp clock (TCP_TS_HZ = 1000 without
/// `tcp_usec_ts`): echo RTTs and Eifel detection count in these.
pub const TS_TICK_NS: Nanos = 1_000_000;

/// Linux `sysctl_tcp_min_rtt_wlen` (default 300 s): the min RTT's window.
const MIN_RTT_WLEN_S: u64 = 300;

/// Linux `tp->rtt_min` as `tcp_update_rtt_min` keeps it: a windowed
/// minimum (lib/win_minmax.c over `tcp_jiffies32`, 300 s) of the RTT of the
/// newest segment each ACK (s)acked (`ca_rtt_us`), not of the oldest one
/// that srtt takes.
#[derive(Clone, Debug)]
pub struct MinRtt {
    f: MinMax,
}

impl Default for MinRtt {
    fn default() -> Self {
        let mut f = MinMax::default();
        f.reset(0, u32::MAX as u64);
        MinRtt { f }
    }
}

impl MinRtt {
    /// The minimum in µs (`tcp_min_rtt`); u32::MAX before the first sample.
    pub fn get(&self) -> u32 {
        self.f.get() as u32
    }

    /// One `ca_rtt_us` sample at the connection's current jiffy. A sample
    /// from an ACK that may have been delayed (FLAG_ACK_MAYBE_DELAYED) only
    /// counts if it is a new minimum, so that a receiver that keeps
    /// delaying its ACKs does not become the propagation delay once the
    /// true minimum ages out. A 0 µs sample counts as one jiffy, as Linux's.
    pub fn update(&mut self, c: &Conn, rtt_us: u64, maybe_delayed: bool) -> u32 {
        if maybe_delayed && rtt_us > self.get() as u64 {
            return self.get();
        }
        let v = if rtt_us == 0 { 1_000_000 / c.hz } else { rtt_us.min(u32::MAX as u64) };
        self.f.running_min((MIN_RTT_WLEN_S * c.hz) as u32, jiffies(c) as u32, v);
        self.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    #[test]
    fn first_sample_sets_srtt_and_half_variance() {
        let mut e = RttEstimator::new(200 * MS);
        assert_eq!(e.current_rto(), RTO_INIT);
        e.sample(100 * MS);
        assert_eq!(e.srtt_ns(), 100 * MS);
        // 4·rttvar = 200 ms is no less than rto_min.
        assert_eq!(e.rto_ns(), 300 * MS);
    }

    /// RFC 6298's gains of 1/8 and 1/4, and rto_min as a floor on the
    /// variance term: a 1 ms path still waits srtt + 200 ms.
    #[test]
    fn smoothing_gains_and_min_rto_floor() {
        let mut e = RttEstimator::new(200 * MS);
        e.sample(MS);
        e.sample(9 * MS);
        assert_eq!(e.srtt_ns(), 2 * MS);
        assert_eq!(e.rttvar_ns, (3 * MS / 2 + 8 * MS) / 4);
        assert_eq!(e.rto_ns(), 2 * MS + 200 * MS);
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let mut e = RttEstimator::new(200 * MS);
        e.sample(100 * MS);
        e.backoff = 3;
        assert_eq!(e.current_rto(), 8 * 300 * MS);
        e.backoff = 40;
        assert_eq!(e.current_rto(), RTO_MAX);
        let mut syn = RttEstimator::new(200 * MS);
        syn.syn_timeout();
        assert_eq!((syn.backoff, syn.rto_ns()), (1, 2 * RTO_INIT));
    }

    /// Whole milliseconds of the timestamp clock: 0.2 ms within one
    /// millisecond is 1 ms, 0.2 ms across a millisecond boundary too, and
    /// 1.9 ms is 1 or 2 ms depending on where the boundaries fall.
    #[test]
    fn echo_rtt_counts_whole_milliseconds() {
        assert_eq!(ts_echo_rtt(20_300_000, 20_100_000), MS);
        assert_eq!(ts_echo_rtt(21_100_000, 20_900_000), MS);
        assert_eq!(ts_echo_rtt(21_950_000, 20_050_000), MS);
        assert_eq!(ts_echo_rtt(22_050_000, 20_150_000), 2 * MS);
    }

    #[test]
    fn samples_are_floored_at_one_microsecond() {
        let mut e = RttEstimator::new(200 * MS);
        assert_eq!(e.sample(10), 1_000);
    }
}
