//! The guest pool's sign-in under `make run` and in the browser tests
//! (contract 27). moto's Cognito has no `USER_AUTH` flow, no `EMAIL_OTP`
//! and no `SignUp` without a password, so this stand-in answers the four
//! calls the chat page makes, as Cognito's JSON API does (`X-Amz-Target`,
//! `application/x-amz-json-1.1`, errors as `{"__type", "message"}`, CORS
//! for the page):
//!
//! - `SignUp` (no password): a code is "sent" to the address;
//! - `ConfirmSignUp`: the code, for a `Session`;
//! - `InitiateAuth` with `USER_AUTH`: with that `Session`, the tokens; with
//!   `PREFERRED_CHALLENGE=EMAIL_OTP`, an `EMAIL_OTP` challenge (a code is
//!   sent to a known address);
//! - `RespondToAuthChallenge` with `EMAIL_OTP_CODE`: the tokens;
//! - `InitiateAuth` with `REFRESH_TOKEN_AUTH`: new tokens, from moto's own
//!   pool (which implements that flow), when the page's ID token expired.
//!
//! A code is 6 digits from the operating system's secure generator, valid
//! [`CODE_LIFETIME`], used once, and dead after [`WRONG_TRIES`] wrong tries.
//! The answers are the same whether or not an address is known: `SignUp`
//! of a known address answers as for a new one (and its code signs the
//! guest in), and a challenge for an unknown one looks like any other
//! (no code is sent, so none is right). Each code "sent" is printed and
//! appended to the outbox (one JSON line: `to`, `code`), which tests read.
//!
//! The tokens are moto's own: once a code is right, the guest is made in
//! moto's guest pool (`AdminCreateUser`, e-mail verified, a random password
//! nobody sees) and signed in there (`AdminInitiateAuth`), so one JWKS
//! serves the pool's tokens and the page server's door checks them as API
//! Gateway's authorizer checks the guest pool's.
//!
//! What it does not emulate (decisions.md): the pool's other calls,
//! resending a code, `UserNotConfirmedException`, and Cognito's
//! `UsernameExistsException` on `SignUp` (which Cognito's
//! `PreventUserExistenceErrors` does not cover; the page handles it).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

pub const CODE_LIFETIME: Duration = Duration::from_secs(10 * 60);
pub const WRONG_TRIES: u32 = 3;
/// A session between a code and the tokens: the template's
/// `SignInSessionMinutes` (10), its clients' `AuthSessionValidity`.
const SESSION_LIFETIME: Duration = Duration::from_secs(10 * 60);
const REGION: &str = "eu-west-1";

/// The pool as moto holds it.
#[derive(Debug, Clone)]
pub struct PoolIds {
    pub pool_id: String,
    pub client_id: String,
    pub issuer: String,
}

pub struct GuestPool {
    moto: String,
    ids: PoolIds,
    http: reqwest::Client,
    outbox: PathBuf,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Sessions (random), each waiting for a code or holding a right one.
    sessions: HashMap<String, Waiting>,
    /// The random password of each guest made in moto, by address.
    passwords: HashMap<String, String>,
    /// Tokens renewed (`REFRESH_TOKEN_AUTH`).
    refreshes: usize,
}

struct Waiting {
    email: String,
    /// `None`: no code was sent (an unknown address's challenge).
    code: Option<String>,
    until: Instant,
    wrong: u32,
    /// The code was right: the session signs in, once.
    proved: bool,
}

/// A Cognito error: its type and message, answered as 400.
#[derive(Debug)]
pub struct CognitoError(&'static str, &'static str);

impl IntoResponse for CognitoError {
    fn into_response(self) -> Response {
        (
            StatusCode::BAD_REQUEST,
            cors(),
            axum::Json(json!({"__type": self.0, "message": self.1})),
        )
            .into_response()
    }
}

const WRONG_CODE: CognitoError = CognitoError("CodeMismatchException", "Invalid code received for user.");
const DEAD_CODE: CognitoError = CognitoError(
    "NotAuthorizedException",
    "Too many wrong codes, or the code expired: ask for a new one.",
);

