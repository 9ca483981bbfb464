//! NumPy `.npy` files (format 1.0): write a tensor for a person or a script to load with
//! `numpy.load`, and read one back. bf16 has no NumPy type: it is written as f32 (exact); the
//! 8-bit floats are written as their byte codes (u8); the packed types (ABI 1.4) unpacked, one
//! value per element (INT4/INT2 as i8, UINT4/UINT2 as u8, FLOAT4E2M1 as f32).
//! Owns only the file format; knows nothing of devices or plugins.

use std::io::Write;
use std::path::Path;

use crate::tensor::{Dtype, TensorDesc};

const MAGIC: &[u8] = b"\x93NUMPY";
/// Largest header accepted when reading.
const MAX_HEADER: usize = 64 * 1024;

fn descr(dt: Dtype) -> &'static str {
    match dt {
        Dtype::F32 | Dtype::Bf16 => "<f4",
        Dtype::F16 => "<f2",
        Dtype::F64 => "<f8",
        Dtype::I32 => "<i4",
        Dtype::I64 => "<i8",
        Dtype::I8 => "|i1",
        Dtype::U8 => "|u1",
        Dtype::Bool => "|b1",
        Dtype::I16 => "<i2",
        Dtype::U16 => "<u2",
        Dtype::U32 => "<u4",
        Dtype::U64 => "<u8",
        // NumPy has no 8-bit floats: their codes are written as bytes.
        Dtype::F8e4m3fn | Dtype::F8e4m3fnuz | Dtype::F8e5m2 | Dtype::F8e5m2fnuz | Dtype::F8e8m0 => {
            "|u1"
        }
        // Nor packed types: written unpacked, one value per byte (see `write`).
        Dtype::I4 | Dtype::I2 => "|i1",
        Dtype::U4 | Dtype::U2 => "|u1",
        Dtype::F4e2m1 => "<f4",
        // Strings are fixed-width UTF-32 (`<U{width}`), see `write`.
        Dtype::Str => "<U",
    }
}

/// A string tensor as NumPy's `<U{width}`: each element its code points as little-endian u32,
/// zero-padded to the longest (NumPy strips trailing NULs). Text that is not UTF-8 is written
/// with U+FFFD in place of bad bytes.
fn utf32(desc: &TensorDesc, data: &[u8]) -> std::io::Result<(usize, Vec<u8>)> {
    let n = desc.numel().unwrap_or(0) as usize;
    let items = crate::text::decode(data, n).map_err(std::io::Error::other)?;
    let chars: Vec<Vec<char>> = items
        .iter()
        .map(|s| String::from_utf8_lossy(s).chars().collect())
        .collect();
    let width = chars.iter().map(Vec::len).max().unwrap_or(0).max(1);
    let bytes = n
        .checked_mul(4 * width)
        .filter(|&b| b <= 1 << 32)
        .ok_or_else(|| std::io::Error::other(format!("{n} strings of <U{width} exceed 4 GiB")))?;
    let mut out = Vec::with_capacity(bytes);
    for c in &chars {
        out.extend(c.iter().flat_map(|&ch| (ch as u32).to_le_bytes()));
        out.resize(out.len() + 4 * (width - c.len()), 0);
    }
    Ok((width, out))
}

/// Writes `data` (little-endian elements of `desc`) as an `.npy` file.
pub fn write(path: &Path, desc: &TensorDesc, data: &[u8]) -> std::io::Result<()> {
    let shape = match desc.shape.len() {
        0 => "()".to_string(),
        1 => format!("({},)", desc.shape[0]),
        _ => format!(
            "({})",
            desc.shape
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let strings = if desc.dtype.is_string() {
        Some(utf32(desc, data)?)
    } else {
        None
    };
    let descr = match &strings {
        Some((width, _)) => format!("<U{width}"),
        None => descr(desc.dtype).to_string(),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let unpadded = MAGIC.len() + 2 + 2 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    f.write_all(MAGIC)?;
    f.write_all(&[1, 0])?;
    f.write_all(&(header.len() as u16).to_le_bytes())?;
    f.write_all(header.as_bytes())?;
    if let Some((_, utf32)) = &strings {
        f.write_all(utf32)?;
    } else if desc.dtype == Dtype::Bf16 {
        for c in data.chunks_exact(2) {
            let bits = (u16::from_le_bytes([c[0], c[1]]) as u32) << 16;
            f.write_all(&f32::from_bits(bits).to_le_bytes())?;
        }
    } else if desc.dtype.is_packed() {
        let n = desc.numel().unwrap_or(0) as usize;
        for v in crate::data::decode(desc.dtype, data).into_iter().take(n) {
            match desc.dtype {
                Dtype::F4e2m1 => f.write_all(&(v as f32).to_le_bytes())?,
                _ => f.write_all(&[v as i8 as u8])?,
            }
        }
    } else {
        f.write_all(data)?;
    }
    f.flush()
}

/// Reads an `.npy` file (C order, little-endian, a umd dtype) as a description named `name`
/// and its bytes.
pub fn read(path: &Path, name: &str) -> Result<(TensorDesc, Vec<u8>), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&bytes, name).map_err(|e| format!("{}: {e}", path.display()))
}

fn parse(bytes: &[u8], name: &str) -> Result<(TensorDesc, Vec<u8>), String> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err("not a .npy file".into());
    }
    let (len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(format!("unsupported .npy version {v}")),
    };
    if len > MAX_HEADER || start + len > bytes.len() {
        return Err("truncated or oversized header".into());
    }
    let header = std::str::from_utf8(&bytes[start..start + len]).map_err(|e| e.to_string())?;
    let d = field(header, "descr").ok_or("no descr")?;
    let d = d
        .strip_prefix('\'')
        .and_then(|r| r.split('\'').next())
        .ok_or("bad descr")?;
    let dtype = match d {
        "<f4" => Dtype::F32,
        "<f2" => Dtype::F16,
        "<f8" => Dtype::F64,
        "<i4" => Dtype::I32,
        "<i8" => Dtype::I64,
        "|i1" | "<i1" => Dtype::I8,
        "|u1" | "<u1" => Dtype::U8,
        "|b1" => Dtype::Bool,
        "<i2" => Dtype::I16,
        "<u2" => Dtype::U16,
        "<u4" => Dtype::U32,
        "<u8" => Dtype::U64,
        other => match other.strip_prefix("<U").map(str::parse::<usize>) {
            Some(Ok(width)) if (1..=1 << 16).contains(&width) => {
                return parse_strings(header, &bytes[start + len..], name, width);
            }
            _ => return Err(format!("dtype `{other}` is not one umd has")),
        },
    };
    let shape = parse_shape(header)?;
    let desc = TensorDesc::new(name, shape, dtype);
    desc.validate().map_err(|e| e.to_string())?;
    let data = &bytes[start + len..];
    let need = desc.byte_size().ok_or("size overflows")? as usize;
    if data.len() != need {
        return Err(format!("{} data bytes, {desc} needs {need}", data.len()));
    }
    Ok((desc, data.to_vec()))
}

