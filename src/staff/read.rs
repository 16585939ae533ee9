//! What the support team reads (contract 24): the queue of what waits for
//! a person, one refund with its order read afresh, and a conversation in
//! words. Plain data for the desk's JSON; every text a customer or the
//! model wrote is carried as text, for the page to show as text.

use crate::ledger::dynamo::conversations::HandoffLine;
use serde::Serialize;
use serde_json::Value;

use crate::chat::Message;
use crate::clock::now_ms;
use crate::config::FUNCTION_TIMEOUT;
use crate::ledger::dynamo::conversations::{StoredExchange, StoredHandoff, StoredRating, Transcript};
use crate::ledger::dynamo::holders::Holder;
use crate::ledger::dynamo::internal_notes::InternalNote;
use crate::ledger::{LedgerError, RefundRecord};
use crate::orders::{OrderLookup, OrderSystem};
use crate::refund::RefundState;

use super::{Staff, words};

/// One thing that waits for a person.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueItem {
    pub id: String,
    /// `approval`, `handoff` or `unknown_outcome`.
    pub kind: &'static str,
    /// Since when it waits (RFC 3339): a refund's recording, a handoff's
    /// moment (the customer's later messages never move it).
    pub since: String,
    pub waited_secs: u64,
    pub customer: String,
    /// `customer`, `guest` or `visitor` (contract 27), from the user id.
    pub who: &'static str,
    pub conversation_id: Option<String>,
    pub order_id: Option<String>,
    pub amount: Option<String>,
    pub reasons: Vec<String>,
    /// The reasons as a person says them (contract 36): what the desk shows.
    pub reasons_in_words: Vec<String>,
    /// The router's labels (contract 21), as recorded.
    pub router: Option<String>,
    /// The same, in words: "refund (low risk, 90% sure)".
    pub router_in_words: Option<String>,
    /// The two first lines of the model's summary (a handoff's), or of the order's facts.
    pub summary: Vec<String>,
    /// A handoff's: when the customer last wrote (contract 30).
    pub customer_wrote_at: Option<String>,
    /// A handoff's: who on the team has it, and since when (contract 30).
    pub held_by: Option<Holder>,
    /// A handoff's: when a person owes the first reply (contract 32), and
    /// when one came.
    pub due_at: Option<String>,
    pub first_reply_at: Option<String>,
    /// Due, and nobody has replied.
    pub overdue: bool,
    /// A handoff's: the start of the customer's last message (contract 36).
    pub last_words: Option<String>,
}

/// What waits for a person, oldest first, each kind in its own list; the
/// handoffs in pages, visitors' apart (contract 30).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Queue {
    pub approvals: Vec<QueueItem>,
    pub handoffs: Vec<QueueItem>,
    pub visitor_handoffs: Vec<QueueItem>,
    /// How many more handoffs of each line wait past their page.
    pub more: More,
    pub unknown_outcomes: Vec<QueueItem>,
    /// How long the oldest item of any kind has waited (0: nothing waits).
    pub oldest_wait_secs: u64,
}

impl Queue {
    /// The queue as the person under `key` reads it: which holds are theirs.
    pub fn seen_by(mut self, key: &str) -> Queue {
        for item in self
            .approvals
            .iter_mut()
            .chain(&mut self.handoffs)
            .chain(&mut self.visitor_handoffs)
            .chain(&mut self.unknown_outcomes)
        {
            item.held_by = item.held_by.take().map(|holder| holder.as_seen_by(key));
        }
        self
    }
}

impl ConversationView {
    /// The conversation as the person under `key` reads it.
    pub fn seen_by(mut self, key: &str) -> ConversationView {
        self.held_by = self.held_by.take().map(|holder| holder.as_seen_by(key));
        self
    }
}

/// How many more wait past a page (up to
/// [`crate::ledger::dynamo::conversations::MORE_COUNTED`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct More {
    pub handoffs: u64,
    pub visitor_handoffs: u64,
}

