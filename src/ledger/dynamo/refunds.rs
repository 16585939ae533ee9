//! The refund records on DynamoDB ([`crate::ledger::RefundLedger`]): the
//! record written in one transaction with the guards whose conditions are
//! rules 2 and 3, and its outcome, with the releases a rejection makes.

use super::*;
use crate::ledger::DecidedBy;

/// A new refund record.
pub(crate) fn refund_item(
    request: &RefundRequest,
    decision: DecidedBy,
    state: RefundState,
    reasons: &[Reason],
    now_ms: u64,
) -> Item {
    let mut item: Item = [
        ("pk", s(refund_pk(request.scope()))),
        ("kind", s("refund")),
        ("record_id", s(request.scope().record_id())),
        ("scope", s(request.scope().id())),
        ("user_id", s(request.scope().user_id())),
        ("order_id", s(&request.order_id)),
        // What the events render (contract 14): the model wrote `order_id`.
        (
            "event_order_id",
            s(crate::untrusted::order_id_for_event(&request.order_id)),
        ),
        ("amount_cents", n(request.amount.cents())),
        ("request_id", s(request.request_id())),
        ("writer", s(request.writer().as_str())),
        ("decision", s(decision.as_str())),
        ("state", s(state.as_str())),
        ("waiting_for", s(state.as_str())),
        ("day", s(utc_day(now_ms))),
        ("created_at", s(rfc3339(now_ms))),
        ("created_at_ms", n(now_ms)),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value))
    .collect();
    if let Some(key) = request.scope().idempotency_key() {
        item.insert("idempotency_key".into(), s(key));
    }
    if let Some(conversation) = &request.attempt.conversation {
        item.insert("conversation_id".into(), s(conversation));
    }
    if let Some(day_owner) = &request.attempt.day_owner {
        item.insert("day_owner".into(), s(day_owner));
    }
    if let Some(order) = request.order.snapshot() {
        item.extend(order_items(order));
    }
    if let Some(labels) = &request.routed.labels {
        item.insert("router".into(), s(labels));
    }
    if state == RefundState::Executing {
        item.insert("executing_since_ms".into(), n(now_ms));
    }
    if state == RefundState::AwaitingApproval {
        item.insert(
            "reasons".into(),
            AttributeValue::L(reasons.iter().map(|reason| s(reason.as_str())).collect()),
        );
        item.insert("customer_message".into(), s(request.message.text()));
    }
    item
}

/// The order's facts on its refund record (contract 16): no address.
fn order_items(order: &OrderSnapshot) -> impl Iterator<Item = (String, AttributeValue)> + '_ {
    [
        ("order_status", Some(s(&order.status))),
        ("order_delivered_at", order.delivered_at_ms.map(|ms| s(rfc3339(ms)))),
        ("order_paid_cents", Some(n(order.paid.cents()))),
        ("order_refunded_cents", Some(n(order.refunded.cents()))),
        ("order_currency", Some(s(&order.currency))),
        // Rule 7: a return open, and what its items are worth.
        (
            "order_open_returns_cents",
            order.return_open.then(|| n(order.open_returns.cents())),
        ),
    ]
    .into_iter()
    .filter_map(|(name, value)| Some((name.to_owned(), value?)))
}

/// A refund record as the turn needs to see it.
pub fn prior_refund(item: &Item) -> Result<PriorRefund, LedgerError> {
    let state = RefundState::parse(required(item, "state")?)
        .ok_or_else(|| LedgerError::Malformed("unknown refund state".into()))?;
    let receipt = match (text(item, "refund_id"), state) {
        (Some(refund_id), RefundState::Executed) => Some(Receipt {
            refund_id: refund_id.to_owned(),
            status: text(item, "receipt_status").unwrap_or_default().to_owned(),
            amount_cents: AmountCents::new(number(item, "amount_cents").unwrap_or_default()),
        }),
        _ => None,
    };
    let resolution = resolution_of(item);
    Ok(PriorRefund {
        state,
        order_id: required(item, "order_id")?.to_owned(),
        amount: AmountCents::new(number(item, "amount_cents").unwrap_or_default()),
        receipt,
        resolution,
    })
}

/// What a person resolved an unknown outcome as, if anything.
pub(crate) fn resolution_of(item: &Item) -> Option<Resolution> {
    match text(item, "resolution") {
        Some("executed") => Some(Resolution::Executed {
            refund_id: text(item, "resolved_refund_id").unwrap_or_default().to_owned(),
        }),
        Some("not_executed") => Some(Resolution::NotExecuted),
        _ => None,
    }
}

