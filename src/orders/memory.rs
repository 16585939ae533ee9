//! The order system in memory, for unit tests: orders by id and customer,
//! a switch that makes it unavailable, a count of its reads, and the
//! address writes it took (one per key, as the order system's own
//! `Idempotency-Key` makes it).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::address::{Address, AddressWrite};
use super::{Order, OrderLookup, OrderStatus, OrderSystem, OrdersError, ShipTo, Shopper};

#[derive(Default)]
pub struct MemoryOrders {
    orders: Mutex<HashMap<String, Order>>,
    down: AtomicBool,
    reads: AtomicUsize,
    /// Each key's answer, and the writes that changed an address, in order.
    keys: Mutex<HashMap<String, AddressWrite>>,
    writes: Mutex<Vec<(String, Address)>>,
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

impl MemoryOrders {
    /// The addresses written, in order: (order id, address).
    pub fn writes(&self) -> Vec<(String, Address)> {
        self.writes.lock().map(|w| w.clone()).unwrap_or_default()
    }
}

impl OrderSystem for MemoryOrders {
    async fn change_address(&self, order_id: &str, shopper: &Shopper, address: &Address, key: &str) -> AddressWrite {
        if self.down.load(Ordering::SeqCst) {
            return AddressWrite::Unknown(OrdersError::Unreachable);
        }
        let mut keys = self.keys.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(answered) = keys.get(key) {
            return answered.clone();
        }
        let mut orders = self.orders.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let answer = match orders.get_mut(order_id) {
            Some(order) if shopper.owns(order) && order.status == OrderStatus::Placed => {
                order.ship_to = ShipTo {
                    name: address.name.clone(),
                    line1: address.line1.clone(),
                    city: address.city.clone(),
                    postcode: address.postcode.clone(),
                    country: address.country.clone(),
                };
                if let Ok(mut writes) = self.writes.lock() {
                    writes.push((order_id.to_owned(), address.clone()));
                }
                AddressWrite::Changed
            }
            Some(order) if shopper.owns(order) => AddressWrite::Shipped,
            _ => AddressWrite::Unknown(OrdersError::Status(404)),
        };
        keys.insert(key.to_owned(), answer.clone());
        answer
    }

    async fn order(&self, order_id: &str, shopper: &Shopper) -> OrderLookup {
        self.reads.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            return OrderLookup::Unavailable(OrdersError::Unreachable);
        }
        let orders = self.orders.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match orders.get(order_id) {
            Some(order) if shopper.owns(order) => OrderLookup::Found(Box::new(order.clone())),
            _ => OrderLookup::NotFound,
        }
    }
}
