//! (ABI 1.5) String tensors: `n` little-endian u64 *end* offsets, then the UTF-8 text (element
//! `i` is `text[end(i-1) .. end(i)]`). A string tensor's size is `8 x n + text_bytes`: a plan
//! states `text_bytes` on each string output ([`crate::TensorDesc::text_bytes`]); the host gives
//! every string input's value at plan time, so a plan can compute it.
//!
//! ```
//! let bytes = umd_sdk::strings::encode(&["a", "bc"]);
//! assert_eq!(bytes.len(), 8 * 2 + 3);
//! assert_eq!(umd_sdk::strings::decode(&bytes, 2).unwrap(), vec!["a", "bc"]);
//! ```

use crate::OpError;

/// The layout of `items`.
pub fn encode<S: AsRef<str>>(items: &[S]) -> Vec<u8> {
    let text: usize = items.iter().map(|s| s.as_ref().len()).sum();
    let mut out = Vec::with_capacity(8 * items.len() + text);
    let mut end = 0u64;
    for s in items {
        end += s.as_ref().len() as u64;
        out.extend_from_slice(&end.to_le_bytes());
    }
    for s in items {
        out.extend_from_slice(s.as_ref().as_bytes());
    }
    out
}

/// The bytes of text of `items` (a plan's `text_bytes` for them).
pub fn text_bytes<S: AsRef<str>>(items: &[S]) -> u64 {
    items.iter().map(|s| s.as_ref().len() as u64).sum()
}

/// The `n` strings stored in `bytes`; `invalid-shape` naming the problem for a malformed table
/// or text that is not UTF-8.
pub fn decode(bytes: &[u8], n: usize) -> Result<Vec<&str>, OpError> {
    let bad = |m: String| OpError::InvalidShape(format!("malformed string tensor: {m}"));
    let table = n
        .checked_mul(8)
        .filter(|&t| t <= bytes.len())
        .ok_or_else(|| bad(format!("{} bytes cannot hold {n} offsets", bytes.len())))?;
    let (offsets, text) = bytes.split_at(table);
    let mut out = Vec::with_capacity(n);
    let mut start = 0usize;
    for (i, o) in offsets.chunks_exact(8).enumerate() {
        let end = u64::from_le_bytes(o.try_into().expect("8 bytes"));
        let end = usize::try_from(end)
            .ok()
            .filter(|&e| e >= start && e <= text.len())
            .ok_or_else(|| bad(format!("string {i} ends at {end}, outside {start}..")))?;
        let s = std::str::from_utf8(&text[start..end])
            .map_err(|e| bad(format!("string {i} is not UTF-8: {e}")))?;
        out.push(s);
        start = end;
    }
    if start != text.len() {
        return Err(bad(format!(
            "the strings end at {start} of {} bytes",
            text.len()
        )));
    }
    Ok(out)
}
