//! The router (contract 21): one cheap call before the agent that labels
//! what the customer wants (intents from a fixed list, a risk, a
//! confidence), and what code decides from those labels.
//!
//! The labels are inputs to code, never instructions: an answer is parsed
//! into these types or it is no answer ([`Routing::Failed`]), and the
//! decision ([`decide`]) can only keep money from moving. A high risk or an
//! intent the shop did not give the agent goes to a person before the agent
//! runs; an unsure or failed router lets the turn run, but every refund it
//! proposes waits for a person. So a failed router never refuses the
//! customer and never lets more money move than a working one.
//!
//! - [`call`]: the routing call (its prompt, the messages it sees, the
//!   strict schema), made through [`call::RoutingModel`];
//! - this file: the labels as types, their parsing and the decision.

pub mod call;

use std::fmt;

use crate::handoff::Reason;

/// What a customer can want, as the router names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Intent {
    OrderStatus,
    Refund,
    Return,
    AddressChange,
    AccountAccess,
    PolicyQuestion,
    Other,
}

impl Intent {
    pub const ALL: [Intent; 7] = [
        Intent::OrderStatus,
        Intent::Refund,
        Intent::Return,
        Intent::AddressChange,
        Intent::AccountAccess,
        Intent::PolicyQuestion,
        Intent::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Intent::OrderStatus => "order_status",
            Intent::Refund => "refund",
            Intent::Return => "return",
            Intent::AddressChange => "address_change",
            Intent::AccountAccess => "account_access",
            Intent::PolicyQuestion => "policy_question",
            Intent::Other => "other",
        }
    }

    pub fn parse(text: &str) -> Option<Intent> {
        Intent::ALL.into_iter().find(|intent| intent.as_str() == text)
    }
}

impl fmt::Display for Intent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Risk {
    Low,
    High,
}

impl Risk {
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::High => "high",
        }
    }
}

/// The router's labels, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Labels {
    /// 1 to 3, no repeats, in the router's order.
    pub intents: Vec<Intent>,
    pub risk: Risk,
    /// 0 to 1.
    pub confidence: f64,
}

/// What the routing call gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Routing {
    Labelled(Labels),
    /// A timeout, an error, or an answer outside the schema: the labels are
    /// `unknown`. Why, in code's words (for the log, never the answer's text).
    Failed(&'static str),
}

impl Routing {
    /// As the exchange, the records and the summary line keep it:
    /// `order_status,refund;low;0.92`, or `unknown`.
    pub fn recorded(&self) -> String {
        match self {
            Routing::Labelled(labels) => format!(
                "{};{};{}",
                labels.intents.iter().map(|i| i.as_str()).collect::<Vec<_>>().join(","),
                labels.risk.as_str(),
                labels.confidence
            ),
            Routing::Failed(_) => "unknown".to_owned(),
        }
    }

    /// Labels as [`Routing::recorded`] wrote them, read back (the support
    /// team's report and the replay tasks): `unknown`, or anything that is
    /// not three fields of known labels, is a failed router.
    pub fn from_recorded(recorded: &str) -> Routing {
        let failed = Routing::Failed("recorded as unknown");
        let mut fields = recorded.split(';');
        let (Some(intents), Some(risk), Some(confidence), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return failed;
        };
        let intents: Option<Vec<Intent>> = intents.split(',').map(Intent::parse).collect();
        let risk = match risk {
            "low" => Some(Risk::Low),
            "high" => Some(Risk::High),
            _ => None,
        };
        match (intents, risk, confidence.parse::<f64>()) {
            (Some(intents), Some(risk), Ok(confidence)) if !intents.is_empty() => Routing::Labelled(Labels {
                intents,
                risk,
                confidence,
            }),
            _ => failed,
        }
    }

    /// The intents, or none when the router failed.
    pub fn intents(&self) -> &[Intent] {
        match self {
            Routing::Labelled(labels) => &labels.intents,
            Routing::Failed(_) => &[],
        }
    }
}

/// The intents the agent takes (`AGENT_INTENTS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served(Vec<Intent>);

