//! A payments sandbox speaking the contract's payments API (section 3).
//!
//! `POST /refunds` refunds part of a seeded order, or rejects with
//! `{"detail": ...}`: unknown order (404), another customer's order (403),
//! more than remains refundable (409), a malformed body (422). Every refund is
//! appended to a JSON-lines file of refunds made, replayed at start-up, so
//! refunds survive restarts. `GET /refunds` and `GET /orders` show the state.

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
];

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
            books: Arc::new(Mutex::new(Books { orders, refunds_made })),
            refunds_file,
        })
    }

    /// Every refund the sandbox made: the money that moved.
    pub fn refunds_made(&self) -> Vec<RefundMade> {
        self.lock().refunds_made.clone()
    }

    pub fn router(&self) -> Router {
        Router::new()
            .route("/refunds", post(refund).get(refunds_made))
            .route("/orders", get(orders))
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
        if order.user_id != body.user_id {
            return Err((
                StatusCode::FORBIDDEN,
                format!("order {} belongs to another customer", body.order_id),
            ));
        }
        let remaining = order.paid_cents - order.refunded_cents;
        if body.amount_cents > remaining {
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
