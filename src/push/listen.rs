//! Who may listen (contract 31): every connect and subscribe to the Event
//! API is decided here, by AppSync Events' Lambda authorizer
//! (`refund-chat-live`) and by the local stand-in alike.
//!
//! The caller is verified with the same tokens the routes take: an ID token
//! of the customers' pool (of a listed client, with
//! `CUSTOMER_POOL_CLIENT_IDS`), of the guest pool (its client, a verified
//! e-mail), of the staff pool (its client, the staff group), or a visitor's
//! token, known by its hash. A customer, a guest or a visitor hears their
//! own conversation's channel, and only while the conversation is theirs and
//! live, by the very rule the read route applies
//! ([`crate::ledger::ConversationStore::shown`]); the staff group hears the
//! desk's. Conversation ids are not secrets: anything else is refused,
//! publishing included (that is IAM's alone).
//!
//! An authorization is cached by AppSync for `ttlOverride` seconds. A
//! connect's never outlives the token it rests on; a subscribe's is not
//! cached at all (0), since nothing documented says the cache tells one
//! channel from another (decisions.md, "Live").

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::conversation::ConversationId;
use crate::ledger::ConversationStore;
use crate::pool_token::{PoolKeys, bare, claimed_issuer};
use crate::visitor::VisitorToken;

use super::{DESK_CHANNEL, conversation_of_channel};

/// The longest a connect's authorization is cached, whatever the token.
pub const MAX_CONNECT_TTL_SECS: u64 = 300;

/// AppSync Events' Lambda authorizer request (its "Lambda authorization"
/// page): the caller's `authorizationToken`, and what it asks for.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizerRequest {
    #[serde(default)]
    pub authorization_token: String,
    pub request_context: RequestContext,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestContext {
    /// `EVENT_CONNECT`, `EVENT_SUBSCRIBE` or `EVENT_PUBLISH`.
    pub operation: String,
    /// Absent on a connect.
    #[serde(default)]
    pub channel: Option<String>,
}

/// Its answer: `handlerContext` is the only other field an Event API reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizerResponse {
    pub is_authorized: bool,
    pub ttl_override: u64,
}

impl AuthorizerResponse {
    pub fn refused() -> AuthorizerResponse {
        AuthorizerResponse {
            is_authorized: false,
            ttl_override: 0,
        }
    }
}

/// What a caller asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    Connect,
    Subscribe(String),
    /// Never granted: publishing is IAM's alone.
    Publish,
}

impl Asked {
    pub fn of(request: &AuthorizerRequest) -> Option<Asked> {
        match (
            request.request_context.operation.as_str(),
            &request.request_context.channel,
        ) {
            ("EVENT_CONNECT", _) => Some(Asked::Connect),
            ("EVENT_SUBSCRIBE", Some(channel)) => Some(Asked::Subscribe(channel.clone())),
            ("EVENT_PUBLISH", _) => Some(Asked::Publish),
            _ => None,
        }
    }
}

/// Who a token verified as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listener {
    /// A customer, a guest (`guest:<sub>`) or a visitor (`visitor:<hash>`):
    /// the user id their conversations are kept under.
    Customer { user_id: String, expires: Option<u64> },
    /// A member of the staff group.
    Staff { sub: String, expires: u64 },
}

impl Listener {
    /// Seconds since the epoch after which the token is no longer good;
    /// none for a visitor's token, which does not expire.
    fn expires(&self) -> Option<u64> {
        match self {
            Listener::Customer { expires, .. } => *expires,
            Listener::Staff { expires, .. } => Some(*expires),
        }
    }
}

/// A pool whose tokens are taken, and what they must say.
pub struct Pool {
    pub keys: PoolKeys,
    /// The app clients a token may be of; none: any.
    pub audiences: Option<Vec<String>>,
}

/// The pools and the rule for each.
pub struct Verifier {
    /// The claim a customer's user id is (`USER_ID_CLAIM`).
    pub claim: String,
    pub customers: Option<Pool>,
    pub guests: Option<Pool>,
    pub staff: Option<Pool>,
    pub staff_group: String,
    /// Whether visitors' tokens are taken (visitors are served).
    pub visitors: bool,
}

