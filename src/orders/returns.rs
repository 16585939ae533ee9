//! The `start_return` tool (contract 28): the agent's second write that is
//! not money. Its declaration, the checks its arguments pass against the
//! order read afresh, the proposal's hash, code's own lines for the
//! customer, and what the model reads back.
//!
//! The customer's yes is held by the one mechanism every write goes through
//! ([`crate::confirm`]). What the model reads back names the return by its
//! id, refund and expiry, never the label's URL: the link reaches the
//! customer in code's own line, and only on `RETURN_LABEL_ORIGINS`, so the
//! model can neither be made to invent one nor to send one elsewhere.

use std::sync::LazyLock;

use serde_json::{Value, json};

use super::{Order, OrderStatus};
use crate::refund::money::AmountCents;
use crate::refund::tool::{SchemaFailure, ToolSchema, no_such_order};

pub const TOOL_NAME: &str = "start_return";

/// Days after delivery a return may be started, unless `RETURN_WINDOW_DAYS` says otherwise.
pub const DEFAULT_WINDOW_DAYS: u32 = 30;

pub const TOOL_DESCRIPTION: &str = "Start a return of items of a customer's delivered order: each item named \
     exactly as get_order names it, how many, and why. The first call starts nothing: it returns status confirm \
     and a summary; ask the customer to answer yes. Only after their yes, call again with exactly the same \
     arguments: that starts it. A damaged item, a wrong item or one not as described goes to a person. Never say \
     the return started unless the status is started. The shop's own line gives the customer the label; the \
     refund is the shop's, once the parcel arrives.";

/// The contract's schema (section 28), strict mode's form.
const PARAMETERS_JSON: &str = r#"{"type":"object","properties":{"order_id":{"type":"string","minLength":1,"maxLength":64},"items":{"type":"array","minItems":1,"maxItems":20,"items":{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":200},"quantity":{"type":"integer","minimum":1,"maximum":99}},"required":["name","quantity"],"additionalProperties":false}},"reason":{"type":"string","enum":["changed_mind","wrong_size","damaged","wrong_item","not_as_described"]}},"required":["order_id","items","reason"],"additionalProperties":false}"#;

static SCHEMA: LazyLock<ToolSchema> = LazyLock::new(|| ToolSchema::compile(PARAMETERS_JSON));

pub fn parameters_schema() -> &'static Value {
    SCHEMA.parameters()
}

/// The schema declared to the model with `strict: true`.
pub fn declared_parameters() -> &'static Value {
    SCHEMA.declared()
}

/// Compiles the validator before the first request needs it.
pub fn warm_up() {
    LazyLock::force(&SCHEMA);
}

/// Why the customer sends items back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReturnReason {
    ChangedMind,
    WrongSize,
    Damaged,
    WrongItem,
    NotAsDescribed,
}

impl ReturnReason {
    const ALL: [ReturnReason; 5] = [
        ReturnReason::ChangedMind,
        ReturnReason::WrongSize,
        ReturnReason::Damaged,
        ReturnReason::WrongItem,
        ReturnReason::NotAsDescribed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ReturnReason::ChangedMind => "changed_mind",
            ReturnReason::WrongSize => "wrong_size",
            ReturnReason::Damaged => "damaged",
            ReturnReason::WrongItem => "wrong_item",
            ReturnReason::NotAsDescribed => "not_as_described",
        }
    }

    pub fn parse(text: &str) -> Option<ReturnReason> {
        ReturnReason::ALL.into_iter().find(|reason| reason.as_str() == text)
    }

    /// As the customer reads it in code's line.
    fn in_words(self) -> &'static str {
        match self {
            ReturnReason::ChangedMind => "changed my mind",
            ReturnReason::WrongSize => "wrong size",
            ReturnReason::Damaged => "damaged",
            ReturnReason::WrongItem => "wrong item",
            ReturnReason::NotAsDescribed => "not as described",
        }
    }

    /// Not a return the agent settles (contract 28): the item's fault is
    /// the shop's, and a person decides, as a damaged item's refund does.
    pub fn needs_a_person(self) -> bool {
        matches!(
            self,
            ReturnReason::Damaged | ReturnReason::WrongItem | ReturnReason::NotAsDescribed
        )
    }
}

