//! Redis Cluster's slot map, fixed at start-up: which node serves which of the 16384 hash
//! slots, and the replies cluster-aware clients read it from (`CLUSTER SLOTS`, `SHARDS`, `NODES`).
//!
//! A key's slot is CRC16 (XMODEM, as Redis) of the key, or of its hash tag — the bytes between
//! the first `{` and the next `}` when that is not empty — modulo 16384. The map never changes
//! while a node runs: there is no gossip and no failover. Every node is started with the whole
//! map, so every node redirects to the same owner.

use crate::resp::Reply;
use bytes::Bytes;

pub const SLOTS: u16 = 16384;

/// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, as Redis Cluster uses.
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

/// The slot of `key`, honouring hash tags.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) % SLOTS
}

/// One node of the cluster and the slot ranges it serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub id: String,
    pub host: String,
    pub port: u16,
    pub ranges: Vec<(u16, u16)>,
}

/// The whole map, and which node is this one.
#[derive(Clone, Debug)]
pub struct ClusterMap {
    pub nodes: Vec<Node>,
    pub myself: usize,
    /// Owner of each slot, as an index into `nodes`.
    owner: Vec<Option<usize>>,
}

/// Parses `A-B` or `A` ranges joined by `+` (`0-100+200-300`).
pub fn parse_ranges(text: &str) -> Result<Vec<(u16, u16)>, String> {
    text.split('+')
        .map(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            let a: u16 = a.trim().parse().map_err(|_| format!("bad slot range {r:?}"))?;
            let b: u16 = b.trim().parse().map_err(|_| format!("bad slot range {r:?}"))?;
            if a > b || b >= SLOTS {
                return Err(format!("bad slot range {r:?} (slots are 0-{})", SLOTS - 1));
            }
            Ok((a, b))
        })
        .collect()
}

/// Parses `ID=HOST:PORT@RANGES` (a peer given with `--cluster-node`).
pub fn parse_node(text: &str) -> Result<Node, String> {
    let (id, rest) = text.split_once('=').ok_or_else(|| format!("expected ID=HOST:PORT@SLOTS, got {text:?}"))?;
    let (addr, ranges) = rest.split_once('@').ok_or_else(|| format!("expected ID=HOST:PORT@SLOTS, got {text:?}"))?;
    let (host, port) = addr.rsplit_once(':').ok_or_else(|| format!("expected HOST:PORT, got {addr:?}"))?;
    let port = port.parse().map_err(|_| format!("bad port in {addr:?}"))?;
    Ok(Node { id: id.to_string(), host: host.to_string(), port, ranges: parse_ranges(ranges)? })
}

impl ClusterMap {
    /// Builds the map; two nodes claiming one slot is an error.
    pub fn new(nodes: Vec<Node>, myself: usize) -> Result<ClusterMap, String> {
        let mut owner = vec![None; SLOTS as usize];
        for (i, node) in nodes.iter().enumerate() {
            if nodes[..i].iter().any(|n| n.id == node.id) {
                return Err(format!("node id {} given twice", node.id));
            }
            for &(a, b) in &node.ranges {
                for slot in a..=b {
                    if let Some(other) = owner[slot as usize].replace(i) {
                        return Err(format!("slot {slot} claimed by {} and {}", nodes[other].id, node.id));
                    }
                }
            }
        }
        Ok(ClusterMap { nodes, myself, owner })
    }

    pub fn me(&self) -> &Node {
        &self.nodes[self.myself]
    }

    /// `None` when this node serves `slot`; otherwise the error reply that sends the client on.
    pub fn redirect(&self, slot: u16) -> Option<Reply> {
        match self.owner[slot as usize] {
            Some(i) if i == self.myself => None,
            Some(i) => Some(Reply::err(format!("MOVED {slot} {}:{}", self.nodes[i].host, self.nodes[i].port))),
            None => Some(Reply::err(format!("CLUSTERDOWN Hash slot {slot} not served"))),
        }
    }

    fn assigned(&self) -> usize {
        self.owner.iter().filter(|o| o.is_some()).count()
    }

