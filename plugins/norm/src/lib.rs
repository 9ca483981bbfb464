//! The `norm` plugin (being written).