fn waited(since_ms: u64, now: u64) -> u64 {
    now.saturating_sub(since_ms) / 1000
}

/// What kind of person a user id names (contract 27): a visitor's is the
/// hash of their token, a guest's the guest pool's.
pub fn kind_of_person(user_id: &str) -> &'static str {
    if crate::visitor::is_visitor(user_id) {
        "visitor"
    } else if crate::guest::is_guest(user_id) {
        "guest"
    } else {
        "customer"
    }
}

fn record_item(
    record: &RefundRecord,
    kind: &'static str,
    now: u64,
    limits: &crate::refund::policy::Limits,
) -> QueueItem {
    let currency = record.order.as_ref().map_or("", |order| order.currency.as_str());
    QueueItem {
        id: record.record_id.clone(),
        kind,
        since: record.created_at.clone(),
        waited_secs: waited(record.created_at_ms, now),
        customer: record.user_id.clone(),
        who: kind_of_person(&record.user_id),
        conversation_id: record.conversation_id.clone(),
        order_id: Some(record.order_id.clone()),
        amount: Some(record.amount.in_currency(currency)),
        reasons: record.reasons.clone(),
        reasons_in_words: record
            .reasons
            .iter()
            .map(|reason| words::refund_reason(reason, limits, currency))
            .collect(),
        router: record.router.clone(),
        router_in_words: record.router.as_deref().map(words::router_labels),
        summary: vec![record.order_facts()],
        customer_wrote_at: None,
        held_by: None,
        due_at: None,
        first_reply_at: None,
        overdue: false,
        last_words: None,
    }
}

/// When a handoff is due (epoch ms): its recorded `due_at`, else (made
/// before it was recorded, or the hours held none) its own moment. The
/// queue's order, the terminal's and what is overdue all read it.
pub fn due_ms(handoff: &StoredHandoff, now: u64) -> u64 {
    handoff
        .due_at
        .as_deref()
        .or(Some(handoff.at.as_str()))
        .and_then(crate::clock::parse_utc)
        .unwrap_or(now)
}

/// Due, and no person has replied (contract 32).
pub fn overdue(handoff: &StoredHandoff, now: u64) -> bool {
    handoff.first_reply_at.is_none() && handoff.due_at.is_some() && due_ms(handoff, now) <= now
}

