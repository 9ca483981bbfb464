//! Hazard tracking of one buffer across streams, shared by every backend: the fence of the last
//! submission that wrote it and of the submissions that read it since, with their streams. A new
//! submission waits for the last writer (read-after-write, write-after-write) and, when it
//! writes, for every reader since (write-after-read) — on other streams only: a stream runs in
//! order. The host's own reads and writes of a buffer wait the same way, on every stream.
//!
//! Owns fences only; the device records every submission here in submission order (under one
//! lock, so two submissions never wait on each other) and makes the queued work wait for what
//! [`Hazards::record`] returns (the CPU device in its stream worker; CUDA on the host before it
//! enqueues).

use parking_lot::Mutex;

use super::StreamId;
use super::sync::Fence;
use crate::cmdbuf::CommandBuffer;

/// Records a submission of `cmd` on `stream`, marked by `fence`, on the hazards of each buffer it
/// binds (in binding order, as reader and/or writer by its relocations); returns the fences of
/// earlier work it must wait for. Callers hold the device's submission lock.
pub fn record_all<'a>(
    stream: StreamId,
    cmd: &CommandBuffer,
    hazards: impl IntoIterator<Item = &'a Mutex<Hazards>>,
    fence: &Fence,
) -> Vec<Fence> {
    let mut waits = Vec::new();
    for (h, &rw) in hazards.into_iter().zip(&cmd.binding_access()) {
        h.lock().record(stream, rw, fence, &mut waits);
    }
    waits
}

/// The users of one buffer that later users must wait for.
#[derive(Default)]
pub struct Hazards {
    last_write: Option<(StreamId, Fence)>,
    reads: Vec<(StreamId, Fence)>,
}

impl Hazards {
    /// Records that the submission signalling `fence` on `stream` reads and/or writes the
    /// buffer; pushes onto `waits` the pending fences of other streams it must wait for first
    /// (never `fence` itself: a submission binding one buffer twice does not wait for itself).
    pub fn record(
        &mut self,
        stream: StreamId,
        (reads, writes): (bool, bool),
        fence: &Fence,
        waits: &mut Vec<Fence>,
    ) {
        if !reads && !writes {
            return;
        }
        let mut wait = |(s, f): &(StreamId, Fence)| {
            if *s != stream && !f.is_done() && !waits.iter().any(|w| w.same(f)) {
                waits.push(f.clone());
            }
        };
        if let Some(w) = &self.last_write {
            wait(w);
        }
        if writes {
            self.reads.iter().for_each(&mut wait);
            self.reads.clear();
            self.last_write = Some((stream, fence.clone()));
        } else {
            self.reads.retain(|(_, f)| !f.is_done());
            if !self.reads.iter().any(|(_, f)| f.same(fence)) {
                self.reads.push((stream, fence.clone()));
            }
        }
    }

    /// What the host must wait for before reading the buffer: its pending writer.
    pub fn before_read(&self) -> Option<Fence> {
        self.last_write
            .as_ref()
            .map(|(_, f)| f.clone())
            .filter(|f| !f.is_done())
    }

    /// What the host must wait for before writing the buffer: its writer and readers.
    pub fn before_write(&self) -> Vec<Fence> {
        self.last_write
            .iter()
            .chain(&self.reads)
            .map(|(_, f)| f)
            .filter(|f| !f.is_done())
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: StreamId = StreamId(1);
    const B: StreamId = StreamId(2);

    fn record(h: &mut Hazards, s: StreamId, rw: (bool, bool), f: &Fence) -> Vec<Fence> {
        let mut waits = Vec::new();
        h.record(s, rw, f, &mut waits);
        waits
    }

    #[test]
    fn readers_wait_for_the_writer_and_writers_for_everyone() {
        let mut h = Hazards::default();
        let (w1, r1, r2, w2) = (Fence::new(), Fence::new(), Fence::new(), Fence::new());
        assert!(record(&mut h, A, (false, true), &w1).is_empty());
        let waits = record(&mut h, B, (true, false), &r1);
        assert!(waits.len() == 1 && waits[0].same(&w1), "RAW");
        assert!(record(&mut h, B, (true, false), &r2)[0].same(&w1));
        let waits = record(&mut h, A, (true, true), &w2);
        assert_eq!(
            waits.len(),
            2,
            "WAR on both readers of B (A's own writer is in order)"
        );
        assert!(h.before_read().unwrap().same(&w2));
        // Finished work is not waited for; a submission never waits for itself.
        w2.signal(Ok(()));
        let w3 = Fence::new();
        assert!(record(&mut h, B, (false, true), &w3).is_empty());
        assert!(record(&mut h, B, (true, true), &w3).is_empty());
        assert!(h.before_read().unwrap().same(&w3));
        assert_eq!(h.before_write().len(), 1);
    }

    #[test]
    fn work_on_one_stream_never_waits_for_that_stream() {
        let mut h = Hazards::default();
        let (w, r) = (Fence::new(), Fence::new());
        record(&mut h, A, (false, true), &w);
        assert!(record(&mut h, A, (true, false), &r).is_empty());
        assert!(record(&mut h, A, (false, true), &Fence::new()).is_empty());
    }
}
