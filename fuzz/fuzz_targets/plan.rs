//! Validation of a plugin's plan (what a hostile plugin could return) against a request:
//! turned into a validated command buffer or refused as an invalid plan; never a panic.
#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use umd::plugin::wit;
use umd::{Dtype, OpRequest, Target, TensorDesc};

const DTYPES: [wit::Dtype3; 9] = [
    wit::Dtype3::F32,
    wit::Dtype3::F16,
    wit::Dtype3::I64,
    wit::Dtype3::U8,
    wit::Dtype3::Boolean,
    wit::Dtype3::F8e4m3fn,
    wit::Dtype3::I4,
    wit::Dtype3::U2,
    wit::Dtype3::String,
];
const INPUT_DTYPES: [Dtype; 3] = [Dtype::F32, Dtype::I4, Dtype::F4e2m1];
const ACCESS: [wit::Access; 3] = [
    wit::Access::Read,
    wit::Access::Write,
    wit::Access::ReadWrite,
];

fn small<T>(
    u: &mut Unstructured,
    max: usize,
    f: impl Fn(&mut Unstructured) -> Result<T>,
) -> Result<Vec<T>> {
    let n = u.int_in_range(0..=max)?;
    (0..n).map(|_| f(u)).collect()
}

fn dim(u: &mut Unstructured) -> Result<wit::Dim3> {
    Ok(wit::Dim3 {
        x: u.arbitrary()?,
        y: u.arbitrary()?,
        z: u.arbitrary()?,
    })
}

fn plan(u: &mut Unstructured) -> Result<(OpRequest, wit::OpPlan4)> {
    let inputs = small(u, 3, |u| {
        let shape = small(u, 4, |u| u.int_in_range(0..=64u64))?;
        Ok(TensorDesc::new("x", shape, *u.choose(&INPUT_DTYPES)?))
    })?;
    let outputs = small(u, 3, |u| {
        Ok(wit::TensorDesc3 {
            name: u.arbitrary()?,
            shape: small(u, 9, |u| u.arbitrary())?,
            dtype: *u.choose(&DTYPES)?,
            text_bytes: if u.arbitrary()? { u.arbitrary()? } else { 0 },
        })
    })?;
    let launches = small(u, 3, |u| {
        Ok(wit::Launch {
            module_id: u.arbitrary()?,
            entry_point: u.arbitrary()?,
            grid: dim(u)?,
            block: dim(u)?,
            shared_memory: u.arbitrary()?,
            params: small(u, 64, |u| u.arbitrary())?,
            relocations: small(u, 4, |u| {
                Ok(wit::Relocation {
                    offset: u.int_in_range(0..=72)?,
                    binding: u.int_in_range(0..=8)?,
                    access: *u.choose(&ACCESS)?,
                })
            })?,
        })
    })?;
    let workspace_bytes = if u.arbitrary()? { u.arbitrary()? } else { 0 };
    let plan = wit::OpPlan4 {
        plan: wit::OpPlan3 {
            outputs,
            launches,
            workspace_bytes,
        },
        setup_launches: u.int_in_range(0..=4)?,
    };
    Ok((OpRequest::new("Fuzz", inputs), plan))
}

/// `Target::cpu()` asks the OS for its core count: once, not per input.
static CPU: std::sync::LazyLock<Target> = std::sync::LazyLock::new(Target::cpu);

fuzz_target!(|data: &[u8]| {
    let Ok((req, plan)) = plan(&mut Unstructured::new(data)) else {
        return;
    };
    if let Ok((cb, setup)) = umd::translate::validate_plan(&req, &CPU, plan) {
        // Accepted setup launches bind only the workspace; nothing after them writes it.
        let ws = cb.bindings.iter().position(|b| b.role == umd::cmdbuf::Role::Workspace);
        for (i, r) in cb.launches.iter().enumerate().flat_map(|(i, l)| l.relocations.iter().map(move |r| (i, r))) {
            if i < setup {
                assert_eq!(Some(r.binding as usize), ws, "a setup launch binds only the workspace");
            } else if Some(r.binding as usize) == ws {
                assert!(!r.access.writes(), "no launch after the setup writes the workspace");
            }
        }
        // An accepted plan is a valid command buffer that survives the wire.
        cb.validate(Some(&CPU.limits))
            .expect("an accepted plan validates");
        assert_eq!(
            umd::cmdbuf::CommandBuffer::decode(&cb.encode()).as_ref(),
            Ok(&cb)
        );
    }
});
