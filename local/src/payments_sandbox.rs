//! A payments sandbox speaking the contract's payments API (section 3).
//!
//! `POST /refunds` refunds part of a seeded order, or rejects with
//! `{"detail": ...}`: unknown order (404), another customer's order (403),
//! more than remains refundable (409), a malformed body (422). Every refund is
//! appended to a JSON-lines file of refunds made, replayed at start-up, so
//! refunds survive restarts. `GET /refunds` and `GET /orders` show the state.
//!
//! It is the shop's order system too (contract 16): `GET /orders/{id}` with
//! `X-Customer-Id` answers the order as the contract describes it (its
//! status, dates relative to now, what was paid and refunded, an address),
//! or 404 for an unknown order or another customer's. Its one write,
//! `POST /orders/{id}/address` (contract 26), changes a `placed` order's
//! address (200), refuses any other (409), and answers a key it has seen
//! with its first answer: one write per `Idempotency-Key`. Its other write,
//! `POST /orders/{id}/returns` (contract 28), starts a return of a delivered
//! order within [`RETURN_WINDOW_DAYS`], of no more than the order holds less
//! what was returned, with no return open: 201 with a label of the
//! sandbox's own origin (`GET /labels/{id}`), else 409 with why; one return
//! per key. A seeded order (R-8001) has a return open already.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Seeded orders: (order id, user id, paid cents, already refunded cents).
pub const SEED_ORDERS: &[(&str, &str, u64, u64)] = &[
    ("A-1001", "u-1001", 1250, 0),
    ("A-1002", "u-1001", 4999, 1000),
    ("B-2001", "u-2002", 4000, 0),
    ("C-3001", "u-3003", 1999, 1999),
    // Its full refund is above the function's automatic limit (50.00): it waits for approval.
    ("A-1003", "u-1001", 3000, 0),
    ("D-4001", "u-1001", 12000, 0),
    // Rule 4: shipped, not delivered yet.
    ("E-5001", "u-1001", 2500, 0),
    // Rule 5: delivered 45 days ago, outside the 30-day refund window.
    ("F-6001", "u-1001", 1800, 0),
    // Placed, not shipped: its delivery address may still change (contract 26).
    ("A-1004", "u-1001", 2200, 0),
    // A guest's order (contract 27): placed without an account, by e-mail.
    ("G-7001", "", 1500, 0),
    // A return is open already (contract 28): no second one.
    ("R-8001", "u-1001", 1800, 0),
];

/// What a seeded order holds, by name (contract 28); any other holds one "Item".
pub const ORDER_ITEMS: &[(&str, &str)] = &[
    ("A-1002", "Blue mug"),
    ("F-6001", "Blue mug"),
    ("R-8001", "Linen cushion"),
];

/// Days after delivery the order system takes a return (contract 28).
pub const RETURN_WINDOW_DAYS: u64 = 30;

/// The one item a seeded order holds.
fn item_of(order_id: &str) -> &'static str {
    ORDER_ITEMS
        .iter()
        .find(|(id, _)| *id == order_id)
        .map_or("Item", |&(_, name)| name)
}

/// The e-mail each order was placed with (contract 27): a customer's
/// account's, or a guest's by order. The order system answers a guest's
/// read (`X-Customer-Email`) for the orders of that e-mail, whatever its case.
pub const CUSTOMER_EMAILS: &[(&str, &str)] = &[
    ("u-1001", "ada@shop.example"),
    ("u-2002", "ben@shop.example"),
    ("u-3003", "cy@shop.example"),
];
pub const GUEST_ORDER_EMAILS: &[(&str, &str)] = &[("G-7001", "gus@shop.example")];

/// The e-mail a seeded order was placed with: its customer's account's,
/// or the guest's by order.
fn seeded_email(order_id: &str, user_id: &str) -> Option<String> {
    let (table, key) = if user_id.is_empty() {
        (GUEST_ORDER_EMAILS, order_id)
    } else {
        (CUSTOMER_EMAILS, user_id)
    };
    table
        .iter()
        .find(|(k, _)| *k == key)
        .map(|&(_, email)| email.to_owned())
}

