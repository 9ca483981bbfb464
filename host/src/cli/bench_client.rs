//! The client side the load benchmarks (`umd bench soak`, `umd bench fair`) share: connecting,
//! f32 tensor descriptions, Translate requests and device buffers.

use tonic::transport::Channel;

use umd::service::proto::device_client::DeviceClient;
use umd::service::proto::{CreateBufferRequest, TensorDesc, TranslateRequest};

pub async fn connect(addr: &str) -> anyhow::Result<Channel> {
    Ok(Channel::from_shared(addr.to_string())?.connect().await?)
}

/// An f32 tensor of `shape`.
pub fn desc(shape: &[i32]) -> TensorDesc {
    TensorDesc {
        name: "t".into(),
        shape: shape.to_vec(),
        dtype: "float32".into(),
        text_bytes: 0,
    }
}

pub fn op(op: &str, inputs: Vec<TensorDesc>) -> TranslateRequest {
    TranslateRequest {
        op_type: op.into(),
        inputs,
        ..Default::default()
    }
}

/// A new device buffer of `bytes`: its handle.
pub async fn create_buffer(c: &mut DeviceClient<Channel>, bytes: u64) -> anyhow::Result<String> {
    let r = c
        .create_buffer(CreateBufferRequest {
            bytes,
            ..Default::default()
        })
        .await?
        .into_inner();
    anyhow::ensure!(r.status == 0, "CreateBuffer: {}", r.msg);
    Ok(r.handle)
}