    pub fn info(&self) -> String {
        let assigned = self.assigned();
        let state = if assigned == SLOTS as usize { "ok" } else { "fail" };
        let serving = self.nodes.iter().filter(|n| !n.ranges.is_empty()).count();
        format!(
            "cluster_enabled:1\r\ncluster_state:{state}\r\ncluster_slots_assigned:{assigned}\r\n\
             cluster_slots_ok:{assigned}\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\n\
             cluster_known_nodes:{}\r\ncluster_size:{serving}\r\ncluster_current_epoch:1\r\n\
             cluster_my_epoch:1\r\n",
            self.nodes.len()
        )
    }

    fn node_triple(node: &Node) -> Reply {
        Reply::Array(vec![Reply::bulk(node.host.clone()), Reply::Int(node.port.into()), Reply::bulk(node.id.clone())])
    }

    pub fn slots_reply(&self) -> Reply {
        let mut ranges: Vec<(u16, u16, &Node)> =
            self.nodes.iter().flat_map(|n| n.ranges.iter().map(move |&(a, b)| (a, b, n))).collect();
        ranges.sort_by_key(|r| r.0);
        Reply::Array(
            ranges
                .into_iter()
                .map(|(a, b, n)| Reply::Array(vec![Reply::Int(a.into()), Reply::Int(b.into()), Self::node_triple(n)]))
                .collect(),
        )
    }

    pub fn shards_reply(&self) -> Reply {
        Reply::Array(
            self.nodes
                .iter()
                .map(|n| {
                    let slots =
                        n.ranges.iter().flat_map(|&(a, b)| [Reply::Int(a.into()), Reply::Int(b.into())]).collect();
                    let node = Reply::Map(vec![
                        (Reply::bulk("id"), Reply::bulk(n.id.clone())),
                        (Reply::bulk("port"), Reply::Int(n.port.into())),
                        (Reply::bulk("ip"), Reply::bulk(n.host.clone())),
                        (Reply::bulk("endpoint"), Reply::bulk(n.host.clone())),
                        (Reply::bulk("role"), Reply::bulk("master")),
                        (Reply::bulk("replication-offset"), Reply::Int(0)),
                        (Reply::bulk("health"), Reply::bulk("online")),
                    ]);
                    Reply::Map(vec![
                        (Reply::bulk("slots"), Reply::Array(slots)),
                        (Reply::bulk("nodes"), Reply::Array(vec![node])),
                    ])
                })
                .collect(),
        )
    }

    /// `CLUSTER NODES`, the text redis-benchmark `--cluster` and redis-cli read.
    pub fn nodes_text(&self) -> Bytes {
        let mut out = String::new();
        for (i, n) in self.nodes.iter().enumerate() {
            let flags = if i == self.myself { "myself,master" } else { "master" };
            out.push_str(&format!(
                "{} {}:{}@{} {flags} - 0 0 1 connected",
                n.id,
                n.host,
                n.port,
                u32::from(n.port) + 10000
            ));
            for &(a, b) in &n.ranges {
                if a == b {
                    out.push_str(&format!(" {a}"));
                } else {
                    out.push_str(&format!(" {a}-{b}"));
                }
            }
            out.push('\n');
        }
        Bytes::from(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT` on redis-server.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"{user1000}.followers"));
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % SLOTS);
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
    }

    #[test]
    fn map_redirects_to_owners() {
        let nodes =
            vec![parse_node("a=127.0.0.1:7001@0-8191").unwrap(), parse_node("b=127.0.0.1:7002@8192-16383").unwrap()];
        let map = ClusterMap::new(nodes, 0).unwrap();
        assert_eq!(map.redirect(5), None);
        assert_eq!(map.redirect(9000), Some(Reply::err("MOVED 9000 127.0.0.1:7002")));
        assert!(map.info().contains("cluster_state:ok"));
        let clash = vec![parse_node("a=h:1@0-10").unwrap(), parse_node("b=h:2@10-20").unwrap()];
        assert!(ClusterMap::new(clash, 0).is_err());
        assert!(parse_ranges("5-3").is_err());
        assert_eq!(parse_ranges("1-2+7").unwrap(), vec![(1, 2), (7, 7)]);
    }
}
