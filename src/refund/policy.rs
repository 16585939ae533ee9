//! Refund policy (contract 8): the model proposes a refund, code decides
//! whether it runs now or waits for a person. Pure: the rules see the amount
//! and what the ledger knows, and name every reason that fires.
//!
//! 1. The amount is above `AUTO_REFUND_LIMIT_CENTS`.
//! 2. The order already has a refund record from the last
//!    `ORDER_REFUND_WINDOW_HOURS` that may have moved money (any customer's).
//! 3. The customer's automatic refunds of the current UTC day, plus this one,
//!    exceed `USER_DAILY_AUTO_LIMIT_CENTS` (a guest's day is their verified
//!    e-mail's, never their pool `sub`'s: [`crate::guest::DayKey`]).
//!
//! Rules 4 to 7 read the order ([`order_reasons`]); rule 7 is the order's
//! open return: its refund is the order system's when the parcel arrives,
//! so the agent pays nothing itself beside it.
//!
//! Rules 2 and 3 need history, and history changes under concurrent
//! requests, so the ledger does not read it and then write: it writes the
//! refund record together with guard items in one DynamoDB transaction
//! whose conditions *are* rules 2 and 3 ([`crate::ledger::dynamo`]). The
//! facts it reports back come here to be judged, so there is one set of rules.

use std::time::Duration;

use crate::refund::Routed;
use crate::refund::money::AmountCents;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub auto_refund_limit: AmountCents,
    pub order_window: Duration,
    pub user_daily_auto_limit: AmountCents,
    /// Rule 5: `REFUND_WINDOW_DAYS`, from delivery.
    pub refund_window: Duration,
}

impl Limits {
    /// Rule 2's window: refunds recorded at or after this instant count.
    pub fn window_start_ms(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.order_window.as_millis() as u64)
    }

    /// Rule 3: the most the customer's automatic refunds of the day may
    /// already add up to for `amount` to pass; `None` when `amount` alone is
    /// above the daily limit.
    pub fn daily_headroom(&self, amount: AmountCents) -> Option<AmountCents> {
        self.user_daily_auto_limit
            .cents()
            .checked_sub(amount.cents())
            .map(AmountCents::new)
    }

    /// Rule 2 on an order guard's facts: it counts a refund that may have
    /// moved money, and the latest it counted is inside the window.
    pub fn order_refunded_recently(&self, counts_any: bool, last_at_ms: Option<u64>, now_ms: u64) -> bool {
        counts_any && last_at_ms.is_some_and(|at| at >= self.window_start_ms(now_ms))
    }
}

/// How rule 2 compares order ids (contract 8): surrounding white space
/// removed, letters case-folded, so `A-1001` and `a-1001 ` are one order.
/// Folding can only merge ids, so it sends more refunds to a person, never
/// fewer. Per character, so the result never depends on a letter's neighbours.
pub fn order_key(order_id: &str) -> String {
    order_id.trim().chars().flat_map(char::to_lowercase).collect()
}

/// Why a refund waits for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    AmountAboveLimit,
    OrderRefundedRecently,
    DailyLimitExceeded,
    /// Rule 4 (contract 16): the order is not delivered.
    NotDelivered,
    /// Rule 5: it was delivered more than `REFUND_WINDOW_DAYS` days ago.
    OutsideRefundWindow,
    /// Rule 6: the order system could not be read.
    OrderUnverified,
    /// Contract 21: the router was unsure of the turn, or failed.
    RouterUnsure,
    /// Contract 21: the turn's labels do not name `refund`, or the shop does
    /// not serve refunds (`AGENT_INTENTS`).
    RefundNotRouted,
    /// Rule 7: the order has a return open, or the conversation started one.
    ReturnOpen,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::AmountAboveLimit => "amount_above_limit",
            Reason::OrderRefundedRecently => "order_refunded_recently",
            Reason::DailyLimitExceeded => "daily_limit_exceeded",
            Reason::NotDelivered => "not_delivered",
            Reason::OutsideRefundWindow => "outside_refund_window",
            Reason::OrderUnverified => "order_unverified",
            Reason::RouterUnsure => "router_unsure",
            Reason::RefundNotRouted => "refund_not_routed",
            Reason::ReturnOpen => "return_open",
        }
    }

    pub fn parse(text: &str) -> Option<Reason> {
        [
            Reason::AmountAboveLimit,
            Reason::OrderRefundedRecently,
            Reason::DailyLimitExceeded,
            Reason::NotDelivered,
            Reason::OutsideRefundWindow,
            Reason::OrderUnverified,
            Reason::RouterUnsure,
            Reason::RefundNotRouted,
            Reason::ReturnOpen,
        ]
        .into_iter()
        .find(|reason| reason.as_str() == text)
    }
}

