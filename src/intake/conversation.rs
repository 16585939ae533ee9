//! The conversation around one turn (contract 11, 12, 13): its lease taken
//! (404, 409 or 503 before any secret or model call), a person's
//! conversation answered without the model, the screen's handoff, the
//! window read, the budget's turn taken last, and the turn run, up to the
//! exchange the turn adds, which [`super::finish`] appends.

use crate::budget::{Account, Reservation};
use crate::chat::Message as ChatMessage;
use crate::clock::now_ms;
use crate::confirm::{Confirmation, ProposalSteps, WriteKind};
use crate::conversation::{self, ConversationId, Exchange, NoRandomness};
use crate::handoff::{self, Handoff, Reason};
use crate::ledger::WritesAppend;
use crate::ledger::{
    Begun, BudgetStore, ConversationLease, ConversationStore, HeldConversation, LedgerError, NewExchange,
    RequestLedger, TakenTurn, TokenSettlement,
};
use crate::live::Live;
use crate::office_hours::expected::PersonExpected;
use crate::orders::OrderSystem;
use crate::refund::{Attempt, RefundGateway, RefundScope, Routed};
use crate::router::{self, Intent, Route, Routing};
use crate::secrets::{ApiKeySource, SecretError};

use super::model::KeyedModel;
use crate::turn::{AddressTurn, Ports, ReturnTurn, Turn};

use super::{Intake, Invocation, Message, Outcome, Refused, Reply, Trace, Who};
use crate::visitor;

/// The conversation a message runs in, before its lease is taken.
pub(super) struct Continuing {
    pub(super) id: ConversationId,
    /// The function issued the id for this request (or its key's first
    /// request did): absent means new, not unknown.
    issued_here: bool,
    /// Issued for this very request (not a takeover's): nobody else knows
    /// it, so it is not stored yet and needs no lease.
    created_here: bool,
}

impl Continuing {
    /// The body's conversation, or a new one with an id issued here.
    pub(super) fn of(named: Option<ConversationId>) -> Result<Continuing, NoRandomness> {
        Ok(match named {
            Some(id) => Continuing {
                id,
                issued_here: false,
                created_here: false,
            },
            None => Continuing {
                id: ConversationId::generate()?,
                issued_here: true,
                created_here: true,
            },
        })
    }

    /// A takeover continues the conversation its key's first request began,
    /// which may be stored by now.
    pub(super) fn take_over(&mut self, recorded: Option<&str>) {
        self.created_here = false;
        if let Some(id) = recorded.and_then(ConversationId::parse) {
            self.id = id;
        }
    }
}

/// What one visit to the conversation needs.
pub(super) struct Visit<'a> {
    pub(super) message: &'a Message,
    /// Whose budget its turn counts in.
    pub(super) account: &'a Account,
    pub(super) continuing: &'a Continuing,
    /// What the handoff screen found in the message, before any I/O.
    pub(super) screened: Option<Reason>,
    /// The turn the key's claim took from the budget, if it did.
    pub(super) turn_taken: Option<Reservation>,
    pub(super) scope: RefundScope,
    pub(super) invocation: &'a Invocation,
    /// Who hears the turn as it runs (contract 20); silent in JSON mode.
    pub(super) live: &'a Live,
}

/// A turn's exchange, waiting to be appended once the key's fate is known.
pub(super) struct PendingExchange {
    pub(super) lease: ConversationLease,
    pub(super) held: HeldConversation,
    pub(super) new: NewExchange,
}

/// What the router's step decided, as the turn and its records need it.
struct RoutedTurn {
    route: Route,
    /// As recorded: `order_status,refund;low;0.92` or `unknown`.
    labels: String,
    /// The labels leave refunds to a person ([`router::refund_not_routed`]).
    refund_not_routed: bool,
    /// The labels include `address_change` (contract 26).
    address_change: bool,
    /// The labels' intents (none when the router failed).
    intents: Vec<Intent>,
    tokens: u64,
}