fn handoff_item(handoff: &StoredHandoff, now: u64) -> QueueItem {
    let since_ms = crate::clock::parse_utc(&handoff.at).unwrap_or(now);
    QueueItem {
        id: handoff.id.clone(),
        kind: "handoff",
        since: handoff.at.clone(),
        waited_secs: waited(since_ms, now),
        customer: handoff.customer.clone(),
        who: kind_of_person(&handoff.customer),
        conversation_id: Some(handoff.conversation_id.clone()),
        order_id: None,
        amount: None,
        reasons: vec![handoff.reason.clone()],
        reasons_in_words: vec![words::handoff_reason(&handoff.reason)],
        router: handoff.router.clone(),
        router_in_words: handoff.router.as_deref().map(words::router_labels),
        summary: handoff
            .summary
            .as_deref()
            .map(|summary| {
                summary
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .take(2)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        customer_wrote_at: handoff.customer_wrote_at.clone(),
        held_by: handoff.holder.clone(),
        due_at: handoff.due_at.clone(),
        first_reply_at: handoff.first_reply_at.clone(),
        overdue: overdue(handoff, now),
        last_words: handoff.customer_last_words.clone(),
    }
}

/// How many open handoffs are overdue (the sweep's `HandoffsOverdue`),
/// counted over the oldest [`OVERDUE_READ`] of each line: the index's order
/// by the handoff's moment is the order by due time, the due time being the
/// same office minutes after each.
pub async fn overdue_handoffs(
    conversations: &crate::ledger::dynamo::conversations::DynamoConversations,
    now: u64,
) -> Result<u64, LedgerError> {
    let mut overdue_count = 0;
    for line in [HandoffLine::People, HandoffLine::Visitors] {
        let page = conversations.open_handoffs_page(line, OVERDUE_READ).await?;
        overdue_count += page.handoffs.iter().filter(|handoff| overdue(handoff, now)).count() as u64;
    }
    Ok(overdue_count)
}

/// The most open handoffs of a line the sweep reads for what is overdue:
/// one bounded read; a queue that long is an alarm already.
pub const OVERDUE_READ: usize = 200;

/// Refunds whose outcome is not known: `unknown`, or `executing` for
/// longer than the function's timeout (what `refund-chat-admin unknown` lists).
pub async fn unknown_outcomes(staff: &Staff) -> Result<Vec<RefundRecord>, LedgerError> {
    let stale_before = now_ms().saturating_sub(FUNCTION_TIMEOUT.as_millis() as u64);
    let mut records = staff.ledger.waiting(RefundState::Unknown).await?;
    records.extend(
        staff
            .ledger
            .waiting(RefundState::Executing)
            .await?
            .into_iter()
            .filter(|r| r.executing_since_ms.unwrap_or(r.created_at_ms) < stale_before),
    );
    records.sort_by_key(|r| r.created_at_ms);
    Ok(records)
}

/// How long the oldest of what waits for a person has waited, in seconds
/// (refunds awaiting approval or of unknown outcome, open handoffs): the
/// sweep's `StaffQueueOldestWait`, watched by `StaffQueueAgeAlarm` whether
/// anyone has the desk open or not.
pub async fn oldest_wait_secs(
    ledger: &crate::ledger::dynamo::DynamoLedger,
    conversations: Option<&crate::ledger::dynamo::conversations::DynamoConversations>,
    now: u64,
) -> Result<u64, LedgerError> {
    let mut oldest = now;
    for state in [RefundState::AwaitingApproval, RefundState::Unknown] {
        if let Some(first) = ledger.waiting(state).await?.first() {
            oldest = oldest.min(first.created_at_ms);
        }
    }
    if let Some(conversations) = conversations {
        // One item of each line: the read is the same whatever the number open.
        for line in [HandoffLine::People, HandoffLine::Visitors] {
            if let Some(at) = conversations.oldest_open_handoff(line).await? {
                oldest = oldest.min(crate::clock::parse_utc(&at).unwrap_or(now));
            }
        }
    }
    Ok(waited(oldest, now))
}

/// The queue, oldest first.
pub async fn queue(staff: &Staff) -> Result<Queue, LedgerError> {
    let now = now_ms();
    let approvals: Vec<QueueItem> = staff
        .ledger
        .waiting(RefundState::AwaitingApproval)
        .await?
        .iter()
        .map(|record| record_item(record, "approval", now, &staff.limits))
        .collect();
    // A page of each line, oldest first (the index's order: the moment the
    // customer first asked, to the millisecond).
    let people = staff
        .conversations
        .open_handoffs_page(HandoffLine::People, staff.queue_page)
        .await?;
    let visitors = staff
        .conversations
        .open_handoffs_page(HandoffLine::Visitors, staff.queue_page)
        .await?;
    // What is due first comes first (contract 32); the same hours make it
    // the index's order but for handoffs of before a change of the settings.
    let items = |page: &crate::ledger::dynamo::conversations::HandoffPage| -> Vec<QueueItem> {
        let mut handoffs: Vec<&StoredHandoff> = page.handoffs.iter().collect();
        handoffs.sort_by_key(|handoff| due_ms(handoff, now));
        handoffs.into_iter().map(|handoff| handoff_item(handoff, now)).collect()
    };
    let (handoffs, visitor_handoffs) = (items(&people), items(&visitors));
    let unknown: Vec<QueueItem> = unknown_outcomes(staff)
        .await?
        .iter()
        .map(|record| record_item(record, "unknown_outcome", now, &staff.limits))
        .collect();
    let oldest_wait_secs = approvals
        .iter()
        .chain(&handoffs)
        .chain(&visitor_handoffs)
        .chain(&unknown)
        .map(|item| item.waited_secs)
        .max()
        .unwrap_or(0);
    Ok(Queue {
        approvals,
        handoffs,
        visitor_handoffs,
        more: More {
            handoffs: people.more,
            visitor_handoffs: visitors.more,
        },
        unknown_outcomes: unknown,
        oldest_wait_secs,
    })
}

/// The order as an approval would read it now (contract 16), its address held back.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "read", rename_all = "snake_case")]
pub enum OrderNow {
    Found {
        status: String,
        placed_at: String,
        delivered_at: Option<String>,
        paid: String,
        refunded: String,
        currency: String,
        items: Vec<String>,
    },
    NotFound,
    Unavailable {
        why: String,
    },
}

/// A help-centre passage the turn's searches showed the model (contract 17).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Passage {
    pub article_id: String,
    pub version: String,
    pub title: String,
    pub url: String,
    pub passage: String,
}

/// One refund, as an approver decides it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RefundView {
    /// Every field, as `refund-chat-admin show` prints it (empty ones left out).
    pub record: serde_json::Map<String, Value>,
    pub state: String,
    /// The state, the reasons and the router's labels in words (contract 36).
    pub state_in_words: &'static str,
    pub reasons_in_words: Vec<String>,
    pub router_in_words: Option<String>,
    pub amount: String,
    pub order_now: OrderNow,
    pub cited: Vec<Passage>,
    pub router: Option<String>,
    /// The last intent a person gave for its conversation.
    pub verdict: Option<String>,
    pub conversation_id: Option<String>,
}

