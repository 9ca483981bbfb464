//! Seals on the command buffers this server produced: HMAC-SHA256 (RFC 2104) over the encoded
//! bytes under a key drawn once per process. `Execute` runs a client-supplied command buffer only
//! with a valid seal (unless the operator allows raw buffers): a raw buffer's launch parameters
//! are client-written bytes, which on a GPU can carry any device address.

use std::sync::OnceLock;

use rand::Rng;
use sha2::{Digest, Sha256};

const BLOCK: usize = 64;

/// The per-process key.
fn key() -> &'static [u8; 32] {
    static KEY: OnceLock<[u8; 32]> = OnceLock::new();
    KEY.get_or_init(|| rand::rng().random())
}

/// HMAC-SHA256 with a key of at most one block.
fn hmac(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut padded = [0u8; BLOCK];
    padded[..key.len()].copy_from_slice(key);
    let pad = |byte: u8| padded.map(|k| k ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// The seal of `command_buffer` under this process's key.
pub fn seal(command_buffer: &[u8]) -> Vec<u8> {
    hmac(key().as_slice(), command_buffer).to_vec()
}

/// Whether `tag` is this process's seal of `command_buffer` (compared in constant time).
pub fn verify(command_buffer: &[u8], tag: &[u8]) -> bool {
    let want = hmac(key().as_slice(), command_buffer);
    tag.len() == want.len() && want.iter().zip(tag).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_test_case_1() {
        let tag = hmac(&[0x0b; 20], b"Hi There");
        let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
    }

    #[test]
    fn a_seal_verifies_only_its_own_bytes() {
        let s = seal(b"UMDCMD one");
        assert!(verify(b"UMDCMD one", &s));
        assert!(!verify(b"UMDCMD two", &s));
        assert!(!verify(b"UMDCMD one", &s[..31]));
        assert!(!verify(b"UMDCMD one", &[]));
    }
}
