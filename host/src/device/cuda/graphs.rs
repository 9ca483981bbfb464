//! When a submission is captured into a CUDA graph and replayed (issue 9): the policy, as pure
//! state over an opaque graph type, so it is unit-tested without a GPU.
//!
//! A command buffer of at least [`MIN_LAUNCHES`] launches submitted to one stream with the same
//! buffer addresses is launched plainly the first time; the second time its launches are captured
//! (`cuStreamBeginCapture` … `cuStreamEndCapture`, `cuGraphInstantiate`) and the graph is
//! launched; from then on the graph is replayed (`cuGraphLaunch`): one driver call instead of one
//! per launch. The key is the stream, the command buffer's content (its launches name each
//! module by the hash of the exact plugin build: another plugin build or other shapes make
//! another command buffer) and the device address of every binding (patched into the captured
//! parameters). A capture that fails marks the key: it is launched plainly from then on.
//! At most [`CAPACITY`] graphs are kept, least recently used first out.
//!
//! Owns no driver handle: `super` captures, launches and drops the graphs.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use crate::cmdbuf::CommandBuffer;
use crate::device::StreamId;

/// Command buffers with fewer launches run plainly: a graph saves little on one launch.
pub const MIN_LAUNCHES: usize = 2;
/// Graphs kept per device.
pub const CAPACITY: usize = 64;

/// What identifies one replayable submission.
#[derive(Clone)]
pub struct Key {
    stream: StreamId,
    cmd: Arc<CommandBuffer>,
    addrs: Vec<u64>,
    hash: u64,
}

impl Key {
    pub fn new(stream: StreamId, cmd: &Arc<CommandBuffer>, addrs: &[u64]) -> Key {
        let mut h = DefaultHasher::new();
        (stream, &**cmd, addrs).hash(&mut h);
        Key {
            stream,
            cmd: cmd.clone(),
            addrs: addrs.to_vec(),
            hash: h.finish(),
        }
    }
}

impl PartialEq for Key {
    fn eq(&self, o: &Key) -> bool {
        self.hash == o.hash
            && self.stream == o.stream
            && self.addrs == o.addrs
            && (Arc::ptr_eq(&self.cmd, &o.cmd) || *self.cmd == *o.cmd)
    }
}
impl Eq for Key {}
impl Hash for Key {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.hash);
    }
}

/// What to do with a submission.
pub enum Plan<G> {
    /// Launch each kernel (first sighting, too few launches, or capture failed before).
    Plain,
    /// Launch it captured, then hand the graph to [`Replays::captured`] (or report failure).
    Capture,
    /// Replay this graph.
    Replay(Arc<G>),
}

/// A submission seen once (captured on the next), or whose capture failed (never again).
enum Mark {
    Seen,
    Failed,
}

/// Submissions marked: kept apart from the graphs, so one-off submissions (new buffers every
/// time) never push a graph out.
pub const MARKS: usize = 256;

/// The graphs of one device and the submissions seen once.
pub struct Replays<G> {
    graphs: HashMap<Key, (Arc<G>, u64)>,
    marks: HashMap<Key, (Mark, u64)>,
    tick: u64,
    /// Captures made and replays launched, for the statistics.
    pub captures: u64,
    pub replays: u64,
}

impl<G> Default for Replays<G> {
    fn default() -> Self {
        Replays {
            graphs: HashMap::new(),
            marks: HashMap::new(),
            tick: 0,
            captures: 0,
            replays: 0,
        }
    }
}

impl<G> Replays<G> {
    /// What to do with a submission of `key` running `launches` launches.
    pub fn plan(&mut self, key: &Key, launches: usize) -> Plan<G> {
        if launches < MIN_LAUNCHES {
            return Plan::Plain;
        }
        self.tick += 1;
        let tick = self.tick;
        if let Some((g, used)) = self.graphs.get_mut(key) {
            *used = tick;
            self.replays += 1;
            return Plan::Replay(g.clone());
        }
        match self.marks.get_mut(key) {
            None => {
                insert_lru(&mut self.marks, MARKS, key.clone(), Mark::Seen, tick);
                Plan::Plain
            }
            Some((Mark::Seen, used)) => {
                *used = tick;
                Plan::Capture
            }
            Some((Mark::Failed, used)) => {
                *used = tick;
                Plan::Plain
            }
        }
    }

    /// Records the outcome of a [`Plan::Capture`]: the graph, or `None` when capturing failed.
    pub fn captured(&mut self, key: Key, graph: Option<G>) {
        self.tick += 1;
        match graph {
            Some(g) => {
                self.captures += 1;
                self.marks.remove(&key);
                insert_lru(&mut self.graphs, CAPACITY, key, Arc::new(g), self.tick);
            }
            None => insert_lru(&mut self.marks, MARKS, key, Mark::Failed, self.tick),
        }
    }

    /// Drops every graph and mark (the device is going away).
    pub fn clear(&mut self) {
        self.graphs.clear();
        self.marks.clear();
    }

