//! The gRPC service against a server on an ephemeral loopback port: every RPC, status codes,
//! a 1000-item stream with one bad item, a 64 MiB tensor round trip, deadlines, shutdown with a
//! stream in flight, buffer isolation between clients, administration and metrics.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tonic::transport::Channel;
use umd::cmdbuf::CommandBuffer;
use umd::service::proto::device_client::DeviceClient;
use umd::service::proto::plugins_client::PluginsClient;
use umd::service::proto::translator_client::TranslatorClient;
use umd::service::proto::*;
use umd::service::{ServeConfig, serve};
use umd::{Dtype, Host, data};
use umd_tests::fixture_dir;

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Server {
    async fn start(host: Host, config: ServeConfig) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(Arc::new(host), config, listener, async {
            let _ = rx.await;
        }));
        Server {
            addr,
            stop: Some(tx),
            task,
        }
    }

    async fn default() -> Server {
        Server::start(Host::builder().build().unwrap(), quiet()).await
    }

    async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect()
            .await
            .unwrap()
    }

    async fn shutdown(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.await.unwrap().unwrap();
    }
}

/// A request carrying the admin token the tests configure.
fn authed<T>(msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut()
        .insert("authorization", "Bearer s3cret".parse().unwrap());
    r
}

fn quiet() -> ServeConfig {
    ServeConfig {
        log_interval: None,
        ..Default::default()
    }
}

fn desc(shape: &[i32], dtype: &str) -> TensorDesc {
    TensorDesc {
        name: "t".into(),
        shape: shape.to_vec(),
        dtype: dtype.into(),
        text_bytes: 0,
    }
}

