//! The `gather` plugin (being written).
