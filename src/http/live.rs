//! Event-stream mode at the edge (contract 20): which requests ask for it,
//! and the answer's body, whole (JSON, as before) or as server-sent events.
//!
//! The body reads what the turn's [`Live`](crate::live::Live) heard and writes each event
//! as soon as it is heard: nothing is held back for a sentence or a call to
//! end. While nothing is heard it writes a `: keep-alive` comment, so that
//! no proxy between here and the customer takes a long tool call for a dead
//! connection. `done` ends the body; nothing is written after it.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use lambda_http::Request;
use lambda_http::http::header;
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::{Instant, Sleep};

use crate::live::Heard;

pub const EVENT_STREAM: &str = "text/event-stream";
pub const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// Whether the request's `Accept` names `text/event-stream` (any case,
/// parameters ignored). Anything else is JSON mode.
pub fn wants_events(request: &Request) -> bool {
    request
        .headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|range| {
            let media_type = range.split(';').next().unwrap_or_default().trim();
            media_type.eq_ignore_ascii_case(EVENT_STREAM)
        })
}

/// One event as it goes on the wire: an `event:` line and a `data:` line
/// of JSON (which never holds a raw newline), then a blank line. `Begun`
/// is the edge's own signal and is not sent.
pub fn event(heard: &Heard) -> Option<Bytes> {
    let (name, data) = match heard {
        Heard::Begun => return None,
        Heard::Progress(step) => ("progress", json!({"step": step.as_str()})),
        Heard::Delta(text) => ("delta", json!({"text": text})),
        Heard::Discard => ("discard", json!({})),
        Heard::Done { status, body } => {
            // The body JSON mode would have sent, as JSON; a body that is not
            // JSON (none is) would travel as a string rather than be lost.
            let body = serde_json::from_str(body).unwrap_or_else(|_| serde_json::Value::String(body.clone()));
            ("done", json!({"status": status, "body": body}))
        }
    };
    Some(Bytes::from(format!("event: {name}\ndata: {data}\n\n")))
}

/// An answer's body: JSON whole, or the events of a turn as they come.
pub struct AnswerBody(Inner);

enum Inner {
    Whole(Option<Bytes>),
    Events {
        heard: mpsc::UnboundedReceiver<Heard>,
        quiet: Pin<Box<Sleep>>,
        keep_alive: Duration,
        ended: bool,
    },
}

impl AnswerBody {
    pub fn whole(body: impl Into<Bytes>) -> AnswerBody {
        AnswerBody(Inner::Whole(Some(body.into())))
    }

    /// What `heard` hears from now on (the `Begun` already taken), with a
    /// comment after every `keep_alive` of silence.
    pub fn events(heard: mpsc::UnboundedReceiver<Heard>, keep_alive: Duration) -> AnswerBody {
        AnswerBody(Inner::Events {
            heard,
            quiet: Box::pin(tokio::time::sleep(keep_alive)),
            keep_alive,
            ended: false,
        })
    }
}

impl Body for AnswerBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match &mut self.get_mut().0 {
            Inner::Whole(bytes) => Poll::Ready(bytes.take().map(|bytes| Ok(Frame::data(bytes)))),
            Inner::Events {
                heard,
                quiet,
                keep_alive,
                ended,
            } => loop {
                if *ended {
                    return Poll::Ready(None);
                }
                match heard.poll_recv(cx) {
                    Poll::Ready(Some(next)) => {
                        *ended = matches!(next, Heard::Done { .. });
                        let Some(bytes) = event(&next) else { continue };
                        quiet.as_mut().reset(Instant::now() + *keep_alive);
                        return Poll::Ready(Some(Ok(Frame::data(bytes))));
                    }
                    // The turn is gone without its `done` (it cannot be, but
                    // a body must end): the stream ends.
                    Poll::Ready(None) => return Poll::Ready(None),
                    Poll::Pending => {}
                }
                return match quiet.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        quiet.as_mut().reset(Instant::now() + *keep_alive);
                        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(KEEP_ALIVE)))))
                    }
                    Poll::Pending => Poll::Pending,
                };
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.0 {
            Inner::Whole(bytes) => bytes.is_none(),
            Inner::Events { ended, .. } => *ended,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Inner::Whole(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            Inner::Events { .. } => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;
    use crate::live::Step;

    fn asking(accept: &str) -> Request {
        lambda_http::http::Request::builder()
            .header("accept", accept)
            .body(lambda_http::Body::Empty)
            .unwrap()
    }

    #[test]
    fn event_stream_mode_is_asked_for_by_the_media_type_alone() {
        assert!(wants_events(&asking("text/event-stream")));
        assert!(wants_events(&asking("application/json, Text/Event-Stream;q=0.9")));
        assert!(!wants_events(&asking("application/json")));
        assert!(!wants_events(&asking("text/event-streamx")));
        assert!(!wants_events(&asking("*/*")));
    }

    #[test]
    fn events_are_one_event_line_and_one_data_line_of_json() {
        let delta = event(&Heard::Delta("two\nlines \u{1b}".into())).unwrap();
        assert_eq!(
            std::str::from_utf8(&delta).unwrap(),
            "event: delta\ndata: {\"text\":\"two\\nlines \\u001b\"}\n\n"
        );
        let done = event(&Heard::Done {
            status: 504,
            body: r#"{"detail":"x"}"#.into(),
        })
        .unwrap();
        assert_eq!(
            std::str::from_utf8(&done).unwrap(),
            "event: done\ndata: {\"body\":{\"detail\":\"x\"},\"status\":504}\n\n"
        );
        assert!(event(&Heard::Begun).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn silence_is_broken_by_a_comment_and_done_ends_the_body() {
        let (to, from) = mpsc::unbounded_channel();
        let mut body = AnswerBody::events(from, Duration::from_secs(15));
        to.send(Heard::Progress(Step::Order)).unwrap();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert!(first.starts_with(b"event: progress\n"));
        // Nothing for 15 s (paused time): a comment.
        let second = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&second[..], KEEP_ALIVE);
        to.send(Heard::Done {
            status: 200,
            body: "{}".into(),
        })
        .unwrap();
        to.send(Heard::Delta("after".into())).unwrap();
        let third = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert!(third.starts_with(b"event: done\n"));
        assert!(body.frame().await.is_none(), "nothing after done");
    }
}
