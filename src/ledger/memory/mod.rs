//! The ledger in memory: every port of [`crate::ledger`] under one lock, so
//! the orchestration above it ("decide, record, then pay", approvals,
//! idempotency) is tested in milliseconds, races included. It keeps the
//! DynamoDB adapter's semantics where they matter: a refund record is
//! written at most once per scope and never deleted; rules 2 and 3 are
//! checked in the same step as the write ([`crate::refund::policy`]'s
//! functions, the adapter's conditions); guards name the records they count,
//! and a release takes out only its own. It does not model TTL or DynamoDB's
//! failure modes, except two: [`MemoryLedger::fail`] makes every operation
//! fail as an unreachable ledger would, and [`MemoryLedger::fail_appends`]
//! only a conversation's append. Budgets and conversations are in
//! `budgets.rs` and `conversations.rs`, on the same books.

mod budgets;
mod conversations;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::{
    APPROVAL_CLAIMED, APPROVAL_PAYING, ApprovalWrite, AutomaticWrite, Claim, CountsFor, DecidedBy, KeyClaim,
    LedgerError, OrderInFlight, RefundLedger, RefundRecord, RequestLease, RequestLedger, StaffDecision, StaffLedger,
    StoredRequest, StoredResponse, TakeOver,
};
use crate::clock::{rfc3339, utc_day};
use crate::conversation::person::{Decision, PersonNote};
use crate::refund::money::AmountCents;
use crate::refund::policy::{History, Limits, Reason, order_key};
use crate::refund::{
    PaymentOutcome, PriorRefund, Receipt, RefundRequest, RefundScope, RefundState, Resolution, WriterMark,
};

/// A clone shares the books (one ledger behind several ports, as the
/// function's conversations and request records share a transaction).
#[derive(Default, Clone)]
pub struct MemoryLedger {
    books: Arc<Mutex<Books>>,
    failing: Arc<AtomicBool>,
    failing_appends: Arc<AtomicBool>,
}

#[derive(Default)]
struct Books {
    /// Record id -> the record and its writer.
    refunds: BTreeMap<String, (RefundRecord, String)>,
    /// Scope id -> the request record.
    requests: HashMap<String, StoredRequest>,
    /// Order key -> the records counted, and the latest time one was added.
    orders: HashMap<String, (BTreeSet<String>, u64)>,
    /// Record id -> where an approval is between its claim and payments.
    approval_steps: HashMap<String, &'static str>,
    /// Order key -> how often a record was added to its guard (its version).
    order_versions: HashMap<String, u64>,
    /// (user, day) -> the records counted, by amount.
    days: HashMap<(String, String), BTreeMap<String, u64>>,
    /// The customers' budgets.
    budgets: budgets::Budgets,
    /// Conversation id -> the conversation.
    conversations: HashMap<String, conversations::StoredConversation>,
    /// The recent first replies of handoffs (contract 32).
    first_replies: Vec<crate::office_hours::expected::FirstReply>,
}

impl MemoryLedger {
    pub fn new() -> Self {
        MemoryLedger::default()
    }

    /// From now on every operation fails as an unreachable ledger would
    /// (`false` heals it).
    pub fn fail(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    /// From now on a conversation's append fails as a timed-out one would
    /// (it may or may not have landed: here it did not).
    pub fn fail_appends(&self, failing: bool) {
        self.failing_appends.store(failing, Ordering::SeqCst);
    }

    /// A person's reply in a conversation (contract 18), as the desk's
    /// append makes it: it ends what waited for the customer's yes.
    #[cfg(test)]
    pub fn person_replies(&self, conversation: &str, text: &str, now_ms: u64) {
        let mut books = self.books.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(stored) = books.conversations.get_mut(conversation) {
            stored.add_person(
                &PersonNote::reply(crate::conversation::person::Person::named("Lee"), text),
                now_ms,
            );
        }
    }

    /// Every refund record, oldest first.
    pub fn records(&self) -> Vec<RefundRecord> {
        let books = self.books.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut records: Vec<RefundRecord> = books.refunds.values().map(|(r, _)| r.clone()).collect();
        records.sort_by_key(|r| r.created_at_ms);
        records
    }

    /// The books, or the failure an unreachable ledger gives.
    fn books(&self) -> Result<std::sync::MutexGuard<'_, Books>, LedgerError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(LedgerError::Unavailable("the memory ledger is failing".into()));
        }
        Ok(self.books.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }
}

