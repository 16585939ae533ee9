//! "Decide, record, then pay" and approvals on the memory ledger: what
//! reaches payments, and how often, when the ledger fails, refuses, or two
//! people approve at once.

use super::RecordedRefunds;
use super::approvals::{self, ApprovalError};
use crate::config::DEFAULT_LIMITS;
use crate::conversation::person::Person;
use crate::doubles::{AnyOrder, RecordingPayments, a_delivered_order};
use crate::ledger::memory::MemoryLedger;
use crate::refund::message::CustomerMessage;
use crate::refund::money::AmountCents;
use crate::refund::{
    Attempt, PaymentOutcome, Receipt, RefundGateway, RefundOutcome, RefundRequest, RefundScope, WriterMark,
};

fn request(request_id: &str, order_id: &str, cents: u64) -> RefundRequest {
    RefundRequest {
        routed: Default::default(),
        attempt: Attempt {
            scope: RefundScope::for_request("u-1", request_id),
            writer: WriterMark::fixed(format!("{request_id}/w")),
            conversation: None,
            day_owner: None,
        },
        order_id: order_id.to_owned(),
        amount: AmountCents::new(cents),
        message: CustomerMessage::new("my order arrived broken"),
        order: a_delivered_order(),
    }
}

fn paid() -> PaymentOutcome {
    PaymentOutcome::Executed(Receipt {
        refund_id: "rf_1".into(),
        status: "succeeded".into(),
        amount_cents: AmountCents::new(1250),
    })
}

#[tokio::test]
async fn a_ledger_error_never_calls_payments() {
    let ledger = MemoryLedger::new();
    ledger.fail(true);
    let refunds = RecordedRefunds::new(ledger, RecordingPayments::answering(paid()), DEFAULT_LIMITS);

    for (id, cents) in [("r-small", 1250), ("r-above-the-limit", 9000)] {
        assert_eq!(
            refunds.refund(&request(id, "A-1", cents)).await,
            RefundOutcome::Unrecorded,
            "{id}"
        );
    }

    assert!(refunds.payments.requests().is_empty());
}

#[tokio::test]
async fn a_refused_write_goes_to_approval_with_the_ledgers_reasons() {
    let refunds = RecordedRefunds::new(
        MemoryLedger::new(),
        RecordingPayments::answering(paid()),
        DEFAULT_LIMITS,
    );
    assert_eq!(refunds.refund(&request("r-1", "A-1", 4000)).await, paid().into());
    assert_eq!(refunds.refund(&request("r-1b", "C-3", 5000)).await, paid().into());

    let again = refunds.refund(&request("r-2", " a-1", 1000)).await;
    let over_the_day = refunds.refund(&request("r-3", "B-2", 1500)).await;
    let both = refunds.refund(&request("r-4", "A-1", 7000)).await;

    let reasons = |outcome: &RefundOutcome| match outcome {
        RefundOutcome::PendingApproval { reasons, .. } => reasons.clone(),
        other => panic!("not sent to a person: {other:?}"),
    };
    assert_eq!(reasons(&again), ["order_refunded_recently"]);
    assert_eq!(reasons(&over_the_day), ["daily_limit_exceeded"]);
    assert_eq!(
        reasons(&both),
        ["amount_above_limit", "order_refunded_recently", "daily_limit_exceeded"]
    );
    assert_eq!(refunds.payments.requests().len(), 2);
    let waiting = refunds
        .ledger
        .records()
        .iter()
        .filter(|r| r.state == crate::refund::RefundState::AwaitingApproval)
        .count();
    assert_eq!(waiting, 3);
}

#[tokio::test]
async fn two_approvers_make_one_payment() {
    let refunds = RecordedRefunds::new(
        MemoryLedger::new(),
        RecordingPayments::answering(paid()),
        DEFAULT_LIMITS,
    );
    let RefundOutcome::PendingApproval { approval_id, .. } = refunds.refund(&request("r-1", "D-4", 12000)).await else {
        panic!("above the limit: sent to a person");
    };
    let payments = RecordingPayments::answering(paid());
    let (alice_mark, bob_mark) = (WriterMark::new("staff:alice"), WriterMark::new("staff:bob"));

    let (alice, bob) = tokio::join!(
        approvals::approve(
            &refunds.ledger,
            &payments,
            &AnyOrder,
            &approval_id,
            Person::named("alice"),
            &alice_mark,
            &DEFAULT_LIMITS
        ),
        approvals::approve(
            &refunds.ledger,
            &payments,
            &AnyOrder,
            &approval_id,
            Person::named("bob"),
            &bob_mark,
            &DEFAULT_LIMITS
        ),
    );

    assert_eq!(payments.requests().len(), 1);
    let (won, lost) = match (alice, bob) {
        (Ok(won), Err(lost)) | (Err(lost), Ok(won)) => (won, lost),
        other => panic!("exactly one approval pays: {other:?}"),
    };
    assert_eq!(won.outcome, paid());
    assert!(matches!(lost, ApprovalError::AlreadyDecided { .. }), "{lost}");
    assert_eq!(refunds.ledger.records()[0].state, crate::refund::RefundState::Executed);
}

