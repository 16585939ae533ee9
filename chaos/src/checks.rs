//! The books at the end of a run: what the sandbox paid, what the payments
//! service was asked, what the DynamoDB ledger says, what the function
//! logged, and what the clients saw; each invariant counted and checked.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use crate::clients::{ClaimMade, Exchange, Read, VisitorExchange, VisitorRead};

/// Everything a run left behind.
pub struct Evidence<'a> {
    pub exchanges: &'a [Exchange],
    /// The chat's reads of conversations (contract 18).
    pub reads: &'a [Read],
    /// Refunds the sandbox made: (user, order, cents).
    pub money_moved: Vec<(String, String, u64)>,
    /// Refunds the sandbox refused as more than their order had left: (user, order, cents).
    pub overdrawn: Vec<(String, String, u64)>,
    /// Bodies of the payments requests that reached the sandbox.
    pub payments_requests: Vec<Value>,
    /// Every ledger item (plain JSON: numbers as text).
    pub ledger: Vec<Value>,
    /// Every item of the conversation table (plain JSON).
    pub conversations: Vec<Value>,
    /// The changes of address the order system took: (order, the address).
    pub addresses_written: Vec<(String, Value)>,
    /// The returns the order system started: (order, `{items, reason,
    /// refund_cents}`), the last what the order system pays when the parcel arrives.
    pub returns_started: Vec<(String, Value)>,
    /// What each order of the shop was paid, in cents.
    pub order_paid: HashMap<String, u64>,
    /// The model's requests, and those that held a return label's URL.
    pub model_requests: usize,
    pub model_saw_labels: usize,
    /// Every log line of every function process.
    pub log_lines: Vec<String>,
    pub secret_key: &'a str,
    pub auto_refund_limit: u64,
    pub daily_limit: u64,
    /// (order key, epoch ms) where the staff deleted an order's guard as TTL would.
    pub guard_expiries: Vec<(String, u64)>,
    /// `CUSTOMER_TOKENS_PER_DAY`, and what a turn reserves of it.
    pub tokens_per_day: u64,
    pub turn_reservation: u64,
    /// The refund records left `executing` when the run ended, and what the
    /// sweep (run as its schedule would, once every invocation had ended)
    /// made of them: (record id, its state after the sweep).
    pub left_executing: Vec<(String, String)>,
    /// Contract 27: the visitors' messages, their reads of another's
    /// conversation, the claims, and guests' messages whose e-mail was not verified.
    pub visitor_exchanges: Vec<VisitorExchange>,
    pub visitor_reads: Vec<VisitorRead>,
    pub claims: Vec<ClaimMade>,
    pub unverified: Vec<Option<u16>>,
    /// `CUSTOMER_TURNS_PER_HOUR`.
    pub turns_per_hour: u64,
    /// Contract 31: every poke the Event API accepted, (channel, event, epoch ms it arrived).
    pub pokes: Vec<(String, String, u64)>,
}

/// How long after its `created_at_ms` a refund record's write may still land
/// (the ledger proxy serialises and delays requests): a guard deleted within
/// this of a refund may or may not have seen it.
const LANDING_MARGIN_MS: u64 = 10_000;

pub struct Invariant {
    pub name: &'static str,
    pub checked: usize,
    pub violations: Vec<String>,
}

type Key = (String, String, u64);

