//! The in-place (ABI 1.3) kernels split into block ranges: the output must not depend on how the
//! host splits a launch, each range writes only its own rows (each byte once, over all ranges)
//! and reads only the rows of A it multiplies.

use super::*;
use umd_sdk::kernel::{HeapMemory, Recorder, part};
use umd_sdk::{Access, BlockRange, BoundBuffer, KernelCall};

/// A [`Memory`] that logs every access: (write, binding, byte range).
/// One case: the request, its input values, and whether A is dense over the output's rows
/// (row `r` of batch × M is bytes `r * K * size ..` of A).
struct Case {
    req: Req,
    values: Vec<Vec<f64>>,
    dense_a: bool,
}

fn case(req: Req, dense_a: bool) -> Case {
    let values = req
        .inputs
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, (shape, dt))| {
            let v = data(shape.iter().product::<u64>() as usize, 40 + i as u64, *dt);
            // MatMulInteger: u8 operands in 0..16
            if *dt == Dtype::U8 {
                v.into_iter().map(|x| x + 8.0).collect()
            } else {
                v
            }
        })
        .collect();
    Case {
        req,
        values,
        dense_a,
    }
}

/// Runs the launch of `c` as `parts` block ranges, last first, on an output prefilled with
/// 0xAB; returns the output bytes (checking each range's accesses).
fn run_in_parts(c: &Case, parts: u64) -> Vec<u8> {
    run_named(c, parts, None).0
}

/// [`run_in_parts`] with B (binding 1) named resident under `b_name`; also returns the bytes
/// of B the ranges copied and those read for the matrix unit (in place, in a host).
fn run_named(c: &Case, parts: u64, b_name: Option<u64>) -> (Vec<u8>, u64, u64) {
    let plan = c.req.plan().unwrap();
    let l = &plan.launches[0];
    assert!(MatMul::splittable(&l.module_id, &l.entry_point));
    let mut bufs: Vec<Vec<u8>> = c
        .req
        .inputs
        .iter()
        .flatten()
        .zip(&c.values)
        .map(|((_, dt), v)| dtype::encode(*dt, v).unwrap())
        .collect();
    let out = &plan.outputs[0];
    let osize = dtype::size(out.dtype) as u64;
    bufs.push(vec![
        0xAB;
        (out.shape.iter().product::<u64>() * osize) as usize
    ]);
    let y = bufs.len() as u32 - 1;
    let (mut mem, buffers) = HeapMemory::for_launch(l, bufs);
    if let Some(name) = b_name {
        mem.name_resident(1, name);
    }
    let (mut b_read, mut b_unit) = (0, 0);
    let (a_shape, _) = c.req.inputs[0].as_ref().unwrap();
    let k = *a_shape.last().unwrap();
    let n = *out.shape.last().unwrap();
    let rows = out.shape.iter().product::<u64>() / n.max(1);
    let blocks = l.grid.volume();
    // the kernel shares panels × rows items, column panel by column panel
    let width = crate::product::panel_width(n as usize) as u64;
    let panels = n.div_ceil(width).max(1);
    let mut owner = vec![None; (rows * n) as usize];
    for p in (0..parts).rev() {
        let call = KernelCall::for_launch(l, &buffers, part(blocks, parts, p));
        let mut spy = Recorder::new(&mut mem);
        MatMul::run_kernel(&call, &mut spy).unwrap();
        b_read += spy.bytes_read(1);
        b_unit += spy.bytes_read_by_unit(1);
        let share = call.share(panels * rows);
        let row_bytes = k * dtype::size(c.req.inputs[0].as_ref().unwrap().1) as u64;
        let mut rows_written = std::collections::BTreeSet::new();
        for t in spy.writes() {
            let r = &t.range;
            assert_eq!(t.binding, y, "writes only Y");
            for e in r.start / osize..r.end / osize {
                let (row, col) = (e / n, e % n);
                let item = col / width * rows + row;
                assert!(
                    share.contains(&item),
                    "part {p}: element ({row}, {col}) not its own"
                );
                let o = &mut owner[e as usize];
                assert!(o.is_none(), "element ({row}, {col}) written twice");
                *o = Some(p);
                rows_written.insert(row);
            }
        }
        if c.dense_a {
            let mut a_read = 0;
            for r in spy
                .log
                .iter()
                .filter(|t| !t.write && t.binding == 0)
                .map(|t| &t.range)
            {
                let row = r.start / row_bytes;
                assert!(rows_written.contains(&row), "part {p}: read A row {row}");
                a_read += r.end - r.start;
            }
            assert_eq!(
                a_read,
                rows_written.len() as u64 * row_bytes,
                "A rows read once"
            );
        }
    }
    assert!(
        owner.iter().all(Option::is_some),
        "every output element written"
    );
    (mem.contents(y).unwrap().to_vec(), b_read, b_unit)
}

