//! Helpers for CPU kernels: find the bytes of a binding in a [`CpuCall`] and hand written
//! buffers back as [`CpuWrite`]s.

use crate::{CpuCall, CpuWrite, OpError};

/// The buffers of one CPU call, by binding index.
pub struct Buffers<'a> {
    call: &'a CpuCall,
}

impl<'a> Buffers<'a> {
    pub fn new(call: &'a CpuCall) -> Self {
        Buffers { call }
    }

    /// The current contents of a read binding, checked to hold at least `min_len` bytes.
    pub fn input(&self, binding: u32, min_len: u64) -> Result<&'a [u8], OpError> {
        let b = self.find(binding)?;
        if (b.data.len() as u64) < min_len {
            return Err(OpError::internal(format!(
                "binding {binding} holds {} bytes, the kernel reads {min_len}",
                b.data.len()
            )));
        }
        Ok(&b.data)
    }

    /// A zeroed output buffer for a written binding, checked against the bound size.
    pub fn output(&self, binding: u32, len: u64) -> Result<CpuWrite, OpError> {
        let b = self.find(binding)?;
        if b.size < len {
            return Err(OpError::internal(format!(
                "binding {binding} has {} bytes, the kernel writes {len}",
                b.size
            )));
        }
        Ok(CpuWrite {
            binding,
            data: vec![0; len as usize],
        })
    }

    fn find(&self, binding: u32) -> Result<&'a crate::CpuBuffer, OpError> {
        self.call
            .buffers
            .iter()
            .find(|b| b.binding == binding)
            .ok_or_else(|| OpError::internal(format!("binding {binding} is not bound")))
    }
}
