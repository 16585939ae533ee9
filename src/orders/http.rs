//! The order system's HTTP adapter (contract 16): `GET
//! {ORDERS_BASE_URL}/orders/{order_id}` with `X-Customer-Id`, both
//! percent-encoded as UTF-8 with RFC 3986's unreserved characters kept. A
//! read is safe to repeat, so a timeout, a broken connection or a 5xx is
//! tried once more; each try has its own timeout. A 200 of another customer
//! is a 404: the port never hands out another customer's order.

use std::time::Duration;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::{Order, OrderLookup, OrderSystem, OrdersError};

/// Everything but RFC 3986's unreserved characters is encoded.
const NOT_UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

pub const CUSTOMER_HEADER: &str = "x-customer-id";
/// Tries per read: the first and one more.
pub const TRIES: u32 = 2;

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

    async fn once(&self, order_id: &str, customer: &str) -> Result<OrderLookup, OrdersError> {
        let url = format!("{}{}", self.orders_url, utf8_percent_encode(order_id, NOT_UNRESERVED));
        let exchange = async {
            let response = self
                .http
                .get(&url)
                .header(
                    CUSTOMER_HEADER,
                    utf8_percent_encode(customer, NOT_UNRESERVED).to_string(),
                )
                .send()
                .await
                .map_err(|_| OrdersError::Unreachable)?;
            let status = response.status();
            let body = response.bytes().await.map_err(|_| OrdersError::Unreachable)?;
            Ok::<_, OrdersError>((status, body))
        };
        let (status, body) = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| OrdersError::Timeout)??;
        match status.as_u16() {
            200 => {
                let order = Order::from_json(&body).ok_or(OrdersError::NotAnOrder)?;
                Ok(if order.customer_id == customer {
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

/// Worth a second try: the read may not have been answered at all.
fn retried(error: OrdersError) -> bool {
    match error {
        OrdersError::Timeout | OrdersError::Unreachable => true,
        OrdersError::Status(status) => status >= 500,
        OrdersError::NotAnOrder => false,
    }
}

impl OrderSystem for HttpOrders {
    async fn order(&self, order_id: &str, customer: &str) -> OrderLookup {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.once(order_id, customer).await {
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
