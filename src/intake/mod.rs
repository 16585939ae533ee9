//! The intake: what happens to one checked message between the HTTP edge and
//! the domain. The edge ([`crate::http`]) knows requests: it parses one into
//! a [`Message`] and writes the intake's [`Outcome`] back as a status and a
//! body. The intake knows the shop: the key's admission (contract 6.3), the
//! conversation's lease and window (11), the handoff screen and a person's
//! conversations (12), the budget (13), the turn, and the append that ends
//! it, in the contract's order. Each step is a file:
//!
//! - [`admission`]: the `Idempotency-Key` claimed (with the budget's turn
//!   when one is due), judged, stored or released after the turn;
//! - [`conversation`]: the conversation's lease, the screen, the window, the
//!   budget and the turn, up to the exchange to append;
//! - [`finish`]: the append, with the key's settlement and the tokens in its
//!   transaction, and whatever it could not carry written on its own.
//!
//! A new route (a read of the conversation, say) is a new step here and a
//! parser and a mapping at the edge: the edge never learns the shop's rules.

pub mod admission;
mod claim;
#[cfg(test)]
mod confirm_tests;
mod conversation;
mod finish;
mod model;
mod rating;
mod read;
mod refused;
#[cfg(test)]
mod tests;
mod trace;

use tokio::sync::OnceCell;

use crate::budget::Account;
use crate::chat::openai::OpenAiChat;
use crate::clock::now_ms;
use crate::config::Config;
use crate::conversation::ConversationId;
use crate::help::search::HelpCentre;
use crate::ledger::{BudgetStore, ConversationStore, KeySettlement, RequestLease, RequestLedger, StoredResponse};
use crate::live::Live;
use crate::ops::telemetry::KeyUse;
use crate::orders::OrderSystem;
use crate::refund::message::CustomerMessage;
use crate::refund::{RefundGateway, RefundScope, WriterMark};
use crate::router::Intent;
use crate::secrets::{ApiKeySource, SecretError};

use self::admission::{Admission, IdempotencyKey};
use self::conversation::{Continuing, Visit};
pub use self::refused::Refused;
pub use self::trace::Trace;

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
    pub fn new(request_id: &str, deadline_ms: u64) -> Invocation {
        Invocation {
            writer: WriterMark::new(request_id),
            deadline_ms,
        }
    }

    /// The Lambda request id.
    pub fn request_id(&self) -> &str {
        self.writer.invocation()
    }
}

/// A message that passed every check of the edge that needs no I/O.
#[derive(Debug, Clone)]
pub struct Message {
    /// The customer: the authenticated one (or, in body mode, the body's).
    pub customer: String,
    /// As it will be kept and sent (contract 23): the edge masked it, so
    /// nothing after it (the conversation, the ledger, an event, the model,
    /// the key's fingerprint) sees a card number or an IBAN.
    pub text: CustomerMessage,
    /// The conversation it continues; none starts a new one.
    pub conversation_id: Option<ConversationId>,
    pub key: Option<Keyed>,
    pub who: Who,
}

/// Who sent a message, as the edge found them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    /// Verified by an authorizer (or, in body mode, named by the body).
    Customer,
    /// No token (contract 27): `customer` is the visitor token's hash, and
    /// `address` the keyed hash of their source address, which their turns
    /// count on.
    Visitor { address: String },
    /// Verified by the guest pool's token (contract 27): `customer` is
    /// `guest:<sub>`, and the order system is asked by this e-mail alone.
    /// Their turns, tokens and automatic refunds count in `day_owner`'s day
    /// ([`crate::guest::GuestEmail::day_owner`]).
    Guest {
        email: crate::guest::GuestEmail,
        day_owner: String,
    },
}

/// The message's `Idempotency-Key`, with the hash of the body it came with.
#[derive(Debug, Clone)]
pub struct Keyed {
    pub key: IdempotencyKey,
    pub body_sha256: String,
}

/// A reply before the edge writes it.
#[derive(Debug)]
pub struct Reply {
    pub result: Result<String, Refused>,
    /// The conversation it belongs to: named in the answer of a request
    /// that ran a turn (contract 11).
    pub conversation: Option<ConversationId>,
    /// A person has the conversation (contract 12).
    pub handed_off: bool,
    /// The turn sent a refund to a person (contract 18).
    pub awaiting_approval: bool,
    /// A visitor asked what needs an account: these intents wait for them
    /// to verify (contract 27); empty otherwise.
    pub verify: Vec<Intent>,
    /// A return the turn started: its label, apart from the text (contract 28).
    pub label: Option<crate::orders::returns::Label>,
    /// When a person will answer a handed-off conversation (contract 32).
    pub person_expected: Option<crate::office_hours::expected::PersonExpected>,
}