#[test]
fn every_split_gives_the_same_bytes_and_keeps_to_its_rows() {
    let f32 = Dtype::F32;
    let gemm = |ta: bool, tb: bool, a: &[u64], b: &[u64], cs: Option<&[u64]>| {
        let mut r = Req::new("Gemm")
            .input(a, f32)
            .input(b, f32)
            .attr("transA", A::Int(ta as i64))
            .attr("transB", A::Int(tb as i64))
            .attr("alpha", A::Float(0.5))
            .attr("beta", A::Float(-1.25));
        if let Some(cs) = cs {
            r = r.input(cs, f32);
        }
        case(r, !ta)
    };
    let mm = |a: &[u64], b: &[u64], dt: Dtype, dense_a: bool| {
        case(Req::new("MatMul").input(a, dt).input(b, dt), dense_a)
    };
    let cases = [
        mm(&[131, 70], &[70, 45], f32, true),
        // A broadcast over the second batch dimension, B over the first
        mm(&[3, 1, 37, 70], &[1, 2, 70, 45], f32, false),
        // B shared by every batch; rows in chunks of 256
        mm(&[2, 300, 9], &[9, 20], Dtype::F16, true),
        // chunks of 56 rows (K = 1100)
        mm(&[600, 1100], &[1100, 9], f32, true),
        // B packed in 5 groups of 8 columns (GROUP_BYTES is 256 KiB in tests): A's rows are
        // read once per group
        mm(&[5, 2000], &[2000, 40], f32, false),
        // MatMulInteger in 2 groups of 24 columns, a zero point per column of B
        case(
            Req::new("MatMulInteger")
                .input(&[5, 1000], Dtype::U8)
                .input(&[1000, 40], Dtype::I8)
                .input(&[], Dtype::U8)
                .input(&[40], Dtype::I8),
            false,
        ),
        mm(&[5, 13, 17], &[5, 17, 3], Dtype::I64, true),
        // column panels: N = 600 in 2, N = 1100 in 4 (a range may span panels)
        mm(&[37, 20], &[20, 600], f32, true),
        mm(&[2, 3, 19, 8], &[8, 1100], Dtype::Bf16, true),
        gemm(false, true, &[29, 12], &[530, 12], Some(&[29, 530])),
        mm(&[70], &[3, 70, 33], Dtype::F64, false),
        gemm(false, false, &[53, 21], &[21, 19], Some(&[19])),
        gemm(true, false, &[21, 53], &[21, 19], Some(&[53, 1])),
        gemm(false, true, &[53, 21], &[19, 21], Some(&[53, 19])),
        gemm(true, true, &[21, 53], &[19, 21], None),
        case(
            Req::new("MatMulInteger")
                .input(&[67, 30], Dtype::U8)
                .input(&[30, 11], Dtype::I8)
                .input(&[67], Dtype::U8)
                .input(&[], Dtype::I8),
            true,
        ),
    ];
    for c in &cases {
        let what = format!("{} {:?}", c.req.op, c.req.inputs);
        let (d, want) = c.req.run(&c.values).unwrap();
        let whole = run_in_parts(c, 1);
        assert_eq!(dtype::decode_f64(d.dtype, &whole), want, "{what}: whole");
        let blocks = c.req.plan().unwrap().launches[0].grid.volume();
        for parts in [2, 3, 7, blocks.min(40)] {
            assert_eq!(run_in_parts(c, parts), whole, "{what}: {parts} parts");
        }
        // B named resident (a compiled model's frozen weights): the float kernels read and
        // pack it on the first launch only, and compute the same bytes from what they kept —
        // except f32 on the matrix unit (16 rows or more), which never copies B: the unit
        // reads it where it lies on every launch
        let name = 1000 + cases.iter().position(|x| std::ptr::eq(x, c)).unwrap() as u64;
        let float = c.req.op != "MatMulInteger";
        let (a_shape, dt) = c.req.inputs[0].as_ref().unwrap();
        let trans_a = (c.req.attrs.iter()).any(|(n, v)| *n == "transA" && matches!(v, A::Int(1)));
        let m = match a_shape.len() {
            1 => 1,
            r if trans_a => a_shape[r - 1],
            r => a_shape[r - 2],
        };
        let bound = float && *dt == Dtype::F32 && m >= crate::operand::UNIT_MIN_ROWS as u64;
        let (first, read, unit) = run_named(c, 1, Some(name));
        assert_eq!(first, whole, "{what}: resident B");
        assert_eq!(
            (read > 0, unit > 0),
            (!bound, bound),
            "{what}: B read the first time"
        );
        for parts in [1, 3, blocks.min(40)] {
            let (bytes, read, unit) = run_named(c, parts, Some(name));
            assert_eq!(bytes, whole, "{what}: resident B, {parts} parts");
            assert_eq!(read == 0, float, "{what}: B read again ({read} bytes)");
            assert_eq!(unit > 0, bound, "{what}: B read in place ({unit} bytes)");
        }
    }
}

