//! `refund-chat-staff`'s edge (contract 24): the support team's desk under
//! `/support/staff/` on the customers' REST API, behind the staff pool's
//! Cognito authorizer. It routes, checks who is asking (no data is read
//! for anyone outside `STAFF_GROUP`; money also needs `APPROVER_GROUP`),
//! holds each click's `Idempotency-Key`, and hands the decision to
//! [`crate::staff::decide`], the code `refund-chat-admin` runs too.

pub mod answer;
pub mod identity;
pub mod page;

use lambda_http::http::{Method, StatusCode, header};
use lambda_http::{Body, Request, RequestExt, Response};
use serde_json::{Value, json};

use crate::config::DeskConfig;
use crate::ledger::Confirmed;
use crate::ledger::dynamo::clicks::Click;
use crate::ledger::dynamo::holders::holder_key;
use crate::router::Intent;
use crate::staff::decide::{self, Decided};
use crate::staff::read::{self, Links};
use crate::staff::{Staff, decide::Outcome, hold, internal_note, saved_replies, search};

use answer::Answer;
use identity::{Member, Role};

pub const PREFIX: &str = "/support/staff";

/// The desk for the life of the container.
pub struct StaffApp {
    pub staff: Staff,
    config: DeskConfig,
    page: page::PageConfig,
    links: Links,
}

/// A decision a POST asks for, its fields checked.
#[derive(Debug, Clone, PartialEq)]
enum Asked {
    Approve {
        id: String,
        intent: Option<Intent>,
    },
    Reject {
        id: String,
        reason: String,
        intent: Option<Intent>,
    },
    Resolve {
        id: String,
        confirmed: Confirmed,
    },
    Reply {
        id: String,
        text: String,
    },
    Close {
        id: String,
        text: Option<String>,
        intent: Option<Intent>,
    },
    Claim {
        id: String,
        take_over: bool,
    },
    Release {
        id: String,
    },
    Note {
        id: String,
        text: String,
    },
}

/// The role a decision's route needs; none for a route that is not one.
fn needs(parts: &[&str]) -> Option<Role> {
    match parts {
        ["refunds", _, "approve" | "reject" | "resolve"] => Some(Role::Approver),
        ["conversations", _, "reply" | "claim" | "release" | "notes"] | ["handoffs", _, "close"] => Some(Role::Staff),
        _ => None,
    }
}

/// The request's path below [`PREFIX`], in decoded segments.
fn segments(path: &str) -> Option<Vec<String>> {
    let rest = path.strip_prefix(PREFIX)?;
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None;
    }
    Some(
        rest.split('/')
            .filter(|s| !s.is_empty())
            .map(|s| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned())
            .collect(),
    )
}

