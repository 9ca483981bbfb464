//! The vector unit against a per-element reference (every element type and operation, broadcast
//! and strided walks across blocks, an output that is an input), and every refusal before
//! anything is touched.

use std::sync::Arc;

use half::{bf16, f16};
use parking_lot::Mutex;

use super::*;
use crate::cmdbuf::Access;
use crate::device::BufferMemory;
use crate::plugin::kernel_io::tests::Mem;

fn bound(binding: u32, access: Access, mem: &Arc<Mem>) -> BoundMemory {
    BoundMemory {
        binding,
        size: mem.0.lock().len() as u64,
        access,
        memory: mem.clone(),
        resident: None,
        asked: Default::default(),
        units: Default::default(),
    }
}

/// Element values as f64s, per type: stored and loaded as the type stores them.
fn encode(el: Element, v: &[f64]) -> Vec<u8> {
    v.iter()
        .flat_map(|&x| match el {
            Element::F32 => (x as f32).to_le_bytes().to_vec(),
            Element::F64 => x.to_le_bytes().to_vec(),
            Element::F16 => f16::from_f64(x).to_bits().to_le_bytes().to_vec(),
            Element::Bf16 => bf16::from_f64(x).to_bits().to_le_bytes().to_vec(),
            Element::I32 => (x as i32).to_le_bytes().to_vec(),
            Element::I64 => (x as i64).to_le_bytes().to_vec(),
        })
        .collect()
}

/// The WIT's semantics, element by element, written out apart from [`super::lanes`].
fn reference(op: BinaryOp, el: Element, x: &[u8], y: &[u8]) -> Vec<u8> {
    fn float<T: num_like::F>(op: BinaryOp, a: T, b: T) -> T {
        match op {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Max => {
                if a.nan() || a >= b {
                    a
                } else {
                    b
                }
            }
            BinaryOp::Min => {
                if a.nan() || a <= b {
                    a
                } else {
                    b
                }
            }
        }
    }
    macro_rules! int {
        ($t:ty, $a:expr, $b:expr) => {{
            let (a, b): ($t, $t) = ($a, $b);
            match op {
                BinaryOp::Add => a.wrapping_add(b),
                BinaryOp::Sub => a.wrapping_sub(b),
                BinaryOp::Mul => a.wrapping_mul(b),
                BinaryOp::Div if b == 0 => 0,
                BinaryOp::Div if a == <$t>::MIN && b == -1 => <$t>::MIN,
                BinaryOp::Div => a / b,
                BinaryOp::Max => a.max(b),
                BinaryOp::Min => a.min(b),
            }
        }};
    }
    let b2 = |s: &[u8]| u16::from_le_bytes([s[0], s[1]]);
    let b4 = |s: &[u8]| <[u8; 4]>::try_from(&s[..4]).unwrap();
    let b8 = |s: &[u8]| <[u8; 8]>::try_from(&s[..8]).unwrap();
    match el {
        Element::F32 => float(op, f32::from_le_bytes(b4(x)), f32::from_le_bytes(b4(y)))
            .to_le_bytes()
            .to_vec(),
        Element::F64 => float(op, f64::from_le_bytes(b8(x)), f64::from_le_bytes(b8(y)))
            .to_le_bytes()
            .to_vec(),
        Element::F16 => {
            let r = float(
                op,
                f16::from_bits(b2(x)).to_f32(),
                f16::from_bits(b2(y)).to_f32(),
            );
            f16::from_f32(r).to_bits().to_le_bytes().to_vec()
        }
        Element::Bf16 => {
            let r = float(
                op,
                bf16::from_bits(b2(x)).to_f32(),
                bf16::from_bits(b2(y)).to_f32(),
            );
            bf16::from_f32(r).to_bits().to_le_bytes().to_vec()
        }
        Element::I32 => int!(i32, i32::from_le_bytes(b4(x)), i32::from_le_bytes(b4(y)))
            .to_le_bytes()
            .to_vec(),
        Element::I64 => int!(i64, i64::from_le_bytes(b8(x)), i64::from_le_bytes(b8(y)))
            .to_le_bytes()
            .to_vec(),
    }
}

