//! The `UMDCMD` command buffer: what a translation produces and a device executes.
//!
//! Owns the in-memory form ([`CommandBuffer`]), its structural and per-target validation (the
//! one check every plan and every decoded buffer goes through), the binary format ([`codec`])
//! and the human-readable form ([`display`]). It knows nothing of plugins or devices.
//!
//! ```
//! use umd::cmdbuf::{CommandBuffer, Binding, Role};
//! use umd::{Dtype, TensorDesc};
//! let cb = CommandBuffer {
//!     target: "cpu".into(),
//!     bindings: vec![Binding { role: Role::Input, desc: TensorDesc::new("x", vec![4], Dtype::F32) }],
//!     launches: vec![],
//! };
//! let bytes = cb.encode();
//! assert_eq!(&bytes[..6], b"UMDCMD");
//! assert_eq!(CommandBuffer::decode(&bytes).unwrap(), cb);
//! ```

pub mod codec;
pub mod display;

use thiserror::Error;

use crate::target::{Dim3, TargetLimits};
use crate::tensor::{MAX_RANK, TensorDesc};

/// Format version written by this host.
pub const FORMAT_VERSION: u16 = 1;
/// Format limits: anything beyond is refused by the decoder and the validator.
pub mod limits {
    pub const MAX_TOTAL_BYTES: usize = 16 << 20;
    /// The one string limit: tensor names, targets, plugin names, module ids and entry points,
    /// checked by request validation, the validator, the encoder and the decoder alike.
    pub const MAX_STRING: usize = 1024;
    pub const MAX_BINDINGS: usize = 256;
    pub const MAX_LAUNCHES: usize = 1024;
    pub const MAX_PARAM_BYTES: usize = 4096;
    pub const MAX_RELOCATIONS: usize = 512;
}

/// How a binding is used by the whole command buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Role {
    Input = 1,
    Output = 2,
    Workspace = 3,
}

impl Role {
    pub fn from_code(c: u8) -> Option<Role> {
        [Role::Input, Role::Output, Role::Workspace]
            .into_iter()
            .find(|r| *r as u8 == c)
    }
}

/// How one launch uses a bound buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Access {
    Read = 1,
    Write = 2,
    ReadWrite = 3,
}

impl Access {
    pub fn from_code(c: u8) -> Option<Access> {
        [Access::Read, Access::Write, Access::ReadWrite]
            .into_iter()
            .find(|a| *a as u8 == c)
    }
    pub fn writes(self) -> bool {
        self != Access::Read
    }
    pub fn reads(self) -> bool {
        self != Access::Write
    }
}

/// A buffer slot. Bindings are ordered inputs, outputs, workspace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Binding {
    pub role: Role,
    /// The workspace is described as `u8[bytes]`.
    pub desc: TensorDesc,
}

/// A device pointer slot in a parameter block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Relocation {
    pub offset: u32,
    pub binding: u32,
    pub access: Access,
}

/// The kernel module a launch runs: which plugin provides it, its id, and its content hash.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModuleRef {
    /// `name@version` of the plugin.
    pub plugin: String,
    pub id: String,
    /// SHA-256 of the module's identity: the planning plugin build's wasm hash, the module id
    /// and the target architecture (`umd::registry::module_hash`). It names the exact build:
    /// two builds of one `name@version` give different hashes.
    pub hash: [u8; 32],
}

/// One kernel launch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LaunchCmd {
    pub module: ModuleRef,
    pub entry_point: String,
    pub grid: Dim3,
    pub block: Dim3,
    pub shared_memory: u32,
    pub params: Vec<u8>,
    pub relocations: Vec<Relocation>,
}

/// A translated operation, ready for a device.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CommandBuffer {
    /// Target name (`cpu`, `cuda:sm_90`).
    pub target: String,
    pub bindings: Vec<Binding>,
    pub launches: Vec<LaunchCmd>,
}

