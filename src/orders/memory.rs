//! The order system in memory, for unit tests: orders by id and customer,
//! a switch that makes it unavailable, a count of its reads, and the
//! address writes and returns it took (one per key, as the order system's
//! own `Idempotency-Key` makes it).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::address::{Address, AddressWrite};
use super::returns::{ReturnArguments, ReturnWrite, StartedReturn};
use super::{Order, OrderLookup, OrderStatus, OrderSystem, OrdersError, ShipTo, Shopper};

#[derive(Default)]
pub struct MemoryOrders {
    orders: Mutex<HashMap<String, Order>>,
    down: AtomicBool,
    reads: AtomicUsize,
    /// Each key's answer, and the writes that changed an address, in order.
    keys: Mutex<HashMap<String, AddressWrite>>,
    writes: Mutex<Vec<(String, Address)>>,
    /// Each return key's answer, and the returns started, in order.
    return_keys: Mutex<HashMap<String, ReturnWrite>>,
    returns: Mutex<Vec<(String, ReturnArguments)>>,
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

    /// The returns started, in order: (order id, what was returned).
    pub fn returns(&self) -> Vec<(String, ReturnArguments)> {
        self.returns.lock().map(|r| r.clone()).unwrap_or_default()
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

    /// As the order system: a delivered order of the shopper's with no
    /// return open and enough of each item (the window is the caller's
    /// check); then the return is open and its items returned.
    async fn start_return(
        &self,
        order_id: &str,
        shopper: &Shopper,
        arguments: &ReturnArguments,
        key: &str,
    ) -> ReturnWrite {
        if self.down.load(Ordering::SeqCst) {
            return ReturnWrite::Unknown(OrdersError::Unreachable);
        }
        let mut keys = self.return_keys.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(answered) = keys.get(key) {
            return answered.clone();
        }
        let mut orders = self.orders.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let answer = match orders.get_mut(order_id) {
            Some(order) if shopper.owns(order) => {
                let holds = |order: &Order| {
                    arguments.items.iter().all(|line| {
                        order.items.iter().any(|item| {
                            item.name == line.name
                                && item.quantity.saturating_sub(item.returned_quantity) >= line.quantity
                        })
                    })
                };
                if order.status != OrderStatus::Delivered || order.has_open_return || !holds(order) {
                    ReturnWrite::NotReturnable(format!("order {order_id} is not returnable now"))
                } else {
                    let mut refund_cents = 0;
                    for line in &arguments.items {
                        if let Some(item) = order.items.iter_mut().find(|item| item.name == line.name) {
                            item.returned_quantity += line.quantity;
                            refund_cents += item.unit_price_cents * u64::from(line.quantity);
                        }
                    }
                    order.has_open_return = true;
                    order.open_return_cents = order.open_return_cents.saturating_add(refund_cents);
                    let mut returns = self.returns.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                    returns.push((order_id.to_owned(), arguments.clone()));
                    let return_id = format!("ret_{:06}", returns.len());
                    ReturnWrite::Started(StartedReturn {
                        label_url: format!("https://labels.example/{return_id}"),
                        return_id,
                        refund_cents,
                        expires_at: "2026-12-31T00:00:00Z".into(),
                    })
                }
            }
            _ => ReturnWrite::Unknown(OrdersError::Status(404)),
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
