//! How a packet read from the TUN device finds its way through the emulated
//! network (docs/linux-backend.md, "Routing").
//!
//! Every path (a list of link indices) the run can use is known when the
//! emulator starts — each flow's path and return path, the paths of its
//! route changes and of the controller's alternatives, and one default path
//! per pair of hosts — and is interned once, so a frame carries only a path
//! number and a hop count and nothing is allocated per packet.
//!
//! A TCP packet whose (source address, source port) is a flow's client end
//! and whose destination is that flow's server end takes the flow's
//! *current* path; the reverse takes its current return path. Everything
//! else between two hosts takes the pair's default path. A route change
//! switches a flow's current paths: packets already inside the network
//! finish on the path they started on, as in a real network.

use crate::frame::{Route, NO_FLOW};
use crate::ipv4::Header;
use std::collections::HashMap;

const TCP: u8 = 6;

/// One flow of the run, as the router sees it.
#[derive(Clone, Debug)]
pub struct FlowRoute {
    pub id: u32,
    /// (IPv4 address, port) of the load client's socket (it binds a known port).
    pub client: (u32, u16),
    /// (IPv4 address, port) of the load server.
    pub server: (u32, u16),
    /// Current path and return path (path table indices).
    pub path: u16,
    pub ret: u16,
    /// Sequence-space bytes delivered at the far end past the SYN (the
    /// highest byte written out, so retransmissions do not count twice).
    pub delivered: u64,
    isn: Option<u32>,
    hi: u32,
}

impl FlowRoute {
    pub fn new(id: u32, client: (u32, u16), server: (u32, u16), path: u16, ret: u16) -> FlowRoute {
        FlowRoute { id, client, server, path, ret, delivered: 0, isn: None, hi: 0 }
    }

    /// A data-direction packet of this flow left the network.
    pub fn on_delivered(&mut self, seq: u32, seq_len: u32, syn: bool) {
        if syn {
            if self.isn.is_none() {
                self.isn = Some(seq);
                self.hi = seq.wrapping_add(1);
            }
            return;
        }
        if self.isn.is_none() {
            return;
        }
        let end = seq.wrapping_add(seq_len);
        let ahead = end.wrapping_sub(self.hi) as i32;
        if ahead > 0 {
            self.delivered += ahead as u64;
            self.hi = end;
        }
    }
}

#[derive(Default)]
pub struct Routing {
    /// Link indices of each path.
    pub paths: Vec<Vec<u16>>,
    /// Per path: counted as forward (data) traffic in the summary.
    pub forward: Vec<bool>,
    ids: HashMap<Vec<u16>, u16>,
    pairs: HashMap<(u32, u32), u16>,
    pub flows: Vec<FlowRoute>,
    by_client: HashMap<(u32, u16), u16>,
}

impl Routing {
    /// The index of `links` in the path table (added if new).
    pub fn intern(&mut self, links: &[u16], forward: bool) -> u16 {
        if let Some(&i) = self.ids.get(links) {
            self.forward[i as usize] |= forward;
            return i;
        }
        assert!(self.paths.len() < NO_FLOW as usize, "too many paths");
        let i = self.paths.len() as u16;
        self.paths.push(links.to_vec());
        self.forward.push(forward);
        self.ids.insert(links.to_vec(), i);
        i
    }

    /// The default path from host `src` to host `dst` (the first one given stays).
    pub fn add_pair(&mut self, src: u32, dst: u32, path: u16) {
        self.pairs.entry((src, dst)).or_insert(path);
    }

    pub fn has_pair(&self, src: u32, dst: u32) -> bool {
        self.pairs.contains_key(&(src, dst))
    }

    pub fn add_flow(&mut self, f: FlowRoute) -> Result<u16, String> {
        let i = self.flows.len() as u16;
        if self.by_client.contains_key(&f.client) {
            return Err(format!("flow {}: client port {} of its host is used by another flow", f.id, f.client.1));
        }
        self.by_client.insert(f.client, i);
        self.flows.push(f);
        Ok(i)
    }

    /// The flow index of flow id `id`.
    pub fn flow_index(&self, id: u32) -> Option<u16> {
        self.flows.iter().position(|f| f.id == id).map(|i| i as u16)
    }

    /// Where a packet goes; None: not between two known hosts.
    pub fn classify(&self, h: &Header) -> Option<Route> {
        if h.proto == TCP && !self.flows.is_empty() {
            if let Some(&i) = self.by_client.get(&(h.src, h.sport)) {
                let f = &self.flows[i as usize];
                if f.server == (h.dst, h.dport) {
                    return Some(Route { path: f.path, flow: i, data: true });
                }
            }
            if let Some(&i) = self.by_client.get(&(h.dst, h.dport)) {
                let f = &self.flows[i as usize];
                if f.server == (h.src, h.sport) {
                    return Some(Route { path: f.ret, flow: i, data: false });
                }
            }
        }
        self.pairs.get(&(h.src, h.dst)).map(|&p| Route { path: p, flow: NO_FLOW, data: self.forward[p as usize] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv4::{parse, tests::packet};

    fn ip(b: [u8; 4]) -> u32 {
        u32::from_be_bytes(b)
    }

    #[test]
    fn flows_by_port_then_host_pairs() {
        let (a, b) = ([10, 0, 0, 2], [10, 0, 0, 6]);
        let mut r = Routing::default();
        let p0 = r.intern(&[0, 1], true);
        let p1 = r.intern(&[2, 3], false);
        let p2 = r.intern(&[4], true);
        assert_eq!(r.intern(&[0, 1], false), p0);
        r.add_pair(ip(a), ip(b), p0);
        r.add_pair(ip(b), ip(a), p1);
        r.add_flow(FlowRoute::new(7, (ip(a), 10007), (ip(b), 5201), p2, p1)).unwrap();
        assert!(r.add_flow(FlowRoute::new(8, (ip(a), 10007), (ip(b), 5201), p2, p1)).is_err());
        let c = |s, d, sp, dp| r.classify(&parse(&packet(s, d, sp, dp, 60, 0)).unwrap());
        assert_eq!(c(a, b, 10007, 5201), Some(Route { path: p2, flow: 0, data: true }));
        assert_eq!(c(b, a, 5201, 10007), Some(Route { path: p1, flow: 0, data: false }));
        // Another port of the same hosts: the pair's default path.
        assert_eq!(c(a, b, 10008, 5201), Some(Route { path: p0, flow: NO_FLOW, data: true }));
        assert_eq!(c(a, [10, 0, 0, 10], 10007, 5201), None);
    }

    #[test]
    fn delivered_bytes_follow_the_highest_sequence_number() {
        let mut f = FlowRoute::new(0, (0, 0), (0, 0), 0, 0);
        f.on_delivered(5, 100, false); // before the SYN: ignored
        assert_eq!(f.delivered, 0);
        f.on_delivered(u32::MAX - 10, 1, true);
        let mut seq = u32::MAX - 9;
        for _ in 0..10 {
            f.on_delivered(seq, 1000, false);
            seq = seq.wrapping_add(1000);
        }
        f.on_delivered(u32::MAX - 9, 1000, false); // a retransmission
        assert_eq!(f.delivered, 10_000);
    }
}
