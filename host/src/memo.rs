//! A bounded memo of facts about kernels: keyed by something that names a build or module
//! (a hash, a module id) and an entry point's name, looked up with a borrowed name, so the
//! launches that consult it on every submission allocate nothing. Forgets everything at once
//! when full (each fact is cheap to learn again); hashed with a fast per-process-seeded hash
//! (bounded, so a client choosing names cannot make a lookup long). Owns only its map; takes
//! no lock itself.

use std::borrow::Borrow;
use std::hash::Hash;

use foldhash::HashMap;

/// Facts `V` per (`K`, name), at most `max` of them.
pub(crate) struct Memo<K, V> {
    by_key: HashMap<K, HashMap<String, V>>,
    len: usize,
    max: usize,
}

impl<K: Hash + Eq, V> Memo<K, V> {
    /// An empty memo holding at most `max` facts.
    pub fn new(max: usize) -> Self {
        Memo {
            by_key: HashMap::default(),
            len: 0,
            max,
        }
    }

    /// The fact known for (`key`, `name`).
    pub fn get<Q>(&self, key: &Q, name: &str) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.by_key.get(key)?.get(name)
    }

    /// The fact known for (`key`, `name`), to update.
    pub fn get_mut<Q>(&mut self, key: &Q, name: &str) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.by_key.get_mut(key)?.get_mut(name)
    }

    /// Records `value` for (`key`, `name`), forgetting everything first when full.
    pub fn insert(&mut self, key: K, name: &str, value: V) {
        if let Some(v) = self.by_key.get_mut(&key).and_then(|m| m.get_mut(name)) {
            *v = value;
            return;
        }
        if self.len >= self.max {
            self.by_key.clear();
            self.len = 0;
        }
        self.by_key
            .entry(key)
            .or_default()
            .insert(name.to_string(), value);
        self.len += 1;
    }

    /// Facts held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_per_key_and_name_and_bounded() {
        let mut m: Memo<String, u32> = Memo::new(3);
        m.insert("a".into(), "x", 1);
        m.insert("a".into(), "y", 2);
        m.insert("b".into(), "x", 3);
        assert_eq!(
            (
                m.get("a", "x"),
                m.get("a", "y"),
                m.get("b", "x"),
                m.get("b", "y")
            ),
            (Some(&1), Some(&2), Some(&3), None)
        );
        m.insert("a".into(), "x", 4);
        *m.get_mut("a", "y").unwrap() += 10;
        assert_eq!(
            (m.get("a", "x"), m.get("a", "y"), m.len()),
            (Some(&4), Some(&12), 3)
        );
        // a fourth fact: everything before it is forgotten
        m.insert("c".into(), "z", 5);
        assert_eq!(
            (m.get("a", "x"), m.get("c", "z"), m.len()),
            (None, Some(&5), 1)
        );
    }
}
