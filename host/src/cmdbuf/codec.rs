//! The `UMDCMD` binary format, version 1. Little-endian throughout.
//!
//! ```text
//! magic      6  "UMDCMD"
//! version    u16
//! length     u32   whole buffer, checksum included
//! target     str                      (str = u16 length + UTF-8 bytes)
//! bindings   u16 count, each: role u8, dtype u8, rank u8, name str, dims u64 × rank
//! launches   u16 count, each: plugin str, module str, hash [32], entry str,
//!            grid 3×u32, block 3×u32, shared u32, params u32 length + bytes,
//!            relocations u16 count, each: offset u32, binding u32, access u8
//! checksum   u32   CRC-32 of everything before it
//! ```
//! The decoder never trusts a count or length before checking it against the bytes left and the
//! format limits, so hostile input costs at most its own size.

use super::limits::*;
use super::{
    Access, Binding, CmdError, CommandBuffer, FORMAT_VERSION, LaunchCmd, ModuleRef, Relocation,
    Role, too_large,
};
use crate::target::Dim3;
use crate::tensor::{Dtype, MAX_RANK, TensorDesc};

const MAGIC: &[u8; 6] = b"UMDCMD";
const HEADER: usize = 6 + 2 + 4;

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// A string of at most `MAX_STRING` bytes (validated buffers never have longer ones; an
    /// unvalidated one is cut at a character boundary, never wrapped into a bad length).
    fn str(&mut self, s: &str) {
        debug_assert!(s.len() <= MAX_STRING, "encoding an unvalidated string");
        let mut n = s.len().min(MAX_STRING);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.u16(n as u16);
        self.0.extend_from_slice(&s.as_bytes()[..n]);
    }
    fn dim3(&mut self, d: Dim3) {
        self.u32(d.x);
        self.u32(d.y);
        self.u32(d.z);
    }
}

