//! The order system in memory, for unit tests: orders by id and customer,
//! a switch that makes it unavailable, and a count of its reads.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::{Order, OrderLookup, OrderSystem, OrdersError};

#[derive(Default)]
pub struct MemoryOrders {
    orders: Mutex<HashMap<String, Order>>,
    down: AtomicBool,
    reads: AtomicUsize,
}

impl MemoryOrders {
    pub fn new(orders: impl IntoIterator<Item = Order>) -> Self {
        let orders = orders
            .into_iter()
            .map(|order| (order.order_id.clone(), order))
            .collect();
        MemoryOrders {
            orders: Mutex::new(orders),
            ..MemoryOrders::default()
        }
    }

    /// From now on every read is unavailable (`false` heals it).
    pub fn go_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// Reads so far.
    pub fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }

    /// Replaces an order (a refund made elsewhere, a delivery).
    pub fn put(&self, order: Order) {
        if let Ok(mut orders) = self.orders.lock() {
            orders.insert(order.order_id.clone(), order);
        }
    }
}

impl OrderSystem for MemoryOrders {
    async fn order(&self, order_id: &str, customer: &str) -> OrderLookup {
        self.reads.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            return OrderLookup::Unavailable(OrdersError::Unreachable);
        }
        let orders = self.orders.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match orders.get(order_id) {
            Some(order) if order.customer_id == customer => OrderLookup::Found(Box::new(order.clone())),
            _ => OrderLookup::NotFound,
        }
    }
}
