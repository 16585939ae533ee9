//! The order system's HTTP adapter (contract 16): `GET
//! {ORDERS_BASE_URL}/orders/{order_id}` with `X-Customer-Id` (a guest's
//! with `X-Customer-Email`, contract 27, and the e-mail nowhere else), and the one
//! write, `POST .../orders/{order_id}/address` (contract 26) with an
//! `Idempotency-Key` too, tried once more with the same key after a timeout
//! or a broken connection (never after an answer). The id and customer are
//! percent-encoded as UTF-8 with RFC 3986's unreserved characters kept. A
//! read is safe to repeat, so a timeout, a broken connection or a 5xx is
//! tried once more; each try has its own timeout. A 200 of another customer
//! (for a guest: whose `email` is not the guest's, compared without case)
//! is a 404: the port never hands out another customer's order.
//!
//! What the adapter does not believe (contract 16): an id of `.` or `..` is
//! never sent (percent-encoding keeps dots, so it would be a dot segment and
//! read `/orders/` or `/`: a 404 without asking), a 200 for another order id,
//! a body over [`MAX_BODY_BYTES`] (read in chunks and cut off, so a huge
//! answer never fills a 128 MB function) and a delivery more than a day
//! ahead of this clock are unavailable, never an order.

use std::time::Duration;

use crate::http_client::percent_encoded;

use super::address::{Address, AddressWrite};
use super::returns::{ReturnArguments, ReturnWrite, StartedReturn};
use super::{Order, OrderLookup, OrderSystem, OrdersError, Shopper};

pub const CUSTOMER_HEADER: &str = "x-customer-id";
/// A guest's verified e-mail, instead of [`CUSTOMER_HEADER`] (contract 27).
pub const EMAIL_HEADER: &str = "x-customer-email";
/// Tries per read: the first and one more.
pub const TRIES: u32 = 2;
/// An order's JSON is a few hundred bytes; past this it is not one.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// A delivery time further ahead than this is not a clock apart: it is wrong.
const DELIVERY_AHEAD_MS: u64 = 24 * 3_600_000;

pub struct HttpOrders {
    http: reqwest::Client,
    orders_url: String,
    timeout: Duration,
}

impl HttpOrders {
    /// `http` is the function's one client ([`crate::http_client::money_path_client`]).
    pub fn new(http: reqwest::Client, base_url: &str, timeout: Duration) -> Self {
        HttpOrders {
            http,
            orders_url: format!("{}/orders/", base_url.trim_end_matches('/')),
            timeout,
        }
    }

    async fn once(&self, order_id: &str, shopper: &Shopper) -> Result<OrderLookup, OrdersError> {
        let url = format!("{}{}", self.orders_url, percent_encoded(order_id));
        let exchange = async {
            let response = asked_for(self.http.get(&url), shopper)
                .send()
                .await
                .map_err(|_| OrdersError::Unreachable)?;
            let status = response.status();
            let body = capped_body(response).await?;
            Ok::<_, OrdersError>((status, body))
        };
        let (status, body) = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| OrdersError::Timeout)??;
        match status.as_u16() {
            200 => {
                let order = Order::from_json(&body).ok_or(OrdersError::NotAnOrder)?;
                if order.order_id != order_id {
                    return Err(OrdersError::OtherOrder);
                }
                if order
                    .delivered_at_ms
                    .is_some_and(|at| at > crate::clock::now_ms().saturating_add(DELIVERY_AHEAD_MS))
                {
                    return Err(OrdersError::DeliveredInTheFuture);
                }
                Ok(if shopper.owns(&order) {
                    OrderLookup::Found(Box::new(order))
                } else {
                    OrderLookup::NotFound
                })
            }
            404 => Ok(OrderLookup::NotFound),
            other => Err(OrdersError::Status(other)),
        }
    }
}

impl HttpOrders {
    /// One try of a write: its status and body (capped as a read's).
    async fn write_once(
        &self,
        order_id: &str,
        shopper: &Shopper,
        write: &Write<'_>,
        key: &str,
    ) -> Result<(u16, Vec<u8>), OrdersError> {
        let url = format!("{}{}/{}", self.orders_url, percent_encoded(order_id), write.path);
        let exchange = async {
            let response = asked_for(self.http.post(&url), shopper)
                .header(IDEMPOTENCY_HEADER, key)
                .json(&write.body)
                .send()
                .await
                .map_err(|_| OrdersError::Unreachable)?;
            let status = response.status().as_u16();
            let body = capped_body(response).await.unwrap_or_default();
            Ok::<_, OrdersError>((status, body))
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| OrdersError::Timeout)?
    }