    /// Graphs held.
    pub fn graphs(&self) -> usize {
        self.graphs.len()
    }
}

/// Inserts into a map of at most `cap` entries, the least recently used out first.
fn insert_lru<V>(map: &mut HashMap<Key, (V, u64)>, cap: usize, key: Key, v: V, tick: u64) {
    if !map.contains_key(&key)
        && map.len() >= cap
        && let Some(oldest) = map
            .iter()
            .min_by_key(|(_, (_, used))| *used)
            .map(|(k, _)| k.clone())
    {
        map.remove(&oldest);
    }
    map.insert(key, (v, tick));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmdbuf::{Binding, Role};
    use crate::tensor::{Dtype, TensorDesc};

    fn cmd(name: &str) -> Arc<CommandBuffer> {
        Arc::new(CommandBuffer {
            target: "cuda:sm_90".into(),
            bindings: vec![Binding {
                role: Role::Input,
                desc: TensorDesc::new(name, vec![4], Dtype::F32),
            }],
            launches: vec![],
        })
    }

    #[test]
    fn captured_on_the_second_run_then_replayed() {
        let mut r = Replays::<&str>::default();
        let k = Key::new(StreamId(0), &cmd("x"), &[0x1000]);
        assert!(matches!(r.plan(&k, 5), Plan::Plain), "first run: plain");
        assert!(
            matches!(r.plan(&k, 5), Plan::Capture),
            "second run: capture"
        );
        r.captured(k.clone(), Some("graph"));
        // an equal command buffer in another Arc is the same submission
        let again = Key::new(StreamId(0), &cmd("x"), &[0x1000]);
        assert!(matches!(r.plan(&again, 5), Plan::Replay(g) if *g == "graph"));
        assert_eq!((r.captures, r.replays, r.graphs()), (1, 1, 1));
    }

    #[test]
    fn other_addresses_streams_or_contents_are_other_submissions() {
        let mut r = Replays::<&str>::default();
        let c = cmd("x");
        let k = Key::new(StreamId(0), &c, &[0x1000]);
        r.plan(&k, 3);
        r.plan(&k, 3);
        r.captured(k, Some("g"));
        for other in [
            Key::new(StreamId(0), &c, &[0x2000]),
            Key::new(StreamId(1), &c, &[0x1000]),
            Key::new(StreamId(0), &cmd("y"), &[0x1000]),
        ] {
            assert!(matches!(r.plan(&other, 3), Plan::Plain));
        }
    }

    #[test]
    fn single_launches_and_failed_captures_stay_plain() {
        let mut r = Replays::<&str>::default();
        let k = Key::new(StreamId(0), &cmd("x"), &[1]);
        for _ in 0..3 {
            assert!(matches!(r.plan(&k, 1), Plan::Plain));
        }
        r.plan(&k, 2);
        assert!(matches!(r.plan(&k, 2), Plan::Capture));
        r.captured(k.clone(), None);
        for _ in 0..3 {
            assert!(matches!(r.plan(&k, 2), Plan::Plain), "not retried");
        }
    }

    #[test]
    fn at_most_capacity_graphs_least_recently_used_out() {
        let mut r = Replays::<usize>::default();
        let c = cmd("x");
        let keys: Vec<Key> = (0..=CAPACITY as u64)
            .map(|a| Key::new(StreamId(0), &c, &[a]))
            .collect();
        for (i, k) in keys.iter().enumerate().take(CAPACITY) {
            r.plan(k, 2);
            r.plan(k, 2);
            r.captured(k.clone(), Some(i));
        }
        // key 0 used again: key 1 is now the least recently used
        assert!(matches!(r.plan(&keys[0], 2), Plan::Replay(_)));
        r.plan(&keys[CAPACITY], 2);
        r.plan(&keys[CAPACITY], 2);
        r.captured(keys[CAPACITY].clone(), Some(CAPACITY));
        assert_eq!(r.graphs(), CAPACITY);
        assert!(matches!(r.plan(&keys[0], 2), Plan::Replay(_)));
        assert!(
            matches!(r.plan(&keys[1], 2), Plan::Plain),
            "evicted: seen anew"
        );
        r.clear();
        assert_eq!(r.graphs(), 0);
    }

    #[test]
    fn one_off_submissions_never_push_a_graph_out() {
        let mut r = Replays::<&str>::default();
        let c = cmd("x");
        let k = Key::new(StreamId(0), &c, &[1]);
        r.plan(&k, 2);
        r.plan(&k, 2);
        r.captured(k.clone(), Some("kept"));
        for a in 2..(2 + 4 * MARKS as u64) {
            r.plan(&Key::new(StreamId(0), &c, &[a]), 2); // new buffers every time
        }
        assert!(r.marks.len() <= MARKS);
        assert!(matches!(r.plan(&k, 2), Plan::Replay(g) if *g == "kept"));
    }
}