impl Verifier {
    /// Who `token` is, if anyone.
    pub async fn listener(&self, token: &str) -> Option<Listener> {
        let token = bare(token)?;
        if let Some(visitor) = VisitorToken::parse(token.as_bytes()) {
            return self.visitors.then(|| Listener::Customer {
                user_id: visitor.user_id(),
                expires: None,
            });
        }
        let issuer = claimed_issuer(token)?;
        let (kind, pool) = [
            (PoolKind::Customers, &self.customers),
            (PoolKind::Guests, &self.guests),
            (PoolKind::Staff, &self.staff),
        ]
        .into_iter()
        .find_map(|(kind, pool)| {
            pool.as_ref()
                .filter(|pool| pool.keys.issuer() == issuer)
                .map(|pool| (kind, pool))
        })?;
        let claims = match pool.keys.verify(token, pool.audiences.as_deref()).await {
            Ok(claims) => claims,
            Err(refused) => {
                tracing::info!(event = "live_token_refused", why = %refused);
                return None;
            }
        };
        let expires = claims.get("exp").and_then(Value::as_u64)?;
        let text = |name: &str| claims.get(name).and_then(Value::as_str).filter(|v| !v.is_empty());
        match kind {
            PoolKind::Staff => {
                let in_group = claims
                    .get("cognito:groups")
                    .and_then(Value::as_array)
                    .is_some_and(|groups| groups.iter().any(|g| g.as_str() == Some(self.staff_group.as_str())));
                let sub = text("sub")?.to_owned();
                in_group.then_some(Listener::Staff { sub, expires })
            }
            PoolKind::Guests => guest_of(&claims).map(|user_id| Listener::Customer {
                user_id,
                expires: Some(expires),
            }),
            PoolKind::Customers => {
                let user_id = text(&self.claim)?.to_owned();
                // No customer id may pass for a guest's or a visitor's.
                if crate::guest::is_guest(&user_id) || crate::visitor::is_visitor(&user_id) {
                    return None;
                }
                Some(Listener::Customer {
                    user_id,
                    expires: Some(expires),
                })
            }
        }
    }
}

#[derive(Clone, Copy)]
enum PoolKind {
    Customers,
    Guests,
    Staff,
}

/// A guest's user id, from a guest pool token that proved its e-mail.
fn guest_of(claims: &Map<String, Value>) -> Option<String> {
    let verified = claims.get("email_verified") == Some(&Value::Bool(true));
    let sub = claims.get("sub").and_then(Value::as_str).filter(|s| !s.is_empty())?;
    verified.then(|| crate::guest::user_id(sub))
}

/// The decision, once the caller is known.
pub async fn decide<C: ConversationStore>(
    listener: Option<&Listener>,
    asked: &Asked,
    conversations: &C,
    now: SystemTime,
) -> AuthorizerResponse {
    let Some(listener) = listener else {
        return AuthorizerResponse::refused();
    };
    let now_secs = now.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
    let authorized = match (asked, listener) {
        (Asked::Publish, _) => false,
        (Asked::Connect, _) => true,
        (Asked::Subscribe(channel), Listener::Staff { .. }) => channel == DESK_CHANNEL,
        (Asked::Subscribe(channel), Listener::Customer { user_id, .. }) => match conversation_of_channel(channel) {
            Some(id) => owns(conversations, &id, user_id, now_secs * 1000).await,
            None => false,
        },
    };
    let ttl_override = match asked {
        Asked::Connect if authorized => listener
            .expires()
            .map_or(MAX_CONNECT_TTL_SECS, |expires| expires.saturating_sub(now_secs))
            .min(MAX_CONNECT_TTL_SECS),
        _ => 0,
    };
    AuthorizerResponse {
        is_authorized: authorized && listener.expires().is_none_or(|expires| expires > now_secs),
        ttl_override,
    }
}

/// Whether `user_id` may read conversation `id` now: the read route's rule.
async fn owns<C: ConversationStore>(conversations: &C, id: &ConversationId, user_id: &str, now_ms: u64) -> bool {
    match conversations.shown(id, user_id, Some(u64::MAX), now_ms).await {
        Ok(shown) => shown.is_some(),
        Err(error) => {
            // Refused, not granted: the page polls meanwhile.
            tracing::warn!(event = "live_owner_unread", error = %error);
            false
        }
    }
}

/// The authorizer's parts: the pools it takes tokens of, and the
/// conversations whose owner it checks (wired in
/// [`crate::startup::listening`]).
pub struct Listening {
    pub verifier: Verifier,
    pub conversations: crate::ledger::dynamo::conversations::DynamoConversations,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::ledger::memory::MemoryLedger;
    use crate::push::conversation_channel;

    fn customer(user_id: &str) -> Listener {
        Listener::Customer {
            user_id: user_id.into(),
            expires: None,
        }
    }

    fn staff(expires: u64) -> Listener {
        Listener::Staff {
            sub: "s-1".into(),
            expires,
        }
    }

    fn secs(time: SystemTime) -> u64 {
        time.duration_since(UNIX_EPOCH).unwrap().as_secs()
    }

