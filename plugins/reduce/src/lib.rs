//! The `reduce` plugin (being written).