/// `body` with every string masked as the text it is (contract 23), not
/// as JSON's escaped form of it.
fn masked_texts(body: &Value) -> Value {
    match body {
        Value::String(text) => Value::String(crate::mask::masked(text).into_owned()),
        Value::Array(items) => Value::Array(items.iter().map(masked_texts).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(name, value)| (name.clone(), masked_texts(value)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn intent_field(body: &Value) -> Result<Option<Intent>, String> {
    match &body["intent"] {
        Value::Null => Ok(None),
        Value::String(name) => Intent::parse(name).map(Some).ok_or_else(|| {
            let names: Vec<&str> = Intent::ALL.iter().map(|i| i.as_str()).collect();
            format!("intent {name:?} is not one of {}", names.join(", "))
        }),
        _ => Err("intent must be a string".into()),
    }
}

fn text_field(body: &Value, name: &str) -> Result<Option<String>, String> {
    match &body[name] {
        Value::Null => Ok(None),
        Value::String(text) => Ok(Some(text.clone())),
        _ => Err(format!("{name} must be a string")),
    }
}

/// The decision a POST names, its body read: `Err` a 422's words.
fn asked(parts: &[&str], body: &Value) -> Result<Option<Asked>, String> {
    let id = |i: usize| parts[i].to_owned();
    Ok(Some(match parts {
        ["refunds", _, "approve"] => Asked::Approve {
            id: id(1),
            intent: intent_field(body)?,
        },
        ["refunds", _, "reject"] => Asked::Reject {
            id: id(1),
            reason: text_field(body, "reason")?.ok_or("reason is required")?,
            intent: intent_field(body)?,
        },
        ["refunds", _, "resolve"] => {
            let executed = text_field(body, "executed")?;
            let not_executed = match &body["not_executed"] {
                Value::Null => false,
                Value::Bool(flag) => *flag,
                _ => return Err("not_executed must be true".into()),
            };
            let confirmed = match (executed, not_executed) {
                (Some(refund_id), false) => Confirmed::Executed { refund_id },
                (None, true) => Confirmed::NotExecuted,
                _ => return Err("give either executed (the refund id payments gave) or not_executed: true".into()),
            };
            Asked::Resolve { id: id(1), confirmed }
        }
        ["conversations", _, "reply"] => Asked::Reply {
            id: id(1),
            text: text_field(body, "text")?.ok_or("text is required")?,
        },
        ["conversations", _, "claim"] => Asked::Claim {
            id: id(1),
            take_over: match &body["take_over"] {
                Value::Null => false,
                Value::Bool(flag) => *flag,
                _ => return Err("take_over must be true or false".into()),
            },
        },
        ["conversations", _, "release"] => Asked::Release { id: id(1) },
        ["conversations", _, "notes"] => Asked::Note {
            id: id(1),
            text: text_field(body, "text")?.ok_or("text is required")?,
        },
        ["handoffs", _, "close"] => Asked::Close {
            id: id(1),
            text: text_field(body, "text")?,
            intent: intent_field(body)?,
        },
        _ => return Ok(None),
    }))
}

impl StaffApp {
    pub fn new(config: DeskConfig, staff: Staff, help_origins: Vec<String>) -> StaffApp {
        let links = Links {
            trace: config.trace_url_template.clone(),
            order: config.order_url_template.clone(),
        };
        let page = page::PageConfig {
            sign_in_url: config.sign_in_url.clone(),
            client_id: config.client_id.clone(),
            link_origins: page::link_origins(
                help_origins,
                [
                    config.trace_url_template.as_deref(),
                    config.order_url_template.as_deref(),
                ],
            ),
            approver_group: config.approver_group.clone(),
            live_url: config.staff.live.realtime_url.clone(),
            live_host: Some(crate::web_page::host_of(config.staff.live.events_url.as_deref()))
                .filter(|h| !h.is_empty()),
            live_poll_seconds: config.staff.live.fallback_poll_secs,
        };
        StaffApp {
            staff,
            config,
            page,
            links,
        }
    }

    pub fn config(&self) -> &DeskConfig {
        &self.config
    }

    /// One request, answered.
    pub async fn answer(&self, request: Request) -> Response<Body> {
        let request_id = request
            .lambda_context_ref()
            .map(|context| context.request_id.clone())
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| "unknown".to_owned());
        // `…/support/staff` would load the page with its files resolved one
        // folder up: send the browser to the folder (relative, so the
        // stage's prefix stays).
        if request.raw_http_path() == PREFIX && matches!(*request.method(), Method::GET | Method::HEAD) {
            return page::to_folder();
        }
        let Some(parts) = segments(request.raw_http_path()) else {
            return Answer::error(StatusCode::NOT_FOUND, "no such route").response(&request_id, false);
        };
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        // The page and its files hold no data: no person needed.
        if parts.len() <= 1
            && matches!(
                parts.first().copied(),
                None | Some("index.html" | "desk.js" | "desk.css")
            )
        {
            if request.method() != Method::GET && request.method() != Method::HEAD {
                return method_not_allowed("GET", &request_id);
            }
            return page::serve(parts.first().copied().unwrap_or(""), &self.page)
                .unwrap_or_else(|| Answer::error(StatusCode::NOT_FOUND, "no such file").response(&request_id, false));
        }
        // Nothing is read for anyone outside the support team.
        let member = match identity::member(&request, &self.config) {
            Ok(member) => member,
            Err(refused @ identity::Refused::Unauthenticated) => {
                return Answer::error(StatusCode::UNAUTHORIZED, refused.to_string()).response(&request_id, false);
            }
            Err(refused @ identity::Refused::Misconfigured) => {
                return Answer::error(StatusCode::INTERNAL_SERVER_ERROR, refused.to_string())
                    .response(&request_id, false);
            }
            Err(refused) => {
                return Answer::error(StatusCode::FORBIDDEN, refused.to_string()).response(&request_id, false);
            }
        };
        let Some(role) = member.role(&self.config) else {
            tracing::warn!(event = "staff_refused", sub = %crate::untrusted::visible(&member.sub), why = "no staff group");
            return Answer::error(StatusCode::FORBIDDEN, identity::Refused::NotStaff.to_string())
                .response(&request_id, false);
        };
        let (answer, replayed) = match (request.method().clone(), parts.as_slice()) {
            (Method::PUT | Method::DELETE, ["saved-replies", id]) => {
                (self.manage_saved_reply(&request, id, &member, role).await, false)
            }
            (_, ["saved-replies", _]) => return method_not_allowed("PUT, DELETE", &request_id),
            (Method::GET, _) => (self.read(&request, &parts, &member, role).await, false),
            (Method::POST, _) => self.decide(&request, &parts, &member, role).await,
            _ => return method_not_allowed("GET, POST", &request_id),
        };
        answer.response(&request_id, replayed)
    }

    async fn read(&self, request: &Request, parts: &[&str], member: &Member, role: Role) -> Answer {
        let read = match parts {
            ["queue"] => read::queue(&self.staff).await.map(|queue| {
                metrics::histogram!("StaffQueueOldestWait").record(queue.oldest_wait_secs as f64);
                let mut body = json!(queue.seen_by(&holder_key(member.person())));
                body["you"] = json!({"name": member.name, "approver": role == Role::Approver});
                Some(body)
            }),
            ["refunds", id] => read::refund(&self.staff, id).await.map(|view| view.map(|v| json!(v))),
            ["saved-replies"] => saved_replies::list(&self.staff)
                .await
                .map(|replies| Some(json!({"saved_replies": replies, "max": saved_replies::MAX_SAVED_REPLIES}))),
            ["conversations", id] => {
                // The page's re-read every 10 s asks `panel=false`: the panel
                // (up to 50 conversations' and 200 records' reads) is read
                // when a conversation is opened, not on every tick.
                let panel = request.query_string_parameters().first("panel") != Some("false");
                let read = read::conversation(&self.staff, &decide::conversation_named(id), &self.links).await;
                let you = holder_key(member.person());
                match read.map(|view| view.map(|view| view.seen_by(&you))) {
                    Ok(Some(view)) if panel => {
                        search::customer_panel(&self.staff, &view.customer, &view.id, &self.links)
                            .await
                            .map(|panel| {
                                let mut body = json!(view);
                                body["customer_panel"] = json!(panel);
                                Some(body)
                            })
                    }
                    other => other.map(|view| view.map(|v| json!(v))),
                }
            }
            ["search"] => {
                let params = request.query_string_parameters();
                let q = params.first("q").unwrap_or_default();
                match search::checked_query(q) {
                    Ok(q) => search::search(&self.staff, q, &self.links)
                        .await
                        .map(|found| Some(json!(found))),
                    Err(why) => return Answer::error(StatusCode::UNPROCESSABLE_ENTITY, why),
                }
            }
            _ => return Answer::error(StatusCode::NOT_FOUND, "no such route"),
        };
        match read {
            Ok(Some(body)) => Answer::ok(body),
            Ok(None) => Answer::error(
                StatusCode::NOT_FOUND,
                format!("no {} with that id (or it expired)", parts[0].trim_end_matches('s')),
            ),
            Err(error) => Answer::ledger(&error),
        }
    }

    /// A saved reply's `PUT` or `DELETE` (contract 30): the approvers'. Each
    /// is idempotent as HTTP's verbs are, so no `Idempotency-Key` is asked.
    async fn manage_saved_reply(&self, request: &Request, id: &str, member: &Member, role: Role) -> Answer {
        if role < Role::Approver {
            tracing::warn!(event = "staff_refused", sub = %crate::untrusted::visible(&member.sub), why = "not an approver");
            return Answer::error(
                StatusCode::FORBIDDEN,
                "saved replies are changed by the approvers' group",
            );
        }
        let by = member.person();
        let decided = if request.method() == Method::DELETE {
            saved_replies::delete(&self.staff, id, by).await
        } else {
            let body: Value = match serde_json::from_slice::<Value>(request.body().as_ref()) {
                Ok(value @ Value::Object(_)) => value,
                _ => return Answer::error(StatusCode::BAD_REQUEST, "the body must be a JSON object"),
            };
            let (title, text) = match (text_field(&body, "title"), text_field(&body, "text")) {
                (Ok(Some(title)), Ok(Some(text))) => (title, text),
                (Err(why), _) | (_, Err(why)) => return Answer::error(StatusCode::UNPROCESSABLE_ENTITY, why),
                _ => return Answer::error(StatusCode::UNPROCESSABLE_ENTITY, "title and text are required"),
            };
            saved_replies::save(&self.staff, id, &title, &text, by).await
        };
        match decided {
            Ok(decided) => Answer::decided(&decided),
            Err(error) => Answer::ledger(&error),
        }
    }

    async fn decide(&self, request: &Request, parts: &[&str], member: &Member, role: Role) -> (Answer, bool) {
        // Who may ask is known from the route: refused before the body is read.
        let Some(needs) = needs(parts) else {
            return (Answer::error(StatusCode::NOT_FOUND, "no such route"), false);
        };
        if role < needs {
            tracing::warn!(event = "staff_refused", sub = %crate::untrusted::visible(&member.sub), why = "not an approver");
            return (
                Answer::error(StatusCode::FORBIDDEN, "deciding money needs the approvers' group"),
                false,
            );
        }
        let body: Value = match request.body().as_ref() {
            [] => Value::Object(Default::default()),
            bytes => match serde_json::from_slice::<Value>(bytes) {
                Ok(value @ Value::Object(_)) => value,
                _ => {
                    return (
                        Answer::error(StatusCode::BAD_REQUEST, "the body must be a JSON object"),
                        false,
                    );
                }
            },
        };
        let asked = match asked(parts, &body) {
            Ok(Some(asked)) => asked,
            Ok(None) => return (Answer::error(StatusCode::NOT_FOUND, "no such route"), false),
            Err(why) => return (Answer::error(StatusCode::UNPROCESSABLE_ENTITY, why), false),
        };
        let key = match request
            .headers()
            .get(answer::KEY_HEADER)
            .map(|value| crate::intake::admission::key::IdempotencyKey::parse(value.as_bytes()))
        {
            Some(Ok(key)) => key,
            Some(Err(malformed)) => return (Answer::error(StatusCode::BAD_REQUEST, malformed.to_string()), false),
            None => {
                return (
                    Answer::error(
                        StatusCode::BAD_REQUEST,
                        "every decision needs an Idempotency-Key header (one per click)",
                    ),
                    false,
                );
            }
        };
        // Of the body as kept: every text masked as a person reads it (a
        // card split across a line break too), never a hash of a card number.
        let fingerprint = crate::intake::admission::key::body_sha256(
            format!("POST {}\n{}", parts.join("/"), masked_texts(&body)).as_bytes(),
        );
        let ttl = self.config.idempotency_ttl;
        match self
            .staff
            .ledger
            .begin_click(&member.sub, key.as_str(), &fingerprint, ttl)
            .await
        {
            Ok(Click::Fresh) => {}
            Ok(Click::Answered { status, body }) => {
                let body = serde_json::from_str(&body).unwrap_or(Value::Null);
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
                return (Answer { status, body }, true);
            }
            Ok(Click::Mismatch) => {
                return (
                    Answer::error(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "this Idempotency-Key was sent with another request",
                    ),
                    false,
                );
            }
            Ok(Click::Running) => {
                return (
                    Answer::error(
                        StatusCode::CONFLICT,
                        "this click is still being decided, or its outcome is not known: open the item again to see it",
                    ),
                    false,
                );
            }
            Err(error) => return (Answer::ledger(&error), false),
        }
        // The click, as the reply's append is conditional on it.
        let click = crate::intake::admission::key::body_sha256(format!("{}\0{}", member.sub, key.as_str()).as_bytes());
        let answer = match self.run(asked, member, &click).await {
            Ok(decided) => Answer::decided(&decided),
            Err(error) => {
                // The same click may try again: every decision is one
                // conditional write, and a reply's append is conditional on
                // the click itself, so it never posts twice.
                if let Err(error) = self.staff.ledger.release_click(&member.sub, key.as_str()).await {
                    tracing::error!(event = "ledger", op = "release_click", error = %error);
                }
                return (Answer::ledger(&error), false);
            }
        };
        if let Err(error) = self
            .staff
            .ledger
            .answer_click(
                &member.sub,
                key.as_str(),
                answer.status.as_u16(),
                &answer.body.to_string(),
            )
            .await
        {
            tracing::error!(event = "ledger", op = "answer_click", error = %error, "the click's answer is not kept");
        }
        (answer, false)
    }

    async fn run(&self, asked: Asked, member: &Member, click: &str) -> Result<Decided, crate::ledger::LedgerError> {
        let staff = &self.staff;
        let by = member.person();
        match asked {
            Asked::Approve { id, intent } => {
                let decided = decide::approve(staff, &id, by).await?;
                decide::with_verdict_on_record(staff, decided, &id, intent, by).await
            }
            Asked::Reject { id, reason, intent } => {
                let decided = decide::reject(staff, &id, by, &reason).await?;
                decide::with_verdict_on_record(staff, decided, &id, intent, by).await
            }
            Asked::Resolve { id, confirmed } => decide::resolve(staff, &id, by, &confirmed).await,
            Asked::Reply { id, text } => decide::reply(staff, &id, by, &text, Some(click)).await,
            Asked::Claim { id, take_over } => hold::claim(staff, &id, by, take_over).await,
            Asked::Release { id } => hold::release(staff, &id, by).await,
            Asked::Note { id, text } => internal_note::add(staff, &id, by, &text, Some(click)).await,
            Asked::Close { id, text, intent } => {
                let decided = decide::close_handoff(staff, &id, by, text.as_deref()).await?;
                let conversation = crate::handoff::conversation_of(&id);
                if decided.outcome == Outcome::Done {
                    decide::with_verdict(staff, decided, conversation.as_deref(), intent, by).await
                } else {
                    Ok(decided)
                }
            }
        }
    }
}

fn method_not_allowed(allow: &'static str, request_id: &str) -> Response<Body> {
    let mut response = Answer::error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed").response(request_id, false);
    if let Ok(value) = header::HeaderValue::from_str(allow) {
        response.headers_mut().insert(header::ALLOW, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_read_their_segments() {
        assert_eq!(segments("/support/staff"), Some(vec![]));
        assert_eq!(segments("/support/staff/"), Some(vec![]));
        assert_eq!(
            segments("/support/staff/refunds/r%5F1/approve"),
            Some(vec!["refunds".to_owned(), "r_1".to_owned(), "approve".to_owned()])
        );
        assert_eq!(segments("/support/staffing"), None);
        assert_eq!(segments("/support/refund-chat"), None);
    }

    #[test]
    fn a_bad_field_is_refused_before_anything_is_written() {
        let parts = ["refunds", "r_1", "approve"];
        assert!(asked(&parts, &json!({"intent": "refund"})).is_ok());
        assert!(
            asked(&parts, &json!({"intent": "groceries"}))
                .unwrap_err()
                .contains("groceries")
        );
        let resolve = ["refunds", "r_1", "resolve"];
        assert!(asked(&resolve, &json!({})).is_err());
        assert!(asked(&resolve, &json!({"executed": "rf_1", "not_executed": true})).is_err());
        assert_eq!(
            asked(&resolve, &json!({"not_executed": true})),
            Ok(Some(Asked::Resolve {
                id: "r_1".into(),
                confirmed: Confirmed::NotExecuted
            }))
        );
        assert!(asked(&["refunds", "r_1", "reject"], &json!({})).is_err());
        assert!(asked(&["conversations", "c_1", "reply"], &json!({"text": 3})).is_err());
        assert_eq!(asked(&["refunds", "r_1", "pay"], &json!({})), Ok(None));
    }

    #[test]
    fn money_needs_the_approvers() {
        for money in ["approve", "reject", "resolve"] {
            assert_eq!(needs(&["refunds", "r", money]), Some(Role::Approver));
        }
        assert_eq!(needs(&["conversations", "c", "reply"]), Some(Role::Staff));
        assert_eq!(needs(&["handoffs", "h", "close"]), Some(Role::Staff));
        assert_eq!(needs(&["refunds", "r", "pay"]), None);
    }
}
