//! The CUDA kernels run on the CPU: each module is compiled as C++ with g++ against a small
//! emulation of the CUDA execution model (blocks one after another, a block's threads as OS
//! threads, `__syncthreads` a barrier, `__shared__` a static), launched with the plan's grid,
//! block and parameter block, and compared with the CPU kernels. It checks the kernels' logic
//! (indexing, block reductions, scans, TopK ranks) without a GPU, not their speed.
//!
//! Ignored by default (needs g++, takes a minute or two):
//! `cargo test -p umd-plugin-reduce emulated -- --ignored`

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;
use crate::ops::{ARG_OPS, NUMERIC, ORDERED, REDUCE_OPS};
use umd_sdk::Plugin;
use umd_sdk::dtype::CUDA_PRELUDE;

/// The CUDA built-ins the modules use, in C++.
const EMU_HEADER: &str = r#"
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(x)
#define __shared__ static
struct umd_dim3 { unsigned int x, y, z; };
static umd_dim3 blockIdx, blockDim, gridDim;
static thread_local umd_dim3 threadIdx;
static std::barrier<>* umd_bar;
inline void __syncthreads() { umd_bar->arrive_and_wait(); }
static std::atomic<int> umd_or_acc[2];
static thread_local int umd_or_gen = 0;
inline int __syncthreads_or(int p) {
  int g = umd_or_gen; umd_or_gen ^= 1;
  if (p) umd_or_acc[g].fetch_or(1);
  umd_bar->arrive_and_wait();
  int r = umd_or_acc[g].load();
  umd_bar->arrive_and_wait();
  if (threadIdx.x == 0) umd_or_acc[g].store(0);
  return r;
}
inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
inline float __uint_as_float(unsigned int i) { float f; memcpy(&f, &i, 4); return f; }
inline unsigned int __float_as_uint(float f) { unsigned int i; memcpy(&i, &f, 4); return i; }
inline double __longlong_as_double(long long i) { double f; memcpy(&f, &i, 8); return f; }
typedef unsigned short umd_half;
typedef unsigned short umd_bf16;
inline float umd_h2f(umd_half h) { _Float16 f; memcpy(&f, &h, 2); return (float)f; }
inline umd_half umd_f2h(float f) { _Float16 h = (_Float16)f; umd_half u; memcpy(&u, &h, 2); return u; }
inline float umd_b2f(umd_bf16 b) { return __uint_as_float(((unsigned int)b) << 16); }
inline umd_bf16 umd_f2b(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (umd_bf16)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (umd_bf16)(u >> 16);
}
"#;

/// Reads a launch spec, runs the named kernel over the grid, writes the buffers back.
/// Spec: `entry grid block`, then the params in hex, then `n` relocations `offset binding`,
/// then `n` buffers `path size`.
const EMU_MAIN: &str = r#"
int main(int argc, char** argv) {
  std::ifstream in(argv[1]);
  std::string entry, hex; unsigned int grid, block; in >> entry >> grid >> block >> hex;
  std::vector<unsigned char> params(hex.size() / 2);
  for (size_t i = 0; i < params.size(); ++i) params[i] = (unsigned char)std::stoi(hex.substr(2 * i, 2), nullptr, 16);
  size_t nrel; in >> nrel;
  std::vector<std::pair<size_t, size_t>> rel(nrel);
  for (auto& r : rel) in >> r.first >> r.second;
  size_t nbuf; in >> nbuf;
  std::vector<std::string> paths(nbuf);
  std::vector<std::vector<unsigned char>> bufs(nbuf);
  for (size_t i = 0; i < nbuf; ++i) {
    size_t size; in >> paths[i] >> size;
    bufs[i].assign(size + 8, 0);
    std::ifstream f(paths[i], std::ios::binary);
    f.read((char*)bufs[i].data(), size);
    bufs[i].resize(size + 8);
  }
  for (auto& r : rel) { void* p = bufs[r.second].data(); memcpy(&params[r.first], &p, 8); }
  auto it = umd_kernels.find(entry);
  if (it == umd_kernels.end()) { fprintf(stderr, "no kernel %s\n", entry.c_str()); return 2; }
  gridDim = {grid, 1, 1}; blockDim = {block, 1, 1};
  for (unsigned int b = 0; b < grid; ++b) {
    blockIdx = {b, 0, 0};
    std::barrier<> bar(block); umd_bar = &bar;
    std::vector<std::thread> ts;
    for (unsigned int t = 0; t < block; ++t)
      ts.emplace_back([&, t] { threadIdx = {t, 0, 0}; it->second(params.data()); umd_bar->arrive_and_drop(); });
    for (auto& t : ts) t.join();
  }
  for (size_t i = 0; i < nbuf; ++i) {
    std::ofstream f(paths[i], std::ios::binary);
    f.write((const char*)bufs[i].data(), bufs[i].size() - 8);
  }
  return 0;
}
"#;

