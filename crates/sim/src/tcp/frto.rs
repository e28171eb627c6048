//! F-RTO (RFC 5682, SACK-enhanced, as Linux's `tcp_process_loss`): after a
//! retransmission timeout, tell a spurious timeout (the originals were only
//! delayed) from a real one by what the ACKs after it deliver: if
//! never-retransmitted data is acknowledged the timeout was spurious and the
//! reduction is undone; if the first ACK advances, send new data instead of
//! more retransmissions and look again.

/// Linux `net.ipv4.tcp_frto`, default 2: on.
pub const SYSCTL_FRTO: bool = true;

/// What one ACK in the Loss state showed.
#[derive(Clone, Copy, Debug, Default)]
pub struct LossAck {
    pub una_advanced: bool,
    /// Never-retransmitted data below the recovery point was (s)acked
    /// (Linux FLAG_ORIG_SACK_ACKED).
    pub orig_sack_acked: bool,
    /// New SACK information or a duplicate ACK.
    pub sacked_or_dupack: bool,
    /// snd_una reached the recovery point.
    pub recovered: bool,
    /// New data could go out now (queued data and receive window).
    pub can_send_new: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The timeout was spurious: undo.
    Spurious,
    /// Step 2b: send new data before any more retransmissions.
    SendNew,
    /// Conventional loss recovery.
    Continue,
}

#[derive(Clone, Debug, Default)]
pub struct Frto {
    on: bool,
}

impl Frto {
    /// At the timeout (`tcp_enter_loss`, RFC 5682 §3.1 step 1): F-RTO runs
    /// unless a recovery was already under way, except for repeated
    /// timeouts on the same data (§3.2).
    pub fn enter_loss(&mut self, new_recovery: bool, repeated_timeout: bool) {
        self.on = SYSCTL_FRTO && (new_recovery || repeated_timeout);
    }

    #[cfg(test)]
    fn is_on(&self) -> bool {
        self.on
    }

    pub fn stop(&mut self) {
        self.on = false;
    }

    /// One ACK in Loss. `snd_nxt` and `high_seq` (the recovery point, moved
    /// to `snd_nxt` when new data is to be sent) decide which step this is.
    pub fn on_ack(&mut self, a: &LossAck, snd_nxt: u64, high_seq: &mut u64) -> Verdict {
        if !self.on {
            return Verdict::Continue;
        }
        // Step 3b: original data got through after the timeout.
        if a.orig_sack_acked {
            return Verdict::Spurious;
        }
        if snd_nxt > *high_seq {
            // Step 3a: new data was sent, and holes remain: the loss was real.
            if a.sacked_or_dupack {
                self.on = false;
            }
        } else if a.una_advanced && !a.recovered {
            *high_seq = snd_nxt;
            // Step 2b.
            if a.can_send_new {
                return Verdict::SendNew;
            }
            self.on = false;
        }
        Verdict::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gated_like_linux() {
        let mut f = Frto::default();
        f.enter_loss(true, false);
        assert!(f.is_on());
        // A timeout during fast recovery: conventional.
        f.enter_loss(false, false);
        assert!(!f.is_on());
        // ... unless it repeats on the same data.
        f.enter_loss(false, true);
        assert!(f.is_on());
    }

    /// The first ACK after the timeout advances: new data goes out, and the
    /// recovery point moves to snd_nxt.
    #[test]
    fn step_2b_sends_new_data() {
        let mut f = Frto::default();
        f.enter_loss(true, false);
        let mut high = 10_000;
        let a = LossAck { una_advanced: true, can_send_new: true, ..LossAck::default() };
        assert_eq!(f.on_ack(&a, 10_000, &mut high), Verdict::SendNew);
        assert!(f.is_on());
        // Nothing new to send: conventional recovery.
        let mut g = Frto::default();
        g.enter_loss(true, false);
        let mut high = 10_000;
        let a = LossAck { una_advanced: true, ..LossAck::default() };
        assert_eq!(g.on_ack(&a, 10_000, &mut high), Verdict::Continue);
        assert!(!g.is_on());
    }

    #[test]
    fn step_3_tells_spurious_from_real() {
        let mut f = Frto::default();
        f.enter_loss(true, false);
        // After new data went out (snd_nxt beyond the recovery point), an
        // ACK of original data means the timeout was spurious.
        let mut high = 10_000;
        let a = LossAck { una_advanced: true, orig_sack_acked: true, ..LossAck::default() };
        assert_eq!(f.on_ack(&a, 12_000, &mut high), Verdict::Spurious);
        // A SACK (a hole remains): the loss was real, F-RTO ends.
        let a = LossAck { sacked_or_dupack: true, ..LossAck::default() };
        assert_eq!(f.on_ack(&a, 12_000, &mut high), Verdict::Continue);
        assert!(!f.is_on());
        assert_eq!(f.on_ack(&LossAck { orig_sack_acked: true, ..LossAck::default() }, 12_000, &mut high), Verdict::Continue);
    }
}