/// One line of a return: an item as the order names it, and how many.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReturnItem {
    pub name: String,
    pub quantity: u32,
}

/// A call's arguments, once they passed the schema. The items are kept in
/// one form whatever order or repetition the model wrote them in (one line
/// per name, by name), so "the same arguments" means the same return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReturnArguments {
    pub order_id: String,
    pub items: Vec<ReturnItem>,
    pub reason: ReturnReason,
}

impl ReturnArguments {
    /// The proposal's hash: the order, the reason and each line.
    pub fn hash(&self) -> [u8; 32] {
        let quantities: Vec<String> = self.items.iter().map(|item| item.quantity.to_string()).collect();
        let mut fields = vec![self.order_id.as_str(), self.reason.as_str()];
        for (item, quantity) in self.items.iter().zip(&quantities) {
            fields.push(&item.name);
            fields.push(quantity);
        }
        crate::confirm::hash_of(fields)
    }

    /// "1 × Blue mug, 2 × Linen cushion".
    fn items_in_words(&self) -> String {
        self.items
            .iter()
            .map(|item| format!("{} × {}", item.quantity, crate::untrusted::visible(&item.name)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// What the model reads of the proposal: the order and the lines.
    pub fn summary(&self) -> String {
        format!(
            "return from order {}: {}, reason: {}",
            crate::untrusted::order_id_for_event(&self.order_id),
            self.items_in_words(),
            self.reason.in_words()
        )
    }

    /// Code's own line for the customer, added to the reply of the turn
    /// that proposed: exactly what will be written and what it refunds by
    /// the order's prices, so the customer's yes is to exactly that.
    pub fn confirm_line(&self, refund: &Refund) -> String {
        format!(
            "To confirm: return from order {}: {}, reason: {}; refund of {} once it arrives. Answer yes to start \
             it; anything else starts nothing.",
            crate::untrusted::order_id_for_event(&self.order_id),
            self.items_in_words(),
            self.reason.in_words(),
            refund
        )
    }

    /// The body of the order system's write (contract 28).
    pub fn body(&self) -> Value {
        json!({ "items": self.items, "reason": self.reason.as_str() })
    }
}

/// What a return refunds, by the order's prices (the order system's 201
/// says what it will refund; this is what the customer is asked to confirm).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refund {
    pub amount: AmountCents,
    pub currency: String,
}

impl std::fmt::Display for Refund {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.amount, crate::untrusted::visible(&self.currency))
    }
}

/// The arguments the model gave, once they passed the schema and the card check.
pub fn parse_arguments(raw: &str) -> Result<ReturnArguments, SchemaFailure> {
    let value = SCHEMA.parse(TOOL_NAME, raw)?;
    let order_id = value["order_id"]
        .as_str()
        .ok_or_else(|| SchemaFailure::invalid_field(TOOL_NAME, "order_id"))?
        .to_owned();
    if crate::refund::tool::is_card_shaped(&order_id) {
        return Err(SchemaFailure::card_shaped_order_id(TOOL_NAME));
    }
    let reason = value["reason"]
        .as_str()
        .and_then(ReturnReason::parse)
        .ok_or_else(|| SchemaFailure::invalid_field(TOOL_NAME, "reason"))?;
    let mut items: Vec<ReturnItem> = Vec::new();
    for line in value["items"].as_array().into_iter().flatten() {
        let (Some(name), Some(quantity)) = (line["name"].as_str(), line["quantity"].as_u64()) else {
            return Err(SchemaFailure::invalid_field(TOOL_NAME, "items"));
        };
        let quantity = u32::try_from(quantity).map_err(|_| SchemaFailure::invalid_field(TOOL_NAME, "items"))?;
        match items.iter_mut().find(|item| item.name == name) {
            Some(item) => item.quantity = item.quantity.saturating_add(quantity),
            None => items.push(ReturnItem {
                name: name.to_owned(),
                quantity,
            }),
        }
    }
    items.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(ReturnArguments {
        order_id,
        items,
        reason,
    })
}

