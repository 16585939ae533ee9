//! The AWS SDK's HTTP client, on the function's one reqwest client.
//!
//! Why: the SDK's own client (hyper with rustls) loads the system's TLS
//! root store when the first SDK client is built, and reqwest loads it
//! again: each load parsed about 9 million instructions' worth of PEM, a
//! third of a cold start (`docs/benchmarks.md`, "Start-up"). On this
//! adapter the SDK's calls (the secret's read and every DynamoDB call)
//! share reqwest's one root store and its connection pool.
//!
//! The SDK keeps what it owns: signing, its retries and their
//! classification, the operation and attempt timeouts (which also bound a
//! connect: the SDK's separate connect timeout is not applied here). The
//! adapter reports a transport failure as the SDK's own client does: a
//! timeout as a timeout, a failure to connect or a cut-off answer as an I/O
//! error (both retried by the SDK's standard mode, which is safe here: the
//! reads change nothing, every write is conditional or a transaction with
//! its idempotency token).

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;

/// `client` as the SDK's HTTP client.
pub fn sdk_http_client(client: reqwest::Client) -> SharedHttpClient {
    SharedHttpClient::new(OnReqwest(client))
}

#[derive(Debug, Clone)]
struct OnReqwest(reqwest::Client);

impl HttpClient for OnReqwest {
    fn http_connector(&self, settings: &HttpConnectorSettings, _: &RuntimeComponents) -> SharedHttpConnector {
        SharedHttpConnector::new(Connector {
            client: self.0.clone(),
            // reqwest bounds a whole exchange, not each read: stricter than
            // the SDK's read timeout, never looser.
            timeout: settings.read_timeout(),
        })
    }
}

#[derive(Debug)]
struct Connector {
    client: reqwest::Client,
    timeout: Option<std::time::Duration>,
}

impl HttpConnector for Connector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let (client, timeout) = (self.client.clone(), self.timeout);
        HttpConnectorFuture::new(async move {
            let request = to_reqwest(request, timeout)?;
            let response = client.execute(request).await.map_err(transport)?;
            let mut answer = ::http::Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                *headers = response.headers().clone();
            }
            let body = response.bytes().await.map_err(transport)?;
            let answer = answer
                .body(SdkBody::from(body))
                .map_err(|error| ConnectorError::other(error.into(), None))?;
            HttpResponse::try_from(answer).map_err(|error| ConnectorError::other(error.into(), None))
        })
    }
}

fn to_reqwest(request: HttpRequest, timeout: Option<std::time::Duration>) -> Result<reqwest::Request, ConnectorError> {
    let user = |error: Box<dyn std::error::Error + Send + Sync>| ConnectorError::user(error);
    let request = request.try_into_http1x().map_err(|error| user(error.into()))?;
    let (parts, body) = request.into_parts();
    // Every request the function sends through the SDK is a small JSON body.
    let body = body
        .bytes()
        .ok_or_else(|| user("a streaming request body".into()))?
        .to_vec();
    let mut request =
        reqwest::Request::try_from(::http::Request::from_parts(parts, body)).map_err(|error| user(error.into()))?;
    *request.timeout_mut() = timeout;
    Ok(request)
}

fn transport(error: reqwest::Error) -> ConnectorError {
    if error.is_timeout() {
        ConnectorError::timeout(error.into())
    } else if error.is_builder() {
        // Never sent: not a transport failure, and not worth a retry.
        ConnectorError::user(error.into())
    } else {
        ConnectorError::io(error.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::AttributeValue;
    use wiremock::matchers::{header, method};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    async fn dynamodb_at(server: &MockServer) -> aws_sdk_dynamodb::Client {
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodb::config::Region::new("eu-west-1"))
            .credentials_provider(aws_credential_types::Credentials::new(
                "AKIDTEST", "secret", None, None, "test",
            ))
            .endpoint_url(server.uri())
            .http_client(sdk_http_client(reqwest::Client::new()))
            .retry_config(
                aws_sdk_dynamodb::config::retry::RetryConfig::standard()
                    .with_initial_backoff(std::time::Duration::from_millis(1)),
            )
            .build();
        aws_sdk_dynamodb::Client::from_conf(config)
    }

    async fn get_item(client: &aws_sdk_dynamodb::Client) -> Result<Option<AttributeValue>, String> {
        client
            .get_item()
            .table_name("t")
            .key("pk", AttributeValue::S("k".into()))
            .send()
            .await
            .map(|output| output.item().and_then(|item| item.get("v").cloned()))
            .map_err(|error| aws_sdk_dynamodb::error::DisplayErrorContext(error).to_string())
    }

    #[tokio::test]
    async fn the_sdks_request_and_answer_pass_through_unchanged() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(header("x-amz-target", "DynamoDB_20120810.GetItem"))
            .respond_with(
                ResponseTemplate::new(200)
                    .insert_header("content-type", "application/x-amz-json-1.0")
                    .set_body_string(r#"{"Item":{"v":{"S":"found"}}}"#),
            )
            .expect(1)
            .mount(&server)
            .await;
        let found = get_item(&dynamodb_at(&server).await).await;
        assert_eq!(found, Ok(Some(AttributeValue::S("found".into()))));
        let sent = &server.received_requests().await.unwrap_or_default()[0];
        assert!(
            sent.headers.get("authorization").is_some(),
            "the SDK's signature is sent"
        );
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&sent.body).ok(),
            Some(serde_json::json!({"TableName": "t", "Key": {"pk": {"S": "k"}}}))
        );
    }

    #[tokio::test]
    async fn an_error_answer_reaches_the_sdk_which_retries_it_as_its_own_client_would() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(400).set_body_string(
                r#"{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"slow down"}"#,
            ))
            .expect(3)
            .mount(&server)
            .await;
        let refused = get_item(&dynamodb_at(&server).await).await;
        assert!(
            refused.as_ref().is_err_and(|why| why.contains("ThrottlingException")),
            "{refused:?}"
        );
    }

    #[tokio::test]
    async fn a_server_that_cannot_be_reached_is_a_transport_error() {
        let unreachable = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            listener.local_addr().expect("its address")
        };
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodb::config::Region::new("eu-west-1"))
            .credentials_provider(aws_credential_types::Credentials::new(
                "AKIDTEST", "secret", None, None, "test",
            ))
            .endpoint_url(format!("http://{unreachable}"))
            .http_client(sdk_http_client(reqwest::Client::new()))
            .build();
        let refused = get_item(&aws_sdk_dynamodb::Client::from_conf(config)).await;
        assert!(
            refused.as_ref().is_err_and(|why| why.contains("io error")),
            "{refused:?}"
        );
    }
}