impl Reply {
    fn refused(refused: Refused) -> Reply {
        Reply {
            result: Err(refused),
            conversation: None,
            handed_off: false,
            awaiting_approval: false,
            verify: Vec::new(),
            label: None,
            person_expected: None,
        }
    }
}

/// How the edge writes a reply: the status and body it sends, which the
/// intake stores for replays of the same key exactly as they were sent.
pub type Render = fn(&Reply) -> StoredResponse;

/// What the intake answers: the written reply, why it is not a reply when it
/// is not, and whether it is a replay of a stored one.
#[derive(Debug)]
pub struct Outcome {
    pub status: u16,
    pub body: String,
    pub refused: Option<Refused>,
    pub replayed: bool,
}

impl Outcome {
    fn written(reply: Reply, render: Render) -> Outcome {
        let StoredResponse { status, body } = render(&reply);
        Outcome {
            status,
            body,
            refused: reply.result.err(),
            replayed: false,
        }
    }

    fn replay(stored: StoredResponse) -> Outcome {
        Outcome {
            status: stored.status,
            body: stored.body,
            refused: None,
            replayed: true,
        }
    }

    fn stored(&self) -> StoredResponse {
        StoredResponse {
            status: self.status,
            body: self.body.clone(),
        }
    }
}

/// Everything the intake talks to.
pub struct Ports<K, R, L, C, O> {
    /// Where the OpenAI key comes from.
    pub key_source: K,
    /// What runs a refund the model asks for (in the function: record, then pay).
    pub refunds: R,
    /// The shop's order system, read with the verified customer (contract 16).
    pub orders: O,
    /// Where request records and budgets live.
    pub ledger: L,
    /// Where conversations live.
    pub conversations: C,
    /// The HTTP client for OpenAI.
    pub http: reqwest::Client,
}

/// The intake's state for the life of the container.
pub struct Intake<K, R, L, C, O> {
    config: Config,
    key_source: K,
    refunds: R,
    orders: O,
    ledger: L,
    conversations: C,
    http: reqwest::Client,
    /// The shop's articles, indexed once per container (contract 17).
    help: HelpCentre,
    render: Render,
    /// Built on first use, once the key has been read; an error is not cached.
    model: OnceCell<OpenAiChat>,
    /// The key the model carries, read again after `OPENAI_KEY_CACHE_SECS`.
    key: model::KeyState,
    /// The measured reply time (contract 32) and when it was read: read again
    /// after the office's `reply_time_cache`, so the page's reads of an open
    /// handoff do not each read it.
    reply_time: std::sync::Mutex<Option<(u64, Option<u32>)>>,
}

