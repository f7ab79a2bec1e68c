//! What the server's tests share: a server on an ephemeral loopback port over the test stores,
//! and small request helpers.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::net::SocketAddr;

use skald_core::pipeline::policy::Policy;
use skald_server::{AppState, ServerConfig};
use tokio::sync::oneshot;

/// A state over the stores `SKALD_TEST_STORE` names (`skald_store::test_stores`: SQLite in
/// memory, or a PostgreSQL schema of its own), so every suite runs on either backend.
pub fn test_state(config: ServerConfig) -> AppState {
    let stores = skald_store::test_stores::stores();
    let engine_stores = skald_engine::Stores {
        sessions: stores.sessions,
        refs: stores.refs,
        memories: stores.memories,
    };
    AppState::from_stores(engine_stores, stores.keys, config).unwrap()
}

/// A running server; dropping it shuts it down.
pub struct TestServer {
    pub addr: SocketAddr,
    pub state: AppState,
    shutdown: Option<oneshot::Sender<()>>,
    handle: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl TestServer {
    pub async fn start(state: AppState) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let handle = tokio::spawn(skald_server::serve(listener, state.clone(), async move {
            let _ = rx.await;
        }));
        TestServer {
            addr,
            state,
            shutdown: Some(tx),
            handle: Some(handle),
        }
    }

    pub async fn open() -> TestServer {
        TestServer::start(test_state(default_config())).await
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops accepting, waits for in-flight requests and background tasks.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(handle) = self.handle.take() {
            handle.await.unwrap().unwrap();
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

pub fn default_config() -> ServerConfig {
    ServerConfig::new(Policy::preset("skald").unwrap())
}