fn count<I: IntoIterator<Item = Key>>(keys: I) -> HashMap<Key, usize> {
    let mut counts = HashMap::new();
    for key in keys {
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}

fn text(item: &Value, name: &str) -> String {
    item[name].as_str().unwrap_or_default().to_owned()
}

fn cents(item: &Value, name: &str) -> u64 {
    item[name]
        .as_str()
        .and_then(|n| n.parse().ok())
        .or(item[name].as_u64())
        .unwrap_or_default()
}

/// `more` has at least as many of every key as `fewer`; else the keys short.
fn covers(more: &HashMap<Key, usize>, fewer: &HashMap<Key, usize>) -> Vec<String> {
    fewer
        .iter()
        .filter(|(key, n)| more.get(*key).copied().unwrap_or(0) < **n)
        .map(|(key, n)| format!("{key:?}: {n} against {}", more.get(key).copied().unwrap_or(0)))
        .collect()
}

pub fn check(evidence: &Evidence<'_>) -> Vec<Invariant> {
    let refunds: Vec<&Value> = evidence.ledger.iter().filter(|i| i["kind"] == "refund").collect();
    let records_in = |states: &[&str]| {
        count(
            refunds
                .iter()
                .filter(|r| states.contains(&r["state"].as_str().unwrap_or_default()))
                .map(|r| (text(r, "user_id"), text(r, "order_id"), cents(r, "amount_cents"))),
        )
    };
    let payments_keys = count(evidence.payments_requests.iter().map(|r| {
        (
            text(r, "user_id"),
            text(r, "order_id"),
            r["amount_cents"].as_u64().unwrap_or_default(),
        )
    }));
    let moved = count(evidence.money_moved.iter().cloned());

    // The function's own account, from its logs.
    let lines: Vec<Value> = evidence
        .log_lines
        .iter()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let summaries: Vec<&Value> = lines.iter().filter(|l| l["event"] == "summary").collect();
    let attempts: Vec<&Value> = lines
        .iter()
        .filter(|l| {
            l["event"] == "tool_call"
                && matches!(l["refund_outcome"].as_str(), Some("executed" | "rejected" | "unknown"))
        })
        .collect();
    let signed_in: HashMap<&str, &str> = evidence
        .exchanges
        .iter()
        .map(|e| (e.request_id.as_str(), e.signed_in.as_str()))
        .collect();

    let mut invariants = Vec::new();
    let mut add = |name, checked, violations| {
        invariants.push(Invariant {
            name,
            checked,
            violations,
        })
    };

    add(
        "every refund scope reached payments at most once (payments calls <= refund records that allowed one)",
        evidence.payments_requests.len(),
        covers(
            &records_in(&["executed", "rejected", "unknown", "executing"]),
            &payments_keys,
        ),
    );
    let mut per_request: HashMap<&str, usize> = HashMap::new();
    for attempt in &attempts {
        *per_request
            .entry(attempt["requestId"].as_str().unwrap_or_default())
            .or_insert(0) += 1;
    }
    add(
        "every request made at most one payments call",
        summaries.len(),
        per_request
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(id, n)| format!("request {id}: {n} payments calls"))
            .collect(),
    );
    add(
        "every request made at most 5 completion calls",
        summaries.len(),
        summaries
            .iter()
            .filter(|s| s["completion_calls"].as_u64().unwrap_or(0) > 5)
            .map(|s| format!("request {}: {} calls", s["requestId"], s["completion_calls"]))
            .collect(),
    );
    add(
        "every refund the sandbox made is in the ledger as executed, unknown or executing",
        evidence.money_moved.len(),
        covers(&records_in(&["executed", "unknown", "executing"]), &moved),
    );
    add(
        "no refund above AUTO_REFUND_LIMIT_CENTS reached payments",
        evidence.payments_requests.len(),
        evidence
            .payments_requests
            .iter()
            .filter(|r| r["amount_cents"].as_u64().unwrap_or(0) > evidence.auto_refund_limit)
            .map(|r| r.to_string())
            .collect(),
    );
    // Automatic refunds that may have moved money, from the ledger: approved
    // ones may legitimately pay above the limits and again for an order.
    let automatic: Vec<&&Value> = refunds
        .iter()
        .filter(|r| {
            r["decision"] == "automatic"
                && matches!(r["state"].as_str(), Some("executed" | "unknown" | "executing"))
                && r["resolution"] != "not_executed"
        })
        .collect();
    let mut per_order: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut per_user_day: BTreeMap<(String, String), u64> = BTreeMap::new();
    for record in &automatic {
        per_order
            .entry(refund_chat::refund::policy::order_key(&text(record, "order_id")))
            .or_default()
            .push(cents(record, "created_at_ms"));
        *per_user_day
            .entry((text(record, "user_id"), text(record, "day")))
            .or_insert(0) += cents(record, "amount_cents");
    }
    // Two automatic refunds of one order are allowed only if the order's guard
    // expired between them (the window ended there, as far as rule 2 knows).
    let expired_between = |order: &str, first: u64, second: u64| {
        evidence
            .guard_expiries
            .iter()
            .any(|(key, at)| key == order && first < *at && *at < second + LANDING_MARGIN_MS)
    };
    add(
        "no two automatic refunds of one order inside its window (however late staff decided)",
        per_order.len(),
        per_order
            .iter_mut()
            .flat_map(|(order, times)| {
                times.sort_unstable();
                times
                    .windows(2)
                    .filter(|pair| !expired_between(order, pair[0], pair[1]))
                    .map(|pair| format!("order {order}: automatic refunds at {} and {}", pair[0], pair[1]))
                    .collect::<Vec<_>>()
            })
            .collect(),
    );
    add(
        "no customer's automatic refunds of a day exceeded USER_DAILY_AUTO_LIMIT_CENTS",
        per_user_day.len(),
        per_user_day
            .iter()
            .filter(|(_, total)| **total > evidence.daily_limit)
            .map(|((user, day), total)| format!("{user} on {day}: {total} cents"))
            .collect(),
    );
    add(
        "a guard never goes below zero and counts only refunds that may have moved money",
        evidence.ledger.iter().filter(|i| is_guard(i)).count(),
        guard_violations(&evidence.ledger, &refunds),
    );
    let attempted_as_signed_in = count(attempts.iter().filter_map(|a| {
        let user = signed_in.get(a["requestId"].as_str()?)?;
        Some((user.to_string(), text(a, "order_id"), a["amount_cents"].as_u64()?))
    }));
    add(
        "every payments request carried the signed-in customer",
        evidence.payments_requests.len(),
        covers(&attempted_as_signed_in, &payments_keys),
    );

    const STATUSES: [u16; 13] = [200, 400, 401, 403, 404, 405, 409, 422, 429, 500, 502, 503, 504];
    add(
        "every answer: a contract status, a JSON body, x-request-id",
        evidence.exchanges.len(),
        evidence
            .exchanges
            .iter()
            .filter(|e| !(e.mortal && e.status.is_none()))
            .filter(|e| {
                !e.status.is_some_and(|s| STATUSES.contains(&s))
                    || serde_json::from_str::<Value>(&e.body).is_err()
                    || e.headers.get("x-request-id") != Some(&e.request_id)
            })
            .map(|e| format!("#{} {}: {:?} {}", e.index, e.request_id, e.status, e.body))
            .collect(),
    );
    let stored: HashMap<String, String> = evidence
        .ledger
        .iter()
        .filter(|i| i["kind"] == "request" && i["state"] == "completed")
        .map(|i| (text(i, "pk"), text(i, "response_body")))
        .collect();
    let replays: Vec<&Exchange> = evidence.exchanges.iter().filter(|e| e.replayed()).collect();
    add(
        "every replay is byte-identical to the stored answer",
        replays.len(),
        replays
            .iter()
            .filter(|e| {
                let pk = format!(
                    "request#u{}:{}|k:{}",
                    e.signed_in.len(),
                    e.signed_in,
                    e.key.clone().unwrap_or_default()
                );
                stored.get(&pk) != Some(&e.body)
            })
            .map(|e| format!("#{} {}: {}", e.index, e.request_id, e.body))
            .collect(),
    );
    // Contract 16: an automatic refund only on an order code read, delivered
    // inside the window, and never above what it had left refundable.
    add(
        "never paid on an order code could not read (every automatic refund record has the order's facts, delivered)",
        automatic.len(),
        automatic
            .iter()
            .filter(|r| r["order_status"].as_str() != Some("delivered") || r["order_delivered_at"].is_null())
            .map(|r| format!("{}: order facts {:?}", text(r, "record_id"), r["order_status"]))
            .collect(),
    );
    add(
        "never more than paid minus refunded (an automatic refund within what its order had left when read)",
        automatic.len(),
        automatic
            .iter()
            .filter(|r| {
                cents(r, "amount_cents") > cents(r, "order_paid_cents").saturating_sub(cents(r, "order_refunded_cents"))
            })
            .map(|r| format!("{}: {} cents", text(r, "record_id"), cents(r, "amount_cents")))
            .collect(),
    );
    let conversation_text: Vec<String> = evidence.conversations.iter().map(Value::to_string).collect();
    add(
        "no address in any log line or stored exchange (name, street, city, whole postcode)",
        evidence.log_lines.len() + conversation_text.len(),
        evidence
            .log_lines
            .iter()
            .chain(&conversation_text)
            .filter(|line| holds_the_address(line))
            .map(|line| line.chars().take(200).collect())
            .collect(),
    );
    add(
        "no order is ever refunded more than it had left, approvals included (payments never asked for more)",
        evidence.money_moved.len() + evidence.overdrawn.len(),
        evidence
            .overdrawn
            .iter()
            .map(|(user, order, cents)| format!("{user} asked {cents} cents of {order}: more than it had left"))
            .collect(),
    );
    add(
        "no refund was decided on an order the order system did not give (another order, a future delivery, a huge body)",
        refunds.len(),
        refunds
            .iter()
            .filter(|r| cents(r, "order_paid_cents") == crate::faults::LIED_PAID_CENTS)
            .map(|r| format!("{}: decided on a lie", text(r, "record_id")))
            .collect(),
    );
    let markers: HashSet<&str> = evidence.exchanges.iter().map(|e| e.marker.as_str()).collect();
    add(
        "no log line holds the key, a Bearer header or a customer's message",
        evidence.log_lines.len(),
        evidence
            .log_lines
            .iter()
            .filter(|line| {
                line.contains(evidence.secret_key)
                    || line.to_lowercase().contains("bearer")
                    || line
                        .split(|c: char| !c.is_ascii_alphanumeric())
                        .any(|word| (word.starts_with("zq") || word.starts_with("zd")) && markers.contains(word))
            })
            .map(|line| line.chars().take(200).collect())
            .collect(),
    );
    add(
        "every request was answered",
        evidence.exchanges.len(),
        evidence
            .exchanges
            .iter()
            // The mortal container's invocations may die: by design, no answer.
            .filter(|e| e.status.is_none() && !e.mortal)
            .map(|e| format!("#{} {}", e.index, e.request_id))
            .collect(),
    );
    for (name, checked, violations) in conversation_invariants(evidence, &summaries) {
        add(name, checked, violations);
    }
    for (name, checked, violations) in hearing_back_invariants(evidence, &refunds) {
        add(name, checked, violations);
    }
    // Contract 21: a router that failed or was unsure never lets money move alone.
    let unsure: HashSet<&str> = lines
        .iter()
        .filter(|l| l["event"] == "routing" && l["route"] == "agent_unsure")
        .filter_map(|l| l["requestId"].as_str())
        .collect();
    add(
        "every refund of a turn whose router failed or was unsure waited for a person",
        unsure.len(),
        attempts
            .iter()
            .filter(|l| l["refund_outcome"] == "executed")
            .filter_map(|l| l["requestId"].as_str())
            .filter(|id| unsure.contains(id))
            .map(|id| format!("{id}: paid without a person, its router unsure"))
            .collect(),
    );
    // Contract 21: a refund is paid without a person only in a turn the
    // router labelled `refund` (a failed router's labels are `unknown`).
    let not_routed: HashSet<&str> = lines
        .iter()
        .filter(|l| l["event"] == "routing")
        .filter(|l| {
            let labels = l["labels"].as_str().unwrap_or_default();
            let intents = labels.split(';').next().unwrap_or_default();
            labels != "unknown" && !intents.split(',').any(|intent| intent == "refund")
        })
        .filter_map(|l| l["requestId"].as_str())
        .collect();
    add(
        "no refund was paid without a person in a turn the router did not route to refunds",
        not_routed.len(),
        attempts
            .iter()
            .filter(|l| l["refund_outcome"] == "executed")
            .filter_map(|l| l["requestId"].as_str())
            .filter(|id| not_routed.contains(id))
            .map(|id| format!("{id}: paid without a person, not routed to refunds"))
            .collect(),
    );
    for (name, checked, violations) in stream_invariants(evidence) {
        add(name, checked, violations);
    }
    // Contract 13: a routing call answered with an HTTP error was not billed.
    let routing_errors: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] == "routing" && l["failure"] == "error")
        .collect();
    add(
        "no tokens were counted for a routing call answered with an HTTP error",
        routing_errors.len(),
        routing_errors
            .iter()
            .filter(|l| l["tokens"].as_u64() != Some(0))
            .map(|l| format!("{}: {} tokens for an HTTP error", text(l, "requestId"), l["tokens"]))
            .collect(),
    );
    // Contract 23: the pasted card, in whichever spelling, never whole in a sink.
    let pasted = evidence
        .exchanges
        .iter()
        .filter(|e| {
            crate::clients::CARD_SPELLINGS
                .iter()
                .any(|spelling| e.message.contains(spelling))
        })
        .count();
    let sinks: Vec<(&str, String)> = evidence
        .log_lines
        .iter()
        .map(|line| ("a log line", line.clone()))
        .chain(evidence.ledger.iter().map(|item| ("the ledger", item.to_string())))
        .chain(
            evidence
                .conversations
                .iter()
                .map(|item| ("the conversations", item.to_string())),
        )
        .chain(
            evidence
                .payments_requests
                .iter()
                .map(|body| ("payments", body.to_string())),
        )
        .chain(evidence.reads.iter().map(|read| ("a GET", read.body.clone())))
        .chain(evidence.exchanges.iter().map(|e| ("an answer", e.body.clone())))
        .chain(evidence.exchanges.iter().filter_map(|e| {
            let events = e.events.as_ref()?;
            Some(("an event stream", serde_json::to_string(events).unwrap_or_default()))
        }))
        .collect();
    add(
        "no sink holds a pasted card number whole, in any spelling (logs, tables, payments, GETs, answers, streams)",
        pasted,
        sinks
            .iter()
            .filter(|(_, text)| read_digits(text).contains(crate::clients::CHAOS_CARD))
            .map(|(sink, _)| format!("{sink} holds the card whole"))
            .take(5)
            .collect(),
    );
    let (checked, violations) = busy_after_the_turn_ended(evidence, &lines);
    add("a conversation is never busy after its turn ended", checked, violations);
    let days: Vec<&Value> = evidence
        .ledger
        .iter()
        .filter(|i| text(i, "pk").starts_with("budget#tokens#"))
        .collect();
    add(
        "the day's tokens never exceed the limit by more than one turn",
        days.len(),
        days.iter()
            .filter(|day| cents(day, "tokens") > evidence.tokens_per_day + evidence.turn_reservation)
            .map(|day| format!("{}: {} tokens", text(day, "pk"), cents(day, "tokens")))
            .collect(),
    );
    let (checked, violations) =
        written_only_after_a_later_yes(evidence, "change_delivery_address", &evidence.addresses_written);
    add(
        "no address is written without a stored proposal and a later yes, at most once a proposal",
        checked,
        violations,
    );
    let (checked, violations) = written_only_after_a_later_yes(evidence, "start_return", &evidence.returns_started);
    add(
        "no return is started without a stored proposal and a later yes, at most once a proposal",
        checked,
        violations,
    );
    let (checked, violations) = paid_by_a_refund_and_a_return(evidence);
    add(
        "no order is paid by a refund and a return for the same items (rule 7)",
        checked,
        violations,
    );
    add(
        "no return label's URL in any request to the model",
        evidence.model_requests,
        (evidence.model_saw_labels > 0)
            .then(|| format!("{} model requests held a label's URL", evidence.model_saw_labels))
            .into_iter()
            .collect(),
    );
    let streets = crate::model::CHAOS_STREETS;
    add(
        "no log line holds an address the model proposed",
        evidence.log_lines.len(),
        evidence
            .log_lines
            .iter()
            .filter(|line| streets.iter().any(|street| line.contains(street)))
            .map(|line| line.chars().take(120).collect())
            .take(5)
            .collect(),
    );
    for (name, checked, violations) in visitor_invariants(evidence, &lines) {
        add(name, checked, violations);
    }
    for (name, checked, violations) in live_invariants(evidence) {
        add(name, checked, violations);
    }
    add(
        "every refund left executing raised an event",
        evidence.left_executing.len(),
        evidence
            .left_executing
            .iter()
            .filter(|(_, state)| state != "unknown")
            .map(|(id, state)| format!("{id} is {state} after the sweep"))
            .collect(),
    );
    invariants
}

