//! `approve ID --by NAME`: one payments call for a refund awaiting
//! approval, its outcome recorded ([`approvals::approve`]); the payment
//! itself, shared with `reissue`.

use refund_chat::config::StaffConfig;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::orders::http::HttpOrders;
use refund_chat::record_then_pay::approvals::{self, ApprovalError};
use refund_chat::refund::PaymentOutcome;
use refund_chat::refund::payments::HttpPayments;
use refund_chat::untrusted::visible;

use crate::{Ending, Outcome};

/// The two ways a person makes money move.
#[derive(Clone, Copy)]
pub enum Payment {
    Approval,
    Reissue,
}

pub async fn pay(ledger: &DynamoLedger, config: &StaffConfig, id: &str, by: &str, payment: Payment) -> Outcome {
    let http = match refund_chat::http_client::money_path_client() {
        Ok(http) => http,
        Err(error) => return Ok(Ending::Failed(format!("HTTP client: {error}"))),
    };
    let payments = HttpPayments::new(http.clone(), &config.payments_base_url, config.payments_timeout);
    let orders = HttpOrders::new(http, &config.orders_base_url, config.orders_timeout);
    let writer = refund_chat::refund::WriterMark::new(&format!("staff:{by}"));
    let (action, result) = match payment {
        Payment::Approval => (
            "approve",
            approvals::approve(ledger, &payments, &orders, id, by, &writer, &config.limits).await,
        ),
        Payment::Reissue => (
            "reissue",
            approvals::reissue(ledger, &payments, &orders, id, by, &writer, &config.limits).await,
        ),
    };
    let approved = match result {
        Ok(approved) => approved,
        Err(ApprovalError::Ledger(error)) => return Err(error),
        Err(uncertain @ (ApprovalError::ClaimUncertain { .. } | ApprovalError::NotPaid { .. })) => {
            tracing::warn!(
                event = "staff_decision",
                action,
                record_id = id,
                by,
                result = "uncertain"
            );
            return Ok(Ending::Failed(visible(&uncertain.to_string()).into_owned()));
        }
        Err(refused) => {
            tracing::info!(event = "staff_decision", action, record_id = id, by, result = "refused");
            return Ok(Ending::Refused(visible(&refused.to_string()).into_owned()));
        }
    };
    let record = &approved.record;
    tracing::info!(
        event = "staff_decision",
        action,
        record_id = id,
        paid_record_id = %record.record_id,
        by,
        refund_outcome = approved.outcome.name(),
        outcome_recorded = approved.outcome_recorded,
    );
    let amount = record.amount;
    let done = match payment {
        Payment::Approval => format!("approved {id}"),
        Payment::Reissue => format!("reissued {id} as {}", record.record_id),
    };
    Ok(match &approved.outcome {
        // Paid, and the ledger does not say so: the audit trail is wrong
        // until a person records it (its own exit status).
        PaymentOutcome::Executed(receipt) if !approved.outcome_recorded => Ending::Unrecorded(format!(
            "{done}: payments refunded {amount} on order {} to {} (refund {}), but the ledger could not record \
             it: the record stays executing. Once `refund-chat-admin unknown` lists it, `resolve {} --executed {} \
             --by NAME`",
            visible(&record.order_id),
            visible(&record.user_id),
            visible(&receipt.refund_id),
            visible(&record.record_id),
            visible(&receipt.refund_id)
        )),
        PaymentOutcome::Executed(receipt) => {
            println!(
                "{done}: refunded {amount} on order {} to {} (refund {})",
                visible(&record.order_id),
                visible(&record.user_id),
                visible(&receipt.refund_id)
            );
            Ending::Done
        }
        _ if !approved.outcome_recorded => Ending::Unrecorded(format!(
            "{done}: payments answered ({}), but the ledger could not record it: the record stays executing. \
             Once `refund-chat-admin unknown` lists it, check it with payments and resolve it",
            approved.outcome.name()
        )),
        PaymentOutcome::Rejected { status, detail } => Ending::Refused(format!(
            "payments rejected the refund with HTTP {status} ({}); recorded as rejected, no money moved",
            visible(detail)
        )),
        PaymentOutcome::Unknown(error) => Ending::Refused(format!(
            "the refund's outcome is unknown ({}); recorded for `refund-chat-admin unknown`: check it with \
             payments, then resolve it",
            visible(&error.to_string())
        )),
    })
}