impl Served {
    pub const DEFAULT: [Intent; 4] = [
        Intent::OrderStatus,
        Intent::Refund,
        Intent::PolicyQuestion,
        Intent::Other,
    ];

    /// `names`, comma-separated: known intents, at least one.
    pub fn parse(names: &str) -> Result<Served, String> {
        let mut served = Vec::new();
        for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let intent = Intent::parse(name).ok_or_else(|| format!("{name:?} is not an intent"))?;
            if !served.contains(&intent) {
                served.push(intent);
            }
        }
        if served.is_empty() {
            return Err("no intent given".to_owned());
        }
        Ok(Served(served))
    }

    pub fn contains(&self, intent: Intent) -> bool {
        self.0.contains(&intent)
    }

    /// These intents that `outer` serves too (a guest's, out of the
    /// agent's); possibly none, and then every turn goes to a person.
    pub fn within(&self, outer: &Served) -> Served {
        Served(
            self.0
                .iter()
                .copied()
                .filter(|intent| outer.contains(*intent))
                .collect(),
        )
    }
}

impl Default for Served {
    fn default() -> Self {
        Served(Served::DEFAULT.to_vec())
    }
}

/// What code does with the labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The agent runs; `unsure`: every refund it proposes waits for a person.
    Agent { unsure: bool },
    /// A person takes the conversation before the agent.
    HandOff(Reason),
}

/// Risk first, whatever the confidence; then intents the agent does not
/// take; then the confidence. A failed router is an unsure one.
pub fn decide(routing: &Routing, served: &Served, min_confidence: f64) -> Route {
    let labels = match routing {
        Routing::Failed(_) => return Route::Agent { unsure: true },
        Routing::Labelled(labels) => labels,
    };
    if labels.risk == Risk::High {
        return Route::HandOff(Reason::Risk);
    }
    if labels.intents.iter().any(|intent| !served.contains(*intent)) {
        return Route::HandOff(Reason::IntentNotServed);
    }
    Route::Agent {
        unsure: labels.confidence < min_confidence,
    }
}

/// Contract 21: a refund proposed in a turn whose labels do not name
/// `refund`, or while the shop does not serve refunds, waits for a person.
/// A failed router names no labels: its refunds wait as an unsure router's
/// (unless refunds are not served at all).
pub fn refund_not_routed(routing: &Routing, served: &Served) -> bool {
    !served.contains(Intent::Refund)
        || matches!(routing, Routing::Labelled(labels) if !labels.intents.contains(&Intent::Refund))
}

/// Reads the routing call's text into labels: exactly the schema's fields,
/// and what strict mode cannot express (1 to 3 intents, no repeats, a
/// confidence from 0 to 1). Anything else is outside the schema.
pub fn parse(content: &str) -> Result<Labels, &'static str> {
    let value: serde_json::Value = serde_json::from_str(content).map_err(|_| "not JSON")?;
    let object = value.as_object().ok_or("not an object")?;
    if object.len() != 3 {
        return Err("not exactly intents, risk and confidence");
    }
    let names = object.get("intents").and_then(|v| v.as_array()).ok_or("no intents")?;
    if names.is_empty() || names.len() > 3 {
        return Err("not 1 to 3 intents");
    }
    let mut intents = Vec::with_capacity(names.len());
    for name in names {
        let intent = name.as_str().and_then(Intent::parse).ok_or("an unknown intent")?;
        if intents.contains(&intent) {
            return Err("a repeated intent");
        }
        intents.push(intent);
    }
    let risk = match object.get("risk").and_then(|v| v.as_str()) {
        Some("low") => Risk::Low,
        Some("high") => Risk::High,
        _ => return Err("no risk"),
    };
    let confidence = object
        .get("confidence")
        .and_then(|v| v.as_f64())
        .filter(|c| (0.0..=1.0).contains(c))
        .ok_or("no confidence from 0 to 1")?;
    Ok(Labels {
        intents,
        risk,
        confidence,
    })
}

#[cfg(test)]
mod tests;