/// Contract 20: every event stream that was answered ends with exactly one
/// `done`, nothing after it, every block an event; and a 200's deltas since
/// the last `discard` are its reply. (An invocation that died has no answer,
/// as in JSON mode.)
fn stream_invariants(evidence: &Evidence<'_>) -> Vec<(&'static str, usize, Vec<String>)> {
    let streams: Vec<(&Exchange, &Vec<(String, Value)>)> = evidence
        .exchanges
        .iter()
        .filter_map(|e| e.events.as_ref().map(|events| (e, events)))
        .collect();
    let mut one_done = Vec::new();
    let mut well_formed = Vec::new();
    let mut drafts = Vec::new();
    let mut ok_streams = 0;
    for (exchange, events) in &streams {
        let dones = events.iter().filter(|(name, _)| name == "done").count();
        if dones != 1 || events.last().is_none_or(|(name, _)| name != "done") {
            one_done.push(format!(
                "{}: {dones} done, last {:?}",
                exchange.request_id,
                events.last().map(|e| &e.0)
            ));
        }
        if let Some((_, block)) = events
            .iter()
            .find(|(name, _)| !["progress", "delta", "discard", "done"].contains(&name.as_str()))
        {
            well_formed.push(format!("{}: {block}", exchange.request_id));
        }
        if exchange.status == Some(200) {
            ok_streams += 1;
            let from = events
                .iter()
                .rposition(|(name, _)| name == "discard")
                .map_or(0, |i| i + 1);
            let draft: String = events[from..]
                .iter()
                .filter(|(name, _)| name == "delta")
                .filter_map(|(_, data)| data["text"].as_str())
                .collect();
            let reply = serde_json::from_str::<Value>(&exchange.body)
                .ok()
                .and_then(|body| body["reply"].as_str().map(str::to_owned))
                .unwrap_or_default();
            if draft != reply {
                drafts.push(format!("{}: deltas {draft:?}, reply {reply:?}", exchange.request_id));
            }
        }
    }
    vec![
        (
            "every event stream ends with exactly one done, nothing after it",
            streams.len(),
            one_done,
        ),
        ("every block of an event stream is an event", streams.len(), well_formed),
        (
            "a 200 stream's deltas since the last discard are its reply",
            ok_streams,
            drafts,
        ),
    ]
}

