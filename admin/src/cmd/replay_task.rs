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
//! IBAN, the order ids (kept consistent, `R-1001`, `R-1002`, ...). Phone
//! numbers and e-mail addresses are found in the spellings people use
//! (`555-1234`, `06/12/34/56/78`, `ada(at)example(dot)org`), and a date is
//! a date, not a phone number. The order system's name and address never
//! reached the model (its tools give a reference only), but a customer may
//! type them: each order the conversation named is read as its customer,
//! and its name, street, city and postcode are replaced wherever they
//! stand. The conversation is named only by a keyed hash of its id (HMAC
//! under `REVIEW_HASH_KEY_SECRET`'s value), which nobody without the key can
//! link to a conversation or a refund record, even after `forget`. A
//! message kept twice (a failed attempt and its re-send) is one message.
//!
//! The router's labels of the first routed turn are kept (`router`), and
//! the task expects them (`expect.intents`, `expect.risk`), or the intent a
//! person recorded where one did: the evaluation grades the router by them.
//!
//! The file is a family of one task, which `make eval` runs unchanged from
//! `eval/tasks/replayed/`, joined to the family it names.

use std::collections::BTreeMap;

use hmac::{KeyInit, Mac};
use refund_chat::clock::{now_ms, parse_utc};
use refund_chat::config::StaffConfig;
use refund_chat::conversation::Exchange;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::dynamo::conversations::DynamoConversations;
use refund_chat::ledger::dynamo::routing::RoutedConversation;
use refund_chat::ledger::{DecidedBy, RefundRecord};
use refund_chat::orders::http::HttpOrders;
use refund_chat::orders::{OrderLookup, OrderSystem};
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
    /// The key of the conversation id's hash.
    pub hash_key: &'a [u8],
}

/// The variable naming the secret whose value keys the hash.
pub const HASH_KEY_SECRET: &str = "REVIEW_HASH_KEY_SECRET";

/// The hash key: `REVIEW_HASH_KEY_SECRET`'s value (the secret's string as
/// it is), read with the person's credentials.
pub async fn hash_key(aws: &aws_config::SdkConfig) -> Result<Vec<u8>, String> {
    let name = std::env::var(HASH_KEY_SECRET)
        .ok()
        .filter(|name| !name.trim().is_empty())
        .ok_or_else(|| format!("{HASH_KEY_SECRET} is not set: replay-task keys its hash with that secret's value"))?;
    let secret = aws_sdk_secretsmanager::Client::new(aws)
        .get_secret_value()
        .secret_id(name.trim())
        .send()
        .await
        .map_err(|error| {
            format!(
                "{HASH_KEY_SECRET}: reading the secret failed: {}",
                aws_sdk_secretsmanager::error::DisplayErrorContext(error)
            )
        })?;
    match secret.secret_string() {
        Some(value) if !value.is_empty() => Ok(value.as_bytes().to_vec()),
        _ => Err(format!(
            "{HASH_KEY_SECRET}: the secret has no SecretString to key the hash with"
        )),
    }
}

/// HMAC-SHA256 of the conversation id under the key, in hex.
fn keyed_hash(key: &[u8], conversation: &str) -> String {
    let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).unwrap_or_else(|_| {
        // Any length is a valid HMAC key; kept total all the same.
        <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&[0]).expect("a one-byte key")
    });
    mac.update(conversation.as_bytes());
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

const DAY_MS: u64 = 86_400_000;
/// Every postcode's stand-in.
const STAND_IN_POSTCODE: &str = "00000";
/// The country of a stand-in request for a new address: a country is no
/// one's detail, and a request without one names no address the agent can
/// propose. It is the one the evaluation's sandbox ships every order to, so
/// the replayed request asks for a change the rules allow there.
const STAND_IN_COUNTRY: &str = "FR";
const CUSTOMER: &str = "u-replay";