/// What the ledger knows that the rules need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct History {
    /// The order has a refund record within the window that may have moved money.
    pub order_refunded_recently: bool,
    /// The customer's automatic refunds of the current UTC day that may have
    /// moved money (executed, executing, unknown).
    pub automatic_today: AmountCents,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Automatic,
    /// Every reason that fired, in rule order.
    Approval(Vec<Reason>),
}

/// Rules 1 to 3.
pub fn decide(limits: &Limits, amount: AmountCents, history: &History) -> Decision {
    let mut reasons = Vec::new();
    if amount > limits.auto_refund_limit {
        reasons.push(Reason::AmountAboveLimit);
    }
    if history.order_refunded_recently {
        reasons.push(Reason::OrderRefundedRecently);
    }
    if limits
        .daily_headroom(amount)
        .is_none_or(|headroom| history.automatic_today > headroom)
    {
        reasons.push(Reason::DailyLimitExceeded);
    }
    if reasons.is_empty() {
        Decision::Automatic
    } else {
        Decision::Approval(reasons)
    }
}

/// Rules 1 to 6 together (contract 16): every reason that fires, in rule
/// order. For an order that is refused outright ([`order_refusal`]) there is
/// no decision to make; this is not asked.
pub fn decide_with_order(
    limits: &Limits,
    amount: AmountCents,
    history: &History,
    order: &OrderFacts,
    now_ms: u64,
) -> Decision {
    let mut reasons = match decide(limits, amount, history) {
        Decision::Automatic => Vec::new(),
        Decision::Approval(reasons) => reasons,
    };
    reasons.extend(order_reasons(order, limits.refund_window, now_ms));
    if reasons.is_empty() {
        Decision::Automatic
    } else {
        Decision::Approval(reasons)
    }
}

/// The router (contract 21) sends every refund of its turn to a person, as
/// if the automatic limit were 0, when it was unsure or failed, or when the
/// turn was not routed to refunds; with the rules' own reasons.
pub fn with_routing(decision: Decision, routed: &Routed) -> Decision {
    let routing_reasons = [
        (routed.unsure, Reason::RouterUnsure),
        (routed.refund_not_routed, Reason::RefundNotRouted),
    ];
    if routing_reasons.iter().all(|(fired, _)| !fired) {
        return decision;
    }
    let mut reasons = match decision {
        Decision::Automatic => Vec::new(),
        Decision::Approval(reasons) => reasons,
    };
    reasons.extend(
        routing_reasons
            .iter()
            .filter(|(fired, _)| *fired)
            .map(|(_, reason)| *reason),
    );
    Decision::Approval(reasons)
}

/// What the refund rules read of the order (contract 16): the order code
/// read itself with the verified customer, never what the model said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderFacts {
    Read(OrderSnapshot),
    /// No such order for this customer.
    NotFound,
    /// The order system did not answer (or not with an order), or the
    /// request's reads of it were spent.
    Unverified,
}

/// The facts of an order a refund is decided on, kept on its refund
/// record (no address: the approver needs the order, not where it went).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderSnapshot {
    /// As the order system gave it: `placed`, `shipped`, `delivered`, `cancelled`.
    pub status: String,
    /// Epoch ms; `None` when the order system gave no delivery time.
    pub delivered_at_ms: Option<u64>,
    pub paid: AmountCents,
    pub refunded: AmountCents,
    pub currency: String,
    /// Rule 7: a return of the order is open (the order system says so, or
    /// this conversation started one), and what its items are worth.
    pub return_open: bool,
    pub open_returns: AmountCents,
}

