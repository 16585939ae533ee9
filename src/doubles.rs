//! In-memory stand-ins for the turn's ports, shared by the turn's
//! paused-clock tests and the criterion benchmark. Not used by the function.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::chat::{ChatModel, Completion, CompletionError, Message, ToolCall, Usage};
use crate::orders::{Item, Order, OrderLookup, OrderStatus, OrderSystem, ShipTo};
use crate::refund::policy::OrderFacts;
use crate::refund::{PaymentOutcome, Payments, RefundGateway, RefundOutcome, RefundRequest};

/// One completion call's result.
#[derive(Debug, Clone)]
pub enum Step {
    Reply(Completion),
    /// Sleeps (on tokio's clock) for the given time, then times out.
    Timeout(Duration),
    Status(u16),
}

impl Step {
    pub fn text(reply: &str) -> Step {
        Step::Reply(Completion {
            content: Some(reply.into()),
            usage: Some(Usage {
                prompt_tokens: 120,
                completion_tokens: 15,
            }),
            ..Completion::default()
        })
    }

    /// An assistant message asking for tools: `(id, name, arguments text)`.
    pub fn tools(calls: &[(&str, &str, &str)]) -> Step {
        Step::Reply(Completion {
            tool_calls: calls
                .iter()
                .map(|(id, name, arguments)| ToolCall {
                    id: (*id).into(),
                    name: (*name).into(),
                    arguments: (*arguments).into(),
                })
                .collect(),
            finish_reason: Some("tool_calls".into()),
            usage: Some(Usage {
                prompt_tokens: 120,
                completion_tokens: 15,
            }),
            ..Completion::default()
        })
    }
}

enum Script {
    /// Steps in call order; a call past the end is a test failure.
    Sequence(Mutex<VecDeque<Step>>),
    /// The step for the round the history is in (how many assistant messages
    /// it holds): the same script for every turn, however many are run.
    ByRound(Vec<Step>),
}

/// A model that plays a script and records what each call was sent, and when.
pub struct ScriptedModel {
    script: Script,
    calls: Mutex<Vec<(Instant, Vec<Message>)>>,
    record: bool,
}

impl ScriptedModel {
    pub fn new(steps: Vec<Step>) -> Self {
        ScriptedModel {
            script: Script::Sequence(Mutex::new(steps.into())),
            calls: Mutex::default(),
            record: true,
        }
    }

    /// For benchmarks: answers by round and records nothing.
    pub fn by_round(steps: Vec<Step>) -> Self {
        ScriptedModel {
            script: Script::ByRound(steps),
            calls: Mutex::default(),
            record: false,
        }
    }

    pub fn calls(&self) -> Vec<(Instant, Vec<Message>)> {
        self.calls.lock().map(|calls| calls.clone()).unwrap_or_default()
    }
}

impl ChatModel for ScriptedModel {
    async fn complete(
        &self,
        messages: &[Message],
        _offered: &crate::chat::Offered,
    ) -> Result<Completion, CompletionError> {
        if self.record
            && let Ok(mut calls) = self.calls.lock()
        {
            calls.push((Instant::now(), messages.to_vec()));
        }
        let step = match &self.script {
            Script::Sequence(steps) => steps.lock().ok().and_then(|mut steps| steps.pop_front()),
            Script::ByRound(steps) => {
                let round = messages
                    .iter()
                    .filter(|m| matches!(m, Message::Assistant { .. }))
                    .count();
                steps.get(round).cloned()
            }
        };
        match step {
            Some(Step::Reply(completion)) => Ok(completion),
            Some(Step::Timeout(after)) => {
                tokio::time::sleep(after).await;
                Err(CompletionError::Timeout)
            }
            Some(Step::Status(status)) => Err(CompletionError::Status { status }),
            None => Err(CompletionError::Unusable("the scripted model ran out of steps".into())),
        }
    }
}

/// A stand-in that answers every call with the same outcome and records
/// each request: `Recording<RefundOutcome>` is the turn's refund gateway (any
/// outcome: pending approval, already recorded, ...), `Recording<PaymentOutcome>`
/// the payments service.
pub struct Recording<O> {
    outcome: O,
    requests: Mutex<Vec<RefundRequest>>,
    record: bool,
    /// What the books say of an order's recent refunds (rule 7's return
    /// check): none by default; `None` plays books that cannot say.
    refunded_recently: Option<bool>,
}

/// The turn's refund gateway stand-in.
pub type RecordingRefunds = Recording<RefundOutcome>;
/// The payments stand-in.
pub type RecordingPayments = Recording<PaymentOutcome>;

