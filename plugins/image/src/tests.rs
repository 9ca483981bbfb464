//! Native tests: plans (shapes per format and pixel format), refusals, and decodes against
//! Pillow's (checked-in images and Pillow's conversions of them, `tests/data/gen.py`; the 9 ONNX
//! node tests' streams and outputs, `tests/data/onnx/`).

use std::path::PathBuf;

use super::*;
use crate::decode::{MAX_DECODED_BYTES, MAX_PIXELS, PixelFormat, luma};
use umd_sdk::{AttrValueExt as A, Dtype, TensorDesc, testing};

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn read(rel: &str) -> Vec<u8> {
    let p = data_dir().join(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn request(stream: &[u8], pf: Option<&str>, target: Target) -> PlanRequestExt {
    let mut b = PlanRequestExt::builder("ImageDecoder")
        .constant(
            TensorDesc::new("encoded_stream", vec![stream.len() as u64], Dtype::U8),
            stream,
        )
        .opset(20);
    if let Some(pf) = pf {
        b = b.attr("pixel_format", A::Text(pf.into()));
    }
    b.build(target)
}

fn decode(stream: &[u8], pf: Option<&str>) -> Result<(OpPlan, Vec<u8>), OpError> {
    let req = request(stream, pf, Target::cpu());
    let (plan, mut outs) = testing::run::<ImagePlugin>(&req, &[stream.to_vec()])?;
    // the run-cpu path (ABI 1.0–1.2 hosts, `--cpu-copying`) gives the same bytes
    let copied = testing::execute(&plan, &[stream.to_vec()], ImagePlugin::run_cpu)?;
    assert_eq!(copied, outs);
    Ok((plan, outs.remove(0)))
}

fn plan_err(stream: &[u8], pf: Option<&str>, target: Target) -> OpError {
    match umd_sdk::plan_checked::<ImagePlugin>(&request(stream, pf, target)) {
        Ok(p) => panic!("planned {:?}", p.outputs),
        Err(e) => e,
    }
}

fn bgr(rgb: &[u8]) -> Vec<u8> {
    rgb.chunks(3).flat_map(|p| [p[2], p[1], p[0]]).collect()
}

/// (largest absolute difference, count of differing bytes)
fn diff(a: &[u8], b: &[u8]) -> (u8, usize) {
    assert_eq!(a.len(), b.len());
    let d = a.iter().zip(b).map(|(x, y)| x.abs_diff(*y));
    (d.clone().max().unwrap_or(0), d.filter(|v| *v > 0).count())
}

/// The checked-in images: (file, height, width, Pillow's mode).
fn images() -> Vec<(String, u64, u64, String)> {
    let sizes = String::from_utf8(read("sizes.txt")).unwrap();
    sizes
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].to_string(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
                f[3].to_string(),
            )
        })
        .collect()
}

#[test]
fn plans_and_decodes_every_format_and_pixel_format_like_pillow() {
    let all = images();
    assert_eq!(all.len(), 28);
    for (name, h, w, mode) in all {
        let stream = read(&name);
        let want_rgb = read(&format!("{name}.rgb"));
        let want_gray = read(&format!("{name}.gray"));
        // progressive JPEG is decoded by zune-jpeg, which rounds differently from libjpeg-turbo
        let inexact = name.contains("progressive");
        for (pf, c, want) in [
            (None, 3, want_rgb.clone()),
            (Some("RGB"), 3, want_rgb.clone()),
            (Some("BGR"), 3, bgr(&want_rgb)),
            (Some("Grayscale"), 1, want_gray.clone()),
        ] {
            let (plan, got) =
                decode(&stream, pf).unwrap_or_else(|e| panic!("{name} {pf:?}: {e:?}"));
            assert_eq!(plan.outputs.len(), 1);
            assert_eq!(plan.outputs[0].shape, vec![h, w, c], "{name} {pf:?}");
            assert_eq!(plan.outputs[0].dtype, Dtype::U8);
            let (max, n) = diff(&got, &want);
            if inexact {
                assert!(
                    max <= 3,
                    "{name} ({mode}) {pf:?}: off by {max} in {n} bytes"
                );
            } else {
                assert_eq!(
                    (max, n),
                    (0, 0),
                    "{name} ({mode}) {pf:?}: off by {max} in {n} bytes"
                );
            }
        }
    }
}