/// What the turn is run with besides its messages: the id a handoff gets,
/// who hears it, and the router's labels.
struct Steering<'a> {
    handoff_id: String,
    live: &'a Live,
    routed: Routed,
    address: AddressTurn,
    returns: ReturnTurn,
    confirmation: Confirmation,
}

/// A fixed reply, with what the conversation keeps beside it.
struct Answered {
    reply: String,
    handoff: Option<Handoff>,
    /// The budget's settlement, when a turn was taken (a routed handoff).
    tokens: Option<TokenSettlement>,
    router: Option<String>,
    /// What a visitor must verify for (contract 27): no handoff then.
    verify: Vec<Intent>,
    /// When a person will answer (contract 32), for a handed-off conversation.
    expected: Option<PersonExpected>,
    /// The sentence a person's conversation tells now (contract 12): kept,
    /// so that it is not said again until it changes.
    told: Option<String>,
}

impl Answered {
    /// Code's own reply, before any model: no turn taken, no routing call.
    fn fixed(reply: impl Into<String>, handoff: Option<Handoff>) -> Answered {
        Answered {
            reply: reply.into(),
            handoff,
            tokens: None,
            router: None,
            verify: Vec::new(),
            expected: None,
            told: None,
        }
    }

    /// Code's reply to a message that hands the conversation off: the
    /// reason's sentence, then when a person will answer.
    fn handing_off(reason: Reason, handoff: Handoff, expected: PersonExpected) -> Answered {
        Answered {
            expected: Some(expected.clone()),
            ..Answered::fixed(
                format!("{} {}", handoff::fixed_reply(reason), expected.sentence()),
                Some(handoff),
            )
        }
    }
}

/// The turn taken from `account`, settled to `used` tokens (the routing
/// call's alone when no model ran: the turn was taken and the call spent,
/// both are counted).
fn settled(account: &Account, turn_taken: Option<Reservation>, used: u64) -> Option<TokenSettlement> {
    turn_taken.map(|reservation| TokenSettlement {
        reservation,
        used,
        counters: account.token_counters(),
    })
}

/// A turn's outcome, with what it added to the conversation (`None` when no
/// turn ran: the key could not be read).
struct TurnResult {
    reply: Result<String, Refused>,
    own_messages: Option<Vec<ChatMessage>>,
    /// The handoff the model asked for.
    handoff: Option<Handoff>,
}