fn money(cents: u64) -> String {
    crate::refund::money::AmountCents::new(cents).to_string()
}

/// The order read afresh as the record's customer.
pub async fn order_now(staff: &Staff, order_id: &str, customer: &str) -> OrderNow {
    match staff.orders.order(order_id, &customer.into()).await {
        OrderLookup::Found(order) => OrderNow::Found {
            status: order.status.as_str().to_owned(),
            placed_at: order.placed_at.clone(),
            delivered_at: order.delivered_at.clone(),
            paid: money(order.paid_cents),
            refunded: money(order.refunded_cents),
            currency: order.currency.clone(),
            items: order
                .items
                .iter()
                .map(|item| format!("{} x {}", item.quantity, item.name))
                .collect(),
        },
        OrderLookup::NotFound => OrderNow::NotFound,
        OrderLookup::Unavailable(error) => OrderNow::Unavailable { why: error.to_string() },
    }
}

/// The passages the searches of an exchange showed the model.
pub fn passages(stored: &StoredExchange) -> Vec<Passage> {
    let searches: Vec<&str> = stored
        .exchange
        .messages
        .iter()
        .flat_map(|message| match message {
            Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            _ => &[],
        })
        .filter(|call| call.name == crate::help::tool::TOOL_NAME)
        .map(|call| call.id.as_str())
        .collect();
    let mut found: Vec<Passage> = Vec::new();
    for message in &stored.exchange.messages {
        let Message::Tool { tool_call_id, content } = message else {
            continue;
        };
        if !searches.contains(&tool_call_id.as_str()) {
            continue;
        }
        let Ok(value) = serde_json::from_str::<Value>(content) else {
            continue;
        };
        for result in value["results"].as_array().into_iter().flatten() {
            let field = |name: &str| result[name].as_str().unwrap_or_default().to_owned();
            let passage = Passage {
                article_id: field("article_id"),
                version: field("version"),
                title: field("title"),
                url: field("url"),
                passage: field("passage"),
            };
            if !found.contains(&passage) {
                found.push(passage);
            }
        }
    }
    found
}