fn req(op: &str, inputs: Vec<TensorDesc>, id: i64) -> TranslateRequest {
    TranslateRequest {
        op_type: op.into(),
        inputs,
        request_id: id,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn translate_status_codes() {
    let server = Server::default().await;
    let mut c = TranslatorClient::new(server.channel().await);

    let ok = c
        .translate(req(
            "add",
            vec![desc(&[2, 3], "torch.float32"), desc(&[3], "f32")],
            7,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (ok.status, ok.request_id, ok.kernel_name.as_str()),
        (0, 7, "add_f32_bcast"),
        "{}",
        ok.msg
    );
    let cb = CommandBuffer::decode(&ok.command_buffer).unwrap();
    assert_eq!(cb.launches.len(), 1);
    assert_eq!(ok.outputs[0].shape, vec![2, 3]);
    assert_eq!(ok.plugin, "elementwise@0.1.0");

    let unsupported = c
        .translate(req("RegexFullMatch", vec![desc(&[1], "f32")], 1))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        unsupported.status, 2,
        "clients test for 2: {}",
        unsupported.msg
    );
    assert!(unsupported.command_buffer.is_empty());

    let bad_dtype = c
        .translate(req(
            "Add",
            vec![desc(&[1], "float33"), desc(&[1], "f32")],
            2,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(bad_dtype.status, 3);
    assert!(bad_dtype.msg.contains("float33"), "{}", bad_dtype.msg);

    let negative = c
        .translate(req("Relu", vec![desc(&[2, -1], "f32")], 3))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(negative.status, 3);
    assert!(
        negative.msg.contains("negative dimension -1"),
        "{}",
        negative.msg
    );

    let mut with_attr = req("Relu", vec![desc(&[2], "f32")], 4);
    with_attr.attributes.insert("alpha".into(), "0.1".into());
    let r = c.translate(with_attr).await.unwrap().into_inner();
    assert_eq!(r.status, 3);
    assert!(r.msg.contains("unknown attribute `alpha`"), "{}", r.msg);

    let mut gpu = req(
        "MatMul",
        vec![desc(&[8, 4], "f16"), desc(&[4, 2], "half")],
        5,
    );
    gpu.target = "cuda:sm_90".into();
    let r = c.translate(gpu).await.unwrap().into_inner();
    assert_eq!(r.status, 0, "{}", r.msg);
    assert_eq!(
        CommandBuffer::decode(&r.command_buffer).unwrap().target,
        "cuda:sm_90"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1000_item_stream_keeps_order_and_survives_a_bad_item() {
    let server = Server::default().await;
    let mut c = TranslatorClient::new(server.channel().await);
    let items: Vec<SubmitRequest> = (0..1000)
        .map(|i| {
            let dtype = if i == 500 { "not-a-dtype" } else { "float32" };
            SubmitRequest {
                request: Some(req("Add", vec![desc(&[4, 4], dtype), desc(&[4], dtype)], i)),
                fuse: None,
            }
        })
        .collect();
    let mut stream = c
        .submit_batch(tokio_stream::iter(items))
        .await
        .unwrap()
        .into_inner();
    let mut seen = Vec::new();
    while let Some(item) = stream.message().await.unwrap() {
        let r = item.response.unwrap();
        seen.push((r.request_id, r.status));
    }
    assert_eq!(seen.len(), 1000);
    for (i, (id, status)) in seen.iter().enumerate() {
        assert_eq!(*id, i as i64, "responses in request order");
        assert_eq!(*status, if i == 500 { 3 } else { 0 });
    }
    server.shutdown().await;
}

async fn write(c: &mut DeviceClient<Channel>, handle: &str, bytes: &[u8], chunk: usize) {
    let chunks: Vec<WriteChunk> = bytes
        .chunks(chunk)
        .enumerate()
        .map(|(i, d)| WriteChunk {
            handle: if i == 0 { handle.into() } else { String::new() },
            data: d.to_vec(),
            ..Default::default()
        })
        .collect();
    let r = c
        .write_buffer(tokio_stream::iter(chunks))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, 0, "{}", r.msg);
}

async fn read(c: &mut DeviceClient<Channel>, handle: &str) -> Vec<u8> {
    let mut s = c
        .read_buffer(ReadRequest {
            handle: handle.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut out = Vec::new();
    while let Some(chunk) = s.message().await.unwrap() {
        out.extend(chunk.data);
    }
    out
}

async fn create(c: &mut DeviceClient<Channel>, bytes: u64) -> String {
    let r = c
        .create_buffer(CreateBufferRequest {
            device: "cpu".into(),
            bytes,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, 0);
    r.handle
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_64_mib_tensor_round_trips_in_chunks() {
    let server = Server::default().await;
    let mut c = DeviceClient::new(server.channel().await);
    let n = 64 << 20;
    let data: Vec<u8> = (0..n).map(|i: usize| (i * 31 % 251) as u8).collect();
    let h = create(&mut c, n as u64).await;
    write(&mut c, &h, &data, 1 << 20).await; // each message well under the 4 MiB default
    let back = read(&mut c, &h).await;
    assert!(back == data, "64 MiB came back identical");
    let info = c.info(InfoRequest::default()).await.unwrap().into_inner();
    assert!(info.allocated_bytes >= n as u64);
    assert_eq!(info.live_buffers, 1);
    c.free_buffer(BufferRequest {
        handle: h.clone(),
        ..Default::default()
    })
    .await
    .unwrap();
    let gone = c
        .read_buffer(ReadRequest {
            handle: h,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(gone.code(), tonic::Code::NotFound);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_execution_of_add_and_matmul() {
    let server = Server::default().await;
    let mut c = DeviceClient::new(server.channel().await);
    let a = data::encode(Dtype::F32, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]); // [2, 3]
    let b = data::encode(Dtype::F32, &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0]); // [3, 2]
    let (ha, hb) = (create(&mut c, 24).await, create(&mut c, 24).await);
    write(&mut c, &ha, &a, 1 << 20).await;
    write(&mut c, &hb, &b, 1 << 20).await;
    let r = c
        .execute(ExecuteRequest {
            op: Some(req(
                "MatMul",
                vec![desc(&[2, 3], "f32"), desc(&[3, 2], "f32")],
                0,
            )),
            inputs: vec![ha.clone(), hb.clone()],
            wait: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, 0, "{}", r.msg);
    assert_eq!(r.output_descs[0].shape, vec![2, 2]);
    let out = data::decode(Dtype::F32, &read(&mut c, &r.outputs[0]).await);
    assert_eq!(out, vec![4.0, 5.0, 10.0, 11.0]);

    // Add via a command buffer from Translate, into an output buffer the client made, then
    // Synchronize instead of waiting.
    let mut t = TranslatorClient::new(server.channel().await);
    let tr = t
        .translate(req(
            "Add",
            vec![desc(&[2, 3], "f32"), desc(&[2, 3], "f32")],
            0,
        ))
        .await
        .unwrap()
        .into_inner();
    let hout = create(&mut c, 24).await;
    let r = c
        .execute(ExecuteRequest {
            command_buffer: tr.command_buffer,
            seal: tr.seal,
            inputs: vec![ha.clone(), ha.clone()],
            outputs: vec![hout.clone()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, 0, "{}", r.msg);
    let s = c
        .synchronize(SyncRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.status, 0);
    assert_eq!(
        data::decode(Dtype::F32, &read(&mut c, &hout).await),
        vec![2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
    );

    // Wrong input count and a corrupt command buffer are statuses, not crashes.
    let r = c
        .execute(ExecuteRequest {
            command_buffer: b"UMDCMD junk".to_vec(),
            inputs: vec![ha.clone()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, 5, "{}", r.msg);
    let r = c
        .execute(ExecuteRequest {
            op: Some(req("Relu", vec![desc(&[6], "f32")], 0)),
            inputs: vec![ha.clone(), hb.clone()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, 3);
    assert!(
        r.msg.contains("1 input buffers needed, 2 given"),
        "{}",
        r.msg
    );
    let e = c
        .info(InfoRequest {
            device: "cuda:7".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(
        e.message().contains("no device `cuda:7`"),
        "{}",
        e.message()
    );
    server.shutdown().await;
}

/// A server with two CPU devices: buffers, Translate and Execute name their device; another
/// device's buffer and an unknown device are refused, naming them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_devices_are_named_per_request() {
    let host = Host::builder().device("cpu:0,cpu:1").build().unwrap();
    let server = Server::start(host, quiet()).await;
    let mut c = DeviceClient::new(server.channel().await);
    let on = |device: &str, bytes| CreateBufferRequest {
        device: device.into(),
        bytes,
    };
    let ha = c
        .create_buffer(on("", 16))
        .await
        .unwrap()
        .into_inner()
        .handle;
    let hb = c
        .create_buffer(on("cpu:1", 16))
        .await
        .unwrap()
        .into_inner()
        .handle;
    let x = data::encode(Dtype::F32, &[1.0, -2.0, 3.0, -4.0]);
    write(&mut c, &ha, &x, 1 << 20).await; // default device
    let chunk = WriteChunk {
        device: "cpu:1".into(),
        handle: hb.clone(),
        data: x.clone(),
        ..Default::default()
    };
    let r = c.write_buffer(tokio_stream::iter([chunk])).await.unwrap();
    assert_eq!(r.into_inner().status, 0);
    let info = c
        .info(InfoRequest {
            device: "cpu:1".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.device, "cpu:1");
    assert!(info.allocated_bytes >= 16);

    // Translate for a device; Execute on it.
    let mut t = TranslatorClient::new(server.channel().await);
    let relu = TranslateRequest {
        device: "cpu:1".into(),
        ..req("Relu", vec![desc(&[4], "f32")], 7)
    };
    let tr = t.translate(relu.clone()).await.unwrap().into_inner();
    assert_eq!(tr.status, 0, "{}", tr.msg);
    let run = |inputs: Vec<String>, device: &str| ExecuteRequest {
        device: device.into(),
        command_buffer: tr.command_buffer.clone(),
        seal: tr.seal.clone(),
        inputs,
        wait: true,
        ..Default::default()
    };
    let r = c.execute(run(vec![hb.clone()], "cpu:1")).await.unwrap();
    let r = r.into_inner();
    assert_eq!(r.status, 0, "{}", r.msg);
    let out = c
        .read_buffer(ReadRequest {
            device: "cpu:1".into(),
            handle: r.outputs[0].clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .message()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(data::decode(Dtype::F32, &out.data), [1.0, 0.0, 3.0, 0.0]);
    // An op to translate on the execution's device.
    let r = c
        .execute(ExecuteRequest {
            device: "cpu:1".into(),
            op: Some(req("Relu", vec![desc(&[4], "f32")], 0)),
            inputs: vec![hb.clone()],
            wait: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, 0, "{}", r.msg);

    // The default device's buffer on cpu:1: refused, naming cpu:1.
    let r = c.execute(run(vec![ha.clone()], "cpu:1")).await.unwrap();
    let r = r.into_inner();
    assert_eq!(r.status, 3, "{}", r.msg);
    assert!(
        r.msg.contains("does not belong to device `cpu:1`"),
        "{}",
        r.msg
    );
    let e = c
        .free_buffer(BufferRequest {
            device: "cpu:1".into(),
            handle: ha.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("`cpu:1`"), "{}", e.message());
    assert_eq!(
        read(&mut c, &ha).await,
        x,
        "a refused free leaves the buffer"
    );

    // Unknown devices: INVALID_ARGUMENT naming it (status 3 in the Translator protocol).
    let e = c.create_buffer(on("cpu:5", 16)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(
        e.message().contains("no device `cpu:5`") && e.message().contains("`cpu:1`"),
        "{}",
        e.message()
    );
    let tr = t
        .translate(TranslateRequest {
            device: "cuda:3".into(),
            ..relu.clone()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(tr.status, 3, "{}", tr.msg);
    assert!(tr.msg.contains("no device `cuda:3`"), "{}", tr.msg);
    // SubmitBatch items name their device too.
    let items = [
        relu.clone(),
        TranslateRequest {
            device: "gpu".into(),
            ..relu.clone()
        },
    ];
    let mut s = t
        .submit_batch(tokio_stream::iter(items.map(|r| SubmitRequest {
            request: Some(r),
            fuse: None,
        })))
        .await
        .unwrap()
        .into_inner();
    let first = s.message().await.unwrap().unwrap().response.unwrap();
    let second = s.message().await.unwrap().unwrap().response.unwrap();
    assert_eq!((first.status, second.status), (0, 3), "{}", second.msg);
    assert!(second.msg.contains("no device `gpu`"), "{}", second.msg);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_client_cannot_touch_the_first_clients_buffers() {
    let server = Server::default().await;
    let mut alice = DeviceClient::new(server.channel().await);
    let mut bob = DeviceClient::new(server.channel().await);
    let h = create(&mut alice, 16).await;
    write(&mut alice, &h, &[7; 16], 16).await;
    assert!(h.len() >= 32 + 4, "handles carry 128 random bits: {h}");
    // Bob cannot guess: neighbours of Alice's handle, and the simplest handles, are unknown.
    let mut guesses = vec![
        "buf-0".to_string(),
        "buf-00000000000000000000000000000001".to_string(),
        String::new(),
    ];
    let mut flipped = h.clone().into_bytes();
    let last = flipped.len() - 1;
    flipped[last] = if flipped[last] == b'0' { b'1' } else { b'0' };
    guesses.push(String::from_utf8(flipped).unwrap());
    for g in guesses {
        let e = bob
            .read_buffer(ReadRequest {
                handle: g.clone(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound, "{g}");
        let e = bob
            .free_buffer(BufferRequest {
                handle: g.clone(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound, "{g}");
        let r = bob
            .execute(ExecuteRequest {
                op: Some(req("Neg", vec![desc(&[4], "f32")], 0)),
                inputs: vec![g.clone()],
                outputs: vec![h.clone()[..h.len() - 1].to_string()],
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_ne!(r.status, 0, "{g}");
    }
    assert_eq!(
        read(&mut alice, &h).await,
        vec![7; 16],
        "Alice's data untouched"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_are_honoured() {
    let dir = fixture_dir(&["spin"]);
    let host = Host::builder().plugin_dir(dir.path()).build().unwrap();
    let server = Server::start(host, quiet()).await;
    let mut c = TranslatorClient::new(server.channel().await);
    let mut r = tonic::Request::new(req("Spin", vec![desc(&[1], "f32")], 1));
    r.set_timeout(Duration::from_millis(150));
    let started = std::time::Instant::now();
    let e = c.translate(r).await.unwrap_err();
    assert!(
        matches!(
            e.code(),
            tonic::Code::DeadlineExceeded | tonic::Code::Cancelled
        ),
        "{e:?}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "answered at the client's deadline, not the plugin's"
    );
    // The server still serves; the plugin call itself is stopped by its own deadline.
    let ok = c
        .translate(req("Add", vec![desc(&[1], "f32"), desc(&[1], "f32")], 2))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ok.status, 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_a_stream_in_flight() {
    let server = Server::default().await;
    let mut c = TranslatorClient::new(server.channel().await);
    let items: Vec<SubmitRequest> = (0..300)
        .map(|i| SubmitRequest {
            request: Some(req(
                "Mul",
                vec![desc(&[8], "f32"), desc(&[i % 7 + 1, 1], "f32")],
                i as i64,
            )),
            fuse: None,
        })
        .collect();
    let mut stream = c
        .submit_batch(tokio_stream::iter(items))
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap();
    assert_eq!(first.response.unwrap().request_id, 0);
    // Shut down while the stream is in flight: every response still arrives.
    let Server { addr, stop, task } = server;
    let _ = stop.unwrap().send(());
    let mut n = 1;
    while let Some(item) = stream.message().await.unwrap() {
        let r = item.response.unwrap();
        assert_eq!((r.request_id, r.status), (n, 0));
        n += 1;
    }
    assert_eq!(n, 300);
    task.await.unwrap().unwrap();
    assert!(
        TranslatorClient::connect(format!("http://{addr}"))
            .await
            .is_err(),
        "no longer accepting"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_reflection_admin_and_metrics() {
    // Without --admin there is no Plugins service.
    let server = Server::default().await;
    let mut admin = PluginsClient::new(server.channel().await);
    assert_eq!(
        admin.list(ListRequest {}).await.unwrap_err().code(),
        tonic::Code::Unimplemented
    );
    // Server reflection lists the services.
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    let mut refl = ServerReflectionClient::new(server.channel().await);
    let ask = tonic_reflection::pb::v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut answers = refl
        .server_reflection_info(tokio_stream::iter([ask]))
        .await
        .unwrap()
        .into_inner();
    let Some(MessageResponse::ListServicesResponse(list)) =
        answers.message().await.unwrap().unwrap().message_response
    else {
        panic!("expected a service list")
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    assert!(
        names.contains(&"umd.Translator".to_string()) && names.contains(&"umd.Device".to_string()),
        "{names:?}"
    );

    let mut health = tonic_health::pb::health_client::HealthClient::new(server.channel().await);
    let h = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "umd.Translator".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        h.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
    server.shutdown().await;

    // With --admin, a token and metrics.
    let metrics_port = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let config = ServeConfig {
        admin: true,
        admin_token: Some("s3cret".into()),
        metrics_addr: Some(metrics_port),
        ..quiet()
    };
    let server = Server::start(Host::builder().build().unwrap(), config).await;
    let mut admin = PluginsClient::new(server.channel().await);
    assert_eq!(
        admin.list(ListRequest {}).await.unwrap_err().code(),
        tonic::Code::Unauthenticated
    );
    let list = admin
        .list(authed(ListRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert!(
        list.plugins
            .iter()
            .any(|p| p.name == "elementwise" && p.status == "loaded" && p.abi == "1.10.0")
    );

    // Load a plugin file through the admin service, then use it.
    let loaded = admin
        .load(authed(LoadRequest {
            path: umd_tests::fixture("tagger_v2").display().to_string(),
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(loaded.status, 0, "{}", loaded.msg);
    assert_eq!(loaded.plugin.unwrap().version, "2.0.0");
    let mut t = TranslatorClient::new(server.channel().await);
    let tag = t
        .translate(req("Tag", vec![desc(&[1], "f32")], 0))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((tag.status, tag.plugin.as_str()), (0, "tagger@2.0.0"));

    let add = || req("Add", vec![desc(&[2], "f32"), desc(&[2], "f32")], 0);
    assert_eq!(t.translate(add()).await.unwrap().into_inner().status, 0);
    let unload = authed(UnloadRequest {
        name: "elementwise".into(),
    });
    assert_eq!(admin.unload(unload).await.unwrap().into_inner().status, 0);
    assert_eq!(
        t.translate(add()).await.unwrap().into_inner().status,
        2,
        "unloaded ops are gone"
    );
    let bad = admin
        .load(authed(LoadRequest {
            path: "/nonexistent/x.wasm".into(),
        }))
        .await
        .unwrap()
        .into_inner();
    assert_ne!(bad.status, 0);
    assert!(bad.msg.contains("/nonexistent/x.wasm"), "{}", bad.msg);

    // Metrics: plain HTTP GET.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(metrics_port).await.unwrap();
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).await.unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    assert!(
        text.contains("umd_requests_total{op=\"add\",status=\"0\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("umd_requests_total{op=\"add\",status=\"2\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("umd_request_latency_seconds_count 3"),
        "{text}"
    );
    assert!(
        text.contains("umd_pool_bytes_in_use{device=\"cpu\"}"),
        "{text}"
    );
    server.shutdown().await;
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// An ONNX model of one node: `y = op(x[, w])`, x and y f32[4], w an f32[4] initializer.
fn one_node_model(op: &str, w: Option<[f32; 4]>) -> Vec<u8> {
    use umd::graph::onnx::proto as onnx;
    let info = |name: &str| {
        use onnx::tensor_shape_proto::{Dimension, dimension::Value};
        onnx::ValueInfoProto {
            name: Some(name.into()),
            r#type: Some(onnx::TypeProto {
                value: Some(onnx::type_proto::Value::TensorType(
                    onnx::type_proto::Tensor {
                        elem_type: Some(1),
                        shape: Some(onnx::TensorShapeProto {
                            dim: vec![Dimension {
                                value: Some(Value::DimValue(4)),
                                ..Default::default()
                            }],
                        }),
                    },
                )),
                ..Default::default()
            }),
            ..Default::default()
        }
    };
    let mut inputs = vec!["x".to_string()];
    let mut initializer = Vec::new();
    if let Some(w) = w {
        inputs.push("w".into());
        initializer.push(onnx::TensorProto {
            name: Some("w".into()),
            dims: vec![4],
            data_type: Some(1),
            raw_data: Some(f32s(&w)),
            ..Default::default()
        });
    }
    umd_tests::onnx_model_bytes(onnx::GraphProto {
        node: vec![onnx::NodeProto {
            input: inputs,
            output: vec!["y".into()],
            op_type: Some(op.into()),
            ..Default::default()
        }],
        initializer,
        input: vec![info("x")],
        output: vec![info("y")],
        ..Default::default()
    })
}

async fn load(c: &mut graph_client::GraphClient<Channel>, model: Vec<u8>) -> String {
    let r = c
        .load_model(tokio_stream::iter(vec![ModelChunk {
            device: String::new(),
            data: model,
        }]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, 0, "{}", r.msg);
    r.handle
}

fn on_device(name: &str, handle: &str) -> DeviceTensor {
    DeviceTensor {
        desc: Some(TensorDesc {
            name: name.into(),
            shape: vec![4],
            dtype: "f32".into(),
            text_bytes: 0,
        }),
        handle: handle.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_runs_chain_on_device_buffers_and_refuse_bad_handles() {
    let server = Server::default().await;
    // Buffers belong to a connection: the device and graph calls share one.
    let channel = server.channel().await;
    let mut dev = DeviceClient::new(channel.clone());
    let mut graph = graph_client::GraphClient::new(channel);
    // Another connection: its handles are foreign to this one.
    let mut other = DeviceClient::new(server.channel().await);
    let add = load(
        &mut graph,
        one_node_model("Add", Some([10.0, 20.0, 30.0, 40.0])),
    )
    .await;
    let neg = load(&mut graph, one_node_model("Neg", None)).await;
    let x = create(&mut dev, 16).await;
    write(&mut dev, &x, &f32s(&[1.0, -2.0, 3.0, -4.0]), 16).await;
    let live = |c: &mut DeviceClient<Channel>| {
        let mut c = c.clone();
        async move {
            c.info(InfoRequest::default())
                .await
                .unwrap()
                .into_inner()
                .live_buffers
        }
    };
    // Run 1: x by handle, y left on the device in a new buffer.
    let r = graph
        .run(RunModelRequest {
            handle: add.clone(),
            input_buffers: vec![on_device("x", &x)],
            outputs_on_device: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, 0, "{}", r.msg);
    assert!(r.outputs.is_empty(), "nothing by value");
    assert_eq!(r.output_buffers.len(), 1);
    let y = r.output_buffers[0].handle.clone();
    assert_eq!(r.output_buffers[0].desc.as_ref().unwrap().name, "y");
    // Run 2: that buffer is the next model's input; its output goes into a given buffer.
    let z = create(&mut dev, 16).await;
    let r = graph
        .run(RunModelRequest {
            handle: neg.clone(),
            input_buffers: vec![on_device("x", &y)],
            output_buffers: vec![on_device("y", &z)],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, 0, "{}", r.msg);
    assert_eq!(r.output_buffers[0].handle, z);
    assert_eq!(read(&mut dev, &y).await, f32s(&[11.0, 18.0, 33.0, 36.0]));
    assert_eq!(
        read(&mut dev, &z).await,
        f32s(&[-11.0, -18.0, -33.0, -36.0])
    );

    // Refusals, each before any side effect (no buffer is created, z keeps its bytes).
    let foreign = create(&mut other, 16).await;
    let small = create(&mut dev, 8).await;
    let before = live(&mut dev).await;
    let refuse = |req: RunModelRequest, want: &'static str| {
        let mut graph = graph.clone();
        async move {
            let r = graph.run(req).await.unwrap().into_inner();
            assert_eq!(r.status, 3, "{want}: {}", r.msg);
            assert!(r.msg.contains(want), "{want}: {}", r.msg);
        }
    };
    refuse(
        RunModelRequest {
            handle: neg.clone(),
            input_buffers: vec![on_device("x", &foreign)],
            outputs_on_device: true,
            ..Default::default()
        },
        "no buffer",
    )
    .await;
    refuse(
        RunModelRequest {
            handle: neg.clone(),
            input_buffers: vec![on_device("x", &x)],
            output_buffers: vec![on_device("y", &foreign)],
            ..Default::default()
        },
        "no buffer",
    )
    .await;
    refuse(
        RunModelRequest {
            handle: neg.clone(),
            input_buffers: vec![on_device("x", &small)],
            outputs_on_device: true,
            ..Default::default()
        },
        "its buffer has 8",
    )
    .await;
    refuse(
        RunModelRequest {
            handle: neg.clone(),
            input_buffers: vec![on_device("x", &x)],
            output_buffers: vec![on_device("y", &small)],
            ..Default::default()
        },
        "its buffer has 8",
    )
    .await;
    refuse(
        RunModelRequest {
            handle: neg.clone(),
            input_buffers: vec![on_device("x", &x)],
            output_buffers: vec![on_device("nope", &z)],
            ..Default::default()
        },
        "not an output",
    )
    .await;
    assert_eq!(
        live(&mut dev).await,
        before,
        "a refused run creates nothing"
    );
    assert_eq!(
        read(&mut dev, &z).await,
        f32s(&[-11.0, -18.0, -33.0, -36.0])
    );
    // The server keeps serving: by value, as before.
    let r = graph
        .run(RunModelRequest {
            handle: neg,
            inputs: vec![TensorValue {
                desc: on_device("x", "").desc,
                data: f32s(&[1.0, 2.0, 3.0, 4.0]),
            }],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, 0, "{}", r.msg);
    assert_eq!(r.outputs[0].data, f32s(&[-1.0, -2.0, -3.0, -4.0]));
    server.shutdown().await;
}

fn fused_item(
    r: TranslateRequest,
    group: &str,
    links: &[(u32, u32, u32)],
    end: bool,
) -> SubmitRequest {
    SubmitRequest {
        request: Some(r),
        fuse: Some(FuseItem {
            group: group.into(),
            links: links
                .iter()
                .map(|&(input, item, output)| FuseLink {
                    input,
                    item,
                    output,
                })
                .collect(),
            end,
        }),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_batch_fuses_a_group_into_one_command_buffer() {
    let server = Server::default().await;
    let channel = server.channel().await;
    let mut t = TranslatorClient::new(channel.clone());
    let mut dev = DeviceClient::new(channel);
    let v4 = || desc(&[4], "f32");
    // y = relu(x + w) * z as three ops streamed one by one; a plain item before and after.
    let items = vec![
        SubmitRequest {
            request: Some(req("Neg", vec![v4()], 0)),
            fuse: None,
        },
        fused_item(req("Add", vec![v4(), v4()], 1), "g", &[], false),
        fused_item(req("Relu", vec![v4()], 2), "g", &[(0, 0, 0)], false),
        fused_item(req("Mul", vec![v4(), v4()], 3), "g", &[(0, 1, 0)], true),
        // Bad groups: a link to a later item; an output of another shape; an interrupted group.
        fused_item(req("Relu", vec![v4()], 4), "bad", &[(0, 1, 0)], true),
        fused_item(req("Relu", vec![v4()], 5), "shape", &[], false),
        fused_item(
            req("Relu", vec![desc(&[2], "f32")], 6),
            "shape",
            &[(0, 0, 0)],
            true,
        ),
        fused_item(req("Relu", vec![v4()], 7), "open", &[], false),
        SubmitRequest {
            request: Some(req("Neg", vec![v4()], 8)),
            fuse: None,
        },
    ];
    let mut out = t
        .submit_batch(tokio_stream::iter(items))
        .await
        .unwrap()
        .into_inner();
    let mut responses = Vec::new();
    while let Some(r) = out.message().await.unwrap() {
        responses.push(r);
    }
    assert_eq!(responses.len(), 9);
    for (i, r) in responses.iter().enumerate() {
        let resp = r.response.as_ref().unwrap();
        assert_eq!(
            (resp.status, resp.request_id),
            (0, i as i64),
            "{}",
            resp.msg
        );
    }
    let fused: Vec<Option<&FusedGroup>> = responses.iter().map(|r| r.fused.as_ref()).collect();
    assert!(fused[..3].iter().all(Option::is_none));
    let g = fused[3].expect("the group's end carries it");
    assert_eq!(
        (g.status, g.group.as_str(), g.items),
        (0, "g", 3),
        "{}",
        g.msg
    );
    let bad = fused[4].unwrap();
    assert!(
        bad.status == 3 && bad.msg.contains("not an earlier item"),
        "{}",
        bad.msg
    );
    assert!(fused[5].is_none());
    let shape = fused[6].unwrap();
    assert!(
        shape.status == 3 && shape.msg.contains("f32[4]"),
        "{}",
        shape.msg
    );
    assert!(fused[7].is_none());
    let open = fused[8].unwrap();
    assert!(open.status == 3 && open.group == "open", "{}", open.msg);

    // One command buffer: the three unlinked inputs, then every item's output.
    let cb = CommandBuffer::decode(&g.command_buffer).unwrap();
    assert_eq!(cb.launches.len(), 3);
    let kinds: Vec<(u32, i32, u32)> = g
        .bindings
        .iter()
        .map(|b| (b.item, b.kind, b.slot))
        .collect();
    use fused_binding::Kind;
    let (i, o) = (Kind::Input as i32, Kind::Output as i32);
    assert_eq!(
        kinds,
        vec![
            (0, i, 0),
            (0, i, 1),
            (2, i, 1),
            (0, o, 0),
            (1, o, 0),
            (2, o, 0)
        ]
    );
    let mut inputs = Vec::new();
    for v in [
        [1.0, -2.0, 3.0, -4.0],
        [1.0, 1.0, 1.0, 1.0],
        [2.0, 2.0, 3.0, 3.0],
    ] {
        let h = create(&mut dev, 16).await;
        write(&mut dev, &h, &f32s(&v), 16).await;
        inputs.push(h);
    }
    let r = dev
        .execute(ExecuteRequest {
            command_buffer: g.command_buffer.clone(),
            seal: g.seal.clone(),
            inputs,
            wait: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, 0, "{}", r.msg);
    assert_eq!(r.outputs.len(), 3);
    assert_eq!(
        read(&mut dev, &r.outputs[0]).await,
        f32s(&[2.0, -1.0, 4.0, -3.0])
    );
    assert_eq!(
        read(&mut dev, &r.outputs[1]).await,
        f32s(&[2.0, 0.0, 4.0, 0.0])
    );
    assert_eq!(
        read(&mut dev, &r.outputs[2]).await,
        f32s(&[4.0, 0.0, 12.0, 0.0])
    );
    server.shutdown().await;
}

/// Models belong to the connection that loaded them, like buffers: another client can neither
/// run nor unload one, one client holds at most MAX_MODELS_PER_CLIENT, and a client's models
/// are unloaded (their device memory given back) when its connection closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_belong_to_the_client_that_loaded_them() {
    use umd::service::MAX_MODELS_PER_CLIENT;
    let server = Server::default().await;
    let mut bob = graph_client::GraphClient::new(server.channel().await);
    let bob_dev = DeviceClient::new(server.channel().await);
    let allocated = |c: &DeviceClient<Channel>| {
        let mut c = c.clone();
        async move {
            c.info(InfoRequest::default())
                .await
                .unwrap()
                .into_inner()
                .allocated_bytes
        }
    };
    let before = allocated(&bob_dev).await;
    let alice_channel = server.channel().await;
    let mut alice = graph_client::GraphClient::new(alice_channel.clone());
    let add = load(
        &mut alice,
        one_node_model("Add", Some([10.0, 20.0, 30.0, 40.0])),
    )
    .await;
    let run = |handle: String| RunModelRequest {
        handle,
        inputs: vec![TensorValue {
            desc: on_device("x", "").desc,
            data: f32s(&[1.0, 2.0, 3.0, 4.0]),
        }],
        ..Default::default()
    };
    let r = alice.run(run(add.clone())).await.unwrap().into_inner();
    assert_eq!(r.status, 0, "{}", r.msg);
    // Bob has the handle (it leaked) and still cannot use it.
    let r = bob.run(run(add.clone())).await.unwrap().into_inner();
    assert_ne!(r.status, 0);
    assert!(r.msg.contains("no model"), "{}", r.msg);
    let r = bob
        .unload(UnloadModelRequest {
            handle: add.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_ne!(r.status, 0, "Bob unloaded Alice's model");
    let r = alice.run(run(add.clone())).await.unwrap().into_inner();
    assert_eq!(r.status, 0, "{}", r.msg);
    let held = allocated(&bob_dev).await;
    assert!(
        held > before,
        "the model holds device memory: {held} vs {before}"
    );
    // One client holds at most MAX_MODELS_PER_CLIENT models; the others still load theirs.
    for _ in 1..MAX_MODELS_PER_CLIENT {
        load(&mut alice, one_node_model("Neg", None)).await;
    }
    let r = alice
        .load_model(tokio_stream::iter(vec![ModelChunk {
            device: String::new(),
            data: one_node_model("Neg", None),
        }]))
        .await
        .unwrap()
        .into_inner();
    assert_ne!(r.status, 0);
    assert!(r.msg.contains("this client holds"), "{}", r.msg);
    let mine = load(&mut bob, one_node_model("Neg", None)).await;
    // Alice goes away: her models are unloaded and their memory given back.
    drop(alice);
    drop(alice_channel);
    let mut now = allocated(&bob_dev).await;
    for _ in 0..100 {
        if now < held {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        now = allocated(&bob_dev).await;
    }
    assert!(
        now < held,
        "Alice's models still hold memory: {now} of {held}"
    );
    let r = bob.run(run(mine)).await.unwrap().into_inner();
    assert_eq!(r.status, 0, "{}", r.msg);
    server.shutdown().await;
}
