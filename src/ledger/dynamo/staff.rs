//! What the support team does with the ledger (contract 9), on DynamoDB:
//! read records, list what waits (through the `waiting` index, never a
//! scan), and decide: approve, reject, resolve. Every decision is one
//! conditional write, so of two people deciding the same record at once,
//! exactly one succeeds and the other is told what the record now says.
//! Only the audit export scans: it reads the whole trail by design.

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update};

use super::{DynamoLedger, Released, WAITING_INDEX, every_item, number, refund_pk_of, text};
use crate::clock::rfc3339;
use crate::conversation::person::{Decision, Person, PersonNote};
use crate::ledger::{
    APPROVAL_CLAIMED, APPROVAL_PAYING, Claim, Confirmed, DecidedBy, LedgerError, OrderInFlight, RefundRecord,
    StaffDecision,
};
use crate::refund::money::AmountCents;
use crate::refund::policy::{Limits, OrderSnapshot};
use crate::refund::{Attempt, RefundRequest, RefundScope, RefundState, WriterMark};

/// How often a decision is tried when DynamoDB cancels it for a concurrent
/// transaction on one of its items that did not decide the record itself
/// (say, an automatic refund of the same order updating its guard).
const CONTENDED_ATTEMPTS: usize = 3;
/// How often a decision's note follows its conversation's sequence number
/// when it moved under it (a turn appending, a person's reply).
const NOTE_MOVES: usize = 8;

/// One decision for [`DynamoLedger::apply`]: the update of `record_id`,
/// found as `before`, the other writes it goes with (`guard_at`: the index,
/// in the transaction, of the order guard conditioned on its version), the
/// releases it makes, the writer that takes it to pay, and its note.
struct Decide<'a> {
    record_id: &'a str,
    before: RefundRecord,
    update: aws_sdk_dynamodb::types::builders::UpdateBuilder,
    extra: Vec<TransactWriteItem>,
    releases: Vec<TransactWriteItem>,
    writer: Option<&'a WriterMark>,
    note: Option<NoteOf<'a>>,
    guard_at: Option<usize>,
}

impl<'a> Decide<'a> {
    /// A decision with no other write, writer or guard.
    fn of(record_id: &'a str, before: RefundRecord, update: aws_sdk_dynamodb::types::builders::UpdateBuilder) -> Self {
        Decide {
            record_id,
            before,
            update,
            extra: Vec::new(),
            releases: Vec::new(),
            writer: None,
            note: None,
            guard_at: None,
        }
    }
}

/// The note a decision leaves in its record's conversation (contract 18).
#[derive(Clone, Copy)]
struct NoteOf<'a> {
    decision: Decision,
    by: Person<'a>,
    now_ms: u64,
}

type Item = std::collections::HashMap<String, AttributeValue>;

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

/// `expression` (one `SET` clause) also setting `attribute` to who
/// decided's verified `sub` (`:by_sub`, [`with_sub`]), when there is one.
fn setting_sub(expression: &str, attribute: &str, by: Person<'_>) -> String {
    match by.sub {
        Some(_) => expression.replacen("SET ", &format!("SET {attribute} = :by_sub, "), 1),
        None => expression.to_owned(),
    }
}

/// The update with `:by_sub`, when who decided has a `sub` (DynamoDB
/// refuses a value that its expression does not use).
fn with_sub(
    update: aws_sdk_dynamodb::types::builders::UpdateBuilder,
    by: Person<'_>,
) -> aws_sdk_dynamodb::types::builders::UpdateBuilder {
    match by.sub {
        Some(sub) => update.expression_attribute_values(":by_sub", s(sub)),
        None => update,
    }
}

