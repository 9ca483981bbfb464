//! The byte layout of string tensors (ABI 1.5, `dtype3.string`): `n` little-endian u64 *end*
//! offsets, then the text; element `i` is `text[end(i-1) .. end(i)]`. Owns encoding and the
//! structural check; knows nothing of ops, plugins or devices.

/// The layout of `items`.
pub fn encode<S: AsRef<[u8]>>(items: &[S]) -> Vec<u8> {
    let text: usize = items.iter().map(|s| s.as_ref().len()).sum();
    let mut out = Vec::with_capacity(8 * items.len() + text);
    let mut end = 0u64;
    for s in items {
        end += s.as_ref().len() as u64;
        out.extend_from_slice(&end.to_le_bytes());
    }
    for s in items {
        out.extend_from_slice(s.as_ref());
    }
    out
}

/// The `n` elements of a string tensor stored in `bytes`, checked: offsets in order and within
/// the text, the last one at its end. (UTF-8 is the plugins' to check.)
pub fn decode(bytes: &[u8], n: usize) -> Result<Vec<&[u8]>, String> {
    let table = n
        .checked_mul(8)
        .filter(|&t| t <= bytes.len())
        .ok_or_else(|| {
            format!(
                "{} bytes cannot hold the offsets of {n} strings",
                bytes.len()
            )
        })?;
    let (offsets, text) = bytes.split_at(table);
    let mut out = Vec::with_capacity(n);
    let mut start = 0usize;
    for (i, o) in offsets.chunks_exact(8).enumerate() {
        let end = u64::from_le_bytes(o.try_into().expect("8 bytes"));
        let end = usize::try_from(end)
            .ok()
            .filter(|&e| e >= start && e <= text.len())
            .ok_or_else(|| format!("string {i} ends at {end}, outside {start}..={}", text.len()))?;
        out.push(&text[start..end]);
        start = end;
    }
    if start != text.len() {
        return Err(format!(
            "the strings end at byte {start} of {} bytes of text",
            text.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_bad_tables() {
        let items = ["", "héllo", "a b"];
        let bytes = encode(&items);
        assert_eq!(bytes.len(), 8 * 3 + 9);
        let back: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
        assert_eq!(decode(&bytes, 3).unwrap(), back);
        assert!(decode(&bytes, 4).is_err(), "too few bytes for the offsets");
        let mut bad = bytes.clone();
        bad[8] = 0xff; // second end offset far past the text
        assert!(decode(&bad, 3).unwrap_err().contains("string 1"));
        let mut short = bytes;
        short.push(b'x'); // text longer than the last offset says
        assert!(decode(&short, 3).unwrap_err().contains("end at byte"));
    }
}
