//! The order system as the support team's decisions read it (contract 16):
//! a record names its customer by user id, and the order system answers a
//! guest only by the e-mail they proved (contract 27). So a guest's record
//! (`guest:<sub>`) is read by the e-mail the guest pool holds for that sub,
//! read afresh each time and kept nowhere. Without the guest pool
//! (`GUEST_POOL_ID` unset) a guest's order is unavailable, and an approval
//! of it pays nothing; a guest the pool no longer has has no order.

use crate::guest::{self, directory::GuestDirectory};
use crate::orders::address::{Address, AddressWrite};
use crate::orders::http::HttpOrders;
use crate::orders::returns::{ReturnArguments, ReturnWrite};
use crate::orders::{OrderLookup, OrderSystem, OrdersError, Shopper};

pub struct StaffOrders {
    http: HttpOrders,
    guests: Option<GuestDirectory>,
}

impl StaffOrders {
    pub fn new(http: HttpOrders, guests: Option<GuestDirectory>) -> StaffOrders {
        StaffOrders { http, guests }
    }

    /// The guest pool, when there is one (forgetting a guest deletes its user).
    pub fn guests(&self) -> Option<&GuestDirectory> {
        self.guests.as_ref()
    }

    /// Whom to ask the order system for: a guest's user id becomes the
    /// guest's verified e-mail; `Ok(None)`: the pool has no such guest.
    async fn asked(&self, shopper: &Shopper) -> Result<Option<Shopper>, OrdersError> {
        let Shopper::Customer(user_id) = shopper else {
            return Ok(Some(shopper.clone()));
        };
        let Some(sub) = user_id.strip_prefix(guest::USER_PREFIX) else {
            return Ok(Some(shopper.clone()));
        };
        let guests = self.guests.as_ref().ok_or(OrdersError::GuestPool)?;
        match guests.email(sub).await {
            Ok(email) => Ok(email.map(|email| Shopper::Guest {
                user_id: user_id.clone(),
                email,
            })),
            Err(error) => {
                tracing::error!(event = "guest_pool", op = "admin_get_user", error = %error);
                Err(OrdersError::GuestPool)
            }
        }
    }
}

impl OrderSystem for StaffOrders {
    async fn order(&self, order_id: &str, shopper: &Shopper) -> OrderLookup {
        match self.asked(shopper).await {
            Ok(Some(asked)) => self.http.order(order_id, &asked).await,
            Ok(None) => OrderLookup::NotFound,
            Err(error) => OrderLookup::Unavailable(error),
        }
    }

    async fn change_address(&self, order_id: &str, shopper: &Shopper, address: &Address, key: &str) -> AddressWrite {
        match self.asked(shopper).await {
            Ok(Some(asked)) => self.http.change_address(order_id, &asked, address, key).await,
            Ok(None) => AddressWrite::Unknown(OrdersError::Status(404)),
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
        match self.asked(shopper).await {
            Ok(Some(asked)) => self.http.start_return(order_id, &asked, arguments, key).await,
            Ok(None) => ReturnWrite::Unknown(OrdersError::Status(404)),
            Err(error) => ReturnWrite::Unknown(error),
        }
    }
}