/// Why code refuses a return before anything is proposed or written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    NotDelivered(OrderStatus),
    OutsideWindow {
        days: u32,
    },
    ReturnOpen,
    /// An item the order does not name.
    NotOnOrder(String),
    /// More of an item than the order holds less what was returned.
    MoreThanHolds {
        name: String,
        returnable: u32,
    },
}

impl Refusal {
    /// As the conversation records it and the metrics count it.
    pub fn outcome(&self) -> &'static str {
        match self {
            Refusal::NotDelivered(_) => "not_delivered",
            Refusal::OutsideWindow { .. } => "outside_window",
            Refusal::ReturnOpen => "return_open",
            Refusal::NotOnOrder(_) => "not_on_order",
            Refusal::MoreThanHolds { .. } => "more_than_holds",
        }
    }

    /// What the model is told: why, and that nothing was written.
    pub fn result(&self, order: &Order) -> Value {
        let why = match self {
            Refusal::NotDelivered(status) => format!(
                "the order is {}, not delivered: only a delivered order can be returned",
                status.as_str()
            ),
            Refusal::OutsideWindow { days } => format!(
                "the order was delivered more than {days} days ago: the return window has closed. A person from the \
                 support team can help: offer to pass the customer to a person"
            ),
            Refusal::ReturnOpen => "the order has a return open already: at most one open return per order".into(),
            Refusal::NotOnOrder(_) => format!(
                "the order holds no item of that name; its items are named {}",
                names(order)
            ),
            Refusal::MoreThanHolds { returnable, .. } => format!(
                "more of an item than can be returned: {returnable} of it remains returnable (the order's items: {})",
                names(order)
            ),
        };
        json!({ "error": format!("{why}. Nothing was written") })
    }
}

/// The order's item names, quoted, as the model must name them.
fn names(order: &Order) -> String {
    order
        .items
        .iter()
        .map(|item| format!("{:?}", crate::untrusted::visible(&item.name)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Contract 28's checks, against the order read afresh: delivered, within
/// `window_days` of its delivery, no return open, and every line an item
/// the order names with no more than it holds less what was returned.
/// What the return refunds by the order's prices, or why not.
pub fn check(order: &Order, arguments: &ReturnArguments, window_days: u32, now_ms: u64) -> Result<Refund, Refusal> {
    if order.status != OrderStatus::Delivered {
        return Err(Refusal::NotDelivered(order.status));
    }
    let window_ms = u64::from(window_days) * 86_400_000;
    match order.delivered_at_ms {
        Some(delivered) if now_ms <= delivered.saturating_add(window_ms) => {}
        // Delivered with no time: the window cannot be shown to be open.
        _ => return Err(Refusal::OutsideWindow { days: window_days }),
    }
    if order.has_open_return {
        return Err(Refusal::ReturnOpen);
    }
    let mut cents: u64 = 0;
    for line in &arguments.items {
        let held: Vec<&super::Item> = order.items.iter().filter(|item| item.name == line.name).collect();
        if held.is_empty() {
            return Err(Refusal::NotOnOrder(line.name.clone()));
        }
        let returnable: u32 = held
            .iter()
            .map(|item| item.quantity.saturating_sub(item.returned_quantity))
            .sum();
        if line.quantity > returnable {
            return Err(Refusal::MoreThanHolds {
                name: line.name.clone(),
                returnable,
            });
        }
        let price = held.iter().map(|item| item.unit_price_cents).max().unwrap_or_default();
        cents = cents.saturating_add(price.saturating_mul(u64::from(line.quantity)));
    }
    Ok(Refund {
        amount: AmountCents::new(cents.min(order.refundable_cents())),
        currency: order.currency.clone(),
    })
}

/// A return the order system started (its 201).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct StartedReturn {
    pub return_id: String,
    /// Only ever in code's line for the customer, never for the model.
    pub label_url: String,
    pub refund_cents: u64,
    pub expires_at: String,
}

/// What the order system's write answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReturnWrite {
    /// 201: the return is open, with its label.
    Started(StartedReturn),
    /// 409: not returnable now, with the order system's reason (data).
    NotReturnable(String),
    /// Anything else: it may or may not have been started.
    Unknown(super::OrdersError),
}

impl ReturnWrite {
    pub fn name(&self) -> &'static str {
        match self {
            ReturnWrite::Started(_) => "started",
            ReturnWrite::NotReturnable(_) => "not_returnable",
            ReturnWrite::Unknown(_) => "unknown",
        }
    }
}

