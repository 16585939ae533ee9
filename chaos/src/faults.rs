//! What goes wrong in front of the payments sandbox or moto's DynamoDB: for
//! each request the proxy ([`refund_chat_local::proxy`]) asks, a [`Fault`]
//! drawn from the seed and the request's number. The proxy does the rest.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use refund_chat_local::proxy::{Action, Hook, Proxy};

use crate::rng::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    /// Not passed on: answer this status and body.
    RefuseBefore(u16, &'static str),
    /// Not passed on: the connection is closed.
    DropBefore,
    /// Passed on late (after the caller's timeout), then answered.
    DelayBefore(Duration),
    /// Passed on, then answered after this delay (past the caller's timeout).
    DelayAfter(Duration),
    /// Passed on, then the connection is closed without the answer.
    DropAfter,
    /// Passed on, then this status and body instead of the answer.
    ReplaceAfter(u16, &'static str),
}

impl Fault {
    pub fn name(self) -> &'static str {
        match self {
            Fault::None => "none",
            Fault::RefuseBefore(..) => "refused before",
            Fault::DropBefore => "dropped before",
            Fault::DelayBefore(_) => "delayed before",
            Fault::DelayAfter(_) => "slow after",
            Fault::DropAfter => "dropped after",
            Fault::ReplaceAfter(..) => "replaced after",
        }
    }

    fn action(self) -> Action {
        let bytes = |text: &'static str| text.as_bytes().to_vec().into();
        match self {
            Fault::None => Action::Forward,
            Fault::RefuseBefore(status, text) => Action::Refuse(status, bytes(text)),
            Fault::DropBefore => Action::DropBefore,
            Fault::DelayBefore(delay) => Action::DelayBefore(delay),
            Fault::DelayAfter(delay) => Action::DelayAfter(delay),
            Fault::DropAfter => Action::DropAfter,
            Fault::ReplaceAfter(status, text) => Action::ReplaceAfter(status, bytes(text)),
        }
    }
}

/// A proxy to `target` whose requests meet faults drawn by `plan`, and the
/// faults it drew, in order.
pub struct Faulty {
    pub proxy: Arc<Proxy>,
    faults: Arc<Mutex<Vec<Fault>>>,
}

impl Faulty {
    pub fn new(target: impl Into<String>, seed: u64, plan: fn(&mut Rng) -> Fault, one_at_a_time: bool) -> Faulty {
        let faults: Arc<Mutex<Vec<Fault>>> = Arc::default();
        let count = AtomicU64::new(0);
        let drawn = Arc::clone(&faults);
        let hook: Hook = Arc::new(move |_| {
            let fault = plan(&mut Rng::derived(seed, &[0xFA17, count.fetch_add(1, Ordering::SeqCst)]));
            if let Ok(mut faults) = drawn.lock() {
                faults.push(fault);
            }
            Box::pin(async move { fault.action() })
        });
        Faulty {
            proxy: Proxy::new(target, one_at_a_time, hook),
            faults,
        }
    }

    pub fn faults(&self) -> Vec<Fault> {
        self.faults.lock().map(|f| f.clone()).unwrap_or_default()
    }
}
