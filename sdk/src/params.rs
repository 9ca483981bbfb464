//! Kernel parameter blocks: [`ParamPacker`] lays parameters out as CUDA does (each at its natural
//! alignment, little-endian) and records a relocation for every buffer pointer; [`ParamReader`]
//! reads the same block back in a CPU kernel, field by field, in the same order.
//!
//! ```
//! use umd_sdk::params::{ParamPacker, ParamReader};
//! use umd_sdk::Access;
//! let mut p = ParamPacker::new();
//! p.ptr(0, Access::Read).ptr(1, Access::Write).u64(1000).u32(7);
//! let (bytes, relocs) = p.finish(4096).unwrap();
//! assert_eq!(bytes.len(), 28);
//! assert_eq!(relocs[1].offset, 8);
//!
//! let mut r = ParamReader::new(&bytes, &relocs);
//! assert_eq!(r.ptr().unwrap(), 0);
//! assert_eq!(r.ptr().unwrap(), 1);
//! assert_eq!(r.u64().unwrap(), 1000);
//! assert_eq!(r.u32().unwrap(), 7);
//! ```

use crate::{Access, OpError, Relocation};

/// Largest parameter block CUDA accepts for a kernel launch (bytes).
pub const CUDA_MAX_PARAM_BYTES: u32 = 4096;

/// Builds a kernel parameter block.
#[derive(Debug, Default, Clone)]
pub struct ParamPacker {
    bytes: Vec<u8>,
    relocations: Vec<Relocation>,
}

impl ParamPacker {
    pub fn new() -> Self {
        Self::default()
    }

    fn align(&mut self, align: usize) {
        let padded = self.bytes.len().next_multiple_of(align);
        self.bytes.resize(padded, 0);
    }

    fn put(&mut self, align: usize, data: &[u8]) -> &mut Self {
        self.align(align);
        self.bytes.extend_from_slice(data);
        self
    }

    /// A device pointer to binding `binding` (8 bytes, 8-aligned), patched by the host.
    pub fn ptr(&mut self, binding: u32, access: Access) -> &mut Self {
        self.align(8);
        self.relocations.push(Relocation {
            offset: self.bytes.len() as u32,
            binding,
            access,
        });
        self.put(8, &[0; 8])
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.put(4, &v.to_le_bytes())
    }
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.put(4, &v.to_le_bytes())
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.put(8, &v.to_le_bytes())
    }
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.put(8, &v.to_le_bytes())
    }
    pub fn f32(&mut self, v: f32) -> &mut Self {
        self.put(4, &v.to_le_bytes())
    }
    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.put(8, &v.to_le_bytes())
    }
    /// A fixed-size `u64` array (a C struct member `unsigned long long a[N]`).
    pub fn u64_array<const N: usize>(&mut self, v: &[u64; N]) -> &mut Self {
        self.align(8);
        for x in v {
            self.bytes.extend_from_slice(&x.to_le_bytes());
        }
        self
    }

    /// Current size in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The block and its relocations; refuses a block over `max_bytes` (the target's limit).
    pub fn finish(self, max_bytes: u32) -> Result<(Vec<u8>, Vec<Relocation>), OpError> {
        if self.bytes.len() > max_bytes as usize {
            return Err(OpError::Internal(format!(
                "parameter block of {} bytes exceeds the target's limit of {max_bytes}",
                self.bytes.len()
            )));
        }
        Ok((self.bytes, self.relocations))
    }
}

/// Reads a parameter block back, in the order it was packed.
#[derive(Debug)]
pub struct ParamReader<'a> {
    bytes: &'a [u8],
    relocations: &'a [Relocation],
    pos: usize,
}

impl<'a> ParamReader<'a> {
    pub fn new(bytes: &'a [u8], relocations: &'a [Relocation]) -> Self {
        ParamReader {
            bytes,
            relocations,
            pos: 0,
        }
    }

    fn take<const N: usize>(&mut self, align: usize) -> Result<[u8; N], OpError> {
        let start = self.pos.next_multiple_of(align);
        let end = start + N;
        let field = self.bytes.get(start..end).ok_or_else(|| {
            OpError::Internal(format!(
                "parameter block too short: need bytes {start}..{end}, have {}",
                self.bytes.len()
            ))
        })?;
        self.pos = end;
        Ok(field.try_into().expect("slice of length N"))
    }

