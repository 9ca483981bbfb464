//! CPU kernels, in place (ABI 1.3): `matmul_{T}` (MatMul and Gemm, every served dtype) and
//! `matmulint_{TA}_{TB}` (MatMulInteger) read the parameter blocks of [`crate::plan`]. A block
//! range computes its share of the output tiles ([`Product::for_each_chunk`]): per batch it
//! reads the B columns it needs once (packed, or for the matrix unit as they are:
//! [`crate::operand::BOperand`]) — or, for a few rows and a B not kept between launches, reads
//! none and multiplies B tile by tile as it reads it ([`crate::stream`]) — then per chunk of rows
//! reads A's rows (and Gemm's C), multiplies, applies the epilogue and writes the tile. Every
//! launch is splittable; `run-cpu` runs the whole grid through the same code
//! ([`umd_sdk::kernel::run_cpu_in_memory`]).

use half::{bf16, f16};
use umd_sdk::dtype::{self, Element};
use umd_sdk::kernel::Memory;
use umd_sdk::matrix::{Operand, binds_in_place};
use umd_sdk::params::ParamReader;
use umd_sdk::{Dtype, KernelCall, OpError};

use crate::block::{Block, check_fits, extent, read_block, read_span};
use crate::plan::Geometry;
use crate::product::Product;
use crate::stream;
use umd_sdk::gemm::{Acc, Work};

/// Whether `entry_point` names a kernel of this plugin (all of them split by output rows).
pub fn splittable(entry_point: &str) -> bool {
    kernel_of(entry_point).is_ok()
}

enum Kernel {
    Float(Dtype),
    Int(Dtype, Dtype),
}

fn kernel_of(entry: &str) -> Result<Kernel, OpError> {
    let unknown = || OpError::internal(format!("unknown entry point `{entry}`"));
    let mut parts = entry.split('_');
    let kernel = parts.next();
    let mut dt = || parts.next().and_then(dtype::from_name).ok_or_else(unknown);
    let k = match kernel {
        Some("matmul") => Kernel::Float(dt()?),
        Some("matmulint") => Kernel::Int(dt()?, dt()?),
        _ => return Err(unknown()),
    };
    if parts.next().is_some() {
        return Err(unknown());
    }
    Ok(k)
}

/// Runs the blocks `call.blocks` of one launch.
pub fn run_kernel(call: &KernelCall, mem: &mut dyn Memory) -> Result<(), OpError> {
    let unknown = || OpError::internal(format!("unknown entry point `{}`", call.entry_point));
    match kernel_of(&call.entry_point)? {
        Kernel::Float(Dtype::F32) => matmul::<f32>(call, mem),
        Kernel::Float(Dtype::F16) => matmul::<f16>(call, mem),
        Kernel::Float(Dtype::Bf16) => matmul::<bf16>(call, mem),
        Kernel::Float(Dtype::F64) => matmul::<f64>(call, mem),
        Kernel::Float(Dtype::I32) => matmul::<i32>(call, mem),
        Kernel::Float(Dtype::I64) => matmul::<i64>(call, mem),
        Kernel::Int(Dtype::U8, Dtype::U8) => matmul_int::<u8, u8>(call, mem),
        Kernel::Int(Dtype::U8, Dtype::I8) => matmul_int::<u8, i8>(call, mem),
        Kernel::Int(Dtype::I8, Dtype::U8) => matmul_int::<i8, u8>(call, mem),
        Kernel::Int(Dtype::I8, Dtype::I8) => matmul_int::<i8, i8>(call, mem),
        _ => Err(unknown()),
    }
}

/// `matmul_{T}`: MatMul and Gemm (`Y = alpha · A·B + beta · C`).
fn matmul<T: Element>(call: &KernelCall, mem: &mut dyn Memory) -> Result<(), OpError>
where
    T::Compute: Acc,
{
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let flags = r.u32()?;
    let (a, b) = (r.ptr()?, r.ptr()?);
    let c = if flags & 1 != 0 {
        Some(r.ptr()?)
    } else {
        r.u64()?;
        None
    };
    let y = r.ptr()?;
    let (alpha, beta, scm, scn) = (r.f64()?, r.f64()?, r.u64()?, r.u64()?);
    let g = Geometry::read(&mut r)?;
    let s = std::mem::size_of::<T>();
    let p = Product::new(call, g, (a, s), (b, s), (y, s))?;
    if let Some(c) = c {
        check_fits(call, "C", (c, s), extent(&[(p.g.m, scm), (p.g.n, scn)]))?;
    }
    let (scm, scn) = (scm as usize, scn as usize);
    let (alpha_c, beta_c) = (
        <T::Compute as Acc>::from_f64(alpha),
        <T::Compute as Acc>::from_f64(beta),
    );
    let (mut work, mut acc, mut out) = (Work::default(), Vec::new(), Vec::new());
    let mut a_rows = Vec::new();
    let bound = T::DTYPE == Dtype::F32 && binds_in_place(mem);
    p.for_each_chunk(
        call,
        mem,
        (Some(T::DTYPE as u64), true, bound),
        |blk, _| blk.decode::<T, _>(|v| v.to_compute()),
        |mem, pb, z, rows, cols| {
            let (i0, i1) = (rows.start, rows.end);
            match pb {
                // f32 on the matrix unit: A read in place too
                Some(pb) if pb.is_bound() => {
                    let a = p.bound_a(z, i0)?;
                    pb.multiply(i1 - i0, p.k, a, &cols, &mut work, &mut acc, mem)?
                }
                Some(pb) => {
                    let ab = p.read_a(mem, z, i0, i1)?;
                    let av = ab.decode::<T, _>(|v| v.to_compute());
                    let a = Operand::Memory(ab.view(&av));
                    pb.multiply(i1 - i0, p.k, a, &cols, &mut work, &mut acc, mem)?
                }
                None => {
                    let ab = p.read_a(mem, z, i0, i1)?;
                    let av = ab.decode::<T, _>(|v| v.to_compute());
                    // B streamed: A's rows made contiguous
                    a_rows.clear();
                    a_rows.extend(
                        (0..i1 - i0)
                            .flat_map(|r| (0..p.k).map(move |kk| (r, kk)))
                            .map(|(r, kk)| av[r * ab.rs + kk * ab.cs]),
                    );
                    let a = (&a_rows[..], i1 - i0);
                    stream::multiply::<T>(&p, mem, z, a, cols.clone(), &mut acc)?;
                }
            }
            let cb = match c {
                Some(c) => Some(read_block(
                    mem,
                    (c, s),
                    (i0 * scm + cols.start * scn) as u64,
                    (i1 - i0, scm),
                    (cols.len(), scn),
                )?),
                None => None,
            };
            out.clear();
            out.resize(acc.len() * s, 0);
            match &cb {
                // MatMul: the products as they are, one tight loop
                None if alpha == 1.0 => {
                    for (&v, o) in acc.iter().zip(out.chunks_exact_mut(s)) {
                        T::from_compute(v).store(o);
                    }
                }
                _ => {
                    for (i, (row, o)) in acc
                        .chunks_exact(cols.len())
                        .zip(out.chunks_exact_mut(cols.len() * s))
                        .enumerate()
                    {
                        for (j, (&v, o)) in row.iter().zip(o.chunks_exact_mut(s)).enumerate() {
                            let mut v = if alpha == 1.0 { v } else { alpha_c.mul(v) };
                            if let Some(cb) = &cb {
                                v = v.add(beta_c.mul(cb.get::<T>(i, j).to_compute()));
                            }
                            T::from_compute(v).store(o);
                        }
                    }
                }
            }
            p.write_y(mem, z, i0, cols, &out)
        },
    )
}

