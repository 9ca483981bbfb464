//! A `umd serve` on a loopback port inside this process, for the load benchmarks (`umd bench
//! soak`, `umd bench fair`): started on an ephemeral port, stopped (and drained) on request.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use umd::Host;
use umd::service::{ServeConfig, serve};

pub struct LocalServer {
    /// `http://127.0.0.1:PORT`.
    pub addr: String,
    stop: oneshot::Sender<()>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl LocalServer {
    pub async fn start(host: Arc<Host>, config: ServeConfig) -> anyhow::Result<LocalServer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(host, config, listener, async {
            let _ = stopped.await;
        }));
        Ok(LocalServer { addr, stop, task })
    }

    /// Stops accepting, drains and returns the server's own result.
    pub async fn stop(self) -> anyhow::Result<()> {
        let _ = self.stop.send(());
        self.task.await?
    }
}