impl<K: ApiKeySource, R: RefundGateway, L: RequestLedger + BudgetStore, C: ConversationStore, O: OrderSystem>
    Intake<K, R, L, C, O>
{
    pub fn new(config: Config, ports: Ports<K, R, L, C, O>, render: Render) -> Self {
        // The tools' validators compiled at start, not in the first turn.
        crate::refund::tool::warm_up();
        crate::handoff::tool::warm_up();
        crate::orders::tool::warm_up();
        crate::help::tool::warm_up();
        let help = HelpCentre::new(config.help_articles.clone());
        let config_key_cache = config.openai_key_cache;
        Intake {
            config,
            key_source: ports.key_source,
            refunds: ports.refunds,
            orders: ports.orders,
            ledger: ports.ledger,
            conversations: ports.conversations,
            http: ports.http,
            help,
            render,
            model: OnceCell::new(),
            key: model::KeyState::new(config_key_cache),
            reply_time: std::sync::Mutex::new(None),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Takes `message` through admission, the conversation, the screen, the
    /// budget, the turn and the append; `trace` gathers what the summary
    /// line reports.
    /// `live` hears the turn as it runs (event-stream mode); [`Live::silent`]
    /// in JSON mode. What the intake does is the same either way.
    pub async fn take(&self, message: Message, invocation: &Invocation, trace: &mut Trace, live: &Live) -> Outcome {
        let customer = message.customer.clone();
        trace.user_id = Some(customer.clone());
        tracing::info!(
            event = "request",
            user_id = %customer,
            message_chars = message.text.chars(),
            idempotency_key = message.key.is_some(),
            conversation_id = message.conversation_id.as_ref().map(ConversationId::as_str).unwrap_or_default(),
        );
        let mut continuing = match Continuing::of(message.conversation_id.clone()) {
            Ok(continuing) => continuing,
            Err(error) => return self.written(Reply::refused(error.into())),
        };
        // A code handoff spends no budget (contract 13); known before any I/O.
        let screened = self.config.handoff_screen.check(message.text.text());
        let account = self.account(&message);
        let Some(keyed) = message.key.clone() else {
            let visit = Visit {
                message: &message,
                account: &account,
                continuing: &continuing,
                screened,
                turn_taken: None,
                scope: RefundScope::for_request(customer, invocation.request_id()),
                invocation,
                live,
            };
            let (outcome, exchange) = self.converse(visit, trace).await;
            // No key, no retry of this scope: its exchange is marked as appended.
            self.finish(exchange, true, None, trace).await;
            return outcome;
        };

        let now = now_ms();
        let lease = RequestLease {
            scope: RefundScope::for_idempotency_key(customer, keyed.key.as_str()),
            writer: invocation.writer.clone(),
            body_sha256: keyed.body_sha256,
            lease_until_ms: self.lease_end(invocation, now),
            expires_at_s: (now + self.config.idempotency_ttl.as_millis() as u64) / 1000,
            conversation_id: Some(continuing.id.as_str().to_owned()),
        };
        let (admission, turn_taken) = match self.admit(&lease, &account, screened.is_none(), now, trace).await {
            Ok(admitted) => admitted,
            Err(refused) => return self.written(Reply::refused(refused)),
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
                    continuing.take_over(conversation_id.as_deref());
                }
            }
            Admission::Replay(stored) => {
                trace.key_use = KeyUse::Replayed;
                return Outcome::replay(stored);
            }
        }
        let visit = Visit {
            message: &message,
            account: &account,
            continuing: &continuing,
            screened,
            turn_taken,
            scope: lease.scope.clone(),
            invocation,
            live,
        };
        let (outcome, exchange) = self.converse(visit, trace).await;
        // The key is settled in the append's own transaction: an invocation
        // that dies leaves both or neither, never a stored answer whose
        // exchange is missing. An exchange whose key is given back is not
        // marked, so the retry's own exchange is kept too.
        let keep = self.keeps_answer(&lease, &outcome, trace).await;
        let settlement = if keep {
            KeySettlement::Store(lease, outcome.stored())
        } else {
            KeySettlement::Release(lease)
        };
        self.finish(exchange, keep, Some(settlement), trace).await;
        outcome
    }

    /// Whose budget the message's turn counts in (contracts 13 and 27).
    fn account(&self, message: &Message) -> Account {
        match (&message.who, &self.config.visitors) {
            (Who::Visitor { address }, Some(visitors)) => {
                Account::of_visitor(address, visitors.limits(&self.config.budget))
            }
            // The edge lets no visitor through without the settings; if one
            // came, it would get no turn at all: closed.
            (Who::Visitor { address }, None) => Account::of_visitor(
                address,
                crate::budget::BudgetLimits {
                    turns_per_hour: 0,
                    ..self.config.budget
                },
            ),
            // Guests count as customers do, by their e-mail's day, and in
            // the day all guests share (contract 27).
            (Who::Guest { day_owner, .. }, _) => {
                Account::of_guest(day_owner, self.config.budget, self.config.guest_tokens_per_day)
            }
            (Who::Customer, _) => Account::of_customer(&message.customer, self.config.budget),
        }
    }

    fn written(&self, reply: Reply) -> Outcome {
        Outcome::written(reply, self.render)
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

    /// The model, its key read on first use and again once stale.
    async fn model(&self) -> Result<model::KeyedModel<'_, K>, SecretError> {
        let mut read_now = false;
        let chat = self
            .model
            .get_or_try_init(|| async {
                let key = self.key_source.fetch().await.inspect_err(|error| {
                    tracing::error!(event = "secret_read_failed", error = %error);
                })?;
                read_now = true;
                let chat = OpenAiChat::new(
                    self.http.clone(),
                    &self.config.openai_base_url,
                    key.expose(),
                    self.config.openai_timeout,
                    self.config.max_output_tokens,
                );
                self.key.keep(key);
                Ok::<_, SecretError>(chat)
            })
            .await?;
        if !read_now && self.key.stale() {
            self.key.refresh(&self.key_source, chat).await;
        }
        Ok(model::KeyedModel {
            chat,
            source: &self.key_source,
            key: &self.key,
        })
    }
}