impl GuestPool {
    /// Makes the guest pool and its client in moto (at `moto`), as the
    /// template makes them: sign-in by e-mail, the client reading `email`
    /// and `email_verified` (so moto puts them in the ID token).
    pub async fn create(moto: &str, outbox: PathBuf) -> Result<Arc<GuestPool>, String> {
        let http = reqwest::Client::new();
        let pool = call(
            &http,
            moto,
            "CreateUserPool",
            json!({"PoolName": "refund-chat-guests", "UsernameAttributes": ["email"],
                   "AutoVerifiedAttributes": ["email"]}),
        )
        .await?;
        let pool_id = pool["UserPool"]["Id"].as_str().ok_or("no pool id")?.to_owned();
        let client = call(
            &http,
            moto,
            "CreateUserPoolClient",
            json!({"UserPoolId": pool_id, "ClientName": "refund-chat-guests", "GenerateSecret": false,
                   "ExplicitAuthFlows": ["ALLOW_ADMIN_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
                   "ReadAttributes": ["email", "email_verified"], "WriteAttributes": ["locale"]}),
        )
        .await?;
        let client_id = client["UserPoolClient"]["ClientId"]
            .as_str()
            .ok_or("no client id")?
            .to_owned();
        Ok(Arc::new(GuestPool {
            moto: moto.trim_end_matches('/').to_owned(),
            ids: PoolIds {
                issuer: format!("https://cognito-idp.{REGION}.amazonaws.com/{pool_id}"),
                pool_id,
                client_id,
            },
            http,
            outbox,
            state: Mutex::default(),
        }))
    }

    pub fn ids(&self) -> &PoolIds {
        &self.ids
    }

    /// The codes "sent" so far, oldest first: (to, code).
    pub fn outbox(&self) -> Vec<(String, String)> {
        std::fs::read_to_string(&self.outbox)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter_map(|sent| Some((sent["to"].as_str()?.to_owned(), sent["code"].as_str()?.to_owned())))
            .collect()
    }

    /// One call of the page's, by its `X-Amz-Target`.
    pub async fn answer(&self, target: &str, body: &Value) -> Result<Value, CognitoError> {
        if body["ClientId"] != self.ids.client_id.as_str() {
            return Err(CognitoError(
                "ResourceNotFoundException",
                "User pool client does not exist.",
            ));
        }
        match target.rsplit('.').next().unwrap_or_default() {
            "SignUp" => self.sign_up(body),
            "ConfirmSignUp" => self.confirm_sign_up(body),
            "InitiateAuth" => self.initiate_auth(body).await,
            "RespondToAuthChallenge" => self.respond_to_challenge(body).await,
            _ => Err(CognitoError(
                "InvalidActionException",
                "Not emulated by the local guest pool.",
            )),
        }
    }

    fn sign_up(&self, body: &Value) -> Result<Value, CognitoError> {
        let email = address(&body["Username"])?;
        signed_up_as_cognito_takes(body, &email)?;
        let code = six_digits()?;
        self.send(&email, &code);
        // The code is the sign-up's, kept by address until confirmed.
        self.keep(format!("signup:{}", email.to_lowercase()), &email, Some(code));
        Ok(json!({
            "UserConfirmed": false,
            "UserSub": "pending",
            "CodeDeliveryDetails": {"Destination": masked(&email), "DeliveryMedium": "EMAIL", "AttributeName": "email"},
        }))
    }

    fn confirm_sign_up(&self, body: &Value) -> Result<Value, CognitoError> {
        let email = address(&body["Username"])?;
        let key = format!("signup:{}", email.to_lowercase());
        self.check_code(&key, body["ConfirmationCode"].as_str().unwrap_or_default())?;
        let session = random_session()?;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.sessions.remove(&key);
        state.sessions.insert(
            session.clone(),
            Waiting {
                email,
                code: None,
                until: Instant::now() + SESSION_LIFETIME,
                wrong: 0,
                proved: true,
            },
        );
        Ok(json!({"Session": session}))
    }

    async fn initiate_auth(&self, body: &Value) -> Result<Value, CognitoError> {
        if body["AuthFlow"] == "REFRESH_TOKEN_AUTH" {
            // moto's pool issued the tokens, and renews them itself.
            if let Ok(mut state) = self.state.lock() {
                state.refreshes += 1;
            }
            return call(&self.http, &self.moto, "InitiateAuth", body.clone())
                .await
                .map_err(|_| CognitoError("NotAuthorizedException", "Invalid Refresh Token."));
        }
        if body["AuthFlow"] != "USER_AUTH" {
            return Err(CognitoError("InvalidParameterException", "Only USER_AUTH is emulated."));
        }
        let email = address(&body["AuthParameters"]["USERNAME"])?;
        if let Some(session) = body["Session"].as_str() {
            let proved = self.take_proved(session, &email)?;
            return self.tokens(&proved).await;
        }
        if body["AuthParameters"]["PREFERRED_CHALLENGE"] != "EMAIL_OTP" {
            return Err(CognitoError(
                "InvalidParameterException",
                "EMAIL_OTP is the pool's one factor.",
            ));
        }
        let known = self.exists(&email).await;
        let code = if known { Some(six_digits()?) } else { None };
        if let Some(code) = &code {
            self.send(&email, code);
        }
        let session = random_session()?;
        self.keep(session.clone(), &email, code);
        Ok(json!({
            "ChallengeName": "EMAIL_OTP",
            "Session": session,
            "ChallengeParameters": {"CODE_DELIVERY_DELIVERY_MEDIUM": "EMAIL", "CODE_DELIVERY_DESTINATION": masked(&email)},
        }))
    }

    async fn respond_to_challenge(&self, body: &Value) -> Result<Value, CognitoError> {
        if body["ChallengeName"] != "EMAIL_OTP" {
            return Err(CognitoError("InvalidParameterException", "Only EMAIL_OTP is emulated."));
        }
        let session = body["Session"].as_str().unwrap_or_default();
        let responses = &body["ChallengeResponses"];
        let email = address(&responses["USERNAME"])?;
        self.check_code(session, responses["EMAIL_OTP_CODE"].as_str().unwrap_or_default())?;
        let proved = self.take_proved(session, &email)?;
        self.tokens(&proved).await
    }

    fn keep(&self, key: String, email: &str, code: Option<String>) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.sessions.insert(
            key,
            Waiting {
                email: email.to_owned(),
                code,
                until: Instant::now() + CODE_LIFETIME,
                wrong: 0,
                proved: false,
            },
        );
    }

