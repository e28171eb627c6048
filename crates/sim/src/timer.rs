//! A re-armable timer over an event queue that cannot cancel: the owner
//! keeps the deadline, and only schedules an event when the new deadline is
//! earlier than every event already pending. A firing event that finds the
//! deadline moved later re-schedules itself once. This keeps per-ACK RTO
//! re-arming free of event-queue traffic.

use netcore::Nanos;

#[derive(Clone, Copy, Debug, Default)]
pub struct Timer {
    deadline: Option<Nanos>,
    pending: Option<Nanos>,
}

impl Timer {
    /// Set the deadline; returns a time to schedule an event at, if needed.
    #[must_use]
    pub fn arm(&mut self, at: Nanos) -> Option<Nanos> {
        self.deadline = Some(at);
        match self.pending {
            Some(p) if p <= at => None,
            _ => {
                self.pending = Some(at);
                Some(at)
            }
        }
    }

    pub fn cancel(&mut self) {
        self.deadline = None;
    }

    pub fn is_armed(&self) -> bool {
        self.deadline.is_some()
    }

    /// When the timer expires, if armed.
    pub fn deadline(&self) -> Option<Nanos> {
        self.deadline
    }

    /// An event for this timer popped at `now`. Returns whether the timer
    /// expired, and a time to re-schedule at when the deadline moved later.
    #[must_use]
    pub fn fire(&mut self, now: Nanos) -> (bool, Option<Nanos>) {
        if self.pending == Some(now) {
            self.pending = None;
        }
        match self.deadline {
            None => (false, None),
            Some(d) if d <= now => {
                self.deadline = None;
                (true, None)
            }
            Some(d) => match self.pending {
                Some(p) if p <= d => (false, None),
                _ => {
                    self.pending = Some(d);
                    (false, Some(d))
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rearm_later_reschedules_once_and_cancel_suppresses() {
        let mut t = Timer::default();
        assert_eq!(t.arm(100), Some(100));
        assert_eq!(t.arm(150), None); // later: no new event
        assert_eq!(t.fire(100), (false, Some(150)));
        assert_eq!(t.fire(150), (true, None));
        assert_eq!(t.arm(200), Some(200));
        assert_eq!(t.arm(120), Some(120)); // earlier: new event
        assert_eq!(t.fire(120), (true, None));
        assert_eq!(t.fire(200), (false, None)); // stale
        assert_eq!(t.arm(300), Some(300));
        t.cancel();
        assert_eq!(t.fire(300), (false, None));
    }
}
