//! The call record a launch's parameter block carries: which op, its input slots (dtype, shape,
//! text bytes), the outputs the plan sized, and its attributes — everything the CPU kernel needs
//! to compute again what the plan computed. A small length-prefixed binary codec; every read is
//! bounds-checked (the bytes come back through the host, but a kernel trusts nothing).

use umd_sdk::{Dtype, OpError, dtype};

use crate::ops::Attr;
#[cfg(test)]
use crate::ops::{Tensor, Value};
use crate::value;

/// One tensor slot: dtype, shape and (strings) text bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Slot {
    pub dtype: Dtype,
    pub shape: Vec<u64>,
    pub text_bytes: u64,
}

/// What the kernel needs: the op (index into [`crate::ops::OPS`]), input slots (`None`:
/// absent), the outputs as planned and the attributes.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub op: u8,
    pub inputs: Vec<Option<Slot>>,
    pub outputs: Vec<Slot>,
    pub attrs: Vec<(String, Attr)>,
}

#[derive(Default)]
struct W(Vec<u8>);

impl W {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn slot(&mut self, s: &Slot) {
        self.u8(dtype::to_onnx(s.dtype) as u8);
        self.u8(s.shape.len() as u8);
        s.shape.iter().for_each(|&d| self.u64(d));
        self.u64(s.text_bytes);
    }
}

struct R<'a>(&'a [u8]);

fn bad(what: &str) -> OpError {
    OpError::internal(format!("text kernel: malformed call record ({what})"))
}

impl<'a> R<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], OpError> {
        if n > self.0.len() {
            return Err(bad(what));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self, what: &str) -> Result<u8, OpError> {
        Ok(self.take(1, what)?[0])
    }
    fn u64(&mut self, what: &str) -> Result<u64, OpError> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8"),
        ))
    }
    fn bytes(&mut self, what: &str) -> Result<&'a [u8], OpError> {
        let n = usize::try_from(self.u64(what)?).map_err(|_| bad(what))?;
        self.take(n, what)
    }
    fn text(&mut self, what: &str) -> Result<String, OpError> {
        String::from_utf8(self.bytes(what)?.to_vec()).map_err(|_| bad(what))
    }
    fn count(&mut self, what: &str) -> Result<usize, OpError> {
        // every item takes at least one byte: a count beyond what is left is malformed
        usize::try_from(self.u64(what)?)
            .ok()
            .filter(|&n| n <= self.0.len())
            .ok_or_else(|| bad(what))
    }
    fn slot(&mut self) -> Result<Slot, OpError> {
        let dtype = dtype::from_onnx(self.u8("dtype")? as i64).ok_or_else(|| bad("dtype"))?;
        let rank = self.u8("rank")? as usize;
        let shape = (0..rank)
            .map(|_| self.u64("dims"))
            .collect::<Result<_, _>>()?;
        Ok(Slot {
            dtype,
            shape,
            text_bytes: self.u64("text bytes")?,
        })
    }
}

fn put_attr(w: &mut W, a: &Attr) {
    match a {
        Attr::Int(v) => {
            w.u8(0);
            w.u64(*v as u64);
        }
        Attr::Float(v) => {
            w.u8(1);
            w.u64(v.to_bits());
        }
        Attr::Text(s) => {
            w.u8(2);
            w.bytes(s.as_bytes());
        }
        Attr::Ints(v) => {
            w.u8(3);
            w.u64(v.len() as u64);
            v.iter().for_each(|&x| w.u64(x as u64));
        }
        Attr::Floats(v) => {
            w.u8(4);
            w.u64(v.len() as u64);
            v.iter().for_each(|&x| w.u64(x.to_bits()));
        }
        Attr::Texts(v) => {
            w.u8(5);
            w.u64(v.len() as u64);
            v.iter().for_each(|s| w.bytes(s.as_bytes()));
        }
        Attr::Tensor(t) => {
            w.u8(6);
            let (dt, text_bytes, data) = value::to_bytes(t);
            w.slot(&Slot {
                dtype: dt,
                shape: t.shape().to_vec(),
                text_bytes,
            });
            w.bytes(&data);
        }
    }
}