impl<K: ApiKeySource, R: RefundGateway, L: RequestLedger + BudgetStore, C: ConversationStore, O: OrderSystem>
    Intake<K, R, L, C, O>
{
    /// Takes the conversation's lease, reads its window, runs the turn, and
    /// returns the exchange to append.
    /// The intents the agent takes for whoever wrote (contracts 21 and 27):
    /// a guest's are `GUEST_INTENTS` within `AGENT_INTENTS`.
    fn served(&self, who: &Who) -> &crate::router::Served {
        match who {
            Who::Guest { .. } => &self.config.guest_intents,
            Who::Customer | Who::Visitor { .. } => &self.config.router.served,
        }
    }

    pub(super) async fn converse(&self, visit: Visit<'_>, trace: &mut Trace) -> (Outcome, Option<PendingExchange>) {
        let Visit {
            message,
            account,
            continuing,
            screened,
            mut turn_taken,
            scope,
            invocation,
            live,
        } = visit;
        let now = now_ms();
        let lease = ConversationLease {
            id: continuing.id.clone(),
            customer: scope.user_id().to_owned(),
            writer: invocation.writer.clone(),
            lease_until_ms: self.lease_end(invocation, now),
            scope: scope.record_id(),
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
                self.give_back_turn(account, turn_taken).await;
                // A visitor's takes so many an hour (section 13): nobody
                // fills the desk's queue for free.
                if let (Who::Visitor { .. }, Some(visitors)) = (&message.who, &self.config.visitors)
                    && let Err(refused) = self.take_turn(&visitors.handed_off(lease.id.as_str()), trace).await
                {
                    self.release_conversation(&lease, &held).await;
                    return (self.written(Reply::refused(refused)), None);
                }
                // The sentence once, and again when it changed (the team came
                // back, the reply time moved); otherwise no words (contract 12).
                let expected = self.person_expected().await;
                let sentence = format!("{} {}", handoff::WITH_A_PERSON, expected.sentence());
                let told = (held.handoff_told.as_deref() != Some(sentence.as_str())).then_some(sentence);
                let answered = Answered {
                    expected: Some(expected),
                    told: told.clone(),
                    ..Answered::fixed(told.unwrap_or_default(), None)
                };
                return self.answer_without_model(&kept_while_verifying(message, &held), scope, lease, held, answered);
            }
            Ok(Begun::Held(held)) => Ok(held),
            Ok(Begun::NotFound) => Err(Refused::ConversationNotFound),
            Ok(Begun::Busy { lease_until_ms }) => {
                trace.conversation.busy = true;
                let retry_after_secs = lease_until_ms.saturating_sub(now).div_ceil(1000).max(1);
                Err(Refused::ConversationBusy { retry_after_secs })
            }
            Err(error) => {
                tracing::error!(event = "conversation", op = "begin", error = %error);
                Err(Refused::ConversationUnavailable(error))
            }
        };
        let held = match refused {
            Ok(held) => held,
            Err(refused) => {
                self.give_back_turn(account, turn_taken).await;
                return (self.written(Reply::refused(refused)), None);
            }
        };
        // From here on, the message as it is kept and sent.
        let kept = kept_while_verifying(message, &held);
        let message: &Message = &kept;
        let handoff_id = handoff::handoff_id(lease.id.as_str());
        if let Some(reason) = screened {
            // A visitor's code-made handoff is a turn of their address
            // (section 13): the budget before the desk's queue.
            let mut tokens = None;
            if matches!(message.who, Who::Visitor { .. }) {
                let taken = match turn_taken {
                    Some(reservation) => reservation,
                    None => match self.take_turn(account, trace).await {
                        Ok(reservation) => reservation,
                        Err(refused) => {
                            self.release_conversation(&lease, &held).await;
                            return (self.written(Reply::refused(refused)), None);
                        }
                    },
                };
                // No model ran: the turn stays, its reserved tokens do not.
                tokens = settled(account, Some(taken), 0);
            }
            trace.handoff = Some(reason);
            let handoff = Handoff {
                id: handoff_id,
                reason,
                summary: None,
            };
            let answered = Answered {
                tokens,
                ..Answered::handing_off(reason, handoff, self.person_expected().await)
            };
            return self.answer_without_model(message, scope, lease, held, answered);
        }
        let window = match self.window(&lease, &held, &scope).await {
            Ok(window) => window,
            Err(error) => {
                tracing::error!(event = "conversation", op = "recent", error = %error);
                self.release_conversation(&lease, &held).await;
                self.give_back_turn(account, turn_taken).await;
                return (
                    self.written(Reply::refused(Refused::ConversationUnavailable(error))),
                    None,
                );
            }
        };
        // The budget, last before the turn (contract 13), unless the key's
        // claim took it: counted atomically, refused before the secret, the
        // model or payments; closed if unreachable.
        if turn_taken.is_none() {
            match self.take_turn(account, trace).await {
                Ok(reservation) => turn_taken = Some(reservation),
                Err(refused) => {
                    self.release_conversation(&lease, &held).await;
                    return (self.written(Reply::refused(refused)), None);
                }
            }
        }
        // The router, last before the agent (contract 21): its labels decide
        // whether the agent runs, and how tightly.
        // The key is read once, for the routing call and the turn.
        let model = self.model().await;
        let routed = self.route(model.as_ref().ok(), message, &window, trace).await;
        // A visitor who asks what needs an account is answered by code: they
        // are asked to verify, and no model sees the question (contract 27).
        // A risk still goes to a person first.
        let verify = match message.who {
            Who::Visitor { .. } if routed.route != Route::HandOff(Reason::Risk) => {
                visitor::needing_an_account(&routed.intents)
            }
            _ => Vec::new(),
        };
        if !verify.is_empty() {
            let answered = Answered {
                tokens: settled(account, turn_taken, routed.tokens),
                router: Some(routed.labels),
                verify,
                ..Answered::fixed(visitor::VERIFY_REPLY, None)
            };
            return self.answer_without_model(message, scope, lease, held, answered);
        }
        if let Route::HandOff(reason) = routed.route {
            trace.handoff = Some(reason);
            let handoff = Handoff {
                id: handoff_id,
                reason,
                summary: None,
            };
            let answered = Answered {
                tokens: settled(account, turn_taken, routed.tokens),
                router: Some(routed.labels),
                ..Answered::handing_off(reason, handoff, self.person_expected().await)
            };
            return self.answer_without_model(message, scope, lease, held, answered);
        }

        trace.conversation.history_exchanges = window.len();
        let context = Attempt {
            scope,
            writer: invocation.writer.clone(),
            conversation: Some(lease.id.as_str().to_owned()),
            day_owner: match &message.who {
                Who::Guest { day_owner, .. } => Some(day_owner.clone()),
                Who::Customer | Who::Visitor { .. } => None,
            },
        };
        // A write (contracts 26 and 28) is offered while the shop serves it
        // and the router saw it asked for, or its proposal waits for the
        // customer's yes, which code reads from the customer's own message.
        let now = now_ms();
        let served = self.served(&message.who);
        let waiting = held.proposals.waiting_at(now);
        let address = AddressTurn {
            offered: served.contains(Intent::AddressChange)
                && (routed.address_change || waiting.get(WriteKind::ADDRESS).is_some()),
            countries: self.config.address.shipping_countries.clone(),
        };
        let returns = ReturnTurn {
            offered: served.contains(Intent::Return)
                && (routed.intents.contains(&Intent::Return) || waiting.get(WriteKind::RETURN).is_some()),
            window_days: self.config.returns.window_days,
            label_origins: self.config.returns.label_origins.clone(),
            zone: Some(self.config.office.zone()),
            started_before: held.returns_started.clone(),
        };
        let confirmation = Confirmation {
            waiting,
            said_yes: self.config.confirm.yes.says_yes(message.text.text()),
            confirm_within: self.config.confirm.within,
            now_ms: now,
        };
        let mut turn = self
            .run_turn(
                model,
                message,
                context.clone(),
                conversation::history(&window),
                Steering {
                    handoff_id: handoff_id.clone(),
                    live,
                    address,
                    returns,
                    confirmation,
                    routed: Routed {
                        labels: Some(routed.labels.clone()),
                        unsure: matches!(routed.route, Route::Agent { unsure: true }),
                        refund_not_routed: routed.refund_not_routed,
                    },
                },
                trace,
            )
            .await;
        // The customer confirms what code will write, in code's words, and
        // reads a started return's label there (contracts 26 and 28).
        if let (Ok(reply), Some(stats)) = (&mut turn.reply, trace.stats.as_ref()) {
            for (_, line) in &stats.code_lines {
                reply.push_str("\n\n");
                reply.push_str(line);
            }
        }
        // What the model wrote is kept as the customer's words are (contract 23).
        if let Ok(reply) = &mut turn.reply {
            *reply = crate::conversation::person::kept(reply).into_owned();
        }
        if let Some(summary) = turn.handoff.as_mut().and_then(|handoff| handoff.summary.as_mut()) {
            *summary = crate::conversation::person::kept(summary).into_owned();
        }
        let tokens = turn_taken.and_then(|reservation| {
            let used = trace.stats.as_ref().map_or(routed.tokens, |stats| {
                let counted = routed.tokens + stats.prompt_tokens + stats.completion_tokens;
                // A streamed call that never said what it cost costs the worst case.
                if stats.usage_unreported {
                    counted.max(reservation.tokens)
                } else {
                    counted
                }
            });
            settled(account, Some(reservation), used)
        });
        let Some(own_messages) = turn.own_messages else {
            self.release_conversation(&lease, &held).await;
            self.settle_tokens(tokens).await;
            let reply = Reply {
                result: turn.reply,
                conversation: None,
                handed_off: false,
                awaiting_approval: false,
                verify: Vec::new(),
                label: None,
                person_expected: None,
            };
            return (self.written(reply), None);
        };
        let failed = matches!(turn.reply, Err(Refused::Turn(_)));
        // Two failed turns in a row: a person takes over, the status stays.
        let handoff = turn.handoff.or_else(|| {
            (failed && held.last_failed).then_some(Handoff {
                id: handoff_id,
                reason: Reason::AgentFailed,
                summary: None,
            })
        });
        trace.handoff = handoff.as_ref().map(|h| h.reason);
        // A turn that hands off ends with code's words of when a person
        // will answer (contract 32): the model never says a time.
        let person_expected = match &handoff {
            Some(_) => Some(self.person_expected().await),
            None => None,
        };
        if let (Some(expected), Ok(reply)) = (&person_expected, &mut turn.reply) {
            *reply = if reply.trim().is_empty() {
                expected.sentence()
            } else {
                format!("{}\n\n{}", reply.trim_end(), expected.sentence())
            };
        }
        let reply = turn.reply.as_ref().ok().cloned();
        let awaiting_approval = trace.refund_awaits_approval();
        let label = trace.stats.as_ref().and_then(|stats| stats.label.clone());
        let outcome = self.written(Reply {
            result: turn.reply,
            conversation: Some(lease.id.clone()),
            handed_off: handoff.is_some(),
            awaiting_approval,
            verify: Vec::new(),
            label: label.clone(),
            person_expected,
        });
        let refund_recorded = trace.refund_recorded();
        let mut writes = trace
            .stats
            .as_ref()
            .map_or_else(WritesAppend::default, |stats| WritesAppend {
                steps: stats.proposal_steps.clone(),
                addresses: stats.addresses.clone(),
                returns: stats.returns.clone(),
            });
        // A proposal is kept only when the answer with code's line is sent
        // (contract 26, tightened): a 502 or 504 proposes nothing.
        if !(200..300).contains(&outcome.status) {
            writes.steps = writes.steps.without_new_proposals();
        }
        let exchange = PendingExchange {
            new: NewExchange {
                exchange: Exchange::of_turn(&own_messages, reply.as_deref()).masked(),
                status: outcome.status,
                scope: context.scope,
                marked: true,
                refund_recorded,
                awaiting_approval,
                handoff,
                tokens,
                key: None,
                router: Some(routed.labels),
                writes,
                orders: trace
                    .stats
                    .as_ref()
                    .map(|stats| stats.orders_found.iter().cloned().collect())
                    .unwrap_or_default(),
                verifying: false,
                from_visitor: matches!(message.who, Who::Visitor { .. }),
                label,
                // Set as the append is made (`finish`).
                handoff_due_at_ms: None,
                told: None,
            },
            lease,
            held,
        };
        (outcome, Some(exchange))
    }

    /// The routing call (contract 21) for `message`, with the customer's
    /// own earlier messages of the window: its labels, what code makes of
    /// them, and its tokens (its worst case when it said nothing of them).
    async fn route(
        &self,
        model: Option<&KeyedModel<'_, K>>,
        message: &Message,
        window: &[Exchange],
        trace: &mut Trace,
    ) -> RoutedTurn {
        let settings = &self.config.router;
        let earlier: Vec<&str> = window.iter().filter_map(Exchange::customer_message).collect();
        let started = tokio::time::Instant::now();
        let (routing, usage) = match model {
            Some(model) => router::call::route(model, settings, &earlier, message.text.text()).await,
            // The turn reports the key; no call was made, none is counted.
            None => (Routing::Failed("no key"), Some(crate::chat::Usage::default())),
        };
        let served = self.served(&message.who);
        let route = router::decide(&routing, served, settings.min_confidence);
        let refund_not_routed = router::refund_not_routed(&routing, served);
        let tokens = usage.map_or_else(router::call::worst_case_tokens, |u| {
            u.prompt_tokens + u.completion_tokens
        });
        let labels = routing.recorded();
        tracing::info!(
            event = "routing",
            labels = %labels,
            failure = match &routing {
                Routing::Failed(why) => *why,
                Routing::Labelled(_) => "",
            },
            route = match route {
                Route::Agent { unsure: false } => "agent",
                Route::Agent { unsure: true } => "agent_unsure",
                Route::HandOff(reason) => reason.as_str(),
            },
            tokens,
            latency_ms = started.elapsed().as_secs_f64() * 1000.0,
        );
        let address_change =
            matches!(&routing, Routing::Labelled(labels) if labels.intents.contains(&Intent::AddressChange));
        let intents = routing.intents().to_vec();
        // Counted and reported only when a routing call was made.
        trace.routing = model.is_some().then_some(routing);
        RoutedTurn {
            route,
            labels,
            refund_not_routed,
            address_change,
            intents,
            tokens,
        }
    }

    /// Takes a turn from the customer's budget: counted atomically, closed
    /// if the budget cannot be read.
    async fn take_turn(&self, account: &Account, trace: &mut Trace) -> Result<Reservation, Refused> {
        let taken_at_ms = now_ms();
        match self.ledger.take_turn(account, taken_at_ms).await {
            Ok(TakenTurn::Taken) => {
                trace.budget = Some("taken");
                Ok(Reservation {
                    taken_at_ms,
                    tokens: account.limits.turn_reservation,
                })
            }
            Ok(TakenTurn::Refused(spent)) => {
                trace.budget = Some(spent.as_str());
                Err(Refused::BudgetSpent(spent))
            }
            Err(error) => {
                tracing::error!(event = "budget", op = "take_turn", error = %error);
                trace.budget = Some("unavailable");
                Err(Refused::BudgetUnavailable(error))
            }
        }
    }

    /// Settles the turn's reservation to its tokens on its own (when no
    /// append carried it). A failure is logged: the answer stands, and the
    /// reservation stays counted, which errs toward the shop's bill.
    pub(super) async fn settle_tokens(&self, tokens: Option<TokenSettlement>) {
        let Some(tokens) = tokens else { return };
        if let Err(error) = self.ledger.settle_tokens(&tokens).await {
            tracing::error!(event = "budget", op = "settle_tokens", error = %error);
        }
    }

    /// Gives back a turn taken with the key's claim that did not run.
    async fn give_back_turn(&self, account: &Account, turn_taken: Option<Reservation>) {
        let Some(reservation) = turn_taken else { return };
        if let Err(error) = self.ledger.give_back_turn(account, reservation).await {
            // The turn stays counted: the customer has one less this hour.
            tracing::error!(event = "budget", op = "give_back_turn", error = %error);
        }
    }

    /// A fixed reply, with no model, no refund and no budget: for a message
    /// to a conversation a person has, one that code hands off, or a
    /// visitor's question that needs an account.
    fn answer_without_model(
        &self,
        message: &Message,
        scope: RefundScope,
        lease: ConversationLease,
        held: HeldConversation,
        answered: Answered,
    ) -> (Outcome, Option<PendingExchange>) {
        let Answered {
            reply,
            handoff,
            tokens,
            router,
            verify,
            expected,
            told,
        } = answered;
        let verifying = !verify.is_empty();
        let outcome = self.written(Reply {
            result: Ok(reply.clone()),
            conversation: Some(lease.id.clone()),
            // A person has it, or takes it now; a visitor asked to verify is
            // still the agent's.
            handed_off: verify.is_empty(),
            awaiting_approval: false,
            verify,
            label: None,
            person_expected: expected,
        });
        let exchange = PendingExchange {
            new: NewExchange {
                // No words, no reply: the page marks the message "sent to our team".
                exchange: Exchange::of_turn(
                    &[ChatMessage::User(message.text.text().to_owned())],
                    Some(reply.as_str()).filter(|reply| !reply.is_empty()),
                ),
                status: outcome.status,
                scope,
                marked: true,
                refund_recorded: false,
                awaiting_approval: false,
                handoff,
                tokens,
                key: None,
                router,
                // Not the yes it waited for: the next message was this one.
                writes: WritesAppend {
                    steps: ProposalSteps::clearing(),
                    ..WritesAppend::default()
                },
                orders: Vec::new(),
                verifying,
                from_visitor: matches!(message.who, Who::Visitor { .. }),
                label: None,
                handoff_due_at_ms: None,
                told,
            },
            lease,
            held,
        };
        (outcome, Some(exchange))
    }

    /// When a person will answer, as code says it (contract 32): from the
    /// median of the recent first replies (one small read, at most once per
    /// `reply_time_cache` in a container), else `REPLY_TIME_MINUTES`. A read
    /// that fails says the setting's time, and is tried again next time.
    pub(super) async fn person_expected(&self) -> PersonExpected {
        let now = now_ms();
        let fresh_for = u64::try_from(self.config.office.reply_time_cache.as_millis()).unwrap_or(u64::MAX);
        let cached = self
            .reply_time
            .lock()
            .ok()
            .and_then(|kept| *kept)
            .filter(|(read_at, _)| now.saturating_sub(*read_at) < fresh_for);
        let measured = match cached {
            Some((_, measured)) => measured,
            // Boxed: the store's read (an SDK call's future, large in a debug
            // build) stays off the stack of every turn's future that awaits this.
            None => match Box::pin(self.conversations.first_replies()).await {
                Ok(replies) => {
                    let measured = crate::office_hours::expected::median_reply_minutes(&replies, now).0;
                    if let Ok(mut kept) = self.reply_time.lock() {
                        *kept = Some((now, measured));
                    }
                    measured
                }
                Err(error) => {
                    tracing::error!(event = "conversation", op = "first_replies", error = %error);
                    None
                }
            },
        };
        self.config.office.expected(now, measured)
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

    pub(super) async fn release_conversation(&self, lease: &ConversationLease, held: &HeldConversation) {
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
        model: Result<KeyedModel<'_, K>, SecretError>,
        message: &Message,
        context: Attempt,
        history: Vec<ChatMessage>,
        steering: Steering<'_>,
        trace: &mut Trace,
    ) -> TurnResult {
        let Steering {
            handoff_id,
            live,
            routed,
            address,
            returns,
            confirmation,
        } = steering;
        let model = match model {
            Ok(model) => model,
            Err(error) => {
                return TurnResult {
                    reply: Err(error.into()),
                    own_messages: None,
                    handoff: None,
                };
            }
        };
        let tools = Ports {
            refunds: &self.refunds,
            orders: &self.orders,
            help: &self.help,
        };
        let mut turn = Turn::new(
            &model,
            tools,
            self.config.retry_backoff,
            context,
            history,
            &message.text,
        )
        .with_handoff(handoff_id)
        .routed(routed)
        .address(address)
        .returns(returns)
        .confirmation(confirmation);
        match &message.who {
            Who::Visitor { .. } => turn = turn.for_visitor(),
            Who::Guest { email, .. } => turn = turn.for_guest(email.clone()),
            Who::Customer => {}
        }
        if live.is_listened() {
            turn = turn.with_live(live);
        }
        let result = turn.run().await;
        trace.stats = Some(turn.stats().clone());
        TurnResult {
            reply: result.map_err(Refused::from),
            own_messages: Some(turn.own_messages().to_vec()),
            handoff: turn.handoff().cloned(),
        }
    }
}

/// The message as it is kept and sent (contract 27): while a verification
/// is pending in its conversation, one-time codes in it are masked, before
/// the router, the model and the conversation see it.
fn kept_while_verifying<'m>(message: &'m Message, held: &HeldConversation) -> std::borrow::Cow<'m, Message> {
    match held
        .verifying
        .then(|| visitor::while_verifying(message.text.text()))
        .flatten()
    {
        Some(masked) => std::borrow::Cow::Owned(Message {
            text: crate::refund::message::CustomerMessage::new(masked),
            ..message.clone()
        }),
        None => std::borrow::Cow::Borrowed(message),
    }
}
