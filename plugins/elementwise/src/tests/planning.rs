//! Planning (entry points, errors, describe, self-tests), the CUDA sources of every op and
//! dtype, and the broadcast machinery (coalescing, magic division, every walk mode on the CPU).

use super::*;
use crate::bcast::{Geometry, Mode, magic, magic_div};
use crate::ops::{ALL, NUMERIC};
use umd_sdk::dtype::{decode_f64, encode};
use umd_sdk::params::ParamPacker;
use umd_sdk::{Access, AttrValueExt, Launch, testing};

#[test]
fn entry_points_name_the_walk_mode() {
    let entry = |op: &str, a: &[u64], b: &[u64], dt| {
        let inputs = [(a.to_vec(), dt, vec![]), (b.to_vec(), dt, vec![])];
        plan(&request(op, &inputs, &[])).unwrap().launches[0]
            .entry_point
            .clone()
    };
    assert_eq!(entry("Add", &[2, 3], &[2, 3], Dtype::F32), "add_f32");
    assert_eq!(entry("add", &[2, 3], &[3], Dtype::F32), "add_f32_bcast");
    assert_eq!(
        entry("Add", &[1, 6], &[6], Dtype::F16),
        "add_f16",
        "size-1 dims drop"
    );
    assert_eq!(
        entry("Mul", &[7], &[], Dtype::I64),
        "mul_i64",
        "a scalar stays flat"
    );
    assert_eq!(entry("Less", &[4], &[4], Dtype::U8), "lt_u8");
    assert_eq!(
        entry("Add", &[1 << 17, 1 << 16], &[1 << 16], Dtype::I8),
        "add_i8_bcast64"
    );
    let inputs = [(vec![3], Dtype::F16, vec![]), (vec![3], Dtype::I64, vec![])];
    let p = plan(&request("Pow", &inputs, &[])).unwrap();
    assert_eq!(p.launches[0].entry_point, "pow_f16_i64");
    assert_eq!(p.launches[0].module_id, "elementwise_pow_f16");
}

#[test]
fn bad_requests_are_named() {
    let f32t = |s: &[u64]| (s.to_vec(), Dtype::F32, vec![]);
    let t = |s: &[u64], dt| (s.to_vec(), dt, vec![]);
    let err = |op: &str, ins: &[Input], attrs: &[(&str, AttrValueExt)]| {
        plan(&request(op, ins, attrs)).unwrap_err()
    };
    assert!(
        matches!(err("Add", &[f32t(&[2]), f32t(&[3])], &[]), OpError::InvalidShape(m) if m.contains("broadcast"))
    );
    let e = err("Add", &[f32t(&[2]), t(&[2], Dtype::F16)], &[]);
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("f32 and f16")));
    let e = err("Sum", &[t(&[2], Dtype::I8)], &[]);
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("Sum supports f32")));
    assert!(matches!(
        err("And", &[f32t(&[2]), f32t(&[2])], &[]),
        OpError::UnsupportedDtype(_)
    ));
    assert!(matches!(
        err("BitwiseAnd", &[f32t(&[2]), f32t(&[2])], &[]),
        OpError::UnsupportedDtype(_)
    ));
    let e = err("Where", &[f32t(&[2]), f32t(&[2]), f32t(&[2])], &[]);
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("condition")));
    let e = err("Pow", &[f32t(&[2]), t(&[2], Dtype::Boolean)], &[]);
    assert!(matches!(e, OpError::UnsupportedDtype(m) if m.contains("exponent")));
    let e = err(
        "Add",
        &[f32t(&[2]), f32t(&[2])],
        &[("alpha", AttrValueExt::Float(1.0))],
    );
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("alpha")));
    let e = err("Mod", &[f32t(&[2]), f32t(&[2])], &[("fmod", int(2))]);
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("fmod")));
    let i = t(&[2], Dtype::U8);
    let e = err("BitShift", &[i.clone(), i.clone()], &[]);
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("direction")));
    let e = err(
        "BitShift",
        &[i.clone(), i],
        &[("direction", AttrValueExt::Text("UP".into()))],
    );
    assert!(matches!(e, OpError::InvalidAttribute(m) if m.contains("direction")));
    assert!(matches!(
        err("Add", &[f32t(&[2])], &[]),
        OpError::InvalidShape(_)
    ));
    assert!(matches!(err("Max", &[], &[]), OpError::InvalidShape(_)));
    assert!(
        matches!(err("Add", &[f32t(&[1; 9]), f32t(&[1])], &[]), OpError::InvalidShape(m) if m.contains("rank"))
    );
    assert!(matches!(
        err("Relu", &[f32t(&[2])], &[]),
        OpError::UnsupportedOp(_)
    ));
    assert!(matches!(err("Conv", &[], &[]), OpError::UnsupportedOp(_)));
    let absent = PlanRequestExt::builder("Add")
        .input(TensorDesc::new("a", vec![2], Dtype::F32))
        .absent()
        .build(Target::cpu());
    assert!(matches!(plan(&absent), Err(OpError::InvalidShape(m)) if m.contains("required")));
}

