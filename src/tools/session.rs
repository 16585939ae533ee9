//! What one turn's tool calls share: the ports they act on, the facts so
//! far (the turn's stats), the refund latch, the handoff, the proposals
//! waiting for the customer's yes, and who the customer is. The turn owns
//! it and hands it to each call; a tool changes only what its call did.

use crate::confirm::{Confirmation, ProposalSteps, WriteKind};
use crate::handoff::{Handoff, Reason};
use crate::help::Citation;
use crate::help::search::HelpCentre;
use crate::live::{Live, Step};
use crate::orders::address::AddressRecord;
use crate::orders::returns::{self as return_tool, ReturnRecord};
use crate::orders::{self, OrderLookup, OrderSystem};
use crate::refund::message::CustomerMessage;
use crate::refund::tool::ToolResult;
use crate::refund::{Attempt, RefundOutcome, Routed};

/// What the turn's tools act on: the refund gateway, the order system and
/// the help centre.
pub struct Ports<'a, G, O> {
    pub refunds: &'a G,
    pub orders: &'a O,
    pub help: &'a HelpCentre,
}

impl<G, O> Clone for Ports<'_, G, O> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<G, O> Copy for Ports<'_, G, O> {}

/// Figures about the turn so far, for the request's summary log line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnStats {
    pub completion_calls: u32,
    pub attempts: u32,
    pub timeouts: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// `None` until a valid `issue_refund` was attempted.
    pub refund: Option<RefundOutcome>,
    pub second_refunds_refused: u32,
    pub invalid_tool_calls: u32,
    /// The reason of the handoff the model asked for, if it did.
    pub handoff: Option<Reason>,
    /// `get_order` calls that read the order system, and refund checks that did.
    pub order_reads: u32,
    pub refund_checks: u32,
    /// The help articles (and versions) this turn's searches showed the model.
    pub articles: Vec<Citation>,
    /// A call timed out, broke off, or a streamed call ended without its
    /// usage: the provider may have billed what nobody was told, so the
    /// turn counts as its reserved worst case (contracts 13 and 20). An HTTP
    /// error status was not billed and leaves this unset.
    pub usage_unreported: bool,
    /// What the turn did about addresses (contract 26) and returns
    /// (contract 28), one record a call that passed the schema, and what
    /// becomes of the conversation's proposals.
    pub addresses: Vec<AddressRecord>,
    pub returns: Vec<ReturnRecord>,
    pub proposal_steps: ProposalSteps,
    /// The orders the order system found for the verified customer this
    /// turn: the conversation is found by them (contract 30).
    pub orders_found: std::collections::BTreeSet<String>,
    /// Code's own lines for the customer, added to the reply: what a
    /// proposal will write, a started return's label (personal data and
    /// links: never logged or sent to a model).
    pub code_lines: Vec<(WriteKind, String)>,
    /// A started return's label, when it may be linked: it travels apart
    /// from the reply's text (contract 28).
    pub label: Option<return_tool::Label>,
}

/// What a turn knows of a change of address (contract 26): whether the
/// tool is offered at all, and where an address may go (none: the order's
/// own country).
#[derive(Debug, Clone, Default)]
pub struct AddressTurn {
    pub offered: bool,
    pub countries: Option<Vec<String>>,
}

/// What a turn knows of returns (contract 28): whether the tool is offered
/// at all, the window after delivery, and the origins a label may be
/// linked on (none: named, not linked).
#[derive(Debug, Clone, Default)]
pub struct ReturnTurn {
    pub offered: bool,
    pub window_days: u32,
    pub label_origins: Vec<String>,
    /// The shop's time zone, for the label's "use it by" (contract 36);
    /// none: UTC.
    pub zone: Option<jiff::tz::TimeZone>,
    /// The orders earlier turns of the conversation started a return of
    /// (or may have: an unknown outcome), as rule 2 compares ids: a refund
    /// of one waits for a person (contract 8's rule 7).
    pub started_before: Vec<String>,
}

/// The refund latch (contract 2): open until a refund is attempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefundLatch {
    Open,
    /// A refund has been attempted (or was about to be): money may have moved.
    Spent,
}

