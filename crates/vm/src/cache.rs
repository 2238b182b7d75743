//! A small least-recently-used map keyed by session id, for what a runtime keeps per
//! session in memory (QuickJS REPLs). Capacities are small (tens to hundreds), so
//! eviction scans for the oldest entry instead of keeping a linked list.

use std::collections::HashMap;

/// Values by session id, at most `capacity` of them; inserting past it drops the least
/// recently used.
pub(crate) struct Lru<V> {
    capacity: usize,
    /// Each value with the tick of its last use.
    entries: HashMap<String, (u64, V)>,
    tick: u64,
}

impl<V> Lru<V> {
    pub fn new(capacity: usize) -> Lru<V> {
        Lru { capacity, entries: HashMap::new(), tick: 0 }
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// The value for `key`, marked as just used.
    pub fn get(&mut self, key: &str) -> Option<&V> {
        let tick = self.next_tick();
        let entry = self.entries.get_mut(key)?;
        entry.0 = tick;
        Some(&entry.1)
    }

    /// Keeps `value` under `key` as the most recent, evicting the least recently used
    /// entries beyond the capacity. A capacity of zero keeps nothing.
    pub fn insert(&mut self, key: &str, value: V) {
        let tick = self.next_tick();
        self.entries.insert(key.to_string(), (tick, value));
        self.evict();
    }

    pub fn remove(&mut self, key: &str) -> Option<V> {
        self.entries.remove(key).map(|(_, value)| value)
    }

    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
        self.evict();
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn evict(&mut self) {
        while self.entries.len() > self.capacity {
            let Some(oldest) = self.entries.iter().min_by_key(|(_, (tick, _))| *tick).map(|(key, _)| key.clone())
            else {
                break;
            };
            self.entries.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Lru;

    #[test]
    fn the_least_recently_used_entry_is_evicted_first() {
        let mut cache = Lru::new(2);
        cache.insert("a", 1);
        cache.insert("b", 2);
        assert_eq!(cache.get("a"), Some(&1), "a is now the most recent");
        cache.insert("c", 3);
        assert_eq!(cache.get("b"), None, "b was the least recently used");
        assert_eq!(cache.get("a"), Some(&1));
        assert_eq!(cache.get("c"), Some(&3));
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn lowering_the_capacity_evicts_at_once_and_zero_keeps_nothing() {
        let mut cache = Lru::new(3);
        for (index, key) in ["a", "b", "c"].into_iter().enumerate() {
            cache.insert(key, index);
        }
        cache.set_capacity(1);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.get("c"), Some(&2));
        cache.set_capacity(0);
        assert!(cache.is_empty());
        cache.insert("d", 4);
        assert!(cache.is_empty());
    }

    #[test]
    fn removing_and_reinserting_a_key_replaces_its_value() {
        let mut cache = Lru::new(2);
        cache.insert("a", 1);
        cache.insert("a", 2);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.remove("a"), Some(2));
        assert_eq!(cache.remove("a"), None);
    }
}
