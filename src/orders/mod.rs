//! The shop's order system (contract 16): what was ordered, paid and
//! refunded, whether and when it arrived, and where it went. Code reads it
//! with the verified customer; what the model says about an order decides
//! nothing. Its writes are a change of the delivery address (contract 26,
//! [`address`]) and a return (contract 28, [`returns`]), each made only
//! once the customer's yes is held in code ([`crate::confirm`]).
//!
//! The port is [`OrderSystem`]; its adapter is [`http::HttpOrders`] (on the
//! function's one HTTP client) and its memory double [`memory::MemoryOrders`];
//! the model reads orders through the `get_order` tool ([`tool`]).
//! The recipient's name, street, city and whole postcode are personal data:
//! [`ShipTo`]'s `Debug` shows none of them, and what a model or a log may see
//! of the address is [`ShipTo::reference`], its postcode's last characters.

pub mod address;
pub mod http;
pub mod memory;
pub mod returns;
pub mod tool;

use serde::Deserialize;

use crate::guest::GuestEmail;
use crate::refund::money::AmountCents;
use crate::refund::policy::{OrderFacts, OrderSnapshot};

/// An order's status as the order system gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrderStatus {
    Placed,
    Shipped,
    Delivered,
    Cancelled,
}

impl OrderStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OrderStatus::Placed => "placed",
            OrderStatus::Shipped => "shipped",
            OrderStatus::Delivered => "delivered",
            OrderStatus::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Item {
    pub name: String,
    pub quantity: u32,
    pub unit_price_cents: u64,
    /// How many were returned already (contract 28); 0 when absent.
    #[serde(default)]
    pub returned_quantity: u32,
}

/// Where the order went. Personal data: never in a `Debug`, a log line, a
/// prompt or a stored exchange.
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct ShipTo {
    pub name: String,
    pub line1: String,
    pub city: String,
    pub postcode: String,
    pub country: String,
}

impl std::fmt::Debug for ShipTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ShipTo({})", self.reference())
    }
}

impl ShipTo {
    /// What the model may know of the address: "address ending in <the
    /// postcode's last 3 characters>", and never the whole postcode: of a
    /// postcode of 3 characters or fewer, one less than all of them.
    pub fn reference(&self) -> String {
        let postcode: Vec<char> = self.postcode.trim().chars().collect();
        let shown = postcode.len().saturating_sub(1).min(3);
        let tail: String = postcode[postcode.len() - shown..].iter().collect();
        format!("address ending in {tail}")
    }
}

/// Whom the order system is asked for (contracts 16 and 27): a customer
/// by their id (`X-Customer-Id`), or a guest by the e-mail they proved
/// (`X-Customer-Email`). Its `Debug` shows no e-mail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shopper {
    Customer(String),
    Guest { user_id: String, email: GuestEmail },
}

impl Shopper {
    /// The user id refunds are paid and recorded with.
    pub fn user_id(&self) -> &str {
        match self {
            Shopper::Customer(user_id) | Shopper::Guest { user_id, .. } => user_id,
        }
    }

    /// Whether the order system's order is this shopper's: a customer's by
    /// its `customer_id`, a guest's by its `email`, compared without case.
    pub fn owns(&self, order: &Order) -> bool {
        match self {
            // A guest's order has no customer id: an empty one owns nothing.
            Shopper::Customer(user_id) => !user_id.is_empty() && order.customer_id == *user_id,
            Shopper::Guest { email, .. } => order
                .email
                .as_ref()
                .is_some_and(|placed_by| email.is(placed_by.expose())),
        }
    }
}

impl From<&str> for Shopper {
    fn from(user_id: &str) -> Shopper {
        Shopper::Customer(user_id.to_owned())
    }
}

/// One order, as the order system answered for the verified customer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    pub order_id: String,
    /// Empty for an order placed by a guest.
    pub customer_id: String,
    /// The e-mail the order was placed with, if the order system gave it
    /// (a guest's order always has one): personal data, never logged.
    pub email: Option<GuestEmail>,
    pub status: OrderStatus,
    /// RFC 3339, as the order system wrote it; `placed_at_ms` is the same moment.
    pub placed_at: String,
    pub placed_at_ms: u64,
    pub delivered_at: Option<String>,
    pub delivered_at_ms: Option<u64>,
    pub currency: String,
    pub paid_cents: u64,
    pub refunded_cents: u64,
    pub items: Vec<Item>,
    pub ship_to: ShipTo,
    /// One of its `returns` is `open` (contract 28): no second one, and no
    /// refund by the agent beside it (contract 8's rule 7).
    pub has_open_return: bool,
    /// What its open returns will refund when their parcels arrive: their
    /// items at the order's unit prices ([`open_return_cents`]).
    pub open_return_cents: u64,
}

impl Order {
    /// What the order has left to refund (contract 8's rule 7): paid, less
    /// refunded (refunds paid: never an open return's promise), less its
    /// open returns' items; never below zero.
    pub fn refundable_cents(&self) -> u64 {
        self.paid_cents
            .saturating_sub(self.refunded_cents)
            .saturating_sub(self.open_return_cents)
    }

