//! Hot reload: watches plugin directories and applies what changes there.
//!
//! A `.wasm` file added or replaced is loaded off the request path (compiled or taken from the
//! artifact cache, ABI-checked, described) and only then swapped into the registry, replacing
//! the plugin of the same name; one that fails keeps the working version serving and is
//! reported in [`Host::plugin_status`]. A removed file unloads its plugin. Calls in flight finish
//! on the version they started with (they hold it). Events are debounced, so a file written in
//! several steps is loaded once it settles (and a half-written one simply fails, then loads).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};

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
            for p in event.paths {
                let _ = tx.send(p);
            }
        }
    })?;
    for d in dirs {
        watcher.watch(d, RecursiveMode::NonRecursive)?;
    }
    std::thread::Builder::new()
        .name("umd-watch".into())
        .spawn(move || {
            while let Ok(first) = rx.recv() {
                let mut changed = BTreeSet::from([first]);
                while let Ok(p) = rx.recv_timeout(DEBOUNCE) {
                    changed.insert(p);
                }
                for path in changed.iter().filter(|p| is_component(p)) {
                    host.apply_change(path);
                }
            }
        })
        .map_err(|e| notify::Error::generic(&e.to_string()))?;
    Ok(Watcher { _watcher: watcher })
}

fn is_component(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "wasm")
}