    /// The binding index of the pointer at the current position.
    pub fn ptr(&mut self) -> Result<u32, OpError> {
        let start = self.pos.next_multiple_of(8);
        self.take::<8>(8)?;
        self.relocations
            .iter()
            .find(|r| r.offset as usize == start)
            .map(|r| r.binding)
            .ok_or_else(|| OpError::Internal(format!("no relocation at parameter offset {start}")))
    }
    pub fn u32(&mut self) -> Result<u32, OpError> {
        self.take::<4>(4).map(u32::from_le_bytes)
    }
    pub fn i32(&mut self) -> Result<i32, OpError> {
        self.take::<4>(4).map(i32::from_le_bytes)
    }
    pub fn u64(&mut self) -> Result<u64, OpError> {
        self.take::<8>(8).map(u64::from_le_bytes)
    }
    pub fn i64(&mut self) -> Result<i64, OpError> {
        self.take::<8>(8).map(i64::from_le_bytes)
    }
    pub fn f32(&mut self) -> Result<f32, OpError> {
        self.take::<4>(4).map(f32::from_le_bytes)
    }
    pub fn f64(&mut self) -> Result<f64, OpError> {
        self.take::<8>(8).map(f64::from_le_bytes)
    }
    pub fn u64_array<const N: usize>(&mut self) -> Result<[u64; N], OpError> {
        let mut out = [0u64; N];
        for x in &mut out {
            *x = self.u64()?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_are_naturally_aligned() {
        let mut p = ParamPacker::new();
        p.u32(1).ptr(3, Access::Read).u32(2).f64(0.5).i32(-1);
        let (bytes, relocs) = p.finish(CUDA_MAX_PARAM_BYTES).unwrap();
        // u32 at 0, pad to 8, ptr at 8, u32 at 16, pad, f64 at 24, i32 at 32
        assert_eq!(bytes.len(), 36);
        assert_eq!(relocs.len(), 1);
        assert_eq!(relocs[0].offset, 8);
        assert_eq!(relocs[0].binding, 3);
        assert_eq!(&bytes[24..32], &0.5f64.to_le_bytes());
        let mut r = ParamReader::new(&bytes, &relocs);
        assert_eq!(r.u32().unwrap(), 1);
        assert_eq!(r.ptr().unwrap(), 3);
        assert_eq!(r.u32().unwrap(), 2);
        assert_eq!(r.f64().unwrap(), 0.5);
        assert_eq!(r.i32().unwrap(), -1);
        assert!(r.u32().is_err(), "reading past the end is an error");
    }

    #[test]
    fn oversized_block_is_refused() {
        let mut p = ParamPacker::new();
        for _ in 0..600 {
            p.u64(0);
        }
        let err = p.finish(CUDA_MAX_PARAM_BYTES).unwrap_err();
        assert!(matches!(err, OpError::Internal(m) if m.contains("4800 bytes")));
    }

    #[test]
    fn reading_a_pointer_without_relocation_fails() {
        let mut p = ParamPacker::new();
        p.u64(5);
        let (bytes, relocs) = p.finish(64).unwrap();
        assert!(ParamReader::new(&bytes, &relocs).ptr().is_err());
    }

    proptest::proptest! {
        #[test]
        fn every_field_round_trips(fields in proptest::collection::vec((0u8..5, proptest::num::u64::ANY), 0..40)) {
            let mut p = ParamPacker::new();
            for (i, (kind, v)) in fields.iter().enumerate() {
                match kind {
                    0 => { p.u32(*v as u32); }
                    1 => { p.u64(*v); }
                    2 => { p.ptr(i as u32, Access::Read); }
                    3 => { p.f32(f32::from_bits(*v as u32)); }
                    _ => { p.i64(*v as i64); }
                }
            }
            let (bytes, relocs) = p.finish(u32::MAX).unwrap();
            let mut r = ParamReader::new(&bytes, &relocs);
            for (i, (kind, v)) in fields.iter().enumerate() {
                match kind {
                    0 => proptest::prop_assert_eq!(r.u32().unwrap(), *v as u32),
                    1 => proptest::prop_assert_eq!(r.u64().unwrap(), *v),
                    2 => proptest::prop_assert_eq!(r.ptr().unwrap(), i as u32),
                    3 => proptest::prop_assert_eq!(r.f32().unwrap().to_bits(), *v as u32),
                    _ => proptest::prop_assert_eq!(r.i64().unwrap(), *v as i64),
                }
            }
            for rel in &relocs {
                proptest::prop_assert_eq!(rel.offset % 8, 0);
            }
        }
    }
}
