//! umd: a GPU user-mode driver host with sandboxed WebAssembly operator plugins.
//!
//! The host never knows an operator and a plugin never touches a device. A request names an op
//! and tensor descriptions; a plugin (a `.wasm` component behind the versioned WIT interface
//! `umd:plugin@1.x`, today 1.8) plans it; the host validates the plan and encodes it as a `UMDCMD`
//! [`cmdbuf::CommandBuffer`]; a [`device::Device`] runs it.
//!
//! ```no_run
//! use umd::{Host, OpRequest, TensorDesc, Dtype};
//! let host = Host::builder().build()?; // bundled plugins, CPU device
//! let a = TensorDesc::new("a", vec![2, 3], Dtype::F32);
//! let b = TensorDesc::new("b", vec![3], Dtype::F32);
//! let t = host.translate(&OpRequest::new("Add", vec![a, b]))?;
//! println!("{}", t.cmdbuf); // the command buffer, for a person
//! let outputs = host.run("Add", &[
//!     (TensorDesc::new("a", vec![3], Dtype::F32), [1f32, 2., 3.].iter().flat_map(|x| x.to_le_bytes()).collect()),
//!     (TensorDesc::new("b", vec![3], Dtype::F32), [1f32, 1., 1.].iter().flat_map(|x| x.to_le_bytes()).collect()),
//! ])?;
//! assert_eq!(outputs[0].0.shape, vec![3]);
//! # Ok::<(), umd::Error>(())
//! ```

pub mod admission;
pub mod cache;
pub mod check;
pub mod cmdbuf;
pub mod data;
pub mod device;
pub(crate) mod disk_cache;
pub mod error;
pub mod graph;
mod host;
pub(crate) mod memo;
pub mod npy;
pub mod plugin;
pub mod registry;
pub mod service;
pub mod target;
pub mod tensor;
pub mod text;
pub mod translate;
pub mod watch;

pub use error::{Error, Result};
pub use host::{Host, HostBuilder, PluginStatus, default_kernel_dir};
pub use target::Target;
pub use tensor::{AttrValue, Dtype, TensorDesc};
pub use translate::{OpRequest, Translation};

/// The plugins built into this binary: (crate name, component bytes).
pub const BUNDLED_PLUGINS: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/bundled.rs"));
