//! Native tests: every op against naive references written here (or hand-computed values),
//! through `umd_sdk::testing::run` (plan + CPU kernels), plus the CUDA-source check.

mod before;
mod cast;
mod consts;
mod cuda;
mod inplace;
mod layout;
mod onnx;
mod window;

use umd_sdk::{
    AttrValueExt, AttributeExt, Dtype, InputSlot, OpError, OpPlan, PlanRequestExt, Target,
    TensorDesc, dtype,
};

use crate::Shape;
use crate::common::ALL_DTYPES;

/// A request under construction with the bytes of every present input.
pub struct Case {
    req: PlanRequestExt,
    data: Vec<Vec<u8>>,
}

pub fn case(op: &str) -> Case {
    Case {
        req: PlanRequestExt::builder(op).build(Target::cpu()),
        data: Vec::new(),
    }
}

impl Case {
    fn slot(mut self, desc: TensorDesc, bytes: Vec<u8>, constant: bool) -> Self {
        self.req.inputs.push(Some(InputSlot {
            desc,
            value: constant.then(|| bytes.clone()),
        }));
        self.data.push(bytes);
        self
    }
    /// A data input of `shape` and `dt` holding `values`.
    pub fn input(self, shape: &[u64], dt: Dtype, values: &[f64]) -> Self {
        let bytes = dtype::encode(dt, values).unwrap();
        self.slot(TensorDesc::new("x", shape.to_vec(), dt), bytes, false)
    }
    /// A data input holding raw little-endian `bytes`.
    pub fn input_bytes(self, shape: &[u64], dt: Dtype, bytes: Vec<u8>) -> Self {
        self.slot(TensorDesc::new("x", shape.to_vec(), dt), bytes, false)
    }
    /// A 1-D i64 constant input.
    pub fn ints(self, v: &[i64]) -> Self {
        self.ints_shaped(&[v.len() as u64], v)
    }
    /// An i64 constant input of any shape (a scalar with `&[]`).
    pub fn ints_shaped(self, shape: &[u64], v: &[i64]) -> Self {
        self.slot(
            TensorDesc::new("c", shape.to_vec(), Dtype::I64),
            i64_bytes(v),
            true,
        )
    }
    /// A constant input of any dtype.
    pub fn constant(self, shape: &[u64], dt: Dtype, values: &[f64]) -> Self {
        let bytes = dtype::encode(dt, values).unwrap();
        self.slot(TensorDesc::new("c", shape.to_vec(), dt), bytes, true)
    }
    pub fn absent(mut self) -> Self {
        self.req.inputs.push(None);
        self
    }
    pub fn attr(mut self, name: &str, value: AttrValueExt) -> Self {
        self.req.attributes.push(AttributeExt {
            name: name.into(),
            value,
        });
        self
    }
    pub fn int(self, name: &str, v: i64) -> Self {
        self.attr(name, AttrValueExt::Int(v))
    }
    pub fn int_list(self, name: &str, v: &[i64]) -> Self {
        self.attr(name, AttrValueExt::Ints(v.to_vec()))
    }
    pub fn opset(mut self, v: u32) -> Self {
        self.req.opset = v;
        self
    }
    pub fn wanted(mut self, n: usize) -> Self {
        self.req.outputs_wanted = vec![true; n];
        self
    }
    pub fn request(&self) -> PlanRequestExt {
        self.req.clone()
    }
    /// Plans and runs on the CPU kernels; the plan and every output's bytes.
    pub fn run(&self) -> (OpPlan, Vec<Vec<u8>>) {
        umd_sdk::testing::run::<Shape>(&self.req, &self.data)
            .unwrap_or_else(|e| panic!("{} failed: {e:?}", self.req.op))
    }
    /// The single output, decoded as f64s, with its shape.
    pub fn out(&self) -> (Vec<u64>, Vec<f64>) {
        let (plan, outs) = self.run();
        let o = &plan.outputs[0];
        assert_eq!(
            outs[0].len() as u64,
            umd_sdk::shape::byte_size(&o.shape, o.dtype).unwrap()
        );
        let mut values = dtype::decode_f64(o.dtype, &outs[0]);
        // A packed tensor's last byte may hold unused codes.
        values.truncate(umd_sdk::shape::numel(&o.shape).unwrap() as usize);
        (o.shape.clone(), values)
    }
    pub fn err(&self) -> OpError {
        match umd_sdk::testing::run::<Shape>(&self.req, &self.data) {
            Ok(_) => panic!("{} should have failed", self.req.op),
            Err(e) => e,
        }
    }
}

