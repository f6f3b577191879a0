//! Which waiting connection to close when a server holds as many as it may: the oldest one of
//! the peer that holds the most.
//!
//! Why this rule. Connections that have not yet spoken are told apart only by their peer and
//! their age. A real client (the Field System, a scraper, a probe or transfer client) speaks
//! within milliseconds of its connect; a flood's connections never do. So:
//! - *The peer holding the most pays first*: a flood from one host (or one IPv6 /64, which one
//!   host usually owns whole) never closes a connection of another peer while it holds more than
//!   that peer. This is the per-peer limit, and a fair one: a fixed cap per peer would only
//!   shrink what the flood's own host gets, and a client sharing the attacker's address (all of
//!   127.0.0.1, or a NAT) would gain nothing from it.
//! - *Within that peer, the oldest goes*: the older a silent connection, the less likely it is
//!   a client about to speak. A client sharing the flood's address is closed only if more than
//!   the server's capacity of connections arrived from that address while it was thinking: with
//!   capacity C and a flood of R connections a second, a client that speaks within C/R seconds
//!   is never closed (4096 idle places: 1.4 s under 3000 connections a second).
//! - *Not* "refuse the newcomer while every holder is younger than a grace period": that turns
//!   any flood faster than capacity/grace into a lock-out of every new client, the Field System
//!   included, for as long as it lasts.
//!
//! Capacity is what makes the rule work, so connections that have not sent a byte hold only a
//! descriptor and an entry here (no thread): the accept loop watches them with epoll and starts
//! a handler when the first byte (or the end) arrives.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

/// The identity eviction counts connections by: an IPv4 address, or an IPv6 /64 (an IPv4 peer
/// on an IPv6 socket counts as its IPv4 address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PeerKey(u128);

impl PeerKey {
    /// The key of a peer address.
    pub fn of(ip: IpAddr) -> PeerKey {
        match ip {
            IpAddr::V4(v4) => PeerKey(v4.to_ipv6_mapped().to_bits()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => PeerKey(v4.to_ipv6_mapped().to_bits()),
                None => PeerKey(v6.to_bits() & !u128::from(u64::MAX)),
            },
        }
    }
}

/// Waiting connections by id (ids grow with accept time, so the smallest is the oldest),
/// counted per peer.
#[derive(Debug)]
pub struct ByPeer<T> {
    entries: BTreeMap<u64, (PeerKey, T)>,
    per_peer: HashMap<PeerKey, BTreeSet<u64>>,
    /// (connections held, peer): the last is the peer holding the most.
    load: BTreeSet<(usize, PeerKey)>,
}

impl<T> Default for ByPeer<T> {
    fn default() -> Self {
        ByPeer {
            entries: BTreeMap::new(),
            per_peer: HashMap::new(),
            load: BTreeSet::new(),
        }
    }
}

impl<T> ByPeer<T> {
    /// Connections held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `id` is held.
    pub fn contains(&self, id: u64) -> bool {
        self.entries.contains_key(&id)
    }

    /// Connections `peer` holds.
    pub fn held_by(&self, peer: PeerKey) -> usize {
        self.per_peer.get(&peer).map_or(0, BTreeSet::len)
    }

    /// Hold `value` as connection `id` of `peer` (ids must grow: the smallest is the oldest).
    pub fn insert(&mut self, id: u64, peer: PeerKey, value: T) {
        if let Some(old) = self.remove(id) {
            drop(old);
        }
        let ids = self.per_peer.entry(peer).or_default();
        self.load.remove(&(ids.len(), peer));
        ids.insert(id);
        self.load.insert((ids.len(), peer));
        self.entries.insert(id, (peer, value));
    }

    /// Stop holding `id`.
    pub fn remove(&mut self, id: u64) -> Option<T> {
        let (peer, value) = self.entries.remove(&id)?;
        if let Some(ids) = self.per_peer.get_mut(&peer) {
            self.load.remove(&(ids.len(), peer));
            ids.remove(&id);
            if ids.is_empty() {
                self.per_peer.remove(&peer);
            } else {
                self.load.insert((ids.len(), peer));
            }
        }
        Some(value)
    }

