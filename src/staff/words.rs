//! What the support team reads, in words (contract 36): a refund's reasons
//! and state, a handoff's reason and the router's labels as a person says
//! them. The codes stay in the records, the logs and the metrics; the desk
//! shows these, from this one place.

use crate::refund::RefundState;
use crate::refund::policy::{Limits, Reason as RefundReason};
use crate::router::{Intent, Routing};
use crate::untrusted::visible;

/// Why a refund waits for a person, with the shop's limits in the order's
/// currency: "above the automatic limit of 50.00 EUR". A code this build
/// does not know is shown as it is, made visible.
pub fn refund_reason(code: &str, limits: &Limits, currency: &str) -> String {
    let days = |duration: std::time::Duration| duration.as_secs() / 86_400;
    let hours = |duration: std::time::Duration| duration.as_secs() / 3_600;
    match RefundReason::parse(code) {
        Some(RefundReason::AmountAboveLimit) => format!(
            "above the automatic limit of {}",
            limits.auto_refund_limit.in_currency(currency)
        ),
        Some(RefundReason::OrderRefundedRecently) => format!(
            "the order had a refund in the last {} hours",
            hours(limits.order_window)
        ),
        Some(RefundReason::DailyLimitExceeded) => format!(
            "above the customer's daily limit of {}",
            limits.user_daily_auto_limit.in_currency(currency)
        ),
        Some(RefundReason::NotDelivered) => "the order is not delivered".to_owned(),
        Some(RefundReason::OutsideRefundWindow) => {
            format!("delivered more than {} days ago", days(limits.refund_window))
        }
        Some(RefundReason::OrderUnverified) => "the order system could not be read".to_owned(),
        Some(RefundReason::RouterUnsure) => "the router was unsure of the request".to_owned(),
        Some(RefundReason::RefundNotRouted) => "not asked as a refund".to_owned(),
        Some(RefundReason::ReturnOpen) => "a return of the order is open".to_owned(),
        None => visible(code).into_owned(),
    }
}

/// Why a conversation went to a person.
pub fn handoff_reason(code: &str) -> String {
    use crate::handoff::Reason;
    match Reason::parse(code) {
        Some(Reason::CustomerAsked) => "asked for a person",
        Some(Reason::CannotHelp) => "the assistant could not help",
        Some(Reason::Other) => "the assistant passed it on",
        Some(Reason::Risk) => "a sensitive matter",
        Some(Reason::AgentFailed) => "the assistant failed twice",
        Some(Reason::IntentNotServed) => "a request the assistant does not take",
        Some(Reason::AddressWriteUnknown) => "a change of address the order system did not confirm",
        Some(Reason::ReturnNeedsAPerson) => "a return that needs a person",
        Some(Reason::ReturnWriteUnknown) => "a return the order system did not confirm",
        Some(Reason::ReturnAfterRefund) => "a return of an order refunded just now",
        None => return visible(code).into_owned(),
    }
    .to_owned()
}

/// A refund's state.
pub fn refund_state(state: RefundState) -> &'static str {
    match state {
        RefundState::Executing => "being paid",
        RefundState::Executed => "paid",
        RefundState::Rejected => "refused by payments",
        RefundState::Unknown => "outcome unknown: check with payments",
        RefundState::AwaitingApproval => "waits for approval",
        RefundState::RejectedByStaff => "rejected by a person",
    }
}

fn intent(intent: Intent) -> &'static str {
    match intent {
        Intent::OrderStatus => "order status",
        Intent::Refund => "refund",
        Intent::Return => "return",
        Intent::AddressChange => "change of address",
        Intent::AccountAccess => "account access",
        Intent::PolicyQuestion => "policy question",
        Intent::Other => "something else",
    }
}

/// The router's labels as recorded (`refund,policy_question;low;0.9`):
/// "refund, policy question (low risk, 90% sure)"; a failed router's
/// "the router failed".
pub fn router_labels(recorded: &str) -> String {
    match Routing::from_recorded(recorded) {
        Routing::Labelled(labels) => format!(
            "{} ({} risk, {:.0}% sure)",
            labels.intents.iter().map(|i| intent(*i)).collect::<Vec<_>>().join(", "),
            labels.risk.as_str(),
            labels.confidence * 100.0
        ),
        Routing::Failed(_) => "the router failed".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::refund::money::AmountCents;
    use std::time::Duration;

    fn limits() -> Limits {
        Limits {
            auto_refund_limit: AmountCents::new(5000),
            order_window: Duration::from_secs(24 * 3600),
            user_daily_auto_limit: AmountCents::new(10000),
            refund_window: Duration::from_secs(30 * 86_400),
        }
    }

    #[test]
    fn codes_read_as_words_with_the_shops_limits() {
        assert_eq!(
            refund_reason("amount_above_limit", &limits(), "EUR"),
            "above the automatic limit of 50.00 EUR"
        );
        assert_eq!(
            refund_reason("order_refunded_recently", &limits(), "EUR"),
            "the order had a refund in the last 24 hours"
        );
        assert_eq!(
            refund_reason("outside_refund_window", &limits(), "EUR"),
            "delivered more than 30 days ago"
        );
        assert_eq!(refund_reason("new\u{1b}code", &limits(), "EUR"), "new\\u{1b}code");
        assert_eq!(handoff_reason("customer_asked"), "asked for a person");
        assert_eq!(refund_state(RefundState::AwaitingApproval), "waits for approval");
        assert_eq!(
            router_labels("refund,policy_question;low;0.9"),
            "refund, policy question (low risk, 90% sure)"
        );
        assert_eq!(router_labels("unknown"), "the router failed");
    }

    #[test]
    fn every_code_has_its_words() {
        for reason in crate::handoff::Reason::ALL {
            assert_ne!(handoff_reason(reason.as_str()), reason.as_str());
        }
        for state in RefundState::ALL {
            assert!(!refund_state(state).contains('_'));
        }
    }
}
