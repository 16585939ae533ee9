//! The support team during the run: approvals and rejections made through
//! the same `approvals` and ledger functions as `refund-chat-admin`, through
//! the faulty DynamoDB, and paid straight to the sandbox (so the function's
//! payments requests stay the function's). Half of the decisions come "days
//! later": the order's guard is first deleted, as DynamoDB's TTL would once
//! it expired. Each such expiry is noted with its time, which tells the
//! checks where rule 2's window ended for that order. Every decision leaves
//! its note in the record's conversation (contract 18), and now and then a
//! person replies there too, racing the customer's turns for the sequence.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use refund_chat::clock::now_ms;
use refund_chat::conversation::person::PersonNote;
use refund_chat::ledger::StaffLedger;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::dynamo::notes::{PersonNotes, Replied};
use refund_chat::orders::http::HttpOrders;
use refund_chat::record_then_pay::approvals::{self, ApprovalError};
use refund_chat::refund::RefundState;
use refund_chat::refund::payments::HttpPayments;
use refund_chat::refund::policy::{Limits, order_key};

use crate::rng::Rng;

pub struct Staff {
    pub seed: u64,
    /// Through the faulty DynamoDB.
    pub ledger: DynamoLedger,
    /// The conversation table, through the same faulty DynamoDB.
    pub notes: PersonNotes,
    /// Straight to moto: TTL is DynamoDB's own, not subject to faults.
    pub ttl: aws_sdk_dynamodb::Client,
    pub table: String,
    pub payments: HttpPayments,
    /// The order system an approval reads afresh, through its faulty proxy.
    pub orders: HttpOrders,
    pub limits: Limits,
    /// (order key, epoch ms once its guard was gone)
    pub expiries: Mutex<Vec<(String, u64)>>,
    /// How the decisions ended, by name.
    pub decisions: Mutex<BTreeMap<String, usize>>,
}

impl Staff {
    /// Decides waiting refunds until `done`.
    pub async fn run(self: Arc<Self>, done: Arc<AtomicBool>) {
        let mut rng = Rng::derived(self.seed, &[0x57AF]);
        while !done.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20 + rng.below(80))).await;
            let waiting = match self.ledger.waiting(RefundState::AwaitingApproval).await {
                Ok(waiting) if !waiting.is_empty() => waiting,
                Ok(_) => continue,
                Err(_) => {
                    self.count("pending: ledger error");
                    continue;
                }
            };
            let record = rng.pick(&waiting).clone();
            if rng.chance(0.5) && self.expire_guard(&record.order_id).await {
                self.count("guard expired first");
            }
            let by = format!("staff-{}", rng.below(3));
            // Now and then two people approve two refunds of one order at once.
            let twin = waiting
                .iter()
                .find(|other| {
                    other.record_id != record.record_id && order_key(&other.order_id) == order_key(&record.order_id)
                })
                .filter(|_| rng.chance(0.5))
                .cloned();
            let ending = if let Some(twin) = twin {
                let (first, second) = tokio::join!(
                    self.approve(&record.record_id, &by),
                    self.approve(&twin.record_id, "staff-twin"),
                );
                self.count(&format!("two of one order: {first}"));
                format!("two of one order: {second}")
            } else if rng.chance(0.6) {
                self.approve(&record.record_id, &by).await
            } else {
                match self
                    .ledger
                    .reject(
                        &record.record_id,
                        refund_chat::conversation::person::Person::named(&by),
                        "chaos",
                        now_ms(),
                    )
                    .await
                {
                    Ok(refund_chat::ledger::StaffDecision::Done(_)) => "reject: done".into(),
                    Ok(_) => "reject: refused".into(),
                    Err(_) => "reject: ledger error".into(),
                }
            };
            self.count(&ending);
            if let Some(conversation) = record.conversation_id.as_deref().filter(|_| rng.chance(0.3)) {
                let reply = PersonNote::reply(
                    refund_chat::conversation::person::Person::named(&by),
                    "A person from the support team looked at this.",
                );
                let ending = match self.notes.reply(conversation, &reply, now_ms(), None).await {
                    Ok(Replied::Appended { .. }) => "reply: appended",
                    Ok(Replied::NotFound) => "reply: no conversation",
                    Ok(Replied::HeldBy(_)) => "reply: another person has it",
                    Err(_) => "reply: ledger error",
                };
                self.count(ending);
            }
        }
    }

    /// Deletes the order's guard as TTL would; true if it was deleted.
    /// As TTL would, days after: so never while a refund of the order is
    /// in flight, and only if no refund was recorded since that was read
    /// (the guard's version unchanged).
    async fn expire_guard(&self, order_id: &str) -> bool {
        use aws_sdk_dynamodb::types::AttributeValue;
        let key = order_key(order_id);
        let Ok(seen) = self.ledger.in_flight(order_id, "").await else {
            return false;
        };
        if seen.amount.cents() > 0 {
            return false;
        }
        let delete = self
            .ttl
            .delete_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(format!("order#{key}")));
        let delete = if seen.version == 0 {
            delete.condition_expression("attribute_not_exists(moves)")
        } else {
            delete
                .condition_expression("moves = :seen")
                .expression_attribute_values(":seen", AttributeValue::N(seen.version.to_string()))
        };
        let deleted = delete.send().await.is_ok();
        if deleted && let Ok(mut expiries) = self.expiries.lock() {
            // Noted once the deletion is done: a refund that started after
            // this instant cannot have seen the guard.
            expiries.push((key, now_ms()));
        }
        deleted
    }

    /// One approval, as `refund-chat-admin approve` makes it; how it ended.
    async fn approve(&self, record_id: &str, by: &str) -> String {
        let writer = refund_chat::refund::WriterMark::new(&format!("chaos:{by}"));
        let approved = approvals::approve(
            &self.ledger,
            &self.payments,
            &self.orders,
            record_id,
            refund_chat::conversation::person::Person::named(by),
            &writer,
            &self.limits,
        )
        .await;
        match approved {
            Ok(approved) => format!("approve: {}", approved.outcome.name()),
            Err(ApprovalError::AlreadyDecided { .. }) => "approve: already decided".into(),
            Err(ApprovalError::ClaimUncertain { .. }) => "approve: claim uncertain".into(),
            Err(ApprovalError::MoreThanRemains { .. }) => "approve: more than remains".into(),
            Err(ApprovalError::OrderUnreadable { .. } | ApprovalError::OrderGone { .. }) => {
                "approve: order unreadable".into()
            }
            Err(ApprovalError::OrderBusy { .. }) => "approve: order busy".into(),
            Err(ApprovalError::NotPaid { .. }) => "approve: not paid".into(),
            Err(_) => "approve: ledger error".into(),
        }
    }

    fn count(&self, ending: &str) {
        if let Ok(mut decisions) = self.decisions.lock() {
            *decisions.entry(ending.to_owned()).or_insert(0) += 1;
        }
    }
}