fn get_attr(r: &mut R<'_>) -> Result<Attr, OpError> {
    Ok(match r.u8("attribute tag")? {
        0 => Attr::Int(r.u64("int")? as i64),
        1 => Attr::Float(f64::from_bits(r.u64("float")?)),
        2 => Attr::Text(r.text("text")?),
        3 => {
            let n = r.count("ints")?;
            Attr::Ints(
                (0..n)
                    .map(|_| r.u64("ints").map(|v| v as i64))
                    .collect::<Result<_, _>>()?,
            )
        }
        4 => {
            let n = r.count("floats")?;
            Attr::Floats(
                (0..n)
                    .map(|_| r.u64("floats").map(f64::from_bits))
                    .collect::<Result<_, _>>()?,
            )
        }
        5 => {
            let n = r.count("texts")?;
            Attr::Texts((0..n).map(|_| r.text("texts")).collect::<Result<_, _>>()?)
        }
        6 => {
            let s = r.slot()?;
            let data = r.bytes("tensor data")?;
            Attr::Tensor(value::from_bytes(s.dtype, &s.shape, data)?)
        }
        _ => return Err(bad("attribute tag")),
    })
}

/// The record's bytes.
pub fn encode(c: &Call) -> Vec<u8> {
    let mut w = W::default();
    w.u8(c.op);
    w.u64(c.inputs.len() as u64);
    for s in &c.inputs {
        match s {
            None => w.u8(0),
            Some(s) => {
                w.u8(1);
                w.slot(s);
            }
        }
    }
    w.u64(c.outputs.len() as u64);
    c.outputs.iter().for_each(|s| w.slot(s));
    w.u64(c.attrs.len() as u64);
    for (name, a) in &c.attrs {
        w.bytes(name.as_bytes());
        put_attr(&mut w, a);
    }
    w.0
}

/// A record from its bytes.
pub fn decode(bytes: &[u8]) -> Result<Call, OpError> {
    let mut r = R(bytes);
    let op = r.u8("op")?;
    let n = r.count("inputs")?;
    let inputs = (0..n)
        .map(|_| match r.u8("slot flag")? {
            0 => Ok(None),
            _ => r.slot().map(Some),
        })
        .collect::<Result<_, _>>()?;
    let n = r.count("outputs")?;
    let outputs = (0..n).map(|_| r.slot()).collect::<Result<_, _>>()?;
    let n = r.count("attributes")?;
    let attrs = (0..n)
        .map(|_| Ok((r.text("attribute name")?, get_attr(&mut r)?)))
        .collect::<Result<_, OpError>>()?;
    if !r.0.is_empty() {
        return Err(bad("trailing bytes"));
    }
    Ok(Call {
        op,
        inputs,
        outputs,
        attrs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_truncation() {
        let call = Call {
            op: 5,
            inputs: vec![
                None,
                Some(Slot {
                    dtype: Dtype::String,
                    shape: vec![2, 3],
                    text_bytes: 11,
                }),
            ],
            outputs: vec![Slot {
                dtype: Dtype::I64,
                shape: vec![2, 3],
                text_bytes: 0,
            }],
            attrs: vec![
                ("a".into(), Attr::Int(-3)),
                ("b".into(), Attr::Floats(vec![0.5, -1.0])),
                ("c".into(), Attr::Texts(vec!["x".into(), "".into()])),
                (
                    "d".into(),
                    Attr::Tensor(Value::Str(Tensor::new(
                        vec![2],
                        vec!["k".into(), "é".into()],
                    ))),
                ),
                (
                    "e".into(),
                    Attr::Tensor(Value::I16(Tensor::new(vec![1], vec![-7]))),
                ),
            ],
        };
        let bytes = encode(&call);
        assert_eq!(decode(&bytes).unwrap(), call);
        for cut in [0, 1, 9, bytes.len() / 2, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(decode(&long).is_err());
    }
}
