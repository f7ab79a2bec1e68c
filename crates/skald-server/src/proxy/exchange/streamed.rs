//! A streamed answer: the client's response starts with the first upstream call that answers
//! 2xx, and the upstream's events reach the client as they arrive, through the
//! [`StreamRewriter`] (skald's own tool calls held back and run, the call continued in the same
//! client stream). The stream ends in the API's own terms whatever happens upstream: its final
//! event when the answer is whole, else the API's error event (a stall, a break, a stream
//! without its final event, a stop), the failure recorded.

use std::convert::Infallible;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use skald_engine::{StreamedAnswer, StreamedRound, Turn};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::super::body::{Fault, FaultKind, UpstreamBody};
use super::super::sse::SseSplitter;
use super::super::stream::StreamRewriter;
use super::super::upstream::response_headers;
use super::{Exchange, Noted, answer_whole, is_event_stream, recovery_failure};

/// How one read of an upstream stream ended.
enum Read {
    Chunk(Bytes),
    End,
    Failed(Fault),
    /// The client went away: the upstream call is dropped (which cancels it).
    ClientGone,
}

/// The next piece of an upstream stream, decoded, within the idle timeout, unless the client
/// leaves or the server stops.
async fn next_chunk(
    upstream: &mut UpstreamBody,
    client: &mpsc::Sender<Bytes>,
    idle: std::time::Duration,
    stopping: &CancellationToken,
) -> Read {
    tokio::select! {
        () = client.closed() => Read::ClientGone,
        () = stopping.cancelled() => Read::Failed(Fault::shutting_down()),
        read = upstream.next(idle) => match read {
            Ok(Some(chunk)) => Read::Chunk(chunk),
            Ok(None) => Read::End,
            Err(fault) => Read::Failed(fault),
        },
    }
}