fn new_record(
    request: &RefundRequest,
    decision: DecidedBy,
    state: RefundState,
    reasons: &[Reason],
    now_ms: u64,
) -> RefundRecord {
    RefundRecord {
        record_id: request.scope().record_id(),
        state,
        user_id: request.scope().user_id().to_owned(),
        day_owner: request.attempt.day_owner.clone(),
        order_id: request.order_id.clone(),
        amount: request.amount,
        day: utc_day(now_ms),
        created_at: rfc3339(now_ms),
        created_at_ms: now_ms,
        request_id: request.request_id().to_owned(),
        idempotency_key: request.scope().idempotency_key().map(str::to_owned),
        decision,
        reasons: reasons.iter().map(|r| r.as_str().to_owned()).collect(),
        customer_message: (state == RefundState::AwaitingApproval).then(|| request.message.text().to_owned()),
        executing_since_ms: (state == RefundState::Executing).then_some(now_ms),
        conversation_id: request.attempt.conversation.clone(),
        order: request.order.snapshot().cloned(),
        router: request.routed.labels.clone(),
        ..RefundRecord::default()
    }
}

fn prior(record: &RefundRecord) -> Result<PriorRefund, LedgerError> {
    let state = record.state;
    Ok(PriorRefund {
        state,
        order_id: record.order_id.clone(),
        amount: record.amount,
        receipt: record
            .refund_id
            .clone()
            .filter(|_| state == RefundState::Executed)
            .map(|refund_id| Receipt {
                refund_id,
                status: record.receipt_status.clone().unwrap_or_default(),
                amount_cents: record.amount,
            }),
        resolution: record.resolution.clone(),
    })
}

/// What writing a scope's record finds already there.
enum Found {
    Nothing,
    /// This writer's own: a retried write that had landed.
    Own,
    Another(PriorRefund),
}

impl Books {
    /// What a claim of `lease`'s key finds that stops it writing: its own
    /// claim (landed already), or another's live record.
    fn live_key(&self, lease: &RequestLease, now_ms: u64) -> Option<KeyClaim> {
        match self.requests.get(&lease.scope.id()) {
            Some(existing) if existing.writer == lease.writer.as_str() => Some(KeyClaim::Claimed),
            Some(existing) if existing.expires_at_s >= now_ms / 1000 => Some(KeyClaim::Existing(existing.clone())),
            _ => None,
        }
    }

    fn claim_key(&mut self, lease: &RequestLease) {
        self.requests.insert(
            lease.scope.id(),
            StoredRequest {
                body_sha256: lease.body_sha256.clone(),
                writer: lease.writer.as_str().to_owned(),
                lease_until_ms: lease.lease_until_ms,
                expires_at_s: lease.expires_at_s,
                conversation_id: lease.conversation_id.clone(),
                released: false,
                response: None,
            },
        );
    }

    fn found(&self, request: &RefundRequest) -> Result<Found, LedgerError> {
        Ok(match self.refunds.get(&request.scope().record_id()) {
            None => Found::Nothing,
            Some((_, writer)) if *writer == request.writer().as_str() => Found::Own,
            Some((existing, _)) => Found::Another(prior(existing)?),
        })
    }

    fn order_refunded_recently(&self, order_id: &str, limits: &Limits, now_ms: u64) -> bool {
        let order = self.orders.get(&order_key(order_id));
        limits.order_refunded_recently(
            order.is_some_and(|(live, _)| !live.is_empty()),
            order.map(|(_, at)| *at),
            now_ms,
        )
    }

    fn history(&self, request: &RefundRequest, limits: &Limits, now_ms: u64) -> History {
        History {
            order_refunded_recently: self.order_refunded_recently(&request.order_id, limits, now_ms),
            automatic_today: AmountCents::new(
                self.days
                    .get(&(request.attempt.day_owner().to_owned(), utc_day(now_ms)))
                    .map_or(0, |counted| counted.values().sum()),
            ),
        }
    }

