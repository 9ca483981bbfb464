//! The CPU device's stream order when a caller runs its own work ([`Device::submit_wait`]):
//! on the caller's thread only when the stream is idle, work queued meanwhile runs after it,
//! a panic fails only that work. Kernels here are the test's own (no plugins).

use std::sync::mpsc;
use std::thread::ThreadId;
use std::time::Duration;

use super::*;
use crate::tensor::{Dtype, TensorDesc};

/// Kernels by entry point: `inc` writes input + 1; `gated` does the same once the test opens
/// its gate (after saying it started); `panics` panics. Each run is logged with its thread.
#[derive(Default)]
struct Kernels {
    log: Mutex<Vec<(String, ThreadId)>>,
    started: Mutex<Option<mpsc::Sender<()>>>,
    gate: Mutex<Option<mpsc::Receiver<()>>>,
}

impl CpuKernels for Kernels {
    fn run(
        &self,
        launch: &LaunchCmd,
        buffers: &[(u32, u64, Option<&[u8]>)],
    ) -> Result<Vec<(u32, Vec<u8>)>, String> {
        let entry = launch.entry_point.as_str();
        if entry == "gated" {
            if let Some(tx) = self.started.lock().take() {
                tx.send(()).unwrap();
            }
            let gate = self.gate.lock().take().expect("one gated run");
            gate.recv().unwrap();
        }
        if entry == "panics" {
            panic!("a kernel that panics");
        }
        self.log
            .lock()
            .push((entry.to_string(), std::thread::current().id()));
        let x = f32::from_le_bytes(buffers[0].2.unwrap()[..4].try_into().unwrap());
        Ok(vec![(1, (x + 1.0).to_le_bytes().to_vec())])
    }
}

/// One launch of `entry` reading binding 0 and writing binding 1 (f32[1] each).
fn cmd(entry: &str) -> Arc<CommandBuffer> {
    let mut c = crate::cmdbuf::tests::sample();
    for b in &mut c.bindings {
        b.desc = TensorDesc::new(b.desc.name.clone(), vec![1], Dtype::F32);
    }
    c.launches[0].entry_point = entry.into();
    Arc::new(c)
}

fn setup() -> (Arc<Kernels>, Arc<CpuDevice>, [BufferId; 3]) {
    let k = Arc::new(Kernels::default());
    let dev = CpuDevice::new(k.clone(), 64 << 20);
    let bufs = [(); 3].map(|_| dev.alloc(4).unwrap());
    dev.write(bufs[0], 0, &1f32.to_le_bytes()).unwrap();
    (k, dev, bufs)
}

fn value(dev: &CpuDevice, b: BufferId) -> f32 {
    f32::from_le_bytes(dev.read(b, 0, 4).unwrap().try_into().unwrap())
}

#[test]
fn on_an_idle_stream_the_caller_runs_its_work_itself() {
    let (k, dev, [x, y, _]) = setup();
    let s = dev.default_stream();
    dev.submit_wait(s, cmd("inc"), &[x, y]).unwrap();
    assert_eq!(value(&dev, y), 2.0);
    assert_eq!(k.log.lock()[0].1, std::thread::current().id());
    // Queued work still runs on the stream's worker.
    dev.submit(s, cmd("inc"), &[y, x]).unwrap().wait().unwrap();
    assert_eq!(value(&dev, x), 3.0);
    assert_ne!(k.log.lock()[1].1, std::thread::current().id());
}

#[test]
fn work_queued_while_a_caller_runs_its_own_runs_after_it() {
    let (k, dev, [x, y, z]) = setup();
    let s = dev.default_stream();
    let (started_tx, started) = mpsc::channel();
    let (open, gate) = mpsc::channel();
    *k.started.lock() = Some(started_tx);
    *k.gate.lock() = Some(gate);
    let d = dev.clone();
    let caller = std::thread::spawn(move || d.submit_wait(s, cmd("gated"), &[x, y]));
    started.recv().unwrap();
    // While the caller's kernel runs: a launch reading its output, and an event, queued on the
    // same stream (no hazard names the stream's own work: only stream order keeps them after).
    let after = dev.submit(s, cmd("inc"), &[y, z]).unwrap();
    let event = dev.record_event(s).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        !after.is_done() && !event.is_done(),
        "ran before the caller's work"
    );
    open.send(()).unwrap();
    caller.join().unwrap().unwrap();
    after.wait().unwrap();
    event.wait().unwrap();
    assert_eq!(value(&dev, z), 3.0, "read the caller's output");
    let order: Vec<String> = k.log.lock().iter().map(|(e, _)| e.clone()).collect();
    assert_eq!(order, ["gated", "inc"]);
}