/// A request header as text; empty when absent or not text.
fn header(headers: &axum::http::HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// Whether the request asks as the order's customer or as the e-mail it was placed with.
fn asked_by_owner(order: &Order, email_of_order: Option<&str>, headers: &axum::http::HeaderMap) -> bool {
    let customer = header(headers, "x-customer-id");
    let email = header(headers, "x-customer-email");
    (!customer.is_empty() && order.user_id == customer)
        || (!email.is_empty() && email_of_order.is_some_and(|placed| placed.eq_ignore_ascii_case(&email)))
}

/// What the order system says of a seeded order beyond its money: status,
/// days since it was placed, days since it was delivered (none: not yet).
/// An order not listed was placed 5 days ago and delivered 2 days ago.
pub const ORDER_FACTS: &[(&str, &str, u64, Option<u64>)] = &[
    ("A-1001", "delivered", 6, Some(3)),
    ("A-1002", "delivered", 20, Some(15)),
    ("E-5001", "shipped", 2, None),
    ("F-6001", "delivered", 50, Some(45)),
    ("A-1004", "placed", 1, None),
    ("R-8001", "delivered", 8, Some(5)),
];

/// The address every seeded order went to: personal data the function must
/// keep from the model, its logs and its stored exchanges.
/// Values no timestamp, id or amount can hold by accident, so a check that
/// finds one in a log line has found the address.
pub const SHIP_TO: (&str, &str, &str, &str, &str) = ("Ada Quokka", "1 Zanzibar Lane", "Quokkaville", "QZ9 7XK", "FR");

#[derive(Debug, Clone, Serialize)]
pub struct Order {
    pub order_id: String,
    pub user_id: String,
    pub paid_cents: u64,
    pub refunded_cents: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RefundMade {
    pub refund_id: String,
    pub order_id: String,
    pub user_id: String,
    pub amount_cents: u64,
}

#[derive(Deserialize)]
struct RefundBody {
    order_id: String,
    amount_cents: u64,
    user_id: String,
}

struct Books {
    orders: BTreeMap<String, Order>,
    refunds_made: Vec<RefundMade>,
    /// Refunds asked for more than their order had left (refused, 409):
    /// a caller that checked the order would never send one.
    overdrawn: Vec<RefundMade>,
    /// Facts set for an order beyond `ORDER_FACTS`: (status, days since
    /// placed, days since delivered).
    facts: BTreeMap<String, (String, u64, Option<u64>)>,
    /// Addresses changed (contract 26), by order; the rest are `SHIP_TO`.
    addresses: BTreeMap<String, Value>,
    /// Each `Idempotency-Key` of an address write, with its answer.
    address_keys: BTreeMap<String, (u16, Value)>,
    /// The writes that changed an address, in order: (order id, body).
    address_writes: Vec<(String, Value)>,
    /// Every order read, in order (contract 27: a visitor's turn reads none).
    order_reads: Vec<String>,
    /// The e-mail each order was placed with (contract 27), by order.
    emails: BTreeMap<String, String>,
    /// Returns started (contract 28), by order: `{return_id, status, items, reason}`.
    returns: BTreeMap<String, Vec<Value>>,
    /// Each `Idempotency-Key` of a return, with its answer.
    return_keys: BTreeMap<String, (u16, Value)>,
}

#[derive(Clone)]
pub struct Sandbox {
    books: Arc<Mutex<Books>>,
    refunds_file: Option<PathBuf>,
}

impl Sandbox {
    /// Seeded orders, with the refunds already in `refunds_file` (if any) applied.
    pub fn open(refunds_file: Option<PathBuf>) -> std::io::Result<Sandbox> {
        Sandbox::with_orders(SEED_ORDERS, refunds_file)
    }

    /// The same over other orders: (order id, user id, paid cents, already refunded cents).
    pub fn with_orders(seed: &[(&str, &str, u64, u64)], refunds_file: Option<PathBuf>) -> std::io::Result<Sandbox> {
        let mut orders: BTreeMap<String, Order> = seed
            .iter()
            .map(|&(order_id, user_id, paid_cents, refunded_cents)| {
                (
                    order_id.to_owned(),
                    Order {
                        order_id: order_id.into(),
                        user_id: user_id.into(),
                        paid_cents,
                        refunded_cents,
                    },
                )
            })
            .collect();
        let emails = orders
            .values()
            .filter_map(|order| Some((order.order_id.clone(), seeded_email(&order.order_id, &order.user_id)?)))
            .collect();
        let mut refunds_made = Vec::new();
        if let Some(path) = &refunds_file {
            match std::fs::read_to_string(path) {
                Ok(text) => {
                    for line in text.lines().filter(|l| !l.trim().is_empty()) {
                        let entry: RefundMade = serde_json::from_str(line)
                            .map_err(|e| std::io::Error::other(format!("{}: bad line: {e}", path.display())))?;
                        if let Some(order) = orders.get_mut(&entry.order_id) {
                            order.refunded_cents += entry.amount_cents;
                        }
                        refunds_made.push(entry);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Sandbox {
            books: Arc::new(Mutex::new(Books {
                orders,
                refunds_made,
                overdrawn: Vec::new(),
                facts: BTreeMap::new(),
                addresses: BTreeMap::new(),
                address_keys: BTreeMap::new(),
                address_writes: Vec::new(),
                order_reads: Vec::new(),
                emails,
                returns: BTreeMap::from([(
                    "R-8001".to_owned(),
                    vec![json!({"return_id": "ret_seeded", "status": "open",
                        "items": [{"name": item_of("R-8001"), "quantity": 1}], "reason": "changed_mind"})],
                )]),
                return_keys: BTreeMap::new(),
            })),
            refunds_file,
        })
    }

    /// Every refund the sandbox made: the money that moved.
    pub fn refunds_made(&self) -> Vec<RefundMade> {
        self.lock().refunds_made.clone()
    }

    /// From now on the order system says `order_id` is `status`, placed
    /// `placed_days_ago` and delivered `delivered_days_ago` (none: not yet).
    /// Sets the e-mail an order was placed with (a guest's, contract 27).
    pub fn set_email(&self, order_id: &str, email: &str) {
        self.lock().emails.insert(order_id.to_owned(), email.to_owned());
    }

    pub fn set_facts(&self, order_id: &str, status: &str, placed_days_ago: u64, delivered_days_ago: Option<u64>) {
        self.lock().facts.insert(
            order_id.to_owned(),
            (status.to_owned(), placed_days_ago, delivered_days_ago),
        );
    }

    /// Every return started (contract 28): (order id, the return as kept).
    pub fn returns_started(&self) -> Vec<(String, Value)> {
        self.lock()
            .returns
            .iter()
            .flat_map(|(order, returns)| returns.iter().map(move |r| (order.clone(), r.clone())))
            .filter(|(_, r)| r["return_id"] != "ret_seeded")
            .collect()
    }

    /// Every address write that changed an order: (order id, the new address).
    pub fn addresses_written(&self) -> Vec<(String, Value)> {
        self.lock().address_writes.clone()
    }

    /// Every order read (`GET /orders/{id}`), in order, found or not.
    pub fn order_reads(&self) -> Vec<String> {
        self.lock().order_reads.clone()
    }

    /// The refunds refused for being more than their order had left.
    pub fn overdrawn(&self) -> Vec<RefundMade> {
        self.lock().overdrawn.clone()
    }

    pub fn router(&self) -> Router {
        Router::new()
            .route("/refunds", post(refund).get(refunds_made))
            .route("/orders", get(orders))
            .route("/orders/{order_id}", get(order))
            .route("/orders/{order_id}/address", post(change_address))
            .route("/orders/{order_id}/returns", post(start_return))
            .route("/labels/{return_id}", get(label))
            .with_state(self.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Books> {
        self.books.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn refund(&self, body: RefundBody) -> Result<RefundMade, (StatusCode, String)> {
        let mut books = self.lock();
        let Some(order) = books.orders.get(&body.order_id) else {
            return Err((StatusCode::NOT_FOUND, format!("order {} does not exist", body.order_id)));
        };
        // A guest's order is refunded to whichever guest the function
        // verified by its e-mail (the order system knows no guest's id).
        let guest_order = order.user_id.is_empty() && body.user_id.starts_with("guest:");
        if order.user_id != body.user_id && !guest_order {
            return Err((
                StatusCode::FORBIDDEN,
                format!("order {} belongs to another customer", body.order_id),
            ));
        }
        let remaining = order.paid_cents - order.refunded_cents;
        if body.amount_cents > remaining {
            let asked = RefundMade {
                refund_id: String::new(),
                order_id: body.order_id.clone(),
                user_id: body.user_id.clone(),
                amount_cents: body.amount_cents,
            };
            books.overdrawn.push(asked);
            let detail = if remaining == 0 {
                format!("order {} has already been refunded in full", body.order_id)
            } else {
                format!("only {} is left to refund on order {}", money(remaining), body.order_id)
            };
            return Err((StatusCode::CONFLICT, detail));
        }
        let entry = RefundMade {
            refund_id: format!("rf_{:06}", books.refunds_made.len() + 1),
            order_id: body.order_id.clone(),
            user_id: body.user_id,
            amount_cents: body.amount_cents,
        };
        if let Some(path) = &self.refunds_file {
            append_line(path, &entry).map_err(|e| {
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("writing the refunds file failed: {e}"),
                )
            })?;
        }
        if let Some(order) = books.orders.get_mut(&body.order_id) {
            order.refunded_cents += body.amount_cents;
        }
        books.refunds_made.push(entry.clone());
        Ok(entry)
    }
}

fn append_line(path: &PathBuf, entry: &RefundMade) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    writeln!(file, "{}", serde_json::to_string(entry).map_err(std::io::Error::other)?)
}

pub fn money(cents: u64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

async fn refund(State(sandbox): State<Sandbox>, body: Bytes) -> (StatusCode, Json<Value>) {
    let body: RefundBody = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(e) => {
            return (
                StatusCode::UNPROCESSABLE_ENTITY,
                Json(json!({"detail": format!("malformed refund request: {e}")})),
            );
        }
    };
    match sandbox.refund(body) {
        Ok(entry) => (
            StatusCode::CREATED,
            Json(json!({"refund_id": entry.refund_id, "status": "succeeded", "amount_cents": entry.amount_cents})),
        ),
        Err((status, detail)) => (status, Json(json!({ "detail": detail }))),
    }
}

async fn refunds_made(State(sandbox): State<Sandbox>) -> Json<Vec<RefundMade>> {
    Json(sandbox.refunds_made())
}

async fn orders(State(sandbox): State<Sandbox>) -> Json<Vec<Order>> {
    Json(sandbox.lock().orders.values().cloned().collect())
}

/// RFC 3339 of `days` before now.
fn days_ago(days: u64) -> String {
    let moment = time::OffsetDateTime::now_utc() - time::Duration::days(days as i64);
    moment
        .replace_nanosecond(0)
        .unwrap_or(moment)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// The order's status as the order system says it now.
fn status_of(order_id: &str, facts: Option<&(String, u64, Option<u64>)>) -> String {
    facts
        .map(|(status, ..)| status.clone())
        .or_else(|| {
            ORDER_FACTS
                .iter()
                .find(|(id, ..)| *id == order_id)
                .map(|&(_, status, ..)| status.to_owned())
        })
        .unwrap_or_else(|| "delivered".to_owned())
}

/// The order as the order system answers it (contract 16).
fn order_json(
    order: &Order,
    facts: Option<&(String, u64, Option<u64>)>,
    address: Option<&Value>,
    email: Option<&String>,
    returns: Option<&Vec<Value>>,
) -> Value {
    let (status, placed, delivered) = facts
        .map(|(status, placed, delivered)| (status.as_str(), *placed, *delivered))
        .or_else(|| {
            ORDER_FACTS
                .iter()
                .find(|(id, ..)| *id == order.order_id)
                .map(|&(_, status, placed, delivered)| (status, placed, delivered))
        })
        .unwrap_or(("delivered", 5, Some(2)));
    let (name, line1, city, postcode, country) = SHIP_TO;
    let mut json = json!({
        "order_id": order.order_id,
        "customer_id": if order.user_id.is_empty() { Value::Null } else { json!(order.user_id) },
        "email": email,
        "status": status,
        "placed_at": days_ago(placed),
        "delivered_at": delivered.map(days_ago),
        "currency": "EUR",
        "paid_cents": order.paid_cents,
        "refunded_cents": order.refunded_cents,
        "items": [{"name": item_of(&order.order_id), "quantity": 1, "unit_price_cents": order.paid_cents}],
        "ship_to": address.cloned().unwrap_or_else(
            || json!({"name": name, "line1": line1, "city": city, "postcode": postcode, "country": country})
        ),
    });
    // Contract 28: what was returned, and the returns, only once there are any.
    if let Some(returns) = returns.filter(|r| !r.is_empty()) {
        let returned: u64 = returns
            .iter()
            .flat_map(|r| r["items"].as_array().cloned().unwrap_or_default())
            .filter(|item| item["name"] == item_of(&order.order_id))
            .filter_map(|item| item["quantity"].as_u64())
            .sum();
        json["items"][0]["returned_quantity"] = json!(returned);
        json["returns"] = returns
            .iter()
            .map(|r| json!({"return_id": r["return_id"], "status": r["status"], "items": r["items"]}))
            .collect();
    }
    json
}

/// `POST /orders/{id}/returns` (contract 28): a return of a delivered
/// order of the asker's, within the window, of no more than it holds less
/// what was returned, with none open; one per `Idempotency-Key`.
async fn start_return(
    State(sandbox): State<Sandbox>,
    axum::extract::Path(order_id): axum::extract::Path<String>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> (StatusCode, Json<Value>) {
    let (key, host) = (header(&headers, "idempotency-key"), header(&headers, "host"));
    let mut books = sandbox.lock();
    if let Some((status, answer)) = books.return_keys.get(&key).filter(|_| !key.is_empty()) {
        return (
            StatusCode::from_u16(*status).unwrap_or(StatusCode::OK),
            Json(answer.clone()),
        );
    }
    let asked: Option<Value> = serde_json::from_slice::<Value>(&body).ok().filter(|v| {
        v["reason"].is_string()
            && v["items"].as_array().is_some_and(|items| {
                !items.is_empty()
                    && items
                        .iter()
                        .all(|i| i["name"].is_string() && i["quantity"].as_u64().is_some_and(|q| q > 0))
            })
    });
    let refuse = |status: u16, detail: String| (status, json!({ "detail": detail }));
    let (status, answer) = match (books.orders.get(&order_id).cloned(), asked) {
        (Some(found), _) if !asked_by_owner(&found, books.emails.get(&order_id).map(String::as_str), &headers) => {
            refuse(404, format!("no order {order_id} for this customer"))
        }
        (None, _) => refuse(404, format!("no order {order_id} for this customer")),
        (Some(_), None) => refuse(422, "the body is not a return".into()),
        (Some(found), Some(asked)) => {
            let facts = books.facts.get(&order_id).cloned().or_else(|| {
                ORDER_FACTS
                    .iter()
                    .find(|(id, ..)| *id == order_id)
                    .map(|&(_, status, placed, delivered)| (status.to_owned(), placed, delivered))
            });
            let (status, _, delivered) = facts.unwrap_or(("delivered".into(), 5, Some(2)));
            let returns = books.returns.get(&order_id).cloned().unwrap_or_default();
            let returned: u64 = returns
                .iter()
                .flat_map(|r| r["items"].as_array().cloned().unwrap_or_default())
                .filter_map(|item| item["quantity"].as_u64())
                .sum();
            let item = item_of(&order_id);
            let wanted: u64 = asked["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|i| i["quantity"].as_u64())
                .sum();
            let named_only_it = asked["items"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|i| i["name"] == item);
            if status != "delivered" {
                refuse(409, format!("order {order_id} is not delivered"))
            } else if delivered.is_some_and(|days| days > RETURN_WINDOW_DAYS) {
                refuse(
                    409,
                    format!("order {order_id} was delivered more than {RETURN_WINDOW_DAYS} days ago"),
                )
            } else if returns.iter().any(|r| r["status"] == "open") {
                refuse(409, format!("order {order_id} has a return open already"))
            } else if !named_only_it || wanted + returned > 1 {
                refuse(409, format!("order {order_id} does not hold that many of those items"))
            } else {
                let number = books.returns.values().map(Vec::len).sum::<usize>() + 1;
                let return_id = format!("ret_{number:06}");
                // The one item's price, less what was refunded of it already.
                let refund_cents = found.paid_cents.saturating_sub(found.refunded_cents);
                books.returns.entry(order_id.clone()).or_default().push(json!({
                    "return_id": return_id, "status": "open", "items": asked["items"], "reason": asked["reason"],
                    "refund_cents": refund_cents,
                }));
                let expires = time::OffsetDateTime::now_utc() + time::Duration::days(14);
                (
                    201,
                    json!({
                        "return_id": return_id,
                        "label_url": format!("http://{host}/labels/{return_id}"),
                        "refund_cents": refund_cents,
                        "expires_at": expires.replace_nanosecond(0).unwrap_or(expires)
                            .format(&time::format_description::well_known::Rfc3339).unwrap_or_default(),
                    }),
                )
            }
        }
    };
    if !key.is_empty() {
        books.return_keys.insert(key, (status, answer.clone()));
    }
    (StatusCode::from_u16(status).unwrap_or(StatusCode::OK), Json(answer))
}

/// `GET /labels/{id}`: a return's label, as a carrier would serve it.
async fn label(axum::extract::Path(return_id): axum::extract::Path<String>) -> String {
    format!("Return label {return_id}: print it, stick it on the parcel, drop it at any carrier's point.\n")
}

/// `POST /orders/{id}/address` (contract 26): a `placed` order of the
/// customer's gets the body's address; one write per key.
async fn change_address(
    State(sandbox): State<Sandbox>,
    axum::extract::Path(order_id): axum::extract::Path<String>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> (StatusCode, Json<Value>) {
    let key = header(&headers, "idempotency-key");
    let mut books = sandbox.lock();
    if let Some((status, answer)) = books.address_keys.get(&key).filter(|_| !key.is_empty()) {
        return (
            StatusCode::from_u16(*status).unwrap_or(StatusCode::OK),
            Json(answer.clone()),
        );
    }
    let address: Option<Value> = serde_json::from_slice::<Value>(&body).ok().filter(|v| {
        ["name", "line1", "line2", "postcode", "city", "country"]
            .iter()
            .all(|field| v[*field].is_string())
    });
    let (status, answer) = match (books.orders.get(&order_id), address) {
        (Some(found), _) if !asked_by_owner(found, books.emails.get(&order_id).map(String::as_str), &headers) => (
            404,
            json!({ "detail": format!("no order {order_id} for this customer") }),
        ),
        (None, _) => (
            404,
            json!({ "detail": format!("no order {order_id} for this customer") }),
        ),
        (Some(_), None) => (422, json!({ "detail": "the body is not an address" })),
        (Some(_), Some(_)) if status_of(&order_id, books.facts.get(&order_id)) != "placed" => (
            409,
            json!({ "detail": format!("order {order_id} has shipped: its address cannot change") }),
        ),
        (Some(_), Some(address)) => {
            let kept = json!({
                "name": address["name"], "line1": address["line1"], "line2": address["line2"],
                "city": address["city"], "postcode": address["postcode"], "country": address["country"],
            });
            books.addresses.insert(order_id.clone(), kept.clone());
            books.address_writes.push((order_id.clone(), kept));
            (200, json!({ "order_id": order_id, "status": "changed" }))
        }
    };
    if !key.is_empty() {
        books.address_keys.insert(key, (status, answer.clone()));
    }
    (StatusCode::from_u16(status).unwrap_or(StatusCode::OK), Json(answer))
}

async fn order(
    State(sandbox): State<Sandbox>,
    axum::extract::Path(order_id): axum::extract::Path<String>,
    headers: axum::http::HeaderMap,
) -> (StatusCode, Json<Value>) {
    // The function percent-encodes the customer; the sandbox's ids need no decoding.
    let mut books = sandbox.lock();
    books.order_reads.push(order_id.clone());
    match books.orders.get(&order_id) {
        Some(found) if asked_by_owner(found, books.emails.get(&order_id).map(String::as_str), &headers) => (
            StatusCode::OK,
            Json(order_json(
                found,
                books.facts.get(&order_id),
                books.addresses.get(&order_id),
                books.emails.get(&order_id),
                books.returns.get(&order_id),
            )),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            Json(json!({ "detail": format!("no order {order_id} for this customer") })),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(sandbox: &Sandbox, path: &str, customer: &str) -> (u16, Value) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let router = sandbox.router();
        tokio::spawn(async move { axum::serve(listener, router).await });
        let response = reqwest::Client::new()
            .get(format!("http://{address}{path}"))
            .header("x-customer-id", customer)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (
            status,
            serde_json::from_slice(&response.bytes().await.unwrap()).unwrap_or(Value::Null),
        )
    }

    #[tokio::test]
    async fn the_order_system_answers_the_customers_own_orders_as_the_contract_says() {
        let sandbox = Sandbox::open(None).unwrap();

        let (status, order) = get(&sandbox, "/orders/A-1002", "u-1001").await;
        assert_eq!(status, 200);
        assert_eq!(order["status"], "delivered");
        assert_eq!(order["paid_cents"], 4999);
        assert_eq!(order["refunded_cents"], 1000);
        assert!(order["delivered_at"].as_str().unwrap().ends_with('Z'));
        assert_eq!(order["ship_to"]["postcode"], "QZ9 7XK");

        let (_, shipped) = get(&sandbox, "/orders/E-5001", "u-1001").await;
        assert_eq!(shipped["status"], "shipped");
        assert_eq!(shipped["delivered_at"], Value::Null);

        assert_eq!(
            get(&sandbox, "/orders/B-2001", "u-1001").await.0,
            404,
            "another customer's"
        );
        assert_eq!(get(&sandbox, "/orders/Z-9", "u-1001").await.0, 404, "unknown");
    }

    /// Contract 28: the order system's returns. A delivered order in the
    /// window starts one (201, a label of the sandbox's own origin), once
    /// per key; the order then shows it open and its item returned; a second
    /// return, an order outside the window, one not delivered, one with a
    /// return open, more than it holds or another customer's: refused.
    #[tokio::test]
    async fn a_return_starts_once_within_the_rules_and_is_then_on_the_order() {
        let sandbox = Sandbox::open(None).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let router = sandbox.router();
        tokio::spawn(async move { axum::serve(listener, router).await });
        let start = |order: &'static str, customer: &'static str, key: &'static str, quantity: u64| async move {
            let response = reqwest::Client::new()
                .post(format!("http://{address}/orders/{order}/returns"))
                .header("x-customer-id", customer)
                .header("idempotency-key", key)
                .json(&json!({"items": [{"name": item_of(order), "quantity": quantity}], "reason": "wrong_size"}))
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap_or(Value::Null))
        };

        let (status, started) = start("A-1002", "u-1001", "k-1", 1).await;
        assert_eq!(status, 201, "{started}");
        let label = started["label_url"].as_str().unwrap();
        assert!(label.starts_with(&format!("http://{address}/labels/")), "{label}");
        assert_eq!(started["refund_cents"], 3999, "paid less what was refunded");
        assert_eq!(
            start("A-1002", "u-1001", "k-1", 1).await,
            (201, started.clone()),
            "the same key: the same answer"
        );
        assert_eq!(sandbox.returns_started().len(), 1, "one return per key");
        let (_, order) = get(&sandbox, "/orders/A-1002", "u-1001").await;
        assert_eq!(order["returns"][0]["status"], "open");
        assert_eq!(order["items"][0]["returned_quantity"], 1);
        assert_eq!(order["items"][0]["name"], "Blue mug");

        for (order, customer, key, quantity, why) in [
            ("A-1002", "u-1001", "k-2", 1, "a return open already"),
            ("F-6001", "u-1001", "k-3", 1, "delivered more than 30 days ago"),
            ("E-5001", "u-1001", "k-4", 1, "not delivered"),
            ("R-8001", "u-1001", "k-5", 1, "a return open already"),
            ("A-1001", "u-1001", "k-6", 2, "does not hold that many"),
        ] {
            let (status, refused) = start(order, customer, key, quantity).await;
            assert_eq!(status, 409, "{order}: {refused}");
            assert!(refused["detail"].as_str().unwrap().contains(why), "{order}: {refused}");
        }
        assert_eq!(start("B-2001", "u-1001", "k-7", 1).await.0, 404, "another customer's");
        assert_eq!(sandbox.returns_started().len(), 1);
        let printed = reqwest::get(label).await.unwrap().text().await.unwrap();
        assert!(printed.contains("Return label"), "{printed}");
    }

    /// Contract 27: a guest's read names the e-mail, and finds the orders
    /// placed with it, whatever its case; no customer id finds a guest's.
    #[tokio::test]
    async fn a_guests_read_finds_the_orders_of_the_email() {
        let sandbox = Sandbox::open(None).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let router = sandbox.router();
        tokio::spawn(async move { axum::serve(listener, router).await });
        let read = |path: &'static str, email: &'static str| async move {
            let response = reqwest::Client::new()
                .get(format!("http://{address}{path}"))
                .header("x-customer-email", email)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            (
                status,
                serde_json::from_slice::<Value>(&response.bytes().await.unwrap()).unwrap_or(Value::Null),
            )
        };
        let (status, order) = read("/orders/G-7001", "Gus@Shop.example").await;
        assert_eq!(status, 200);
        assert_eq!(order["email"], "gus@shop.example");
        assert_eq!(order["customer_id"], Value::Null);
        assert_eq!(
            read("/orders/A-1001", "ada@shop.example").await.0,
            200,
            "placed with that e-mail"
        );
        assert_eq!(read("/orders/A-1001", "gus@shop.example").await.0, 404, "another's");
        assert_eq!(
            get(&sandbox, "/orders/G-7001", "").await.0,
            404,
            "no customer id finds a guest's order"
        );
    }
}