/// Whether `line` holds the sandbox's address: its name, street, city or
/// whole postcode as whole words of the text (never inside other digits or
/// letters, as a timestamp's microseconds or an id would hold them).
pub fn holds_the_address(line: &str) -> bool {
    let (name, line1, city, postcode, _) = refund_chat_local::payments_sandbox::SHIP_TO;
    [name, line1, city, postcode]
        .iter()
        .any(|personal| holds_word(line, personal))
}

/// `needle` in `text`, with no letter or digit right before or after it.
fn holds_word(text: &str, needle: &str) -> bool {
    let alphanumeric_at = |index: Option<char>| index.is_some_and(char::is_alphanumeric);
    text.match_indices(needle).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + needle.len()..].chars().next();
        !alphanumeric_at(before) && !alphanumeric_at(after)
    })
}

/// A 409 "still answering the previous message" for a conversation whose
/// every other request sent before the 409 came had ended cleanly before
/// the refused one was sent (none ran beside it): answered, with no
/// outcome left unknown (a 503 may hide a lease that landed late,
/// a release that failed leaves one until the deadline, a killed
/// invocation's holds until its deadline).
fn busy_after_the_turn_ended(evidence: &Evidence<'_>, lines: &[Value]) -> (usize, Vec<String>) {
    let release_failed: HashSet<&str> = lines
        .iter()
        .filter(|l| l["op"] == "release" && l["level"] == "ERROR")
        .filter_map(|l| l["requestId"].as_str())
        .collect();
    // A re-send with the key continues the conversation its first try
    // began, named or not: a request reaches every conversation its scope does.
    let mut by_scope: HashMap<String, HashSet<String>> = HashMap::new();
    for e in evidence.exchanges {
        let named = by_scope.entry(scope_of(e)).or_default();
        named.extend(e.conversation_sent.clone());
        named.extend(e.conversation());
    }
    let names = |e: &Exchange, conversation: &str| by_scope.get(&scope_of(e)).is_some_and(|c| c.contains(conversation));
    let busy: Vec<&Exchange> = evidence
        .exchanges
        .iter()
        .filter(|e| e.status == Some(409) && e.body.contains("previous message"))
        .collect();
    let violations = busy
        .iter()
        .filter_map(|refused| {
            let conversation = refused.conversation_sent.as_deref()?;
            let unsettled = evidence.exchanges.iter().any(|earlier| {
                earlier.request_id != refused.request_id
                    && earlier.sent_tick < refused.answered_tick
                    && names(earlier, conversation)
                    && (earlier.answered_tick > refused.sent_tick
                        || matches!(earlier.status, None | Some(503))
                        || release_failed.contains(earlier.request_id.as_str()))
            });
            (!unsettled).then(|| format!("#{} {}: 409 in {conversation}", refused.index, refused.request_id))
        })
        .collect();
    (busy.len(), violations)
}

/// The refund scope's record id of a client's request: the key's, or the invocation's.
fn scope_of(exchange: &Exchange) -> String {
    match &exchange.key {
        Some(key) => refund_chat::refund::RefundScope::for_idempotency_key(&exchange.signed_in, key),
        None => refund_chat::refund::RefundScope::for_request(&exchange.signed_in, &exchange.request_id),
    }
    .record_id()
}

/// One stored exchange, as the checks read it.
struct Stored {
    conversation: String,
    /// The invocation that wrote it: names the message whatever masking did.
    request_id: String,
    seq: u64,
    status: String,
    scope: String,
    customer_message: String,
}

/// Each conversation's customer, from its header.
fn owners(evidence: &Evidence<'_>) -> HashMap<String, String> {
    evidence
        .conversations
        .iter()
        .filter(|i| i["sk"] == "head")
        .map(|i| (text(i, "pk"), text(i, "customer")))
        .collect()
}

/// How long after its stamp an exchange has surely landed (the append's
/// transaction, bounded by the ledger's timeout, tried a few times).
const LANDED_WITHIN_MS: u64 = 5_000;