/// The parameter structs of each kernel family (the CUDA layout is the C struct layout).
const EMU_PARAMS: &str = r#"
struct P_view { const T* x; T* out; unsigned long long n_out, R; unsigned int krank, rrank; umd_dims ks, kst, rs, rst; };
struct P_arg { const T* x; long long* out; unsigned long long n_out, R; unsigned int krank, rrank; umd_dims ks, kst, rs, rst; unsigned int last; };
struct P_cum { const T* x; T* y; unsigned long long lines, R, inner; unsigned int exclusive, reverse; };
struct P_split1 { const T* x; C* ws; unsigned long long n_out, R; unsigned int krank, rrank; umd_dims ks, kst, rs, rst; unsigned long long S, chunk; };
struct P_split2 { const C* ws; T* out; unsigned long long n_out, R, S; };
struct P_topk { const T* x; T* vals; long long* idx; unsigned long long lines, R, inner, k; unsigned int largest; };
"#;

/// The dispatch table entry of kernel `e`.
fn table_entry(e: &str) -> String {
    let family = e.split('_').next().unwrap();
    let variant = e.rsplit('_').next().unwrap();
    let (st, args) = match (family, variant) {
        (_, "split1") => (
            "P_split1",
            "a.x, a.ws, a.n_out, a.R, a.krank, a.rrank, a.ks, a.kst, a.rs, a.rst, a.S, a.chunk",
        ),
        (_, "split2") => ("P_split2", "a.ws, a.out, a.n_out, a.R, a.S"),
        _ => match family {
            "argmax" | "argmin" => (
                "P_arg",
                "a.x, a.out, a.n_out, a.R, a.krank, a.rrank, a.ks, a.kst, a.rs, a.rst, a.last",
            ),
            "cumsum" => (
                "P_cum",
                "a.x, a.y, a.lines, a.R, a.inner, a.exclusive, a.reverse",
            ),
            "topk" => (
                "P_topk",
                "a.x, a.vals, a.idx, a.lines, a.R, a.inner, a.k, a.largest",
            ),
            _ => (
                "P_view",
                "a.x, a.out, a.n_out, a.R, a.krank, a.rrank, a.ks, a.kst, a.rs, a.rst",
            ),
        },
    };
    format!(
        "{{\"{e}\", [](const unsigned char* p) {{ {st} a; memcpy(&a, p, sizeof a); {e}({args}); }}}},\n"
    )
}

struct Emulator {
    dir: PathBuf,
    exes: HashMap<String, PathBuf>,
    runs: usize,
}