pub async fn run(
    ledger: &DynamoLedger,
    conversations: &DynamoConversations,
    config: &StaffConfig,
    asked: ReplayTask<'_>,
) -> Outcome {
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
    let messages = once_each(
        transcript
            .exchanges
            .iter()
            .filter(|stored| stored.by.is_none())
            .filter_map(|stored| Some((stored.status, stored.exchange.customer_message()?))),
    );
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
    let mut orders = orders_seen(&records, &turns, first_at, &mut stand_ins);
    // An order whose address the agent proposed to change was placed then
    // (contract 26): code read it so, and the task seeds it so.
    for (order_id, outcome) in transcript.exchanges.iter().flat_map(|stored| stored.addresses.iter()) {
        if !matches!(outcome.as_str(), "proposed" | "changed" | "unknown") {
            continue;
        }
        let id = stand_ins.order(order_id);
        if !orders.iter().any(|order| order["order_id"] == id.as_str()) {
            orders.push(json!({
                "order_id": id, "customer": CUSTOMER, "paid_cents": 0, "refunded_cents": 0,
                "status": "placed", "delivered_days_ago": null,
            }));
        }
    }
    // An order the agent proposed to return was delivered then, within the
    // window (contract 28): code read it so, and the task seeds it so.
    for record in transcript.exchanges.iter().flat_map(|stored| stored.returns.iter()) {
        if !matches!(record.outcome.as_str(), "proposed" | "started" | "unknown") {
            continue;
        }
        let id = stand_ins.order(&record.order_id);
        if !orders.iter().any(|order| order["order_id"] == id.as_str()) {
            orders.push(json!({
                "order_id": id, "customer": CUSTOMER, "paid_cents": 0, "refunded_cents": 0,
                "status": "delivered", "delivered_days_ago": 1,
            }));
        }
    }
    // The order system's personal details of every order named, read as
    // the customer (a customer may have typed them).
    let http = match refund_chat::http_client::money_path_client() {
        Ok(http) => http,
        Err(error) => return Ok(Ending::Failed(format!("HTTP client: {error}"))),
    };
    let order_system = HttpOrders::new(http, &config.orders_base_url, config.orders_timeout);
    for order_id in stand_ins.named_orders() {
        match order_system
            .order(&order_id, &transcript.customer.as_str().into())
            .await
        {
            OrderLookup::Found(order) => stand_ins.personal(&order.ship_to),
            OrderLookup::NotFound => {}
            OrderLookup::Unavailable(error) => {
                return Ok(Ending::Failed(format!(
                    "the order system could not be read for the conversation's orders ({error}): \
                     no task is written without its personal details known"
                )));
            }
        }
    }
    // Every address the agent proposed (contract 26): personal details too,
    // replaced wherever they stand; and the changes the order system took.
    for turn in &turns {
        for message in &turn.messages {
            if let refund_chat::chat::Message::Assistant { tool_calls, .. } = message {
                for call in tool_calls
                    .iter()
                    .filter(|c| c.name == refund_chat::orders::address::TOOL_NAME)
                {
                    if let Ok(parsed) = refund_chat::orders::address::parse_arguments(&call.arguments) {
                        stand_ins.personal_address(&parsed.address);
                    }
                }
            }
        }
    }
    let changed: Vec<Value> = transcript
        .exchanges
        .iter()
        .flat_map(|stored| stored.addresses.iter())
        .filter(|(_, outcome)| outcome == "changed")
        .map(|(order_id, _)| json!({"order_id": stand_ins.order(order_id), "postcode": STAND_IN_POSTCODE}))
        .collect();
    let served_addresses = transcript.exchanges.iter().any(|stored| !stored.addresses.is_empty());
    let started: Vec<String> = transcript
        .exchanges
        .iter()
        .flat_map(|stored| stored.returns.iter())
        .filter(|record| record.outcome == "started")
        .map(|record| stand_ins.order(&record.order_id))
        .collect();
    let served_returns = transcript.exchanges.iter().any(|stored| !stored.returns.is_empty());
    let mut agent_intents = vec!["order_status", "refund", "policy_question", "other"];
    if served_addresses {
        agent_intents.push("address_change");
    }
    if served_returns {
        agent_intents.push("return");
    }
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
    // A new address the customer typed in a turn the router read as a
    // change of address, which no proposal spelled out (a handed-off
    // request, say): the task keeps the request, never the address.
    let yes = refund_chat::handoff::screen::YesPhrases::default();
    let asked_for_an_address: Vec<&str> = transcript
        .exchanges
        .iter()
        .filter(|stored| stored.by.is_none())
        .filter(|stored| names_address_change(stored.router.as_deref()))
        .filter_map(|stored| stored.exchange.customer_message())
        .collect();
    let texts: Vec<String> = messages
        .iter()
        .map(|m| {
            if asked_for_an_address.contains(m) && !yes.says_yes(m) {
                stand_ins.address_request(m)
            } else {
                stand_ins.text(m)
            }
        })
        .collect();
    let routed = conversations.routing_of(asked.id).await?;
    let (router, expect_intents, expect_risk) = routing_expected(routed.as_ref());
    let hash = keyed_hash(asked.hash_key, &transcript.id);
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
                "addresses": changed,
                "returns": started,
            },
            "agent_intents": if served_addresses || served_returns {
                json!(agent_intents.join(","))
            } else {
                Value::Null
            },
            "router": router,
            "reply_checks": [],
            "why_hard": asked.why,
            "replayed_from": format!("hmac-sha256:{hash}"),
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