/// The two invariants of a person's words (contract 18): a decision of a
/// refund whose conversation was there appended exactly one note (never
/// two), and no read showed a customer another's conversation.
fn hearing_back_invariants(evidence: &Evidence<'_>, refunds: &[&Value]) -> Vec<(&'static str, usize, Vec<String>)> {
    let mut notes: HashMap<String, usize> = HashMap::new();
    for item in evidence.conversations.iter().filter(|i| i["from"] == "person") {
        if let Some(record) = item["note_for"].as_str() {
            *notes.entry(record.to_owned()).or_insert(0) += 1;
        }
    }
    // When the turn that recorded each refund first stamped its exchange: a
    // decision before the exchange landed found no conversation to tell.
    // The stamp precedes the landing by at most the append's own bounded
    // tries, so only a decision well after it must have found one.
    let mut exchange_at: HashMap<&str, u64> = HashMap::new();
    for item in evidence
        .conversations
        .iter()
        .filter(|i| i["from"] != "person" && i["sk"].as_str().is_some_and(|sk| sk.starts_with("x#")))
    {
        if let (Some(record), Some(at)) = (
            item["refund_record"].as_str(),
            item["created_at"].as_str().and_then(refund_chat::clock::parse_utc),
        ) {
            let first = exchange_at.entry(record).or_insert(at);
            *first = (*first).min(at);
        }
    }
    let decided: Vec<&&Value> = refunds
        .iter()
        .filter(|r| r["conversation_id"].is_string() && r["decided_by"].is_string() && !r["reissue_of"].is_string())
        .collect();
    let mut wrong_notes: Vec<String> = decided
        .iter()
        .filter_map(|record| {
            let id = text(record, "record_id");
            let found = notes.get(&id).copied().unwrap_or(0);
            let decided_at = refund_chat::clock::parse_utc(&text(record, "decided_at")).unwrap_or(0);
            let told_after_its_exchange = exchange_at
                .get(id.as_str())
                .is_some_and(|at| at + LANDED_WITHIN_MS < decided_at);
            let fine = found == 1 || (found == 0 && !told_after_its_exchange);
            (!fine).then(|| format!("{id} (decided at {}) has {found} notes", text(record, "decided_at")))
        })
        .collect();
    let decided_ids: HashSet<String> = decided.iter().map(|r| text(r, "record_id")).collect();
    wrong_notes.extend(
        notes
            .keys()
            .filter(|id| !decided_ids.contains(*id))
            .map(|id| format!("a note for {id}, which no person decided")),
    );
    let owners = owners(evidence);
    let read_by_another: Vec<String> = evidence
        .reads
        .iter()
        .filter(|read| {
            let foreign = owners
                .get(&read.conversation)
                .is_some_and(|owner| *owner != read.signed_in);
            let shown = read.status == Some(200) || read.body.contains("\"messages\"");
            (foreign && shown) || (read.status == Some(200) && !owners.contains_key(&read.conversation))
        })
        .map(|read| format!("{} read {}: {:?}", read.signed_in, read.conversation, read.status))
        .collect();
    vec![
        (
            "every decision of a refund with a conversation appended exactly one note",
            decided.len(),
            wrong_notes,
        ),
        (
            "no customer reads another's conversation through the GET",
            evidence.reads.len(),
            read_by_another,
        ),
    ]
}

/// The customer's message a stored exchange begins with.
fn customer_message_of(item: &Value) -> Option<String> {
    let messages: Value = serde_json::from_str(item["messages"].as_str().unwrap_or("[]")).ok()?;
    messages
        .as_array()?
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .map(str::to_owned)
}

/// Contracts 26 and 28: each write the order system took (an address, a
/// return: `(order, the write's body)`) was proposed (a stored exchange of
/// the conversation holds the call of `tool` with exactly that order and
/// body, answered `confirm`), the exchange that made it (the same call,
/// answered otherwise) has a customer message that is an explicit yes, and
/// the proposal was the last exchange the conversation held when that turn
/// took it (its `taken_at`: storage order is the order of saving, and a
/// person's note of another turn may be saved between them); no proposal
/// was written more often than it was stored.
fn written_only_after_a_later_yes(
    evidence: &Evidence<'_>,
    tool: &str,
    writes: &[(String, Value)],
) -> (usize, Vec<String>) {
    let yes = refund_chat::handoff::screen::YesPhrases::default();
    // (conversation, seq, order, the arguments as the write's body) of each stored proposal.
    let mut proposals: Vec<(String, u64, String, Value)> = Vec::new();
    // (conversation, the count it held when the turn took it, order, body, a yes?) of each call that was no proposal.
    let mut writers: Vec<(String, u64, String, Value, bool)> = Vec::new();
    for item in evidence
        .conversations
        .iter()
        .filter(|i| i["sk"].as_str().is_some_and(|sk| sk.starts_with("x#")))
    {
        let messages: Value = serde_json::from_str(item["messages"].as_str().unwrap_or("[]")).unwrap_or(Value::Null);
        let messages = messages.as_array().cloned().unwrap_or_default();
        let results: HashMap<&str, Value> = messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .filter_map(|m| {
                Some((
                    m["tool_call_id"].as_str()?,
                    serde_json::from_str::<Value>(m["content"].as_str().unwrap_or_default()).unwrap_or(Value::Null),
                ))
            })
            .collect();
        let said_yes = customer_message_of(item).is_some_and(|message| yes.says_yes(&message));
        // Before `taken_at` was kept, the turn took it at its own seq.
        let taken_at = match item.get("taken_at") {
            Some(_) => cents(item, "taken_at"),
            None => cents(item, "seq"),
        };
        for call in messages
            .iter()
            .filter(|m| m["role"] == "assistant")
            .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
            .filter(|call| call["name"] == tool)
        {
            let Some(result) = call["id"].as_str().and_then(|id| results.get(id)) else {
                continue;
            };
            let Ok(arguments) = serde_json::from_str::<Value>(call["arguments"].as_str().unwrap_or_default()) else {
                continue;
            };
            let mut body = arguments.clone();
            let order = text(&arguments, "order_id");
            if let Some(fields) = body.as_object_mut() {
                fields.remove("order_id");
            }
            if result["status"] == "confirm" {
                proposals.push((text(item, "pk"), cents(item, "seq"), order, body));
            } else {
                writers.push((text(item, "pk"), taken_at, order, body, said_yes));
            }
        }
    }
    let mut violations = Vec::new();
    let mut written: HashMap<(String, String), usize> = HashMap::new();
    for (order, body) in writes {
        let entry = written.entry((order.clone(), body.to_string())).or_insert(0);
        *entry += 1;
        let matching: Vec<&(String, u64, String, Value)> = proposals
            .iter()
            .filter(|(_, _, o, a)| o == order && a == body)
            .collect();
        if matching.len() < *entry {
            violations.push(format!(
                "order {order}: written {} times, proposed {} times",
                entry,
                matching.len()
            ));
            continue;
        }
        // Contract 26, tightened: the yes is the customer's very next
        // message after the proposal, and the whole of it.
        let made_by_a_next_yes = writers.iter().any(|(conversation, taken_at, o, a, said_yes)| {
            *said_yes
                && o == order
                && a == body
                && matching
                    .iter()
                    .any(|(c, seq, _, _)| c == conversation && seq + 1 == *taken_at)
        });
        if !made_by_a_next_yes {
            violations.push(format!(
                "order {order}: written though no turn that took the conversation right after its proposal had an explicit yes"
            ));
        }
    }
    (writes.len(), violations)
}

