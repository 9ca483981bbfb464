//! Client sessions: one per TCP connection. Each accepted connection gets a [`Session`] id that
//! request handlers read from the request's extensions; when the connection closes, its id is
//! sent to whoever owns per-session state (the buffer table frees that session's buffers).
//!
//! Owns the connection wrapper only; what a session owns is the caller's business.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::mpsc::UnboundedSender;
use tonic::transport::server::Connected;

/// Who sent a request: the id of the connection it came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Session(pub u64);

impl Session {
    /// The session of a request (requests that did not come through [`Tracked`], e.g. from an
    /// in-process caller, share session 0).
    pub fn of<T>(req: &tonic::Request<T>) -> Session {
        req.extensions()
            .get::<Session>()
            .copied()
            .unwrap_or(Session(0))
    }
}

static NEXT: AtomicU64 = AtomicU64::new(1);

/// An accepted connection that reports its session's end when dropped.
pub struct Tracked {
    stream: TcpStream,
    session: Session,
    closed: UnboundedSender<Session>,
}

impl Tracked {
    pub fn new(stream: TcpStream, closed: UnboundedSender<Session>) -> Tracked {
        Tracked {
            stream,
            session: Session(NEXT.fetch_add(1, Ordering::Relaxed)),
            closed,
        }
    }
}

impl Tracked {
    /// The session of this connection.
    pub fn session(&self) -> Session {
        self.session
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let _ = self.closed.send(self.session);
    }
}

impl Connected for Tracked {
    type ConnectInfo = Session;
    fn connect_info(&self) -> Session {
        self.session
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