    /// Marks the code of `key` right, or counts a wrong try: the third
    /// wrong one, or a code past its time, ends it.
    fn check_code(&self, key: &str, typed: &str) -> Result<(), CognitoError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let Some(waiting) = state.sessions.get_mut(key) else {
            return Err(DEAD_CODE);
        };
        if waiting.until < Instant::now() || waiting.wrong >= WRONG_TRIES || waiting.proved {
            state.sessions.remove(key);
            return Err(DEAD_CODE);
        }
        if waiting.code.as_deref().is_some_and(|code| code == typed) {
            waiting.proved = true;
            return Ok(());
        }
        waiting.wrong += 1;
        Err(WRONG_CODE)
    }

    /// The address of a session whose code was right, once.
    fn take_proved(&self, session: &str, email: &str) -> Result<String, CognitoError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match state.sessions.remove(session) {
            Some(waiting)
                if waiting.proved && waiting.until >= Instant::now() && waiting.email.eq_ignore_ascii_case(email) =>
            {
                Ok(waiting.email)
            }
            _ => Err(CognitoError("NotAuthorizedException", "Invalid session for the user.")),
        }
    }

    fn send(&self, email: &str, code: &str) {
        println!("guest pool: the one-time code for {email} is {code} (valid 10 minutes)");
        let line = json!({"to": email, "code": code}).to_string() + "\n";
        use std::io::Write;
        if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(&self.outbox) {
            let _ = file.write_all(line.as_bytes());
        }
    }

    async fn exists(&self, email: &str) -> bool {
        call(
            &self.http,
            &self.moto,
            "AdminGetUser",
            json!({"UserPoolId": self.ids.pool_id, "Username": email}),
        )
        .await
        .is_ok()
    }

    /// The guest in moto's pool (made the first time), signed in there.
    async fn tokens(&self, email: &str) -> Result<Value, CognitoError> {
        let unavailable = |_| CognitoError("InternalErrorException", "moto's pool did not answer.");
        let known = self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .passwords
            .get(&email.to_lowercase())
            .cloned();
        let password = match known {
            Some(password) => password,
            None => {
                let password = format!("Guest-{}9a", random_session()?);
                let pool = &self.ids.pool_id;
                call(&self.http, &self.moto, "AdminCreateUser", json!({
                    "UserPoolId": pool, "Username": email, "TemporaryPassword": password, "MessageAction": "SUPPRESS",
                    "UserAttributes": [{"Name": "email", "Value": email}, {"Name": "email_verified", "Value": "true"}],
                }))
                .await
                .map_err(unavailable)?;
                call(
                    &self.http,
                    &self.moto,
                    "AdminSetUserPassword",
                    json!({
                        "UserPoolId": pool, "Username": email, "Password": password, "Permanent": true,
                    }),
                )
                .await
                .map_err(unavailable)?;
                self.state
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .passwords
                    .insert(email.to_lowercase(), password.clone());
                password
            }
        };
        let signed_in = call(
            &self.http,
            &self.moto,
            "AdminInitiateAuth",
            json!({
                "UserPoolId": self.ids.pool_id, "ClientId": self.ids.client_id, "AuthFlow": "ADMIN_USER_PASSWORD_AUTH",
                "AuthParameters": {"USERNAME": email, "PASSWORD": password},
            }),
        )
        .await
        .map_err(unavailable)?;
        Ok(json!({"AuthenticationResult": signed_in["AuthenticationResult"], "ChallengeParameters": {}}))
    }

    /// How many times a page renewed its tokens.
    pub fn refreshes(&self) -> usize {
        self.state.lock().map(|state| state.refreshes).unwrap_or(0)
    }
}