/// The three invariants of conversations (contract 11).
fn conversation_invariants(evidence: &Evidence<'_>, summaries: &[&Value]) -> Vec<(&'static str, usize, Vec<String>)> {
    let owners = owners(evidence);
    let stored: Vec<Stored> = evidence
        .conversations
        .iter()
        .filter(|i| i["sk"].as_str().is_some_and(|sk| sk.starts_with("x#")))
        // A person's words are no customer's message (contract 18): checked apart.
        .filter(|i| i["from"] != "person")
        .map(|i| {
            let messages: Value = serde_json::from_str(i["messages"].as_str().unwrap_or("[]")).unwrap_or(Value::Null);
            let customer_message = messages
                .as_array()
                .into_iter()
                .flatten()
                .find(|m| m["role"] == "user")
                .and_then(|m| m["content"].as_str())
                .unwrap_or_default()
                .to_owned();
            Stored {
                conversation: text(i, "pk"),
                request_id: text(i, "request_id"),
                seq: cents(i, "seq"),
                status: text(i, "status"),
                scope: text(i, "refund_record"),
                customer_message,
            }
        })
        .collect();
    let append_failed: HashSet<&str> = summaries
        .iter()
        .filter(|s| s["conversation_appended"] == "failed")
        .filter_map(|s| s["requestId"].as_str())
        .collect();

    // Per scope: the client's requests, their first 200, whether an append failed.
    let mut first_sent: HashMap<String, usize> = HashMap::new();
    let mut first_ok: HashMap<String, (usize, String)> = HashMap::new();
    let mut failed_append: HashSet<String> = HashSet::new();
    for exchange in evidence.exchanges {
        let scope = scope_of(exchange);
        let sent = first_sent.entry(scope.clone()).or_insert(exchange.sent_tick);
        *sent = (*sent).min(exchange.sent_tick);
        if append_failed.contains(exchange.request_id.as_str()) {
            failed_append.insert(scope.clone());
        }
        if let (Some(200), Some(conversation)) = (exchange.status, exchange.conversation()) {
            let ok = first_ok
                .entry(scope)
                .or_insert((exchange.answered_tick, conversation.clone()));
            if exchange.answered_tick < ok.0 {
                *ok = (exchange.answered_tick, conversation);
            }
        }
    }
    let mut ok_exchanges: HashMap<(&str, &str), usize> = HashMap::new();
    for item in stored.iter().filter(|s| s.status == "200") {
        *ok_exchanges
            .entry((item.conversation.as_str(), item.scope.as_str()))
            .or_insert(0) += 1;
    }
    let mut lost_or_doubled: Vec<String> = first_ok
        .iter()
        .filter_map(|(scope, (_, conversation))| {
            let found = ok_exchanges
                .get(&(conversation.as_str(), scope.as_str()))
                .copied()
                .unwrap_or(0);
            let fine = found == 1 || (found == 0 && failed_append.contains(scope));
            (!fine).then(|| format!("scope {scope} in {conversation}: {found} exchanges for its 200"))
        })
        .collect();
    lost_or_doubled.extend(
        ok_exchanges
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|((conversation, scope), n)| format!("scope {scope} in {conversation}: {n} exchanges")),
    );

    // A message answered before another was sent comes first in its conversation.
    let mut by_conversation: BTreeMap<&str, Vec<&Stored>> = BTreeMap::new();
    for item in stored.iter().filter(|s| s.status == "200") {
        by_conversation
            .entry(item.conversation.as_str())
            .or_default()
            .push(item);
    }
    let mut out_of_order = Vec::new();
    for (conversation, items) in &mut by_conversation {
        items.sort_by_key(|item| item.seq);
        for (i, earlier) in items.iter().enumerate() {
            for later in &items[i + 1..] {
                let answered_later_first = first_ok.get(&later.scope).map(|(tick, _)| *tick);
                let sent_earlier = first_sent.get(&earlier.scope).copied();
                if let (Some(answered), Some(sent)) = (answered_later_first, sent_earlier)
                    && answered < sent
                {
                    out_of_order.push(format!(
                        "{conversation}: #{} was answered before #{} was sent, yet comes after it",
                        later.seq, earlier.seq
                    ));
                }
            }
        }
    }

    // Nobody's conversation reaches another customer. A message is known
    // by the invocation that wrote it, which masking cannot touch (a
    // marker glued to a card-shaped run may be masked with it, contract 23),
    // else by its marker.
    let sender: HashMap<&str, &str> = evidence
        .exchanges
        .iter()
        .map(|e| (e.marker.as_str(), e.signed_in.as_str()))
        .collect();
    let mut sent_by: HashMap<&str, &str> = evidence
        .exchanges
        .iter()
        .map(|e| (e.request_id.as_str(), e.signed_in.as_str()))
        .collect();
    // A visitor's words stay in the conversation a customer claimed (contract 27).
    sent_by.extend(
        evidence
            .visitor_exchanges
            .iter()
            .filter_map(|e| Some((e.request_id.as_str(), e.user_id.as_deref()?))),
    );
    let claimed_from: HashMap<String, String> = evidence
        .conversations
        .iter()
        .filter(|i| i["sk"] == "head" && !text(i, "claimed_from").is_empty())
        .map(|i| (text(i, "pk"), text(i, "claimed_from")))
        .collect();
    let mut seen_by_another: Vec<String> = stored
        .iter()
        .filter(|item| {
            let owner = owners.get(&item.conversation).map(String::as_str);
            let by = match sent_by.get(item.request_id.as_str()) {
                Some(customer) => Some(*customer),
                None => sender.get(crate::model::marker_of(&item.customer_message)).copied(),
            };
            by != owner && by != claimed_from.get(&item.conversation).map(String::as_str)
        })
        .map(|item| {
            format!(
                "{} #{} holds a message of another customer",
                item.conversation, item.seq
            )
        })
        .collect();
    for exchange in evidence.exchanges {
        if let Some(owner) = exchange.conversation().and_then(|id| owners.get(&id))
            && *owner != exchange.signed_in
        {
            seen_by_another.push(format!(
                "#{} {}: answered with {owner}'s conversation",
                exchange.index, exchange.request_id
            ));
        }
        let foreign = exchange
            .conversation_sent
            .as_ref()
            .and_then(|id| owners.get(id))
            .is_some_and(|owner| *owner != exchange.signed_in);
        // The key's record is checked before the conversation: a 409 for the
        // customer's own key says nothing of the conversation, nor does a 503
        // (a store that cannot be reached answers so for any id).
        let own_key_busy = exchange.status == Some(409) && exchange.body.contains("Idempotency-Key");
        let refused = matches!(exchange.status, Some(403 | 404 | 503)) || own_key_busy;
        if foreign && !refused && !(exchange.mortal && exchange.status.is_none()) {
            seen_by_another.push(format!(
                "#{} {}: another customer's conversation got {:?}",
                exchange.index, exchange.request_id, exchange.status
            ));
        }
    }
    vec![
        (
            "no exchange is lost or duplicated for a message that got a 200",
            first_ok.len(),
            lost_or_doubled,
        ),
        (
            "every conversation's order of exchanges is the order of its 200s",
            by_conversation.len(),
            out_of_order,
        ),
        (
            "no conversation's text is seen by another customer",
            stored.len() + evidence.exchanges.len(),
            seen_by_another,
        ),
    ]
}