/// One refund record with what an approver needs beside it; none when unknown.
pub async fn refund(staff: &Staff, id: &str) -> Result<Option<RefundView>, LedgerError> {
    let Some(record) = staff.ledger.record(id).await? else {
        return Ok(None);
    };
    let fields: serde_json::Map<String, Value> = RefundRecord::COLUMNS
        .iter()
        .zip(record.values())
        .filter(|(_, value)| !value.is_empty())
        .map(|(column, value)| ((*column).to_owned(), Value::String(value)))
        .collect();
    let (cited, verdict) = match &record.conversation_id {
        Some(conversation) => {
            let transcript = staff.conversations.transcript(conversation, now_ms()).await?;
            let cited = transcript
                .as_ref()
                .and_then(|t| t.exchanges.iter().find(|e| e.request_id == record.request_id))
                .map(passages)
                .unwrap_or_default();
            let verdict = transcript.and_then(|t| t.verdicts.last().map(|v| v.intent.clone()));
            (cited, verdict)
        }
        None => (Vec::new(), None),
    };
    let currency = record.order.as_ref().map_or("", |order| order.currency.as_str());
    Ok(Some(RefundView {
        record: fields,
        state: record.state.as_str().to_owned(),
        state_in_words: words::refund_state(record.state),
        reasons_in_words: record
            .reasons
            .iter()
            .map(|reason| words::refund_reason(reason, &staff.limits, currency))
            .collect(),
        router_in_words: record.router.as_deref().map(words::router_labels),
        amount: record.amount.in_currency(currency),
        order_now: order_now(staff, &record.order_id, &record.user_id).await,
        cited,
        router: record.router.clone(),
        verdict,
        conversation_id: record.conversation_id.clone(),
    }))
}

/// One line of a transcript: who wrote it, and what.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Line {
    /// `customer`, `agent`, `person`, `tool` (what code did for a tool call) or `model_summary`.
    pub who: &'static str,
    pub text: String,
    /// The person's name, for a person's line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// One exchange, in words.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExchangeView {
    pub seq: u64,
    pub at: String,
    pub request_id: String,
    pub status: u16,
    pub router: Option<String>,
    /// The router's labels in words (contract 36).
    pub router_in_words: Option<String>,
    /// `TRACE_URL_TEMPLATE` with the request id; none when unset or for a person's words.
    pub trace_url: Option<String>,
    pub lines: Vec<Line>,
    pub cited: Vec<Passage>,
}

/// The handoff, with the model's summary marked as the model's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HandoffView {
    pub id: String,
    pub reason: String,
    /// The reason and the router's labels in words (contract 36).
    pub reason_in_words: String,
    pub router_in_words: Option<String>,
    pub at: String,
    pub router: Option<String>,
    pub model_summary: Option<String>,
    pub closed_by: Option<String>,
    pub closed_at: Option<String>,
    /// When a person owes the first reply, when one came, and whether it is
    /// overdue (contract 32).
    pub due_at: Option<String>,
    pub first_reply_at: Option<String>,
    pub overdue: bool,
}

/// A refund record of the conversation, in a line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordLine {
    pub id: String,
    pub state: String,
    /// The state as a person says it (contract 36).
    pub state_in_words: &'static str,
    pub order_id: String,
    pub amount: String,
    pub order_url: Option<String>,
}

impl RecordLine {
    /// A record in a line, its state in words and its amount with the
    /// order's currency (contract 36).
    pub fn of(record: &RefundRecord, links: &Links) -> RecordLine {
        let currency = record.order.as_ref().map_or("", |order| order.currency.as_str());
        RecordLine {
            id: record.record_id.clone(),
            state: record.state.as_str().to_owned(),
            state_in_words: words::refund_state(record.state),
            order_id: record.order_id.clone(),
            amount: record.amount.in_currency(currency),
            order_url: links.order(&record.order_id),
        }
    }
}

/// A person's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerdictView {
    pub intent: String,
    pub by: String,
    pub at: String,
}

