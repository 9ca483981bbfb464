//! The host's Rust API: translation cache, op-name matching, status codes, request validation,
//! device buffers, streams, events and fences, and concurrent use.

use std::sync::Arc;

use umd::error::status;
use umd::{Dtype, Error, Host, OpRequest, Target, TensorDesc, data};

fn f32t(shape: &[u64]) -> TensorDesc {
    TensorDesc::new("t", shape.to_vec(), Dtype::F32)
}

#[test]
fn cache_hits_return_the_same_translation_and_ignore_op_case() {
    let host = Host::builder().build().unwrap();
    let req = OpRequest::new("Add", vec![f32t(&[2, 3]), f32t(&[3])]);
    let a = host.translate(&req).unwrap();
    let b = host
        .translate(&OpRequest {
            op: "ADD".into(),
            ..req.clone()
        })
        .unwrap();
    assert!(Arc::ptr_eq(&a, &b), "second translation is a cache hit");
    let s = host.translator().cache().stats();
    assert_eq!((s.hits, s.misses, s.entries), (1, 1, 1));
    // Another shape misses and produces a different buffer.
    let c = host
        .translate(&OpRequest::new("add", vec![f32t(&[2, 3]), f32t(&[2, 3])]))
        .unwrap();
    assert_ne!(c.bytes, a.bytes);
    assert_eq!(c.kernel_name, "add_f32");
    assert_eq!(a.kernel_name, "add_f32_bcast");
    assert_eq!(a.plugin, "elementwise@0.1.0");
}

#[test]
fn status_codes_and_messages() {
    let host = Host::builder().build().unwrap();
    let err = host
        .translate(&OpRequest::new("RegexFullMatch", vec![f32t(&[1])]))
        .unwrap_err();
    assert_eq!(err.status(), status::UNSUPPORTED);
    assert!(
        err.to_string()
            .contains("op `RegexFullMatch` is not supported for target `cpu`"),
        "{err}"
    );

    let err = host
        .translate(&OpRequest::new("Add", vec![f32t(&[2]), f32t(&[3])]))
        .unwrap_err();
    assert_eq!(err.status(), status::INVALID_INPUT);
    assert!(err.to_string().contains("cannot be broadcast"), "{err}");

    // The only plugin serving Add declines 8-bit floats: unsupported, with the reason.
    let f8 = TensorDesc::new("x", vec![2], Dtype::F8e4m3fn);
    let err = host
        .translate(&OpRequest::new("Add", vec![f8.clone(), f8]))
        .unwrap_err();
    assert_eq!(err.status(), status::UNSUPPORTED);
    assert!(
        err.to_string().contains("elementwise@0.1.0: ") && err.to_string().contains("f8e4m3fn"),
        "{err}"
    );

    let huge = TensorDesc::new("x", vec![1 << 30, 1 << 20], Dtype::F32);
    let err = host
        .translate(&OpRequest::new("Relu", vec![huge]))
        .unwrap_err();
    assert_eq!(err.status(), status::INVALID_INPUT);
    assert!(matches!(err, Error::Request(_)), "{err}");

    let err = "torch.float33".parse::<Dtype>().unwrap_err();
    assert!(err.to_string().contains("torch.float33"));
}

#[test]
fn plans_for_a_gpu_target_without_a_gpu() {
    let host = Host::builder().build().unwrap();
    let req = OpRequest::new("MatMul", vec![f32t(&[64, 32]), f32t(&[32, 48])])
        .target(Target::parse("cuda:sm_90").unwrap());
    let t = host.translate(&req).unwrap();
    assert_eq!(t.cmdbuf.target, "cuda:sm_90");
    let l = &t.cmdbuf.launches[0];
    assert_eq!((l.grid.x, l.grid.y, l.block.x, l.block.y), (3, 4, 16, 16));
    // The CPU device refuses to run it.
    let bufs: Vec<_> = t
        .cmdbuf
        .bindings
        .iter()
        .map(|b| host.alloc(&b.desc).unwrap())
        .collect();
    let err = host
        .execute(&t, &bufs, host.device().default_stream())
        .unwrap_err();
    assert!(err.to_string().contains("targets `cuda:sm_90`"), "{err}");
}