/// Section 8's rule 7: each order the order system started a return of
/// pays, when the parcel arrives, what the return said (`refund_cents`:
/// the item's price less what was refunded before it). Refunds made of the
/// order besides must leave room for it: what the refunds moved plus what
/// the returns will pay is at most what was paid.
fn paid_by_a_refund_and_a_return(evidence: &Evidence<'_>) -> (usize, Vec<String>) {
    paid_twice(&evidence.returns_started, &evidence.money_moved, &evidence.order_paid)
}

fn paid_twice(
    returns_started: &[(String, Value)],
    money_moved: &[(String, String, u64)],
    order_paid: &HashMap<String, u64>,
) -> (usize, Vec<String>) {
    let mut returned: BTreeMap<&str, u64> = BTreeMap::new();
    for (order, started) in returns_started {
        *returned.entry(order.as_str()).or_default() += started["refund_cents"].as_u64().unwrap_or_default();
    }
    let violations = returned
        .iter()
        .filter_map(|(&order, &by_return)| {
            let by_refunds: u64 = money_moved
                .iter()
                .filter(|(_, refunded, _)| refunded == order)
                .map(|(_, _, cents)| cents)
                .sum();
            let paid = order_paid.get(order).copied().unwrap_or_default();
            (by_refunds + by_return > paid).then(|| {
                format!("{order}: refunds moved {by_refunds} cents and its return pays {by_return} of {paid} paid")
            })
        })
        .collect();
    (returned.len(), violations)
}

fn is_guard(item: &Value) -> bool {
    let pk = item["pk"].as_str().unwrap_or_default();
    pk.starts_with("order#") || pk.starts_with("daily#")
}

/// Every guard: no number below zero, every record it counts exists and may
/// have moved money, and a daily total is the sum of the records it counts.
fn guard_violations(ledger: &[Value], refunds: &[&Value]) -> Vec<String> {
    let by_id: HashMap<String, &Value> = refunds.iter().map(|r| (text(r, "record_id"), *r)).collect();
    let mut violations = Vec::new();
    for guard in ledger.iter().filter(|i| is_guard(i)) {
        let pk = text(guard, "pk");
        for (name, value) in guard.as_object().into_iter().flatten() {
            if value.as_str().is_some_and(|v| v.starts_with('-')) {
                violations.push(format!("{pk}: {name} = {value}"));
            }
        }
        let live: Vec<String> = guard["live"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|id| id.as_str().map(str::to_owned))
            .collect();
        let mut sum = 0;
        for id in &live {
            match by_id.get(id) {
                None => violations.push(format!("{pk} counts {id}, which has no record")),
                Some(record) => {
                    let moved_none = matches!(record["state"].as_str(), Some("rejected" | "rejected_by_staff"))
                        || record["resolution"] == "not_executed";
                    if moved_none {
                        violations.push(format!("{pk} still counts {id}, which moved no money"));
                    }
                    sum += cents(record, "amount_cents");
                }
            }
        }
        if pk.starts_with("daily#") && cents(guard, "total_cents") != sum {
            violations.push(format!(
                "{pk}: total {} but its records sum to {sum}",
                cents(guard, "total_cents")
            ));
        }
    }
    violations
}

/// The digits of `text` as a person reads them (ASCII and fullwidth; JSON
/// writes both as they are), every other character left out: a card number
/// split by any separator still reads whole.
fn read_digits(text: &str) -> String {
    text.chars()
        .filter_map(|c| match c as u32 {
            0x30..=0x39 => Some(c),
            0xff10..=0xff19 => char::from_u32(c as u32 - 0xff10 + 0x30),
            _ => None,
        })
        .collect()
}

/// Contract 27: visitors and guests.
fn visitor_invariants(evidence: &Evidence<'_>, lines: &[Value]) -> Vec<(&'static str, usize, Vec<String>)> {
    let is_visitor = |id: &str| refund_chat::visitor::is_visitor(id);
    // No order read or refund without a verified identity.
    let visitor_turns: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] == "summary" && is_visitor(l["user_id"].as_str().unwrap_or_default()))
        .collect();
    let mut unverified_acts: Vec<String> = visitor_turns
        .iter()
        .filter(|l| {
            l["order_reads"].as_u64().unwrap_or(0) > 0
                || l["refund_checks"].as_u64().unwrap_or(0) > 0
                || !matches!(l["refund_outcome"].as_str(), None | Some("not_attempted"))
        })
        .map(|l| format!("a visitor's turn read an order or tried a refund: {}", l["user_id"]))
        .collect();
    unverified_acts.extend(
        evidence
            .payments_requests
            .iter()
            .filter(|r| is_visitor(r["user_id"].as_str().unwrap_or_default()))
            .map(|r| format!("payments asked for a visitor: {}", r["order_id"])),
    );
    unverified_acts.extend(
        evidence
            .ledger
            .iter()
            .filter(|i| i["kind"] == "refund" && is_visitor(&text(i, "user_id")))
            .map(|i| format!("a refund record of a visitor: {}", text(i, "record_id"))),
    );
    unverified_acts.extend(
        evidence
            .visitor_exchanges
            .iter()
            .filter(|e| e.body.contains("refund_id") || e.body.contains("awaiting_approval\":true"))
            .map(|e| {
                format!(
                    "a visitor's answer names a refund: {}",
                    e.body.chars().take(120).collect::<String>()
                )
            }),
    );
    unverified_acts.extend(
        evidence
            .unverified
            .iter()
            .filter(|status| !matches!(status, Some(401) | None))
            .map(|status| format!("a guest whose e-mail is not verified was answered {status:?}")),
    );
    // No conversation claimed twice.
    let mut owners: HashMap<&str, HashSet<&str>> = HashMap::new();
    for claim in evidence.claims.iter().filter(|c| c.status == Some(200)) {
        owners
            .entry(claim.conversation.as_str())
            .or_default()
            .insert(claim.claimer.as_str());
    }
    let claimed_twice: Vec<String> = owners
        .iter()
        .filter(|(_, claimers)| claimers.len() > 1)
        .map(|(id, claimers)| format!("{id} claimed by {claimers:?}"))
        .collect();
    // No visitor reads another's conversation.
    let read_another: Vec<String> = evidence
        .visitor_reads
        .iter()
        // Only a 200 shows a conversation; a 404 is the answer, a 503 shows nothing.
        .filter(|r| r.status == Some(200))
        .map(|r| format!("another visitor's token read {}: {:?}", r.conversation, r.status))
        .collect();
    // No e-mail in any log line.
    let emails: Vec<String> = evidence
        .log_lines
        .iter()
        .filter(|line| line.contains(crate::clients::GUEST_DOMAIN))
        .map(|line| line.chars().take(120).collect())
        .take(5)
        .collect();
    // Customers (and guests) are never refused for what visitors spent: a
    // 429 for one of them is their own hour's turns or day's tokens spent.
    let counter = |kind: &str, user: &str| {
        let prefix = format!("budget#{kind}#u{}:{user}#", user.len());
        evidence
            .ledger
            .iter()
            .filter(|i| text(i, "pk").starts_with(&prefix))
            .map(|i| cents(i, kind))
            .max()
            .unwrap_or(0)
    };
    let refused: Vec<&Exchange> = evidence.exchanges.iter().filter(|e| e.status == Some(429)).collect();
    let not_their_own: Vec<String> = refused
        .iter()
        .filter(|e| {
            counter("turns", &e.signed_in) < evidence.turns_per_hour
                && counter("tokens", &e.signed_in) + evidence.turn_reservation <= evidence.tokens_per_day
        })
        .map(|e| format!("{} refused (429) with their own budget left", e.signed_in))
        .collect();
    let visitors_refused = evidence
        .visitor_exchanges
        .iter()
        .filter(|e| e.status == Some(429))
        .count();
    vec![
        (
            "no order read or refund without a verified identity (visitors, unverified guests)",
            visitor_turns.len() + evidence.visitor_exchanges.len() + evidence.unverified.len(),
            unverified_acts,
        ),
        ("no conversation is claimed twice", evidence.claims.len(), claimed_twice),
        (
            "no visitor reads another visitor's conversation",
            evidence.visitor_reads.len(),
            read_another,
        ),
        ("no log line holds a guest's e-mail", evidence.log_lines.len(), emails),
        (
            "customers and guests are never refused for the visitors' spend (a 429 is their own budget)",
            refused.len() + visitors_refused,
            not_their_own,
        ),
    ]
}

