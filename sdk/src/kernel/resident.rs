//! (ABI 1.7) What an instance keeps between launches under the host's resident names
//! ([`super::Memory::resident`]): a frozen buffer's bytes ([`take`]/[`keep`]), and values a
//! kernel derives from them ([`derived`]: a packed weight matrix, decoded filters). A name is
//! given by the host to bytes that never change again and is never reused, so what is kept
//! under it stays right for the instance's life; both stores drop the least recently used
//! first and hold at most [`MAX_BYTES`] each.
//!
//! Owns only instance-local state: never reads or writes device memory itself.

use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;

/// Most bytes one instance keeps in each store (an instance pool of a few dozen instances per
/// plugin may keep this much each).
pub const MAX_BYTES: usize = 32 << 20;

/// A derived value: the name it comes from, the deriving kernel's key, its size, the value.
type Derived = (u64, Vec<u64>, usize, Rc<dyn Any>);

/// Names of derived values evicted lately (at most this many remembered).
const MAX_EVICTED: usize = 4096;
/// How many times [`would_keep`] refuses a name after its value was evicted; then the value
/// is tried again (kept, or evicted and refused again).
const REFUSALS: u32 = 64;

thread_local! {
    static KEPT: RefCell<Vec<(u64, Vec<u8>)>> = const { RefCell::new(Vec::new()) };
    static DERIVED: RefCell<Vec<Derived>> = const { RefCell::new(Vec::new()) };
    static EVICTED: RefCell<std::collections::VecDeque<(u64, u32)>> =
        const { RefCell::new(std::collections::VecDeque::new()) };
}

/// Whether a value of `bytes` derived from the bytes named `name` would be kept by
/// [`derived`] and likely still be there next launch: not when it is larger than
/// [`MAX_BYTES`], nor when a value of that name was evicted lately (the next [`REFUSALS`]
/// asks) — the kernels' values do not fit together (a model whose weights exceed the store),
/// and a kernel that derives more than it needs to keep a value (a whole packed matrix where
/// a part would do) would pay for that on every launch. Such a kernel does its launch's share
/// only.
pub fn would_keep(name: u64, bytes: usize) -> bool {
    if bytes > MAX_BYTES {
        return false;
    }
    EVICTED.with(|e| {
        let mut e = e.borrow_mut();
        let Some(i) = e.iter().position(|(n, _)| *n == name) else {
            return true;
        };
        e[i].1 -= 1;
        if e[i].1 == 0 {
            e.remove(i);
        }
        false
    })
}

/// Takes the bytes kept under `name` out of the store (give them back with [`keep`]).
pub fn take(name: u64) -> Option<Vec<u8>> {
    KEPT.with(|k| {
        let mut k = k.borrow_mut();
        let i = k.iter().position(|(n, _)| *n == name)?;
        Some(k.remove(i).1)
    })
}

/// Keeps `data` under `name` (most recently used), dropping the least recently used until
/// the store fits [`MAX_BYTES`]; data larger than that is not kept.
pub fn keep(name: u64, data: Vec<u8>) {
    if data.len() > MAX_BYTES {
        return;
    }
    KEPT.with(|k| {
        let mut k = k.borrow_mut();
        k.retain(|(n, _)| *n != name);
        let mut total: usize = k.iter().map(|(_, d)| d.len()).sum::<usize>() + data.len();
        while total > MAX_BYTES && !k.is_empty() {
            total -= k.remove(0).1.len();
        }
        k.push((name, data));
    })
}

/// Bytes kept now.
pub fn kept_bytes() -> usize {
    KEPT.with(|k| k.borrow().iter().map(|(_, d)| d.len()).sum())
}