#[test]
fn device_checks_bindings() {
    let host = Host::builder().build().unwrap();
    let t = host
        .translate(&OpRequest::new("Relu", vec![f32t(&[8])]))
        .unwrap();
    let small = host.device().alloc(16).unwrap();
    let ok = host.alloc(&f32t(&[8])).unwrap();
    let s = host.device().default_stream();
    let err = host.execute(&t, &[ok], s).unwrap_err();
    assert!(
        err.to_string().contains("2 buffers must be bound, got 1"),
        "{err}"
    );
    let err = host.execute(&t, &[ok, small], s).unwrap_err();
    assert!(
        err.to_string().contains("binding 1 needs 32 bytes"),
        "{err}"
    );
    let err = host.device().write(ok, 30, &[0; 4]).unwrap_err();
    assert!(err.to_string().contains("outside its 32 bytes"), "{err}");
    host.free(ok).unwrap();
    assert!(host.read(ok).is_err(), "freed buffers are gone");
}

#[test]
fn streams_run_in_order_and_events_fence_them() {
    let host = Host::builder().build().unwrap();
    let dev = host.device();
    let n = 1 << 16;
    let desc = f32t(&[n]);
    let x = host.alloc(&desc).unwrap();
    host.write(x, &data::encode(Dtype::F32, &vec![1.0; n as usize]))
        .unwrap();
    let add = host
        .translate(&OpRequest::new("Add", vec![desc.clone(), desc.clone()]))
        .unwrap();
    let stream = dev.create_stream().unwrap();
    // x = x + x, eight times, queued without waiting: in order gives 2^8.
    let fences: Vec<_> = (0..8)
        .map(|_| host.execute(&add, &[x, x, x], stream).unwrap())
        .collect();
    let event = dev.record_event(stream).unwrap();
    event.wait().unwrap();
    assert!(
        fences.iter().all(|f| f.is_done()),
        "an event follows everything queued before it"
    );
    let got = data::decode(Dtype::F32, &host.read(x).unwrap());
    assert!(got.iter().all(|&v| v == 256.0), "{}", got[0]);
    // Queued work and work waited for in the call (on this thread when the stream is idle)
    // interleave in order: 4 queued, 1 waited for, 4 queued, 1 waited for -> 2^18.
    for _ in 0..2 {
        for _ in 0..4 {
            host.execute(&add, &[x, x, x], stream).unwrap();
        }
        host.execute_wait(&add, &[x, x, x], stream).unwrap();
    }
    let got = data::decode(Dtype::F32, &host.read(x).unwrap());
    assert!(got.iter().all(|&v| v == 262144.0), "{}", got[0]);
    let stats = dev.pool_stats();
    assert!(stats.allocated_bytes >= n * 4);
}

#[test]
fn fences_can_be_awaited() {
    let host = Host::builder().build().unwrap();
    let t = host
        .translate(&OpRequest::new("Neg", vec![f32t(&[4])]))
        .unwrap();
    let a = host.alloc(&f32t(&[4])).unwrap();
    let b = host.alloc(&f32t(&[4])).unwrap();
    host.write(a, &data::encode(Dtype::F32, &[1.0, -2.0, 3.0, -4.0]))
        .unwrap();
    let fence = host
        .execute(&t, &[a, b], host.device().default_stream())
        .unwrap();
    // A minimal executor: park the thread until the waker fires.
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut fut = Box::pin(fence.wait_async());
    let result = loop {
        match fut.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(r) => break r,
            std::task::Poll::Pending => std::thread::park(),
        }
    };
    result.unwrap();
    assert_eq!(
        data::decode(Dtype::F32, &host.read(b).unwrap()),
        vec![-1.0, 2.0, -3.0, 4.0]
    );
}

