//! loss
