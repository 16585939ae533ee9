//! What goes wrong in front of the payments sandbox or moto's DynamoDB: for
//! each request the proxy ([`refund_chat_local::proxy`]) asks, a [`Fault`]
//! drawn from the seed and the request's number. The proxy does the rest.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use refund_chat_local::proxy::{Action, Hook, Proxy, Seen};

use crate::rng::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    /// Not passed on: answer this status and body.
    RefuseBefore(u16, &'static str),
    /// Not passed on: the connection is closed.
    DropBefore,
    /// Passed on late (after the caller's timeout), then answered.
    DelayBefore(Duration),
    /// Passed on, then answered after this delay (past the caller's timeout).
    DelayAfter(Duration),
    /// Passed on, then the connection is closed without the answer.
    DropAfter,
    /// Passed on, then this status and body instead of the answer.
    ReplaceAfter(u16, &'static str),
    /// The order system's 200 for another order id than the one asked for.
    OtherOrder,
    /// The order asked for, delivered in the year 9999.
    FutureDelivery,
    /// The order asked for, in a body of more than 64 KiB.
    HugeBody,
}

/// What a lying order system says it was paid: no sandbox order was, so a
/// refund record that carries it was decided on a lie.
pub const LIED_PAID_CENTS: u64 = 987_654_321;

impl Fault {
    pub fn name(self) -> &'static str {
        match self {
            Fault::None => "none",
            Fault::RefuseBefore(..) => "refused before",
            Fault::DropBefore => "dropped before",
            Fault::DelayBefore(_) => "delayed before",
            Fault::DelayAfter(_) => "slow after",
            Fault::DropAfter => "dropped after",
            Fault::ReplaceAfter(..) => "replaced after",
            Fault::OtherOrder => "another order",
            Fault::FutureDelivery => "a future delivery",
            Fault::HugeBody => "a huge body",
        }
    }

    /// The order system's answer for the order `seen` asks for, as a lie.
    fn lie(self, seen: &Seen) -> Action {
        let order_id = seen
            .path
            .trim_start_matches("/orders/")
            .split('?')
            .next()
            .unwrap_or_default();
        let customer = seen
            .headers
            .get("x-customer-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let (answered_id, delivered_at, notes) = match self {
            Fault::OtherOrder => (format!("{order_id}-OTHER"), "2026-01-01T00:00:00Z", 0),
            Fault::FutureDelivery => (order_id.to_owned(), "9999-12-31T00:00:00Z", 0),
            _ => (order_id.to_owned(), "2026-01-01T00:00:00Z", 70 * 1024),
        };
        let body = serde_json::json!({
            "order_id": answered_id,
            "customer_id": customer,
            "status": "delivered",
            "placed_at": "2025-12-01T00:00:00Z",
            "delivered_at": delivered_at,
            "currency": "EUR",
            "paid_cents": LIED_PAID_CENTS,
            "refunded_cents": 0,
            "items": [],
            "ship_to": {"name": "N", "line1": "L", "city": "C", "postcode": "P0", "country": "FR"},
            "notes": "x".repeat(notes),
        });
        Action::Refuse(200, body.to_string().into_bytes().into())
    }

    fn action(self, seen: &Seen) -> Action {
        let bytes = |text: &'static str| text.as_bytes().to_vec().into();
        match self {
            Fault::None => Action::Forward,
            Fault::RefuseBefore(status, text) => Action::Refuse(status, bytes(text)),
            Fault::DropBefore => Action::DropBefore,
            Fault::DelayBefore(delay) => Action::DelayBefore(delay),
            Fault::DelayAfter(delay) => Action::DelayAfter(delay),
            Fault::DropAfter => Action::DropAfter,
            Fault::ReplaceAfter(status, text) => Action::ReplaceAfter(status, bytes(text)),
            Fault::OtherOrder | Fault::FutureDelivery | Fault::HugeBody => self.lie(seen),
        }
    }
}

/// A proxy to `target` whose requests meet faults drawn by `plan`, and the
/// faults it drew, in order.
pub struct Faulty {
    pub proxy: Arc<Proxy>,
    faults: Arc<Mutex<Vec<Fault>>>,
}

impl Faulty {
    pub fn new(target: impl Into<String>, seed: u64, plan: fn(&mut Rng) -> Fault, one_at_a_time: bool) -> Faulty {
        let faults: Arc<Mutex<Vec<Fault>>> = Arc::default();
        let count = AtomicU64::new(0);
        let drawn = Arc::clone(&faults);
        let hook: Hook = Arc::new(move |seen| {
            let fault = plan(&mut Rng::derived(seed, &[0xFA17, count.fetch_add(1, Ordering::SeqCst)]));
            if let Ok(mut faults) = drawn.lock() {
                faults.push(fault);
            }
            let action = fault.action(seen);
            Box::pin(async move { action })
        });
        Faulty {
            proxy: Proxy::new(target, one_at_a_time, hook),
            faults,
        }
    }

    pub fn faults(&self) -> Vec<Fault> {
        self.faults.lock().map(|f| f.clone()).unwrap_or_default()
    }
}