impl OrderSnapshot {
    pub fn delivered(&self) -> bool {
        self.status == "delivered"
    }

    /// What the order has left to refund (rule 7): paid, less refunded, less
    /// what its open returns will refund when their parcels arrive; never
    /// below zero.
    pub fn refundable(&self) -> AmountCents {
        AmountCents::new(
            self.paid
                .cents()
                .saturating_sub(self.refunded.cents())
                .saturating_sub(self.open_returns.cents()),
        )
    }
}

impl OrderFacts {
    /// The snapshot a record keeps: none when code could not read the order.
    pub fn snapshot(&self) -> Option<&OrderSnapshot> {
        match self {
            OrderFacts::Read(snapshot) => Some(snapshot),
            OrderFacts::NotFound | OrderFacts::Unverified => None,
        }
    }
}

/// Why a refund is refused outright, before any record: a tool error, the
/// latch unspent, nothing near payments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderRefusal {
    NotFound,
    AboveRefundable { refundable: AmountCents },
}

impl OrderRefusal {
    /// A short name for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            OrderRefusal::NotFound => "order_not_found",
            OrderRefusal::AboveRefundable { .. } => "above_refundable",
        }
    }
}

/// The refusals that need no person: an order code cannot find, or more
/// than remains refundable on it.
pub fn order_refusal(facts: &OrderFacts, amount: AmountCents) -> Option<OrderRefusal> {
    match facts {
        OrderFacts::NotFound => Some(OrderRefusal::NotFound),
        OrderFacts::Read(order) if amount > order.refundable() => Some(OrderRefusal::AboveRefundable {
            refundable: order.refundable(),
        }),
        _ => None,
    }
}