    #[tokio::test]
    async fn a_customer_hears_their_own_conversation_and_nothing_else() {
        let store = MemoryLedger::new();
        let mine = store.stored_conversation("u-1").await;
        let theirs = store.stored_conversation("u-2").await;
        let now = SystemTime::now();
        let subscribe = |id: &ConversationId| Asked::Subscribe(conversation_channel(id.as_str()).unwrap());
        let ask = |listener: Listener, asked: Asked| {
            let store = &store;
            async move { decide(Some(&listener), &asked, store, now).await }
        };
        let granted = ask(customer("u-1"), subscribe(&mine)).await;
        assert_eq!(
            granted,
            AuthorizerResponse {
                is_authorized: true,
                // A subscribe's yes is never cached: it names one channel.
                ttl_override: 0
            }
        );
        for (listener, asked) in [
            (customer("u-1"), subscribe(&theirs)),
            (customer("u-1"), Asked::Subscribe(DESK_CHANNEL.into())),
            (customer("u-1"), Asked::Subscribe("/conversations/c-00".into())),
            (customer("u-1"), Asked::Subscribe("/conversations/*".into())),
            (customer("u-1"), Asked::Publish),
            (customer("visitor:00"), subscribe(&mine)),
            (staff(secs(now) + 600), subscribe(&mine)),
            (staff(secs(now) + 600), Asked::Publish),
        ] {
            assert!(
                !ask(listener.clone(), asked.clone()).await.is_authorized,
                "{listener:?} {asked:?}"
            );
        }
        assert!(
            decide(None, &Asked::Connect, &store, now)
                .await
                .is_authorized
                .eq(&false)
        );
    }

    #[tokio::test]
    async fn the_staff_group_hears_the_desk_and_no_yes_outlives_its_token() {
        let store = MemoryLedger::new();
        let now = SystemTime::now();
        let desk = Asked::Subscribe(DESK_CHANNEL.into());
        assert!(
            decide(Some(&staff(secs(now) + 600)), &desk, &store, now)
                .await
                .is_authorized
        );
        // A connect is cached, never past the token's expiry, nor 300 s.
        let connect = decide(Some(&staff(secs(now) + 60)), &Asked::Connect, &store, now).await;
        assert_eq!((connect.is_authorized, connect.ttl_override), (true, 60));
        let long = decide(Some(&staff(secs(now) + 3600)), &Asked::Connect, &store, now).await;
        assert_eq!(long.ttl_override, MAX_CONNECT_TTL_SECS);
        let expired = staff(secs(now) - 1);
        for asked in [Asked::Connect, desk] {
            assert!(!decide(Some(&expired), &asked, &store, now).await.is_authorized);
        }
        let later = now + Duration::from_secs(3600);
        assert!(
            !decide(Some(&staff(secs(now) + 600)), &Asked::Connect, &store, later)
                .await
                .is_authorized
        );
    }

    #[tokio::test]
    async fn a_visitor_is_known_by_the_hash_of_their_token_and_only_when_visitors_are_served() {
        let token = VisitorToken::mint().unwrap();
        let verifier = |visitors| Verifier {
            claim: "sub".into(),
            customers: None,
            guests: None,
            staff: None,
            staff_group: "support-staff".into(),
            visitors,
        };
        assert_eq!(
            verifier(true).listener(token.expose()).await,
            Some(Listener::Customer {
                user_id: token.user_id(),
                expires: None
            })
        );
        assert_eq!(verifier(false).listener(token.expose()).await, None);
        // No pool named: a JWT-shaped token is nobody.
        assert_eq!(verifier(true).listener("a.b.c").await, None);
        assert_eq!(verifier(true).listener("").await, None);
    }

    #[test]
    fn the_authorizers_request_reads_as_appsync_events_sends_it() {
        let subscribe: AuthorizerRequest = serde_json::from_value(serde_json::json!({
            "authorizationToken": "t",
            "requestContext": {"apiId": "a", "accountId": "1", "requestId": "r",
                "operation": "EVENT_SUBSCRIBE", "channelNamespaceName": "conversations",
                "channel": "/conversations/c-1"},
            "requestHeaders": {}
        }))
        .unwrap();
        assert_eq!(
            Asked::of(&subscribe),
            Some(Asked::Subscribe("/conversations/c-1".into()))
        );
        let connect: AuthorizerRequest = serde_json::from_value(serde_json::json!({
            "authorizationToken": "t",
            "requestContext": {"apiId": "a", "accountId": "1", "requestId": "r", "operation": "EVENT_CONNECT"},
            "requestHeaders": {}
        }))
        .unwrap();
        assert_eq!(Asked::of(&connect), Some(Asked::Connect));
        assert_eq!(
            serde_json::to_value(AuthorizerResponse::refused()).unwrap(),
            serde_json::json!({"isAuthorized": false, "ttlOverride": 0})
        );
    }
}
