//! The host's typed errors and the status codes they map to (the Translator protocol's
//! `status` field: 0 ok, 2 op not supported, others below).

use thiserror::Error;

use crate::cmdbuf::CmdError;
use crate::device::DeviceError;

/// A request that is wrong before any plugin sees it.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum RequestError {
    #[error("unknown dtype `{0}` (try float32, f16, bfloat16, int32, …)")]
    UnknownDtype(String),
    #[error("invalid shape: {0}")]
    Shape(String),
    #[error("invalid attribute: {0}")]
    Attribute(String),
    #[error("invalid target: {0}")]
    Target(String),
    #[error("invalid request: {0}")]
    Other(String),
}

/// What went wrong inside, or with, a plugin.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum PluginFault {
    #[error("trapped in `{call}`: {message}{}", last_log.as_ref().map(|l| format!(" (last log: {l})")).unwrap_or_default())]
    Trap {
        call: &'static str,
        message: String,
        last_log: Option<String>,
    },
    #[error("exceeded its {deadline_ms} ms deadline in `{call}` and was interrupted")]
    Deadline {
        call: &'static str,
        deadline_ms: u64,
    },
    #[error("exceeded its memory limit of {limit_mib} MiB in `{call}`")]
    Memory { call: &'static str, limit_mib: u64 },
    #[error("returned an invalid plan: {0}")]
    InvalidPlan(String),
    #[error("returned an invalid result: {0}")]
    InvalidResult(String),
    #[error("reported an internal error: {0}")]
    Internal(String),
}

/// Why a plugin could not be loaded.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum LoadError {
    #[error("{path}: cannot read: {reason}")]
    Read { path: String, reason: String },
    #[error("{path}: not a valid WebAssembly component: {reason}")]
    Compile { path: String, reason: String },
    #[error(
        "{path}: plugin is built for umd:plugin@{plugin_abi}, this host supports umd:plugin@{host_abi} \
         (majors must match)"
    )]
    AbiMismatch {
        path: String,
        plugin_abi: String,
        host_abi: String,
    },
    #[error("{path}: {reason}")]
    Interface { path: String, reason: String },
    #[error("{path}: {reason}")]
    Instantiate { path: String, reason: String },
    #[error("{path}: plugin `{plugin}` not admitted: {reason}")]
    Admission {
        path: String,
        plugin: String,
        reason: String,
    },
    #[error("{path}: plugin `{name}` is invalid: {reason}")]
    Describe {
        path: String,
        name: String,
        reason: String,
    },
}

/// Every error of the host library.
#[derive(Debug, Error)]
pub enum Error {
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error("op `{op}` is not supported for target `{target}`{}", if tried.is_empty() { String::new() } else { format!(" (declined by: {})", tried.join("; ")) })]
    Unsupported {
        op: String,
        target: String,
        tried: Vec<String>,
    },
    #[error("plugin `{plugin}` rejected the request: {message}")]
    Rejected { plugin: String, message: String },
    #[error("plugin `{plugin}` {fault}")]
    Plugin { plugin: String, fault: PluginFault },
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("command buffer: {0}")]
    CommandBuffer(#[from] CmdError),
    #[error("device: {0}")]
    Device(#[from] DeviceError),
    /// A command buffer whose module no loaded plugin build provides (its build was replaced
    /// and is no longer held, or it was never loaded here).
    #[error("command buffer: {0}")]
    Build(#[from] crate::registry::ResolveError),
}

impl Error {
    /// The Translator protocol status code of this error.
    pub fn status(&self) -> i32 {
        match self {
            Error::Unsupported { .. } => status::UNSUPPORTED,
            Error::Request(_) | Error::Rejected { .. } => status::INVALID_INPUT,
            Error::Plugin { .. } | Error::Load(_) => status::PLUGIN_FAULT,
            Error::CommandBuffer(_) | Error::Build(_) => status::INVALID_COMMAND_BUFFER,
            // What the caller named or sized wrongly is the caller's error, not the device's.
            Error::Device(
                DeviceError::UnknownBuffer(_)
                | DeviceError::UnknownStream(_)
                | DeviceError::QueueFull { .. }
                | DeviceError::OutOfBounds { .. }
                | DeviceError::WrongTarget { .. }
                | DeviceError::BindingCount { .. }
                | DeviceError::BindingTooSmall { .. }
                | DeviceError::InputSize { .. }
                | DeviceError::ForeignBuffer { .. }
                | DeviceError::NoSuchDevice { .. },
            ) => status::INVALID_INPUT,
            Error::Device(_) => status::DEVICE,
        }
    }
}

/// Status codes of the Translator protocol.
pub mod status {
    pub const OK: i32 = 0;
    /// No plugin provides the op for the target (clients test for this value).
    pub const UNSUPPORTED: i32 = 2;
    /// The request is invalid (dtype, shape, attribute), by the host's or the plugin's judgement.
    pub const INVALID_INPUT: i32 = 3;
    /// The plugin faulted: trap, deadline, memory limit, invalid plan.
    pub const PLUGIN_FAULT: i32 = 4;
    /// A command buffer failed to decode or validate.
    pub const INVALID_COMMAND_BUFFER: i32 = 5;
    /// The device failed.
    pub const DEVICE: i32 = 6;
    /// Something failed inside the host itself.
    pub const INTERNAL: i32 = 7;
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