    /// The oldest connection held, with its id.
    pub fn oldest(&self) -> Option<(u64, &T)> {
        self.entries.first_key_value().map(|(id, (_, v))| (*id, v))
    }

    /// The connection to close for a newcomer: the oldest of the peer holding the most (of
    /// several holding as many, the one whose oldest is oldest).
    pub fn victim(&self) -> Option<u64> {
        let &(most, _) = self.load.last()?;
        self.load
            .range((most, PeerKey(0))..)
            .filter_map(|(_, peer)| self.per_peer.get(peer)?.first().copied())
            .min()
    }

    /// Close the victim: stop holding it and return it.
    pub fn evict(&mut self) -> Option<(u64, T)> {
        let id = self.victim()?;
        self.remove(id).map(|v| (id, v))
    }

    /// Stop holding every connection; return them oldest first.
    pub fn drain(&mut self) -> Vec<(u64, T)> {
        self.per_peer.clear();
        self.load.clear();
        std::mem::take(&mut self.entries)
            .into_iter()
            .map(|(id, (_, v))| (id, v))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(s: &str) -> PeerKey {
        PeerKey::of(s.parse().unwrap())
    }

    #[test]
    fn an_ipv6_host_is_its_64_and_a_mapped_ipv4_is_the_ipv4() {
        assert_eq!(key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff::9"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("::ffff:10.1.1.5"), key("10.1.1.5"));
        assert_ne!(key("10.1.1.5"), key("10.1.1.6"));
    }

    #[test]
    fn the_peer_holding_most_loses_its_oldest() {
        let mut t = ByPeer::default();
        let (fs, flood) = (key("10.0.0.2"), key("10.0.0.3"));
        t.insert(0, fs, "fs");
        for id in 1..=5 {
            t.insert(id, flood, "flood");
        }
        for want in 1..=4 {
            assert_eq!(t.evict(), Some((want, "flood")));
        }
        // One each now: the oldest of the two goes.
        assert_eq!(t.evict(), Some((0, "fs")));
        assert_eq!(t.evict(), Some((5, "flood")));
        assert!(t.is_empty() && t.evict().is_none());
    }

    proptest! {
        /// Whatever the arrivals, removals and evictions: the counts per peer add up, the
        /// victim belongs to a peer holding the most, and it is that peer's oldest.
        #[test]
        fn eviction_takes_the_heaviest_peers_oldest(ops in proptest::collection::vec((0u8..4, 0u8..6), 1..200)) {
            let mut t = ByPeer::default();
            let mut model: BTreeMap<u64, PeerKey> = BTreeMap::new();
            let mut next = 0u64;
            for (op, p) in ops {
                let peer = PeerKey(u128::from(p));
                match op {
                    0 | 1 => {
                        t.insert(next, peer, ());
                        model.insert(next, peer);
                        next += 1;
                    }
                    2 => {
                        let id = model.keys().nth(usize::from(p)).copied();
                        if let Some(id) = id {
                            prop_assert!(t.remove(id).is_some());
                            model.remove(&id);
                        }
                    }
                    _ => {
                        let most = (0..6u128).map(|q| model.values().filter(|k| k.0 == q).count()).max().unwrap_or(0);
                        match t.evict() {
                            None => prop_assert!(model.is_empty()),
                            Some((id, ())) => {
                                let victim = model.remove(&id).unwrap();
                                let held = model.values().filter(|k| **k == victim).count() + 1;
                                prop_assert_eq!(held, most);
                                prop_assert!(model.iter().all(|(i, k)| *k != victim || *i > id));
                            }
                        }
                    }
                }
                prop_assert_eq!(t.len(), model.len());
                for q in 0..6u128 {
                    prop_assert_eq!(t.held_by(PeerKey(q)), model.values().filter(|k| k.0 == q).count());
                }
            }
        }
    }
}