/// One call of moto's Cognito JSON API, in the pool's region.
async fn call(http: &reqwest::Client, moto: &str, action: &str, body: Value) -> Result<Value, String> {
    let answer = http
        .post(format!("{}/", moto.trim_end_matches('/')))
        .header("x-amz-target", format!("AWSCognitoIdentityProviderService.{action}"))
        .header("content-type", "application/x-amz-json-1.1")
        // moto reads the region from the credential's scope.
        .header(
            "authorization",
            format!("AWS4-HMAC-SHA256 Credential=local/20261206/{REGION}/cognito-idp/aws4_request, SignedHeaders=host, Signature=0"),
        )
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = answer.status();
    let text = answer.text().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("{action}: {status} {text}"));
    }
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

/// What Cognito refuses of a password-less `SignUp` from the pool's
/// client: no `email` attribute (the sign-in's one factor needs it), or an
/// attribute the client may not write (`WriteAttributes` is `[email]`).
fn signed_up_as_cognito_takes(body: &Value, email: &str) -> Result<(), CognitoError> {
    let attributes = body["UserAttributes"].as_array().cloned().unwrap_or_default();
    if attributes.iter().any(|a| a["Name"] != "email") {
        return Err(CognitoError(
            "NotAuthorizedException",
            "A client attempted to write unauthorized attribute",
        ));
    }
    let given = attributes.iter().find_map(|a| a["Value"].as_str());
    if given.is_none_or(|given| !given.eq_ignore_ascii_case(email)) {
        return Err(CognitoError(
            "InvalidParameterException",
            "Attributes did not conform to the schema: email is required for a sign-up without a password.",
        ));
    }
    Ok(())
}