/// A header's value of `key` (the text after its colon).
fn field<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let at = header.find(&format!("'{key}'"))? + key.len() + 2;
    Some(header[at..].trim_start().strip_prefix(':')?.trim_start())
}

/// A `<U{width}` array as a umd string tensor (trailing NULs stripped, as NumPy does).
fn parse_strings(
    header: &str,
    data: &[u8],
    name: &str,
    width: usize,
) -> Result<(TensorDesc, Vec<u8>), String> {
    let shape = parse_shape(header)?;
    let desc = TensorDesc::new(name, shape, Dtype::Str);
    desc.validate().map_err(|e| e.to_string())?;
    let n = desc.numel().unwrap_or(0) as usize;
    let need = n.checked_mul(4 * width);
    if Some(data.len()) != need {
        return Err(format!(
            "{} data bytes; {n} strings of <U{width} need {}",
            data.len(),
            need.map_or_else(|| "more than fits in memory".into(), |b| b.to_string())
        ));
    }
    let mut items = Vec::with_capacity(n);
    for (i, cell) in data.chunks_exact(4 * width).take(n).enumerate() {
        let mut s = String::new();
        for c in cell.chunks_exact(4) {
            let code = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            s.push(
                char::from_u32(code)
                    .ok_or_else(|| format!("string {i}: U+{code:X} is not a character"))?,
            );
        }
        items.push(s.trim_end_matches('\0').to_string());
    }
    let bytes = crate::text::encode(&items);
    let desc = desc.with_size(bytes.len() as u64).ok_or("size overflows")?;
    Ok((desc, bytes))
}

fn parse_shape(header: &str) -> Result<Vec<u64>, String> {
    if field(header, "fortran_order").is_some_and(|v| v.starts_with("True")) {
        return Err("Fortran-order arrays are not supported".into());
    }
    let s = field(header, "shape").ok_or("no shape")?;
    let s = s
        .strip_prefix('(')
        .and_then(|r| r.split(')').next())
        .ok_or("bad shape")?;
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| x.parse::<u64>().map_err(|_| format!("bad dimension `{x}`")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_garbage() {
        let dir = std::env::temp_dir().join(format!("umd-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (shape, dt) in [
            (vec![2, 3], Dtype::F32),
            (vec![], Dtype::I64),
            (vec![0, 4], Dtype::U8),
        ] {
            let desc = TensorDesc::new("x", shape, dt);
            let data: Vec<u8> = (0..desc.byte_size().unwrap()).map(|i| i as u8).collect();
            let p = dir.join("x.npy");
            write(&p, &desc, &data).unwrap();
            let raw = std::fs::read(&p).unwrap();
            assert_eq!(
                (raw.len() - data.len()) % 64,
                0,
                "header is 64-byte aligned"
            );
            let (d2, data2) = read(&p, "x").unwrap();
            assert_eq!((d2, data2), (desc, data));
        }
        // Strings: `<U{longest}` both ways.
        let items = ["", "héllo", "日本"];
        let bytes = crate::text::encode(&items);
        let desc = TensorDesc::new("s", vec![3], Dtype::Str)
            .with_size(bytes.len() as u64)
            .unwrap();
        let p = dir.join("s.npy");
        write(&p, &desc, &bytes).unwrap();
        let raw = std::fs::read(&p).unwrap();
        assert!(String::from_utf8_lossy(&raw).contains("'descr': '<U5'"));
        assert_eq!(read(&p, "s").unwrap(), (desc, bytes));
        assert!(parse(b"\x93NUMPY\x01\x00\xff\xff", "x").is_err());
        assert!(parse(b"PK\x03\x04", "x").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