/// The state every tool call of one turn shares.
pub struct Session<'a, G, O> {
    pub ports: Ports<'a, G, O>,
    pub context: Attempt,
    pub customer_message: CustomerMessage,
    pub refund_latch: RefundLatch,
    /// The id a handoff of this conversation gets, when it may have one.
    pub handoff_id: Option<String>,
    pub handoff: Option<Handoff>,
    pub stats: TurnStats,
    /// Who hears the turn as it runs (event-stream mode); none in JSON mode.
    pub live: Option<&'a Live>,
    /// The router's labels (contract 21), on every refund the turn proposes.
    pub routed: Routed,
    /// A change of address (contract 26): what the turn may do.
    pub address: AddressTurn,
    /// The writes this turn tried, by kind and order (at most once each).
    pub writes_tried: Vec<(WriteKind, String)>,
    /// A return (contract 28): what the turn may do.
    pub returns: ReturnTurn,
    /// The orders with a return this conversation started (or may have),
    /// as rule 2 compares ids: their refunds wait for a person (rule 7).
    pub returns_started: Vec<String>,
    /// The customer's yes to every write (contracts 26 and 28).
    pub confirmation: Confirmation,
    /// A visitor's turn (contract 27): no tool that reads an order or
    /// moves money is declared or run.
    pub visitor: bool,
    /// A guest's turn (contract 27): the order system is asked by this
    /// e-mail, which reaches nothing else.
    pub guest_email: Option<crate::guest::GuestEmail>,
}

impl<'a, G, O> Session<'a, G, O> {
    pub fn new(ports: Ports<'a, G, O>, context: Attempt, customer_message: &CustomerMessage) -> Self {
        Session {
            ports,
            context,
            customer_message: customer_message.clone(),
            refund_latch: RefundLatch::Open,
            handoff_id: None,
            handoff: None,
            stats: TurnStats {
                attempts: 1,
                ..TurnStats::default()
            },
            live: None,
            routed: Routed::default(),
            address: AddressTurn::default(),
            writes_tried: Vec::new(),
            returns: ReturnTurn::default(),
            returns_started: Vec::new(),
            confirmation: Confirmation::default(),
            visitor: false,
            guest_email: None,
        }
    }

    /// Whom the order system is asked for: the turn's customer, or its guest.
    pub fn shopper(&self) -> orders::Shopper {
        let user_id = self.context.scope.user_id().to_owned();
        match &self.guest_email {
            Some(email) => orders::Shopper::Guest {
                user_id,
                email: email.clone(),
            },
            None => orders::Shopper::Customer(user_id),
        }
    }

    pub fn progress(&self, step: Step) {
        if let Some(live) = self.live {
            live.progress(step);
        }
    }

    /// Counts and logs arguments that failed their tool's schema; the model
    /// is told the offending values, the log names only the schema's rules.
    pub fn rejected(&mut self, tool: &'static str, schema_failures: &str, error: String) -> ToolResult {
        self.stats.invalid_tool_calls += 1;
        tracing::warn!(event = "tool_call", tool, validation = "rejected", schema_failures);
        ToolResult::error(error)
    }

    /// Code hands the conversation to a person (no summary: the facts are
    /// code's), unless the turn already did.
    pub fn hand_off_in_code(&mut self, reason: Reason) {
        if let (None, Some(id)) = (&self.handoff, &self.handoff_id) {
            self.stats.handoff = Some(reason);
            self.handoff = Some(Handoff {
                id: id.clone(),
                reason,
                summary: None,
            });
        }
    }

    /// What a write's key is derived from: the conversation, or the
    /// request's own record where there is none.
    pub fn conversation_key(&self) -> String {
        self.context
            .conversation
            .clone()
            .unwrap_or_else(|| self.context.scope.record_id())
    }
}

impl<G, O: OrderSystem> Session<'_, G, O> {
    /// Reads an order as `shopper`; one the order system found is kept
    /// as named by the conversation (contract 30's search by order id).
    pub async fn read_order(&mut self, order_id: &str, shopper: &orders::Shopper) -> OrderLookup {
        let lookup = self.ports.orders.order(order_id, shopper).await;
        if let OrderLookup::Found(order) = &lookup {
            self.stats.orders_found.insert(order.order_id.clone());
        }
        lookup
    }
}
