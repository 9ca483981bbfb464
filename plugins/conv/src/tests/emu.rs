//! Test vectors for checking the CUDA kernels without a GPU: with `UMD_DUMP_VECTORS=<dir>`,
//! plans a spread of requests for `cuda:sm_90`, runs them on the CPU kernels and writes one
//! `.case` file per request (module, entry point, parameter block, relocations, input buffers,
//! the CPU's output buffers). `tools/cuda_emu.py` compiles each CUDA module as host C++ and
//! runs its kernels on these cases.

use super::{data, int, ints, text};
use crate::Conv;
use umd_sdk::{AttrValueExt, Dtype, PlanRequestExt, TensorDesc, dtype, testing};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn req(
    op: &str,
    ins: &[(&[u64], Dtype)],
    attrs: &[(&str, AttrValueExt)],
    outputs: usize,
) -> PlanRequestExt {
    let mut b = PlanRequestExt::builder(op);
    for (i, (s, dt)) in ins.iter().enumerate() {
        b = b.input(TensorDesc::new(format!("in{i}"), s.to_vec(), *dt));
    }
    for (n, v) in attrs {
        b = b.attr(n, v.clone());
    }
    if outputs > 1 {
        b = b.outputs_wanted(vec![true; outputs]);
    }
    b.build(testing::cuda_target("sm_90"))
}

fn requests() -> Vec<PlanRequestExt> {
    let mut out = Vec::new();
    let win2 = [
        ("strides", ints(&[2, 1])),
        ("dilations", ints(&[1, 2])),
        ("pads", ints(&[1, 0, 2, 1])),
    ];
    for dt in [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64] {
        out.push(req(
            "Conv",
            &[(&[2, 4, 7, 9], dt), (&[6, 2, 3, 2], dt)],
            &[&win2[..], &[("group", int(2))]].concat(),
            1,
        ));
        out.push(req(
            "Conv",
            &[(&[1, 3, 11], dt), (&[4, 3, 3], dt), (&[4], dt)],
            &[("strides", ints(&[2])), ("pads", ints(&[2, 1]))],
            1,
        ));
        out.push(req(
            "Conv",
            &[(&[1, 2, 4, 5, 6], dt), (&[3, 2, 2, 3, 2], dt), (&[3], dt)],
            &[
                ("auto_pad", text("SAME_LOWER")),
                ("strides", ints(&[1, 2, 2])),
            ],
            1,
        ));
        out.push(req(
            "ConvTranspose",
            &[(&[2, 4, 4, 5], dt), (&[4, 3, 3, 2], dt), (&[6], dt)],
            &[
                &win2[..],
                &[("group", int(2)), ("output_padding", ints(&[1, 0]))],
            ]
            .concat(),
            1,
        ));
        out.push(req(
            "ConvTranspose",
            &[(&[1, 2, 5, 4], dt), (&[2, 2, 3, 3], dt)],
            &[
                ("strides", ints(&[4, 3])),
                ("dilations", ints(&[2, 3])),
                ("pads", ints(&[1, 2, 0, 1])),
            ],
            1,
        ));
        out.push(req(
            "ConvTranspose",
            &[(&[1, 2, 3, 4], dt), (&[2, 3, 3, 3], dt)],
            &[("strides", ints(&[2, 2])), ("output_shape", ints(&[8, 9]))],
            1,
        ));
        out.push(req(
            "ConvTranspose",
            &[(&[1, 2, 3, 2, 4], dt), (&[2, 2, 2, 3, 2], dt)],
            &[
                ("strides", ints(&[2, 1, 2])),
                ("auto_pad", text("SAME_UPPER")),
            ],
            1,
        ));
        let pool = [
            ("kernel_shape", ints(&[3, 2])),
            ("strides", ints(&[2, 3])),
            ("dilations", ints(&[1, 2])),
            ("pads", ints(&[1, 1, 2, 1])),
            ("ceil_mode", int(1)),
        ];
        out.push(req("AveragePool", &[(&[2, 3, 9, 11], dt)], &pool, 1));
        out.push(req(
            "AveragePool",
            &[(&[2, 3, 9, 11], dt)],
            &[&pool[..], &[("count_include_pad", int(1))]].concat(),
            1,
        ));
        out.push(req(
            "LpPool",
            &[(&[2, 3, 9, 11], dt)],
            &[&pool[..], &[("p", int(3))]].concat(),
            1,
        ));
        out.push(req(
            "LpPool",
            &[(&[1, 2, 4, 5, 6], dt)],
            &[("kernel_shape", ints(&[2, 2, 3])), ("p", int(2))],
            1,
        ));
        out.push(req("GlobalAveragePool", &[(&[2, 3, 5, 4], dt)], &[], 1));
        out.push(req(
            "GlobalLpPool",
            &[(&[2, 3, 5], dt)],
            &[("p", int(1))],
            1,
        ));
    }
    for dt in [
        Dtype::F32,
        Dtype::F16,
        Dtype::Bf16,
        Dtype::F64,
        Dtype::I8,
        Dtype::U8,
    ] {
        let pool = [
            ("kernel_shape", ints(&[3, 2])),
            ("strides", ints(&[2, 1])),
            ("pads", ints(&[1, 0, 1, 1])),
            ("ceil_mode", int(1)),
        ];
        out.push(req("MaxPool", &[(&[2, 3, 8, 7], dt)], &pool, 2));
        out.push(req(
            "MaxPool",
            &[(&[2, 3, 8, 7], dt)],
            &[&pool[..], &[("storage_order", int(1))]].concat(),
            2,
        ));
        out.push(req(
            "MaxPool",
            &[(&[1, 2, 4, 5, 6], dt)],
            &[
                ("kernel_shape", ints(&[2, 2, 2])),
                ("dilations", ints(&[2, 1, 2])),
                ("auto_pad", text("SAME_UPPER")),
            ],
            1,
        ));
        out.push(req("GlobalMaxPool", &[(&[2, 3, 5, 4], dt)], &[], 1));
    }
    for dt in [Dtype::F32, Dtype::F16, Dtype::Bf16, Dtype::F64] {
        out.push(req(
            "DeformConv",
            &[
                (&[2, 4, 6, 5], dt),
                (&[6, 2, 3, 2], dt),
                (&[2, 24, 4, 4], dt),
                (&[6], dt),
                (&[2, 12, 4, 4], dt),
            ],
            &[&win2[..], &[("group", int(2)), ("offset_group", int(2))]].concat(),
            1,
        ));
        out.push(req(
            "DeformConv",
            &[
                (&[1, 1, 4, 4], dt),
                (&[1, 1, 2, 2], dt),
                (&[1, 8, 5, 5], dt),
            ],
            &[("pads", ints(&[1, 1, 1, 1]))],
            1,
        ));
    }
    let (u8, i8, f32) = (Dtype::U8, Dtype::I8, Dtype::F32);
    for (xt, wt, yt) in [(u8, u8, u8), (u8, i8, i8), (i8, i8, u8), (i8, u8, i8)] {
        out.push(req(
            "ConvInteger",
            &[
                (&[2, 4, 7, 9], xt),
                (&[6, 2, 3, 2], wt),
                (&[], xt),
                (&[6], wt),
            ],
            &[&win2[..], &[("group", int(2))]].concat(),
            1,
        ));
        out.push(req(
            "ConvInteger",
            &[(&[1, 3, 11], xt), (&[4, 3, 3], wt)],
            &[("strides", ints(&[2])), ("pads", ints(&[2, 1]))],
            1,
        ));
        out.push(req(
            "QLinearConv",
            &[
                (&[2, 4, 7, 9], xt),
                (&[], f32),
                (&[], xt),
                (&[6, 2, 3, 2], wt),
                (&[6], f32),
                (&[6], wt),
                (&[], f32),
                (&[], yt),
                (&[6], Dtype::I32),
            ],
            &[&win2[..], &[("group", int(2))]].concat(),
            1,
        ));
        out.push(req(
            "QLinearConv",
            &[
                (&[1, 2, 4, 5, 6], xt),
                (&[], f32),
                (&[], xt),
                (&[3, 2, 2, 3, 2], wt),
                (&[], f32),
                (&[], wt),
                (&[], f32),
                (&[], yt),
            ],
            &[("auto_pad", text("SAME_LOWER"))],
            1,
        ));
    }
    out
}