/// Encodes a command buffer. Callers validate first; lengths beyond the format limits are a
/// programming error caught by `validate`.
pub fn encode(cb: &CommandBuffer) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(256));
    w.0.extend_from_slice(MAGIC);
    w.u16(FORMAT_VERSION);
    w.u32(0); // length, patched below
    w.str(&cb.target);
    w.u16(cb.bindings.len() as u16);
    for b in &cb.bindings {
        w.u8(b.role as u8);
        w.u8(b.desc.dtype as u8);
        w.u8(b.desc.shape.len() as u8);
        w.str(&b.desc.name);
        b.desc.shape.iter().for_each(|&d| w.u64(d));
        if b.desc.dtype.is_string() {
            // (ABI 1.5) only string bindings carry their text size: others encode as before.
            w.u64(b.desc.text_bytes);
        }
    }
    w.u16(cb.launches.len() as u16);
    for l in &cb.launches {
        w.str(&l.module.plugin);
        w.str(&l.module.id);
        w.0.extend_from_slice(&l.module.hash);
        w.str(&l.entry_point);
        w.dim3(l.grid);
        w.dim3(l.block);
        w.u32(l.shared_memory);
        w.u32(l.params.len() as u32);
        w.0.extend_from_slice(&l.params);
        w.u16(l.relocations.len() as u16);
        for r in &l.relocations {
            w.u32(r.offset);
            w.u32(r.binding);
            w.u8(r.access as u8);
        }
    }
    let total = (w.0.len() + 4) as u32;
    w.0[8..12].copy_from_slice(&total.to_le_bytes());
    let crc = crc32fast::hash(&w.0);
    w.u32(crc);
    w.0
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], CmdError> {
        let have = self.buf.len() - self.pos;
        if n > have {
            return Err(CmdError::Truncated {
                field,
                offset: self.pos,
                need: n,
                have,
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u8(&mut self, f: &'static str) -> Result<u8, CmdError> {
        Ok(self.take(1, f)?[0])
    }
    fn u16(&mut self, f: &'static str) -> Result<u16, CmdError> {
        Ok(u16::from_le_bytes(self.take(2, f)?.try_into().unwrap()))
    }
    fn u32(&mut self, f: &'static str) -> Result<u32, CmdError> {
        Ok(u32::from_le_bytes(self.take(4, f)?.try_into().unwrap()))
    }
    fn u64(&mut self, f: &'static str) -> Result<u64, CmdError> {
        Ok(u64::from_le_bytes(self.take(8, f)?.try_into().unwrap()))
    }
    fn str(&mut self, f: &'static str) -> Result<String, CmdError> {
        let n = self.u16(f)? as usize;
        if n > MAX_STRING {
            return Err(too_large(format!("{f} length"), n, MAX_STRING));
        }
        let bytes = self.take(n, f)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| CmdError::BadUtf8 { field: f })
    }
    fn dim3(&mut self, f: &'static str) -> Result<Dim3, CmdError> {
        Ok(Dim3::new(self.u32(f)?, self.u32(f)?, self.u32(f)?))
    }
    /// A count, refused when over `max`.
    fn count(&mut self, f: &'static str, max: usize) -> Result<usize, CmdError> {
        let n = self.u16(f)? as usize;
        if n > max {
            return Err(too_large(f, n, max));
        }
        Ok(n)
    }
}

/// Decodes the binary form (structure only; [`CommandBuffer::decode`] also validates).
pub fn decode(bytes: &[u8]) -> Result<CommandBuffer, CmdError> {
    if bytes.len() > MAX_TOTAL_BYTES {
        return Err(too_large("buffer size", bytes.len(), MAX_TOTAL_BYTES));
    }
    let mut r = Reader { buf: bytes, pos: 0 };
    if r.take(6, "magic")? != MAGIC {
        return Err(CmdError::BadMagic);
    }
    let version = r.u16("version")?;
    if version != FORMAT_VERSION {
        return Err(CmdError::UnsupportedVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let length = r.u32("length")? as usize;
    if length != bytes.len() || length < HEADER + 4 {
        return Err(CmdError::LengthMismatch {
            header: length as u64,
            actual: bytes.len(),
        });
    }
    let body_end = bytes.len() - 4;
    let stored = u32::from_le_bytes(bytes[body_end..].try_into().unwrap());
    let computed = crc32fast::hash(&bytes[..body_end]);
    if stored != computed {
        return Err(CmdError::Checksum { stored, computed });
    }
    // Parse the body only: the checksum is not part of any field.
    let mut r = Reader {
        buf: &bytes[..body_end],
        pos: HEADER,
    };
    let target = r.str("target")?;
    let nb = r.count("binding count", MAX_BINDINGS)?;
    let mut bindings = Vec::with_capacity(nb);
    for _ in 0..nb {
        let role = r.u8("binding role")?;
        let role = Role::from_code(role).ok_or(CmdError::BadCode {
            field: "binding role",
            value: role,
        })?;
        let dt = r.u8("binding dtype")?;
        let dtype = Dtype::from_code(dt).ok_or(CmdError::BadCode {
            field: "binding dtype",
            value: dt,
        })?;
        let rank = r.u8("binding rank")? as usize;
        if rank > MAX_RANK {
            return Err(too_large("binding rank", rank, MAX_RANK));
        }
        let name = r.str("binding name")?;
        let shape = (0..rank)
            .map(|_| r.u64("binding dims"))
            .collect::<Result<Vec<_>, _>>()?;
        let text_bytes = if dtype.is_string() {
            r.u64("binding text bytes")?
        } else {
            0
        };
        bindings.push(Binding {
            role,
            desc: TensorDesc {
                name,
                shape,
                dtype,
                text_bytes,
            },
        });
    }
    let nl = r.count("launch count", MAX_LAUNCHES)?;
    let mut launches = Vec::with_capacity(nl.min(64));
    for _ in 0..nl {
        let plugin = r.str("module plugin")?;
        let id = r.str("module id")?;
        let hash: [u8; 32] = r.take(32, "module hash")?.try_into().unwrap();
        let entry_point = r.str("entry point")?;
        let grid = r.dim3("grid")?;
        let block = r.dim3("block")?;
        let shared_memory = r.u32("shared memory")?;
        let np = r.u32("params length")? as usize;
        if np > MAX_PARAM_BYTES {
            return Err(too_large("params length", np, MAX_PARAM_BYTES));
        }
        let params = r.take(np, "params")?.to_vec();
        let nr = r.count("relocation count", MAX_RELOCATIONS)?;
        let mut relocations = Vec::with_capacity(nr);
        for _ in 0..nr {
            let offset = r.u32("relocation offset")?;
            let binding = r.u32("relocation binding")?;
            let a = r.u8("relocation access")?;
            let access = Access::from_code(a).ok_or(CmdError::BadCode {
                field: "relocation access",
                value: a,
            })?;
            relocations.push(Relocation {
                offset,
                binding,
                access,
            });
        }
        launches.push(LaunchCmd {
            module: ModuleRef { plugin, id, hash },
            entry_point,
            grid,
            block,
            shared_memory,
            params,
            relocations,
        });
    }
    if r.pos != body_end {
        return Err(CmdError::TrailingBytes(body_end - r.pos));
    }
    Ok(CommandBuffer {
        target,
        bindings,
        launches,
    })
}
