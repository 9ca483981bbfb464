//! The on-disk caches' files (compiled plugin artifacts, CUDA kernel modules): each entry is
//! the SHA-256 of its bytes followed by the bytes, written atomically (a unique temporary file,
//! then a rename), under a name that starts with its 64-hex-digit key. A cache whose entries
//! can always be made again (compiled artifacts) keeps its directory within a byte budget,
//! least recently used entries out first ([`prune`]; a hit marks its entry used with
//! [`touch`]), so a host that runs for weeks across plugin upgrades does not fill its disk.
//!
//! Owns only files named like entries, in the directories it is given; what an entry means,
//! and its key, is the caller's.

use std::path::Path;
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

/// Bytes a pruned cache directory keeps: about 20 generations of the bundled plugins'
/// compiled artifacts.
pub const BUDGET_BYTES: u64 = 512 << 20;

/// A temporary file older than this is a crashed writer's: removed when pruning.
const STALE_TMP: Duration = Duration::from_secs(3600);

/// A disk entry: SHA-256 of the bytes, then the bytes.
pub fn encode(bytes: &[u8]) -> Vec<u8> {
    let mut file = Sha256::digest(bytes).to_vec();
    file.extend_from_slice(bytes);
    file
}

/// The bytes of a disk entry, or why it is unusable.
pub fn decode(file: &[u8]) -> Result<&[u8], &'static str> {
    if file.len() < 32 {
        return Err("truncated");
    }
    let (digest, bytes) = file.split_at(32);
    if Sha256::digest(bytes).as_slice() != digest {
        return Err("checksum mismatch");
    }
    Ok(bytes)
}

/// Writes `bytes` as an entry at `path` atomically (its directory created when missing): a
/// temporary file of this writer's own (created exclusively: never an existing file or a
/// link), then a rename; a failed write leaves no temporary file behind.
pub fn store(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    // unique per writer: threads of one process may store the same entry at once
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    let written = std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(&encode(bytes)))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Whether `name` is an entry's with extension `ext`, or a writer's temporary file: 64
/// lowercase hex digits first (as the caches name them).
fn is_entry_name(name: &str, ext: &str) -> bool {
    let hex = name.len() > 64
        && name.as_bytes()[..64]
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b));
    let suffix = name.rsplit_once('.').map(|(_, e)| e);
    hex && suffix.is_some_and(|e| e == ext || e.starts_with("tmp"))
}

/// Marks the entry at `path` used now (its modification time), so pruning keeps it longer.
/// Silently does nothing where this process may not (a file another user owns).
pub fn touch(path: &Path) {
    // Unix sets the time through any descriptor of the owner; Windows needs write access
    let file = if cfg!(unix) {
        std::fs::File::open(path)
    } else {
        std::fs::File::options().append(true).open(path)
    };
    if let Ok(f) = file {
        let _ = f.set_modified(SystemTime::now());
    }
}

/// Removes the least recently used entries (files named `<64 hex digits>….ext`) of `dir` until
/// the rest fit in `budget` bytes, and temporary files of crashed writers; `keep` stays whatever
/// its size, and other files are neither counted nor touched. Returns how many files were removed. Another
/// process may remove or replace files meanwhile: a file gone already is not an error.
pub fn prune(dir: &Path, ext: &str, budget: u64, keep: &Path) -> std::io::Result<usize> {
    let now = SystemTime::now();
    let mut files = Vec::new();
    let mut removed = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let path = entry.path();
        if !entry
            .file_name()
            .to_str()
            .is_some_and(|n| is_entry_name(n, ext))
        {
            continue;
        }
        let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let is_tmp = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.starts_with("tmp"));
        if is_tmp {
            if now.duration_since(used).unwrap_or_default() > STALE_TMP
                && std::fs::remove_file(&path).is_ok()
            {
                removed += 1;
            }
            continue;
        }
        files.push((used, meta.len(), path));
    }
    // newest first: keep while they fit
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    let mut total = 0u64;
    for (_, len, path) in files {
        total = total.saturating_add(len);
        if total > budget && path != keep && std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("umd-disk-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn aged(path: &Path, secs_ago: u64) {
        let f = std::fs::File::options().append(true).open(path).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(secs_ago))
            .unwrap();
    }

    #[test]
    fn entries_round_trip_and_damage_is_named() {
        let file = encode(b"module");
        assert_eq!(decode(&file), Ok(&b"module"[..]));
        let mut bad = file.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(decode(&bad), Err("checksum mismatch"));
        assert_eq!(decode(&file[..20]), Err("truncated"));
    }

    #[test]
    fn pruning_removes_the_least_recently_used_past_the_budget() {
        let d = dir("lru");
        let name = |i: usize, ext: &str| format!("{}{i}.{ext}", "ab".repeat(32));
        // five 1 KiB entries, used 50, 40, 30, 20, 10 s ago; the oldest is then read (touched)
        for (i, age) in [50, 40, 30, 20, 10].into_iter().enumerate() {
            let p = d.join(name(i, "cwasm"));
            std::fs::write(&p, vec![0u8; 1024]).unwrap();
            aged(&p, age);
        }
        touch(&d.join(name(0, "cwasm")));
        // a crashed writer's temporary file (two hours old), a live one, and a file that is
        // not an entry (old and large: never counted or removed)
        std::fs::write(d.join(name(8, "tmp1-0")), b"partial").unwrap();
        aged(&d.join(name(8, "tmp1-0")), 7200);
        std::fs::write(d.join(name(9, "tmp2-0")), b"writing").unwrap();
        std::fs::write(d.join("notes.txt"), vec![0u8; 8192]).unwrap();
        aged(&d.join("notes.txt"), 9000);
        // another cache's entry (a kernel module) in the same directory: not this one's
        std::fs::write(d.join(name(7, "ptx")), vec![0u8; 4096]).unwrap();
        aged(&d.join(name(7, "ptx")), 9000);
        // room for three: 0 (touched), 4 and 3 stay; 2 goes, and the old temporary
        let removed = prune(&d, "cwasm", 3 * 1024, &d.join(name(1, "cwasm"))).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        // `keep` (1) stays although it is past the budget
        let mut want = vec![
            name(0, "cwasm"),
            name(1, "cwasm"),
            name(3, "cwasm"),
            name(4, "cwasm"),
            name(7, "ptx"),
            name(9, "tmp2-0"),
            "notes.txt".to_string(),
        ];
        want.sort();
        assert_eq!(left, want);
        assert_eq!(removed, 2);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn store_writes_a_checked_entry() {
        let d = dir("store");
        let p = d.join(format!("{}.ptx", "0f".repeat(32)));
        store(&p, b"artifact").unwrap();
        assert_eq!(decode(&std::fs::read(&p).unwrap()), Ok(&b"artifact"[..]));
        // no temporary file is left behind
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
        // a failed store (the path is a directory: the rename fails) leaves none either
        let blocked = d.join(format!("{}.ptx", "1e".repeat(32)));
        std::fs::create_dir(&blocked).unwrap();
        std::fs::write(blocked.join("inside"), b"x").unwrap();
        assert!(store(&blocked, b"artifact").is_err());
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 2);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