fn n(value: u64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

fn opt(item: &Item, name: &str) -> Option<String> {
    text(item, name).map(str::to_owned)
}

/// A refund record item as the support team reads it; a state or decision
/// the code does not know is a malformed record, not a guess.
pub fn record_of(item: &Item) -> Result<RefundRecord, LedgerError> {
    let state = text(item, "state")
        .and_then(RefundState::parse)
        .ok_or_else(|| LedgerError::Malformed("a refund record without a known state".into()))?;
    let decision = text(item, "decision")
        .and_then(DecidedBy::parse)
        .ok_or_else(|| LedgerError::Malformed("a refund record without a known decision".into()))?;
    Ok(RefundRecord {
        record_id: opt(item, "record_id").unwrap_or_default(),
        state,
        user_id: opt(item, "user_id").unwrap_or_default(),
        day_owner: opt(item, "day_owner"),
        order_id: opt(item, "order_id").unwrap_or_default(),
        amount: AmountCents::new(number(item, "amount_cents").unwrap_or_default()),
        day: opt(item, "day").unwrap_or_default(),
        created_at: opt(item, "created_at").unwrap_or_default(),
        created_at_ms: number(item, "created_at_ms").unwrap_or_default(),
        request_id: opt(item, "request_id").unwrap_or_default(),
        idempotency_key: opt(item, "idempotency_key"),
        decision,
        reasons: item
            .get("reasons")
            .and_then(|v| v.as_l().ok())
            .map(|list| list.iter().filter_map(|v| v.as_s().ok().cloned()).collect())
            .unwrap_or_default(),
        customer_message: opt(item, "customer_message"),
        executing_since_ms: number(item, "executing_since_ms"),
        updated_at: opt(item, "updated_at"),
        refund_id: opt(item, "refund_id"),
        receipt_status: opt(item, "receipt_status"),
        payments_status: number(item, "payments_status"),
        payments_detail: opt(item, "payments_detail"),
        failure: opt(item, "failure"),
        decided_by: opt(item, "decided_by"),
        decided_by_sub: opt(item, "decided_by_sub"),
        decided_at: opt(item, "decided_at"),
        rejection_reason: opt(item, "rejection_reason"),
        resolution: super::resolution_of(item),
        resolved_by: opt(item, "resolved_by"),
        resolved_by_sub: opt(item, "resolved_by_sub"),
        resolved_at: opt(item, "resolved_at"),
        reissue_of: opt(item, "reissue_of"),
        reissued_as: opt(item, "reissued_as"),
        conversation_id: opt(item, "conversation_id"),
        router: opt(item, "router"),
        message_forgotten_by: opt(item, "message_forgotten_by"),
        message_forgotten_at: opt(item, "message_forgotten_at"),
        order: opt(item, "order_status").map(|status| OrderSnapshot {
            status,
            delivered_at_ms: text(item, "order_delivered_at").and_then(crate::clock::parse_utc),
            paid: AmountCents::new(number(item, "order_paid_cents").unwrap_or_default()),
            refunded: AmountCents::new(number(item, "order_refunded_cents").unwrap_or_default()),
            currency: opt(item, "order_currency").unwrap_or_default(),
            return_open: number(item, "order_open_returns_cents").is_some(),
            open_returns: AmountCents::new(number(item, "order_open_returns_cents").unwrap_or_default()),
        }),
    })
}

fn released(record: &RefundRecord) -> Released<'_> {
    Released {
        record_id: &record.record_id,
        order_id: &record.order_id,
        day_owner: record.day_owner.as_deref().unwrap_or(&record.user_id),
        amount: record.amount,
    }
}

impl DynamoLedger {
    /// One refund record, by its id.
    pub async fn record(&self, record_id: &str) -> Result<Option<RefundRecord>, LedgerError> {
        self.get(&refund_pk_of(record_id))
            .await?
            .filter(|item| text(item, "kind") == Some("refund"))
            .map(|item| record_of(&item))
            .transpose()
    }

    /// The records waiting for `state`, oldest first (the `waiting` index).
    pub async fn waiting(&self, state: RefundState) -> Result<Vec<RefundRecord>, LedgerError> {
        let pages = self
            .client()
            .query()
            .table_name(self.table())
            .index_name(WAITING_INDEX)
            .key_condition_expression("waiting_for = :state")
            .expression_attribute_values(":state", s(state.as_str()))
            .scan_index_forward(true)
            .into_paginator()
            .items()
            .send();
        let items = every_item(pages).await?;
        items.iter().map(record_of).collect()
    }

