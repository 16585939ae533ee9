//! The HTTP edge of the function: routing, input checks, the
//! `Idempotency-Key` (admission before the turn, the answer stored or the key
//! released after it), running the turn, and the one place where every error
//! becomes a status and a JSON body.
//!
//! Every answer is `Ok(Response)` with a JSON body and an `x-request-id`: an
//! `Err` from a Lambda handler becomes an opaque runtime error, not an answer.
//! Checks run in the contract's order (1): route, method, identity, body,
//! identity match, key syntax — none touches the ledger, the secret, the
//! model or payments — then the key's record, then the turn.

pub mod body;
pub mod idempotency;
pub mod identity;

use std::sync::atomic::{AtomicBool, Ordering};

use lambda_http::http::{HeaderValue, Method, StatusCode, header};
use lambda_http::{Body, Request, RequestExt, Response};
use serde_json::json;
use tokio::sync::OnceCell;
use tokio::time::Instant;

use crate::budget::{Reservation, Spent};
use crate::chat::openai::OpenAiChat;
use crate::chat::{CompletionError, Message};
use crate::clock::now_ms;
use crate::config::Config;
use crate::conversation::{self, ConversationId, Exchange, NoRandomness};
use crate::handoff::{self, Handoff, Reason};
use crate::http::body::{ChatRequest, InputError};
use crate::http::idempotency::{Admission, IdempotencyKey, MalformedKey, Refusal};
use crate::http::identity::IdentityError;
use crate::ledger::{
    Appended, Begun, BudgetStore, ClaimedWithTurn, ConversationLease, ConversationStore, HeldConversation,
    KeySettlement, LedgerError, NewExchange, RequestLease, RequestLedger, StoredResponse, TakenTurn, TokenSettlement,
};
use crate::ops::telemetry::{self, ConversationUse, KeyUse, RequestEnd};
use crate::refund::{Attempt, RefundGateway, RefundScope, WriterMark};
use crate::secrets::{ApiKeySource, SecretError};
use crate::turn::{Turn, TurnError, TurnStats};

pub const ROUTE: &str = "/support/refund-chat";
pub const REQUEST_ID_HEADER: &str = "x-request-id";
/// What a 503 asks the caller to wait before trying again.
pub const LEDGER_RETRY_AFTER_SECS: u64 = 2;
/// Headers a browser widget may read from an answer (with `CORS_ALLOW_ORIGIN`).
pub const EXPOSED_HEADERS: &str = "x-request-id, idempotent-replayed, retry-after";

