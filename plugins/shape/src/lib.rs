//! The `shape` plugin (being written).