/// Contract 31: a poke is three fields and carries no words, no order id
/// and no amount; and it was published after the write it announces: its
/// conversation held, when the poke arrived, an exchange (and, for a
/// handoff, the handoff) stored no later.
fn live_invariants(evidence: &Evidence<'_>) -> Vec<(&'static str, usize, Vec<String>)> {
    let kinds: Vec<&str> = refund_chat::push::Kind::ALL.iter().map(|kind| kind.as_str()).collect();
    let mut shape = Vec::new();
    let mut after = Vec::new();
    for (channel, raw, at) in &evidence.pokes {
        let event: Value = serde_json::from_str(raw).unwrap_or_default();
        let fields: Vec<&String> = event.as_object().map(|o| o.keys().collect()).unwrap_or_default();
        let id = event["conversation_id"].as_str().unwrap_or_default();
        let well_formed = fields == ["conversation_id", "kind", "seq"]
            && event["seq"].is_u64()
            && kinds.contains(&event["kind"].as_str().unwrap_or_default())
            && id.len() == 34
            && id.starts_with("c_")
            && id[2..].bytes().all(|b| b.is_ascii_hexdigit());
        let names_an_order = evidence.order_paid.keys().any(|order| raw.contains(order.as_str()));
        if !well_formed || names_an_order {
            shape.push(format!("{channel}: {raw}"));
            continue;
        }
        let arrived = refund_chat::clock::rfc3339(*at);
        let items: Vec<&Value> = evidence.conversations.iter().filter(|i| i["pk"] == id).collect();
        let stored_before = items
            .iter()
            .filter(|i| i["sk"].as_str().is_some_and(|sk| sk.starts_with("x#")))
            .any(|i| {
                i["created_at"]
                    .as_str()
                    .is_some_and(|created| created <= arrived.as_str())
            });
        let handoff_before = event["kind"] != "handoff"
            || items
                .iter()
                .any(|i| i["handoff_at"].as_str().is_some_and(|at| at <= arrived.as_str()));
        if !(stored_before && handoff_before) {
            after.push(format!("{raw} arrived at {arrived} before its write"));
        }
    }
    vec![
        (
            "a live poke is three fields: no words, no order id, no amount",
            evidence.pokes.len(),
            shape,
        ),
        (
            "a live poke was published after the write it announces",
            evidence.pokes.len(),
            after,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::{holds_the_address, holds_word, paid_twice};

    /// A refund before the return leaves the return less to pay; a refund
    /// after it pays the same item twice.
    #[test]
    fn an_item_paid_by_a_refund_and_its_return_is_found() {
        let paid = [("O-1".to_owned(), 2000), ("O-2".to_owned(), 2000)]
            .into_iter()
            .collect();
        let returns = [
            ("O-1".to_owned(), serde_json::json!({"refund_cents": 1500})),
            ("O-2".to_owned(), serde_json::json!({"refund_cents": 2000})),
        ];
        let moved = [
            ("c-1".to_owned(), "O-1".to_owned(), 500),
            ("c-1".to_owned(), "O-2".to_owned(), 1250),
        ];
        let (checked, violations) = paid_twice(&returns, &moved, &paid);
        assert_eq!(checked, 2);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].starts_with("O-2:"), "{violations:?}");
    }

    #[test]
    fn the_address_is_found_as_words_never_inside_a_timestamp_or_an_id() {
        let (_, line1, city, postcode, _) = refund_chat_local::payments_sandbox::SHIP_TO;
        // Found where it would leak: a log line's field, a stored exchange's text.
        assert!(holds_the_address(&format!(
            r#"{{"level":"INFO","ship_to":"{postcode}"}}"#
        )));
        assert!(holds_the_address(&format!(
            r#"{{"messages":"[{{\"role\":\"tool\",\"content\":\"{line1}, {city}\"}}]"}}"#
        )));
        assert!(holds_the_address(&format!("sent to {city}.")));
        // Never inside other text: the false alarm of a timestamp's
        // microseconds (the old postcode, 69002), an id, a longer word.
        assert!(!holds_the_address(r#"{"timestamp":"2026-12-02T22:05:39.869002Z"}"#));
        let glued: String = postcode.split(' ').collect();
        assert!(!holds_the_address(&format!("rr-{glued}1")));
        assert!(!holds_the_address(&format!("{city}s")));
        assert!(!holds_the_address(&format!("x{}", postcode)));
        // Whole words, whatever the value: a digits-only postcode too.
        assert!(!holds_word(r#""timestamp":"2026-12-02T22:05:39.869002Z""#, "69002"));
        assert!(holds_word(r#""postcode":"69002""#, "69002"));
    }
}