mod num_like {
    pub trait F:
        Copy
        + PartialOrd
        + std::ops::Add<Output = Self>
        + std::ops::Sub<Output = Self>
        + std::ops::Mul<Output = Self>
        + std::ops::Div<Output = Self>
    {
        fn nan(self) -> bool;
    }
    impl F for f32 {
        fn nan(self) -> bool {
            self.is_nan()
        }
    }
    impl F for f64 {
        fn nan(self) -> bool {
            self.is_nan()
        }
    }
}

const ELEMENTS: [Element; 6] = [
    Element::F32,
    Element::F64,
    Element::F16,
    Element::Bf16,
    Element::I32,
    Element::I64,
];
const OPS: [BinaryOp; 6] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Max,
    BinaryOp::Min,
];

/// Values that meet every rule: zeros of both signs, NaN and infinities (integers: their
/// extremes, -1 and 0 as divisors), rounding cases, ordinary values.
fn values(el: Element, n: usize, seed: u64) -> Vec<f64> {
    let special: &[f64] = match el {
        Element::I32 => &[0.0, -1.0, 1.0, 2147483647.0, -2147483648.0, 7.0, -7.0],
        Element::I64 => &[0.0, -1.0, 1.0, 9.2e18, i64::MIN as f64, 7.0, -7.0],
        _ => &[
            0.0,
            -0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1.0 / 3.0,
            65504.0,
            1e-7,
        ],
    };
    let mut s = seed;
    (0..n)
        .map(|i| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (s >> 33) as f64 / (1u64 << 31) as f64 * 20.0 - 10.0;
            if i % 3 == 0 {
                special[(s >> 40) as usize % special.len()]
            } else if matches!(el, Element::I32 | Element::I64) {
                r.round()
            } else {
                r
            }
        })
        .collect()
}

