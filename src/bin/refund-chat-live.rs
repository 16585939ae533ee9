//! The Event API's Lambda authorizer (contract 31): AppSync Events asks it
//! about every connect and subscribe (and, were a namespace ever to let it,
//! a publish, which it refuses). Wiring only; the decision is
//! [`refund_chat::push::listen`], which the local stand-in calls too.
//!
//! It reads one conversation header per subscribe and holds no other
//! permission: no staff item, no ledger write, no payments.

use std::sync::Arc;
use std::time::SystemTime;

use lambda_http::lambda_runtime::{Error, LambdaEvent, service_fn};
use refund_chat::config::ListenConfig;
use refund_chat::push::listen::{Asked, AuthorizerRequest, AuthorizerResponse, decide};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    refund_chat::ops::logging::init();
    let config = ListenConfig::from_env().inspect_err(|error| {
        tracing::error!(event = "configuration_error", error = %error);
    })?;
    let http = refund_chat::http_client::money_path_client()?;
    let aws = refund_chat::startup::function_aws_config(&http).await;
    let listening = Arc::new(refund_chat::startup::listening(&config, &aws, http, None));
    lambda_http::lambda_runtime::run(service_fn(move |event: LambdaEvent<AuthorizerRequest>| {
        let listening = Arc::clone(&listening);
        async move {
            let request = event.payload;
            let Some(asked) = Asked::of(&request) else {
                return Ok::<_, Error>(AuthorizerResponse::refused());
            };
            let listener = listening.verifier.listener(&request.authorization_token).await;
            let answer = decide(listener.as_ref(), &asked, &listening.conversations, SystemTime::now()).await;
            tracing::info!(
                event = "live_authorized",
                operation = %request.request_context.operation,
                authorized = answer.is_authorized,
            );
            Ok(answer)
        }
    }))
    .await
}
