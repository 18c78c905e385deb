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
            let removed: Vec<V> = lock(s)
                .extract_if(|k, v| !keep(k, v))
                .map(|(_, v)| v)
                .collect();
            drop(removed);
        }
    }

    /// Removes and returns the value of `key`.
    pub fn remove<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.lock(key).remove(key)
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
