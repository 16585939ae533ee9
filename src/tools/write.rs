//! The walk every write the agent may make takes (contracts 26 and 28), on
//! the confirmation mechanism ([`crate::confirm`]): the arguments parsed;
//! one write per order per turn; the order read afresh as the verified
//! customer (sharing `get_order`'s reads, so the turn's worst case stays as
//! it was); the write's own checks; then the customer's yes decides
//! ([`Confirmation::decide`]): a first call proposes (code adds its own line
//! naming what will be written), the same call of the next turn after an
//! explicit yes writes, with the proposal's key and one more read of the
//! budget; an unknown outcome keeps the proposal for the person to whom the
//! write hands the conversation.
//!
//! A write is a [`Write`]: its kind, its checks, the words of its proposal,
//! the write itself and its log line. The rest is here, once.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::Session;
use crate::confirm::{self, Confirmation, Decision, ProposalStep, WriteKind};
use crate::handoff::Reason;
use crate::orders::tool as order_tool;
use crate::orders::{Order, OrderLookup, OrderSystem};
use crate::refund::RefundGateway;
use crate::refund::tool::SchemaFailure;

/// Why a write's call went no further: what the model reads, and the
/// outcome its log line names.
pub(super) type Refused = (Value, &'static str);

/// What a write's call to the order system came to.
pub(super) struct Written {
    pub result: Value,
    pub outcome: &'static str,
    /// What becomes of the proposal: cleared once the outcome is known,
    /// kept for the person who checks an unknown one.
    pub step: ProposalStep,
    /// Code hands the conversation to a person (an unknown outcome).
    pub handoff: Option<Reason>,
    /// What the log line and the turn's record keep of it (a return's id).
    pub kept: Option<String>,
}

/// A write the agent may make.
pub(super) trait Write {
    type Arguments: Sync;
    /// What its checks found that its words and its write need.
    type Checked: Send + Sync;
    const KIND: WriteKind;
    const TOOL: &'static str;

    fn parse(raw: &str) -> Result<Self::Arguments, SchemaFailure>;
    fn order_id(arguments: &Self::Arguments) -> &str;
    /// The hash the proposal keeps: exactly the arguments, never them.
    fn hash(arguments: &Self::Arguments) -> [u8; 32];

    /// What the model reads when the order was written once already this
    /// turn, is not the customer's, or could not be read.
    fn one_per_order() -> Value;
    fn not_found(order_id: &str) -> Value;
    fn unavailable() -> Value;

    /// Its own checks against the order read afresh.
    fn check<G: RefundGateway, O: OrderSystem>(
        session: &mut Session<'_, G, O>,
        order: &Order,
        arguments: &Self::Arguments,
    ) -> impl Future<Output = Result<Self::Checked, Refused>> + Send;

    /// What the model reads of a proposal, and code's own line for the customer.
    fn proposed(arguments: &Self::Arguments, checked: &Self::Checked) -> Value;
    fn confirm_line(arguments: &Self::Arguments, checked: &Self::Checked) -> String;

    /// The write, with the proposal's key.
    fn write<G: RefundGateway, O: OrderSystem>(
        session: &mut Session<'_, G, O>,
        order: &Order,
        arguments: &Self::Arguments,
        checked: &Self::Checked,
        key: &str,
    ) -> impl Future<Output = Written> + Send;

    /// The call's `tool_call` line and what the turn keeps of it.
    fn record<G, O>(
        session: &mut Session<'_, G, O>,
        arguments: &Self::Arguments,
        outcome: &'static str,
        kept: Option<String>,
        took: Duration,
    );
}

/// One call of the write `W`: what the model is told.
pub(super) async fn carry_out<W: Write, G: RefundGateway, O: OrderSystem>(
    session: &mut Session<'_, G, O>,
    arguments: &str,
) -> String {
    let arguments = match W::parse(arguments) {
        Ok(arguments) => arguments,
        Err(error) => {
            return session
                .rejected(W::TOOL, error.schema_paths(), error.to_string())
                .to_json();
        }
    };
    let started = Instant::now();
    let (result, outcome, kept) = attempt::<W, G, O>(session, &arguments).await;
    W::record(session, &arguments, outcome, kept, started.elapsed());
    result.to_string()
}

async fn attempt<W: Write, G: RefundGateway, O: OrderSystem>(
    session: &mut Session<'_, G, O>,
    arguments: &W::Arguments,
) -> (Value, &'static str, Option<String>) {
    let order_id = W::order_id(arguments);
    if session
        .writes_tried
        .iter()
        .any(|(kind, id)| *kind == W::KIND && id == order_id)
    {
        return (W::one_per_order(), "one_per_order", None);
    }
    if session.stats.order_reads >= order_tool::MAX_READS {
        return (order_tool::too_many_reads(), "too_many_reads", None);
    }
    session.stats.order_reads += 1;
    let shopper = session.shopper();
    let order = match session.read_order(order_id, &shopper).await {
        OrderLookup::Found(order) => order,
        OrderLookup::NotFound => return (W::not_found(order_id), "not_found", None),
        OrderLookup::Unavailable(_) => return (W::unavailable(), "unavailable", None),
    };
    let checked = match W::check(session, &order, arguments).await {
        Ok(checked) => checked,
        Err((result, outcome)) => return (result, outcome, None),
    };
    let decided = session
        .confirmation
        .decide(W::KIND, W::hash(arguments), &mut session.stats.proposal_steps);
    let proposal = match decided {
        Decision::Write(proposal) => proposal,
        Decision::WhichOne => return (session.confirmation.which_one(), "which_one", None),
        Decision::Again(_) => return (W::proposed(arguments, &checked), "proposed", None),
        Decision::Ambiguous => {
            session.stats.code_lines.retain(|(kind, _)| *kind != W::KIND);
            return (Confirmation::ambiguous(W::KIND), "ambiguous", None);
        }
        Decision::Propose(proposal) => {
            session.stats.proposal_steps.set(W::KIND, ProposalStep::Set(proposal));
            session
                .stats
                .code_lines
                .push((W::KIND, W::confirm_line(arguments, &checked)));
            return (W::proposed(arguments, &checked), "proposed", None);
        }
    };
    // The write shares `get_order`'s reads too.
    if session.stats.order_reads >= order_tool::MAX_READS {
        return (order_tool::too_many_reads(), "too_many_reads", None);
    }
    session.stats.order_reads += 1;
    session.writes_tried.push((W::KIND, order_id.to_owned()));
    // A proposal this turn made is gone once a confirmed one is written.
    session.stats.code_lines.retain(|(kind, _)| *kind != W::KIND);
    let key = confirm::write_key(W::KIND, &session.conversation_key(), &proposal);
    let written = W::write(session, &order, arguments, &checked, &key).await;
    session.stats.proposal_steps.set(W::KIND, written.step);
    if let Some(reason) = written.handoff {
        session.hand_off_in_code(reason);
    }
    (written.result, written.outcome, written.kept)
}