#[test]
fn onnx_node_tests() {
    let cases = [
        ("bmp_rgb.bmp", "RGB"),
        ("png_rgb.png", "RGB"),
        ("pnm_rgb.pnm", "RGB"),
        ("tiff_rgb.tiff", "RGB"),
        ("webp_rgb.webp", "RGB"),
        ("jpeg_rgb.jpeg", "RGB"),
        ("jpeg_bgr.jpeg", "BGR"),
        ("jpeg_grayscale.jpeg", "Grayscale"),
        ("jpeg2k_rgb.jpeg2k", "RGB"),
    ];
    for (name, pf) in cases {
        let stream = read(&format!("onnx/{name}"));
        let want = read(&format!("onnx/{name}.out"));
        let (plan, got) = decode(&stream, Some(pf)).unwrap();
        let c = if pf == "Grayscale" { 1 } else { 3 };
        assert_eq!(plan.outputs[0].shape, vec![32, 32, c]);
        assert_eq!(diff(&got, &want), (0, 0), "{name}");
    }
}

#[test]
fn jpeg_subset_and_fallback() {
    // the exact decoder takes baseline streams and leaves progressive ones to zune-jpeg
    for name in [
        "rgb.jpeg",
        "gray.jpeg",
        "noise422.jpeg",
        "smooth420_restart.jpeg",
    ] {
        assert!(crate::jpeg::decode(&read(name)).is_some(), "{name}");
    }
    assert!(crate::jpeg::decode(&read("smooth_progressive.jpeg")).is_none());
    assert!(crate::jpeg::decode(&read("rgb.png")).is_none());
    // truncated streams: not decoded exactly (zune-jpeg then decides), and no panic
    let j = read("smooth420.jpeg");
    for cut in [2, 3, 10, 100, 200, 400, j.len() / 2, j.len() - 2] {
        assert!(crate::jpeg::decode(&j[..cut]).is_none(), "{cut}");
    }
    // every byte changed in turn: no panic, and what decodes has the header's size
    for name in ["rgb.jpeg", "gray.jpeg", "smooth420_restart.jpeg"] {
        let j = read(name);
        for i in 0..j.len() {
            for x in [0x01, 0x80, 0xFF] {
                let mut m = j.clone();
                m[i] ^= x;
                if let Some(d) = crate::jpeg::decode(&m) {
                    assert_eq!(d.data.len(), d.width * d.height * d.channels);
                }
                let _ = crate::decode::decode(&m, PixelFormat::Rgb);
            }
        }
    }
}

#[test]
fn grayscale_is_pillows_luma() {
    assert_eq!(luma(0, 0, 0), 0);
    assert_eq!(luma(255, 255, 255), 255);
    for v in 0..=255 {
        assert_eq!(luma(v, v, v), v);
    }
    // (R*19595 + G*38470 + B*7471 + 0x8000) >> 16
    assert_eq!(luma(255, 0, 0), 76);
    assert_eq!(luma(0, 255, 0), 150);
    assert_eq!(luma(0, 0, 255), 29);
    assert_eq!(luma(10, 200, 30), 124);
}

