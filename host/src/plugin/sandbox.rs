//! The sandbox a plugin instance runs in: per-store state (memory limit, log capture), the
//! `host` import (logging, the only thing a plugin may ask of the host), and how a failed call
//! is classified into a [`PluginFault`].
//!
//! Nothing here grants files, network, clock or environment: the linker defines `host.log` and
//! (1.3) `kernel-io` on the running launch's buffers, (1.8) `matrix` and (1.10) `vector` (the
//! CPU device's units, on the instance's own memory and those buffers), nothing else, so a
//! component importing anything more fails to instantiate.

use std::time::Duration;

use wasmtime::ResourceLimiter;

use super::bindings::host_iface::{Host, LogLevel};
use crate::error::PluginFault;

/// Limits every plugin instance runs under.
#[derive(Debug, Clone, Copy)]
pub struct SandboxLimits {
    /// Linear memory of one instance, in bytes.
    pub memory_bytes: usize,
    /// Deadline of a `plan`, `describe` or `kernel-source` call.
    pub plan_deadline: Duration,
    /// Deadline of a CPU kernel call (`run-cpu`), which does real work.
    pub kernel_deadline: Duration,
    /// Log messages kept per instance before further ones are dropped.
    pub max_log_messages: u32,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            memory_bytes: 1 << 30,
            plan_deadline: Duration::from_millis(1000),
            kernel_deadline: Duration::from_secs(30),
            max_log_messages: 1000,
        }
    }
}

/// Longest log message kept (longer ones are cut).
const MAX_LOG_BYTES: usize = 4096;

/// Data of one plugin instance's store.
pub struct StoreState {
    pub plugin: String,
    memory_limit: usize,
    max_log_messages: u32,
    logged: u32,
    /// The memory size a denied growth asked for.
    pub memory_denied: Option<usize>,
    /// The last message the plugin logged (reported with a trap: panics arrive this way).
    pub last_log: Option<String>,
    /// (1.3) The buffers of the launch a `cpu-kernel.run` call is running.
    pub io: super::kernel_io::KernelIo,
}

impl StoreState {
    pub fn new(plugin: &str, limits: &SandboxLimits) -> Self {
        StoreState {
            plugin: plugin.to_string(),
            memory_limit: limits.memory_bytes,
            max_log_messages: limits.max_log_messages,
            logged: 0,
            memory_denied: None,
            last_log: None,
            io: None,
        }
    }
}

impl ResourceLimiter for StoreState {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_limit {
            self.memory_denied = Some(desired);
            wasmtime::bail!(
                "memory growth to {desired} bytes denied (limit {} bytes)",
                self.memory_limit
            );
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

impl Host for StoreState {
    fn log(&mut self, level: LogLevel, message: String) {
        self.logged += 1;
        if self.logged > self.max_log_messages {
            return;
        }
        let mut message = message;
        if message.len() > MAX_LOG_BYTES {
            let mut cut = MAX_LOG_BYTES;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push('…');
        }
        let plugin = &self.plugin;
        match level {
            LogLevel::Trace => tracing::trace!(plugin, "{message}"),
            LogLevel::Debug => tracing::debug!(plugin, "{message}"),
            LogLevel::Info => tracing::info!(plugin, "{message}"),
            LogLevel::Warn => tracing::warn!(plugin, "{message}"),
            LogLevel::Error => tracing::error!(plugin, "{message}"),
        }
        self.last_log = Some(message);
    }
}

impl super::bindings::wit::Host for StoreState {}

/// Classifies the error of a failed call. The instance it happened in is discarded by the
/// caller either way.
pub fn classify(
    call: &'static str,
    err: &wasmtime::Error,
    state: &StoreState,
    deadline: Duration,
) -> PluginFault {
    if state.memory_denied.is_some() {
        return PluginFault::Memory {
            call,
            limit_mib: (state.memory_limit >> 20) as u64,
        };
    }
    match err.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::Interrupt) => PluginFault::Deadline {
            call,
            deadline_ms: deadline.as_millis() as u64,
        },
        Some(trap) => PluginFault::Trap {
            call,
            message: trap.to_string(),
            last_log: state.last_log.clone(),
        },
        None => PluginFault::Trap {
            call,
            message: format!("{err:#}"),
            last_log: state.last_log.clone(),
        },
    }
}