    fn guard_order(&mut self, order_id: &str, record_id: &str, now_ms: u64) {
        let (live, at) = self.orders.entry(order_key(order_id)).or_default();
        live.insert(record_id.to_owned());
        *at = now_ms;
        *self.order_versions.entry(order_key(order_id)).or_default() += 1;
    }

    fn order_version(&self, order_id: &str) -> u64 {
        self.order_versions
            .get(&order_key(order_id))
            .copied()
            .unwrap_or_default()
    }

    /// Takes a refund that moved no money out of the guards that still count it.
    fn release(&mut self, record: &RefundRecord) {
        if let Some((live, _)) = self.orders.get_mut(&order_key(&record.order_id)) {
            live.remove(&record.record_id);
        }
        if let CountsFor::Rules2And3 { day } = record.counts_for()
            && let Some(counted) = self
                .days
                .get_mut(&(record.day_owner.clone().unwrap_or_else(|| record.user_id.clone()), day))
        {
            counted.remove(&record.record_id);
        }
    }
}

impl RefundLedger for MemoryLedger {
    async fn record_automatic(
        &self,
        request: &RefundRequest,
        limits: &Limits,
        now_ms: u64,
    ) -> Result<AutomaticWrite, LedgerError> {
        let mut books = self.books()?;
        let record_id = request.scope().record_id();
        match books.found(request)? {
            Found::Nothing => {}
            Found::Own => return Ok(AutomaticWrite::Recorded),
            Found::Another(prior) => return Ok(AutomaticWrite::Existing(prior)),
        }
        let history = books.history(request, limits, now_ms);
        let within_day = limits
            .daily_headroom(request.amount)
            .is_some_and(|headroom| history.automatic_today <= headroom);
        if history.order_refunded_recently || !within_day {
            return Ok(AutomaticWrite::Refused(history));
        }
        let record = new_record(request, DecidedBy::Rules, RefundState::Executing, &[], now_ms);
        books.guard_order(&request.order_id, &record_id, now_ms);
        books
            .days
            .entry((request.attempt.day_owner().to_owned(), utc_day(now_ms)))
            .or_default()
            .insert(record_id.clone(), request.amount.cents());
        books
            .refunds
            .insert(record_id, (record, request.writer().as_str().to_owned()));
        Ok(AutomaticWrite::Recorded)
    }

    async fn record_for_approval(
        &self,
        request: &RefundRequest,
        reasons: &[Reason],
        _limits: &Limits,
        now_ms: u64,
    ) -> Result<ApprovalWrite, LedgerError> {
        let mut books = self.books()?;
        let record_id = request.scope().record_id();
        match books.found(request)? {
            Found::Nothing => {}
            Found::Own => return Ok(ApprovalWrite::Recorded),
            Found::Another(prior) => return Ok(ApprovalWrite::Existing(prior)),
        }
        let record = new_record(
            request,
            DecidedBy::Approval,
            RefundState::AwaitingApproval,
            reasons,
            now_ms,
        );
        books.guard_order(&request.order_id, &record_id, now_ms);
        books
            .refunds
            .insert(record_id, (record, request.writer().as_str().to_owned()));
        Ok(ApprovalWrite::Recorded)
    }

    async fn history(&self, request: &RefundRequest, limits: &Limits, now_ms: u64) -> Result<History, LedgerError> {
        Ok(self.books()?.history(request, limits, now_ms))
    }

    async fn order_refunded_recently(&self, order_id: &str, limits: &Limits, now_ms: u64) -> Result<bool, LedgerError> {
        Ok(self.books()?.order_refunded_recently(order_id, limits, now_ms))
    }