/// What a turn did about one return, as the conversation keeps it (order,
/// items, reason, outcome, the return's id once started; the exchange has
/// when and the request id) and the views show it. Never a label's URL.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReturnRecord {
    pub order_id: String,
    pub items: Vec<ReturnItem>,
    pub reason: String,
    /// `proposed`, `started`, or why not: `not_found`, `unavailable`,
    /// `needs_a_person`, `after_refund`, `refunds_unknown`, `not_delivered`, `outside_window`, `return_open`,
    /// `not_on_order`, `more_than_holds`, `which_one`, `not_returnable`,
    /// `unknown`, `one_per_order`, `too_many_reads`.
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_id: Option<String>,
}

impl ReturnRecord {
    /// "A-1002 1 × Blue mug (changed_mind): started ret_000001", for people.
    pub fn in_words(&self) -> String {
        let items: Vec<String> = self
            .items
            .iter()
            .map(|item| format!("{} × {}", item.quantity, item.name))
            .collect();
        format!(
            "{} {} ({}): {}{}",
            self.order_id,
            items.join(", "),
            self.reason,
            self.outcome,
            self.return_id.as_deref().map(|id| format!(" {id}")).unwrap_or_default()
        )
    }
}

/// The first call's result: nothing written, the customer's yes awaited.
pub fn confirm(arguments: &ReturnArguments, refund: &Refund) -> Value {
    json!({
        "status": "confirm",
        "summary": arguments.summary(),
        "refund": refund.to_string(),
    })
}

/// The confirmed call's result: the return's id, refund and expiry, never its label's URL.
pub fn started(arguments: &ReturnArguments, started: &StartedReturn, currency: &str) -> Value {
    json!({
        "status": "started",
        "summary": arguments.summary(),
        "return_id": crate::untrusted::for_log(&started.return_id, 64),
        "refund": Refund { amount: AmountCents::new(started.refund_cents), currency: currency.to_owned() }.to_string(),
        "refund_when": "the shop refunds it once the parcel arrives; you pay nothing yourself",
        "label_expires_at": crate::untrusted::for_log(&started.expires_at, 40),
        "label": "the shop's own line below your answer gives the customer the label: do not write a link",
    })
}

pub fn not_found(order_id: &str) -> Value {
    json!({ "error": no_such_order(order_id) })
}

pub fn unavailable() -> Value {
    json!({
        "error": "the order system is unavailable: nothing was written. Ask the customer to try again in a few \
                  minutes"
    })
}

pub fn needs_a_person() -> Value {
    json!({
        "error": "a damaged item, a wrong item or one not as described is not a return you start: the conversation \
                  has been passed to a person from the support team, who will take over. Nothing was written; tell \
                  the customer so"
    })
}

/// Contract 8's rule 7, the other way round: the order was refunded in rule
/// 2's window, so a return of it would be a second refund of its items.
pub fn after_refund() -> Value {
    json!({
        "error": "the order was refunded recently: a return of it is not something you start. The conversation has \
                  been passed to a person from the support team, who will take over. Nothing was written; tell the \
                  customer so"
    })
}

/// The refund books could not say whether the order was refunded recently.
pub fn refunds_unknown() -> Value {
    json!({
        "error": "the shop's refund records could not be read: nothing was written. Ask the customer to try again \
                  in a few minutes"
    })
}