    /// A write (contracts 26 and 28): tried once more with the same key
    /// after a timeout or a broken connection, never after an answer.
    async fn write(
        &self,
        order_id: &str,
        shopper: &Shopper,
        write: Write<'_>,
        key: &str,
    ) -> Result<(u16, Vec<u8>), OrdersError> {
        if is_dot_segment(order_id) {
            return Err(OrdersError::Status(404));
        }
        let mut tries = 0;
        loop {
            tries += 1;
            match self.write_once(order_id, shopper, &write, key).await {
                Ok(answer) => return Ok(answer),
                // Not answered: the same key again, which writes at most once.
                Err(error @ (OrdersError::Timeout | OrdersError::Unreachable)) if tries < TRIES => {
                    tracing::warn!(event = "orders", op = write.op, error = %error, "tried again");
                }
                Err(error) => {
                    tracing::error!(event = "orders", op = write.op, error = %error, tries);
                    return Err(error);
                }
            }
        }
    }
}

/// One of the order system's writes: its path under the order, its body,
/// and its name in logs.
struct Write<'a> {
    path: &'static str,
    body: serde_json::Value,
    op: &'a str,
}

/// Whom the request asks for: the customer's id, or the guest's e-mail as
/// it is (an address that is no header value, not ASCII, fails the
/// request: the order is unavailable, never another's).
fn asked_for(request: reqwest::RequestBuilder, shopper: &Shopper) -> reqwest::RequestBuilder {
    match shopper {
        Shopper::Customer(user_id) => request.header(CUSTOMER_HEADER, percent_encoded(user_id)),
        Shopper::Guest { email, .. } => request.header(EMAIL_HEADER, email.expose()),
    }
}

/// The write's key header (contract 26).
pub const IDEMPOTENCY_HEADER: &str = "idempotency-key";

/// The body, read chunk by chunk up to [`MAX_BODY_BYTES`].
async fn capped_body(mut response: reqwest::Response) -> Result<Vec<u8>, OrdersError> {
    if response
        .content_length()
        .is_some_and(|length| length > MAX_BODY_BYTES as u64)
    {
        return Err(OrdersError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|_| OrdersError::Unreachable)? {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(OrdersError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// An id that would not stay one path segment once encoded.
fn is_dot_segment(order_id: &str) -> bool {
    matches!(order_id, "." | "..")
}

/// Worth a second try: the read may not have been answered at all.
fn retried(error: OrdersError) -> bool {
    match error {
        OrdersError::Timeout | OrdersError::Unreachable => true,
        OrdersError::Status(status) => status >= 500,
        OrdersError::NotAnOrder
        | OrdersError::OtherOrder
        | OrdersError::TooLarge
        | OrdersError::DeliveredInTheFuture
        | OrdersError::GuestPool => false,
    }
}

impl OrderSystem for HttpOrders {
    async fn change_address(&self, order_id: &str, shopper: &Shopper, address: &Address, key: &str) -> AddressWrite {
        let write = Write {
            path: "address",
            body: address.body(),
            op: "change_address",
        };
        match self.write(order_id, shopper, write, key).await {
            Ok((200, _)) => AddressWrite::Changed,
            Ok((409, _)) => AddressWrite::Shipped,
            Ok((other, _)) => {
                tracing::error!(event = "orders", op = "change_address", status = other);
                AddressWrite::Unknown(OrdersError::Status(other))
            }
            Err(error) => AddressWrite::Unknown(error),
        }
    }

    async fn start_return(
        &self,
        order_id: &str,
        shopper: &Shopper,
        arguments: &ReturnArguments,
        key: &str,
    ) -> ReturnWrite {
        let write = Write {
            path: "returns",
            body: arguments.body(),
            op: "start_return",
        };
        match self.write(order_id, shopper, write, key).await {
            Ok((201, body)) => match serde_json::from_slice::<StartedReturn>(&body) {
                Ok(started) => ReturnWrite::Started(started),
                // Started, perhaps, but not as the contract says: a person checks.
                Err(_) => ReturnWrite::Unknown(OrdersError::NotAnOrder),
            },
            Ok((409, body)) => {
                let detail = serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|answer| answer["detail"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| "not returnable now".to_owned());
                ReturnWrite::NotReturnable(detail)
            }
            Ok((other, _)) => {
                tracing::error!(event = "orders", op = "start_return", status = other);
                ReturnWrite::Unknown(OrdersError::Status(other))
            }
            Err(error) => ReturnWrite::Unknown(error),
        }
    }

    async fn order(&self, order_id: &str, shopper: &Shopper) -> OrderLookup {
        if is_dot_segment(order_id) {
            return OrderLookup::NotFound;
        }
        let mut tries = 0;
        loop {
            tries += 1;
            match self.once(order_id, shopper).await {
                Ok(found) => return found,
                Err(error) if tries < TRIES && retried(error) => {
                    tracing::warn!(event = "orders", op = "get_order", error = %error, "tried again");
                }
                Err(error) => {
                    tracing::error!(event = "orders", op = "get_order", error = %error, tries);
                    // Every refund now waits for a person (rule 6): someone must know.
                    metrics::counter!("OrderSystemUnavailable").increment(1);
                    return OrderLookup::Unavailable(error);
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