/// Rules 4 to 7: the reasons the order itself sends a refund to a person,
/// in rule order. `refund_window`: `REFUND_WINDOW_DAYS`. A delivery time in
/// the future (a clock apart) is inside the window; a delivered order with
/// no delivery time cannot be shown to be inside it, so rule 5 fires.
pub fn order_reasons(facts: &OrderFacts, refund_window: Duration, now_ms: u64) -> Vec<Reason> {
    match facts {
        OrderFacts::Read(order) => {
            let mut reasons = Vec::new();
            if !order.delivered() {
                reasons.push(Reason::NotDelivered);
            }
            let window_start = now_ms.saturating_sub(refund_window.as_millis() as u64);
            let outside = match order.delivered_at_ms {
                Some(at) => at < window_start,
                None => order.delivered(),
            };
            if outside {
                reasons.push(Reason::OutsideRefundWindow);
            }
            if order.return_open {
                reasons.push(Reason::ReturnOpen);
            }
            reasons
        }
        OrderFacts::NotFound | OrderFacts::Unverified => vec![Reason::OrderUnverified],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        auto_refund_limit: AmountCents::new(5000),
        order_window: Duration::from_secs(24 * 3600),
        user_daily_auto_limit: AmountCents::new(10000),
        refund_window: Duration::from_secs(30 * 86_400),
    };

    fn cents(n: u64) -> AmountCents {
        AmountCents::new(n)
    }

    #[test]
    fn the_rules_alone_and_together() {
        use Reason::*;
        let quiet = History::default();
        let busy_order = History {
            order_refunded_recently: true,
            ..History::default()
        };
        let spent = |n| History {
            automatic_today: cents(n),
            ..History::default()
        };
        let table: [(&str, u64, History, Decision); 9] = [
            ("a small refund", 1250, quiet, Decision::Automatic),
            ("exactly at the limit", 5000, quiet, Decision::Automatic),
            (
                "one cent above the limit",
                5001,
                quiet,
                Decision::Approval(vec![AmountAboveLimit]),
            ),
            (
                "the order was refunded",
                100,
                busy_order,
                Decision::Approval(vec![OrderRefundedRecently]),
            ),
            ("exactly the daily limit", 1000, spent(9000), Decision::Automatic),
            (
                "one cent over the daily limit",
                1001,
                spent(9000),
                Decision::Approval(vec![DailyLimitExceeded]),
            ),
            (
                "overflowing total",
                1,
                spent(u64::MAX),
                Decision::Approval(vec![DailyLimitExceeded]),
            ),
            (
                "every rule",
                6000,
                History {
                    order_refunded_recently: true,
                    automatic_today: cents(9000),
                },
                Decision::Approval(vec![AmountAboveLimit, OrderRefundedRecently, DailyLimitExceeded]),
            ),
            (
                "above both limits at once",
                10001,
                quiet,
                Decision::Approval(vec![AmountAboveLimit, DailyLimitExceeded]),
            ),
        ];
        for (case, amount, history, expected) in table {
            assert_eq!(decide(&LIMITS, cents(amount), &history), expected, "{case}");
        }
    }

    #[test]
    fn order_ids_compare_trimmed_and_case_folded() {
        assert_eq!(order_key("A-1001"), order_key(" a-1001 \t"));
        assert_eq!(order_key("ÄRGER-1"), order_key("ärger-1"));
        assert_eq!(order_key("ΟΔΟΣ"), "οδοσ", "no context-dependent final sigma");
        assert_ne!(order_key("A-1001"), order_key("A-1002"));
        assert_ne!(
            order_key("A 1001"),
            order_key("A-1001"),
            "inner white space is part of the id"
        );
    }

    #[test]
    fn reasons_round_trip() {
        for reason in [
            Reason::AmountAboveLimit,
            Reason::OrderRefundedRecently,
            Reason::DailyLimitExceeded,
        ] {
            assert_eq!(Reason::parse(reason.as_str()), Some(reason));
        }
    }

    const DAY_MS: u64 = 86_400_000;
    const WINDOW: Duration = Duration::from_secs(30 * 86_400);

    fn read(delivered: bool, delivered_at_ms: Option<u64>, refundable: u64) -> OrderFacts {
        OrderFacts::Read(OrderSnapshot {
            status: if delivered { "delivered" } else { "shipped" }.into(),
            delivered_at_ms,
            paid: cents(refundable + 500),
            refunded: cents(500),
            currency: "EUR".into(),
            return_open: false,
            open_returns: cents(0),
        })
    }

    #[test]
    fn rule_7_an_open_return_sends_the_refund_to_a_person_and_leaves_less_to_refund() {
        let now = 100 * DAY_MS;
        let OrderFacts::Read(mut order) = read(true, Some(now - DAY_MS), 2500) else {
            unreachable!()
        };
        order.return_open = true;
        order.open_returns = cents(1250);
        let facts = OrderFacts::Read(order);
        assert_eq!(
            order_reasons(&facts, WINDOW, now),
            vec![Reason::ReturnOpen],
            "a person, not the agent"
        );
        assert_eq!(
            decide_with_order(&LIMITS, cents(100), &History::default(), &facts, now),
            Decision::Approval(vec![Reason::ReturnOpen])
        );
        assert_eq!(
            order_refusal(&facts, cents(1251)),
            Some(OrderRefusal::AboveRefundable {
                refundable: cents(1250)
            }),
            "the returned item's price is not left to refund"
        );
        assert_eq!(order_refusal(&facts, cents(1250)), None);
        assert_eq!(Reason::parse("return_open"), Some(Reason::ReturnOpen));
    }

    #[test]
    fn the_order_refuses_what_it_cannot_pay_and_sends_the_rest_to_rules_4_to_6() {
        let now = 100 * DAY_MS;
        assert_eq!(
            order_refusal(&OrderFacts::NotFound, cents(1)),
            Some(OrderRefusal::NotFound)
        );
        assert_eq!(
            order_refusal(&read(true, Some(now), 4000), cents(4001)),
            Some(OrderRefusal::AboveRefundable {
                refundable: cents(4000)
            })
        );
        assert_eq!(order_refusal(&read(true, Some(now), 4000), cents(4000)), None);
        assert_eq!(
            order_refusal(&OrderFacts::Unverified, cents(1)),
            None,
            "a person decides"
        );

        use Reason::*;
        let table: [(&str, OrderFacts, Vec<Reason>); 7] = [
            ("delivered yesterday", read(true, Some(now - DAY_MS), 1), vec![]),
            (
                "delivered exactly 30 days ago",
                read(true, Some(now - 30 * DAY_MS), 1),
                vec![],
            ),
            (
                "delivered 30 days and 1 ms ago",
                read(true, Some(now - 30 * DAY_MS - 1), 1),
                vec![OutsideRefundWindow],
            ),
            ("not delivered", read(false, None, 1), vec![NotDelivered]),
            ("delivered in the future", read(true, Some(now + DAY_MS), 1), vec![]),
            (
                "delivered, with no delivery time",
                read(true, None, 1),
                vec![OutsideRefundWindow],
            ),
            (
                "the order system did not answer",
                OrderFacts::Unverified,
                vec![OrderUnverified],
            ),
        ];
        for (case, facts, expected) in table {
            assert_eq!(order_reasons(&facts, WINDOW, now), expected, "{case}");
        }
        for reason in [NotDelivered, OutsideRefundWindow, OrderUnverified] {
            assert_eq!(Reason::parse(reason.as_str()), Some(reason));
        }
    }

    #[test]
    fn rules_4_to_6_join_rules_1_to_3_and_every_reason_is_named() {
        use Reason::*;
        let now = 100 * DAY_MS;
        let busy = History {
            order_refunded_recently: true,
            ..History::default()
        };
        let recent = read(true, Some(now - DAY_MS), 100_000);
        let old = read(true, Some(now - 31 * DAY_MS), 100_000);
        assert_eq!(
            decide_with_order(&LIMITS, cents(100), &History::default(), &recent, now),
            Decision::Automatic
        );
        assert_eq!(
            decide_with_order(&LIMITS, cents(100), &History::default(), &old, now),
            Decision::Approval(vec![OutsideRefundWindow])
        );
        assert_eq!(
            decide_with_order(&LIMITS, cents(6000), &busy, &read(false, None, 100_000), now),
            Decision::Approval(vec![AmountAboveLimit, OrderRefundedRecently, NotDelivered])
        );
        assert_eq!(
            decide_with_order(&LIMITS, cents(100), &History::default(), &OrderFacts::Unverified, now),
            Decision::Approval(vec![OrderUnverified]),
            "never paid on an order code could not read"
        );
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    fn limits() -> impl Strategy<Value = Limits> {
        (0u64..20_000, 0u64..40_000).prop_map(|(auto, daily)| Limits {
            auto_refund_limit: AmountCents::new(auto),
            order_window: Duration::from_secs(3600),
            user_daily_auto_limit: AmountCents::new(daily),
            refund_window: Duration::from_secs(30 * 86_400),
        })
    }

    proptest! {
        /// More history, or a larger amount, never turns an approval into an
        /// automatic refund.
        #[test]
        fn the_rules_are_monotone(
            limits in limits(),
            amount in 0u64..30_000,
            more_amount in 0u64..30_000,
            today in 0u64..30_000,
            more_today in 0u64..30_000,
            recent in any::<bool>(),
        ) {
            let less = History { order_refunded_recently: recent, automatic_today: AmountCents::new(today) };
            let more = History { order_refunded_recently: true, automatic_today: AmountCents::new(today + more_today) };
            let (amount, larger) = (AmountCents::new(amount), AmountCents::new(amount + more_amount));
            if decide(&limits, amount, &more) == Decision::Automatic {
                prop_assert_eq!(decide(&limits, amount, &less), Decision::Automatic);
            }
            if decide(&limits, larger, &less) == Decision::Automatic {
                prop_assert_eq!(decide(&limits, amount, &less), Decision::Automatic);
            }
        }

        /// An automatic refund never takes the day over its limit, nor is above the single limit.
        #[test]
        fn an_automatic_refund_is_within_both_limits(limits in limits(), amount in 0u64..30_000, today in 0u64..30_000) {
            let history = History { order_refunded_recently: false, automatic_today: AmountCents::new(today) };
            if decide(&limits, AmountCents::new(amount), &history) == Decision::Automatic {
                prop_assert!(amount <= limits.auto_refund_limit.cents());
                prop_assert!(today + amount <= limits.user_daily_auto_limit.cents());
            }
        }
    }
}
