//! The `unary` plugin (being written).