    /// The facts a refund is decided on, and its record keeps.
    pub fn snapshot(&self) -> OrderSnapshot {
        OrderSnapshot {
            status: self.status.as_str().to_owned(),
            delivered_at_ms: self.delivered_at_ms,
            paid: AmountCents::new(self.paid_cents),
            refunded: AmountCents::new(self.refunded_cents),
            currency: self.currency.clone(),
            return_open: self.has_open_return,
            open_returns: AmountCents::new(self.open_return_cents),
        }
    }

    /// Reads the order system's 200 body; `None` when it is not the
    /// contract's JSON (then the order system is unavailable, not wrong).
    pub fn from_json(body: &[u8]) -> Option<Order> {
        #[derive(Deserialize)]
        struct Wire {
            order_id: String,
            #[serde(default)]
            customer_id: Option<String>,
            #[serde(default)]
            email: Option<String>,
            status: OrderStatus,
            placed_at: String,
            delivered_at: Option<String>,
            currency: String,
            paid_cents: u64,
            refunded_cents: u64,
            items: Vec<Item>,
            ship_to: ShipTo,
            #[serde(default)]
            returns: Vec<ReturnSeen>,
        }
        #[derive(Deserialize)]
        struct ReturnSeen {
            status: String,
            /// What it returns; absent where the order system does not say.
            #[serde(default)]
            items: Option<Vec<ReturnedLine>>,
        }
        #[derive(Deserialize)]
        struct ReturnedLine {
            name: String,
            quantity: u32,
        }
        let wire: Wire = serde_json::from_slice(body).ok()?;
        let placed_at_ms = epoch_ms(&wire.placed_at)?;
        let delivered_at_ms = match &wire.delivered_at {
            Some(text) => Some(epoch_ms(text)?),
            None => None,
        };
        Some(Order {
            order_id: wire.order_id,
            customer_id: wire.customer_id.unwrap_or_default(),
            email: wire.email.as_deref().and_then(GuestEmail::parse),
            status: wire.status,
            placed_at: wire.placed_at,
            placed_at_ms,
            delivered_at: wire.delivered_at,
            delivered_at_ms,
            currency: wire.currency,
            paid_cents: wire.paid_cents,
            refunded_cents: wire.refunded_cents,
            has_open_return: wire.returns.iter().any(|seen| seen.status == "open"),
            open_return_cents: open_return_cents(
                &wire.items,
                wire.paid_cents.saturating_sub(wire.refunded_cents),
                wire.returns.iter().filter(|seen| seen.status == "open").map(|seen| {
                    seen.items
                        .as_ref()
                        .map(|lines| lines.iter().map(|line| (line.name.as_str(), line.quantity)).collect())
                }),
            ),
            items: wire.items,
            ship_to: wire.ship_to,
        })
    }
}

/// What open returns will refund (contract 8's rule 7): each line at the
/// order's unit price of its item (the highest, where the order names it
/// twice), at most `left` (paid less refunded). An open return whose lines
/// the order system does not give, or that names an item the order does
/// not hold, is taken as all that is left: it can only send more to a
/// person, never let more be paid.
pub fn open_return_cents<'a>(
    items: &[Item],
    left: u64,
    open: impl Iterator<Item = Option<Vec<(&'a str, u32)>>>,
) -> u64 {
    let mut cents: u64 = 0;
    for lines in open {
        let Some(lines) = lines else { return left };
        for (name, quantity) in lines {
            let Some(price) = items
                .iter()
                .filter(|item| item.name == name)
                .map(|item| item.unit_price_cents)
                .max()
            else {
                return left;
            };
            cents = cents.saturating_add(price.saturating_mul(u64::from(quantity)));
        }
    }
    cents.min(left)
}

/// An RFC 3339 time, offsets allowed (AWS's parser, already on the money
/// path), as epoch ms; `None` before 1970 or malformed.
fn epoch_ms(text: &str) -> Option<u64> {
    use aws_smithy_types::DateTime;
    use aws_smithy_types::date_time::Format;
    let moment = DateTime::from_str(text, Format::DateTimeWithOffset).ok()?;
    u64::try_from(moment.to_millis().ok()?).ok()
}

/// Why the order system gave no order. Carries no body and no URL: both
/// hold what a customer or a model wrote, or the customer's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OrdersError {
    #[error("the order system did not answer in time")]
    Timeout,
    #[error("the order system could not be reached")]
    Unreachable,
    #[error("the order system answered HTTP {0}")]
    Status(u16),
    #[error("the order system's answer is not an order")]
    NotAnOrder,
    #[error("the order system answered for another order")]
    OtherOrder,
    #[error("the order system's answer is larger than an order")]
    TooLarge,
    #[error("the order system's delivery time is more than a day ahead")]
    DeliveredInTheFuture,
    /// A guest's order, and the guest pool that holds their e-mail could
    /// not be read (or is not configured): not asked at all (contract 27).
    #[error("the guest's e-mail could not be read from the guest pool")]
    GuestPool,
}

#[cfg(test)]
mod tests {
    use super::{Order, ShipTo};

