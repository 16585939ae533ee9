//! The visitors' routes (contract 27): `POST /support/refund-chat/visitor`
//! and `GET /support/refund-chat/visitor/conversations/{id}`, with no
//! authorizer. The checks that need no I/O, in section 1's order, as the
//! customers' route makes them: method, the token (a visitor without one
//! gets one; one the function could not have issued is refused), the
//! body, the key. The visitor is the token's hash and nothing the body
//! says; their turns count on their source address's keyed hash.

use lambda_http::request::RequestContext;
use lambda_http::{Request, RequestExt};

use super::answer::ApiError;
use super::body::{ChatRequest, InputError};
use super::idempotency::{self, IdempotencyKey, MalformedKey};
use super::read::{ReadRequest, after_of};
use crate::config::VisitorSettings;
use crate::conversation::ConversationId;
use crate::intake::{Keyed, Message, Refused, Who};
use crate::refund::message::CustomerMessage;
use crate::visitor::{self, VisitorToken};

pub const ROUTE: &str = "/support/refund-chat/visitor";
/// Where a visitor reads a conversation: this, then its id.
pub const READ_PREFIX: &str = "/support/refund-chat/visitor/conversations/";

/// The id in a visitor's read route, if the path is one.
pub fn read_route_id(path: &str) -> Option<&str> {
    path.strip_prefix(READ_PREFIX).filter(|id| !id.contains('/'))
}

/// A visitor's checked message, and the token issued for it when the
/// visitor sent none (the answer hands it over, once).
pub struct VisitorMessage {
    pub message: Message,
    pub issued: Option<VisitorToken>,
}

/// The token the request carries: `Ok(None)` when it carries none.
pub(super) fn token_of(request: &Request) -> Result<Option<VisitorToken>, ApiError> {
    let mut tokens = request.headers().get_all(visitor::TOKEN_HEADER).iter();
    match (tokens.next(), tokens.next()) {
        (None, _) => Ok(None),
        (Some(value), None) => VisitorToken::parse(value.as_bytes())
            .map(Some)
            .ok_or(ApiError::VisitorToken),
        (Some(_), Some(_)) => Err(InputError::Malformed("X-Visitor-Token may be given once").into()),
    }
}

/// The address API Gateway saw the request come from; a runtime that
/// gives none (a local emulator) counts every visitor as one address.
fn source_address(request: &Request) -> String {
    let address = match request.request_context_ref() {
        Some(RequestContext::ApiGatewayV1(context)) => context.identity.source_ip.clone(),
        Some(RequestContext::ApiGatewayV2(context)) => context.http.source_ip.clone(),
        _ => None,
    };
    address
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The checks of a visitor's POST.
pub fn check(request: &Request, settings: &VisitorSettings) -> Result<VisitorMessage, ApiError> {
    if request.method() != lambda_http::http::Method::POST {
        return Err(ApiError::MethodNotAllowed { allow: "POST" });
    }
    let sent = token_of(request)?;
    let chat = ChatRequest::parse_visitor(request.body().as_ref())?;
    // Contract 23 as for customers, and a visitor's one-time code (27):
    // a visitor has no order to give a number of.
    let text = crate::conversation::person::kept(chat.message.text()).into_owned();
    let text = if visitor::is_one_time_code(&text) {
        visitor::ONE_TIME_CODE.to_owned()
    } else {
        text
    };
    let mut keys = request.headers().get_all(idempotency::HEADER).iter();
    let key_header = match (keys.next(), keys.next()) {
        (None, _) => None,
        (Some(value), None) => Some(IdempotencyKey::parse(value.as_bytes())?),
        (Some(_), Some(_)) => return Err(MalformedKey::Syntax.into()),
    };
    let (token, issued) = match sent {
        Some(token) => (token, false),
        // A key scopes a retry by who sent it: a visitor with no token yet
        // has nobody to scope it by, and a retry would be someone new.
        None if key_header.is_some() => return Err(ApiError::VisitorKeyWithoutToken),
        None => (VisitorToken::mint().map_err(Refused::from)?, true),
    };
    let customer = token.user_id();
    let key = key_header.map(|key| Keyed {
        body_sha256: idempotency::body_fingerprint(
            &customer,
            &text,
            chat.conversation_id.as_ref().map(ConversationId::as_str),
        ),
        key,
    });
    Ok(VisitorMessage {
        message: Message {
            customer,
            text: CustomerMessage::new(text),
            conversation_id: chat.conversation_id,
            key,
            who: Who::Visitor {
                address: settings.address_key.hash(&source_address(request)),
            },
        },
        issued: issued.then_some(token),
    })
}

/// The checks of a visitor's read: without the token that started the
/// conversation, it is section 11's 404 (no token is a 404 too, not a
/// 401: a visitor has nothing to sign in with).
pub fn check_read(request: &Request, raw_id: &str) -> Result<ReadRequest, ApiError> {
    if request.method() != lambda_http::http::Method::GET {
        return Err(ApiError::MethodNotAllowed { allow: "GET" });
    }
    let after = after_of(request)?;
    let token = token_of(request).ok().flatten();
    Ok(ReadRequest {
        id: token.as_ref().and_then(|_| ConversationId::parse(raw_id)),
        customer: token.map(|token| token.user_id()).unwrap_or_default(),
        after,
    })
}