pub fn not_returnable(detail: &str) -> Value {
    json!({
        "error": "the order system refused the return: nothing was written",
        "order_system_said": crate::untrusted::for_log(detail, 200),
    })
}

pub fn unknown_outcome() -> Value {
    json!({
        "error": "the order system did not confirm the return: it may or may not have started. A person from the \
                  support team will check it and tell the customer; do not say it started"
    })
}

pub fn one_per_order() -> Value {
    json!({ "error": "at most one return per order for each customer message" })
}

/// What code's line said just before a label's link, when the link was in
/// the reply's text: replies stored so are still read without it.
const LABEL_LINK: &str = "Your return label: ";

/// What the model reads in a later turn's history instead of a label's link.
const LABEL_FOR_THE_MODEL: &str = "[the link, shown to the customer only]";

/// A reply as the model reads it in a later turn's history: the link of
/// code's label line replaced by words, so the model is never given a
/// label's URL, not even in the conversation (contract 28).
pub fn without_label_links(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains(LABEL_LINK) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut kept = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(LABEL_LINK) {
        let after = at + LABEL_LINK.len();
        kept.push_str(&rest[..after]);
        kept.push_str(LABEL_FOR_THE_MODEL);
        rest = &rest[after..];
        rest = &rest[rest.find(char::is_whitespace).unwrap_or(rest.len())..];
    }
    kept.push_str(rest);
    std::borrow::Cow::Owned(kept)
}

/// A started return's label as code hands it to the customer (contract
/// 28): apart from the reply's text, in the answer, `done` and the read of
/// the turn's reply, so the page links this one URL and no URL a text holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Label {
    pub url: String,
    /// RFC 3339, as the order system gave it.
    pub expires_at: String,
    /// The same in code's words, in the shop's zone to the minute
    /// (contract 36): what the page shows; none when the order system's
    /// time is not RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_by: Option<String>,
}

/// Code's own line for the customer once a return started, and the label
/// when it may be linked (only on `label_origins`, contract 28): the line
/// points at it and never holds its URL; without one it names the return.
pub fn started_line(
    order_id: &str,
    started: &StartedReturn,
    currency: &str,
    label_origins: &[String],
    zone: &jiff::tz::TimeZone,
) -> (String, Option<Label>) {
    let refund = Refund {
        amount: AmountCents::new(started.refund_cents),
        currency: currency.to_owned(),
    };
    let id = crate::untrusted::for_log(&started.return_id, 64);
    let expires_at = crate::untrusted::for_log(&started.expires_at, 40);
    let use_by = started
        .expires_at
        .parse::<jiff::Timestamp>()
        .ok()
        .map(|at| crate::office_hours::in_words(zone, at));
    let label = linkable(&started.label_url, label_origins).map(|url| Label {
        url,
        expires_at: expires_at.clone(),
        use_by: use_by.clone(),
    });
    let said = match &label {
        Some(_) => format!(
            "Your return label is below (use it by {}).",
            use_by.as_deref().unwrap_or(&expires_at)
        ),
        None => format!("Its label is return {id}: the shop sends it to you."),
    };
    let line = format!(
        "Return {id} from order {} has started; the refund of {refund} follows once the parcel arrives. {said}",
        crate::untrusted::order_id_for_event(order_id)
    );
    (line, label)
}

/// The label's URL, as the customer may follow it: only on one of
/// `origins` (scheme, host and port exactly), and as the URL parser writes it.
pub fn linkable(label_url: &str, origins: &[String]) -> Option<String> {
    let url = reqwest::Url::parse(label_url).ok()?;
    if !matches!(url.scheme(), "https" | "http") || !url.username().is_empty() || url.password().is_some() {
        return None;
    }
    let origin = url.origin().ascii_serialization();
    origins
        .iter()
        .any(|allowed| allowed.trim_end_matches('/') == origin)
        .then(|| url.to_string())
}

#[cfg(test)]
#[path = "returns_tests.rs"]
mod tests;
