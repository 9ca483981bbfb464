//! Tables built from attributes (n-gram pools, trees, label maps) reach the kernels as a blob of
//! u64 words in the plan's workspace: `fill_words` launches carry it 500 words (4000 bytes) at a
//! time in their parameter block and copy it there before the op's own launch reads it.

use umd_sdk::params::{ParamPacker, ParamReader};
use umd_sdk::{Access, CpuCall, CpuWrite, Launch, ModuleSource, OpError, SourceLanguage};

use crate::common::{self, launch};

/// The module of `fill_words`.
pub const MODULE: &str = "ml_blob";
/// Words one `fill_words` launch carries.
pub const CHUNK: usize = 500;
/// Most `fill_words` launches of one plan (a blob of up to 4 MB; a command buffer holds at most 1024 launches).
pub const MAX_CHUNKS: usize = 1000;

/// A growing blob of words.
#[derive(Default, Clone, Debug)]
pub struct Blob {
    pub words: Vec<u64>,
}

impl Blob {
    /// Current length in words (the offset of the next word pushed).
    pub fn len(&self) -> u64 {
        self.words.len() as u64
    }
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }
    pub fn i64(&mut self, v: i64) {
        self.words.push(v as u64);
    }
    pub fn f64(&mut self, v: f64) {
        self.words.push(v.to_bits());
    }
    /// Workspace bytes the blob needs (at least one word).
    pub fn bytes(&self) -> u64 {
        self.len().max(1) * 8
    }

    /// Launches writing the blob into binding `dst`; an error naming `op` when it is too large.
    pub fn launches(
        &self,
        req: &umd_sdk::PlanRequestExt,
        dst: u32,
    ) -> Result<Vec<Launch>, OpError> {
        let chunks = self.words.len().div_ceil(CHUNK);
        if chunks > MAX_CHUNKS {
            return Err(OpError::InvalidAttribute(format!(
                "{}: the attributes make a table of {} bytes, more than this plugin carries ({} bytes)",
                req.op,
                self.words.len() * 8,
                CHUNK * MAX_CHUNKS * 8
            )));
        }
        (0..chunks)
            .map(|c| {
                let part = &self.words[c * CHUNK..((c + 1) * CHUNK).min(self.words.len())];
                let mut arr = [0u64; CHUNK];
                arr[..part.len()].copy_from_slice(part);
                let access = if c == 0 {
                    Access::Write
                } else {
                    Access::ReadWrite
                };
                let mut p = ParamPacker::new();
                p.ptr(dst, access)
                    .u64((c * CHUNK) as u64)
                    .u64(part.len() as u64)
                    .u64_array(&arr);
                launch(
                    req,
                    MODULE.into(),
                    "fill_words".into(),
                    part.len() as u64,
                    p,
                )
            })
            .collect()
    }
}

/// (ABI 1.7) How many of `plan`'s first launches are its blob's `fill_words`, as setup
/// launches: all of them when they fill the workspace and no later launch writes it (the blob
/// is then written once for every run of a compiled model), else 0.
pub fn setup_launches(req: &umd_sdk::PlanRequestExt, plan: &umd_sdk::OpPlan) -> u32 {
    let n = plan
        .launches
        .iter()
        .take_while(|l| l.module_id == MODULE)
        .count();
    let workspace = (req.present().count() + plan.outputs.len()) as u32;
    let fills_workspace = plan.workspace_bytes > 0
        && plan.launches[..n]
            .iter()
            .flat_map(|l| &l.relocations)
            .all(|r| r.binding == workspace);
    let later_writes = plan.launches[n..]
        .iter()
        .flat_map(|l| &l.relocations)
        .any(|r| r.binding == workspace && !matches!(r.access, Access::Read));
    if fills_workspace && !later_writes {
        n as u32
    } else {
        0
    }
}

/// The CUDA module `ml_blob`.
pub fn cuda() -> ModuleSource {
    let mut code = common::cuda_head(&[]);
    code.push_str(&format!(
        "struct umd_words {{ unsigned long long v[{CHUNK}]; }};\n\
         extern \"C\" __global__ void fill_words(u64* __restrict__ dst, u64 off, u64 n, \
         struct umd_words w) {{\n  UMD_FOR(i, n) dst[off + i] = w.v[i];\n}}\n"
    ));
    ModuleSource {
        language: SourceLanguage::CudaC,
        code,
        entry_points: vec!["fill_words".into()],
        options: vec!["--std=c++17".into()],
    }
}

/// `fill_words` in place (ABI 1.3 kernels): its chunk is written into the buffer where it
/// goes, nothing else read or written (a whole-buffer round trip per chunk made a 3 MB forest
/// table cost gigabytes of copies per run).
pub fn run_in_place(
    call: &umd_sdk::KernelCall,
    memory: &mut dyn umd_sdk::kernel::Memory,
) -> Result<(), OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let dst = r.ptr()?;
    let off = r.u64()?;
    let n = r.u64()? as usize;
    let w: [u64; CHUNK] = r.u64_array()?;
    if n > CHUNK {
        return Err(OpError::internal("fill_words: more words than a chunk"));
    }
    let bytes: Vec<u8> = w[..n].iter().flat_map(|v| v.to_le_bytes()).collect();
    let at = off
        .checked_mul(8)
        .ok_or_else(|| OpError::internal("fill_words: the offset overflows"))?;
    memory.write(dst, at, &bytes)
}

/// The CPU `fill_words`.
pub fn run_cpu(call: &CpuCall) -> Result<Vec<CpuWrite>, OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let dst = r.ptr()?;
    let off = r.u64()? as usize;
    let n = r.u64()? as usize;
    let w: [u64; CHUNK] = r.u64_array()?;
    let mut out = common::written(call, dst)?;
    if n > CHUNK || (off + n) * 8 > out.data.len() {
        return Err(OpError::internal(
            "fill_words: the blob overruns its buffer",
        ));
    }
    for (i, v) in w[..n].iter().enumerate() {
        out.data[(off + i) * 8..(off + i + 1) * 8].copy_from_slice(&v.to_le_bytes());
    }
    Ok(vec![out])
}