/// A whole conversation as the support team reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConversationView {
    pub id: String,
    pub customer: String,
    pub created_at: String,
    pub updated_at: String,
    pub handoff: Option<HandoffView>,
    pub exchanges: Vec<ExchangeView>,
    pub refunds: Vec<RecordLine>,
    pub verdicts: Vec<VerdictView>,
    /// Each order the conversation named, with its link (`ORDER_URL_TEMPLATE`).
    pub orders: Vec<OrderLink>,
    /// Who on the team has it (contract 30).
    pub held_by: Option<Holder>,
    /// The support team's internal notes, oldest first: never the customer's to read.
    pub internal_notes: Vec<InternalNote>,
    /// The customer's "Did this solve it?" (contract 30), their comment masked.
    pub rating: Option<StoredRating>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OrderLink {
    pub order_id: String,
    pub url: Option<String>,
}

/// The two link templates (contract 25).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Links {
    pub trace: Option<String>,
    pub order: Option<String>,
}

impl Links {
    fn fill(template: Option<&String>, name: &str, value: &str) -> Option<String> {
        let encoded = crate::http_client::percent_encoded(value);
        template.map(|template| template.replace(name, &encoded))
    }

    pub fn trace(&self, request_id: &str) -> Option<String> {
        Links::fill(self.trace.as_ref(), "{request_id}", request_id)
    }

    pub fn order(&self, order_id: &str) -> Option<String> {
        Links::fill(self.order.as_ref(), "{order_id}", order_id)
    }
}

/// A tool call and its result, in words: what code did, never the raw JSON.
fn tool_words(name: &str, arguments: &str, result: Option<&str>) -> String {
    let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    let result: Value = result.and_then(|r| serde_json::from_str(r).ok()).unwrap_or(Value::Null);
    let arg = |field: &str| {
        args[field]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| args[field].to_string())
    };
    let outcome = result["status"]
        .as_str()
        .or_else(|| result["error"].as_str())
        .map(str::to_owned);
    let detail = ["message", "detail", "error"]
        .iter()
        .find_map(|field| result[*field].as_str())
        .filter(|d| Some(*d) != outcome.as_deref());
    let said = match (outcome, detail) {
        (Some(outcome), Some(detail)) => format!(": {outcome} ({detail})"),
        (Some(outcome), None) => format!(": {outcome}"),
        (None, Some(detail)) => format!(": {detail}"),
        (None, None) => String::new(),
    };
    match name {
        "get_order" => format!("read order {}{said}", arg("order_id")),
        "issue_refund" => {
            let cents = args["amount_cents"].as_u64().map(money);
            let amount = cents.unwrap_or_else(|| arg("amount"));
            format!("refund check of {amount} on order {}{said}", arg("order_id"))
        }
        "hand_off_to_person" => format!("handed the conversation to a person{said}"),
        // Contract 26: the order and the address's reference, never the address.
        crate::orders::address::TOOL_NAME => {
            let reference = crate::orders::address::parse_arguments(arguments)
                .map(|parsed| format!(" to the {}", parsed.address.reference()))
                .unwrap_or_default();
            format!(
                "change of the delivery address of order {}{reference}{said}",
                arg("order_id")
            )
        }
        // Contract 28: what goes back and why; the model never had a label's URL.
        crate::orders::returns::TOOL_NAME => {
            let what = crate::orders::returns::parse_arguments(arguments)
                .map(|parsed| parsed.summary())
                .unwrap_or_else(|_| format!("return from order {}", arg("order_id")));
            let id = result["return_id"]
                .as_str()
                .map(|id| format!(", return {id}"))
                .unwrap_or_default();
            format!("{what}{said}{id}")
        }
        n if n == crate::help::tool::TOOL_NAME => {
            let shown = result["results"].as_array().map_or(0, Vec::len);
            format!("searched the help centre for \"{}\": {shown} passages", arg("query"))
        }
        other => format!("called {other}{said}"),
    }
}

