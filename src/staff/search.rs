//! Finding things (contract 30): a conversation, a handoff, a refund
//! record, an order or a customer by its exact id, closed conversations
//! included, and the customer panel beside an open conversation. Every
//! read goes through a key or an index (a conversation's header, a
//! record's item, an order's postings, the `by_customer` index): the desk's
//! role scans nothing.

use serde::Serialize;

use crate::clock::now_ms;
use crate::ledger::dynamo::conversations::ConversationLine;
use crate::ledger::{LedgerError, RefundRecord};
use crate::orders::OrderSystem;
use crate::refund::RefundState;
use crate::refund::money::AmountCents;

use super::Staff;
use super::read::{Links, RecordLine, kind_of_person};

/// The longest query read: an id, never free text.
pub const MAX_QUERY_CHARS: usize = 200;
/// The most conversations one search or panel reads, newest first.
pub const MAX_CONVERSATIONS: usize = 50;
/// The customer panel's other conversations.
pub const PANEL_CONVERSATIONS: usize = 10;
/// The most refund records one search or panel reads.
pub const MAX_RECORDS: usize = 200;
/// How long a search or a panel may read, each read bounded by
/// `LEDGER_TIMEOUT_SECS` on its own: well inside the desk's worst case
/// ([`super::worst_case`], an approval), so a slow table answers 503, never
/// the function's timeout.
pub const READ_BUDGET: std::time::Duration = std::time::Duration::from_secs(20);

/// `reads`, or the ledger's timeout once [`READ_BUDGET`] is spent.
async fn within_budget<T>(reads: impl Future<Output = Result<T, LedgerError>>) -> Result<T, LedgerError> {
    tokio::time::timeout(READ_BUDGET, reads)
        .await
        .unwrap_or(Err(LedgerError::Timeout))
}

/// What a search found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Found {
    pub query: String,
    pub conversations: Vec<ConversationLine>,
    pub refunds: Vec<RecordLine>,
}

/// A customer beside their conversation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CustomerPanel {
    pub customer: String,
    /// `customer`, `guest` or `visitor` (a guest's e-mail stays with the order system).
    pub who: &'static str,
    /// Their other conversations, the latest first.
    pub conversations: Vec<ConversationLine>,
    pub refunds: RefundTotals,
    /// Their refunds, the latest [`PANEL_RECORDS`], each with its amount and
    /// state in words (contract 36), and the orders they name.
    pub records: Vec<RecordLine>,
    pub orders: Vec<String>,
    /// Their e-mail, as the order system gives it with their latest refunded
    /// order (one read, when the panel opens; contract 36): who they are in
    /// words, where the order system says.
    pub email: Option<String>,
}

/// How many of a customer's refunds the panel lists.
pub const PANEL_RECORDS: usize = 10;

/// A customer's refund records: how many, and what was refunded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RefundTotals {
    pub count: usize,
    /// The sum of the executed ones.
    pub refunded: String,
}

/// A query, checked: one line of 1 to [`MAX_QUERY_CHARS`] characters, trimmed.
pub fn checked_query(q: &str) -> Result<&str, String> {
    let q = q.trim();
    if q.is_empty() {
        return Err("give an id to search for: a conversation's, an order's, a refund's or a customer's".into());
    }
    if q.chars().count() > MAX_QUERY_CHARS || q.chars().any(crate::untrusted::acts_on_a_terminal) {
        return Err(format!("an id is one line of at most {MAX_QUERY_CHARS} characters"));
    }
    Ok(q)
}

/// The lines of `ids` that live, the latest first, at most [`MAX_CONVERSATIONS`].
async fn lines(staff: &Staff, ids: &[String], now: u64) -> Result<Vec<ConversationLine>, LedgerError> {
    let mut lines = Vec::new();
    for id in ids {
        if let Some(line) = staff.conversations.line(id, now).await? {
            lines.push(line);
        }
    }
    lines.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then_with(|| a.id.cmp(&b.id)));
    lines.truncate(MAX_CONVERSATIONS);
    Ok(lines)
}