    async fn record_outcome(
        &self,
        request: &RefundRequest,
        outcome: &PaymentOutcome,
        _counts_for: &CountsFor,
        now_ms: u64,
    ) -> Result<(), LedgerError> {
        let state = outcome.state();
        let mut books = self.books()?;
        let record_id = request.scope().record_id();
        let Some((record, writer)) = books.refunds.get_mut(&record_id) else {
            return Err(LedgerError::Conflict("no refund record".into()));
        };
        if *writer != request.writer().as_str() || record.state != RefundState::Executing || record.resolution.is_some()
        {
            return Err(LedgerError::Conflict(format!("refund record is {}", record.state)));
        }
        record.state = state;
        record.updated_at = Some(rfc3339(now_ms));
        match outcome {
            PaymentOutcome::Executed(receipt) => {
                record.refund_id = Some(receipt.refund_id.clone());
                record.receipt_status = Some(receipt.status.clone());
            }
            PaymentOutcome::Rejected { status, detail } => {
                record.payments_status = Some(u64::from(*status));
                record.payments_detail = Some(detail.clone());
            }
            PaymentOutcome::Unknown(error) => record.failure = Some(error.to_string()),
        }
        if state == RefundState::Rejected {
            let record = record.clone();
            books.release(&record);
        }
        Ok(())
    }
}

impl RequestLedger for MemoryLedger {
    async fn claim_request(&self, lease: &RequestLease, now_ms: u64) -> Result<KeyClaim, LedgerError> {
        let mut books = self.books()?;
        if let Some(existing) = books.live_key(lease, now_ms) {
            return Ok(existing);
        }
        books.claim_key(lease);
        Ok(KeyClaim::Claimed)
    }

    async fn take_over_request(
        &self,
        lease: &RequestLease,
        previous_writer: &str,
        now_ms: u64,
    ) -> Result<TakeOver, LedgerError> {
        let mut books = self.books()?;
        let Some(existing) = books.requests.get_mut(&lease.scope.id()) else {
            return Err(LedgerError::Conflict("no request record".into()));
        };
        if existing.writer == lease.writer.as_str() {
            return Ok(TakeOver::Won);
        }
        let lease_ended = existing.lease_until_ms < now_ms || existing.released;
        if existing.writer != previous_writer || existing.response.is_some() || !lease_ended {
            return Ok(TakeOver::Lost {
                lease_until_ms: existing.lease_until_ms,
            });
        }
        existing.writer = lease.writer.as_str().to_owned();
        existing.lease_until_ms = lease.lease_until_ms;
        existing.released = false;
        Ok(TakeOver::Won)
    }

    async fn complete_request(
        &self,
        lease: &RequestLease,
        response: &StoredResponse,
        _now_ms: u64,
    ) -> Result<(), LedgerError> {
        let mut books = self.books()?;
        match books.requests.get_mut(&lease.scope.id()) {
            Some(existing) if existing.writer == lease.writer.as_str() => {
                existing.response.get_or_insert_with(|| response.clone());
                Ok(())
            }
            _ => Err(LedgerError::Conflict("the key is held by another request".into())),
        }
    }

    async fn release_request(&self, lease: &RequestLease) -> Result<(), LedgerError> {
        let mut books = self.books()?;
        let id = lease.scope.id();
        match books.requests.get_mut(&id) {
            Some(existing) if existing.writer == lease.writer.as_str() && existing.response.is_none() => {
                existing.released = true;
                existing.lease_until_ms = 0;
                Ok(())
            }
            _ => Err(LedgerError::Conflict("the key is held by another request".into())),
        }
    }

    async fn refund_exists(&self, scope: &RefundScope) -> Result<bool, LedgerError> {
        Ok(self.books()?.refunds.contains_key(&scope.record_id()))
    }
}

impl StaffLedger for MemoryLedger {
    async fn claim_approval(&self, claim: &Claim<'_>, seen: OrderInFlight) -> Result<StaffDecision, LedgerError> {
        let Claim {
            record_id,
            by,
            writer,
            now_ms,
            ..
        } = *claim;
        let mut books = self.books()?;
        let Some((record, _)) = books.refunds.get(record_id) else {
            return Ok(StaffDecision::NotFound);
        };
        if record.state != RefundState::AwaitingApproval {
            return Ok(StaffDecision::Refused(record.clone()));
        }
        if books.order_version(&record.order_id) != seen.version {
            return Ok(StaffDecision::OrderMoved);
        }
        let Some((record, held_by)) = books.refunds.get_mut(record_id) else {
            return Ok(StaffDecision::NotFound);
        };
        let before = record.clone();
        record.state = RefundState::Executing;
        record.decided_by = Some(by.name.to_owned());
        record.decided_by_sub = by.sub.map(str::to_owned);
        record.decided_at = Some(rfc3339(now_ms));
        record.executing_since_ms = Some(now_ms);
        *held_by = writer.as_str().to_owned();
        books.approval_steps.insert(record_id.to_owned(), APPROVAL_CLAIMED);
        books.guard_order(&before.order_id, record_id, now_ms);
        // The approval's note, in the same step as the decision (contract 18).
        if let Some(conversation) = before
            .conversation_id
            .as_deref()
            .and_then(|id| books.conversations.get_mut(id))
            .filter(|conversation| conversation.customer == before.user_id)
        {
            let currency = before.order.as_ref().map_or("", |order| order.currency.as_str());
            let note = PersonNote::of_decision(
                Decision::Approved,
                by,
                record_id,
                before.amount,
                currency,
                &before.order_id,
            );
            conversation.add_person(&note, now_ms);
        }
        Ok(StaffDecision::Done(before))
    }