/// Why a command buffer was refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CmdError {
    #[error("truncated: {field} needs {need} bytes at offset {offset}, only {have} remain")]
    Truncated {
        field: &'static str,
        offset: usize,
        need: usize,
        have: usize,
    },
    #[error("not a command buffer: bad magic (expected `UMDCMD`)")]
    BadMagic,
    #[error("unsupported format version {found} (this host reads version {supported})")]
    UnsupportedVersion { found: u16, supported: u16 },
    #[error("length field says {header} bytes but the buffer has {actual}")]
    LengthMismatch { header: u64, actual: usize },
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum { stored: u32, computed: u32 },
    #[error("{what} is {value}, the maximum is {max}")]
    TooLarge { what: String, value: u64, max: u64 },
    #[error("{field}: invalid code {value}")]
    BadCode { field: &'static str, value: u8 },
    #[error("{field}: not valid UTF-8")]
    BadUtf8 { field: &'static str },
    #[error("{0}")]
    Invalid(String),
    #[error("{0} trailing bytes after the last launch")]
    TrailingBytes(usize),
}

fn too_large(what: impl Into<String>, value: usize, max: usize) -> CmdError {
    CmdError::TooLarge {
        what: what.into(),
        value: value as u64,
        max: max as u64,
    }
}

impl CommandBuffer {
    /// Encodes to `UMDCMD` bytes.
    pub fn encode(&self) -> Vec<u8> {
        codec::encode(self)
    }

    /// Decodes and validates `UMDCMD` bytes.
    pub fn decode(bytes: &[u8]) -> Result<CommandBuffer, CmdError> {
        let cb = codec::decode(bytes)?;
        cb.validate(None)?;
        Ok(cb)
    }

    /// Number of bindings of a role.
    pub fn count(&self, role: Role) -> usize {
        self.bindings.iter().filter(|b| b.role == role).count()
    }

    /// Per binding, whether any launch reads it and whether any writes it (what a device's
    /// hazard tracking records). Relocations naming no binding are ignored (validation refuses
    /// them).
    pub fn binding_access(&self) -> Vec<(bool, bool)> {
        let mut access = vec![(false, false); self.bindings.len()];
        for r in self.launches.iter().flat_map(|l| &l.relocations) {
            if let Some(a) = access.get_mut(r.binding as usize) {
                a.0 |= r.access.reads();
                a.1 |= r.access.writes();
            }
        }
        access
    }

    /// Checks structure and, when given, a target's launch limits. Every plan and every decoded
    /// buffer passes through here before a device sees it.
    pub fn validate(&self, target: Option<&TargetLimits>) -> Result<(), CmdError> {
        use limits::*;
        if self.target.is_empty() {
            return Err(CmdError::Invalid("target name is empty".into()));
        }
        check_string(&self.target, || "target".into())?;
        if self.bindings.len() > MAX_BINDINGS {
            return Err(too_large(
                "binding count",
                self.bindings.len(),
                MAX_BINDINGS,
            ));
        }
        if self.launches.len() > MAX_LAUNCHES {
            return Err(too_large("launch count", self.launches.len(), MAX_LAUNCHES));
        }
        let mut last_role = Role::Input;
        for (i, b) in self.bindings.iter().enumerate() {
            if (b.role as u8) < (last_role as u8) {
                return Err(CmdError::Invalid(format!(
                    "binding {i} ({:?}) comes after a {:?} binding: order must be inputs, outputs, workspace",
                    b.role, last_role
                )));
            }
            last_role = b.role;
            check_string(&b.desc.name, || format!("binding {i} name"))?;
            if b.desc.shape.len() > MAX_RANK {
                return Err(too_large(
                    format!("binding {i} rank"),
                    b.desc.shape.len(),
                    MAX_RANK,
                ));
            }
            if b.desc.byte_size().is_none() {
                return Err(CmdError::Invalid(format!(
                    "binding {i} shape {:?} overflows",
                    b.desc.shape
                )));
            }
            if b.desc.text_bytes != 0 && !b.desc.dtype.is_string() {
                return Err(CmdError::Invalid(format!(
                    "binding {i} is {} but says it has {} bytes of text",
                    b.desc.dtype, b.desc.text_bytes
                )));
            }
        }
        if self.count(Role::Workspace) > 1 {
            return Err(CmdError::Invalid("more than one workspace binding".into()));
        }
        for (li, l) in self.launches.iter().enumerate() {
            validate_launch(self, li, l, target)?;
        }
        Ok(())
    }
}

/// Refuses a string over [`limits::MAX_STRING`] bytes (the format's u16 length could not hold
/// some, and the decoder refuses the rest); `what` names it, only when refused (this runs on
/// every submission).
fn check_string(s: &str, what: impl FnOnce() -> String) -> Result<(), CmdError> {
    if s.len() > limits::MAX_STRING {
        return Err(too_large(
            format!("{} length", what()),
            s.len(),
            limits::MAX_STRING,
        ));
    }
    Ok(())
}

fn validate_launch(
    cb: &CommandBuffer,
    li: usize,
    l: &LaunchCmd,
    target: Option<&TargetLimits>,
) -> Result<(), CmdError> {
    let bad = |m: String| {
        Err(CmdError::Invalid(format!(
            "launch {li} (`{}`): {m}",
            l.entry_point
        )))
    };
    check_string(&l.entry_point, || format!("launch {li} entry point"))?;
    check_string(&l.module.id, || format!("launch {li} module id"))?;
    check_string(&l.module.plugin, || format!("launch {li} plugin name"))?;
    if l.entry_point.is_empty() || l.module.id.is_empty() || l.module.plugin.is_empty() {
        return bad("empty module, plugin or entry point name".into());
    }
    if l.block.volume() == 0 || l.grid.volume() == 0 {
        return bad(format!("empty launch: grid {}, block {}", l.grid, l.block));
    }
    let max_params = target.map_or(limits::MAX_PARAM_BYTES, |t| t.max_param_bytes as usize);
    if l.params.len() > max_params {
        return bad(format!(
            "parameter block of {} bytes exceeds the limit of {max_params}",
            l.params.len()
        ));
    }
    if l.relocations.len() > limits::MAX_RELOCATIONS {
        return bad(format!(
            "{} relocations exceed {}",
            l.relocations.len(),
            limits::MAX_RELOCATIONS
        ));
    }
    let mut slots: Vec<u32> = Vec::with_capacity(l.relocations.len());
    for (ri, r) in l.relocations.iter().enumerate() {
        if r.offset % 8 != 0 {
            return bad(format!(
                "relocation {ri} at offset {} is not 8-byte aligned",
                r.offset
            ));
        }
        if r.offset as usize + 8 > l.params.len() {
            return bad(format!(
                "relocation {ri} at offset {} lies outside the {}-byte parameter block",
                r.offset,
                l.params.len()
            ));
        }
        let Some(binding) = cb.bindings.get(r.binding as usize) else {
            return bad(format!(
                "relocation {ri} names binding {}, but there are only {}",
                r.binding,
                cb.bindings.len()
            ));
        };
        if binding.role == Role::Input && r.access.writes() {
            return bad(format!(
                "relocation {ri} writes input binding {}",
                r.binding
            ));
        }
        if slots.contains(&r.offset) {
            return bad(format!("two relocations patch offset {}", r.offset));
        }
        slots.push(r.offset);
    }
    if let Some(t) = target {
        if l.block.volume() > t.max_threads_per_block as u64 {
            return bad(format!(
                "block {} has {} threads, the target allows {}",
                l.block,
                l.block.volume(),
                t.max_threads_per_block
            ));
        }
        if l.block.exceeds(&t.max_block_dims) {
            return bad(format!(
                "block {} exceeds the target's {}",
                l.block, t.max_block_dims
            ));
        }
        if l.grid.exceeds(&t.max_grid_dims) {
            return bad(format!(
                "grid {} exceeds the target's {}",
                l.grid, t.max_grid_dims
            ));
        }
        if l.shared_memory > t.max_shared_memory {
            return bad(format!(
                "{} bytes of shared memory exceed the target's {}",
                l.shared_memory, t.max_shared_memory
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;