impl crate::ledger::RefundLedger for DynamoLedger {
    async fn record_automatic(
        &self,
        request: &RefundRequest,
        limits: &Limits,
        now_ms: u64,
    ) -> Result<AutomaticWrite, LedgerError> {
        // Rule 3 cannot pass for an amount above the daily limit on its own.
        let Some(headroom) = limits.daily_headroom(request.amount) else {
            return Ok(AutomaticWrite::Refused(self.history(request, limits, now_ms).await?));
        };
        let day = utc_day(now_ms);
        let record_id = request.scope().record_id();
        let record = self.put_refund(refund_item(
            request,
            DecidedBy::Rules,
            RefundState::Executing,
            &[],
            now_ms,
        ))?;
        // Rule 2: no refund of the order that may have moved money within the window.
        let order = self
            .guard_order(&request.order_id, &record_id, limits, now_ms)
            .condition_expression("attribute_not_exists(live) OR last_at_ms < :window_start")
            .expression_attribute_values(":window_start", n(limits.window_start_ms(now_ms)))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(malformed)?;
        // Rule 3: today's automatic total, this refund included, within the limit.
        let daily = Update::builder()
            .table_name(&self.table)
            .key("pk", s(daily_pk(request.attempt.day_owner(), &day)))
            .update_expression("ADD total_cents :amount, live :record SET expires_at = :expires, #kind = :kind")
            .condition_expression("attribute_not_exists(total_cents) OR total_cents <= :headroom")
            .expression_attribute_values(":amount", n(request.amount.cents()))
            .expression_attribute_values(":record", AttributeValue::Ss(vec![record_id]))
            .expression_attribute_values(":expires", n(guard_expiry_s(now_ms, limits.order_window)))
            .expression_attribute_names("#kind", "kind")
            .expression_attribute_values(":kind", s("daily_total"))
            .expression_attribute_values(":headroom", n(headroom.cents()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(malformed)?;
        let items = [
            TransactWriteItem::builder().put(record).build(),
            TransactWriteItem::builder().update(order).build(),
            TransactWriteItem::builder().update(daily).build(),
        ];
        let failed = match self.transact(items).await? {
            None => return Ok(AutomaticWrite::Recorded),
            Some(failed) => failed,
        };
        if let Some(existing) = &failed[0] {
            return Ok(match self.own_or_prior(existing, request.writer().as_str())? {
                None => AutomaticWrite::Recorded,
                Some(prior) => AutomaticWrite::Existing(prior),
            });
        }
        Ok(AutomaticWrite::Refused(History {
            order_refunded_recently: failed[1].is_some(),
            automatic_today: match &failed[2] {
                // The total that did not leave room; unknown counts as the limit.
                Some(daily) => {
                    AmountCents::new(number(daily, "total_cents").unwrap_or(limits.user_daily_auto_limit.cents()))
                }
                None => AmountCents::ZERO,
            },
        }))
    }

    async fn record_for_approval(
        &self,
        request: &RefundRequest,
        reasons: &[Reason],
        limits: &Limits,
        now_ms: u64,
    ) -> Result<ApprovalWrite, LedgerError> {
        let record = self.put_refund(refund_item(
            request,
            DecidedBy::Approval,
            RefundState::AwaitingApproval,
            reasons,
            now_ms,
        ))?;
        // A refund waiting for a person counts for rule 2 too: it may move money.
        let order = self
            .guard_order(&request.order_id, &request.scope().record_id(), limits, now_ms)
            .build()
            .map_err(malformed)?;
        let items = [
            TransactWriteItem::builder().put(record).build(),
            TransactWriteItem::builder().update(order).build(),
        ];
        match self.transact(items).await? {
            None => Ok(ApprovalWrite::Recorded),
            Some(failed) => match &failed[0] {
                Some(existing) => Ok(match self.own_or_prior(existing, request.writer().as_str())? {
                    None => ApprovalWrite::Recorded,
                    Some(prior) => ApprovalWrite::Existing(prior),
                }),
                None => Err(LedgerError::Conflict("the approval record was not written".into())),
            },
        }
    }

    async fn order_refunded_recently(&self, order_id: &str, limits: &Limits, now_ms: u64) -> Result<bool, LedgerError> {
        let order = self.get(&order_pk(order_id)).await?.unwrap_or_default();
        Ok(limits.order_refunded_recently(
            order
                .get("live")
                .is_some_and(|live| live.as_ss().is_ok_and(|l| !l.is_empty())),
            number(&order, "last_at_ms"),
            now_ms,
        ))
    }

    async fn history(&self, request: &RefundRequest, limits: &Limits, now_ms: u64) -> Result<History, LedgerError> {
        let order = self.get(&order_pk(&request.order_id)).await?.unwrap_or_default();
        let daily = self
            .get(&daily_pk(request.attempt.day_owner(), &utc_day(now_ms)))
            .await?
            .unwrap_or_default();
        Ok(History {
            order_refunded_recently: limits.order_refunded_recently(
                order
                    .get("live")
                    .is_some_and(|live| live.as_ss().is_ok_and(|l| !l.is_empty())),
                number(&order, "last_at_ms"),
                now_ms,
            ),
            automatic_today: AmountCents::new(number(&daily, "total_cents").unwrap_or_default()),
        })
    }

    async fn record_outcome(
        &self,
        request: &RefundRequest,
        outcome: &PaymentOutcome,
        counted: &CountsFor,
        now_ms: u64,
    ) -> Result<(), LedgerError> {
        let state = outcome.state();
        let mut set = vec!["#state = :state", "updated_at = :now"];
        // Never on a record a person resolved meanwhile (contract 9): the
        // resolution is what payments confirmed, and it already settled the guards.
        let mut update = Update::builder()
            .table_name(&self.table)
            .key("pk", s(refund_pk(request.scope())))
            .condition_expression("#state = :executing AND writer = :writer AND attribute_not_exists(resolution)")
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":state", s(state.as_str()))
            .expression_attribute_values(":now", s(rfc3339(now_ms)))
            .expression_attribute_values(":executing", s(RefundState::Executing.as_str()))
            .expression_attribute_values(":writer", s(request.writer().as_str()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        let mut remove_queue = true;
        match outcome {
            PaymentOutcome::Executed(receipt) => {
                set.extend(["refund_id = :refund_id", "receipt_status = :receipt_status"]);
                update = update
                    .expression_attribute_values(":refund_id", s(&receipt.refund_id))
                    .expression_attribute_values(":receipt_status", s(&receipt.status));
            }
            PaymentOutcome::Rejected { status, detail } => {
                set.extend(["payments_status = :status", "payments_detail = :detail"]);
                update = update
                    .expression_attribute_values(":status", n(u64::from(*status)))
                    .expression_attribute_values(":detail", s(detail));
            }
            PaymentOutcome::Unknown(error) => {
                set.extend(["failure = :failure", "waiting_for = :state"]);
                update = update.expression_attribute_values(":failure", s(error.to_string()));
                remove_queue = false;
            }
        }
        let expression = format!(
            "SET {}{}",
            set.join(", "),
            if remove_queue { " REMOVE waiting_for" } else { "" }
        );
        let main = vec![
            TransactWriteItem::builder()
                .update(update.update_expression(expression).build().map_err(malformed)?)
                .build(),
        ];
        let record_id = request.scope().record_id();
        let releases = if state == RefundState::Rejected {
            self.releases(&Released::of(request, &record_id), counted)?
        } else {
            Vec::new()
        };
        match self.transact_releasing(main, releases).await? {
            None => Ok(()),
            Some(failed) => match &failed[0] {
                Some(item)
                    if text(item, "writer") == Some(request.writer().as_str())
                        && text(item, "state") == Some(state.as_str()) =>
                {
                    Ok(())
                }
                Some(item) if text(item, "resolution").is_some() => Err(LedgerError::Conflict(format!(
                    "a person resolved the refund record as {:?} first: this outcome is not recorded",
                    text(item, "resolution")
                ))),
                Some(item) => Err(LedgerError::Conflict(format!(
                    "refund record is {:?}, not executing",
                    text(item, "state")
                ))),
                None => Err(LedgerError::Conflict("the outcome was not recorded".into())),
            },
        }
    }
}

/// What an approval moved to `unknown` by [`DynamoLedger::sweep_executing`] says.
pub const APPROVAL_NOT_FINISHED: &str =
    "the approval did not reach payments, or did not record what payments answered, while the sweep watched it";

/// What a record moved to `unknown` by [`DynamoLedger::sweep_executing`] says.
pub const DIED_WHILE_EXECUTING: &str =
    "the invocation ended between the refund record and its outcome: payments may have been called";

impl DynamoLedger {
    /// Moves every refund record left `executing` since before `cutoff_ms`
    /// (its invocation died between the record and the outcome: nothing
    /// can still be running past the function's timeout) to `unknown`, so
    /// that its stream raises `RefundOutcomeUnknown` (contract 14) and a
    /// person resolves it. Reads the `waiting` index, never the table; each
    /// move is conditional on the record being as read, so a late outcome
    /// or a person's resolution wins. Returns the record ids moved.
    pub async fn sweep_executing(&self, cutoff_ms: u64, now_ms: u64) -> Result<Vec<String>, LedgerError> {
        let executing = RefundState::Executing.as_str();
        // `executing_since_ms` is never before `created_at`: the index's
        // range narrows the read to records old enough.
        let items = every_item(
            self.client
                .query()
                .table_name(&self.table)
                .index_name(WAITING_INDEX)
                .key_condition_expression("waiting_for = :executing AND created_at < :cutoff")
                .expression_attribute_values(":executing", s(executing))
                .expression_attribute_values(":cutoff", s(rfc3339(cutoff_ms)))
                .into_paginator()
                .items()
                .send(),
        )
        .await?;
        let mut moved = Vec::new();
        for item in &items {
            let (Some(pk), Some(record_id), Some(since)) = (
                text(item, "pk"),
                text(item, "record_id"),
                number(item, "executing_since_ms"),
            ) else {
                continue;
            };
            if let Some(step) = text(item, "approval_step") {
                // An approver's clock stamped `since`: watched on ours instead.
                let watch = Watch {
                    window_ms: now_ms.saturating_sub(cutoff_ms),
                    now_ms,
                };
                if self.watch_approval(item, pk, step, watch).await? {
                    moved.push(record_id.to_owned());
                }
                continue;
            }
            if since >= cutoff_ms {
                continue;
            }
            let unknown = RefundState::Unknown.as_str();
            let update = Update::builder()
                .table_name(&self.table)
                .key("pk", s(pk))
                .update_expression(
                    "SET #state = :unknown, waiting_for = :unknown, failure = :failure, updated_at = :now",
                )
                .condition_expression(
                    "#state = :executing AND executing_since_ms = :since AND attribute_not_exists(resolution) \
                     AND attribute_not_exists(approval_step)",
                )
                .expression_attribute_names("#state", "state")
                .expression_attribute_values(":unknown", s(unknown))
                .expression_attribute_values(":executing", s(executing))
                .expression_attribute_values(":failure", s(DIED_WHILE_EXECUTING))
                .expression_attribute_values(":now", s(rfc3339(now_ms)))
                .expression_attribute_values(":since", n(since))
                .build()
                .map_err(malformed)?;
            // A failed condition: its outcome or a person got there first.
            if update_alone(&self.client, update).await?.is_none() {
                moved.push(record_id.to_owned());
            }
        }
        Ok(moved)
    }

    /// One look at an approval left `executing`: the first look at a step
    /// stamps it with this clock; a later one that finds the same step,
    /// stamped at least `window_ms` ago, moves it to `unknown`. Both are
    /// conditional on the step, so an approver's next step (or its outcome,
    /// or a person) wins, and the watch starts again.
    async fn watch_approval(&self, item: &Item, pk: &str, step: &str, watch: Watch) -> Result<bool, LedgerError> {
        let stamped = number(item, "sweep_seen_ms").filter(|_| text(item, "sweep_seen_step") == Some(step));
        let update = Update::builder()
            .table_name(&self.table)
            .key("pk", s(pk))
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":executing", s(RefundState::Executing.as_str()))
            .expression_attribute_values(":step", s(step));
        let update = match stamped {
            Some(seen) if watch.now_ms.saturating_sub(seen) >= watch.window_ms => update
                .update_expression(
                    "SET #state = :unknown, waiting_for = :unknown, failure = :failure, updated_at = :at",
                )
                .condition_expression(
                    "#state = :executing AND approval_step = :step AND sweep_seen_ms = :seen \
                     AND attribute_not_exists(resolution)",
                )
                .expression_attribute_values(":unknown", s(RefundState::Unknown.as_str()))
                .expression_attribute_values(":failure", s(APPROVAL_NOT_FINISHED))
                .expression_attribute_values(":at", s(rfc3339(watch.now_ms)))
                .expression_attribute_values(":seen", n(seen)),
            // Still watching.
            Some(_) => return Ok(false),
            None => update
                .update_expression("SET sweep_seen_ms = :now, sweep_seen_step = :step")
                .expression_attribute_values(":now", n(watch.now_ms))
                .condition_expression(
                    "#state = :executing AND approval_step = :step AND attribute_not_exists(resolution)",
                ),
        };
        let moving = stamped.is_some();
        let landed = update_alone(&self.client, update.build().map_err(malformed)?)
            .await?
            .is_none();
        Ok(moving && landed)
    }
}

/// The sweep's own clock, and how long it watches an approval's step.
#[derive(Clone, Copy)]
struct Watch {
    window_ms: u64,
    now_ms: u64,
}
