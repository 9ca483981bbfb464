//! The plugin end to end, natively: plan through the SDK's checks, run the recorded call through
//! the CPU kernel on the bound bytes, compare with the ONNX node tests' expectations.

use umd_sdk::{AttrValueExt, Dtype, OpError, PlanRequestExt, Target, TensorDesc};

use super::TextPlugin;

fn strings_desc(name: &str, shape: Vec<u64>, items: &[&str]) -> (TensorDesc, Vec<u8>) {
    let bytes = umd_sdk::strings::encode(items);
    let desc = TensorDesc {
        text_bytes: umd_sdk::strings::text_bytes(items),
        ..TensorDesc::new(name, shape, Dtype::String)
    };
    (desc, bytes)
}

#[test]
fn string_split_plans_sizes_and_runs() {
    // onnx/backend/test/case/node/stringsplit.py, export_basic: ["hello world", "hello"] split
    // on " " -> [["hello", "world"], ["hello", ""]], [2, 1]
    let (x, bytes) = strings_desc("x", vec![2], &["hello world", "hello"]);
    let req = PlanRequestExt::builder("StringSplit")
        .constant(x, &bytes)
        .attr("delimiter", AttrValueExt::Text(" ".into()))
        .build(Target::cpu());
    let (plan, outs) = umd_sdk::testing::run::<TextPlugin>(&req, &[bytes]).unwrap();
    assert_eq!(plan.outputs[0].dtype, Dtype::String);
    assert_eq!(plan.outputs[0].shape, vec![2, 2]);
    assert_eq!(plan.outputs[0].text_bytes, 15);
    assert_eq!(
        umd_sdk::strings::decode(&outs[0], 4).unwrap(),
        vec!["hello", "world", "hello", ""]
    );
    let counts: Vec<i64> = outs[1]
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(counts, vec![2, 1]);
}

#[test]
fn label_encoder_strings_to_ints() {
    // onnx ai_onnx_ml label_encoder_string_int: keys a,b,c -> 0,1,2, default 42
    let (x, bytes) = strings_desc("x", vec![5], &["a", "b", "d", "c", "g"]);
    let req = PlanRequestExt::builder("LabelEncoder")
        .constant(x, &bytes)
        .attr(
            "keys_strings",
            AttrValueExt::Texts(vec!["a".into(), "b".into(), "c".into()]),
        )
        .attr("values_int64s", AttrValueExt::Ints(vec![0, 1, 2]))
        .attr("default_int64", AttrValueExt::Int(42))
        .build(Target::cpu());
    let (plan, outs) = umd_sdk::testing::run::<TextPlugin>(&req, &[bytes]).unwrap();
    assert_eq!(plan.outputs[0].dtype, Dtype::I64);
    let got: Vec<i64> = outs[0]
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, vec![0, 1, 42, 2, 42]);
}

#[test]
fn declines_what_is_not_its_own_and_refuses_bad_input() {
    // numeric Equal without values: another plugin's (status 2, not 3)
    let req = PlanRequestExt::builder("Equal")
        .input(TensorDesc::new("a", vec![3], Dtype::F32))
        .input(TensorDesc::new("b", vec![3], Dtype::F32))
        .build(Target::cpu());
    assert!(matches!(
        umd_sdk::plan_checked::<TextPlugin>(&req),
        Err(OpError::UnsupportedDtype(_))
    ));
    // CUDA: declined with a reason
    let (x, bytes) = strings_desc("x", vec![1], &["a"]);
    let cuda = PlanRequestExt::builder("StringNormalizer")
        .constant(x.clone(), &bytes)
        .build(umd_sdk::testing::cuda_target("sm_90"));
    assert!(matches!(
        umd_sdk::plan_checked::<TextPlugin>(&cuda),
        Err(OpError::UnsupportedTarget(m)) if m.contains("CPU device only")
    ));
    // a malformed string table is refused naming the problem
    let mut bad = bytes.clone();
    bad[0] = 9;
    let req = PlanRequestExt::builder("StringNormalizer")
        .constant(x, &bad)
        .build(Target::cpu());
    assert!(matches!(
        umd_sdk::plan_checked::<TextPlugin>(&req),
        Err(OpError::InvalidShape(m)) if m.contains("malformed string tensor")
    ));
}

#[test]
fn kernel_refuses_inputs_changed_since_planning() {
    let (x, bytes) = strings_desc("x", vec![1], &["a b"]);
    let req = PlanRequestExt::builder("StringSplit")
        .constant(x, &bytes)
        .build(Target::cpu());
    let plan = umd_sdk::plan_checked::<TextPlugin>(&req).unwrap();
    // same size, different text: splits into one part, not two
    let other = umd_sdk::strings::encode(&["abc"]);
    let e = umd_sdk::testing::execute_kernels::<TextPlugin>(&plan, &[other]).unwrap_err();
    assert!(format!("{e:?}").contains("changed since planning"), "{e:?}");
}