    fn with_returns(returns: serde_json::Value) -> Order {
        let order = serde_json::json!({
            "order_id": "A-1", "customer_id": "u", "status": "delivered",
            "placed_at": "2026-11-01T00:00:00Z", "delivered_at": "2026-11-03T00:00:00Z",
            "currency": "EUR", "paid_cents": 4000, "refunded_cents": 500,
            "items": [{"name": "Blue mug", "quantity": 2, "unit_price_cents": 1250},
                      {"name": "Teapot", "quantity": 1, "unit_price_cents": 1500}],
            "ship_to": {"name": "n", "line1": "l", "city": "c", "postcode": "69002", "country": "FR"},
            "returns": returns,
        });
        Order::from_json(order.to_string().as_bytes()).expect("an order")
    }

    #[test]
    fn an_open_returns_items_are_not_left_to_refund() {
        let closed = with_returns(serde_json::json!([{"return_id": "r0", "status": "refunded",
            "items": [{"name": "Teapot", "quantity": 1}]}]));
        assert!(!closed.has_open_return);
        assert_eq!(
            closed.refundable_cents(),
            3500,
            "a closed return is in refunded_cents already"
        );

        let open = with_returns(serde_json::json!([{"return_id": "r1", "status": "open",
            "items": [{"name": "Blue mug", "quantity": 1}]}]));
        assert!(open.has_open_return);
        assert_eq!(
            open.refundable_cents(),
            2250,
            "paid 4000, refunded 500, one mug of 1250 coming back"
        );
        let snapshot = open.snapshot();
        assert!(snapshot.return_open);
        assert_eq!(snapshot.refundable().cents(), 2250);

        // What the order system does not say is taken as all that is left.
        for unsaid in [
            serde_json::json!([{"return_id": "r1", "status": "open"}]),
            serde_json::json!([{"return_id": "r1", "status": "open", "items": [{"name": "Kettle", "quantity": 1}]}]),
        ] {
            assert_eq!(with_returns(unsaid).refundable_cents(), 0);
        }
    }

    #[test]
    fn the_reference_never_shows_the_whole_postcode() {
        let ship_to = |postcode: &str| ShipTo {
            name: "n".into(),
            line1: "l".into(),
            city: "c".into(),
            postcode: postcode.into(),
            country: "FR".into(),
        };
        assert_eq!(ship_to("SW1A 1AA").reference(), "address ending in 1AA");
        assert_eq!(ship_to("69002").reference(), "address ending in 002");
        assert_eq!(ship_to("123").reference(), "address ending in 23");
        assert_eq!(ship_to("7").reference(), "address ending in ");
    }
}

/// What reading an order found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderLookup {
    Found(Box<Order>),
    /// No such order for this customer: unknown, or another customer's.
    NotFound,
    Unavailable(OrdersError),
}

impl OrderLookup {
    /// A short name for logs.
    pub fn name(&self) -> &'static str {
        match self {
            OrderLookup::Found(_) => "found",
            OrderLookup::NotFound => "not_found",
            OrderLookup::Unavailable(_) => "unavailable",
        }
    }

    /// What the refund rules read of it.
    pub fn facts(&self) -> OrderFacts {
        match self {
            OrderLookup::Found(order) => OrderFacts::Read(order.snapshot()),
            OrderLookup::NotFound => OrderFacts::NotFound,
            OrderLookup::Unavailable(_) => OrderFacts::Unverified,
        }
    }
}

/// The order system, read with the verified customer or guest.
pub trait OrderSystem: Send + Sync {
    fn order(&self, order_id: &str, shopper: &Shopper) -> impl Future<Output = OrderLookup> + Send;

    /// Changes the order's delivery address (contract 26) as `shopper`,
    /// under `key` (the proposal's: the same key writes once).
    fn change_address(
        &self,
        order_id: &str,
        shopper: &Shopper,
        address: &address::Address,
        key: &str,
    ) -> impl Future<Output = address::AddressWrite> + Send;

    /// Starts a return of the order's items (contract 28) as `shopper`,
    /// under `key` (the proposal's: the same key starts it once).
    fn start_return(
        &self,
        order_id: &str,
        shopper: &Shopper,
        arguments: &returns::ReturnArguments,
        key: &str,
    ) -> impl Future<Output = returns::ReturnWrite> + Send;
}

impl<T: OrderSystem> OrderSystem for &T {
    fn order(&self, order_id: &str, shopper: &Shopper) -> impl Future<Output = OrderLookup> + Send {
        (**self).order(order_id, shopper)
    }

    fn change_address(
        &self,
        order_id: &str,
        shopper: &Shopper,
        address: &address::Address,
        key: &str,
    ) -> impl Future<Output = address::AddressWrite> + Send {
        (**self).change_address(order_id, shopper, address, key)
    }

    fn start_return(
        &self,
        order_id: &str,
        shopper: &Shopper,
        arguments: &returns::ReturnArguments,
        key: &str,
    ) -> impl Future<Output = returns::ReturnWrite> + Send {
        (**self).start_return(order_id, shopper, arguments, key)
    }
}
