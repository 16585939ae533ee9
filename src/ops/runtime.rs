//! How a function answers the Lambda runtime (contract 20), for the chat's
//! function and the desk's alike: streaming (a JSON answer's prelude is
//! written once the answer is whole, an event stream's as it begins), or
//! buffered (the whole body, once it has ended), with the EMF layer
//! flushing one metrics document per invocation after the answer.

use std::future::Future;

use bytes::Bytes;
use http_body_util::BodyExt;
use lambda_http::{Body, Error, Request, Response, StreamAdapter, service_fn};
use metrics_cloudwatch_embedded::Collector;

/// Runs the function until the runtime stops it, each request answered by
/// `answer`: in Lambda's streaming response mode when `streaming`
/// (`RESPONSE_MODE`), else buffered.
pub async fn serve<F, Fut, B>(streaming: bool, metrics: &'static Collector, answer: F) -> Result<(), Error>
where
    F: Fn(Request) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: http_body::Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Into<Error> + std::fmt::Display + std::fmt::Debug + Send + Sync + 'static,
{
    match streaming {
        true => {
            let handler = service_fn(move |request: Request| {
                let answer = answer.clone();
                async move { Ok::<_, Error>(answer(request).await) }
            });
            metrics_cloudwatch_embedded::lambda::service::run(metrics, StreamAdapter::from(handler)).await
        }
        false => {
            let handler = service_fn(move |request: Request| {
                let answer = answer.clone();
                async move {
                    let (parts, body) = answer(request).await.into_parts();
                    let bytes = body.collect().await.map(|whole| whole.to_bytes()).unwrap_or_default();
                    let body = match String::from_utf8(bytes.to_vec()) {
                        Ok(text) => Body::Text(text),
                        Err(_) => Body::Binary(bytes.to_vec()),
                    };
                    Ok::<_, Error>(Response::from_parts(parts, body))
                }
            });
            metrics_cloudwatch_embedded::lambda::service::run_http(metrics, handler).await
        }
    }
}
