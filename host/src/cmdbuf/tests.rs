//! Validation rules (the codec's round trip and corruption corpus live in tests/cmdbuf.rs).

use super::*;
use crate::target::{Dim3, TargetLimits};
use crate::tensor::{Dtype, TensorDesc};

/// A valid one-launch command buffer for the CPU target (binding 0 read, binding 1 written).
pub(crate) fn sample() -> CommandBuffer {
    CommandBuffer {
        target: "cpu".into(),
        bindings: vec![
            Binding {
                role: Role::Input,
                desc: TensorDesc::new("a", vec![4], Dtype::F32),
            },
            Binding {
                role: Role::Output,
                desc: TensorDesc::new("out", vec![4], Dtype::F32),
            },
        ],
        launches: vec![LaunchCmd {
            module: ModuleRef {
                plugin: "p@1.0.0".into(),
                id: "m".into(),
                hash: [7; 32],
            },
            entry_point: "relu_f32".into(),
            grid: Dim3::new(1, 1, 1),
            block: Dim3::new(256, 1, 1),
            shared_memory: 0,
            params: vec![0; 24],
            relocations: vec![
                Relocation {
                    offset: 0,
                    binding: 0,
                    access: Access::Read,
                },
                Relocation {
                    offset: 8,
                    binding: 1,
                    access: Access::Write,
                },
            ],
        }],
    }
}

fn err_of(f: impl FnOnce(&mut CommandBuffer)) -> String {
    let mut cb = sample();
    f(&mut cb);
    cb.validate(Some(&TargetLimits::cuda(2, 48 * 1024)))
        .unwrap_err()
        .to_string()
}

#[test]
fn sample_is_valid_and_round_trips() {
    let cb = sample();
    cb.validate(Some(&TargetLimits::cuda(2, 48 * 1024)))
        .unwrap();
    assert_eq!(CommandBuffer::decode(&cb.encode()).unwrap(), cb);
    assert!(cb.to_string().contains("relu_f32"));
}

#[test]
fn each_rule_names_what_is_wrong() {
    assert!(err_of(|c| c.launches[0].block = Dim3::new(0, 1, 1)).contains("empty launch"));
    assert!(err_of(|c| c.launches[0].block = Dim3::new(2048, 1, 1)).contains("2048 threads"));
    assert!(err_of(|c| c.launches[0].block = Dim3::new(1, 1, 128)).contains("exceeds the target"));
    assert!(err_of(|c| c.launches[0].grid = Dim3::new(1, 70000, 1)).contains("grid"));
    assert!(err_of(|c| c.launches[0].shared_memory = 1 << 20).contains("shared memory"));
    assert!(err_of(|c| c.launches[0].relocations[1].offset = 24).contains("outside"));
    assert!(err_of(|c| c.launches[0].relocations[1].offset = 4).contains("aligned"));
    assert!(err_of(|c| c.launches[0].relocations[1].binding = 9).contains("only 2"));
    assert!(
        err_of(|c| c.launches[0].relocations[0].access = Access::Write).contains("writes input")
    );
    assert!(err_of(|c| c.launches[0].relocations[1].offset = 0).contains("two relocations"));
    assert!(err_of(|c| c.launches[0].params = vec![0; 5000]).contains("5000 bytes"));
    assert!(err_of(|c| c.bindings.swap(0, 1)).contains("order"));
}

#[test]
fn every_string_is_held_to_the_one_limit() {
    let long = "x".repeat(limits::MAX_STRING + 1);
    let mut cases = Vec::new();
    let mut cb = sample();
    cb.target = long.clone();
    cases.push(cb);
    let mut cb = sample();
    cb.bindings[0].desc.name = long.clone();
    cases.push(cb);
    let mut cb = sample();
    cb.launches[0].entry_point = long.clone();
    cases.push(cb);
    let mut cb = sample();
    cb.launches[0].module.id = long.clone();
    cases.push(cb);
    let mut cb = sample();
    cb.launches[0].module.plugin = long.clone();
    cases.push(cb);
    for cb in cases {
        let e = cb.validate(None).unwrap_err();
        assert!(e.to_string().contains("maximum is 1024"), "{e}");
        assert!(
            e.to_string().len() < 200,
            "the message does not echo the string: {e}"
        );
    }
    // At the limit: valid, and the decoder reads back what the encoder wrote.
    let mut cb = sample();
    cb.bindings[0].desc.name = "y".repeat(limits::MAX_STRING);
    cb.validate(None).unwrap();
    assert_eq!(CommandBuffer::decode(&cb.encode()).unwrap(), cb);
}
