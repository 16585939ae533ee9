//! `issue_refund` (contract 2): the one tool that moves money. The latch
//! closes before the attempt and stays closed whatever the outcome (a
//! timeout proves nothing), unless the order refused it before any record.

use std::time::Duration;

use tokio::time::Instant;

use super::{Session, Step};
use crate::chat::Declared;
use crate::confirm::WriteKind;
use crate::orders::OrderSystem;
use crate::refund::policy::OrderFacts;
use crate::refund::tool::{self, RefundArguments, TOOL_NAME, ToolResult};
use crate::refund::{RefundGateway, RefundOutcome, RefundRequest};
use crate::untrusted;

use super::session::RefundLatch;

/// Refund checks per request that read the order system (contract 16); a
/// check beyond them is rule 6, as if the order system had not answered.
/// Only a refused refund leaves the latch open for another check.
pub const MAX_REFUND_CHECKS: u32 = 3;

pub(super) const DECLARED: Declared = Declared {
    name: TOOL_NAME,
    description: tool::TOOL_DESCRIPTION,
    parameters: tool::declared_parameters,
};
pub(super) const STEP: Step = Step::RefundCheck;
pub(super) const KIND: Option<WriteKind> = None;

/// Never a visitor's (contract 27).
pub(super) fn offered<G, O>(session: &Session<'_, G, O>) -> bool {
    !session.visitor
}

pub(super) async fn carry_out<G: RefundGateway, O: OrderSystem>(
    session: &mut Session<'_, G, O>,
    arguments: &str,
) -> String {
    attempt(session, arguments).await.to_json()
}

async fn attempt<G: RefundGateway, O: OrderSystem>(session: &mut Session<'_, G, O>, arguments: &str) -> ToolResult {
    let arguments = match tool::parse_arguments(arguments) {
        Ok(arguments) => arguments,
        Err(error) => return session.rejected(TOOL_NAME, error.schema_paths(), error.to_string()),
    };
    if session.refund_latch == RefundLatch::Spent {
        session.stats.second_refunds_refused += 1;
        tracing::warn!(
            event = "tool_call",
            tool = TOOL_NAME,
            validation = "ok",
            refused_second_refund = true,
            order_id = untrusted::order_id_for_log(&arguments.order_id),
            order_id_chars = arguments.order_id.chars().count(),
            amount_cents = arguments.amount.cents(),
        );
        return ToolResult::second_refund_refused();
    }
    // Closed before the attempt: from here on money may move, whatever the outcome.
    session.refund_latch = RefundLatch::Spent;
    let RefundArguments { order_id, amount } = arguments;
    let started = Instant::now();
    let order = check_order(session, &order_id).await;
    let request = RefundRequest {
        attempt: session.context.clone(),
        order_id,
        amount,
        message: session.customer_message.clone(),
        order,
        routed: session.routed.clone(),
    };
    session.progress(Step::Payments);
    let outcome = session.ports.refunds.refund(&request).await;
    log_refund(&request, &outcome, started.elapsed());
    if let RefundOutcome::OrderRefused(_) = outcome {
        // Refused before any record: nothing can have reached payments.
        session.refund_latch = RefundLatch::Open;
    }
    let result = ToolResult::for_outcome(&outcome, &request.order_id);
    session.stats.refund = Some(outcome);
    result
}

/// The order a refund is checked against, read afresh with the verified
/// customer; beyond [`MAX_REFUND_CHECKS`] it is not read (rule 6). A
/// return this conversation started is open whatever the order system
/// says yet (rule 7).
async fn check_order<G, O: OrderSystem>(session: &mut Session<'_, G, O>, order_id: &str) -> OrderFacts {
    if session.stats.refund_checks >= MAX_REFUND_CHECKS {
        return OrderFacts::Unverified;
    }
    session.stats.refund_checks += 1;
    let shopper = session.shopper();
    let mut facts = session.read_order(order_id, &shopper).await.facts();
    if let OrderFacts::Read(order) = &mut facts
        && session
            .returns_started
            .contains(&crate::refund::policy::order_key(order_id))
    {
        order.return_open = true;
    }
    facts
}

/// The `tool_call` line of an attempted refund.
fn log_refund(request: &RefundRequest, outcome: &RefundOutcome, took: Duration) {
    let (refund_id, detail, failure) = match outcome {
        RefundOutcome::Executed(receipt) => (receipt.refund_id.as_str(), "", ""),
        RefundOutcome::Rejected { detail, .. } => ("", detail.as_str(), ""),
        RefundOutcome::Unknown(error) => ("", error.detail().unwrap_or_default(), error.class()),
        RefundOutcome::AlreadyRecorded(prior) => (
            prior.receipt.as_ref().map(|r| r.refund_id.as_str()).unwrap_or_default(),
            "",
            prior.state.as_str(),
        ),
        RefundOutcome::OrderRefused(refusal) => ("", "", refusal.as_str()),
        RefundOutcome::PendingApproval { .. } | RefundOutcome::Unrecorded => ("", "", ""),
    };
    macro_rules! refund_event {
        ($level:expr) => {
            tracing::event!(
                $level,
                event = "tool_call",
                tool = TOOL_NAME,
                validation = "ok",
                order_id = untrusted::order_id_for_log(&request.order_id),
                order_id_chars = request.order_id.chars().count(),
                amount_cents = request.amount.cents(),
                latency_ms = took.as_secs_f64() * 1000.0,
                refund_outcome = outcome.name(),
                refund_id = untrusted::for_log(refund_id, 64),
                rejection_detail = untrusted::for_log(detail, 200),
                failure,
            )
        };
    }
    match outcome {
        RefundOutcome::Executed(_) | RefundOutcome::PendingApproval { .. } => refund_event!(tracing::Level::INFO),
        _ => refund_event!(tracing::Level::WARN),
    }
}