#[test]
fn bad_launches_are_refused_not_run() {
    let c = case(
        Req::new("MatMul")
            .input(&[4, 3], Dtype::F32)
            .input(&[3, 2], Dtype::F32),
        true,
    );
    let plan = c.req.plan().unwrap();
    let l = &plan.launches[0];
    let call = |entry: &str, sizes: [u64; 3]| KernelCall {
        module_id: l.module_id.clone(),
        entry_point: entry.into(),
        grid: l.grid,
        block: l.block,
        params: l.params.clone(),
        relocations: l.relocations.clone(),
        buffers: (0..3)
            .map(|b| BoundBuffer {
                binding: b,
                size: sizes[b as usize],
            })
            .collect(),
        blocks: BlockRange {
            first: 0,
            count: l.grid.volume(),
        },
    };
    let mut mem = HeapMemory::new([
        (0, Access::Read, vec![0; 48]),
        (1, Access::Read, vec![0; 24]),
        (2, Access::Write, vec![0; 32]),
    ]);
    let mut err = |entry: &str, sizes| {
        MatMul::run_kernel(&call(entry, sizes), &mut mem)
            .unwrap_err()
            .to_string()
    };
    assert!(err("matmul_f32", [47, 24, 32]).contains("binding 0 (A)"));
    assert!(err("matmul_f32", [48, 24, 31]).contains("binding 2 (Y)"));
    assert!(err("matmul_u8", [48, 24, 32]).contains("unknown entry point"));
    assert!(err("matmul_f32_x", [48, 24, 32]).contains("unknown entry point"));
    assert!(!MatMul::splittable("matmul_f32", "conv_f32"));
    // A geometry whose extent overflows is refused, not wrapped
    let geometry = |sam| {
        let g = crate::plan::Geometry {
            m: 4,
            n: 2,
            k: 3,
            sam,
            sak: 1,
            sbk: 2,
            sbn: 1,
            bshape: vec![],
            sa: vec![],
            sb: vec![],
        };
        let mut p = umd_sdk::params::ParamPacker::new();
        g.pack(&mut p).unwrap();
        p.finish(4096).unwrap().0
    };
    assert!(
        l.params.ends_with(&geometry(3)),
        "the geometry ends the block"
    );
    let geom = geometry(u64::MAX / 2);
    let mut bad = call("matmul_f32", [48, 24, 32]);
    bad.params.truncate(l.params.len() - geom.len());
    bad.params.extend(geom);
    let e = MatMul::run_kernel(&bad, &mut mem).unwrap_err().to_string();
    assert!(e.contains("overflows"), "{e}");
}