/// An 8-bit MatMulInteger operand element.
trait Int8: Element {
    fn widen(self) -> i32;
}
impl Int8 for u8 {
    #[inline(always)]
    fn widen(self) -> i32 {
        self as i32
    }
}
impl Int8 for i8 {
    #[inline(always)]
    fn widen(self) -> i32 {
        self as i32
    }
}

/// The zero points of an operand, widened (absent: one zero); `stride` 1: one per row/column.
fn zero_points<T: Int8>(
    call: &KernelCall,
    mem: &mut dyn Memory,
    z: Option<u32>,
    per: u64,
    stride: u64,
) -> Result<Vec<i32>, OpError> {
    let Some(z) = z else { return Ok(vec![0]) };
    let count = match stride {
        0 => 1,
        1 => per,
        s => {
            return Err(OpError::internal(format!(
                "zero point stride {s} is neither 0 nor 1"
            )));
        }
    };
    check_fits(call, "zero point", (z, 1), Some(count))?;
    Ok(read_span(mem, z, 0, count as usize)?
        .into_iter()
        .map(|v| T::load(&[v]).widen())
        .collect())
}

/// `matmulint_{TA}_{TB}`: `(A - a_zero_point) · (B - b_zero_point)` in wrapping i32.
fn matmul_int<TA: Int8, TB: Int8>(call: &KernelCall, mem: &mut dyn Memory) -> Result<(), OpError> {
    let mut r = ParamReader::new(&call.params, &call.relocations);
    let flags = r.u32()?;
    let (a, b) = (r.ptr()?, r.ptr()?);
    let mut zp = |bit: u32| -> Result<Option<u32>, OpError> {
        if flags & bit != 0 {
            r.ptr().map(Some)
        } else {
            r.u64().map(|_| None)
        }
    };
    let (az, bz) = (zp(1)?, zp(2)?);
    let y = r.ptr()?;
    let (azs, bzs) = (r.u64()?, r.u64()?);
    let g = Geometry::read(&mut r)?;
    let p = Product::new(call, g, (a, 1), (b, 1), (y, 4))?;
    let za = zero_points::<TA>(call, mem, az, p.g.m, azs)?;
    let zb = zero_points::<TB>(call, mem, bz, p.g.n, bzs)?;
    let (azs, bzs) = ((za.len() > 1) as usize, (zb.len() > 1) as usize);
    let (mut work, mut acc, mut out) = (Work::default(), Vec::new(), Vec::new());
    // a block of B holding `cols` of its columns, less their zero points
    let decode_b = |blk: &Block, cols: std::ops::Range<usize>| {
        let mut bv = blk.decode::<TB, _>(TB::widen);
        for kk in 0..p.k {
            for (j, col) in cols.clone().enumerate() {
                bv[kk * blk.rs + j * blk.cs] -= zb[col * bzs];
            }
        }
        bv
    };
    p.for_each_chunk(
        call,
        mem,
        (None, false, false),
        decode_b,
        |mem, pb, z, rows, cols| {
            let pb = pb.ok_or_else(|| OpError::internal("MatMulInteger's B was not read"))?;
            let (i0, i1) = (rows.start, rows.end);
            let ab = p.read_a(mem, z, i0, i1)?;
            let mut av = ab.decode::<TA, _>(TA::widen);
            for r in 0..i1 - i0 {
                for kk in 0..p.k {
                    av[r * ab.rs + kk * ab.cs] -= za[(i0 + r) * azs];
                }
            }
            let a = Operand::Memory(ab.view(&av));
            pb.multiply(i1 - i0, p.k, a, &cols, &mut work, &mut acc, mem)?;
            out.clear();
            out.extend(acc.iter().flat_map(|v| v.to_le_bytes()));
            p.write_y(mem, z, i0, cols, &out)
        },
    )
}
