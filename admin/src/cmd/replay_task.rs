//! `replay-task ID --family NAME --why TEXT [--out FILE]`: one evaluation
//! task from a real conversation (contract 23), so the conversations that
//! went wrong become tests with nobody's details in them.
//!
//! The task holds the customer's messages in order; the orders as the
//! conversation's refund records and order reads saw them first (status,
//! amounts, delivery in days before the first message); and the end state
//! as people left it, graded as the evaluation grades: the refunds the
//! rules paid, and the refunds that went to a person (approved or not: the
//! evaluation has no person to decide). Personal details are replaced by
//! stand-ins, the same stand-in for the same value: the customer's id, every
//! e-mail address and phone number, the last digits of a masked card or
//! IBAN, the order ids (kept consistent, `R-1001`, `R-1002`, ...). The order
//! system's name and address never reached the conversation (the tools give
//! the model a reference only), and its reference's characters are replaced
//! too. The conversation is named only by a one-way hash of its id.
//!
//! The router's labels of the first routed turn are kept (`router`), and
//! the task expects them (`expect.intents`, `expect.risk`), or the intent a
//! person recorded where one did: the evaluation grades the router by them.
//!
//! The file is a family of one task, which `make eval` runs unchanged from
//! `eval/tasks/replayed/`, joined to the family it names.

use std::collections::BTreeMap;

use refund_chat::clock::{now_ms, parse_utc};
use refund_chat::conversation::Exchange;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::dynamo::conversations::DynamoConversations;
use refund_chat::ledger::dynamo::routing::RoutedConversation;
use refund_chat::ledger::{DecidedBy, RefundRecord};
use refund_chat::refund::RefundState;
use refund_chat::router::Routing;
use refund_chat::untrusted::visible;
use serde_json::{Value, json};

use crate::{Ending, Outcome};

pub struct ReplayTask<'a> {
    pub id: &'a str,
    pub family: &'a str,
    pub why: &'a str,
    pub out: Option<&'a std::path::Path>,
    /// The rules' settings: what they would pay without a person.
    pub limits: &'a refund_chat::refund::policy::Limits,
}

const DAY_MS: u64 = 86_400_000;
const CUSTOMER: &str = "u-replay";

pub async fn run(ledger: &DynamoLedger, conversations: &DynamoConversations, asked: ReplayTask<'_>) -> Outcome {
    let Some(transcript) = conversations.transcript(asked.id, now_ms()).await? else {
        return Ok(Ending::Refused(format!(
            "no conversation {} (or it expired)",
            visible(asked.id)
        )));
    };
    let turns: Vec<&Exchange> = transcript
        .exchanges
        .iter()
        .filter(|stored| stored.by.is_none())
        .map(|stored| &stored.exchange)
        .collect();
    let messages: Vec<&str> = turns.iter().filter_map(|e| e.customer_message()).collect();
    let Some(first_at) = transcript.exchanges.first().and_then(|e| parse_utc(&e.created_at)) else {
        return Ok(Ending::Refused("the conversation has no exchange to replay".into()));
    };
    if messages.is_empty() {
        return Ok(Ending::Refused("the conversation has no customer message".into()));
    }
    let mut records = Vec::new();
    for record_id in &transcript.refund_records {
        if let Some(record) = ledger.record(record_id).await? {
            records.push(record);
        }
    }
    records.sort_by_key(|r| r.created_at_ms);

    let mut stand_ins = StandIns::new(&transcript.customer);
    let orders = orders_seen(&records, &turns, first_at, &mut stand_ins);
    let refund = |record: &RefundRecord, stand_ins: &mut StandIns| json!({"order_id": stand_ins.order(&record.order_id), "amount_cents": record.amount.cents()});
    let paid_by_rules: Vec<Value> = records
        .iter()
        .filter(|r| r.decision == DecidedBy::Rules && r.state == RefundState::Executed)
        .map(|r| refund(r, &mut stand_ins))
        .collect();
    let to_a_person: Vec<Value> = records
        .iter()
        .filter(|r| r.decision == DecidedBy::Approval && r.reissue_of.is_none())
        .map(|r| refund(r, &mut stand_ins))
        .collect();
    let handoff: Vec<&str> = transcript.handoff.iter().map(|h| h.reason.as_str()).collect();
    // What the rules pay without a person whatever a model does (one
    // automatic refund an order, within the limit and what it has left),
    // which a safety family's grading counts as the rules holding.
    let window_days = asked.limits.refund_window.as_secs() / 86_400;
    let rules_allow: Vec<Value> = orders
        .iter()
        .filter(|o| o["status"] == "delivered" && o["delivered_days_ago"].as_u64().is_some_and(|d| d <= window_days))
        .map(|o| {
            let left = o["paid_cents"]
                .as_u64()
                .unwrap_or_default()
                .saturating_sub(o["refunded_cents"].as_u64().unwrap_or_default());
            json!({"order_id": o["order_id"], "amount_cents": left.min(asked.limits.auto_refund_limit.cents())})
        })
        .filter(|r| r["amount_cents"].as_u64().is_some_and(|cents| cents > 0))
        .collect();
    let texts: Vec<String> = messages.iter().map(|m| stand_ins.text(m)).collect();
    let routed = conversations.routing_of(asked.id).await?;
    let (router, expect_intents, expect_risk) = routing_expected(routed.as_ref());
    let hash = refund_chat::desk::admission::key::body_sha256(transcript.id.as_bytes());
    let task = json!({
        "family": asked.family,
        "safety": false,
        "tasks": [{
            "id": format!("replayed-{}", &hash[..12]),
            "customer": CUSTOMER,
            "orders": orders,
            "message": texts[0],
            "then": texts[1..],
            "expect": {
                "refunds": paid_by_rules,
                "approvals": to_a_person,
                "handoff": handoff,
                "rules_allow": rules_allow,
                "intents": expect_intents,
                "risk": expect_risk,
            },
            "router": router,
            "reply_checks": [],
            "why_hard": asked.why,
            "replayed_from": format!("sha256:{hash}"),
        }],
    });
    let text = serde_json::to_string_pretty(&task).unwrap_or_default() + "\n";
    match asked.out {
        Some(path) => {
            if let Err(error) = std::fs::write(path, &text) {
                return Ok(Ending::Failed(format!("{}: {error}", path.display())));
            }
            println!("wrote {}", path.display());
        }
        None => print!("{text}"),
    }
    Ok(Ending::Done)
}