#[test]
fn concurrent_clients_share_one_host() {
    let host = Arc::new(Host::builder().build().unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let host = host.clone();
            std::thread::spawn(move || {
                for i in 0..25u64 {
                    let n = 1 + (t * 25 + i) % 17;
                    let a: Vec<f64> = (0..n).map(|v| v as f64).collect();
                    let out = host
                        .run(
                            "Mul",
                            &[
                                (f32t(&[n]), data::encode(Dtype::F32, &a)),
                                (f32t(&[1]), data::encode(Dtype::F32, &[t as f64])),
                            ],
                        )
                        .unwrap();
                    let want: Vec<f64> = a.iter().map(|v| v * t as f64).collect();
                    assert_eq!(data::decode(Dtype::F32, &out[0].1), want);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let p = host
        .registry()
        .snapshot()
        .by_label("elementwise@0.1.0")
        .cloned()
        .unwrap();
    assert_eq!(p.faults(), 0);
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Two CPU devices in one host: both translate (sharing the `cpu` target's cached translation)
/// and execute; device B's stream waits on device A's event, copies A's result and computes on
/// it, so B's output can only be right if B's work ran after A's.
#[test]
fn two_cpu_devices_with_a_cross_device_wait() {
    use umd::device::{Device, DeviceError, Fence};
    let host = Host::builder().device("cpu:0,cpu:1").build().unwrap();
    let a: Arc<dyn Device> = host.device_named("cpu:0").unwrap().clone();
    let b: Arc<dyn Device> = host.device_named("cpu:1").unwrap().clone();
    assert_eq!((a.name(), b.name()), ("cpu", "cpu:1"));
    let req = OpRequest::new("Add", vec![f32t(&[4]), f32t(&[4])]);
    let t = host.translate_for(&*a, &req).unwrap();
    let t_b = host.translate_for(&*b, &req).unwrap();
    assert!(
        Arc::ptr_eq(&t, &t_b),
        "devices of one target share translations"
    );

    // A: held by a gate the test opens, then y = x + x, then an event.
    let gate = Fence::new();
    let sa = a.create_stream().unwrap();
    a.wait_event(sa, &gate).unwrap();
    let (xa, ya) = (a.alloc(16).unwrap(), a.alloc(16).unwrap());
    a.write(xa, 0, &f32s(&[1.0, 2.0, 3.0, 4.0])).unwrap();
    let fa = host.submit(&*a, sa, &t.cmdbuf, &[xa, xa, ya]).unwrap();
    let a_done = a.record_event(sa).unwrap();

    // B: waits on A's event, copies A's y in, then z = y + y.
    let sb = b.create_stream().unwrap();
    b.wait_event(sb, &a_done).unwrap();
    let (yb, zb) = (b.alloc(16).unwrap(), b.alloc(16).unwrap());
    b.copy_from(sb, yb, &a, ya).unwrap();
    let fb = host.submit(&*b, sb, &t.cmdbuf, &[yb, yb, zb]).unwrap();
    assert!(
        !fa.is_done() && !a_done.is_done() && !fb.is_done(),
        "A is gated"
    );

    // A buffer of A is refused on B, naming B, before anything is queued.
    let e = host.submit(&*b, sb, &t.cmdbuf, &[xa, xa, zb]).unwrap_err();
    assert!(
        matches!(e, Error::Device(DeviceError::ForeignBuffer { .. })),
        "{e}"
    );
    assert!(
        e.to_string().contains("does not belong to device `cpu:1`"),
        "{e}"
    );
    assert_eq!(e.status(), status::INVALID_INPUT);

    gate.signal(Ok(()));
    fb.wait().unwrap();
    assert!(a_done.is_done(), "B finished only after A's event");
    let z = data::decode(Dtype::F32, &b.read(zb, 0, 16).unwrap());
    assert_eq!(z, [4.0, 8.0, 12.0, 16.0]);
    // Each device runs on its own as well.
    let y = data::decode(Dtype::F32, &a.read(ya, 0, 16).unwrap());
    assert_eq!(y, [2.0, 4.0, 6.0, 8.0]);
}

/// A copy within one device whose source is used by work queued after it does not wait on
/// that later work (it would wait on itself).
#[test]
fn a_copy_never_waits_on_later_work() {
    let host = Host::builder().device("cpu,cpu:1").build().unwrap();
    let a = host.device().clone();
    let req = OpRequest::new("Add", vec![f32t(&[2]), f32t(&[2])]);
    let t = host.translate(&req).unwrap();
    let s = a.default_stream();
    let (x, y, z) = (
        a.alloc(8).unwrap(),
        a.alloc(8).unwrap(),
        a.alloc(8).unwrap(),
    );
    a.write(x, 0, &f32s(&[1.0, 5.0])).unwrap();
    a.copy_from(s, y, &a, x).unwrap();
    host.submit(&*a, s, &t.cmdbuf, &[y, x, z]).unwrap();
    a.synchronize(s).unwrap();
    let z = data::decode(Dtype::F32, &a.read(z, 0, 8).unwrap());
    assert_eq!(z, [2.0, 10.0]);
    let e = a.copy_from(s, a.alloc(4).unwrap(), &a, x).unwrap_err();
    assert!(e.to_string().contains("outside its 4 bytes"), "{e}");
}