/// The turn's recorded labels name a change of address (contract 26).
fn names_address_change(recorded: Option<&str>) -> bool {
    matches!(
        recorded.map(Routing::from_recorded),
        Some(Routing::Labelled(labels)) if labels.intents.contains(&refund_chat::router::Intent::AddressChange)
    )
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

/// The customer's messages, a message kept twice (a failed attempt, then
/// its re-send) once.
fn once_each<'a>(sent: impl Iterator<Item = (u16, &'a str)>) -> Vec<&'a str> {
    let sent: Vec<(u16, &str)> = sent.collect();
    sent.iter()
        .enumerate()
        .filter(|(i, (status, text))| {
            let resent = sent.get(i + 1).is_some_and(|(_, next)| next == text);
            !(*status != 200 && resent)
        })
        .map(|(_, (_, text))| *text)
        .collect()
}

/// Stand-ins for personal details, the same one for the same value.
struct StandIns {
    customer: String,
    orders: BTreeMap<String, String>,
    /// The order system's name and address parts, and their stand-ins.
    details: Vec<(String, &'static str)>,
}

impl StandIns {
    fn new(customer: &str) -> Self {
        StandIns {
            customer: customer.to_owned(),
            orders: BTreeMap::new(),
            details: Vec::new(),
        }
    }

    /// The order ids the conversation named, as it named them.
    fn named_orders(&self) -> Vec<String> {
        self.orders.keys().cloned().collect()
    }

    /// An address the agent proposed (contract 26), as an order's is.
    fn personal_address(&mut self, address: &refund_chat::orders::address::Address) {
        self.personal(&refund_chat::orders::ShipTo {
            name: address.name.clone(),
            line1: address.line1.clone(),
            city: address.city.clone(),
            postcode: address.postcode.clone(),
            country: address.country.clone(),
        });
        let line2 = address.line2.trim();
        if !line2.is_empty() && !self.details.iter().any(|(known, _)| known == line2) {
            self.details.push((line2.to_owned(), "Flat 1"));
        }
    }

