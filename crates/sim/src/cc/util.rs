//! Small pieces several CCAs share: Linux's jiffies clock, sequence-number
//! helpers from include/net/tcp.h, and a seeded PRNG for the algorithms that
//! draw random numbers (BBRv3's probe wait, NV's min-RTT reset period).

use super::{CaState, Conn};

/// Kernel tick rate for jiffies-based CCA timers (CONFIG_HZ=1000, as the
/// CUBIC and BBR models here assume).
pub const HZ: u64 = 1000;

/// `tcp_jiffies32` / `jiffies` from the connection clock.
pub fn jiffies(c: &Conn) -> u64 {
    c.now_us * HZ / 1_000_000
}

/// `usecs_to_jiffies`: rounds up, like the kernel.
pub fn usecs_to_jiffies(us: u64) -> u64 {
    (us * HZ).div_ceil(1_000_000)
}

/// `msecs_to_jiffies`.
pub fn msecs_to_jiffies(ms: u64) -> u64 {
    (ms * HZ).div_ceil(1000)
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

/// A seeded xorshift64* generator: deterministic per flow, so that runs are
/// reproducible (Linux draws from get_random_u32_below / get_random_bytes).
#[derive(Clone, Copy, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // Scramble the seed so nearby seeds give unrelated streams, and keep
        // the state non-zero (xorshift's fixed point).
        let mut z = seed ^ 0x6A09_E667_F3BC_C909;
        z = (z ^ (z >> 33)).wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        z = (z ^ (z >> 33)).wrapping_mul(0xC4CE_B9FE_1A85_EC53);
        z ^= z >> 33;
        Rng(if z == 0 { 1 } else { z })
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, n); 0 when n is 0.
    pub fn below(&mut self, n: u32) -> u32 {
        (((self.next_u64() >> 32) * n as u64) >> 32) as u32
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
        assert_eq!(usecs_to_jiffies(1), 1);
        assert_eq!(usecs_to_jiffies(20_000), 20);
        assert_eq!(usecs_to_jiffies(20_001), 21);
        assert_eq!(msecs_to_jiffies(20), 20);
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

    #[test]
    fn rng_is_deterministic_and_roughly_uniform() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let mut counts = [0u32; 4];
        for _ in 0..4000 {
            let x = a.below(4);
            assert_eq!(x, b.below(4));
            counts[x as usize] += 1;
        }
        assert!(
            counts.iter().all(|&n| (850..1150).contains(&n)),
            "{counts:?}"
        );
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
        assert_eq!(Rng::new(3).below(0), 0);
    }
}