    async fn claim_reissue(&self, claim: &Claim<'_>, seen: OrderInFlight) -> Result<StaffDecision, LedgerError> {
        let Claim {
            record_id,
            by,
            writer,
            now_ms,
            ..
        } = *claim;
        let mut books = self.books()?;
        let version = match books.refunds.get(record_id) {
            Some((original, _)) => books.order_version(&original.order_id),
            None => return Ok(StaffDecision::NotFound),
        };
        let Some((original, _)) = books.refunds.get_mut(record_id) else {
            return Ok(StaffDecision::NotFound);
        };
        let reissuable = original.decision == DecidedBy::Approval
            && original.decided_by.is_some()
            && original.resolution == Some(Resolution::NotExecuted)
            && original.reissued_as.is_none();
        if !reissuable {
            return Ok(StaffDecision::Refused(original.clone()));
        }
        if version != seen.version {
            return Ok(StaffDecision::OrderMoved);
        }
        let scope = RefundScope::for_reissue(&original.user_id, &original.record_id);
        let mut reissue = original.request(writer);
        reissue.attempt.scope = scope;
        let mut record = new_record(&reissue, DecidedBy::Approval, RefundState::Executing, &[], now_ms);
        record.reasons = original.reasons.clone();
        record.decided_by = Some(by.name.to_owned());
        record.decided_by_sub = by.sub.map(str::to_owned);
        record.decided_at = Some(rfc3339(now_ms));
        record.reissue_of = Some(original.record_id.clone());
        original.reissued_as = Some(record.record_id.clone());
        let order_id = record.order_id.clone();
        books.guard_order(&order_id, &record.record_id, now_ms);
        books.approval_steps.insert(record.record_id.clone(), APPROVAL_CLAIMED);
        books
            .refunds
            .insert(record.record_id.clone(), (record.clone(), writer.as_str().to_owned()));
        Ok(StaffDecision::Done(record))
    }

    async fn record_and_writer(&self, record_id: &str) -> Result<Option<(RefundRecord, String)>, LedgerError> {
        Ok(self.books()?.refunds.get(record_id).cloned())
    }

    async fn in_flight(&self, order_id: &str, except: &str) -> Result<OrderInFlight, LedgerError> {
        let books = self.books()?;
        let key = order_key(order_id);
        let cents = books
            .refunds
            .values()
            .filter(|(record, _)| record.record_id != except && order_key(&record.order_id) == key)
            // A person's resolution says what payments did: no longer in flight.
            .filter(|(record, _)| {
                matches!(record.state, RefundState::Executing | RefundState::Unknown) && record.resolution.is_none()
            })
            .map(|(record, _)| record.amount.cents())
            .sum();
        Ok(OrderInFlight {
            amount: AmountCents::new(cents),
            version: books.order_version(order_id),
        })
    }

    async fn start_paying(&self, record_id: &str, writer: &WriterMark) -> Result<bool, LedgerError> {
        let mut books = self.books()?;
        let held = books
            .refunds
            .get(record_id)
            .is_some_and(|(record, held_by)| record.state == RefundState::Executing && held_by == writer.as_str());
        if !held || books.approval_steps.get(record_id) != Some(&APPROVAL_CLAIMED) {
            return Ok(false);
        }
        books.approval_steps.insert(record_id.to_owned(), APPROVAL_PAYING);
        Ok(true)
    }
}
