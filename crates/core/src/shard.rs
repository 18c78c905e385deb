//! A hash map split into independently locked shards, so that operations on
//! unrelated keys rarely contend. Used for the hub's channels, the in-memory
//! broker's channel states and the node's client registry.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::{Mutex, MutexGuard};

/// Locks a mutex, ignoring poisoning: every critical section in the core leaves
/// its data consistent at each step, so a panic elsewhere does not corrupt it.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Gives back a map's table when it is at most a quarter full and larger
/// than a small one: a map that held a burst (thousands of one-off
/// channels, connections) otherwise keeps its peak table for the life of
/// the process (issue 30, part 5). Called where entries are removed; the
/// quarter keeps a map that shrinks from growing again at once.
pub fn shrink_sparse<K: Hash + Eq, V, S: BuildHasher>(m: &mut HashMap<K, V, S>) {
    const SMALL: usize = 64;
    if m.capacity() > SMALL && m.len() * 4 < m.capacity() {
        m.shrink_to(m.len() * 2);
    }
}

/// `N` shards of `HashMap<K, V>`, each behind its own mutex.
pub struct Sharded<K, V> {
    hasher: RandomState,
    shards: Box<[Mutex<HashMap<K, V>>]>,
}

impl<K, V> std::fmt::Debug for Sharded<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sharded")
            .field("shards", &self.shards.len())
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq, V> Sharded<K, V> {
    /// An empty map with `shards` shards (at least one).
    pub fn new(shards: usize) -> Sharded<K, V> {
        Sharded {
            hasher: RandomState::new(),
            shards: (0..shards.max(1))
                .map(|_| Mutex::new(HashMap::new()))
                .collect(),
        }
    }

    /// Locks the shard that holds `key`.
    pub fn lock<Q>(&self, key: &Q) -> MutexGuard<'_, HashMap<K, V>>
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        let i = (self.hasher.hash_one(key) as usize) % self.shards.len();
        lock(&self.shards[i])
    }

    /// Total number of entries (locks each shard in turn).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
    }

    /// True when no shard holds an entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keeps only the entries for which `keep` returns true (one shard locked at
    /// a time). Removed values are dropped after their shard is unlocked.
    pub fn retain(&self, mut keep: impl FnMut(&K, &V) -> bool) {
        for s in self.shards.iter() {
            let mut shard = lock(s);
            let removed: Vec<V> = shard
                .extract_if(|k, v| !keep(k, v))
                .map(|(_, v)| v)
                .collect();
            shrink_sparse(&mut shard);
            drop(shard);
            drop(removed);
        }
    }

    /// Removes and returns the value of `key`.
    pub fn remove<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut shard = self.lock(key);
        let v = shard.remove(key);
        shrink_sparse(&mut shard);
        v
    }

    /// Calls `f` on every key, one shard at a time, with that shard locked:
    /// `f` must be quick and must not touch this map. (For sets: `V = ()`.)
    pub fn for_each_key(&self, mut f: impl FnMut(&K)) {
        for s in self.shards.iter() {
            for k in lock(s).keys() {
                f(k);
            }
        }
    }

    /// Calls `f` on every value, one shard at a time, with that shard locked:
    /// `f` must be quick and must not touch this map.
    pub fn for_each(&self, mut f: impl FnMut(&V)) {
        for s in self.shards.iter() {
            for v in lock(s).values() {
                f(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_emptied_after_a_burst_gives_its_table_back() {
        let m: Sharded<u32, u32> = Sharded::new(1);
        for i in 0..10_000 {
            m.lock(&i).insert(i, i);
        }
        let peak = m.lock(&0).capacity();
        assert!(peak >= 10_000);
        for i in 0..9_990 {
            m.remove(&i);
        }
        let after = m.lock(&0).capacity();
        assert!(after < peak / 8, "{after} of {peak}");
        assert_eq!(m.len(), 10);
        m.retain(|_, _| false);
        assert!(m.lock(&0).capacity() <= 64);
        // A small map keeps its table.
        let mut small: HashMap<u32, u32> = (0..40)
            .collect::<Vec<_>>()
            .into_iter()
            .map(|i| (i, i))
            .collect();
        small.retain(|k, _| *k < 2);
        // Read after `retain`: the tombstones it may leave lower
        // `capacity()` by a hash-dependent amount.
        let cap = small.capacity();
        shrink_sparse(&mut small);
        assert_eq!(small.capacity(), cap);
    }
}