/// The value derived from the bytes named `name` under `key`, made by `make` (which returns
/// the value and about how many bytes it holds) the first time, or again once evicted.
///
/// `key` must say everything besides the bytes that the value depends on (the kernel's
/// dtype, offsets, strides, shapes…): values are told apart by `(name, key)` alone. A value
/// larger than [`MAX_BYTES`] is returned but not kept; a `make` error is returned and nothing
/// is kept.
pub fn derived<T: Any, E>(
    name: u64,
    key: &[u64],
    make: impl FnOnce() -> Result<(T, usize), E>,
) -> Result<Rc<T>, E> {
    let hit = DERIVED.with(|d| {
        let mut d = d.borrow_mut();
        let i = d.iter().position(|(n, k, ..)| *n == name && k == key)?;
        let entry = d.remove(i);
        let value = entry.3.clone();
        d.push(entry); // most recently used last
        Some(value)
    });
    // a value of another type under the same key is the kernel's mistake: made again, replaced
    if let Some(v) = hit.and_then(|v| v.downcast::<T>().ok()) {
        return Ok(v);
    }
    let (value, bytes) = make()?;
    let value = Rc::new(value);
    if bytes <= MAX_BYTES {
        DERIVED.with(|d| {
            let mut d = d.borrow_mut();
            d.retain(|(n, k, ..)| !(*n == name && k == key));
            let mut total = d.iter().map(|e| e.2).sum::<usize>() + bytes;
            while total > MAX_BYTES && !d.is_empty() {
                let (gone, _, size, _) = d.remove(0);
                total -= size;
                EVICTED.with(|e| {
                    let mut e = e.borrow_mut();
                    if e.len() >= MAX_EVICTED {
                        e.pop_front();
                    }
                    e.retain(|(n, _)| *n != gone);
                    e.push_back((gone, REFUSALS));
                });
            }
            d.push((name, key.to_vec(), bytes, value.clone() as Rc<dyn Any>));
        });
    }
    Ok(value)
}

/// Bytes of derived values kept now.
pub fn derived_bytes() -> usize {
    DERIVED.with(|d| d.borrow().iter().map(|e| e.2).sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_values_are_made_once_per_name_and_key_and_evicted_to_fit() {
        let mut made = 0;
        let mut get = |name: u64, key: &[u64], bytes: usize| {
            derived::<usize, ()>(name, key, || {
                made += 1;
                Ok((name as usize * 1000 + key[0] as usize, bytes))
            })
            .unwrap()
        };
        assert_eq!(*get(1, &[5], 10), 1005);
        assert_eq!(*get(1, &[5], 10), 1005);
        assert_eq!(*get(1, &[6], 10), 1006, "another key of the same name");
        assert_eq!(*get(2, &[5], 10), 2005, "another name, same key");
        assert_eq!(made, 3);
        // a too-large value is returned, not kept
        let big = derived::<u8, ()>(3, &[0], || Ok((7, MAX_BYTES + 1))).unwrap();
        assert_eq!(*big, 7);
        assert!(derived_bytes() <= MAX_BYTES);
        let mut again = false;
        derived::<u8, ()>(3, &[0], || {
            again = true;
            Ok((7, 1))
        })
        .unwrap();
        assert!(again, "not kept, made again");
        // filling the store evicts the least recently used
        derived::<u8, ()>(4, &[0], || Ok((0, MAX_BYTES / 2))).unwrap();
        derived::<u8, ()>(5, &[0], || Ok((0, MAX_BYTES / 2))).unwrap();
        assert!(derived_bytes() <= MAX_BYTES);
        let mut remade = false;
        derived::<usize, ()>(1, &[5], || {
            remade = true;
            Ok((0, 1))
        })
        .unwrap();
        assert!(remade, "evicted");
        assert!(!would_keep(1, 1), "a name evicted lately");
        for _ in 1..REFUSALS {
            assert!(!would_keep(1, 1));
        }
        assert!(would_keep(1, 1), "tried again after {REFUSALS} refusals");
        assert!(would_keep(9, MAX_BYTES) && !would_keep(9, MAX_BYTES + 1));
        // an error keeps nothing
        assert!(derived::<u8, &str>(6, &[0], || Err("no")).is_err());
        let mut made6 = false;
        derived::<u8, ()>(6, &[0], || {
            made6 = true;
            Ok((1, 1))
        })
        .unwrap();
        assert!(made6);
    }
}
