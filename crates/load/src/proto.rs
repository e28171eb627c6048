//! The header a client sends first on every connection (44 bytes, little
//! endian), so the server knows the flow, what to do and which CCA to use:
//!
//! | bytes  | field                                   |
//! |--------|-----------------------------------------|
//! | 0..4   | magic `CCB1`                            |
//! | 4..8   | flow id (u32)                           |
//! | 8      | kind: 0 bulk, 1 rpc, 2 transfer         |
//! | 9      | length of the CCA name (1..=15)         |
//! | 10..12 | zero                                    |
//! | 12..20 | request bytes (u64; 0 for bulk; transfer: its size) |
//! | 20..28 | response bytes (u64; 0 for bulk)        |
//! | 28..44 | CCA name, NUL-padded                    |

use serde::Deserialize;

pub const HEADER_LEN: usize = 44;
const MAGIC: &[u8; 4] = b"CCB1";

#[derive(Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Bulk,
    Rpc,
    /// `size_bytes`, then the client closes its sending side.
    Transfer,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Bulk => "bulk",
            Kind::Rpc => "rpc",
            Kind::Transfer => "transfer",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub flow_id: u32,
    pub kind: Kind,
    pub cca: String,
    pub request_bytes: u64,
    pub response_bytes: u64,
}

impl Header {
    pub fn encode(&self) -> Result<[u8; HEADER_LEN], String> {
        let name = self.cca.as_bytes();
        if name.is_empty() || name.len() > 15 {
            return Err(format!("flow {}: CCA name {:?} must be 1 to 15 bytes", self.flow_id, self.cca));
        }
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(MAGIC);
        b[4..8].copy_from_slice(&self.flow_id.to_le_bytes());
        b[8] = match self.kind {
            Kind::Bulk => 0,
            Kind::Rpc => 1,
            Kind::Transfer => 2,
        };
        b[9] = name.len() as u8;
        b[12..20].copy_from_slice(&self.request_bytes.to_le_bytes());
        b[20..28].copy_from_slice(&self.response_bytes.to_le_bytes());
        b[28..28 + name.len()].copy_from_slice(name);
        Ok(b)
    }

    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Header, String> {
        if &b[0..4] != MAGIC {
            return Err("not a ccbench load connection (bad magic)".into());
        }
        let kind = match b[8] {
            0 => Kind::Bulk,
            1 => Kind::Rpc,
            2 => Kind::Transfer,
            k => return Err(format!("unknown flow kind {k}")),
        };
        let n = b[9] as usize;
        if n == 0 || n > 15 {
            return Err(format!("bad CCA name length {n}"));
        }
        let cca = std::str::from_utf8(&b[28..28 + n]).map_err(|_| "CCA name is not UTF-8".to_string())?.to_string();
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        Ok(Header {
            flow_id: u32::from_le_bytes(b[4..8].try_into().unwrap()),
            kind,
            cca,
            request_bytes: u64_at(12),
            response_bytes: u64_at(20),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_errors() {
        let h = Header { flow_id: 7, kind: Kind::Rpc, cca: "cubic".into(), request_bytes: 10_000, response_bytes: 100 };
        let b = h.encode().unwrap();
        assert_eq!(Header::decode(&b).unwrap(), h);
        let mut bad = b;
        bad[0] = b'X';
        assert!(Header::decode(&bad).is_err());
        let long = Header { cca: "x".repeat(16), ..h };
        assert!(long.encode().is_err());
    }
}