/// A streamed answer: the response starts with the first upstream call that answers 2xx, and
/// its events go to the client as they arrive; `head` gets the response (or the early error).
/// A client that leaves ends the task: the upstream call is dropped (cancelled) and the
/// session released.
pub async fn stream(exchange: Exchange, mut session: Turn, mut head: oneshot::Sender<Response>) {
    let prepare = exchange.prepare_context();
    let recall = exchange.recall_hook();
    let mut noted = Noted::default();
    let mut turn_loop = match exchange.turn_loop(&prepare, exchange.memory_hooks(recall.as_ref())) {
        Ok(turn_loop) => turn_loop,
        Err(error) => {
            let _ = head.send(exchange.noted(recovery_failure(error), &noted));
            return;
        }
    };
    let cancel = CancellationToken::new();
    let sent = tokio::select! {
        // The client left before the answer started.
        () = head.closed() => return,
        () = exchange.state.shutdown.cancelled() => {
            let error = exchange.fail(Fault::shutting_down()).into_api_error().into_response();
            let _ = head.send(exchange.noted(error, &noted));
            return;
        }
        sent = exchange.send(&mut turn_loop, &mut session, &cancel, &mut noted) => sent,
    };
    let first = match sent {
        Ok(sent) => sent,
        Err(early) => {
            let _ = head.send(exchange.noted(early, &noted));
            return;
        }
    };
    if !is_event_stream(first.response.headers()) {
        // The upstream answered a stream request with a whole answer: it goes back whole, after
        // skald's own calls in it are run and the call continued, as for a whole request.
        let response = answer_whole(
            &exchange,
            &mut turn_loop,
            &mut session,
            &cancel,
            &mut noted,
            Some(first),
        )
        .await;
        let _ = head.send(exchange.noted(response, &noted));
        return;
    }
    let status = first.response.status();
    let headers = response_headers(first.response.headers());
    let mut skald = first.skald;
    let mut upstream = match UpstreamBody::new(first.response) {
        Ok(body) => body,
        Err(fault) => {
            let error = exchange.fail(fault).into_api_error().into_response();
            let _ = head.send(exchange.noted(error, &noted));
            return;
        }
    };
    let (sender, receiver) = mpsc::channel::<Bytes>(64);
    let body = futures::stream::unfold(receiver, |mut receiver| async move {
        receiver
            .recv()
            .await
            .map(|bytes| (Ok::<Bytes, Infallible>(bytes), receiver))
    });
    let mut response = Response::new(Body::from_stream(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    if head.send(exchange.noted(response, &noted)).is_err() {
        return;
    }
    let idle = exchange.state.config.timeouts.idle;
    let stopping = &exchange.state.shutdown;
    let mut rewriter = StreamRewriter::new(exchange.api);
    loop {
        rewriter.start_round(skald.clone());
        let mut splitter = SseSplitter::default();
        loop {
            match next_chunk(&mut upstream, &sender, idle, stopping).await {
                Read::Chunk(chunk) => {
                    for event in splitter.push(&chunk) {
                        if let Some(bytes) = rewriter.on_event(event) {
                            if sender.send(bytes).await.is_err() {
                                return;
                            }
                        }
                    }
                }
                Read::End => break,
                Read::ClientGone => return,
                Read::Failed(fault) => {
                    exchange.fail_stream(&sender, fault).await;
                    return;
                }
            }
        }
        if let Some(event) = splitter.finish() {
            if let Some(bytes) = rewriter.on_event(event) {
                if sender.send(bytes).await.is_err() {
                    return;
                }
            }
        }
        let round = rewriter.end_round();
        if round.upstream_error {
            // The upstream said it failed, in the API's own error event: the client gets it
            // (and what was held back with it) as sent, and the call is recorded as failed.
            for bytes in rewriter.release_held() {
                if sender.send(bytes).await.is_err() {
                    break;
                }
            }
            exchange.fail(Fault::new(
                FaultKind::ErrorEvent,
                "the upstream ended its stream with an error event".to_owned(),
            ));
            return;
        }
        if !round.finished {
            // A clean end without the API's final event is a cut-off answer, not a whole one.
            let fault = Fault::new(
                FaultKind::Incomplete,
                format!(
                    "the upstream's stream ended without its final event ({}): the answer is \
                     incomplete",
                    exchange.api.final_event()
                ),
            );
            exchange.fail_stream(&sender, fault).await;
            return;
        }
        let step = turn_loop
            .on_streamed_answer(
                &mut session,
                StreamedRound {
                    content: round.content,
                    skald_calls: round.skald_calls,
                    client_calls: round.client_calls,
                    usage: round.usage,
                },
            )
            .await;
        match step {
            Ok(StreamedAnswer::Final { skald_calls_ran }) => {
                exchange.note_skald_calls(skald_calls_ran);
                break;
            }
            Ok(StreamedAnswer::Continue { skald_calls_ran }) => {
                exchange.note_skald_calls(skald_calls_ran);
            }
            Err(_) => {
                let message = "recording skald's tool calls failed";
                for bytes in exchange.api.error_event(message) {
                    let _ = sender.send(bytes).await;
                }
                return;
            }
        }
        let sent = tokio::select! {
            () = sender.closed() => return,
            () = stopping.cancelled() => {
                exchange.fail_stream(&sender, Fault::shutting_down()).await;
                return;
            }
            sent = exchange.send(&mut turn_loop, &mut session, &cancel, &mut noted) => sent,
        };
        let next = match sent {
            Ok(sent) if is_event_stream(sent.response.headers()) => sent,
            Ok(sent) => {
                let message = format!(
                    "the upstream answered the continuation with {} instead of a stream",
                    sent.response.status()
                );
                for bytes in exchange.api.error_event(&message) {
                    let _ = sender.send(bytes).await;
                }
                return;
            }
            Err(early) => {
                let status = early.status();
                let body = axum::body::to_bytes(early.into_body(), 64 * 1024)
                    .await
                    .unwrap_or_default();
                let message = format!(
                    "continuing the answer after skald's tool call failed ({status}): {}",
                    String::from_utf8_lossy(&body)
                );
                for bytes in exchange.api.error_event(&message) {
                    let _ = sender.send(bytes).await;
                }
                return;
            }
        };
        skald = next.skald;
        upstream = match UpstreamBody::new(next.response) {
            Ok(body) => body,
            Err(fault) => {
                exchange.fail_stream(&sender, fault).await;
                return;
            }
        };
    }
    let tail = rewriter.release_held();
    // Stored before the client gets the final event: a client that continues from this answer
    // as soon as it has it (on another server over the same store, which does not wait for this
    // session's lock) must find it.
    if let Some(response) = rewriter.final_response() {
        exchange.record_answer(&mut session, response);
    }
    for bytes in tail {
        if sender.send(bytes).await.is_err() {
            return;
        }
    }
}
