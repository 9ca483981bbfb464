//! The `conv` plugin (being written).