#[test]
fn few_rows_stream_b_once_and_match_the_reference() {
    // At most `stream::MAX_ROWS` rows of A and a B not kept: B is read tile by tile (96
    // elements in tests) and multiplied as read, never packed; whole or split, each element of
    // B is read once, and the values match the reference on every dtype and both layouts
    let cases: [(usize, usize, usize, bool); 8] = [
        (1, 50, 300, true),  // transposed (a Gemm's weight): 96-deep slices of one column
        (3, 130, 40, false), // rows of 130 > 96: 96-column tiles one row deep
        (4, 1100, 9, false), // four column panels
        (2, 7, 1000, true),  // ten depth slices per column
        (1, 1, 1, false),
        (4, 33, 0, true), // K = 0: zeros
        // several columns a tile (4 of 20 deep) and a last tile of one column, which a split
        // cuts elsewhere: the same dot products whatever the tiles' widths
        (3, 13, 20, true),
        (1, 37, 10, true),
    ];
    for dt in DTYPES {
        for &(m, n, k, tb) in &cases {
            let what = format!("{dt:?} {m}x{n}x{k} transB={tb}");
            let b_shape = if tb {
                [n as u64, k as u64]
            } else {
                [k as u64, n as u64]
            };
            let req = Req::new("Gemm")
                .input(&[m as u64, k as u64], dt)
                .input(&b_shape, dt)
                .attr("transB", A::Int(tb as i64));
            let c = case(req, true);
            let (want, mag) = reference(
                &c.values[0],
                &c.values[1],
                (m, n, k),
                (false, tb),
                &[(0, 0)],
            );
            let (d, got) = c.req.run(&c.values).unwrap();
            assert_close(&got, &want, &mag, d.dtype, &what);
            let b_bytes = (n * k * dtype::size(dt)) as u64;
            let (whole, read, _) = run_named(&c, 1, None);
            assert_eq!(dtype::decode_f64(d.dtype, &whole), got, "{what}: whole");
            if tb {
                assert_eq!(read, b_bytes, "{what}: B read once");
            }
            let blocks = c.req.plan().unwrap().launches[0].grid.volume();
            for parts in [2, 3, blocks.min(40)] {
                let (bytes, read, _) = run_named(&c, parts, None);
                assert_eq!(bytes, whole, "{what}: {parts} parts");
                if tb {
                    assert_eq!(read, b_bytes, "{what}: B read once in {parts} parts");
                }
            }
        }
    }
}

#[test]
fn batches_sharing_b_read_it_once_not_streamed() {
    // MatMul [6, 1, K] × [K, N]: one row a batch, B shared by the six batches: not streamed
    // once per batch but read once and reused (f16: decoded for the matrix unit), or (f32) not
    // copied at all: the matrix unit reads it where it lies, once per batch
    for dt in [Dtype::F16, Dtype::F32] {
        let c = case(
            Req::new("MatMul")
                .input(&[6, 1, 40], dt)
                .input(&[40, 30], dt),
            false,
        );
        let (d, want) = c.req.run(&c.values).unwrap();
        let (bytes, read, unit) = run_named(&c, 1, None);
        assert_eq!(dtype::decode_f64(d.dtype, &bytes), want, "{dt:?}");
        let b_bytes = 40 * 30 * dtype::size(dt) as u64;
        if dt == Dtype::F32 {
            assert_eq!((read, unit), (0, 6 * b_bytes), "f32: B never copied");
        } else {
            assert_eq!((read, unit), (b_bytes, 0), "{dt:?}: B read once");
        }
    }
}

#[test]
fn f32_operands_are_multiplied_where_they_lie() {
    // f32 on the matrix unit (ABI 1.9): neither B nor A is copied into the kernel — the unit
    // reads them in place (here, outside a component, through `read_for_unit`) — whole or
    // split, resident or not, transposed or not; f16 decodes both as before
    let cases = [
        (&[64u64, 70][..], &[70u64, 45][..], false),
        (&[2, 20, 33][..], &[2, 33, 17][..], false),
        (&[40, 12][..], &[530, 12][..], true),
    ];
    for (a, b, tb) in cases {
        for dt in [Dtype::F32, Dtype::F16] {
            let op = if a.len() == 2 { "Gemm" } else { "MatMul" };
            let mut req = Req::new(op).input(a, dt).input(b, dt);
            if op == "Gemm" {
                req = req.attr("transB", A::Int(tb as i64));
            }
            let c = case(req, true);
            let what = format!("{dt:?} {a:?} x {b:?}");
            let (d, want) = c.req.run(&c.values).unwrap();
            for (parts, name) in [(1, None), (3, None), (1, Some(7)), (5, Some(7))] {
                let (bytes, read, unit) = run_named(&c, parts, name);
                assert_eq!(dtype::decode_f64(d.dtype, &bytes), want, "{what}");
                if dt == Dtype::F32 {
                    assert_eq!(read, 0, "{what}: B copied");
                    assert!(unit >= b.iter().product::<u64>() * 4, "{what}: B not read");
                } else {
                    assert_eq!(unit, 0, "{what}: f16 B read for the unit");
                }
            }
        }
    }
}