fn address(value: &Value) -> Result<String, CognitoError> {
    value
        .as_str()
        .and_then(refund_chat::guest::GuestEmail::parse)
        .map(|email| email.expose().to_owned())
        .ok_or(CognitoError(
            "InvalidParameterException",
            "Username should be an email.",
        ))
}

/// `a***@e***`, as Cognito shows where a code went.
fn masked(email: &str) -> String {
    let (local, domain) = email.split_once('@').unwrap_or((email, ""));
    let first = |text: &str| text.chars().next().map(String::from).unwrap_or_default();
    format!("{}***@{}***", first(local), first(domain))
}

/// Six digits, uniform, from the operating system's generator.
fn six_digits() -> Result<String, CognitoError> {
    const SPAN: u32 = 1_000_000;
    // The largest multiple of SPAN that fits: above it, a draw is biased.
    const FAIR: u32 = u32::MAX - u32::MAX % SPAN;
    loop {
        let mut bytes = [0u8; 4];
        getrandom::fill(&mut bytes).map_err(|_| CognitoError("InternalErrorException", "no randomness"))?;
        let drawn = u32::from_le_bytes(bytes);
        if drawn < FAIR {
            return Ok(format!("{:06}", drawn % SPAN));
        }
    }
}

fn random_session() -> Result<String, CognitoError> {
    refund_chat::conversation::random_hex::<16>().map_err(|_| CognitoError("InternalErrorException", "no randomness"))
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

/// Serves `pool` on `listener`: Cognito's one JSON endpoint, and its CORS preflight.
pub async fn serve(listener: tokio::net::TcpListener, pool: Arc<GuestPool>) {
    let app = axum::Router::new().route(
        "/",
        axum::routing::post(move |headers: HeaderMap, body: String| {
            let pool = Arc::clone(&pool);
            async move {
                let target = headers
                    .get("x-amz-target")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                let Ok(body) = serde_json::from_str::<Value>(&body) else {
                    return CognitoError("SerializationException", "The body is not JSON.").into_response();
                };
                match pool.answer(&target, &body).await {
                    Ok(answer) => (
                        StatusCode::OK,
                        cors(),
                        [("content-type", "application/x-amz-json-1.1")],
                        answer.to_string(),
                    )
                        .into_response(),
                    Err(error) => error.into_response(),
                }
            }
        })
        .options(|| async { (StatusCode::NO_CONTENT, cors()) }),
    );
    let _ = axum::serve(listener, app).await;
}

/// Binds `127.0.0.1:port` (0 for any) and serves `pool` in the background.
pub async fn spawn(port: u16, pool: Arc<GuestPool>) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let address = listener.local_addr()?;
    tokio::spawn(serve(listener, pool));
    Ok(address)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_six_digits() {
        for _ in 0..1000 {
            let code = six_digits().unwrap();
            assert_eq!(code.len(), 6);
            assert!(code.bytes().all(|b| b.is_ascii_digit()));
        }
    }

    /// The seventh review: the page signed up with no attributes, which
    /// Cognito refuses of a password-less sign-up; and a client that writes
    /// only `email` may send no other attribute.
    #[test]
    fn a_sign_up_is_refused_as_cognito_refuses_it() {
        let email = "ada@example.com";
        for (attributes, refused) in [
            (json!([]), Some("InvalidParameterException")),
            (
                json!([{"Name": "email", "Value": "eve@example.com"}]),
                Some("InvalidParameterException"),
            ),
            (
                json!([{"Name": "email", "Value": email}, {"Name": "name", "Value": "Ada"}]),
                Some("NotAuthorizedException"),
            ),
            (json!([{"Name": "email", "Value": "Ada@Example.com"}]), None),
        ] {
            let body = json!({"Username": email, "UserAttributes": attributes});
            let answer = signed_up_as_cognito_takes(&body, email).err().map(|e| e.0);
            assert_eq!(answer, refused, "{attributes}");
        }
    }

    #[test]
    fn where_a_code_went_is_masked() {
        assert_eq!(masked("ada@example.com"), "a***@e***");
    }
}
