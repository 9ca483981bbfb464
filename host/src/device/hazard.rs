//! Hazard tracking of one buffer across streams: the fence of the last submission that wrote
//! it and of the submissions that read it since. A new submission waits for the last writer
//! (read-after-write, write-after-write) and, when it writes, for every reader since
//! (write-after-read); the host's own reads and writes of a buffer wait the same way.
//!
//! Owns fences only; the device records every submission here in submission order (under one
//! lock, so two submissions never wait on each other) and makes the queued work wait for what
//! [`Hazards::record`] returns.

use super::sync::Fence;

/// The users of one buffer that later users must wait for.
#[derive(Default)]
pub struct Hazards {
    last_write: Option<Fence>,
    reads: Vec<Fence>,
}

impl Hazards {
    /// Records that the submission signalling `fence` reads and/or writes the buffer; pushes
    /// onto `waits` the pending fences it must wait for first (never `fence` itself: a
    /// submission binding one buffer twice does not wait for itself).
    pub fn record(&mut self, reads: bool, writes: bool, fence: &Fence, waits: &mut Vec<Fence>) {
        if !reads && !writes {
            return;
        }
        let mut wait = |f: &Fence| {
            if !f.is_done() && !f.same(fence) && !waits.iter().any(|w| w.same(f)) {
                waits.push(f.clone());
            }
        };
        if let Some(w) = &self.last_write {
            wait(w);
        }
        if writes {
            self.reads.iter().for_each(&mut wait);
            self.reads.clear();
            self.last_write = Some(fence.clone());
        } else {
            self.reads.retain(|f| !f.is_done());
            if !self.reads.iter().any(|f| f.same(fence)) {
                self.reads.push(fence.clone());
            }
        }
    }

    /// What the host must wait for before reading the buffer: its pending writer.
    pub fn before_read(&self) -> Option<Fence> {
        self.last_write.clone().filter(|f| !f.is_done())
    }

    /// What the host must wait for before writing the buffer: its writer and readers.
    pub fn before_write(&self) -> Vec<Fence> {
        self.last_write
            .iter()
            .chain(&self.reads)
            .filter(|f| !f.is_done())
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(h: &mut Hazards, reads: bool, writes: bool, f: &Fence) -> Vec<Fence> {
        let mut waits = Vec::new();
        h.record(reads, writes, f, &mut waits);
        waits
    }

    #[test]
    fn readers_wait_for_the_writer_and_writers_for_everyone() {
        let mut h = Hazards::default();
        let (w1, r1, r2, w2) = (Fence::new(), Fence::new(), Fence::new(), Fence::new());
        assert!(record(&mut h, false, true, &w1).is_empty());
        let waits = record(&mut h, true, false, &r1);
        assert!(waits.len() == 1 && waits[0].same(&w1), "RAW");
        assert!(record(&mut h, true, false, &r2)[0].same(&w1));
        let waits = record(&mut h, true, true, &w2);
        assert_eq!(waits.len(), 3, "WAW + WAR on both readers");
        assert!(h.before_read().unwrap().same(&w2));
        // Finished work is not waited for; a submission never waits for itself.
        w2.signal(Ok(()));
        let w3 = Fence::new();
        assert!(record(&mut h, false, true, &w3).is_empty());
        assert!(record(&mut h, true, true, &w3).is_empty());
        assert!(h.before_read().unwrap().same(&w3));
        assert_eq!(h.before_write().len(), 1);
    }
}