/// Why a request got no reply. Each variant maps to exactly one status.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("no such route")]
    NotFound,
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error(transparent)]
    MalformedKey(#[from] MalformedKey),
    #[error("the Idempotency-Key was used with a different request body")]
    KeyReused,
    #[error("a request with this Idempotency-Key is still being answered")]
    InProgress { retry_after_secs: u64 },
    #[error("the refund ledger cannot be reached: {0}")]
    LedgerUnavailable(LedgerError),
    /// Unknown, expired, or another customer's: one answer for all three.
    #[error("no such conversation")]
    ConversationNotFound,
    #[error("the conversation's previous turn is still running")]
    ConversationBusy { retry_after_secs: u64 },
    #[error("the conversation cannot be reached: {0}")]
    ConversationUnavailable(LedgerError),
    #[error(transparent)]
    NoRandomness(#[from] NoRandomness),
    /// The customer's turns of the hour, or tokens of the day, are spent.
    #[error("the customer's {} budget is spent", .0.as_str())]
    BudgetSpent(Spent),
    #[error("the budget cannot be reached: {0}")]
    BudgetUnavailable(LedgerError),
    #[error(transparent)]
    Secret(#[from] SecretError),
    #[error(transparent)]
    Turn(#[from] TurnError),
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::InProgress { retry_after_secs } => ApiError::InProgress { retry_after_secs },
            Refusal::DifferentBody => ApiError::KeyReused,
            Refusal::Ledger(error) => ApiError::LedgerUnavailable(error),
        }
    }
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Input(InputError::Malformed(_)) | ApiError::MalformedKey(_) => StatusCode::BAD_REQUEST,
            ApiError::Input(InputError::InvalidField(_)) | ApiError::KeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Identity(IdentityError::Unauthenticated) => StatusCode::UNAUTHORIZED,
            ApiError::Identity(IdentityError::Mismatch) => StatusCode::FORBIDDEN,
            ApiError::InProgress { .. } => StatusCode::CONFLICT,
            ApiError::LedgerUnavailable(_) | ApiError::ConversationUnavailable(_) | ApiError::BudgetUnavailable(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::BudgetSpent(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::ConversationNotFound => StatusCode::NOT_FOUND,
            ApiError::ConversationBusy { .. } => StatusCode::CONFLICT,
            ApiError::Secret(_) | ApiError::NoRandomness(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Turn(TurnError::TimedOut) => StatusCode::GATEWAY_TIMEOUT,
            ApiError::Turn(TurnError::BudgetExhausted | TurnError::Provider(_)) => StatusCode::BAD_GATEWAY,
        }
    }

    /// The `detail` a caller sees: what went wrong, never a secret, a body
    /// from upstream or a stack trace.
    pub fn detail(&self) -> String {
        match self {
            ApiError::Input(error) => error.to_string(),
            ApiError::NotFound => format!("no route here: the endpoint is POST {ROUTE}"),
            ApiError::MethodNotAllowed => format!("{ROUTE} accepts POST only"),
            ApiError::Identity(IdentityError::Unauthenticated) => "sign in to use the refund assistant".into(),
            ApiError::Identity(IdentityError::Mismatch) => "user_id must be the signed-in customer's own id".into(),
            ApiError::MalformedKey(error) => error.to_string(),
            ApiError::KeyReused => {
                "this Idempotency-Key was already used with a different request body; use a new key for a new \
                 message"
                    .into()
            }
            ApiError::InProgress { .. } => {
                "a request with this Idempotency-Key is still being answered; try again after Retry-After seconds"
                    .into()
            }
            ApiError::LedgerUnavailable(_) | ApiError::ConversationUnavailable(_) | ApiError::BudgetUnavailable(_) => {
                "the assistant cannot take requests right now; try again after Retry-After seconds".into()
            }
            ApiError::BudgetSpent(Spent::Turns { .. }) => {
                "you have sent the most messages the assistant takes in an hour; try again after Retry-After seconds"
                    .into()
            }
            ApiError::BudgetSpent(Spent::Tokens { .. }) => {
                "the assistant has done as much for you as it can today; try again after Retry-After seconds".into()
            }
            ApiError::ConversationNotFound => {
                "this conversation has ended or does not exist; start a new one without conversation_id".into()
            }
            ApiError::ConversationBusy { .. } => {
                "the assistant is still answering the previous message of this conversation; try again after \
                 Retry-After seconds"
                    .into()
            }
            ApiError::NoRandomness(_) => "the assistant is not available right now".into(),
            ApiError::Secret(_) => "the assistant is not available right now (configuration could not be read)".into(),
            ApiError::Turn(TurnError::TimedOut) => "the assistant did not answer in time".into(),
            ApiError::Turn(TurnError::BudgetExhausted) => "the assistant could not finish this request".into(),
            ApiError::Turn(TurnError::Provider(CompletionError::Status { status })) => {
                format!("the assistant's model provider answered with an error (HTTP {status})")
            }
            ApiError::Turn(TurnError::Provider(_)) => "the assistant's model provider gave no usable answer".into(),
        }
    }

    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            ApiError::InProgress { retry_after_secs } | ApiError::ConversationBusy { retry_after_secs } => {
                Some(*retry_after_secs)
            }
            ApiError::LedgerUnavailable(_) | ApiError::ConversationUnavailable(_) | ApiError::BudgetUnavailable(_) => {
                Some(LEDGER_RETRY_AFTER_SECS)
            }
            ApiError::BudgetSpent(spent) => Some(spent.retry_after_secs()),
            _ => None,
        }
    }
}

/// One invocation: the Lambda request id, its deadline, and the mark it
/// puts on its ledger writes. The mark is the request id plus a random
/// part, so that even an invocation re-delivered with the same request id
/// cannot mistake another's write for its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// Its mark on what it writes, which names its Lambda request id.
    pub writer: WriterMark,
    /// Epoch ms; 0 when the runtime gave none.
    pub deadline_ms: u64,
}

impl Invocation {
    pub fn of(request: &Request) -> Invocation {
        let context = request.lambda_context_ref();
        let request_id = context
            .map(|context| context.request_id.clone())
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| "unknown".to_owned());
        let deadline_ms = context.map(|context| context.deadline).unwrap_or_default();
        Invocation {
            writer: WriterMark::new(&request_id),
            deadline_ms,
        }
    }

    /// The Lambda request id.
    pub fn request_id(&self) -> &str {
        self.writer.invocation()
    }
}

/// What the summary line needs from however far a request got.
#[derive(Default)]
struct RequestTrace {
    user_id: Option<String>,
    stats: Option<TurnStats>,
    key_use: KeyUse,
    /// What became of the key after the turn: `stored` or `released`.
    key_settled: Option<&'static str>,
    conversation: ConversationUse,
    /// The handoff this request made, by code or by the model.
    handoff: Option<Reason>,
    /// What the budget said: `taken`, `turns`, `tokens` (spent) or `unavailable`.
    budget: Option<&'static str>,
}

