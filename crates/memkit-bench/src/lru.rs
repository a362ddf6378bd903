//! A plain LRU with a byte budget: the baseline eviction policy of the hit-ratio bench.
//!
//! Keys are key numbers (the trace's ids) and each entry carries the charge the caller gives
//! it, so one structure simulates "memcached's slab memory" (charge = chunk size) and "memkit's
//! footprint" (charge = key + value + measured overhead) alike. A hit moves the entry to the
//! front; an insert goes to the front and evicts from the back until the budget holds.
//! Nodes live in one vector linked by index: no allocation per request once warm.

use hashbrown::HashMap;

const NIL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Node {
    key: u64,
    charge: u32,
    prev: u32,
    next: u32,
}

/// LRU over `u64` keys holding at most `budget` bytes of charges.
#[derive(Debug)]
pub struct ByteLru {
    map: HashMap<u64, u32>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
    used: u64,
    budget: u64,
    evictions: u64,
}

impl ByteLru {
    /// An empty LRU of `budget` bytes.
    pub fn new(budget: u64) -> Self {
        ByteLru {
            map: HashMap::new(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            used: 0,
            budget,
            evictions: 0,
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Bytes of charges held.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Entries evicted so far.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Looks `key` up; a hit becomes the most recently used.
    pub fn get(&mut self, key: u64) -> bool {
        match self.map.get(&key) {
            Some(&i) => {
                self.unlink(i);
                self.push_front(i);
                true
            }
            None => false,
        }
    }

    /// Inserts or replaces `key` with `charge` bytes, evicting from the back as needed.
    /// An entry larger than the whole budget is not stored.
    pub fn insert(&mut self, key: u64, charge: u32) {
        if let Some(&i) = self.map.get(&key) {
            self.used -= u64::from(self.nodes[i as usize].charge);
            self.nodes[i as usize].charge = charge;
            self.used += u64::from(charge);
            self.unlink(i);
            self.push_front(i);
        } else {
            if u64::from(charge) > self.budget {
                return;
            }
            let node = Node {
                key,
                charge,
                prev: NIL,
                next: NIL,
            };
            let i = match self.free.pop() {
                Some(i) => {
                    self.nodes[i as usize] = node;
                    i
                }
                None => {
                    self.nodes.push(node);
                    (self.nodes.len() - 1) as u32
                }
            };
            self.map.insert(key, i);
            self.used += u64::from(charge);
            self.push_front(i);
        }
        while self.used > self.budget {
            let t = self.tail;
            let Node { key, charge, .. } = self.nodes[t as usize];
            self.unlink(t);
            self.map.remove(&key);
            self.free.push(t);
            self.used -= u64::from(charge);
            self.evictions += 1;
        }
    }

    fn unlink(&mut self, i: u32) {
        let Node { prev, next, .. } = self.nodes[i as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nodes[next as usize].prev = prev;
        }
    }

    fn push_front(&mut self, i: u32) {
        let old = self.head;
        self.nodes[i as usize].prev = NIL;
        self.nodes[i as usize].next = old;
        if old == NIL {
            self.tail = i;
        } else {
            self.nodes[old as usize].prev = i;
        }
        self.head = i;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_by_bytes() {
        let mut l = ByteLru::new(30);
        l.insert(1, 10);
        l.insert(2, 10);
        l.insert(3, 10);
        assert!(l.get(1)); // order now 1, 3, 2
        l.insert(4, 10); // evicts 2
        assert!(!l.get(2));
        assert!(l.get(3) && l.get(1) && l.get(4));
        l.insert(5, 20); // evicts 3 and 1 (LRU order: 3, 1, 4)
        assert!(!l.get(3) && !l.get(1));
        assert!(l.get(4) && l.get(5));
        assert_eq!(l.used(), 30);
        assert_eq!(l.len(), 2);
        assert_eq!(l.evictions(), 3);
        l.insert(6, 31); // larger than the budget: not stored
        assert!(!l.get(6));
        l.insert(5, 5); // replace shrinks the charge
        assert_eq!(l.used(), 15);
    }
}