impl Emulator {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("umd-reduce-emu-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Emulator {
            dir,
            exes: HashMap::new(),
            runs: 0,
        }
    }

    /// The executable of module `id`, compiled once.
    fn exe(&mut self, id: &str) -> PathBuf {
        if let Some(p) = self.exes.get(id) {
            return p.clone();
        }
        let src = Reduce::kernel_source(id, &target()).unwrap();
        assert!(
            src.code.starts_with(CUDA_PRELUDE),
            "{id}: the prelude comes first"
        );
        let mut cpp = String::from(EMU_HEADER);
        cpp.push_str(&src.code[CUDA_PRELUDE.len()..]);
        cpp.push_str(EMU_PARAMS);
        cpp.push_str("static std::map<std::string, std::function<void(const unsigned char*)>> umd_kernels = {\n");
        for e in &src.entry_points {
            cpp.push_str(&table_entry(e));
        }
        cpp.push_str("};\n");
        cpp.push_str(EMU_MAIN);
        let (cpp_path, exe) = (self.dir.join(format!("{id}.cpp")), self.dir.join(id));
        std::fs::write(&cpp_path, cpp).unwrap();
        let out = Command::new("g++")
            .args(["-std=c++20", "-O1", "-pthread", "-w", "-o"])
            .arg(&exe)
            .arg(&cpp_path)
            .output()
            .expect("g++ runs");
        assert!(
            out.status.success(),
            "{id}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.exes.insert(id.to_string(), exe.clone());
        exe
    }

    /// Runs `req`'s plan for CUDA through the emulated kernels; returns every output's bytes.
    fn run(&mut self, req: &PlanRequestExt, inputs: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut req = req.clone();
        req.target = umd_sdk::testing::cuda_target("sm_90");
        let plan = crate::plan::plan(&req).unwrap();
        let mut sizes: Vec<u64> = inputs.iter().map(|b| b.len() as u64).collect();
        for o in &plan.outputs {
            sizes.push(umd_sdk::shape::byte_size(&o.shape, o.dtype).unwrap());
        }
        if plan.workspace_bytes > 0 {
            sizes.push(plan.workspace_bytes);
        }
        let paths: Vec<PathBuf> = (0..sizes.len())
            .map(|i| self.dir.join(format!("b{i}.bin")))
            .collect();
        for (i, p) in paths.iter().enumerate() {
            std::fs::write(p, inputs.get(i).cloned().unwrap_or_default()).unwrap();
        }
        for l in &plan.launches {
            let exe = self.exe(&l.module_id);
            let mut spec = format!("{} {} {}\n", l.entry_point, l.grid.x, l.block.x);
            assert_eq!((l.grid.y, l.grid.z, l.block.y, l.block.z), (1, 1, 1, 1));
            spec.extend(l.params.iter().map(|b| format!("{b:02x}")));
            spec.push_str(&format!("\n{}\n", l.relocations.len()));
            for r in &l.relocations {
                spec.push_str(&format!("{} {}\n", r.offset, r.binding));
            }
            spec.push_str(&format!("{}\n", paths.len()));
            for (p, s) in paths.iter().zip(&sizes) {
                spec.push_str(&format!("{} {s}\n", p.display()));
            }
            let spec_path = self.dir.join("launch.txt");
            std::fs::write(&spec_path, spec).unwrap();
            let out = Command::new(&exe).arg(&spec_path).output().unwrap();
            assert!(
                out.status.success(),
                "{}: {}",
                l.entry_point,
                String::from_utf8_lossy(&out.stderr)
            );
            self.runs += 1;
        }
        paths[inputs.len()..inputs.len() + plan.outputs.len()]
            .iter()
            .map(|p| std::fs::read(p).unwrap())
            .collect()
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `req` on the emulated CUDA kernels and on the CPU kernels and compares the outputs.
fn check(emu: &mut Emulator, req: &PlanRequestExt, x: &[f64], what: &str) {
    let dt = req.input(0).unwrap().dtype;
    let mut inputs = vec![dtype::encode(dt, x).unwrap()];
    inputs.extend((1..req.slots()).filter_map(|i| req.value(i).map(<[u8]>::to_vec)));
    let (plan, cpu) = umd_sdk::testing::run::<Reduce>(req, &inputs).unwrap();
    let gpu = emu.run(req, &inputs);
    for (k, o) in plan.outputs.iter().enumerate() {
        let (g, c) = (
            dtype::decode_f64(o.dtype, &gpu[k]),
            dtype::decode_f64(o.dtype, &cpu[k]),
        );
        let t = match o.dtype {
            Dtype::F32 => 1e-5,
            Dtype::F16 => 2e-3,
            Dtype::Bf16 => 1e-2,
            Dtype::F64 => 1e-12,
            _ => 0.0,
        };
        assert_close(&g, &c, t, &format!("{what} output {k}"));
    }
}

/// Inputs of `n` values for `dt`: small integers (many ties), NaN at `nan_every` for floats.
fn inputs(dt: Dtype, n: usize, seed: u64, nan_every: Option<usize>) -> Vec<f64> {
    let float = umd_sdk::request::is_float(dt);
    let mut v = data(n, seed, 4.0, if float { 0.125 } else { 1.0 });
    match dt {
        Dtype::U8 | Dtype::U16 | Dtype::U32 | Dtype::U64 => v.iter_mut().for_each(|x| *x = x.abs()),
        Dtype::Boolean => v.iter_mut().for_each(|x| *x = (*x > 0.0) as u8 as f64),
        _ => {}
    }
    if let (true, Some(k)) = (float, nan_every) {
        v.iter_mut().step_by(k).for_each(|x| *x = f64::NAN);
    }
    v
}

#[test]
#[ignore]
fn cuda_kernels_emulated_on_cpu_match_the_cpu_kernels() {
    let mut emu = Emulator::new();
    // shape, axes: rows (contiguous, strided, two reduced groups), cols, empty set, noop-like
    let cases: &[(&[u64], &[i64])] = &[
        (&[6, 100], &[1]),
        (&[5, 64, 3], &[1]),
        (&[40, 3, 50], &[0, 2]),
        (&[1000, 4], &[1]),
        (&[2, 0, 4], &[1]),
        (&[3, 5], &[0, 1]),
        (&[3, 9000], &[1]),
        (&[50, 2, 200], &[0, 2]),
    ];
    for (op, red, _) in REDUCE_OPS {
        for &dt in red.dtypes() {
            for (ci, (shape, axes)) in cases.iter().enumerate() {
                let n = shape.iter().product::<u64>() as usize;
                let mut x = inputs(dt, n, ci as u64, None);
                if op == "ReduceLogSum" {
                    x.iter_mut().for_each(|v| *v = v.abs() + 0.5);
                }
                if op == "ReduceProd" && umd_sdk::request::is_float(dt) {
                    x.iter_mut().for_each(|v| *v = 1.0 + *v / 64.0);
                }
                let req = with_ints(builder(op, shape, dt), axes, false).build(target());
                check(
                    &mut emu,
                    &req,
                    &x,
                    &format!("{op} {} {shape:?} {axes:?}", dtype::name(dt)),
                );
            }
            if matches!(op, "ReduceMax" | "ReduceMin" | "ReduceLogSumExp")
                && umd_sdk::request::is_float(dt)
            {
                let x = inputs(dt, 600, 1, Some(37));
                let req = with_ints(builder(op, &[6, 100], dt), &[1], false).build(target());
                check(
                    &mut emu,
                    &req,
                    &x,
                    &format!("{op} {} with NaN", dtype::name(dt)),
                );
            }
        }
    }
    for (op, _) in ARG_OPS {
        for dt in ORDERED {
            for (shape, axis) in [
                (&[6u64, 100][..], 1i64),
                (&[300, 5], 1),
                (&[5, 64, 3], 1),
                (&[7], 0),
            ] {
                for last in [0, 1] {
                    let n = shape.iter().product::<u64>() as usize;
                    let req = builder(op, shape, dt)
                        .attr("axis", int(axis))
                        .attr("select_last_index", int(last))
                        .build(target());
                    check(
                        &mut emu,
                        &req,
                        &inputs(dt, n, 3, Some(41)),
                        &format!("{op} {} {shape:?} last {last}", dtype::name(dt)),
                    );
                }
            }
        }
    }
    for dt in NUMERIC {
        for (shape, axis) in [(&[3u64, 4, 5][..], 1i64), (&[2, 600], 1), (&[600, 3], 0)] {
            for (ex, rev) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                let n = shape.iter().product::<u64>() as usize;
                let req = with_ints(builder("CumSum", shape, dt), &[axis], true)
                    .attr("exclusive", int(ex))
                    .attr("reverse", int(rev))
                    .build(target());
                check(
                    &mut emu,
                    &req,
                    &inputs(dt, n, 4, None),
                    &format!("CumSum {} {shape:?} ex {ex} rev {rev}", dtype::name(dt)),
                );
            }
        }
    }
    for dt in ORDERED {
        for (shape, axis, k) in [
            (&[3u64, 300][..], 1i64, 5i64),
            (&[3, 300], 1, 300),
            (&[4, 7, 3], 1, 3),
            (&[5], 0, 0),
        ] {
            for largest in [0, 1] {
                let n = shape.iter().product::<u64>() as usize;
                let req = with_ints(builder("TopK", shape, dt), &[k], false)
                    .attr("axis", int(axis))
                    .attr("largest", int(largest))
                    .build(target());
                check(
                    &mut emu,
                    &req,
                    &inputs(dt, n, 5, Some(29)),
                    &format!("TopK {} {shape:?} k {k} largest {largest}", dtype::name(dt)),
                );
            }
        }
    }
    eprintln!(
        "{} emulated launches over {} modules",
        emu.runs,
        emu.exes.len()
    );
    assert!(Path::new(&emu.dir).exists());
}