pub fn i64_bytes(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Test data for `dt`: small integers (0/1 for bool, powers of two for E8M0; the other 8-bit
/// floats round them to representable values). `n` test values of `dt` (exactly representable: the 8-bit floats are rounded).
pub fn values(n: usize, dt: Dtype) -> Vec<f64> {
    let v: Vec<f64> = (0..n)
        .map(|i| match dt {
            Dtype::Boolean => ((i * 7 + 3) % 5 % 2) as f64,
            Dtype::U8 | Dtype::U16 | Dtype::U32 | Dtype::U64 => ((i * 37 + 11) % 101) as f64,
            Dtype::F8e8m0 => 2f64.powi((i * 7 % 13) as i32 - 6),
            _ => ((i * 37 + 11) % 101) as f64 - 50.0,
        })
        .collect();
    dtype::decode_f64(dt, &dtype::encode(dt, &v).unwrap())
}

pub fn numel(shape: &[u64]) -> usize {
    shape.iter().product::<u64>() as usize
}

/// Row-major multi-index of `flat` in `shape`.
pub fn unravel(mut flat: usize, shape: &[u64]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = flat % shape[d] as usize;
        flat /= shape[d] as usize;
    }
    idx
}

/// Row-major flat index of `idx` in `shape`.
pub fn ravel(idx: &[usize], shape: &[u64]) -> usize {
    idx.iter()
        .zip(shape)
        .fold(0, |acc, (&i, &d)| acc * d as usize + i)
}

/// The output of shape `out` whose element at each index is `input[f(index)]`.
pub fn gather_ref(out: &[u64], input: &[f64], f: impl Fn(&[usize]) -> usize) -> Vec<f64> {
    (0..numel(out))
        .map(|i| input[f(&unravel(i, out))])
        .collect()
}

pub fn is_shape_err(e: &OpError) -> bool {
    matches!(e, OpError::InvalidShape(_))
}

pub fn is_attr_err(e: &OpError) -> bool {
    matches!(e, OpError::InvalidAttribute(_))
}

#[test]
fn describe_and_signatures() {
    use umd_sdk::Plugin;
    let info = Shape::describe();
    assert_eq!(info.name, "shape");
    assert_eq!(info.ops.len(), 20);
    assert!(info.ops.iter().all(|o| o.targets == ["cpu", "cuda"]));
    let sigs = Shape::signatures();
    let slice = sigs.iter().find(|s| s.name == "Slice").unwrap();
    assert_eq!(slice.constant_inputs, vec![1, 2, 3, 4]);
    assert!(sigs.iter().all(|s| s.name != "Transpose"));
    assert!(matches!(
        Shape::plan_ext(&case("Conv").request()).unwrap_err(),
        OpError::UnsupportedOp(_)
    ));
    assert_eq!(
        Shape::tolerance("Transpose", Dtype::F32).unwrap().absolute,
        0.0
    );
    assert!(Shape::tolerance("Cast", Dtype::F16).is_none());
}

#[test]
fn self_tests_pass_on_the_cpu_kernels() {
    use umd_sdk::Plugin;
    for tc in Shape::self_tests() {
        let req = PlanRequestExt::from_legacy(&umd_sdk::PlanRequest {
            op: tc.op.clone(),
            inputs: tc.inputs.clone(),
            attributes: tc.attributes.clone(),
            target: Target::cpu(),
        });
        let (_, outs) = umd_sdk::testing::run::<Shape>(&req, &tc.input_data).unwrap();
        assert_eq!(outs, tc.expected, "{}", tc.name);
    }
}

#[test]
fn every_dtype_moves_through_identity() {
    for dt in ALL_DTYPES {
        for shape in [&[][..], &[0], &[3, 5], &[2, 1, 7]] {
            let v = values(numel(shape), dt);
            let (s, got) = case("Identity").input(shape, dt, &v).out();
            assert_eq!((s.as_slice(), &got), (shape, &v), "{dt:?} {shape:?}");
        }
    }
}