impl<O: Clone> Recording<O> {
    pub fn answering(outcome: O) -> Self {
        Recording {
            outcome,
            requests: Mutex::default(),
            record: true,
            refunded_recently: Some(false),
        }
    }

    /// Books that say every order was refunded in rule 2's window (`Some(true)`),
    /// or cannot say (`None`).
    pub fn with_refunded_recently(mut self, refunded_recently: Option<bool>) -> Self {
        self.refunded_recently = refunded_recently;
        self
    }

    /// For benchmarks: records nothing.
    pub fn silent(outcome: O) -> Self {
        Recording {
            record: false,
            ..Recording::answering(outcome)
        }
    }

    pub fn requests(&self) -> Vec<RefundRequest> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    fn answer(&self, request: &RefundRequest) -> O {
        if self.record
            && let Ok(mut requests) = self.requests.lock()
        {
            requests.push(request.clone());
        }
        self.outcome.clone()
    }
}

impl RefundGateway for Recording<RefundOutcome> {
    async fn refund(&self, request: &RefundRequest) -> RefundOutcome {
        self.answer(request)
    }

    async fn order_refunded_recently(&self, _order_id: &str) -> Option<bool> {
        self.refunded_recently
    }
}

impl Payments for Recording<PaymentOutcome> {
    async fn pay(&self, request: &RefundRequest) -> PaymentOutcome {
        self.answer(request)
    }
}

/// An order system that has every order the asker asks for: delivered a
/// day ago, with far more paid than any test refunds, so the order's rules
/// (contract 16) stay out of the way of tests about the others.
pub struct AnyOrder;

/// What [`AnyOrder`] says of every order, as the refund rules read it.
pub fn a_delivered_order() -> OrderFacts {
    OrderFacts::Read(any_order("A-1", "u").snapshot())
}

pub fn any_order(order_id: &str, customer: &str) -> Order {
    // One moment for the whole process, so that two reads compare equal.
    static DELIVERED_AT_MS: std::sync::LazyLock<u64> =
        std::sync::LazyLock::new(|| crate::clock::now_ms().saturating_sub(86_400_000));
    let delivered_at_ms = *DELIVERED_AT_MS;
    Order {
        order_id: order_id.to_owned(),
        customer_id: customer.to_owned(),
        email: None,
        status: OrderStatus::Delivered,
        placed_at: crate::clock::rfc3339(delivered_at_ms.saturating_sub(3 * 86_400_000)),
        placed_at_ms: delivered_at_ms.saturating_sub(3 * 86_400_000),
        delivered_at: Some(crate::clock::rfc3339(delivered_at_ms)),
        delivered_at_ms: Some(delivered_at_ms),
        currency: "EUR".into(),
        paid_cents: 10_000_000,
        refunded_cents: 0,
        items: vec![Item {
            name: "Parcel".into(),
            quantity: 1,
            unit_price_cents: 10_000_000,
            returned_quantity: 0,
        }],
        ship_to: ShipTo {
            name: "Test Person".into(),
            line1: "1 Test Street".into(),
            city: "Testville".into(),
            postcode: "T1 1TT".into(),
            country: "GB".into(),
        },
        has_open_return: false,
        open_return_cents: 0,
    }
}

impl OrderSystem for AnyOrder {
    async fn order(&self, order_id: &str, shopper: &crate::orders::Shopper) -> OrderLookup {
        OrderLookup::Found(Box::new(any_order(order_id, shopper.user_id())))
    }

    /// Every order is delivered: an address change is refused as shipped.
    async fn change_address(
        &self,
        _order_id: &str,
        _shopper: &crate::orders::Shopper,
        _address: &crate::orders::address::Address,
        _key: &str,
    ) -> crate::orders::address::AddressWrite {
        crate::orders::address::AddressWrite::Shipped
    }

    /// Every order is the same parcel: no return of it is on record.
    async fn start_return(
        &self,
        order_id: &str,
        _shopper: &crate::orders::Shopper,
        _arguments: &crate::orders::returns::ReturnArguments,
        _key: &str,
    ) -> crate::orders::returns::ReturnWrite {
        crate::orders::returns::ReturnWrite::NotReturnable(format!("order {order_id} is not returnable here"))
    }
}

/// The shipped help centre with the contract's default settings, built once.
pub fn shipped_help_centre() -> &'static crate::help::search::HelpCentre {
    static HELP: std::sync::LazyLock<crate::help::search::HelpCentre> = std::sync::LazyLock::new(|| {
        let placeholders = crate::help::Placeholders::of_rules(30.0, 5000, 24.0, 10000);
        crate::help::search::HelpCentre::new(crate::help::built_in(&placeholders).unwrap_or_default())
    });
    &HELP
}