#[tokio::test]
async fn an_approval_tells_the_customer_once_in_the_memory_books_as_in_dynamodb() {
    use crate::chat::Message;
    use crate::conversation::shown::Author;
    use crate::conversation::{ConversationId, Exchange};
    use crate::ledger::{ConversationLease, ConversationStore, HeldConversation, NewExchange};

    let refunds = RecordedRefunds::new(
        MemoryLedger::new(),
        RecordingPayments::answering(paid()),
        DEFAULT_LIMITS,
    );
    let conversation = ConversationId::parse("c_1").unwrap();
    let mut asked = request("r-1", "D-4", 12000);
    asked.attempt.conversation = Some(conversation.as_str().to_owned());
    let RefundOutcome::PendingApproval { approval_id, .. } = refunds.refund(&asked).await else {
        panic!("above the limit: sent to a person");
    };
    let lease = ConversationLease {
        id: conversation.clone(),
        customer: "u-1".into(),
        writer: asked.attempt.writer.clone(),
        lease_until_ms: u64::MAX,
        scope: asked.scope().record_id(),
    };
    let turn = NewExchange {
        verifying: false,
        from_visitor: false,
        label: None,
        handoff_due_at_ms: None,
        told: None,
        router: None,
        writes: Default::default(),
        orders: Vec::new(),
        exchange: Exchange::of_turn(&[Message::User("refund D-4".into())], Some("A person will review it.")),
        status: 200,
        scope: asked.attempt.scope.clone(),
        marked: true,
        refund_recorded: true,
        awaiting_approval: true,
        handoff: None,
        tokens: None,
        key: None,
    };
    refunds
        .ledger
        .append(&lease, &HeldConversation::created_here(), &turn, 0)
        .await
        .unwrap();
    let payments = RecordingPayments::answering(paid());
    for by in ["alice", "bob"] {
        let mark = WriterMark::new(&format!("staff:{by}"));
        let _ = approvals::approve(
            &refunds.ledger,
            &payments,
            &AnyOrder,
            &approval_id,
            Person::named(by),
            &mark,
            &DEFAULT_LIMITS,
        )
        .await;
    }

    let shown = refunds
        .ledger
        .shown(&conversation, "u-1", Some(1), 0)
        .await
        .unwrap()
        .unwrap();
    let words: Vec<(u64, Author, &str)> = shown
        .messages
        .iter()
        .map(|m| (m.seq, m.from, m.text.as_str()))
        .collect();
    assert_eq!(
        words,
        [(
            2,
            Author::Person,
            "A person approved your refund of 120.00 EUR for order D-4."
        )]
    );
    assert_eq!(payments.requests().len(), 1);
    assert!(
        refunds
            .ledger
            .shown(&conversation, "u-2", None, 0)
            .await
            .unwrap()
            .is_none(),
        "another customer's: absent"
    );
}

/// The order a second approver reads after the first approver's payment
/// (the race of two approvals, made to happen): the first approval runs,
/// and pays, while the second reads the order, which then shows nothing left.
struct PaidWhileRead<'a> {
    ledger: &'a MemoryLedger,
    payments: &'a RecordingPayments,
    record_id: String,
    first: std::sync::atomic::AtomicBool,
}

use crate::orders::OrderSystem;

impl OrderSystem for PaidWhileRead<'_> {
    async fn order(&self, order_id: &str, shopper: &crate::orders::Shopper) -> crate::orders::OrderLookup {
        if !self.first.swap(true, std::sync::atomic::Ordering::SeqCst) {
            approvals::approve(
                self.ledger,
                self.payments,
                &AnyOrder,
                &self.record_id,
                Person::named("alice"),
                &WriterMark::new("staff:alice"),
                &DEFAULT_LIMITS,
            )
            .await
            .expect("the first approval pays");
        }
        let mut order = crate::doubles::any_order(order_id, shopper.user_id());
        order.refunded_cents = order.paid_cents;
        crate::orders::OrderLookup::Found(Box::new(order))
    }

    async fn change_address(
        &self,
        order_id: &str,
        shopper: &crate::orders::Shopper,
        address: &crate::orders::address::Address,
        key: &str,
    ) -> crate::orders::address::AddressWrite {
        AnyOrder.change_address(order_id, shopper, address, key).await
    }

    async fn start_return(
        &self,
        order_id: &str,
        shopper: &crate::orders::Shopper,
        arguments: &crate::orders::returns::ReturnArguments,
        key: &str,
    ) -> crate::orders::returns::ReturnWrite {
        AnyOrder.start_return(order_id, shopper, arguments, key).await
    }
}

/// The loser of two approvals is told who decided, not what the winner's
/// payment left of the order (which the browsers' race showed).
#[tokio::test]
async fn an_approval_whose_order_was_paid_meanwhile_by_another_approval_is_already_decided() {
    let refunds = RecordedRefunds::new(
        MemoryLedger::new(),
        RecordingPayments::answering(paid()),
        DEFAULT_LIMITS,
    );
    let RefundOutcome::PendingApproval { approval_id, .. } = refunds.refund(&request("r-1", "D-4", 12000)).await else {
        panic!("above the limit: sent to a person");
    };
    let payments = RecordingPayments::answering(paid());
    let meanwhile = PaidWhileRead {
        ledger: &refunds.ledger,
        payments: &payments,
        record_id: approval_id.clone(),
        first: Default::default(),
    };

    let bob = approvals::approve(
        &refunds.ledger,
        &payments,
        &meanwhile,
        &approval_id,
        Person::named("bob"),
        &WriterMark::new("staff:bob"),
        &DEFAULT_LIMITS,
    )
    .await;

    assert_eq!(payments.requests().len(), 1, "alice's payment only");
    match bob {
        Err(ApprovalError::AlreadyDecided { .. }) => {}
        other => panic!("bob is told it was decided: {other:?}"),
    }
}