#[test]
fn refuses_what_is_not_a_served_image() {
    let png = read("rgb.png");
    let cpu = Target::cpu;
    let invalid = |e: OpError, what: &str| {
        assert!(
            matches!(&e, OpError::InvalidShape(m) | OpError::InvalidAttribute(m) if m.contains(what)),
            "want an invalid input naming {what:?}, got {e:?}"
        )
    };
    invalid(plan_err(b"hello, world", None, cpu()), "not an image");
    invalid(plan_err(b"", None, cpu()), "not an image");
    invalid(
        plan_err(b"GIF89a\x01\x00\x01\x00\x00\x00\x00;", None, cpu()),
        "a GIF image",
    );
    invalid(plan_err(&png[..20], None, cpu()), "header");
    // a JPEG 2000 stream cut after its signature box
    let j2k = read("onnx/jpeg2k_rgb.jpeg2k");
    invalid(plan_err(&j2k[..24], None, cpu()), "JPEG 2000");
    invalid(plan_err(&png, Some("RGBA"), cpu()), "pixel_format");
    invalid(plan_err(&png, Some("rgb"), cpu()), "pixel_format");
    invalid(plan_err(&png, Some("Gray"), cpu()), "pixel_format");
    // an empty PNM
    invalid(plan_err(b"P5\n0 4\n255\n", None, cpu()), "empty");
    // over the pixel bound: 10000 x 10000 gray (header only)
    invalid(plan_err(b"P5\n10000 10000\n255\n", None, cpu()), "bound");
    // under the pixel bound but over the decoded-size bound: 8000 x 8000 16-bit RGB
    const { assert!(8000 * 8000 <= MAX_PIXELS && 8000 * 8000 * 6 > MAX_DECODED_BYTES) };
    invalid(plan_err(b"P6\n8000 8000\n65535\n", None, cpu()), "256 MiB");
    // a header at the pixel bound plans (8192 x 8192 RGB; not decoded here)
    let req = request(b"P6\n8192 8192\n255\n", None, cpu());
    let plan = umd_sdk::plan_checked::<ImagePlugin>(&req).unwrap();
    assert_eq!(plan.outputs[0].shape, vec![8192, 8192, 3]);

    // unknown attribute, wrong attribute type
    let req = PlanRequestExt::builder("ImageDecoder")
        .constant(
            TensorDesc::new("s", vec![png.len() as u64], Dtype::U8),
            &png,
        )
        .attr("pixel_format", A::Int(1))
        .build(cpu());
    assert!(matches!(
        umd_sdk::plan_checked::<ImagePlugin>(&req),
        Err(OpError::InvalidAttribute(_))
    ));
    let req = PlanRequestExt::builder("ImageDecoder")
        .constant(
            TensorDesc::new("s", vec![png.len() as u64], Dtype::U8),
            &png,
        )
        .attr("mode", A::Text("RGB".into()))
        .build(cpu());
    assert!(matches!(
        umd_sdk::plan_checked::<ImagePlugin>(&req),
        Err(OpError::InvalidAttribute(_))
    ));
    // non-uint8, non-1-D, no value, two inputs
    for (desc, value) in [
        (
            TensorDesc::new("s", vec![png.len() as u64], Dtype::I8),
            Some(&png[..]),
        ),
        (
            TensorDesc::new("s", vec![1, png.len() as u64], Dtype::U8),
            Some(&png[..]),
        ),
        (
            TensorDesc::new("s", vec![png.len() as u64], Dtype::U8),
            None,
        ),
    ] {
        let b = PlanRequestExt::builder("ImageDecoder");
        let b = match value {
            Some(v) => b.constant(desc, v),
            None => b.input(desc),
        };
        match umd_sdk::plan_checked::<ImagePlugin>(&b.build(cpu())) {
            Err(OpError::InvalidShape(m)) => {
                assert!(
                    m.contains("uint8") || m.contains("1-D") || m.contains("known"),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
    }
    let d = TensorDesc::new("s", vec![png.len() as u64], Dtype::U8);
    let req = PlanRequestExt::builder("ImageDecoder")
        .constant(d.clone(), &png)
        .constant(d, &png)
        .build(cpu());
    assert!(matches!(
        umd_sdk::plan_checked::<ImagePlugin>(&req),
        Err(OpError::InvalidShape(_))
    ));
}

#[test]
fn cuda_targets_are_declined() {
    let png = read("rgb.png");
    for arch in ["sm_80", "sm_90", "sm_100"] {
        match plan_err(&png, None, testing::cuda_target(arch)) {
            OpError::UnsupportedTarget(m) => {
                assert!(
                    m.contains("ImageDecoder runs on the CPU device only"),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(
        ImagePlugin::kernel_source(plan::MODULE, &testing::cuda_target("sm_90")),
        Err(OpError::UnsupportedTarget(_))
    ));
}

#[test]
fn a_stream_corrupt_past_its_header_plans_and_fails_to_run() {
    let png = read("rgb.png");
    let cut = &png[..png.len() - 30];
    let req = request(cut, None, Target::cpu());
    let plan = umd_sdk::plan_checked::<ImagePlugin>(&req).unwrap();
    assert_eq!(plan.outputs[0].shape, vec![5, 7, 3]);
    match testing::execute_kernels::<ImagePlugin>(&plan, &[cut.to_vec()]) {
        Err(OpError::InvalidShape(m)) => assert!(m.contains("does not decode"), "{m}"),
        other => panic!("{other:?}"),
    }
    // a stream swapped for another image after planning is refused, not mis-sized
    let other = read("onnx/png_rgb.png");
    let req = request(&png, None, Target::cpu());
    let mut plan = umd_sdk::plan_checked::<ImagePlugin>(&req).unwrap();
    // the same stream length, so only the kernel's size check can tell
    let mut swapped = other.clone();
    swapped.resize(png.len(), 0);
    plan.outputs[0].shape = vec![5, 7, 3];
    let e = testing::execute_kernels::<ImagePlugin>(&plan, &[swapped]).unwrap_err();
    assert!(
        matches!(&e, OpError::Internal(m) if m.contains("changed since planning"))
            || matches!(&e, OpError::InvalidShape(_)),
        "{e:?}"
    );
}

#[test]
fn pixel_format_codes_round_trip() {
    for pf in [PixelFormat::Rgb, PixelFormat::Bgr, PixelFormat::Gray] {
        assert_eq!(PixelFormat::from_code(pf.code()), Some(pf));
    }
    assert_eq!(PixelFormat::from_code(3), None);
    assert_eq!(ImagePlugin::signatures().len(), 1);
    assert_eq!(ImagePlugin::signatures()[0].constant_inputs, vec![0]);
    assert_eq!(ImagePlugin::describe().ops[0].name, "ImageDecoder");
}