#[test]
fn describe_lists_onnx_names_and_no_unary_ops() {
    let info = Elementwise::describe();
    let names: Vec<&str> = info.ops.iter().map(|o| o.name.as_str()).collect();
    assert!(names.contains(&"GreaterOrEqual") && names.contains(&"Where"));
    assert!(!names.contains(&"Relu") && !names.contains(&"Neg"));
    assert!(
        info.ops
            .iter()
            .all(|o| o.targets == ["cpu", "cuda"] && o.priority == 0)
    );
    assert!(Elementwise::tolerance("Pow", Dtype::F16).is_some());
    assert!(Elementwise::tolerance("Add", Dtype::F32).is_none());
}

#[test]
fn self_tests_pass_on_the_cpu_kernels() {
    let cases = Elementwise::self_tests();
    assert!((3..=6).contains(&cases.len()));
    for c in cases {
        let req = PlanRequestExt::from_legacy(&umd_sdk::PlanRequest {
            op: c.op.clone(),
            inputs: c.inputs.clone(),
            attributes: c.attributes.clone(),
            target: Target::cpu(),
        });
        let (plan, outs) = testing::run::<Elementwise>(&req, &c.input_data).unwrap();
        let dt = plan.outputs[0].dtype;
        let (got, want) = (decode_f64(dt, &outs[0]), decode_f64(dt, &c.expected[0]));
        assert!(
            got.iter().zip(&want).all(|(g, w)| close(dt, *g, *w)),
            "{}: {got:?} vs {want:?}",
            c.name
        );
    }
}

// ---------------------------------------------------------------- CUDA

/// One request per op × dtype (Pow × exponent dtype), flat and broadcast.
fn every_request() -> Vec<PlanRequestExt> {
    let mut reqs = Vec::new();
    for op in crate::ops::ONNX_OPS {
        for &dt in op.dtypes {
            let ydts: &[Dtype] = if op.name == "Pow" { NUMERIC } else { &[dt] };
            for &ydt in ydts {
                for (a, b) in [(vec![4, 3], vec![4, 3]), (vec![4, 3], vec![3])] {
                    let mut inputs = vec![(a.clone(), dt, vec![]), (b.clone(), ydt, vec![])];
                    let attrs = match op.name {
                        "BitShift" => vec![("direction", AttrValueExt::Text("LEFT".into()))],
                        _ => vec![],
                    };
                    if op.name == "Where" {
                        inputs.insert(0, (vec![4, 1], Dtype::Boolean, vec![]));
                    }
                    if op.name == "Mean" || op.name == "Sum" {
                        inputs.push((b, dt, vec![]));
                    }
                    reqs.push(request(op.name, &inputs, &attrs));
                }
            }
        }
    }
    reqs
}

#[test]
fn cuda_sources_for_every_op_and_dtype() {
    let mut modules = std::collections::BTreeSet::new();
    for req in every_request() {
        let srcs = testing::cuda_sources::<Elementwise>(&req)
            .unwrap_or_else(|e| panic!("{} {:?}: {e:?}", req.op, req.inputs));
        for (id, src) in srcs {
            modules.insert(id);
            assert!(!src.code.contains("#include"));
        }
    }
    assert!(modules.len() >= 30, "{modules:?}");
}

#[test]
fn cuda_modules_define_every_entry_point_they_list() {
    for g in crate::ops::GROUPS {
        for &dt in ALL {
            let id = crate::ops::module_id(g, dt);
            match Elementwise::kernel_source(&id, &Target::cpu()) {
                Ok(src) => {
                    assert!(!src.entry_points.is_empty(), "{id}");
                    for e in &src.entry_points {
                        assert!(
                            src.code.contains(&format!("void {e}(")),
                            "{e} missing from {id}"
                        );
                        assert!(crate::ops::Entry::parse(e).is_some(), "{e} does not parse");
                    }
                }
                Err(_) => assert!(crate::ops::parse_module(&id).is_none(), "{id} refused"),
            }
        }
    }
    assert!(Elementwise::kernel_source("elementwise_logic_f32", &Target::cpu()).is_err());
    assert!(Elementwise::kernel_source("elementwise_f32", &Target::cpu()).is_err());
}

// ---------------------------------------------------------------- broadcast machinery