/// What the router said of the conversation's first routed turn (as
/// recorded, or null), and what the router is graded against: the intent a
/// person found where one did, else the router's own intents (a task that
/// keeps today's routing); the router's risk; nulls where it failed.
fn routing_expected(routed: Option<&RoutedConversation>) -> (Value, Value, Value) {
    let recorded = routed.and_then(|r| r.first_router.as_deref());
    let labels = match recorded.map(Routing::from_recorded) {
        Some(Routing::Labelled(labels)) => Some(labels),
        _ => None,
    };
    let intents = match (routed.and_then(|r| r.verdict), &labels) {
        (Some(person), _) => json!([person.as_str()]),
        (None, Some(labels)) => json!(labels.intents.iter().map(|i| i.as_str()).collect::<Vec<_>>()),
        (None, None) => Value::Null,
    };
    let risk = labels.map_or(Value::Null, |labels| json!(labels.risk.as_str()));
    (json!(recorded), intents, risk)
}

/// The orders as the conversation first saw them: each refund record's
/// facts, and each `get_order` result the model was shown.
fn orders_seen(records: &[RefundRecord], turns: &[&Exchange], first_at: u64, stand_ins: &mut StandIns) -> Vec<Value> {
    let mut seen: BTreeMap<String, Value> = BTreeMap::new();
    let days_before = |delivered_ms: Option<u64>| delivered_ms.map(|at| first_at.saturating_sub(at) / DAY_MS);
    for record in records {
        let Some(order) = &record.order else { continue };
        let id = stand_ins.order(&record.order_id);
        seen.entry(id.clone()).or_insert_with(|| {
            json!({
                "order_id": id,
                "customer": CUSTOMER,
                "paid_cents": order.paid.cents(),
                "refunded_cents": order.refunded.cents(),
                "status": order.status,
                "delivered_days_ago": days_before(order.delivered_at_ms),
            })
        });
    }
    for read in turns.iter().flat_map(|turn| order_reads(turn)) {
        let Some(order_id) = read["order_id"].as_str() else {
            continue;
        };
        let id = stand_ins.order(order_id);
        let delivered = read["delivered_at"].as_str().and_then(parse_utc);
        seen.entry(id.clone()).or_insert_with(|| {
            json!({
                "order_id": id,
                "customer": CUSTOMER,
                "paid_cents": read["paid_cents"].as_u64().unwrap_or_default(),
                "refunded_cents": read["refunded_cents"].as_u64().unwrap_or_default(),
                "status": read["status"],
                "delivered_days_ago": days_before(delivered),
            })
        });
    }
    seen.into_values().collect()
}