fn exchange_view(stored: &StoredExchange, links: &Links) -> ExchangeView {
    let mut lines = Vec::new();
    if let Some(text) = stored.exchange.person_text() {
        lines.push(Line {
            who: "person",
            text: text.to_owned(),
            by: stored.by.clone(),
        });
    } else {
        let results: Vec<(&str, &str)> = stored
            .exchange
            .messages
            .iter()
            .filter_map(|message| match message {
                Message::Tool { tool_call_id, content } => Some((tool_call_id.as_str(), content.as_str())),
                _ => None,
            })
            .collect();
        for message in &stored.exchange.messages {
            match message {
                Message::User(text) => lines.push(Line {
                    who: "customer",
                    text: text.clone(),
                    by: None,
                }),
                Message::Assistant { content, tool_calls } => {
                    for call in tool_calls {
                        let result = results.iter().find(|(id, _)| *id == call.id).map(|(_, r)| *r);
                        lines.push(Line {
                            who: "tool",
                            text: tool_words(&call.name, &call.arguments, result),
                            by: None,
                        });
                    }
                    if let Some(text) = content.as_deref().filter(|t| !t.is_empty()) {
                        lines.push(Line {
                            who: "agent",
                            text: text.to_owned(),
                            by: None,
                        });
                    }
                }
                Message::System(_) | Message::Tool { .. } => {}
            }
        }
    }
    let person = stored.exchange.person_text().is_some();
    ExchangeView {
        seq: stored.seq,
        at: stored.created_at.clone(),
        request_id: stored.request_id.clone(),
        status: stored.status,
        router: stored.router.clone(),
        router_in_words: stored.router.as_deref().map(words::router_labels),
        trace_url: if person || stored.request_id.is_empty() {
            None
        } else {
            links.trace(&stored.request_id)
        },
        lines,
        cited: passages(stored),
    }
}

/// The orders a conversation named: its refund records' and its order reads'.
fn orders_named(transcript: &Transcript, records: &[RefundRecord]) -> Vec<String> {
    let mut orders: Vec<String> = records.iter().map(|r| r.order_id.clone()).collect();
    for stored in &transcript.exchanges {
        for message in &stored.exchange.messages {
            if let Message::Assistant { tool_calls, .. } = message {
                for call in tool_calls
                    .iter()
                    .filter(|c| c.name == "get_order" || c.name == "issue_refund")
                {
                    if let Some(id) = serde_json::from_str::<Value>(&call.arguments)
                        .ok()
                        .and_then(|args| args["order_id"].as_str().map(str::to_owned))
                    {
                        orders.push(id);
                    }
                }
            }
        }
    }
    orders.sort();
    orders.dedup();
    orders.retain(|id| !id.is_empty() && !crate::refund::tool::is_card_shaped(id));
    orders
}

/// The refund records a conversation's turns wrote (the facts are the ledger's).
pub async fn records_of(
    ledger: &crate::ledger::dynamo::DynamoLedger,
    transcript: &Transcript,
) -> Result<Vec<RefundRecord>, LedgerError> {
    let mut record_ids: Vec<&str> = transcript.refund_records.iter().map(String::as_str).collect();
    record_ids.extend(transcript.exchanges.iter().map(|e| e.refund_record.as_str()));
    record_ids.sort_unstable();
    record_ids.dedup();
    let mut records = Vec::new();
    for record_id in record_ids.into_iter().filter(|id| !id.is_empty()) {
        if let Some(record) = ledger.record(record_id).await? {
            records.push(record);
        }
    }
    Ok(records)
}