    /// Every refund record created at or after `since_ms`, oldest first.
    pub async fn all_refunds(&self, since_ms: u64) -> Result<Vec<RefundRecord>, LedgerError> {
        let pages = self
            .client()
            .scan()
            .table_name(self.table())
            .filter_expression("#kind = :refund AND created_at_ms >= :since")
            .expression_attribute_names("#kind", "kind")
            .expression_attribute_values(":refund", s("refund"))
            .expression_attribute_values(":since", n(since_ms))
            .consistent_read(true)
            .into_paginator()
            .items()
            .send();
        let items = every_item(pages).await?;
        let mut records = items.iter().map(record_of).collect::<Result<Vec<_>, _>>()?;
        records.sort_by(|a, b| (a.created_at_ms, &a.record_id).cmp(&(b.created_at_ms, &b.record_id)));
        Ok(records)
    }

    /// `awaiting_approval` to `rejected_by_staff`: no money moves, and the
    /// refund stops counting for rule 2.
    pub async fn reject(
        &self,
        record_id: &str,
        by: Person<'_>,
        reason: &str,
        now_ms: u64,
    ) -> Result<StaffDecision, LedgerError> {
        let Some(before) = self.record(record_id).await? else {
            return Ok(StaffDecision::NotFound);
        };
        let update = self
            .decision(record_id, RefundState::AwaitingApproval, by, now_ms)
            .update_expression(setting_sub(
                "SET #state = :rejected, decided_by = :by, decided_at = :at, rejection_reason = :reason \
                 REMOVE waiting_for",
                "decided_by_sub",
                by,
            ))
            .expression_attribute_values(":rejected", s(RefundState::RejectedByStaff.as_str()))
            // A person's free text is masked as a customer's is (contract 23).
            .expression_attribute_values(":reason", s(crate::mask::masked(reason)));
        let releases = self.releases(&released(&before), &before.counts_for())?;
        let note = NoteOf {
            decision: Decision::Rejected,
            by,
            now_ms,
        };
        self.apply(Decide {
            releases,
            note: Some(note),
            ..Decide::of(record_id, before, update)
        })
        .await
    }

