//! `start_return` (contract 28): checked against the order read afresh as
//! the verified customer or guest; a first call proposes, and only a call
//! of a later turn whose customer said yes, with exactly the proposed
//! arguments, starts it ([`crate::confirm`]). The model never reads the
//! label's URL.

use tokio::time::Instant;

use super::Session;
use crate::chat::Declared;
use crate::confirm::{self, Confirmation, Decision, ProposalStep, WriteKind};
use crate::handoff::Reason;
use crate::orders::returns::{self as return_tool, ReturnArguments, ReturnItem, ReturnRecord, ReturnWrite};
use crate::orders::tool as order_tool;
use crate::orders::{OrderLookup, OrderSystem};
use crate::refund::RefundGateway;
use crate::untrusted;

pub(super) const DECLARED: Declared = Declared {
    name: return_tool::TOOL_NAME,
    description: return_tool::TOOL_DESCRIPTION,
    parameters: return_tool::declared_parameters,
};

/// Once `return` is served and routed, or a proposal waits; never a
/// visitor's.
pub(super) fn offered<G, O>(session: &Session<'_, G, O>) -> bool {
    session.returns.offered && !session.visitor
}

/// `start_return` (contract 28): checked against the order read afresh
/// as the verified customer or guest; a first call proposes, and only a
/// call of a later turn whose customer said yes, with exactly the
/// proposed arguments, starts it. The model never reads the label's URL.
pub(super) async fn carry_out<G: RefundGateway, O: OrderSystem>(
    session: &mut Session<'_, G, O>,
    arguments: &str,
) -> String {
    let arguments = match return_tool::parse_arguments(arguments) {
        Ok(arguments) => arguments,
        Err(error) => {
            return session
                .rejected(return_tool::TOOL_NAME, error.schema_paths(), error.to_string())
                .to_json();
        }
    };
    let started = Instant::now();
    let (result, outcome, return_id) = attempt(session, &arguments).await;
    tracing::info!(
        event = "tool_call",
        tool = return_tool::TOOL_NAME,
        validation = "ok",
        order_id = untrusted::order_id_for_log(&arguments.order_id),
        order_id_chars = arguments.order_id.chars().count(),
        return_reason = arguments.reason.as_str(),
        return_outcome = outcome,
        customer_said_yes = session.confirmation.said_yes,
        latency_ms = started.elapsed().as_secs_f64() * 1000.0,
    );
    metrics::counter!("Returns", "Outcome" => outcome).increment(1);
    // Kept for people (contract 23): what the model named is masked
    // as a customer's words are, a name the order does not hold too.
    session.stats.returns.push(ReturnRecord {
        order_id: crate::mask::masked(&arguments.order_id).into_owned(),
        items: arguments
            .items
            .iter()
            .map(|item| ReturnItem {
                name: crate::mask::masked(&item.name).into_owned(),
                quantity: item.quantity,
            })
            .collect(),
        reason: arguments.reason.as_str().to_owned(),
        outcome: outcome.to_owned(),
        return_id,
    });
    result.to_string()
}

async fn attempt<G: RefundGateway, O: OrderSystem>(
    session: &mut Session<'_, G, O>,
    arguments: &ReturnArguments,
) -> (serde_json::Value, &'static str, Option<String>) {
    let order_id = &arguments.order_id;
    if session.returns_written.contains(order_id) {
        return (return_tool::one_per_order(), "one_per_order", None);
    }
    if session.stats.order_reads >= order_tool::MAX_READS {
        return (order_tool::too_many_reads(), "too_many_reads", None);
    }
    session.stats.order_reads += 1;
    let shopper = session.shopper();
    let order = match session.read_order(order_id, &shopper).await {
        OrderLookup::Found(order) => order,
        OrderLookup::NotFound => return (return_tool::not_found(order_id), "not_found", None),
        OrderLookup::Unavailable(_) => return (return_tool::unavailable(), "unavailable", None),
    };
    if arguments.reason.needs_a_person() {
        session.hand_off_in_code(Reason::ReturnNeedsAPerson);
        return (return_tool::needs_a_person(), "needs_a_person", None);
    }
    let refund = match return_tool::check(
        &order,
        arguments,
        session.returns.window_days,
        session.confirmation.now_ms,
    ) {
        Ok(refund) => refund,
        Err(refusal) => return (refusal.result(&order), refusal.outcome(), None),
    };
    // Rule 7 the other way round: a refund in rule 2's window and then a
    // return would pay for the same items twice; a person decides.
    match session.ports.refunds.order_refunded_recently(order_id).await {
        Some(false) => {}
        Some(true) => {
            session.hand_off_in_code(Reason::ReturnAfterRefund);
            return (return_tool::after_refund(), "after_refund", None);
        }
        None => return (return_tool::refunds_unknown(), "refunds_unknown", None),
    }
    let decided = session
        .confirmation
        .decide(WriteKind::Return, arguments.hash(), &mut session.stats.proposal_steps);
    let proposal = match decided {
        Decision::Write(proposal) => proposal,
        Decision::WhichOne => return (session.confirmation.which_one(), "which_one", None),
        Decision::Again(_) => return (return_tool::confirm(arguments, &refund), "proposed", None),
        Decision::Ambiguous => {
            session.stats.code_lines.retain(|(kind, _)| *kind != WriteKind::Return);
            return (Confirmation::ambiguous(WriteKind::Return), "ambiguous", None);
        }
        Decision::Propose(proposal) => {
            session
                .stats
                .proposal_steps
                .set(WriteKind::Return, ProposalStep::Set(proposal));
            session
                .stats
                .code_lines
                .push((WriteKind::Return, arguments.confirm_line(&refund)));
            return (return_tool::confirm(arguments, &refund), "proposed", None);
        }
    };
    // The write shares `get_order`'s reads, as the address's does, so
    // the turn's worst case stays as it was.
    if session.stats.order_reads >= order_tool::MAX_READS {
        return (order_tool::too_many_reads(), "too_many_reads", None);
    }
    session.stats.order_reads += 1;
    session.returns_written.push(order_id.clone());
    session.stats.code_lines.retain(|(kind, _)| *kind != WriteKind::Return);
    let key = confirm::write_key(WriteKind::Return, &session.conversation_key(), &proposal);
    match session
        .ports
        .orders
        .start_return(order_id, &shopper, arguments, &key)
        .await
    {
        ReturnWrite::Started(started) => {
            session.returns_started.push(crate::refund::policy::order_key(order_id));
            session.stats.proposal_steps.set(WriteKind::Return, ProposalStep::Clear);
            let (line, label) =
                return_tool::started_line(order_id, &started, &order.currency, &session.returns.label_origins);
            session.stats.code_lines.push((WriteKind::Return, line));
            session.stats.label = label;
            let result = return_tool::started(arguments, &started, &order.currency);
            (result, "started", Some(untrusted::for_log(&started.return_id, 64)))
        }
        ReturnWrite::NotReturnable(detail) => {
            session.stats.proposal_steps.set(WriteKind::Return, ProposalStep::Clear);
            (return_tool::not_returnable(&detail), "not_returnable", None)
        }
        // Kept for the person who checks (contract 28): its key starts it at most once.
        ReturnWrite::Unknown(_) => {
            // It may have started: a refund of the order waits for a person.
            session.returns_started.push(crate::refund::policy::order_key(order_id));
            session.stats.proposal_steps.set(WriteKind::Return, ProposalStep::Keep);
            session.hand_off_in_code(Reason::ReturnWriteUnknown);
            (return_tool::unknown_outcome(), "unknown", None)
        }
    }
}
