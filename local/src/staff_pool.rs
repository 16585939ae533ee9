//! The staff pool's sign-in under `make run` and in the browser tests
//! (contract 30). The desk's page talks Cognito's JSON API; moto answers
//! all of it but `RevokeToken` (unknown to it: a 500) and `GlobalSignOut`
//! (it looks the access token up in the wrong region). So this door
//! passes every call to moto as it came, body and target alike, and
//! answers `RevokeToken` itself as Cognito documents it: the refresh token
//! is revoked, and a later `REFRESH_TOKEN_AUTH` with it is refused
//! (`NotAuthorizedException`, "Refresh Token has been revoked"). What it
//! does not emulate: the access tokens the refresh token issued stay
//! usable until they expire here (Cognito revokes them too).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// moto's address, and the refresh tokens revoked.
pub struct StaffPoolDoor {
    moto: String,
    http: reqwest::Client,
    revoked: Mutex<HashSet<String>>,
}

fn cors() -> [(&'static str, &'static str); 3] {
    [
        ("access-control-allow-origin", "*"),
        (
            "access-control-allow-headers",
            "content-type, x-amz-target, x-amz-user-agent",
        ),
        ("access-control-allow-methods", "POST"),
    ]
}

fn cognito_error(kind: &str, message: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        cors(),
        axum::Json(json!({"__type": kind, "message": message})),
    )
        .into_response()
}

impl StaffPoolDoor {
    pub fn new(moto: &str) -> Arc<StaffPoolDoor> {
        Arc::new(StaffPoolDoor {
            moto: moto.trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
            revoked: Mutex::new(HashSet::new()),
        })
    }

    fn is_revoked(&self, token: &str) -> bool {
        self.revoked.lock().map(|set| set.contains(token)).unwrap_or(true)
    }

    async fn answer(&self, headers: &HeaderMap, body: String) -> Response {
        let target = headers
            .get("x-amz-target")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let parsed: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        match target.rsplit('.').next().unwrap_or_default() {
            "RevokeToken" => {
                let Some(token) = parsed["Token"].as_str() else {
                    return cognito_error("InvalidParameterException", "Token is required.");
                };
                if let Ok(mut revoked) = self.revoked.lock() {
                    revoked.insert(token.to_owned());
                }
                return (
                    StatusCode::OK,
                    cors(),
                    [("content-type", "application/x-amz-json-1.1")],
                    "{}",
                )
                    .into_response();
            }
            "InitiateAuth"
                if parsed["AuthFlow"] == "REFRESH_TOKEN_AUTH"
                    && parsed["AuthParameters"]["REFRESH_TOKEN"]
                        .as_str()
                        .is_some_and(|token| self.is_revoked(token)) =>
            {
                return cognito_error("NotAuthorizedException", "Refresh Token has been revoked");
            }
            _ => {}
        }
        let sent = self
            .http
            .post(format!("{}/", self.moto))
            .header("x-amz-target", target)
            .header("content-type", "application/x-amz-json-1.1")
            .body(body)
            .send()
            .await;
        let Ok(answer) = sent else {
            return cognito_error("InternalErrorException", "moto could not be reached");
        };
        let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
        let text = answer.text().await.unwrap_or_default();
        (status, cors(), [("content-type", "application/x-amz-json-1.1")], text).into_response()
    }
}

/// Serves `door` on `listener`: Cognito's one JSON endpoint, and its CORS preflight.
pub async fn serve(listener: tokio::net::TcpListener, door: Arc<StaffPoolDoor>) {
    let app = axum::Router::new().route(
        "/",
        axum::routing::post(move |headers: HeaderMap, body: String| {
            let door = Arc::clone(&door);
            async move { door.answer(&headers, body).await }
        })
        .options(|| async { (StatusCode::NO_CONTENT, cors()) }),
    );
    let _ = axum::serve(listener, app).await;
}

/// Binds `127.0.0.1:port` (0 for any) and serves `door` in the background.
pub async fn spawn(port: u16, door: Arc<StaffPoolDoor>) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let address = listener.local_addr()?;
    tokio::spawn(serve(listener, door));
    Ok(address)
}
