//! A no-op Lambda function for `make bench`: takes each event from the
//! Runtime API and answers at once. Its latency is the emulator's floor,
//! which the bench subtracts from the function's.

type Error = Box<dyn std::error::Error>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    noop_runtime().await
}

/// A no-op Lambda function: takes each event and answers at once. Its latency
/// is the emulator's floor.
async fn noop_runtime() -> Result<(), Error> {
    let api = std::env::var("AWS_LAMBDA_RUNTIME_API")?;
    let client = reqwest::Client::new();
    loop {
        let event = client
            .get(format!("http://{api}/2018-06-01/runtime/invocation/next"))
            .send()
            .await?;
        let id = event
            .headers()
            .get("lambda-runtime-aws-request-id")
            .ok_or("no request id")?
            .to_str()?
            .to_owned();
        let _ = event.bytes().await?;
        client
            .post(format!("http://{api}/2018-06-01/runtime/invocation/{id}/response"))
            .body(r#"{"statusCode":200}"#)
            .send()
            .await?;
    }
}