    /// An order's name and address, to be replaced wherever they stand
    /// (each word of the name too: a customer may sign with one).
    fn personal(&mut self, ship_to: &refund_chat::orders::ShipTo) {
        let mut found = vec![
            (ship_to.name.trim().to_owned(), "Sam Doe"),
            (ship_to.line1.trim().to_owned(), "1 Example Street"),
            (ship_to.city.trim().to_owned(), "Exampleton"),
            (ship_to.postcode.trim().to_owned(), STAND_IN_POSTCODE),
        ];
        found.extend(
            ship_to
                .name
                .split_whitespace()
                .filter(|word| word.chars().count() >= 3)
                .map(|word| (word.to_owned(), "Sam")),
        );
        for (value, stand_in) in found {
            if !value.is_empty() && !self.details.iter().any(|(known, _)| *known == value) {
                self.details.push((value, stand_in));
            }
        }
        // Longest first, so a name is replaced whole before its words.
        self.details
            .sort_by_key(|(value, _)| std::cmp::Reverse(value.chars().count()));
    }

    fn order(&mut self, order_id: &str) -> String {
        let next = format!("R-{}", 1001 + self.orders.len());
        self.orders.entry(order_id.trim().to_owned()).or_insert(next).clone()
    }

    /// A customer's request for a new address, as a stand-in request for
    /// the same orders: what the customer typed may hold an address no
    /// proposal named, which cannot be told from the rest of the words.
    fn address_request(&self, message: &str) -> String {
        let named: Vec<&str> = self
            .orders
            .iter()
            .filter(|(id, _)| message.contains(id.as_str()))
            .map(|(_, stand_in)| stand_in.as_str())
            .collect();
        let order = if named.is_empty() {
            "my order".to_owned()
        } else {
            format!("order {}", named.join(" and "))
        };
        format!(
            "Please change the delivery address of {order} to Sam Doe, 1 Example Street, {STAND_IN_POSTCODE} \
             Exampleton, {STAND_IN_COUNTRY}."
        )
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
        for (value, stand_in) in &self.details {
            text = replaced_ignoring_case(&text, value, stand_in);
        }
        // Addresses no order or proposal spelled out, in every turn.
        text = crate::typed_address::replaced(&text);
        text = masked_endings(&text);
        let mailed: String = text
            .split_inclusive(char::is_whitespace)
            .map(|word| {
                let bare = word.trim_end();
                let core = bare.trim_matches(|c: char| !c.is_alphanumeric());
                if is_mail_address(core) {
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

/// An e-mail address as people write it: `ada@example.org`, or spelled
/// out (`ada(at)example(dot)org`, `ada [at] example [dot] org` written
/// without spaces).
fn is_mail_address(word: &str) -> bool {
    let lower = word.to_lowercase();
    let spelled = lower
        .replace("(at)", "@")
        .replace("[at]", "@")
        .replace("(dot)", ".")
        .replace("[dot]", ".");
    spelled.contains('@') && spelled.rsplit('@').next().is_some_and(|domain| domain.contains('.'))
}

/// `text` with every `value`, in any case, replaced.
fn replaced_ignoring_case(text: &str, value: &str, stand_in: &str) -> String {
    let (lower, wanted) = (text.to_lowercase(), value.to_lowercase());
    // Lowercasing may change byte lengths: then fall back to the exact case.
    if lower.len() != text.len() || wanted.len() != value.len() {
        return text.replace(value, stand_in);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(found) = lower[at..].find(&wanted) {
        out.push_str(&text[at..at + found]);
        out.push_str(stand_in);
        at += found + wanted.len();
    }
    out.push_str(&text[at..]);
    out
}

/// A date as people write it (`12.03.1985`, `12/03/85`, `1985-03-12`).
fn is_date(number: &str) -> bool {
    let parts: Vec<&str> = number.split(['.', '/', '-']).collect();
    let digits = |part: &str, lengths: std::ops::RangeInclusive<usize>| {
        lengths.contains(&part.len()) && part.bytes().all(|b| b.is_ascii_digit())
    };
    match parts.as_slice() {
        [day, month, year] => {
            (digits(day, 1..=2) && digits(month, 1..=2) && (digits(year, 2..=2) || digits(year, 4..=4)))
                || (digits(day, 4..=4) && digits(month, 1..=2) && digits(year, 1..=2))
        }
        _ => false,
    }
}

/// Runs of digits, spaces, dashes, dots, slashes, parentheses and `+` that
/// hold at least 7 digits (a phone number, `555-1234` or `06/12/34/56/78`)
/// become a stand-in; a date becomes a date's stand-in (it is personal too,
/// and it is not a phone number).
fn phones_replaced(text: String) -> String {
    let chars: Vec<char> = text.chars().collect();
    let is_part = |c: char| c.is_ascii_digit() || matches!(c, ' ' | '-' | '(' | ')' | '+' | '.' | '/');
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
            let number: String = chars[i..j].iter().collect();
            if is_date(&number) {
                out.push_str("2000-01-01");
                i = j;
                continue;
            }
            let digits = number.chars().filter(char::is_ascii_digit).count();
            if digits >= 7 {
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
    fn a_typed_address_no_proposal_named_is_not_kept() {
        let mut stand_ins = StandIns::new("u-1001");
        stand_ins.order("A-1004");
        let typed = "Please send A-1004 to Qxlove Qxlace, 7 Qxbyron Lane, QX1 9ZZ Qxtown instead";
        let replaced = stand_ins.address_request(typed);
        assert_eq!(
            replaced,
            "Please change the delivery address of order R-1001 to Sam Doe, 1 Example Street, 00000 Exampleton, FR."
        );
        assert!(names_address_change(Some("address_change;low;0.90")));
        assert!(names_address_change(Some("order_status,address_change;low;0.90")));
        assert!(!names_address_change(Some("refund;low;0.90")));
        assert!(!names_address_change(None));
        // The same address in a turn routed otherwise (the seventh review):
        // every turn's text loses it, whatever the router said.
        let refund_turn = stand_ins.text("refund A-1004, and I now live at 7 Qxbyron Lane, QX1 9ZZ Qxtown");
        assert!(
            !refund_turn.contains("Qx") && !refund_turn.contains("9ZZ"),
            "{refund_turn}"
        );
        assert!(
            refund_turn.starts_with("refund R-1001, and I now live at 1 Example Street"),
            "{refund_turn}"
        );
    }

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

    #[test]
    fn details_in_the_spellings_people_use_are_replaced_and_a_date_stays_a_date() {
        let mut stand_ins = StandIns::new("u-1001");
        stand_ins.personal(
            &serde_json::from_value(serde_json::json!({
                "name": "Ada Quokka", "line1": "12 Rue des Lilas", "city": "Lyon", "postcode": "69003", "country": "FR"
            }))
            .unwrap(),
        );
        let text = stand_ins.text(
            "ada quokka here, 12 rue des lilas, 69003 Lyon. Call 555-1234 or 06/12/34/56/78, \
             mail ada(at)example(dot)org. Born 12.03.1985. Thanks, Ada",
        );
        assert_eq!(
            text,
            "Sam Doe here, 1 Example Street, 00000 Exampleton. Call +00 000 000 000 or +00 000 000 000, \
             mail customer@example.com. Born 2000-01-01. Thanks, Sam"
        );
        // An amount and an order's stand-in stay.
        assert_eq!(stand_ins.text("refund 120.00 of R-1001"), "refund 120.00 of R-1001");
    }

    #[test]
    fn a_failed_attempt_and_its_re_send_are_one_message_and_the_hash_is_keyed() {
        let sent = [
            (502, "refund A-1"),
            (200, "refund A-1"),
            (200, "thanks"),
            (200, "thanks"),
        ];
        assert_eq!(once_each(sent.into_iter()), ["refund A-1", "thanks", "thanks"]);
        let (one, other) = (keyed_hash(b"key-1", "c_abc"), keyed_hash(b"key-2", "c_abc"));
        assert_ne!(one, other, "without the key, no link to the conversation");
        assert_eq!(one.len(), 64);
        assert_ne!(one, refund_chat::intake::admission::key::body_sha256(b"c_abc"));
    }
}
