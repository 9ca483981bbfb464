//! MelWeightMatrix against the official node test's values and a port of the reference's
//! numpy formula; output dtypes, empty outputs and error cases.

use super::*;

/// A request with every input a constant: `(num_mel_bins, dft_length, sample_rate)` as i32,
/// the edges as `hz_dt`.
pub fn mel_req(bins: i64, dft: i64, sr: i64, lo: f64, hi: f64, hz_dt: Dtype) -> PlanRequestExt {
    let mut b = PlanRequestExt::builder("MelWeightMatrix");
    for v in [bins, dft, sr] {
        b = b.constant(desc(&[], Dtype::I32), &(v as i32).to_le_bytes());
    }
    for v in [lo, hi] {
        b = b.constant(desc(&[], hz_dt), &enc(hz_dt, &[v]));
    }
    b.build(target())
}

fn run_mel(req: &PlanRequestExt) -> (OpPlan, Vec<f64>) {
    let vals: Vec<Vec<f64>> = (0..5)
        .map(|i| dtype::decode_f64(req.input(i).unwrap().dtype, req.value(i).unwrap()))
        .collect();
    let (plan, outs) = run(req, &vals).unwrap();
    (plan, outs[0].clone())
}

/// The reference, step by step (f32 for the f32 edges' first steps, then f64).
fn reference(bins: i64, dft: i64, sr: i64, lo: f32, hi: f32) -> Vec<f64> {
    let m = |hz: f32| (2595f32 * (hz / 700f32).ln_1p()) as f64 / std::f64::consts::LN_10;
    let (low, high) = (m(lo), m(hi));
    let step = (high - low) / (bins + 2) as f64;
    let fb: Vec<i64> = (0..bins + 2)
        .map(|k| {
            let f = k as f64 * step + low;
            let f = 700.0 * (f / 2595.0 * std::f64::consts::LN_10).exp_m1();
            (((dft + 1) as f64 * f) / sr as f64).floor() as i64
        })
        .collect();
    let nspec = (dft / 2 + 1) as usize;
    let mut out = vec![0.0; nspec * bins as usize];
    let mut set = |j: i64, i: usize, v: f64| {
        if j >= 0 && (j as usize) < nspec {
            out[j as usize * bins as usize + i] = v;
        }
    };
    for i in 0..bins as usize {
        let (l, c, h) = (fb[i], fb[i + 1], fb[i + 2]);
        if c == l {
            set(c, i, 1.0);
        } else {
            for j in l..=c {
                set(j, i, (j - l) as f64 / (c - l) as f64);
            }
        }
        if h > c {
            for j in c..h {
                set(j, i, (h - j) as f64 / (h - c) as f64);
            }
        }
    }
    out
}

#[test]
fn official_case() {
    let (plan, got) = run_mel(&mel_req(8, 16, 8192, 0.0, 4096.0, Dtype::F32));
    assert_eq!(plan.outputs[0].shape, vec![9, 8]);
    assert_eq!(plan.outputs[0].dtype, Dtype::F32);
    let mut want = vec![0.0; 72];
    for (j, i) in [
        (0, 0),
        (0, 1),
        (1, 2),
        (1, 3),
        (2, 4),
        (3, 5),
        (4, 6),
        (5, 7),
    ] {
        want[j * 8 + i] = 1.0;
    }
    assert_eq!(got, want);
    assert_eq!(got, reference(8, 16, 8192, 0.0, 4096.0));
}

#[test]
fn against_the_reference_formula() {
    for (bins, dft, sr, lo, hi) in [
        (10, 64, 16000, 20.0, 8000.0),
        (4, 512, 22050, 0.0, 11025.0),
        (40, 400, 16000, 125.0, 3800.0),
        (3, 7, 100, 5.0, 40.0),
    ] {
        let (plan, got) = run_mel(&mel_req(bins, dft, sr, lo, hi, Dtype::F32));
        assert_eq!(
            plan.outputs[0].shape,
            vec![(dft / 2 + 1) as u64, bins as u64]
        );
        assert_close(
            &got,
            &reference(bins, dft, sr, lo as f32, hi as f32),
            1e-6,
            "mel",
        );
    }
}

#[test]
fn output_dtypes_and_empty() {
    let want = reference(10, 64, 16000, 20.0, 8000.0);
    for dt in [Dtype::F64, Dtype::F16, Dtype::Bf16] {
        let n = (1..=24)
            .find(|n| crate::common::onnx_dtype(*n) == Some(dt))
            .unwrap();
        let mut req = mel_req(10, 64, 16000, 20.0, 8000.0, Dtype::F32);
        req.attributes.push(umd_sdk::AttributeExt {
            name: "output_datatype".into(),
            value: int(n),
        });
        let (plan, got) = run_mel(&req);
        assert_eq!(plan.outputs[0].dtype, dt);
        assert_close(&got, &quantize(dt, &want), tol(dt), "mel dtype");
    }
    let (plan, got) = run_mel(&mel_req(0, 16, 8000, 0.0, 4000.0, Dtype::F64));
    assert_eq!(plan.outputs[0].shape, vec![9, 0]);
    assert!(got.is_empty());
}

#[test]
fn errors() {
    let mut req = mel_req(8, 16, 8192, 0.0, 4096.0, Dtype::F32);
    req.attributes.push(umd_sdk::AttributeExt {
        name: "output_datatype".into(),
        value: int(8),
    });
    assert!(matches!(err(&req), OpError::InvalidAttribute(_)));
    assert!(matches!(
        err(&mel_req(-1, 16, 8192, 0.0, 4096.0, Dtype::F32)),
        OpError::InvalidShape(_)
    ));
    assert!(matches!(
        err(&mel_req(8, 16, 0, 0.0, 4096.0, Dtype::F32)),
        OpError::InvalidShape(_)
    ));
    let no_value = PlanRequestExt::builder("MelWeightMatrix")
        .input(desc(&[], Dtype::I32))
        .build(target());
    assert!(matches!(err(&no_value), OpError::InvalidShape(_)));
}

/// Vectors for `plugins/norm/tools/cuda_emu.py` (runs the CUDA modules as C++ on the host):
/// when `UMD_DUMP_VECTORS` names a directory, MelWeightMatrix in every output dtype goes to
/// `misc-mel.cases`.
#[test]
fn cuda_emulation_vectors() {
    let Ok(dir) = std::env::var("UMD_DUMP_VECTORS") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    let mut out = String::new();
    for dt in crate::window::OUT {
        let n = (1..=24)
            .find(|n| crate::common::onnx_dtype(*n) == Some(dt))
            .unwrap();
        for (k, (bins, dft, sr, lo, hi)) in
            [(8, 16, 8192, 0.0, 4096.0), (10, 64, 16000, 20.0, 8000.0)]
                .into_iter()
                .enumerate()
        {
            let mut req = mel_req(bins, dft, sr, lo, hi, Dtype::F32);
            req.attributes.push(umd_sdk::AttributeExt {
                name: "output_datatype".into(),
                value: int(n),
            });
            let inputs: Vec<Vec<u8>> = (0..5).map(|i| req.value(i).unwrap().to_vec()).collect();
            let name = format!("mel-{k}-{dt:?}");
            umd_sdk::emu_vectors::dump_case::<Misc>(&mut out, &dir, &name, &req, &inputs, None);
        }
    }
    std::fs::write(format!("{dir}/misc-mel.cases"), out).unwrap();
}
