//! [`Section`]: one section of the configuration (`[vnic.*]`, ...), a
//! persistent ordered map with the `BTreeMap` methods the project uses.
//!
//! A clone shares every node with the original, and an insert or removal
//! copies only the path to its key (O(log n)). So a verb builds the next
//! configuration at the cost of what it changes while readers keep the
//! snapshot they hold, and [`Section::diff`] skips the nodes two
//! configurations share: comparing the configurations before and after a
//! verb costs what the verb changed, not what is there.

use std::borrow::Borrow;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A persistent ordered map (see the module documentation).
#[derive(Clone, PartialEq, Eq)]
pub struct Section<K: Ord + Clone, V: Clone>(imbl::OrdMap<K, V>);

/// One difference between two sections: the key, and its value before and
/// after (`None`: absent on that side).
pub type Change<'a, K, V> = (&'a K, Option<&'a V>, Option<&'a V>);

impl<K: Ord + Clone, V: Clone> Section<K, V> {
    /// An empty section.
    pub fn new() -> Self {
        Self(imbl::OrdMap::new())
    }

    /// How many entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of `k`.
    pub fn get<Q: Ord + ?Sized>(&self, k: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.0.get(k)
    }

    /// The stored key and value of `k`.
    pub fn get_key_value<Q: Ord + ?Sized>(&self, k: &Q) -> Option<(&K, &V)>
    where
        K: Borrow<Q>,
    {
        self.0.get_key_value(k)
    }

    /// Whether `k` is there.
    pub fn contains_key<Q: Ord + ?Sized>(&self, k: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.0.contains_key(k)
    }

    /// The value of `k`, to change (copies the path to it if shared).
    pub fn get_mut<Q: Ord + ?Sized>(&mut self, k: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        self.0.get_mut(k)
    }

    /// Sets `k`; returns the value it had.
    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        self.0.insert(k, v)
    }

    /// Removes `k`; returns the value it had.
    pub fn remove<Q: Ord + ?Sized>(&mut self, k: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.0.remove(k)
    }

    /// The value of `k`, inserted as `V::default()` first if missing.
    pub fn get_or_default(&mut self, k: K) -> &mut V
    where
        V: Default,
    {
        self.0.entry(k).or_default()
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// Keeps only the entries `keep` accepts: a removal per entry that goes.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &V) -> bool) {
        let gone: Vec<K> =
            self.0.iter().filter(|(k, v)| !keep(k, v)).map(|(k, _)| k.clone()).collect();
        for k in gone {
            self.0.remove(&k);
        }
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> {
        self.0.iter()
    }

    /// Keys in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &K> {
        self.0.keys()
    }

    /// Values in key order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> {
        self.0.values()
    }

    /// Whether both are the same allocation (then they are equal, and
    /// [`Section::diff`] is empty at once).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        self.0.ptr_eq(&other.0)
    }

    /// What differs from `self` to `other`, in key order, skipping shared
    /// nodes.
    pub fn diff<'a>(&'a self, other: &'a Self) -> impl Iterator<Item = Change<'a, K, V>>
    where
        V: PartialEq,
    {
        use imbl::ordmap::DiffItem;
        self.0.diff(&other.0).map(|d| match d {
            DiffItem::Add(k, v) => (k, None, Some(v)),
            DiffItem::Update { old: (k, a), new: (_, b) } => (k, Some(a), Some(b)),
            DiffItem::Remove(k, v) => (k, Some(v), None),
        })
    }
}

impl<K: Ord + Clone, V: Clone> Default for Section<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Ord + Clone + fmt::Debug, V: Clone + fmt::Debug> fmt::Debug for Section<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.0.iter()).finish()
    }
}

impl<K: Ord + Clone, V: Clone, Q: Ord + ?Sized> std::ops::Index<&Q> for Section<K, V>
where
    K: Borrow<Q>,
{
    type Output = V;
    fn index(&self, k: &Q) -> &V {
        self.0.get(k).expect("no entry found for key")
    }
}

impl<K: Ord + Clone, V: Clone> FromIterator<(K, V)> for Section<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(it: I) -> Self {
        Self(it.into_iter().collect())
    }
}

impl<K: Ord + Clone, V: Clone> Extend<(K, V)> for Section<K, V> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, it: I) {
        self.0.extend(it)
    }
}

impl<K: Ord + Clone, V: Clone, const N: usize> From<[(K, V); N]> for Section<K, V> {
    fn from(a: [(K, V); N]) -> Self {
        a.into_iter().collect()
    }
}

impl<'a, K: Ord + Clone, V: Clone> IntoIterator for &'a Section<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = imbl::ordmap::Iter<'a, K, V, imbl::shared_ptr::DefaultSharedPtr>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<K: Ord + Clone + Serialize, V: Clone + Serialize> Serialize for Section<K, V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter())
    }
}

impl<'de, K, V> Deserialize<'de> for Section<K, V>
where
    K: Ord + Clone + Deserialize<'de>,
    V: Clone + Deserialize<'de>,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Read as the ordered map it always was (same errors, same
        // handling of the input), then shared.
        let m = std::collections::BTreeMap::<K, V>::deserialize(d)?;
        Ok(m.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_of_a_changed_copy_is_the_change() {
        let a: Section<u32, u32> = (0..10_000).map(|i| (i, i)).collect();
        let mut b = a.clone();
        b.insert(5_000, 0);
        b.remove(&7);
        b.insert(20_000, 1);
        let d: Vec<_> = a.diff(&b).collect();
        assert_eq!(
            d,
            vec![(&7, Some(&7), None), (&5_000, Some(&5_000), Some(&0)), (&20_000, None, Some(&1))]
        );
        assert!(a.diff(&a.clone()).next().is_none());
        let mut c = b.clone();
        c.retain(|k, _| k % 2 == 0);
        assert_eq!(c.len(), 5_001);
        assert_eq!(a[&3], 3);
    }
}
