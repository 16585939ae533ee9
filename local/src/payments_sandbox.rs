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
//! with its first answer: one write per `Idempotency-Key`.

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
];

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

/// Whether the request asks as the order's customer or as the e-mail it was placed with.
fn asked_by_owner(order: &Order, email_of_order: Option<&str>, headers: &axum::http::HeaderMap) -> bool {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let customer = header("x-customer-id");
    let email = header("x-customer-email");
    (!customer.is_empty() && order.user_id == customer)
        || (!email.is_empty() && email_of_order.is_some_and(|placed| placed.eq_ignore_ascii_case(email)))
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
    json!({
        "order_id": order.order_id,
        "customer_id": if order.user_id.is_empty() { Value::Null } else { json!(order.user_id) },
        "email": email,
        "status": status,
        "placed_at": days_ago(placed),
        "delivered_at": delivered.map(days_ago),
        "currency": "EUR",
        "paid_cents": order.paid_cents,
        "refunded_cents": order.refunded_cents,
        "items": [{"name": "Item", "quantity": 1, "unit_price_cents": order.paid_cents}],
        "ship_to": address.cloned().unwrap_or_else(
            || json!({"name": name, "line1": line1, "city": city, "postcode": postcode, "country": country})
        ),
    })
}

/// `POST /orders/{id}/address` (contract 26): a `placed` order of the
/// customer's gets the body's address; one write per key.
async fn change_address(
    State(sandbox): State<Sandbox>,
    axum::extract::Path(order_id): axum::extract::Path<String>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> (StatusCode, Json<Value>) {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let key = header("idempotency-key");
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
