//! How `umd run-model` writes and shows an output that is not a plain tensor: a sequence as
//! `DIR/<name>/<i>.npy`, a map or a sequence of maps (a classifier's ZipMap) as
//! `DIR/<name>.json` (a list of objects; int keys as JSON strings, non-finite numbers as
//! `null`), an optional without a value as nothing. Knows nothing of how the model ran.

use std::path::Path;

use anyhow::Context;

use umd::check::{json_number, json_string as json_str};
use umd::graph::{MapValue, Tensor, Value};
use umd::{Dtype, data};

/// Writes output `name` (already a safe file name) of value `v` into `dir`.
pub fn write(dir: &Path, name: &str, v: &Value) -> anyhow::Result<()> {
    let npy = |file: &Path, t: &Tensor| {
        umd::npy::write(file, &t.desc, &t.data)
            .with_context(|| format!("writing {}", file.display()))
    };
    match v {
        Value::Tensor(t) => npy(&dir.join(format!("{name}.npy")), t),
        Value::Sequence(items) => {
            let sub = dir.join(name);
            std::fs::create_dir_all(&sub).with_context(|| format!("creating {}", sub.display()))?;
            for (i, t) in items.iter().enumerate() {
                npy(&sub.join(format!("{i}.npy")), t)?;
            }
            Ok(())
        }
        Value::Map(m) => json_file(dir, name, &map_json(m)),
        Value::Maps(maps) => {
            let items: Vec<String> = maps.iter().map(|m| map_json(m)).collect();
            json_file(dir, name, &format!("[{}]", items.join(",\n")))
        }
        Value::None => Ok(()),
    }
}

/// One line about `v` (its dtype and shape, its length, or its first map).
pub fn describe(v: &Value) -> String {
    match v {
        Value::Tensor(t) => t.desc.to_string(),
        Value::Sequence(items) => format!("a sequence of {} tensors", items.len()),
        Value::Map(m) => format!("a map of {} entries: {}", m.len(), map_json(m)),
        Value::Maps(maps) => match maps.first() {
            Some(m) => format!("{} maps, the first {}", maps.len(), map_json(m)),
            None => "no maps".into(),
        },
        Value::None => "an optional without a value".into(),
    }
}

fn json_file(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))
}

/// A map as a JSON object (keys in order).
fn map_json(m: &MapValue) -> String {
    let keys = scalars(m.keys());
    let values = scalars(m.values());
    let entries: Vec<String> = keys
        .iter()
        .zip(&values)
        .map(|(k, v)| {
            let k = if k.starts_with('"') {
                k.clone()
            } else {
                json_str(k)
            };
            format!("{k}: {v}")
        })
        .collect();
    format!("{{{}}}", entries.join(", "))
}

/// A 1-D tensor's elements as JSON values.
fn scalars(t: &Tensor) -> Vec<String> {
    if t.desc.dtype == Dtype::Str {
        let n = t.desc.numel().unwrap_or(0) as usize;
        return umd::text::decode(&t.data, n)
            .map(|items| {
                items
                    .iter()
                    .map(|b| json_str(&String::from_utf8_lossy(b)))
                    .collect()
            })
            .unwrap_or_default();
    }
    if t.desc.dtype == Dtype::I64 {
        return t
            .data
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")).to_string())
            .collect();
    }
    data::decode(t.desc.dtype, &t.data)
        .iter()
        .map(|&x| json_number(x))
        .collect()
}
