//! Streams are read as they arrive: against a hand-written HTTP server that sends the first part
//! of an answer and then holds the connection, the first events come out before the answer is
//! complete, a stalled stream times out, and cancelling a stalled stream ends it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use skald_core::message::{Message, Role};
use skald_llm::{
    ChatModel, ChatRequest, FixedJitter, LlmError, OpenAiCompatible, ProviderConfig, ProviderKind,
    RetryPolicy, StreamEvent,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

const FIRST: &str = "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n";
const REST: &str = "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

/// Reads one request (headers and a `content-length` body).
async fn read_request(socket: &mut TcpStream) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let read = socket.read(&mut chunk).await.unwrap();
        assert!(read > 0, "the client closed before sending a request");
        buffer.extend_from_slice(&chunk[..read]);
        let text = String::from_utf8_lossy(&buffer).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            if buffer.len() >= end + 4 + length {
                return;
            }
        }
    }
}

async fn write_chunk(socket: &mut TcpStream, data: &str) {
    let framed = format!("{:x}\r\n{data}\r\n", data.len());
    socket.write_all(framed.as_bytes()).await.unwrap();
    socket.flush().await.unwrap();
}

/// A server that answers one request with [`FIRST`], then waits for `release` before sending
/// [`REST`] (or holds the connection open forever if `release` is dropped).
async fn trickle_server() -> (String, oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    let (release, released) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        read_request(&mut socket).await;
        socket
            .write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
            )
            .await
            .unwrap();
        write_chunk(&mut socket, FIRST).await;
        if released.await.is_ok() {
            write_chunk(&mut socket, REST).await;
            socket.write_all(b"0\r\n\r\n").await.unwrap();
            socket.flush().await.unwrap();
        } else {
            // Stall: keep the connection open until the test ends.
            std::future::pending::<()>().await;
        }
    });
    (base_url, release)
}

fn client(base_url: &str, timeout: Duration) -> OpenAiCompatible {
    let mut config = ProviderConfig::new(ProviderKind::OpenAi, "m");
    config.base_url = base_url.to_owned();
    OpenAiCompatible::with_api_key(config, None)
        .unwrap()
        .with_retry_policy(RetryPolicy::none())
        .with_jitter(Arc::new(FixedJitter(0.5)))
        .with_request_timeout(timeout)
}

fn request() -> ChatRequest {
    ChatRequest::new(None, vec![Message::text(Role::User, "Say hello")])
}

#[tokio::test]
async fn the_first_events_arrive_before_the_answer_is_complete() {
    let (base_url, release) = trickle_server().await;
    let client = client(&base_url, Duration::from_secs(600));
    let mut stream = client
        .stream(&request(), &CancellationToken::new())
        .await
        .unwrap();
    // The server has not sent the rest yet: this event can only come from incremental parsing.
    assert_eq!(
        stream.next().await,
        Some(Ok(StreamEvent::TextDelta("Hel".to_owned())))
    );
    release.send(()).unwrap();
    assert_eq!(
        stream.next().await,
        Some(Ok(StreamEvent::TextDelta("lo".to_owned())))
    );
    let Some(Ok(StreamEvent::Done(response))) = stream.next().await else {
        panic!("expected the assembled answer");
    };
    assert_eq!(response.text(), "Hello");
    assert_eq!(stream.next().await, None);
}

#[tokio::test]
async fn a_stalled_stream_times_out() {
    let (base_url, release) = trickle_server().await;
    drop(release);
    let client = client(&base_url, Duration::from_millis(200));
    let mut stream = client
        .stream(&request(), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        stream.next().await,
        Some(Ok(StreamEvent::TextDelta("Hel".to_owned())))
    );
    let next = stream.next().await;
    assert!(
        matches!(next, Some(Err(LlmError::Timeout { .. }))),
        "{next:?}"
    );
    assert_eq!(stream.next().await, None);
}

#[tokio::test]
async fn cancelling_a_stalled_stream_aborts_it() {
    let (base_url, release) = trickle_server().await;
    drop(release);
    let client = client(&base_url, Duration::from_secs(600));
    let cancel = CancellationToken::new();
    let mut stream = client.stream(&request(), &cancel).await.unwrap();
    assert_eq!(
        stream.next().await,
        Some(Ok(StreamEvent::TextDelta("Hel".to_owned())))
    );
    let (next, ()) = tokio::join!(stream.next(), async { cancel.cancel() });
    assert_eq!(next, Some(Err(LlmError::Aborted)));
}