    /// Records what payments confirmed for an `unknown` record, or an
    /// `executing` one whose invocation cannot still be running (older than
    /// `stale_before_ms`). The state stays; the resolution sits beside it.
    pub async fn resolve(
        &self,
        record_id: &str,
        confirmed: &Confirmed,
        by: Person<'_>,
        stale_before_ms: u64,
        now_ms: u64,
    ) -> Result<StaffDecision, LedgerError> {
        let Some(before) = self.record(record_id).await? else {
            return Ok(StaffDecision::NotFound);
        };
        let mut update = Update::builder()
            .table_name(self.table())
            .key("pk", s(refund_pk_of(record_id)))
            .condition_expression(
                // An approval's `executing_since_ms` is its approver's clock:
                // it is resolved once the sweep, on its own clock, made it unknown.
                "attribute_not_exists(resolution) AND (#state = :unknown OR \
                 (#state = :executing AND executing_since_ms < :stale_before AND attribute_not_exists(approval_step)))",
            )
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":unknown", s(RefundState::Unknown.as_str()))
            .expression_attribute_values(":executing", s(RefundState::Executing.as_str()))
            .expression_attribute_values(":stale_before", n(stale_before_ms))
            .expression_attribute_values(":by", s(by.name))
            .expression_attribute_values(":at", s(rfc3339(now_ms)))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        update = with_sub(update, by);
        let mut releases = Vec::new();
        update = match confirmed {
            Confirmed::Executed { refund_id } => update
                .update_expression(setting_sub(
                    "SET resolution = :executed, resolved_refund_id = :refund_id, resolved_by = :by, \
                     resolved_at = :at REMOVE waiting_for",
                    "resolved_by_sub",
                    by,
                ))
                .expression_attribute_values(":executed", s("executed"))
                .expression_attribute_values(":refund_id", s(crate::mask::masked(refund_id))),
            Confirmed::NotExecuted => {
                releases = self.releases(&released(&before), &before.counts_for())?;
                update
                    .update_expression(setting_sub(
                        "SET resolution = :not_executed, resolved_by = :by, resolved_at = :at REMOVE waiting_for",
                        "resolved_by_sub",
                        by,
                    ))
                    .expression_attribute_values(":not_executed", s("not_executed"))
            }
        };
        let decision = match confirmed {
            Confirmed::Executed { .. } => Decision::ConfirmedMade,
            Confirmed::NotExecuted => Decision::ConfirmedNotMade,
        };
        let note = NoteOf { decision, by, now_ms };
        self.apply(Decide {
            releases,
            note: Some(note),
            ..Decide::of(record_id, before, update)
        })
        .await
    }

    /// An update of a record in `from`, by `by` at `now_ms`.
    fn decision(
        &self,
        record_id: &str,
        from: RefundState,
        by: Person<'_>,
        now_ms: u64,
    ) -> aws_sdk_dynamodb::types::builders::UpdateBuilder {
        let update = Update::builder()
            .table_name(self.table())
            .key("pk", s(refund_pk_of(record_id)))
            .condition_expression("#state = :from")
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":from", s(from.as_str()))
            .expression_attribute_values(":by", s(by.name))
            .expression_attribute_values(":at", s(rfc3339(now_ms)))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        with_sub(update, by)
    }

    /// Applies a decision in one transaction. Of two people deciding at
    /// once, the one DynamoDB refuses is told what the record now says,
    /// whether it refused with a failed condition or by cancelling the
    /// transaction for a concurrent one (contract 9); the refused one wrote
    /// no note. A guard whose version moved is [`StaffDecision::OrderMoved`].
    async fn apply(&self, decision: Decide<'_>) -> Result<StaffDecision, LedgerError> {
        let Decide {
            record_id,
            before,
            update,
            extra,
            releases,
            writer,
            note,
            guard_at,
        } = decision;
        let update = update
            .build()
            .map_err(|error| LedgerError::Malformed(error.to_string()))?;
        let main: Vec<TransactWriteItem> = std::iter::once(TransactWriteItem::builder().update(update).build())
            .chain(extra)
            .collect();
        let (mut contended, mut moved) = (0, 0);
        while contended < CONTENDED_ATTEMPTS && moved <= NOTE_MOVES {
            let mut items = main.clone();
            items.extend(self.note_items(&before, note).await?);
            let Some(failed) = (match self.transact_releasing(items, releases.clone()).await {
                Ok(failed) => failed,
                Err(LedgerError::Contended) => {
                    contended += 1;
                    match self.record(record_id).await? {
                        None => return Ok(StaffDecision::NotFound),
                        Some(now) if now != before => return Ok(StaffDecision::Refused(now)),
                        // The concurrent write was to another item (a guard,
                        // the conversation): try again.
                        Some(_) => continue,
                    }
                }
                Err(error) => return Err(error),
            }) else {
                return Ok(StaffDecision::Done(before));
            };
            return Ok(match &failed[0] {
                // Our own write had landed: an attempt whose answer
                // was lost, sent again by the SDK, finds it.
                Some(found) if writer.is_some_and(|w| text(found, "writer") == Some(w.as_str())) => {
                    StaffDecision::Done(before)
                }
                Some(found) if !found.is_empty() => StaffDecision::Refused(record_of(found)?),
                Some(_) => StaffDecision::NotFound,
                // A refund of the order was recorded or claimed since the
                // approver read what it had left.
                None if guard_at.is_some_and(|at| failed.get(at).is_some_and(Option::is_some)) => {
                    StaffDecision::OrderMoved
                }
                // The note's condition: its conversation moved on, or
                // ended, since it was read. Read it again.
                None if failed[main.len()..].iter().any(Option::is_some) => {
                    moved += 1;
                    continue;
                }
                // Another of its writes failed: the record is as it was.
                None => StaffDecision::Refused(before),
            });
        }
        Err(LedgerError::Contended)
    }

    /// The writes that append `note` to `record`'s conversation while it
    /// lives and is the record's customer's; none otherwise (the decision
    /// stands without it).
    async fn note_items(
        &self,
        record: &RefundRecord,
        note: Option<NoteOf<'_>>,
    ) -> Result<Vec<TransactWriteItem>, LedgerError> {
        let (Some(notes), Some(note), Some(conversation)) = (&self.notes, note, record.conversation_id.as_deref())
        else {
            return Ok(Vec::new());
        };
        let Some(head) = notes.live_head(conversation, note.now_ms).await? else {
            return Ok(Vec::new());
        };
        if text(&head, "customer") != Some(record.user_id.as_str()) {
            return Ok(Vec::new());
        }
        let words = PersonNote::of_decision(
            note.decision,
            note.by,
            &record.record_id,
            record.amount,
            record.order.as_ref().map_or("", |order| order.currency.as_str()),
            &record.order_id,
        );
        notes.items(&head, &record.user_id, &words, note.now_ms)
    }
}