impl RequestTrace {
    /// The turn recorded a refund for its scope (in the ledger, whatever its outcome).
    fn refund_recorded(&self) -> bool {
        self.stats
            .as_ref()
            .and_then(|stats| stats.refund.as_ref())
            .is_some_and(|outcome| outcome.is_recorded())
    }
}

/// The answer before it becomes a response.
struct Answer {
    status: StatusCode,
    body: String,
    error: Option<ApiError>,
    replayed: bool,
}

impl Answer {
    fn of(result: Result<String, ApiError>) -> Answer {
        Answer::in_conversation(result, None, false)
    }

    /// The answer of a request that ran a turn names its conversation (200,
    /// 502, 504; contract 11), and says when a person has it (contract 12).
    fn in_conversation(
        result: Result<String, ApiError>,
        conversation: Option<&ConversationId>,
        handed_off: bool,
    ) -> Answer {
        let (status, mut body, error) = match result {
            Ok(reply) => (StatusCode::OK, json!({ "reply": reply }), None),
            Err(error) => {
                let mut detail = error.detail();
                if handed_off {
                    detail = format!("{detail}. {}", handoff::AFTER_FAILURES);
                }
                (error.status(), json!({ "detail": detail }), Some(error))
            }
        };
        if let Some(id) = conversation {
            body["conversation_id"] = json!(id.as_str());
        }
        if handed_off {
            body["handed_off"] = json!(true);
        }
        Answer {
            status,
            body: body.to_string(),
            error,
            replayed: false,
        }
    }

    fn replay(stored: StoredResponse) -> Answer {
        Answer {
            status: StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            body: stored.body,
            error: None,
            replayed: true,
        }
    }
}

/// A request that passed every check that needs no I/O.
struct Checked {
    /// The customer: the authenticated one (or, in body mode, the body's).
    customer: String,
    chat: ChatRequest,
    key: Option<(IdempotencyKey, String)>,
}

/// The function's state for the life of the container: configuration and
/// the ports, wired in [`crate::startup`].
pub struct App<K, R, L, C> {
    config: Config,
    key_source: K,
    refunds: R,
    ledger: L,
    conversations: C,
    http: reqwest::Client,
    /// Built on first use, once the key has been read; an error is not cached.
    model: OnceCell<OpenAiChat>,
    /// True until the container's first request has been answered.
    cold: AtomicBool,
}

/// Everything [`App`] talks to.
pub struct Ports<K, R, L, C> {
    /// Where the OpenAI key comes from.
    pub key_source: K,
    /// What runs a refund the model asks for (in the function: record, then pay).
    pub refunds: R,
    /// Where request records live.
    pub ledger: L,
    /// Where conversations live.
    pub conversations: C,
    /// The HTTP client for OpenAI.
    pub http: reqwest::Client,
}

/// The conversation a request runs in, before its lease is taken.
struct Continuing {
    id: ConversationId,
    /// The function issued the id for this request (or its key's first
    /// request did): absent means new, not unknown.
    issued_here: bool,
    /// Issued for this very request (not a takeover's): nobody else knows
    /// it, so it is not stored yet and needs no lease.
    created_here: bool,
}

/// A turn's exchange, waiting to be appended once the key's fate is known.
struct PendingExchange {
    lease: ConversationLease,
    held: HeldConversation,
    new: NewExchange,
}

/// A turn's outcome, with what it added to the conversation (`None` when no
/// turn ran: the key could not be read).
struct TurnResult {
    reply: Result<String, ApiError>,
    own_messages: Option<Vec<Message>>,
    /// The handoff the model asked for.
    handoff: Option<Handoff>,
}

