//! TCP endpoints. A connection is one [`Sender`] and one [`Receiver`]; data
//! flows one way. An RPC flow uses two connections (request and response
//! streams) that share one handshake.

mod receiver;
mod sender;

pub use receiver::Receiver;
pub use sender::{Sender, SenderStats};

use crate::packet::Packet;
use netcore::Nanos;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerKind {
    Rto,
    Pace,
    Reorder,
    DelAck,
}

/// What an endpoint asks the world to do: packets to put on the wire and
/// timers to schedule. Reused between calls so nothing is allocated per packet.
#[derive(Default)]
pub struct Out {
    pub pkts: Vec<Packet>,
    pub timers: Vec<(Nanos, u32, TimerKind)>,
}

impl Out {
    pub fn clear(&mut self) {
        self.pkts.clear();
        self.timers.clear();
    }
}
