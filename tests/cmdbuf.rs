//! The UMDCMD format: round trip of arbitrary valid buffers (property test), and a corpus of
//! truncated, corrupted and crafted-hostile buffers, each refused with a precise error.

use proptest::prelude::*;
use umd::cmdbuf::{
    Access, Binding, CmdError, CommandBuffer, LaunchCmd, ModuleRef, Relocation, Role,
};
use umd::target::Dim3;
use umd::{Dtype, Host, OpRequest, TensorDesc};

fn arb_desc() -> impl Strategy<Value = TensorDesc> {
    (
        "[a-z0-9_]{0,12}",
        prop::collection::vec(0u64..100, 0..=8),
        prop::sample::select(Dtype::ALL.to_vec()),
    )
        .prop_map(|(name, shape, dtype)| TensorDesc::new(name, shape, dtype))
}

fn arb_cmdbuf() -> impl Strategy<Value = CommandBuffer> {
    (
        prop::collection::vec(arb_desc(), 0..4),
        prop::collection::vec(arb_desc(), 1..3),
        prop::option::of(1u64..1 << 20),
        prop::collection::vec(
            (
                "[a-z_]{1,16}",
                prop::array::uniform32(any::<u8>()),
                (1u32..64, 1u32..8, 1u32..4),
                (1u32..32, 1u32..8, 1u32..2),
                0u32..4096,
                1usize..64,
                any::<u64>(),
            ),
            0..4,
        ),
        "cpu|cuda:sm_[0-9]{2}",
    )
        .prop_map(|(ins, outs, ws, launches, target)| {
            let mut bindings: Vec<Binding> = ins
                .into_iter()
                .map(|desc| Binding {
                    role: Role::Input,
                    desc,
                })
                .collect();
            bindings.extend(outs.into_iter().map(|desc| Binding {
                role: Role::Output,
                desc,
            }));
            if let Some(bytes) = ws {
                bindings.push(Binding {
                    role: Role::Workspace,
                    desc: TensorDesc::new("ws", vec![bytes], Dtype::U8),
                });
            }
            let nb = bindings.len() as u32;
            let launches = launches
                .into_iter()
                .map(|(entry, hash, g, b, shared, slots, seed)| {
                    let params: Vec<u8> =
                        (0..slots * 8).map(|i| (seed >> (i % 64)) as u8).collect();
                    let relocations = (0..slots.min(nb as usize))
                        .map(|i| {
                            let binding = (seed as u32).wrapping_add(i as u32) % nb;
                            let input = bindings[binding as usize].role == Role::Input;
                            Relocation {
                                offset: (i * 8) as u32,
                                binding,
                                access: if input {
                                    Access::Read
                                } else {
                                    Access::ReadWrite
                                },
                            }
                        })
                        .collect();
                    LaunchCmd {
                        module: ModuleRef {
                            plugin: "p@1.0.0".into(),
                            id: format!("mod_{entry}"),
                            hash,
                        },
                        entry_point: entry,
                        grid: Dim3::new(g.0, g.1, g.2),
                        block: Dim3::new(b.0, b.1, b.2),
                        shared_memory: shared,
                        params,
                        relocations,
                    }
                })
                .collect();
            CommandBuffer {
                target,
                bindings,
                launches,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn round_trip(cb in arb_cmdbuf()) {
        cb.validate(None).unwrap();
        let bytes = cb.encode();
        prop_assert_eq!(&bytes[..6], b"UMDCMD");
        prop_assert_eq!(CommandBuffer::decode(&bytes).unwrap(), cb);
    }

    #[test]
    fn any_truncation_or_flip_is_refused(cb in arb_cmdbuf(), cut in any::<prop::sample::Index>(), bit in 0u8..8) {
        let bytes = cb.encode();
        let at = cut.index(bytes.len());
        prop_assert!(CommandBuffer::decode(&bytes[..at]).is_err());
        let mut flipped = bytes.clone();
        flipped[at] ^= 1 << bit;
        prop_assert!(CommandBuffer::decode(&flipped).is_err());
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let mut with_magic = b"UMDCMD\x01\x00".to_vec();
        with_magic.extend(&bytes);
        let _ = CommandBuffer::decode(&bytes);
        let _ = CommandBuffer::decode(&with_magic);
    }
}

/// A real translation's bytes.
fn real() -> Vec<u8> {
    let host = Host::builder().build().unwrap();
    let a = TensorDesc::new("a", vec![4, 8], Dtype::F32);
    let b = TensorDesc::new("b", vec![8], Dtype::F32);
    host.translate(&OpRequest::new("Add", vec![a, b]))
        .unwrap()
        .bytes
        .to_vec()
}

/// Re-seals a modified buffer: fixes the length field and checksum so the decoder reaches the
/// structural checks.
fn reseal(mut body: Vec<u8>) -> Vec<u8> {
    body.truncate(body.len() - 4);
    let total = (body.len() + 4) as u32;
    body[8..12].copy_from_slice(&total.to_le_bytes());
    let crc = crc32(&body);
    body.extend(crc.to_le_bytes());
    body
}

/// CRC-32 (IEEE), written out here so the test does not share the codec's implementation.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn every_truncation_of_a_real_buffer_is_refused_as_such() {
    let bytes = real();
    assert!(CommandBuffer::decode(&bytes).is_ok());
    for cut in 0..bytes.len() {
        let err = CommandBuffer::decode(&bytes[..cut]).unwrap_err();
        let precise = matches!(
            err,
            CmdError::Truncated { .. } | CmdError::LengthMismatch { .. }
        );
        assert!(precise, "cut at {cut}: {err}");
    }
}

#[test]
fn crafted_corruptions_get_precise_errors() {
    let good = real();
    let mut bad_magic = good.clone();
    bad_magic[0] = b'X';
    assert_eq!(
        CommandBuffer::decode(&bad_magic).unwrap_err(),
        CmdError::BadMagic
    );

    let mut version = good.clone();
    version[6] = 9;
    assert_eq!(
        CommandBuffer::decode(&version).unwrap_err(),
        CmdError::UnsupportedVersion {
            found: 9,
            supported: 1
        }
    );

    let mut flipped = good.clone();
    let last = flipped.len() - 10;
    flipped[last] ^= 0xff;
    assert!(matches!(
        CommandBuffer::decode(&flipped).unwrap_err(),
        CmdError::Checksum { .. }
    ));

    let mut trailing = good.clone();
    trailing.push(0);
    assert!(matches!(
        CommandBuffer::decode(&trailing).unwrap_err(),
        CmdError::LengthMismatch { .. }
    ));

    // Structural lies behind a valid checksum.
    let target_len = u16::from_le_bytes([good[12], good[13]]) as usize;
    let nbind_at = 14 + target_len;
    let mut many = good.clone();
    many[nbind_at..nbind_at + 2].copy_from_slice(&60000u16.to_le_bytes());
    let err = CommandBuffer::decode(&reseal(many)).unwrap_err();
    assert!(
        err.to_string()
            .contains("binding count is 60000, the maximum is 256"),
        "{err}"
    );

    let mut role = good.clone();
    role[nbind_at + 2] = 7;
    assert_eq!(
        CommandBuffer::decode(&reseal(role)).unwrap_err(),
        CmdError::BadCode {
            field: "binding role",
            value: 7
        }
    );

    let mut dtype = good.clone();
    dtype[nbind_at + 3] = 200;
    assert_eq!(
        CommandBuffer::decode(&reseal(dtype)).unwrap_err(),
        CmdError::BadCode {
            field: "binding dtype",
            value: 200
        }
    );

    let mut rank = good.clone();
    rank[nbind_at + 4] = 40;
    let err = CommandBuffer::decode(&reseal(rank)).unwrap_err();
    assert!(err.to_string().contains("binding rank is 40"), "{err}");

    // Relocation binding out of range: the last relocation's binding field sits 5 bytes before
    // the checksum (offset u32, binding u32, access u8).
    let mut reloc = good.clone();
    let at = reloc.len() - 4 - 5;
    reloc[at..at + 4].copy_from_slice(&77u32.to_le_bytes());
    let err = CommandBuffer::decode(&reseal(reloc)).unwrap_err();
    assert!(err.to_string().contains("names binding 77"), "{err}");

    let mut access = good.clone();
    let at = access.len() - 5;
    access[at] = 0;
    assert_eq!(
        CommandBuffer::decode(&reseal(access)).unwrap_err(),
        CmdError::BadCode {
            field: "relocation access",
            value: 0
        }
    );

    let huge = vec![0u8; 17 << 20];
    assert!(matches!(
        CommandBuffer::decode(&huge).unwrap_err(),
        CmdError::TooLarge { .. }
    ));
}