impl DynamoLedger {
    /// Adds `record_id` to the order's guard on the condition that its
    /// version is still `seen`'s (an absent guard is version 0).
    fn guard_at_version(
        &self,
        order_id: &str,
        record_id: &str,
        limits: &Limits,
        now_ms: u64,
        seen: OrderInFlight,
    ) -> Result<TransactWriteItem, LedgerError> {
        let guard = self.guard_order(order_id, record_id, limits, now_ms);
        let guard = if seen.version == 0 {
            guard.condition_expression("attribute_not_exists(moves)")
        } else {
            guard
                .condition_expression("moves = :seen")
                .expression_attribute_values(":seen", n(seen.version))
        }
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .map_err(|error| LedgerError::Malformed(error.to_string()))?;
        Ok(TransactWriteItem::builder().update(guard).build())
    }
}

impl crate::ledger::StaffLedger for DynamoLedger {
    /// The guard's version first (a refund recorded after it moves it, and
    /// the claim fails), then every `executing` and `unknown` record of the
    /// same order (rule 2's order key), through the `waiting` index.
    async fn in_flight(&self, order_id: &str, except: &str) -> Result<OrderInFlight, LedgerError> {
        let version = self
            .get(&super::order_pk(order_id))
            .await?
            .and_then(|guard| number(&guard, "moves"))
            .unwrap_or_default();
        let key = crate::refund::policy::order_key(order_id);
        let mut cents = 0u64;
        for state in [RefundState::Executing, RefundState::Unknown] {
            for record in self.waiting(state).await? {
                if record.record_id != except && crate::refund::policy::order_key(&record.order_id) == key {
                    cents = cents.saturating_add(record.amount.cents());
                }
            }
        }
        Ok(OrderInFlight {
            amount: AmountCents::new(cents),
            version,
        })
    }

