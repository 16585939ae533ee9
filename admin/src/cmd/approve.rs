//! `approve ID --by NAME`: one payments call for a refund awaiting
//! approval, its outcome recorded ([`approvals::approve`]); the payment
//! itself, shared with `reissue`.

use refund_chat::config::StaffConfig;
use refund_chat::ledger::dynamo::DynamoLedger;
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
    let payments = HttpPayments::new(http, &config.payments_base_url, config.payments_timeout);
    let writer = refund_chat::refund::WriterMark::new(&format!("staff:{by}"));
    let (action, result) = match payment {
        Payment::Approval => (
            "approve",
            approvals::approve(ledger, &payments, id, by, &writer, &config.limits).await,
        ),
        Payment::Reissue => (
            "reissue",
            approvals::reissue(ledger, &payments, id, by, &writer, &config.limits).await,
        ),
    };
    let approved = match result {
        Ok(approved) => approved,
        Err(ApprovalError::Ledger(error)) => return Err(error),
        Err(uncertain @ ApprovalError::ClaimUncertain { .. }) => {
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
        PaymentOutcome::Executed(receipt) => {
            println!(
                "{done}: refunded {amount} on order {} to {} (refund {})",
                visible(&record.order_id),
                visible(&record.user_id),
                visible(&receipt.refund_id)
            );
            Ending::Done
        }
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
