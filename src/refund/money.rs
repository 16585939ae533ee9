//! Money, as one type. Every amount in the function is a whole, positive or
//! zero number of cents: the tool's arguments, the payments request, the
//! receipt, the ledger and the policy limits all speak [`AmountCents`], so a
//! signed/unsigned or euros/cents mix-up cannot compile.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AmountCents(u64);

impl AmountCents {
    pub const ZERO: AmountCents = AmountCents(0);

    pub const fn new(cents: u64) -> Self {
        AmountCents(cents)
    }

    pub const fn cents(self) -> u64 {
        self.0
    }

    /// `None` on overflow, which no real total reaches but a model's argument might.
    pub fn checked_add(self, other: AmountCents) -> Option<AmountCents> {
        self.0.checked_add(other.0).map(AmountCents)
    }
}

impl AmountCents {
    /// What a customer reads (contract 36): `120.00 EUR`, the amount as
    /// people write it with the order's currency; a currency that is not
    /// three letters (the order system's text) is left out, not shown raw.
    pub fn in_currency(self, currency: &str) -> String {
        let code = currency.trim();
        if code.len() == 3 && code.chars().all(|c| c.is_ascii_alphabetic()) {
            format!("{self} {}", code.to_ascii_uppercase())
        } else {
            self.to_string()
        }
    }
}

/// `12.50`: for people (the admin's tables); the wire always carries cents.
impl fmt::Display for AmountCents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:02}", self.0 / 100, self.0 % 100)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_as_a_decimal_and_sent_as_cents() {
        assert_eq!(AmountCents::new(1250).to_string(), "12.50");
        assert_eq!(AmountCents::new(7).to_string(), "0.07");
        assert_eq!(serde_json::to_string(&AmountCents::new(1250)).unwrap(), "1250");
        assert!(serde_json::from_str::<AmountCents>("-1").is_err());
    }

    #[test]
    fn a_customer_reads_the_amount_with_its_currency() {
        assert_eq!(AmountCents::new(12000).in_currency("EUR"), "120.00 EUR");
        assert_eq!(AmountCents::new(1250).in_currency(" eur "), "12.50 EUR");
        for odd in ["", "EURO", "E\u{1b}R", "12$"] {
            assert_eq!(AmountCents::new(1250).in_currency(odd), "12.50", "{odd:?}");
        }
    }
}