    async fn start_paying(&self, record_id: &str, writer: &WriterMark) -> Result<bool, LedgerError> {
        let update = Update::builder()
            .table_name(self.table())
            .key("pk", s(refund_pk_of(record_id)))
            .update_expression("SET approval_step = :paying REMOVE sweep_seen_ms, sweep_seen_step")
            .condition_expression("#state = :executing AND writer = :writer AND approval_step = :claimed")
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":executing", s(RefundState::Executing.as_str()))
            .expression_attribute_values(":writer", s(writer.as_str()))
            .expression_attribute_values(":claimed", s(APPROVAL_CLAIMED))
            .expression_attribute_values(":paying", s(APPROVAL_PAYING))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|error| LedgerError::Malformed(error.to_string()))?;
        match super::update_alone(&self.client, update).await? {
            None => Ok(true),
            // Its own write, landed on an attempt whose answer was lost.
            Some(found) => Ok(text(&found, "approval_step") == Some(APPROVAL_PAYING)
                && text(&found, "writer") == Some(writer.as_str())
                && text(&found, "state") == Some(RefundState::Executing.as_str())),
        }
    }

    /// The record and the mark of whoever last took it to pay (`writer`).
    async fn record_and_writer(&self, record_id: &str) -> Result<Option<(RefundRecord, String)>, LedgerError> {
        self.get(&refund_pk_of(record_id))
            .await?
            .filter(|item| text(item, "kind") == Some("refund"))
            .map(|item| Ok((record_of(&item)?, text(&item, "writer").unwrap_or_default().to_owned())))
            .transpose()
    }

    /// Moves `awaiting_approval` to `executing`, approver and time recorded,
    /// `writer` taking the record for the payments call. The order's guard
    /// counts it again from now (the money moves now, however long it
    /// waited), on the condition that it has not moved since `seen`.
    async fn claim_approval(&self, claim: &Claim<'_>, seen: OrderInFlight) -> Result<StaffDecision, LedgerError> {
        let Claim {
            record_id,
            by,
            writer,
            now_ms,
            limits,
        } = *claim;
        let Some(before) = self.record(record_id).await? else {
            return Ok(StaffDecision::NotFound);
        };
        let update = self
            .decision(record_id, RefundState::AwaitingApproval, by, now_ms)
            .update_expression(setting_sub(
                "SET #state = :executing, waiting_for = :executing, decided_by = :by, decided_at = :at, \
                 writer = :writer, executing_since_ms = :now_ms, approval_step = :claimed",
                "decided_by_sub",
                by,
            ))
            .expression_attribute_values(":executing", s(RefundState::Executing.as_str()))
            .expression_attribute_values(":writer", s(writer.as_str()))
            .expression_attribute_values(":now_ms", n(now_ms))
            .expression_attribute_values(":claimed", s(APPROVAL_CLAIMED));
        let guard = self.guard_at_version(&before.order_id, record_id, limits, now_ms, seen)?;
        let note = NoteOf {
            decision: Decision::Approved,
            by,
            now_ms,
        };
        self.apply(Decide {
            extra: vec![guard],
            writer: Some(writer),
            note: Some(note),
            guard_at: Some(1),
            ..Decide::of(record_id, before, update)
        })
        .await
    }

    /// Pays, under a new record, an approved refund that a person resolved
    /// as not executed: its approval was recorded, but payments was never
    /// reached (an approver whose claim's answer was lost). The original
    /// gets `reissued_as`, the new record `reissue_of`, in one transaction,
    /// so an original is reissued at most once. `Done` holds the new record,
    /// `executing` and held by `writer`.
    async fn claim_reissue(&self, claim: &Claim<'_>, seen: OrderInFlight) -> Result<StaffDecision, LedgerError> {
        let Claim {
            record_id,
            by,
            writer,
            now_ms,
            limits,
        } = *claim;
        let Some(original) = self.record(record_id).await? else {
            return Ok(StaffDecision::NotFound);
        };
        let scope = RefundScope::for_reissue(&original.user_id, &original.record_id);
        let reissue_id = scope.record_id();
        let request = RefundRequest {
            attempt: Attempt {
                scope,
                writer: writer.clone(),
                conversation: original.conversation_id.clone(),
                day_owner: original.day_owner.clone(),
            },
            order_id: original.order_id.clone(),
            amount: original.amount,
            message: crate::refund::message::CustomerMessage::new(""),
            // A person paying it decided on the first record's facts: it keeps them.
            order: original.order_facts_read(),
            // A person's decision: no router decides it (the record keeps the turn's labels).
            routed: crate::refund::Routed::default(),
        };
        let mut item = super::refund_item(&request, DecidedBy::Approval, RefundState::Executing, &[], now_ms);
        item.insert(
            "reasons".into(),
            AttributeValue::L(original.reasons.iter().map(s).collect()),
        );
        item.insert("decided_by".into(), s(by.name));
        if let Some(sub) = by.sub {
            item.insert("decided_by_sub".into(), s(sub));
        }
        item.insert("decided_at".into(), s(rfc3339(now_ms)));
        item.insert("reissue_of".into(), s(&original.record_id));
        item.insert("writer".into(), s(writer.as_str()));
        item.insert("approval_step".into(), s(APPROVAL_CLAIMED));
        let new_record = record_of(&item)?;
        let link = Update::builder()
            .table_name(self.table())
            .key("pk", s(refund_pk_of(record_id)))
            .update_expression("SET reissued_as = :reissue")
            .condition_expression(
                "resolution = :not_executed AND decision = :approval AND attribute_exists(decided_by) \
                 AND attribute_not_exists(reissued_as)",
            )
            .expression_attribute_values(":reissue", s(&reissue_id))
            .expression_attribute_values(":not_executed", s("not_executed"))
            .expression_attribute_values(":approval", s("approval"))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        let put = self.put_refund(item)?;
        let guard = self.guard_at_version(&original.order_id, &reissue_id, limits, now_ms, seen)?;
        let extra = vec![TransactWriteItem::builder().put(put).build(), guard];
        Ok(
            // A reissue pays what a person approved already: the customer was told then.
            match self
                .apply(Decide {
                    extra,
                    guard_at: Some(2),
                    ..Decide::of(record_id, original, link)
                })
                .await?
            {
                StaffDecision::Done(_) => StaffDecision::Done(new_record),
                other => other,
            },
        )
    }
}