#[test]
fn dump_vectors_for_the_cuda_emulator() {
    let Ok(dir) = std::env::var("UMD_DUMP_VECTORS") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    for (i, r) in requests().iter().enumerate() {
        let inputs: Vec<Vec<u8>> = r
            .present()
            .enumerate()
            .map(|(j, d)| {
                let n = d.shape.iter().product::<u64>() as usize;
                let (scale, shift) = match d.dtype {
                    Dtype::I8 => (120.0, 0.0),
                    Dtype::U8 => (120.0, 120.0),
                    Dtype::I32 => (1000.0, 0.0),
                    _ => (1.0, 0.0),
                };
                // QLinearConv's scales: positive, the requantized sums within the output range
                let qscale = r.op == "QLinearConv" && d.dtype == Dtype::F32;
                let v: Vec<f64> = data(n, 31 * i as u64 + j as u64, Dtype::F64)
                    .iter()
                    .map(|x| {
                        if qscale {
                            0.002 + 0.01 * x.abs()
                        } else {
                            x * scale + shift
                        }
                    })
                    .collect();
                dtype::encode(d.dtype, &v).unwrap()
            })
            .collect();
        let (plan, outs) =
            testing::run::<Conv>(r, &inputs).unwrap_or_else(|e| panic!("{}: {e:?}", r.op));
        let l = &plan.launches[0];
        let mut s = format!(
            "module {}\nentry {}\nparams {}\n",
            l.module_id,
            l.entry_point,
            hex(&l.params)
        );
        for rel in &l.relocations {
            s += &format!("reloc {} {}\n", rel.offset, rel.binding);
        }
        for (b, v) in inputs.iter().enumerate() {
            s += &format!("input {b} {}\n", hex(v));
        }
        for (k, (d, v)) in plan.outputs.iter().zip(&outs).enumerate() {
            s += &format!(
                "output {} {} {}\n",
                inputs.len() + k,
                dtype::name(d.dtype),
                hex(v)
            );
        }
        std::fs::write(format!("{dir}/{i:03}_{}.case", l.entry_point), s).unwrap();
    }
}