impl<K: ApiKeySource, R: RefundGateway, L: RequestLedger + BudgetStore, C: ConversationStore> App<K, R, L, C> {
    pub fn new(config: Config, ports: Ports<K, R, L, C>) -> Self {
        crate::refund::tool::warm_up();
        crate::handoff::tool::warm_up();
        App {
            config,
            key_source: ports.key_source,
            refunds: ports.refunds,
            ledger: ports.ledger,
            conversations: ports.conversations,
            http: ports.http,
            model: OnceCell::new(),
            cold: AtomicBool::new(true),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub async fn handle(&self, request: Request) -> Response<Body> {
        let started = Instant::now();
        let invocation = Invocation::of(&request);
        let mut trace = RequestTrace::default();
        let answer = self.answer(&request, &invocation, &mut trace).await;
        telemetry::finish_request(RequestEnd {
            status: answer.status,
            error: answer.error.as_ref().map(|e| e as &dyn std::fmt::Display),
            user_id: trace.user_id.as_deref(),
            stats: trace.stats.as_ref(),
            key_use: trace.key_use,
            key_settled: trace.key_settled,
            conversation: &trace.conversation,
            handoff: trace.handoff,
            budget: trace.budget,
            cold_start: self.cold.swap(false, Ordering::Relaxed),
            duration: started.elapsed(),
        });
        self.response(answer, &invocation)
    }

    async fn answer(&self, request: &Request, invocation: &Invocation, trace: &mut RequestTrace) -> Answer {
        let checked = match check(request, &self.config.identity) {
            Ok(checked) => checked,
            Err(error) => return Answer::of(Err(error)),
        };
        let user_id = checked.customer.clone();
        trace.user_id = Some(user_id.clone());
        tracing::info!(
            event = "request",
            user_id = %user_id,
            message_chars = checked.chat.message.chars(),
            idempotency_key = checked.key.is_some(),
            conversation_id = checked.chat.conversation_id.as_ref().map(ConversationId::as_str).unwrap_or_default(),
        );
        let mut continuing = match &checked.chat.conversation_id {
            Some(id) => Continuing {
                id: id.clone(),
                issued_here: false,
                created_here: false,
            },
            None => match ConversationId::generate() {
                Ok(id) => Continuing {
                    id,
                    issued_here: true,
                    created_here: true,
                },
                Err(error) => return Answer::of(Err(error.into())),
            },
        };
        // A code handoff spends no budget (contract 13); known before any I/O.
        let screened = self.config.handoff_screen.check(checked.chat.message.text());
        let Some((key, body_sha256)) = checked.key else {
            let scope = RefundScope::for_request(user_id, invocation.request_id());
            let (answer, exchange) = self
                .converse(&checked.chat, &continuing, screened, None, scope, invocation, trace)
                .await;
            // No key, no retry of this scope: its exchange is marked as appended.
            self.finish(exchange, true, None, trace).await;
            return answer;
        };

        let now = now_ms();
        let lease = RequestLease {
            scope: RefundScope::for_idempotency_key(user_id, key.as_str()),
            writer: invocation.writer.clone(),
            body_sha256,
            lease_until_ms: self.lease_end(invocation, now),
            expires_at_s: (now + self.config.idempotency_ttl.as_millis() as u64) / 1000,
            conversation_id: Some(continuing.id.as_str().to_owned()),
        };
        let (admission, turn_taken) = match self.admit(&lease, screened.is_none(), now, trace).await {
            Ok(admitted) => admitted,
            Err(answer) => return answer,
        };
        match admission {
            Admission::Proceed {
                taken_over,
                conversation_id,
            } => {
                trace.key_use = if taken_over { KeyUse::TakenOver } else { KeyUse::New };
                // A takeover continues the conversation its key's first
                // request began, which may be stored by now.
                if taken_over {
                    continuing.created_here = false;
                    if let Some(id) = conversation_id.as_deref().and_then(ConversationId::parse) {
                        continuing.id = id;
                    }
                }
            }
            Admission::Replay(stored) => {
                trace.key_use = KeyUse::Replayed;
                return Answer::replay(stored);
            }
        }
        let (answer, exchange) = self
            .converse(
                &checked.chat,
                &continuing,
                screened,
                turn_taken,
                lease.scope.clone(),
                invocation,
                trace,
            )
            .await;
        // The key is settled in the append's own transaction: an invocation
        // that dies leaves both or neither, never a stored answer whose
        // exchange is missing. An exchange whose key is given back is not
        // marked, so the retry's own exchange is kept too.
        let keep = self.keeps_answer(&lease, &answer, trace).await;
        let settlement = if keep {
            KeySettlement::Store(
                lease,
                StoredResponse {
                    status: answer.status.as_u16(),
                    body: answer.body.clone(),
                },
            )
        } else {
            KeySettlement::Release(lease)
        };
        self.finish(exchange, keep, Some(settlement), trace).await;
        answer
    }

    /// Claims the key, with the turn from the budget when one is due (one
    /// operation; contract 6.3 and 13). `Some(reservation)`: the turn is
    /// taken, and is given back if the conversation then refuses the turn.
    /// A key already used is judged first: a replay spends nothing.
    async fn admit(
        &self,
        lease: &RequestLease,
        budget_due: bool,
        now: u64,
        trace: &mut RequestTrace,
    ) -> Result<(Admission, Option<Reservation>), Answer> {
        let refused = |trace: &mut RequestTrace, refusal: Refusal| {
            trace.key_use = KeyUse::Refused;
            if let Refusal::Ledger(error) = &refusal {
                tracing::error!(event = "ledger", op = "claim_request", error = %error);
            }
            Answer::of(Err(refusal.into()))
        };
        if !budget_due {
            return idempotency::admit(&self.ledger, lease, now)
                .await
                .map(|admission| (admission, None))
                .map_err(|refusal| refused(trace, refusal));
        }
        let reservation = Reservation {
            taken_at_ms: now,
            tokens: self.config.budget.turn_reservation,
        };
        match self.ledger.claim_with_turn(lease, &self.config.budget, now).await {
            Ok(ClaimedWithTurn::Both) => {
                trace.budget = Some("taken");
                let admission = Admission::Proceed {
                    taken_over: false,
                    conversation_id: lease.conversation_id.clone(),
                };
                Ok((admission, Some(reservation)))
            }
            Ok(ClaimedWithTurn::KeyExists(existing)) => idempotency::admit_existing(&self.ledger, lease, existing, now)
                .await
                .map(|admission| (admission, None))
                .map_err(|refusal| refused(trace, refusal)),
            // Nothing was written. The contract's order puts the conversation
            // before the budget (a person's conversation is answered whatever
            // the budget), so the claim is made alone and the budget asked
            // again after the conversation's checks.
            Ok(ClaimedWithTurn::Refused(_)) => idempotency::admit(&self.ledger, lease, now)
                .await
                .map(|admission| (admission, None))
                .map_err(|refusal| refused(trace, refusal)),
            Err(error) => {
                tracing::error!(event = "budget", op = "claim_with_turn", error = %error);
                // It may have landed after all (its answer lost, or late):
                // then the key is given back with the turn, so a retry runs
                // at once instead of waiting out the lease (decisions.md).
                if let Err(error) = self.ledger.abandon_claim(lease, reservation).await {
                    tracing::error!(event = "budget", op = "abandon_claim", error = %error);
                }
                trace.key_use = KeyUse::Refused;
                trace.budget = Some("unavailable");
                Err(Answer::of(Err(ApiError::BudgetUnavailable(error))))
            }
        }
    }

    /// The lease lasts until the invocation's deadline; without one (a local
    /// runtime), as long as the worst case of a request.
    fn lease_end(&self, invocation: &Invocation, now: u64) -> u64 {
        if invocation.deadline_ms > now {
            invocation.deadline_ms
        } else {
            now + self.config.worst_case().as_millis() as u64
        }
    }

    /// Whether the answer is stored for replays, or the key given back: a
    /// 500, 502 or 504 after which the scope has no refund record is
    /// released, so a retry runs afresh (contract 6.3). When in doubt, it is
    /// stored: a stored failure costs the customer a new message, never
    /// money. An answer about the conversation (404, 409, 503) ran no turn
    /// and is never stored: the retry it asks for must run.
    async fn keeps_answer(&self, lease: &RequestLease, answer: &Answer, trace: &RequestTrace) -> bool {
        let recorded = trace.refund_recorded();
        let refused_by_conversation = matches!(
            answer.error,
            Some(
                ApiError::ConversationNotFound
                    | ApiError::ConversationBusy { .. }
                    | ApiError::ConversationUnavailable(_)
                    | ApiError::BudgetSpent(_)
                    | ApiError::BudgetUnavailable(_)
            )
        );
        !refused_by_conversation
            && (answer.status == StatusCode::OK
                || recorded
                || self.ledger.refund_exists(&lease.scope).await.unwrap_or_else(|error| {
                    tracing::error!(event = "ledger", op = "refund_exists", error = %error, "storing the answer");
                    true
                }))
    }

    /// Stores the answer for replays, or gives the key back, on its own
    /// (when no exchange carried it).
    async fn settle(&self, settlement: &KeySettlement) {
        let (op, result) = match settlement {
            KeySettlement::Store(lease, response) => (
                "complete_request",
                self.ledger.complete_request(lease, response, now_ms()).await,
            ),
            KeySettlement::Release(lease) => ("release_request", self.ledger.release_request(lease).await),
        };
        if let Err(error) = result {
            // The lease runs out at the deadline; a retry then takes the key
            // over, and the scope's refund record still guards the money.
            tracing::error!(event = "ledger", op, error = %error, "the key stays leased until the deadline");
        }
    }

    /// Takes the conversation's lease, reads its window, runs the turn, and
    /// appends the exchange (contract 11). The conversation is checked
    /// before any secret or model call: 404, 409 or 503.
    #[allow(clippy::too_many_arguments)]
    async fn converse(
        &self,
        chat: &ChatRequest,
        continuing: &Continuing,
        screened: Option<Reason>,
        mut turn_taken: Option<Reservation>,
        scope: RefundScope,
        invocation: &Invocation,
        trace: &mut RequestTrace,
    ) -> (Answer, Option<PendingExchange>) {
        let now = now_ms();
        let lease = ConversationLease {
            id: continuing.id.clone(),
            customer: scope.user_id().to_owned(),
            writer: invocation.writer.clone(),
            lease_until_ms: self.lease_end(invocation, now),
        };
        trace.conversation.id = Some(lease.id.as_str().to_owned());
        let begun = if continuing.created_here {
            // Nobody else knows the id: no lease; the append creates it.
            Ok(Begun::Held(HeldConversation::created_here()))
        } else {
            self.conversations.begin(&lease, continuing.issued_here, now).await
        };
        let refused = match begun {
            Ok(Begun::Held(held)) if held.handed_off => {
                // A person has it: kept, and answered without the model (contract 12).
                trace.conversation.with_a_person = true;
                self.give_back_turn(scope.user_id(), turn_taken).await;
                return self.answer_without_model(chat, scope, lease, held, handoff::WITH_A_PERSON, None);
            }
            Ok(Begun::Held(held)) => Ok(held),
            Ok(Begun::NotFound) => Err(ApiError::ConversationNotFound),
            Ok(Begun::Busy { lease_until_ms }) => {
                trace.conversation.busy = true;
                let retry_after_secs = lease_until_ms.saturating_sub(now).div_ceil(1000).max(1);
                Err(ApiError::ConversationBusy { retry_after_secs })
            }
            Err(error) => {
                tracing::error!(event = "conversation", op = "begin", error = %error);
                Err(ApiError::ConversationUnavailable(error))
            }
        };
        let held = match refused {
            Ok(held) => held,
            Err(error) => {
                self.give_back_turn(scope.user_id(), turn_taken).await;
                return (Answer::of(Err(error)), None);
            }
        };
        let handoff_id = handoff::handoff_id(lease.id.as_str());
        if let Some(reason) = screened {
            trace.handoff = Some(reason);
            let handoff = Handoff {
                id: handoff_id,
                reason,
                summary: None,
            };
            return self.answer_without_model(chat, scope, lease, held, handoff::fixed_reply(reason), Some(handoff));
        }
        let window = match self.window(&lease, &held, &scope).await {
            Ok(window) => window,
            Err(error) => {
                tracing::error!(event = "conversation", op = "recent", error = %error);
                self.release_conversation(&lease, &held).await;
                self.give_back_turn(scope.user_id(), turn_taken).await;
                return (Answer::of(Err(ApiError::ConversationUnavailable(error))), None);
            }
        };
        // The budget, last before the turn (contract 13), unless the key's
        // claim took it: counted atomically, refused before the secret, the
        // model or payments; closed if unreachable.
        if turn_taken.is_none() {
            let taken_at_ms = now_ms();
            let refusal = match self
                .ledger
                .take_turn(scope.user_id(), &self.config.budget, taken_at_ms)
                .await
            {
                Ok(TakenTurn::Taken) => {
                    turn_taken = Some(Reservation {
                        taken_at_ms,
                        tokens: self.config.budget.turn_reservation,
                    });
                    None
                }
                Ok(TakenTurn::Refused(spent)) => {
                    trace.budget = Some(spent.as_str());
                    Some(ApiError::BudgetSpent(spent))
                }
                Err(error) => {
                    tracing::error!(event = "budget", op = "take_turn", error = %error);
                    trace.budget = Some("unavailable");
                    Some(ApiError::BudgetUnavailable(error))
                }
            };
            if let Some(error) = refusal {
                self.release_conversation(&lease, &held).await;
                return (Answer::of(Err(error)), None);
            }
            trace.budget = Some("taken");
        }
        trace.conversation.history_exchanges = window.len();
        let context = Attempt {
            scope,
            writer: invocation.writer.clone(),
            conversation: Some(lease.id.as_str().to_owned()),
        };
        let turn = self
            .run_turn(
                chat,
                context.clone(),
                conversation::history(&window),
                handoff_id.clone(),
                trace,
            )
            .await;
        let tokens = turn_taken.map(|reservation| TokenSettlement {
            reservation,
            used: trace
                .stats
                .as_ref()
                .map_or(0, |stats| stats.prompt_tokens + stats.completion_tokens),
        });
        let Some(own_messages) = turn.own_messages else {
            self.release_conversation(&lease, &held).await;
            self.settle_tokens(context.scope.user_id(), tokens).await;
            return (Answer::of(turn.reply), None);
        };
        let failed = matches!(turn.reply, Err(ApiError::Turn(_)));
        // Two failed turns in a row: a person takes over, the status stays.
        let handoff = turn.handoff.or_else(|| {
            (failed && held.last_failed).then_some(Handoff {
                id: handoff_id,
                reason: Reason::AgentFailed,
                summary: None,
            })
        });
        trace.handoff = handoff.as_ref().map(|h| h.reason);
        let reply = turn.reply.as_ref().ok().cloned();
        let answer = Answer::in_conversation(turn.reply, Some(&lease.id), handoff.is_some());
        let refund_recorded = trace.refund_recorded();
        let exchange = PendingExchange {
            new: NewExchange {
                exchange: Exchange::of_turn(&own_messages, reply.as_deref()),
                status: answer.status.as_u16(),
                scope: context.scope,
                marked: true,
                refund_recorded,
                handoff,
                tokens,
                key: None,
            },
            lease,
            held,
        };
        (answer, Some(exchange))
    }

    /// Settles the turn's reservation to its tokens on its own (when no
    /// append carried it). A failure is logged: the answer stands, and the
    /// reservation stays counted, which errs toward the shop's bill.
    async fn settle_tokens(&self, customer: &str, tokens: Option<TokenSettlement>) {
        let Some(tokens) = tokens else { return };
        if let Err(error) = self.ledger.settle_tokens(customer, &tokens).await {
            tracing::error!(event = "budget", op = "settle_tokens", error = %error);
        }
    }

    /// Gives back a turn taken with the key's claim that did not run.
    async fn give_back_turn(&self, customer: &str, turn_taken: Option<Reservation>) {
        let Some(reservation) = turn_taken else { return };
        if let Err(error) = self.ledger.give_back_turn(customer, reservation).await {
            // The turn stays counted: the customer has one less this hour.
            tracing::error!(event = "budget", op = "give_back_turn", error = %error);
        }
    }

    /// A fixed reply, with no model, no refund and no budget: for a message
    /// to a conversation a person has, or one that code hands off.
    fn answer_without_model(
        &self,
        chat: &ChatRequest,
        scope: RefundScope,
        lease: ConversationLease,
        held: HeldConversation,
        reply: &str,
        handoff: Option<Handoff>,
    ) -> (Answer, Option<PendingExchange>) {
        let answer = Answer::in_conversation(Ok(reply.to_owned()), Some(&lease.id), true);
        let exchange = PendingExchange {
            new: NewExchange {
                exchange: Exchange::of_turn(&[Message::User(chat.message.text().to_owned())], Some(reply)),
                status: answer.status.as_u16(),
                scope,
                marked: true,
                refund_recorded: false,
                handoff,
                tokens: None,
                key: None,
            },
            lease,
            held,
        };
        (answer, Some(exchange))
    }

    /// Appends the turn's exchange and gives the conversation back, with its
    /// tokens and the key's settlement in the same transaction; whatever it
    /// could not carry is written on its own. `marked`: once per refund
    /// scope (see [`NewExchange::marked`]).
    async fn finish(
        &self,
        pending: Option<PendingExchange>,
        marked: bool,
        settlement: Option<KeySettlement>,
        trace: &mut RequestTrace,
    ) {
        if let Some(settlement) = &settlement {
            trace.key_settled = Some(match settlement {
                KeySettlement::Store(..) => "stored",
                KeySettlement::Release(_) => "released",
            });
        }
        let Some(mut pending) = pending else {
            if let Some(settlement) = &settlement {
                self.settle(settlement).await;
            }
            return;
        };
        pending.new.marked = marked;
        pending.new.key = settlement;
        let appended = self
            .conversations
            .append(&pending.lease, &pending.held, &pending.new, now_ms())
            .await;
        // `Some(false)`: nothing of it was written; `None`: it may have been
        // (a timeout, or an answer that was lost).
        let carried = match &appended {
            Ok(Appended::Appended) => Some(true),
            Ok(Appended::KeyNotOurs) => {
                tracing::error!(
                    event = "ledger",
                    op = "settle_request",
                    "the key is held by another request"
                );
                Some(true)
            }
            Ok(Appended::AlreadyThere) => Some(false),
            Err(error) => {
                // The answer stands: the ledger, not the conversation, is the record of money.
                tracing::error!(event = "conversation", op = "append", error = %error);
                // The turn has ended: its conversation is free (contract 11),
                // not held until the lease runs out.
                self.release_conversation(&pending.lease, &pending.held).await;
                match error {
                    // Cancelled: nothing was written.
                    LedgerError::Conflict(_) | LedgerError::Contended => Some(false),
                    _ => None,
                }
            }
        };
        trace.conversation.appended = Some(match appended {
            Ok(Appended::Appended | Appended::KeyNotOurs) => "appended",
            Ok(Appended::AlreadyThere) => "already_there",
            Err(_) => "failed",
        });
        if carried == Some(true) {
            return;
        }
        // The key's settlement recognises its own landed write, so it is
        // made whatever the append did; the tokens' settlement only when
        // the append certainly wrote nothing, since it would count twice
        // (an unknown one keeps its reservation, as a dead turn does).
        if carried == Some(false) {
            self.settle_tokens(pending.lease.customer.as_str(), pending.new.tokens)
                .await;
        }
        if let Some(settlement) = &pending.new.key {
            self.settle(settlement).await;
        }
    }

    /// The earlier exchanges the model gets: none for a new conversation.
    async fn window(
        &self,
        lease: &ConversationLease,
        held: &HeldConversation,
        running: &RefundScope,
    ) -> Result<Vec<Exchange>, LedgerError> {
        let window = self.config.conversation_window;
        if held.exchanges == 0 || window.max_exchanges == 0 {
            return Ok(Vec::new());
        }
        let recent = self
            .conversations
            .recent(&lease.id, window.max_exchanges, running)
            .await?;
        Ok(window.select(recent))
    }

    async fn release_conversation(&self, lease: &ConversationLease, held: &HeldConversation) {
        if !held.stored {
            return;
        }
        if let Err(error) = self.conversations.release(lease).await {
            // Its lease ends at the deadline by itself.
            tracing::error!(event = "conversation", op = "release", error = %error);
        }
    }

    async fn run_turn(
        &self,
        chat: &ChatRequest,
        context: Attempt,
        history: Vec<Message>,
        handoff_id: String,
        trace: &mut RequestTrace,
    ) -> TurnResult {
        let model = match self.model().await {
            Ok(model) => model,
            Err(error) => {
                return TurnResult {
                    reply: Err(error.into()),
                    own_messages: None,
                    handoff: None,
                };
            }
        };
        let mut turn = Turn::new(
            model,
            &self.refunds,
            self.config.retry_backoff,
            context,
            history,
            &chat.message,
        )
        .with_handoff(handoff_id);
        let result = turn.run().await;
        trace.stats = Some(turn.stats().clone());
        TurnResult {
            reply: result.map_err(ApiError::from),
            own_messages: Some(turn.own_messages().to_vec()),
            handoff: turn.handoff().cloned(),
        }
    }

    async fn model(&self) -> Result<&OpenAiChat, SecretError> {
        self.model
            .get_or_try_init(|| async {
                let key = self.key_source.fetch().await.inspect_err(|error| {
                    tracing::error!(event = "secret_read_failed", error = %error);
                })?;
                Ok(OpenAiChat::new(
                    self.http.clone(),
                    &self.config.openai_base_url,
                    key.expose(),
                    self.config.openai_timeout,
                    self.config.max_output_tokens,
                ))
            })
            .await
    }

    fn response(&self, answer: Answer, invocation: &Invocation) -> Response<Body> {
        let mut response = Response::builder()
            .status(answer.status)
            .header(header::CONTENT_TYPE, "application/json");
        if let Ok(value) = HeaderValue::from_str(invocation.request_id()) {
            response = response.header(REQUEST_ID_HEADER, value);
        }
        if let Some(origin) = self
            .config
            .cors_allow_origin
            .as_deref()
            .and_then(|o| HeaderValue::from_str(o).ok())
        {
            response = response
                .header(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin)
                .header(header::ACCESS_CONTROL_EXPOSE_HEADERS, EXPOSED_HEADERS)
                .header(header::VARY, "origin");
        }
        if answer.status == StatusCode::METHOD_NOT_ALLOWED {
            response = response.header(header::ALLOW, "POST");
        }
        if let Some(seconds) = answer.error.as_ref().and_then(ApiError::retry_after_secs) {
            response = response.header(header::RETRY_AFTER, seconds);
        }
        if answer.replayed {
            response = response.header(idempotency::REPLAYED_HEADER, "true");
        }
        response
            .body(Body::Text(answer.body))
            .unwrap_or_else(|_| Response::new(Body::Text(r#"{"detail":"internal error"}"#.to_owned())))
    }
}

/// The checks that need no I/O, in the contract's order.
fn check(request: &Request, identity: &crate::config::IdentitySource) -> Result<Checked, ApiError> {
    // The raw path: a REST API stage prefixes `uri().path()` with `/Prod`.
    if request.raw_http_path() != ROUTE {
        return Err(ApiError::NotFound);
    }
    if request.method() != Method::POST {
        return Err(ApiError::MethodNotAllowed);
    }
    let authenticated = identity.authenticated(request)?;
    let body = request.body().as_ref();
    let chat = ChatRequest::parse(body)?;
    let customer = identity::customer(authenticated, &chat.user_id)?;
    let mut keys = request.headers().get_all(idempotency::HEADER).iter();
    let key = match (keys.next(), keys.next()) {
        (None, _) => None,
        (Some(value), None) => Some((IdempotencyKey::parse(value.as_bytes())?, idempotency::body_sha256(body))),
        (Some(_), Some(_)) => return Err(MalformedKey.into()),
    };
    Ok(Checked { customer, chat, key })
}