/// The refund records `lines` wrote, at most [`MAX_RECORDS`].
async fn records_in(staff: &Staff, lines: &[ConversationLine]) -> Result<Vec<RefundRecord>, LedgerError> {
    let mut records = Vec::new();
    for id in lines.iter().flat_map(|line| &line.refund_records).take(MAX_RECORDS) {
        if let Some(record) = staff.ledger.record(id).await? {
            records.push(record);
        }
    }
    Ok(records)
}

/// Everything `q` names exactly: as a conversation or handoff id, a refund
/// record id, an order id (the conversations whose turns found the order)
/// or a customer's user id.
pub async fn search(staff: &Staff, q: &str, links: &Links) -> Result<Found, LedgerError> {
    within_budget(search_now(staff, q, links)).await
}

async fn search_now(staff: &Staff, q: &str, links: &Links) -> Result<Found, LedgerError> {
    let now = now_ms();
    let mut ids: Vec<String> = vec![super::decide::conversation_named(q)];
    let direct = staff.ledger.record(q).await?;
    ids.extend(direct.iter().filter_map(|record| record.conversation_id.clone()));
    ids.extend(staff.conversations.of_order(q, now).await?);
    ids.extend(staff.conversations.latest_of_customer(q, MAX_CONVERSATIONS).await?);
    ids.sort();
    ids.dedup();
    let conversations = lines(staff, &ids, now).await?;
    let named = super::decide::conversation_named(q);
    let mut records: Vec<RefundRecord> = records_in(staff, &conversations)
        .await?
        .into_iter()
        .filter(|r| {
            r.record_id == q
                || r.order_id == q
                || r.user_id == q
                || r.conversation_id.as_deref() == Some(named.as_str())
        })
        .collect();
    records.extend(direct.filter(|d| !records.iter().any(|r| r.record_id == d.record_id)));
    records.sort_by_key(|record| std::cmp::Reverse(record.created_at_ms));
    Ok(Found {
        query: q.to_owned(),
        conversations,
        refunds: records.iter().map(|r| RecordLine::of(r, links)).collect(),
    })
}

/// The customer panel beside conversation `except`: the customer's other
/// conversations (the latest [`PANEL_CONVERSATIONS`]) and their refunds.
pub async fn customer_panel(
    staff: &Staff,
    customer: &str,
    except: &str,
    links: &Links,
) -> Result<CustomerPanel, LedgerError> {
    within_budget(panel_now(staff, customer, except, links)).await
}

async fn panel_now(staff: &Staff, customer: &str, except: &str, links: &Links) -> Result<CustomerPanel, LedgerError> {
    let now = now_ms();
    let ids = staff
        .conversations
        .latest_of_customer(customer, MAX_CONVERSATIONS)
        .await?;
    let all = lines(staff, &ids, now).await?;
    let records = records_in(staff, &all).await?;
    let refunded: u64 = records
        .iter()
        .filter(|r| r.state == RefundState::Executed)
        .map(|r| r.amount.cents())
        .sum();
    Ok(CustomerPanel {
        customer: customer.to_owned(),
        who: kind_of_person(customer),
        conversations: all
            .into_iter()
            .filter(|line| line.id != except)
            .take(PANEL_CONVERSATIONS)
            .collect(),
        refunds: RefundTotals {
            count: records.len(),
            refunded: AmountCents::new(refunded).to_string(),
        },
        orders: {
            let mut orders: Vec<String> = records.iter().map(|r| r.order_id.clone()).collect();
            orders.sort();
            orders.dedup();
            orders
        },
        email: match records.iter().max_by_key(|r| r.created_at_ms) {
            Some(latest) => match staff.orders.order(&latest.order_id, &customer.into()).await {
                crate::orders::OrderLookup::Found(order) => order.email.as_ref().map(|email| email.expose().to_owned()),
                _ => None,
            },
            None => None,
        },
        records: {
            let mut latest: Vec<&RefundRecord> = records.iter().collect();
            latest.sort_by_key(|r| std::cmp::Reverse(r.created_at_ms));
            latest
                .into_iter()
                .take(PANEL_RECORDS)
                .map(|record| RecordLine::of(record, links))
                .collect()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_one_short_line() {
        assert_eq!(checked_query("  A-1001 "), Ok("A-1001"));
        assert!(checked_query("").is_err());
        assert!(checked_query("a\nb").is_err());
        assert!(checked_query(&"x".repeat(201)).is_err());
    }
}