/// A conversation as the support team reads it; none when unknown or expired.
pub async fn conversation(staff: &Staff, id: &str, links: &Links) -> Result<Option<ConversationView>, LedgerError> {
    let Some(transcript) = staff.conversations.transcript(id, now_ms()).await? else {
        return Ok(None);
    };
    let records = records_of(&staff.ledger, &transcript).await?;
    let handoff = transcript.handoff.as_ref().map(|handoff| HandoffView {
        id: handoff.id.clone(),
        reason: handoff.reason.clone(),
        reason_in_words: words::handoff_reason(&handoff.reason),
        router_in_words: handoff.router.as_deref().map(words::router_labels),
        at: handoff.at.clone(),
        router: handoff.router.clone(),
        model_summary: handoff.summary.clone(),
        closed_by: handoff.closed.as_ref().map(|(by, _)| by.clone()),
        closed_at: handoff.closed.as_ref().map(|(_, at)| at.clone()),
        due_at: handoff.due_at.clone(),
        first_reply_at: handoff.first_reply_at.clone(),
        overdue: handoff.closed.is_none() && overdue(handoff, now_ms()),
    });
    Ok(Some(ConversationView {
        id: transcript.id.clone(),
        customer: transcript.customer.clone(),
        created_at: transcript.created_at.clone(),
        updated_at: transcript.updated_at.clone(),
        handoff,
        exchanges: transcript.exchanges.iter().map(|e| exchange_view(e, links)).collect(),
        refunds: records.iter().map(|record| RecordLine::of(record, links)).collect(),
        verdicts: transcript
            .verdicts
            .iter()
            .map(|v| VerdictView {
                intent: v.intent.clone(),
                by: v.by.clone(),
                at: v.at.clone(),
            })
            .collect(),
        orders: orders_named(&transcript, &records)
            .into_iter()
            .map(|order_id| OrderLink {
                url: links.order(&order_id),
                order_id,
            })
            .collect(),
        held_by: transcript.holder.clone(),
        internal_notes: transcript.internal_notes.clone(),
        rating: transcript.rating.clone(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_call_reads_as_words() {
        assert_eq!(
            tool_words("get_order", r#"{"order_id":"A-1001"}"#, Some(r#"{"status":"found"}"#)),
            "read order A-1001: found"
        );
        assert_eq!(
            tool_words(
                "issue_refund",
                r#"{"order_id":"A-1001","amount_cents":12000}"#,
                Some(r#"{"status":"awaiting_approval","message":"a person decides"}"#)
            ),
            "refund check of 120.00 on order A-1001: awaiting_approval (a person decides)"
        );
    }

    #[test]
    fn a_return_reads_as_words_with_its_id() {
        let arguments = r#"{"order_id":"A-1002","items":[{"name":"Blue mug","quantity":1}],"reason":"changed_mind"}"#;
        let said = tool_words(
            "start_return",
            arguments,
            Some(r#"{"status":"started","summary":"s","return_id":"ret_000001"}"#),
        );
        assert_eq!(
            said,
            "return from order A-1002: 1 × Blue mug, reason: changed my mind: started, return ret_000001"
        );
    }

    #[test]
    fn a_change_of_address_reads_as_words_without_the_address() {
        let arguments = r#"{"order_id":"A-1004","name":"Ada Lovelace","line1":"12 Rue Byron","line2":"","postcode":"75002","city":"Paris","country":"FR"}"#;
        let said = tool_words(
            "change_delivery_address",
            arguments,
            Some(r#"{"status":"changed","summary":"s"}"#),
        );
        assert_eq!(
            said,
            "change of the delivery address of order A-1004 to the address ending in 002: changed"
        );
    }

    #[test]
    fn links_fill_their_templates_encoded() {
        let links = Links {
            trace: Some("https://logs.example/#q={request_id}".into()),
            order: Some("https://shop.example/orders/{order_id}".into()),
        };
        assert_eq!(links.trace("r-1").as_deref(), Some("https://logs.example/#q=r-1"));
        assert_eq!(
            links.order("A 1/2").as_deref(),
            Some("https://shop.example/orders/A%201%2F2")
        );
        // RFC 3986's unreserved characters stay as they are.
        assert_eq!(
            links.order("ORD-1001.a_b~c").as_deref(),
            Some("https://shop.example/orders/ORD-1001.a_b~c")
        );
        assert_eq!(Links::default().order("A-1"), None);
    }
}