/// The `get_order` results of one turn that found an order.
fn order_reads(turn: &Exchange) -> Vec<Value> {
    use refund_chat::chat::Message;
    let calls: Vec<&str> = turn
        .messages
        .iter()
        .flat_map(|m| match m {
            Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            _ => &[],
        })
        .filter(|call| call.name == refund_chat::orders::tool::TOOL_NAME)
        .map(|call| call.id.as_str())
        .collect();
    turn.messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, content } if calls.contains(&tool_call_id.as_str()) => {
                serde_json::from_str::<Value>(content).ok()
            }
            _ => None,
        })
        .filter(|read| read["order_id"].is_string())
        .collect()
}

/// Stand-ins for personal details, the same one for the same value.
struct StandIns {
    customer: String,
    orders: BTreeMap<String, String>,
}

impl StandIns {
    fn new(customer: &str) -> Self {
        StandIns {
            customer: customer.to_owned(),
            orders: BTreeMap::new(),
        }
    }

    fn order(&mut self, order_id: &str) -> String {
        let next = format!("R-{}", 1001 + self.orders.len());
        self.orders.entry(order_id.trim().to_owned()).or_insert(next).clone()
    }

    /// A customer's message with every personal detail replaced.
    fn text(&self, message: &str) -> String {
        let mut text = message.to_owned();
        // Longest first, so an id inside a longer one is not half replaced.
        let mut ids: Vec<(&String, &String)> = self.orders.iter().collect();
        ids.sort_by_key(|(id, _)| std::cmp::Reverse(id.len()));
        for (id, stand_in) in ids {
            text = text.replace(id.as_str(), stand_in);
        }
        if !self.customer.is_empty() {
            text = text.replace(&self.customer, CUSTOMER);
        }
        text = masked_endings(&text);
        let mailed: String = text
            .split_inclusive(char::is_whitespace)
            .map(|word| {
                let bare = word.trim_end();
                let core = bare.trim_matches(|c: char| !c.is_alphanumeric());
                if core.contains('@') && core.rsplit('@').next().is_some_and(|domain| domain.contains('.')) {
                    word.replacen(core, "customer@example.com", 1)
                } else {
                    word.to_owned()
                }
            })
            .collect();
        phones_replaced(mailed)
    }
}

/// `[card ending 4242]` and `[IBAN ending 5432]` with stand-in endings.
fn masked_endings(text: &str) -> String {
    let mut out = text.to_owned();
    for what in ["card", "IBAN"] {
        let head = format!("[{what} ending ");
        let mut at = 0;
        while let Some(found) = out[at..].find(&head) {
            let start = at + found + head.len();
            let end = out[start..].find(']').map_or(out.len(), |e| start + e);
            out.replace_range(start..end, "0000");
            at = start;
        }
    }
    out
}

/// Runs of digits, spaces, dashes, dots, parentheses and `+` that hold at
/// least 8 digits (a phone number) become a stand-in.
fn phones_replaced(text: String) -> String {
    let chars: Vec<char> = text.chars().collect();
    let is_part = |c: char| c.is_ascii_digit() || matches!(c, ' ' | '-' | '(' | ')' | '+' | '.');
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() || chars[i] == '+' {
            let mut j = i;
            while j < chars.len() && is_part(chars[j]) {
                j += 1;
            }
            // What trails (a space, a full stop) is not the number's.
            while j > i && !chars[j - 1].is_ascii_digit() {
                j -= 1;
            }
            let digits = chars[i..j].iter().filter(|c| c.is_ascii_digit()).count();
            if digits >= 8 {
                out.push_str("+00 000 000 000");
                i = j;
                continue;
            }
            out.extend(&chars[i..j.max(i + 1)]);
            i = j.max(i + 1);
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_customers_details_are_replaced_by_stand_ins() {
        let mut stand_ins = StandIns::new("u-1001");
        assert_eq!(stand_ins.order("D-4001"), "R-1001");
        assert_eq!(stand_ins.order("A-1002"), "R-1002");
        assert_eq!(
            stand_ins.order("D-4001"),
            "R-1001",
            "the same stand-in for the same order"
        );
        let text = stand_ins.text(
            "I am u-1001: the sofa from D-4001 (not A-1002) cost 120.00. Mail ada.quokka@example.org, \
             call +33 6 12 34 56 78. I paid with [card ending 4242] from [IBAN ending 5432].",
        );
        assert_eq!(
            text,
            "I am u-replay: the sofa from R-1001 (not R-1002) cost 120.00. Mail customer@example.com, \
             call +00 000 000 000. I paid with [card ending 0000] from [IBAN ending 0000]."
        );
    }
}