/// Runs `binary` over `shape` with the given strides (offsets 1 and 2 into their bindings,
/// the output from element 3) and checks every output element against [`reference`] and that
/// nothing else of the output's binding changed.
fn check_walk(el: Element, op: BinaryOp, shape: &[u64], sa: &[u64], sb: &[u64], seed: u64) {
    let es = el.size();
    let n: u64 = shape.iter().product();
    let span = |s: &[u64]| last_element(shape, s, n).unwrap().map_or(0, |l| l + 1) as usize;
    let a = Arc::new(Mem(Mutex::new(encode(el, &values(el, span(sa) + 1, seed)))));
    let b = Arc::new(Mem(Mutex::new(encode(
        el,
        &values(el, span(sb) + 2, seed + 1),
    ))));
    let fill = vec![0xA5u8; (n as usize + 5) * es];
    let out = Arc::new(Mem(Mutex::new(fill.clone())));
    let io: KernelIo = Some(Arc::from(vec![
        bound(0, Access::Read, &a),
        bound(1, Access::Read, &b),
        bound(2, Access::Write, &out),
    ]));
    let call = Call {
        op,
        element: el,
        shape,
        a: (0, 1, sa),
        b: (1, 2, sb),
        out: Destination {
            binding: 2,
            offset: 3,
        },
    };
    call.run(&io).unwrap();
    let (a, b, got) = (a.0.lock(), b.0.lock(), out.0.lock());
    assert_eq!(got[..3 * es], fill[..3 * es], "bytes before the output");
    assert_eq!(
        got[(3 + n as usize) * es..],
        fill[..2 * es],
        "bytes after it"
    );
    // row-major over `shape`, outermost first
    let rank = shape.len();
    let mut idx = vec![0u64; rank];
    for i in 0..n as usize {
        let at = |s: &[u64], off: u64| {
            (off + idx.iter().zip(s).map(|(i, s)| i * s).sum::<u64>()) as usize * es
        };
        let want = reference(op, el, &a[at(sa, 1)..], &b[at(sb, 2)..]);
        let have = &got[(3 + i) * es..(4 + i) * es];
        assert_eq!(
            have,
            &want[..],
            "{el:?} {op:?} {shape:?} element {i} at {idx:?}"
        );
        for d in (0..rank).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

#[test]
fn every_element_type_and_operation_matches_the_reference() {
    for (k, el) in ELEMENTS.into_iter().enumerate() {
        for (j, op) in OPS.into_iter().enumerate() {
            let seed = (k * 6 + j) as u64;
            // contiguous, across blocks of results
            check_walk(el, op, &[9001], &[1], &[1], seed);
            // a scalar either side
            check_walk(el, op, &[3, 7], &[0, 0], &[7, 1], seed);
            check_walk(el, op, &[5, 300], &[300, 1], &[0, 0], seed);
            // bias over rows, a column broadcast, a transposed operand
            check_walk(el, op, &[4, 5, 6], &[30, 6, 1], &[0, 0, 1], seed);
            check_walk(el, op, &[4, 5, 6], &[0, 1, 0], &[30, 6, 1], seed);
            check_walk(el, op, &[6, 4], &[1, 6], &[4, 1], seed);
        }
    }
}

#[test]
fn long_broadcast_walks_cross_blocks_mid_row() {
    // 3 × 2 × 1 × 2900 (a size-1 dimension, whose stride is not used): blocks of 4096 f32
    // results end inside rows
    check_walk(
        Element::F32,
        BinaryOp::Add,
        &[3, 2, 1, 2900],
        &[0, 2900, 123456, 1],
        &[2, 1, 0, 0],
        7,
    );
    check_walk(
        Element::F64,
        BinaryOp::Mul,
        &[2, 3000, 2],
        &[1, 0, 0],
        &[6000, 2, 1],
        8,
    );
    // an empty walk writes nothing; a single element
    check_walk(
        Element::F32,
        BinaryOp::Sub,
        &[4, 0, 3],
        &[0, 0, 1],
        &[3, 3, 1],
        9,
    );
    check_walk(Element::I64, BinaryOp::Div, &[], &[], &[], 10);
}

#[test]
fn an_output_that_is_an_input_element_for_element_is_updated_in_place() {
    // x += y on one read-write binding, across several blocks
    let n = 10_000usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mem = Arc::new(Mem(Mutex::new(bytemuck::cast_slice(&x).to_vec())));
    let y = Arc::new(Mem(Mutex::new(bytemuck::cast_slice(&[0.5f32]).to_vec())));
    let io: KernelIo = Some(Arc::from(vec![
        bound(0, Access::ReadWrite, &mem),
        bound(1, Access::Read, &y),
    ]));
    Call {
        op: BinaryOp::Add,
        element: Element::F32,
        shape: &[n as u64],
        a: (0, 0, &[1]),
        b: (1, 0, &[0]),
        out: Destination {
            binding: 0,
            offset: 0,
        },
    }
    .run(&io)
    .unwrap();
    let got: Vec<f32> = mem
        .0
        .lock()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert!(got.iter().enumerate().all(|(i, &v)| v == i as f32 + 0.5));
}

#[test]
fn every_refusal_names_its_reason_and_touches_nothing() {
    let a = Arc::new(Mem(Mutex::new(vec![1; 64])));
    let out = Arc::new(Mem(Mutex::new(vec![0; 64])));
    let io: KernelIo = Some(Arc::from(vec![
        bound(0, Access::Read, &a),
        bound(1, Access::Write, &out),
        bound(2, Access::Read, &out),
    ]));
    let dst = |binding, offset| Destination { binding, offset };
    let call = |shape: &'static [u64], a: Input<'static>, out| Call {
        op: BinaryOp::Add,
        element: Element::F32,
        shape,
        a,
        b: (0, 0, &[1; 9][..shape.len().min(9)]),
        out,
    };
    let cases: Vec<(Call, &str)> = vec![
        (call(&[4], (0, 0, &[1]), dst(1, 0)), ""),
        (
            call(&[17], (0, 0, &[1]), dst(1, 0)),
            "reads elements 0..=16 of binding 0, which holds 16",
        ),
        (
            call(&[4], (0, 13, &[1]), dst(1, 0)),
            "reads elements 13..=16",
        ),
        (call(&[4], (0, 0, &[u64::MAX]), dst(1, 0)), "overflow"),
        (
            call(&[4], (0, 0, &[1]), dst(1, 13)),
            "elements 13..17 are outside binding 1",
        ),
        (
            call(&[4], (0, 0, &[1]), dst(2, 0)),
            "binding 2 is read-only",
        ),
        (
            call(&[4], (1, 0, &[1]), dst(1, 0)),
            "binding 1 is write-only",
        ),
        (
            call(&[4], (7, 0, &[1]), dst(1, 0)),
            "binding 7 is not bound",
        ),
        (
            call(&[4], (0, 0, &[1, 1]), dst(1, 0)),
            "a has 2 strides for a walk of 1",
        ),
        (
            call(&[1; 9], (0, 0, &[1; 9]), dst(1, 0)),
            "9 dimensions; at most 8",
        ),
        (
            call(&[1 << 13, 1 << 12], (0, 0, &[0, 0]), dst(1, 0)),
            "over one call's 16777216 elements",
        ),
        (
            call(&[u64::MAX, 2], (0, 0, &[0, 0]), dst(1, 0)),
            "over one call's",
        ),
    ];
    for (call, want) in cases {
        let before = out.0.lock().clone();
        let got = call.run(&io);
        if want.is_empty() {
            got.unwrap();
            continue;
        }
        let e = got.unwrap_err();
        assert!(e.contains(want), "{e:?} should say {want:?}");
        assert_eq!(*out.0.lock(), before, "{want}: the output changed");
    }
    let e = call(&[4], (0, 0, &[1]), dst(1, 0)).run(&None).unwrap_err();
    assert!(e.contains("only during cpu-kernel.run"), "{e}");
}

#[test]
fn walks_drop_single_dimensions_and_merge_contiguous_ones() {
    let w = Walk::new(&[2, 1, 3, 4], [&[12, 99, 4, 1], &[0, 5, 0, 1]], 24);
    // innermost first: 4 (a 1, b 1); 3 does not merge with it (b's 0 is not 1 · 4); the
    // size-1 dimension goes; 2 merges with 3 (a: 12 = 4 · 3, b: 0 = 0 · 3)
    assert_eq!(w.rank, 2);
    assert_eq!(&w.size[..2], &[4, 6]);
    assert_eq!(&w.strides[0][..2], &[1, 4]);
    assert_eq!(&w.strides[1][..2], &[1, 0]);
    let w = Walk::new(&[2, 3, 4], [&[12, 4, 1], &[12, 4, 1]], 24);
    assert_eq!((w.rank, w.size[0], w.strides[0][0]), (1, 24, 1));
}

/// Buffers as parts of one shared storage, as the CPU device's segments hold them.
struct Part {
    storage: Arc<Mutex<Vec<u8>>>,
    offset: usize,
}

impl BufferMemory for Part {
    fn read_into(&self, offset: usize, len: usize, dst: &mut Vec<u8>) {
        let at = self.offset + offset;
        dst.extend_from_slice(&self.storage.lock()[at..at + len]);
    }
    fn write_from(&self, offset: usize, src: &[u8]) {
        let at = self.offset + offset;
        self.storage.lock()[at..at + src.len()].copy_from_slice(src);
    }
    fn placement(&self) -> Option<(usize, usize)> {
        Some((
            Arc::as_ptr(&self.storage) as *const () as usize,
            self.offset,
        ))
    }
    fn try_with_storage_mut(&self, f: &mut dyn FnMut(&mut [u8])) -> bool {
        let Some(mut storage) = self.storage.try_lock() else {
            return false;
        };
        f(&mut storage);
        true
    }
    fn try_with_bytes(&self, offset: usize, len: usize, f: &mut dyn FnMut(&[u8])) -> bool {
        // in a test the storage's one lock is held by the output: read what it would give
        let at = self.offset + offset;
        match self.storage.try_lock() {
            Some(s) => {
                f(&s[at..at + len]);
                true
            }
            None => false,
        }
    }
}

/// Binding `binding`: `size` bytes of `storage` from `offset`.
fn part(
    storage: &Arc<Mutex<Vec<u8>>>,
    binding: u32,
    offset: usize,
    size: usize,
    access: Access,
) -> BoundMemory {
    BoundMemory {
        binding,
        size: size as u64,
        access,
        memory: Arc::new(Part {
            storage: storage.clone(),
            offset,
        }),
        resident: None,
        asked: Default::default(),
        units: Default::default(),
    }
}

#[test]
fn inputs_and_output_in_one_storage_are_computed_in_it_and_overlaps_through_scratch() {
    // a: 10 000 f32 at byte 64; b: 100 f32 after it; out after b (and, second, out = a)
    let n = 10_000usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.25).collect();
    let b: Vec<f32> = (0..100).map(|i| -(i as f32)).collect();
    let (pa, pb) = (64, 64 + n * 4);
    let po = pb + 400;
    let mut bytes = vec![0xA5u8; po + n * 4 + 64];
    bytes[pa..pb].copy_from_slice(bytemuck::cast_slice(&a));
    bytes[pb..po].copy_from_slice(bytemuck::cast_slice(&b));
    let storage = Arc::new(Mutex::new(bytes));
    let part = |binding, offset, size, access| part(&storage, binding, offset, size, access);
    let io: KernelIo = Some(Arc::from(vec![
        part(0, pa, n * 4, Access::ReadWrite),
        part(1, pb, 400, Access::Read),
        part(2, po, n * 4, Access::Write),
    ]));
    // [100, 100] + [100] broadcast over rows, into binding 2, then into binding 0 itself
    for out in [2, 0] {
        let before = storage.lock().clone();
        Call {
            op: BinaryOp::Add,
            element: Element::F32,
            shape: &[100, 100],
            a: (0, 0, &[100, 1]),
            b: (1, 0, &[0, 1]),
            out: Destination {
                binding: out,
                offset: 0,
            },
        }
        .run(&io)
        .unwrap();
        let after = storage.lock().clone();
        let at = if out == 2 { po } else { pa };
        let got: Vec<f32> = after[at..at + n * 4]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let a_now: Vec<f32> = before[pa..pb]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        for (i, g) in got.iter().enumerate() {
            assert_eq!(*g, a_now[i] + b[i % 100], "out {out}, element {i}");
        }
        // every other byte as it was
        let mut rest_before = before.clone();
        rest_before[at..at + n * 4].fill(0);
        let mut rest_after = after;
        rest_after[at..at + n * 4].fill(0);
        assert!(
            rest_before == rest_after,
            "out {out}: bytes outside the output changed"
        );
    }
}

#[test]
fn direct_blocks_end_inside_rows() {
    // [7, 10 001] + [10 001] straight into one storage: blocks of 65 536 f32 results end
    // inside rows, and the last is short
    let (rows, cols) = (7usize, 10_001usize);
    let n = rows * cols;
    assert!(n * 4 > DIRECT_BLOCK_BYTES, "more than one direct block");
    let a: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.5).collect();
    let b: Vec<f32> = (0..cols).map(|i| -(i as f32)).collect();
    let (pa, pb) = (0, n * 4);
    let po = pb + cols * 4;
    let mut bytes = vec![0xA5u8; po + n * 4 + 8];
    bytes[pa..pb].copy_from_slice(bytemuck::cast_slice(&a));
    bytes[pb..po].copy_from_slice(bytemuck::cast_slice(&b));
    let storage = Arc::new(Mutex::new(bytes));
    let part = |binding, offset, size, access| part(&storage, binding, offset, size, access);
    let io: KernelIo = Some(Arc::from(vec![
        part(0, pa, n * 4, Access::Read),
        part(1, pb, cols * 4, Access::Read),
        part(2, po, n * 4, Access::Write),
    ]));
    let before = elements_computed();
    Call {
        op: BinaryOp::Add,
        element: Element::F32,
        shape: &[rows as u64, cols as u64],
        a: (0, 0, &[cols as u64, 1]),
        b: (1, 0, &[0, 1]),
        out: Destination {
            binding: 2,
            offset: 0,
        },
    }
    .run(&io)
    .unwrap();
    assert!(elements_computed() >= before + n as u64);
    let after = storage.lock();
    for (i, c) in after[po..po + n * 4].chunks_exact(4).enumerate() {
        let got = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        assert_eq!(got, a[i] + b[i % cols], "element {i}");
    }
    assert_eq!(after[po + n * 4..], [0xA5; 8], "bytes after the output");
}
