//! `start_return` (contract 28): a write on the confirmation walk
//! ([`super::write`]), checked against the order read afresh as the
//! verified customer or guest: within the window, what was bought, not a
//! damaged item (a person), no refund of the order in rule 2's window. The
//! model never reads the label's URL.

use std::time::Duration;

use serde_json::Value;

use super::write::{Refused, Write, Written};
use super::{Session, Step};
use crate::chat::Declared;
use crate::confirm::{ProposalStep, WriteKind};
use crate::handoff::Reason;
use crate::orders::returns::{self as return_tool, Refund, ReturnArguments, ReturnItem, ReturnRecord, ReturnWrite};
use crate::orders::{Order, OrderSystem};
use crate::refund::RefundGateway;
use crate::refund::tool::SchemaFailure;
use crate::untrusted;

pub(super) const DECLARED: Declared = Declared {
    name: return_tool::TOOL_NAME,
    description: return_tool::TOOL_DESCRIPTION,
    parameters: return_tool::declared_parameters,
};
pub(super) const STEP: Step = Step::Order;
pub(super) const KIND: Option<WriteKind> = Some(WriteKind::RETURN);

/// Once `return` is served and routed, or a proposal waits; never a
/// visitor's.
pub(super) fn offered<G, O>(session: &Session<'_, G, O>) -> bool {
    session.returns.offered && !session.visitor
}

pub(super) async fn carry_out<G: RefundGateway, O: OrderSystem>(
    session: &mut Session<'_, G, O>,
    arguments: &str,
) -> String {
    super::write::carry_out::<StartReturn, G, O>(session, arguments).await
}

struct StartReturn;

impl Write for StartReturn {
    type Arguments = ReturnArguments;
    /// What the return will refund.
    type Checked = Refund;
    const KIND: WriteKind = WriteKind::RETURN;
    const TOOL: &'static str = return_tool::TOOL_NAME;

    fn parse(raw: &str) -> Result<ReturnArguments, SchemaFailure> {
        return_tool::parse_arguments(raw)
    }

    fn order_id(arguments: &ReturnArguments) -> &str {
        &arguments.order_id
    }

    fn hash(arguments: &ReturnArguments) -> [u8; 32] {
        arguments.hash()
    }

    fn one_per_order() -> Value {
        return_tool::one_per_order()
    }

    fn not_found(order_id: &str) -> Value {
        return_tool::not_found(order_id)
    }

    fn unavailable() -> Value {
        return_tool::unavailable()
    }

    async fn check<G: RefundGateway, O: OrderSystem>(
        session: &mut Session<'_, G, O>,
        order: &Order,
        arguments: &ReturnArguments,
    ) -> Result<Refund, Refused> {
        if arguments.reason.needs_a_person() {
            session.hand_off_in_code(Reason::ReturnNeedsAPerson);
            return Err((return_tool::needs_a_person(), "needs_a_person"));
        }
        let refund = return_tool::check(
            order,
            arguments,
            session.returns.window_days,
            session.confirmation.now_ms,
        )
        .map_err(|refusal| (refusal.result(order), refusal.outcome()))?;
        // Rule 7 the other way round: a refund in rule 2's window and then a
        // return would pay for the same items twice; a person decides.
        match session.ports.refunds.order_refunded_recently(&arguments.order_id).await {
            Some(false) => Ok(refund),
            Some(true) => {
                session.hand_off_in_code(Reason::ReturnAfterRefund);
                Err((return_tool::after_refund(), "after_refund"))
            }
            None => Err((return_tool::refunds_unknown(), "refunds_unknown")),
        }
    }

    fn proposed(arguments: &ReturnArguments, refund: &Refund) -> Value {
        return_tool::confirm(arguments, refund)
    }

    fn confirm_line(arguments: &ReturnArguments, refund: &Refund) -> String {
        arguments.confirm_line(refund)
    }

    async fn write<G: RefundGateway, O: OrderSystem>(
        session: &mut Session<'_, G, O>,
        order: &Order,
        arguments: &ReturnArguments,
        _: &Refund,
        key: &str,
    ) -> Written {
        let order_id = &arguments.order_id;
        let shopper = session.shopper();
        match session.ports.orders.start_return(order_id, &shopper, arguments, key).await {
            ReturnWrite::Started(started) => {
                session.returns_started.push(crate::refund::policy::order_key(order_id));
                let (line, label) =
                    return_tool::started_line(
                        order_id,
                        &started,
                        &order.currency,
                        &session.returns.label_origins,
                        session.returns.zone.as_ref().unwrap_or(&jiff::tz::TimeZone::UTC),
                    );
                session.stats.code_lines.push((WriteKind::RETURN, line));
                session.stats.label = label;
                Written {
                    result: return_tool::started(arguments, &started, &order.currency),
                    outcome: "started",
                    step: ProposalStep::Clear,
                    handoff: None,
                    kept: Some(untrusted::for_log(&started.return_id, 64)),
                }
            }
            ReturnWrite::NotReturnable(detail) => Written {
                result: return_tool::not_returnable(&detail),
                outcome: "not_returnable",
                step: ProposalStep::Clear,
                handoff: None,
                kept: None,
            },
            // Kept for the person who checks (contract 28): its key starts
            // it at most once. It may have started: a refund of the order
            // waits for a person.
            ReturnWrite::Unknown(_) => {
                session.returns_started.push(crate::refund::policy::order_key(order_id));
                Written {
                    result: return_tool::unknown_outcome(),
                    outcome: "unknown",
                    step: ProposalStep::Keep,
                    handoff: Some(Reason::ReturnWriteUnknown),
                    kept: None,
                }
            }
        }
    }

    fn record<G, O>(
        session: &mut Session<'_, G, O>,
        arguments: &ReturnArguments,
        outcome: &'static str,
        return_id: Option<String>,
        took: Duration,
    ) {
        tracing::info!(
            event = "tool_call",
            tool = return_tool::TOOL_NAME,
            validation = "ok",
            order_id = untrusted::order_id_for_log(&arguments.order_id),
            order_id_chars = arguments.order_id.chars().count(),
            return_reason = arguments.reason.as_str(),
            return_outcome = outcome,
            customer_said_yes = session.confirmation.said_yes,
            latency_ms = took.as_secs_f64() * 1000.0,
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
    }
}