#[test]
fn on_a_busy_stream_the_callers_work_is_queued_behind() {
    let (k, dev, [x, y, z]) = setup();
    let s = dev.default_stream();
    let (started_tx, started) = mpsc::channel();
    let (open, gate) = mpsc::channel();
    *k.started.lock() = Some(started_tx);
    *k.gate.lock() = Some(gate);
    let first = dev.submit(s, cmd("gated"), &[x, y]).unwrap();
    started.recv().unwrap();
    let d = dev.clone();
    let caller = std::thread::spawn(move || d.submit_wait(s, cmd("inc"), &[y, z]));
    std::thread::sleep(Duration::from_millis(50));
    assert!(!caller.is_finished(), "ran beside the queued work");
    open.send(()).unwrap();
    first.wait().unwrap();
    caller.join().unwrap().unwrap();
    assert_eq!(value(&dev, z), 3.0);
    let log = k.log.lock();
    assert_eq!(log[0].1, log[1].1, "both on the stream's worker");
}

#[test]
fn a_panic_in_the_callers_work_fails_it_alone() {
    let (_k, dev, [x, y, z]) = setup();
    let s = dev.default_stream();
    let e = dev.submit_wait(s, cmd("panics"), &[x, y]).unwrap_err();
    assert!(e.to_string().contains("panicked"), "{e}");
    // The stream is given back: the next runs, on the caller and queued.
    dev.submit_wait(s, cmd("inc"), &[x, z]).unwrap();
    dev.submit(s, cmd("inc"), &[z, y]).unwrap().wait().unwrap();
    assert_eq!(value(&dev, y), 3.0);
}

#[test]
fn a_frozen_buffer_is_read_only_and_still_read() {
    let (_, dev, [x, y, _]) = setup();
    let s = dev.default_stream();
    dev.freeze(x).unwrap();
    dev.freeze(x).unwrap(); // again: nothing changes
    assert!(matches!(
        dev.write(x, 0, &[0; 4]),
        Err(DeviceError::ReadOnly { buffer, .. }) if buffer == x
    ));
    // read by a launch: fine; written by one: refused before anything is queued
    dev.submit_wait(s, cmd("inc"), &[x, y]).unwrap();
    assert_eq!(value(&dev, y), 2.0);
    let e = dev.submit(s, cmd("inc"), &[y, x]).unwrap_err();
    assert!(
        e.to_string().contains("read-only") && e.to_string().contains("launch 0"),
        "{e}"
    );
    assert_eq!(value(&dev, x), 1.0, "unchanged");
    let from: Arc<dyn Device> = dev.clone();
    assert!(matches!(
        dev.copy_from(s, x, &from, y),
        Err(DeviceError::ReadOnly { buffer, .. }) if buffer == x
    ));
    // each frozen buffer has its own resident name, never another's
    dev.freeze(y).unwrap();
    let (bx, by) = (dev.buffer(x).unwrap(), dev.buffer(y).unwrap());
    assert!(bx.resident().is_some() && by.resident().is_some());
    assert_ne!(bx.resident(), by.resident());
    assert!(dev.freeze(BufferId(7)).is_err());
}

#[test]
fn a_frozen_buffers_packed_copies_go_with_it() {
    use crate::plugin::packed::{self, Isa, Key, Mat, Packed};
    let Some(isa) = Isa::detect() else {
        eprintln!("SKIPPED: this CPU has neither AVX2+FMA nor AVX-512F: no packed copies");
        return;
    };
    let (_, dev, [x, _, _]) = setup();
    dev.freeze(x).unwrap();
    let name = dev.buffer(x).unwrap().resident().expect("frozen: named");
    // a copy the matrix unit keeps of it
    let data = [1.0f32; 4];
    let b = Mat {
        data: &data,
        rs: 2,
        cs: 1,
    };
    let key = Key {
        name,
        offset: 0,
        rs: 2,
        cs: 1,
        k: 2,
        n: 2,
        isa,
    };
    packed::cached(key, usize::MAX, || Packed::pack(b, 2, 2, isa));
    assert_eq!(packed::held(name), 1);
    dev.free(x).unwrap();
    assert_eq!(packed::held(name), 0, "dropped with its buffer");
}