#[test]
fn geometry_drops_unit_dims_and_merges_contiguous_ones() {
    let g = Geometry::broadcast(&[4, 5, 6], &[&[4, 5, 6], &[1, 1, 6]]).unwrap();
    assert_eq!((g.rank, &g.size[..2]), (2, &[6, 20][..]));
    assert_eq!(
        (g.strides[0][..2].to_vec(), g.strides[1][..2].to_vec()),
        (vec![1, 6], vec![1, 0])
    );
    assert_eq!(g.mode(), Mode::Strided32);
    let g = Geometry::broadcast(&[1, 6], &[&[6], &[1, 6]]).unwrap();
    assert_eq!((g.rank, g.mode()), (1, Mode::Flat));
    let g = Geometry::broadcast(&[2, 0], &[&[2, 0], &[0]]).unwrap();
    assert_eq!((g.n, g.mode()), (0, Mode::Flat));
    let g = Geometry::broadcast(&[], &[&[], &[]]).unwrap();
    assert_eq!((g.n, g.rank, g.mode()), (1, 0, Mode::Flat));
}

#[test]
fn magic_division_matches_plain_division() {
    let mut rng = Rng(42);
    let mut divisors: Vec<u32> = vec![
        1,
        2,
        3,
        5,
        7,
        6,
        12,
        641,
        1 << 16,
        (1 << 31) - 1,
        1 << 31,
        (1 << 31) + 1,
        u32::MAX - 1,
        u32::MAX,
    ];
    divisors.extend((0..200).map(|_| (rng.next() as u32) >> (rng.next() % 31)));
    for d in divisors.into_iter().filter(|d| *d > 0) {
        let (m, s) = magic(d);
        let mut xs = vec![
            0,
            1,
            d - 1,
            d,
            d.wrapping_add(1),
            u32::MAX,
            u32::MAX - 1,
            u32::MAX / d * d,
            (u32::MAX / d * d).wrapping_sub(1),
        ];
        xs.extend((0..200).map(|_| (rng.next() as u32) ^ ((rng.next() as u32) << 16)));
        for x in xs {
            assert_eq!(magic_div(x, m, s), x / d, "{x} / {d}");
        }
    }
}

/// Re-packs a plan's single launch in `mode` (as a larger output would get) and runs it.
fn run_in_mode(op: &str, inputs: &[Input], mode: Mode) -> Vec<f64> {
    let req = request(op, inputs, &[]);
    let mut p = plan(&req).unwrap();
    let shapes: Vec<&[u64]> = inputs.iter().map(|(s, _, _)| &s[..]).collect();
    let out = p.outputs[0].shape.clone();
    let g = Geometry::broadcast(&out, &shapes).unwrap();
    let mut packer = ParamPacker::new();
    for i in 0..inputs.len() {
        packer.ptr(i as u32, Access::Read);
    }
    packer.ptr(inputs.len() as u32, Access::Write);
    g.pack_as(&mut packer, mode);
    let (params, relocations) = packer.finish(4096).unwrap();
    let l: &mut Launch = &mut p.launches[0];
    let base = l
        .entry_point
        .trim_end_matches("_bcast")
        .trim_end_matches("_bcast64")
        .to_string();
    l.entry_point = format!("{base}{}", mode.suffix());
    l.params = params;
    l.relocations = relocations;
    let data: Vec<Vec<u8>> = inputs
        .iter()
        .map(|(_, dt, v)| encode(*dt, v).unwrap())
        .collect();
    let outs = testing::execute(&p, &data, Elementwise::run_cpu).unwrap();
    decode_f64(p.outputs[0].dtype, &outs[0])
}

#[test]
fn every_mode_reads_the_same_parameters_on_the_cpu() {
    let a = (
        vec![2, 3, 4],
        Dtype::F32,
        (0..24).map(|v| v as f64).collect::<Vec<_>>(),
    );
    let b = (vec![3, 1], Dtype::F32, vec![100., 200., 300.]);
    let want = run_in_mode("Sub", &[a.clone(), b.clone()], Mode::Strided32);
    assert_eq!(
        run_in_mode("Sub", &[a.clone(), b.clone()], Mode::Strided64),
        want
    );
    assert_eq!(want[..5], [-100., -99., -98., -97., -196.]);
    let c = (vec![2, 1, 1], Dtype::Boolean, vec![1., 0.]);
    let w64 = run_in_mode("Where", &[c.clone(), a.clone(), b.clone()], Mode::Strided64);
    assert_eq!(w64, run_in_mode("Where", &[c, a, b], Mode::Strided32));
    assert_eq!((w64[0], w64[12]), (0., 100.));
}
