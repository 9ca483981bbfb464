//! Hot reload: watches plugin directories and applies what changes there.
//!
//! A `.wasm` file added or replaced is loaded off the request path (compiled or taken from the
//! artifact cache, ABI-checked, described) and only then swapped into the registry, replacing
//! the plugin of the same name; one that fails keeps the working version serving and is
//! reported in [`Host::plugin_status`]. A removed file unloads its plugin. Calls in flight finish
//! on the version they started with (they hold it). Events are debounced, so a file written in
//! several steps is loaded once it settles (and a half-written one simply fails, then loads).
//!
//! Only content changes count: access events are ignored (loading a file reads it, which would
//! otherwise trigger another load, forever), and a file whose SHA-256 equals the one last
//! applied is left alone (a `touch`, or a rewrite with the same bytes).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher as _};
use sha2::{Digest, Sha256};

use crate::Host;

/// How long a directory must be quiet before its changes are applied.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// Keeps watching until dropped.
pub struct Watcher {
    _watcher: notify::RecommendedWatcher,
}

/// Watches `dirs`, applying changes to `host` on a background thread.
pub fn watch(host: Arc<Host>, dirs: &[PathBuf]) -> notify::Result<Watcher> {
    let (tx, rx) = mpsc::channel::<PathBuf>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event {
            if matches!(event.kind, EventKind::Access(_)) {
                return;
            }
            for p in event.paths {
                let _ = tx.send(p);
            }
        }
    })?;
    for d in dirs {
        watcher.watch(d, RecursiveMode::NonRecursive)?;
    }
    // What is there now was loaded with the host: its content is the baseline.
    let mut applied: HashMap<PathBuf, [u8; 32]> = dirs
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| is_component(p))
        .filter_map(|p| content_hash(&p).map(|h| (p, h)))
        .collect();
    std::thread::Builder::new()
        .name("umd-watch".into())
        .spawn(move || {
            while let Ok(first) = rx.recv() {
                let mut changed = BTreeSet::from([first]);
                while let Ok(p) = rx.recv_timeout(DEBOUNCE) {
                    changed.insert(p);
                }
                for path in changed.iter().filter(|p| is_component(p)) {
                    let now = content_hash(path);
                    if now.is_some() && now.as_ref() == applied.get(path) {
                        continue;
                    }
                    if now.is_none() && !applied.contains_key(path) && path.exists() {
                        // Unreadable, never applied: let the loader say why.
                        host.apply_change(path);
                        continue;
                    }
                    match now {
                        Some(h) => applied.insert(path.clone(), h),
                        None => applied.remove(path),
                    };
                    host.apply_change(path);
                }
            }
        })
        .map_err(|e| notify::Error::generic(&e.to_string()))?;
    Ok(Watcher { _watcher: watcher })
}

/// SHA-256 of a regular file's bytes (`None`: gone, not a regular file, or unreadable). Files
/// over the component size limit are not read: the loader refuses them anyway.
fn content_hash(p: &Path) -> Option<[u8; 32]> {
    let m = std::fs::metadata(p).ok()?;
    if !m.is_file() || m.len() > crate::plugin::MAX_COMPONENT_BYTES {
        return None;
    }
    Some(Sha256::digest(std::fs::read(p).ok()?).into())
}

fn is_component(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "wasm")
}
