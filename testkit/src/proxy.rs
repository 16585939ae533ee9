//! The project's proxy ([`refund_chat_local::proxy`]) as tests use it: serialising moto, DynamoDB error answers, an operation log.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

pub use refund_chat_local::proxy::{Action, Hook, Seen, forward_all};

/// A proxy that forwards one request at a time to `target`. moto's server
/// is not atomic under concurrent requests (two conditional writes of the
/// same item at the same moment can both pass), so concurrency tests put
/// this in front of it: one request at a time is what DynamoDB guarantees
/// per item.
pub async fn one_at_a_time(target: &str) -> String {
    proxy(target, true, forward_all()).await
}

/// The project's proxy in front of `target`, serving on 127.0.0.1: its address.
pub async fn proxy(target: &str, serialise: bool, hook: Hook) -> String {
    let proxy = refund_chat_local::proxy::Proxy::new(target, serialise, hook);
    let address = proxy.spawn().await.expect("a proxy");
    format!("http://{address}")
}

/// A DynamoDB error answer in the JSON protocol, as the SDK parses it.
pub fn dynamo_error(kind: &str, message: &str, extra: Value) -> Action {
    let mut body = json!({"__type": format!("com.amazonaws.dynamodb.v20120810#{kind}"), "message": message});
    if let (Value::Object(body), Value::Object(extra)) = (&mut body, extra) {
        body.extend(extra);
    }
    Action::Refuse(400, body.to_string().into())
}

/// A transaction of `items` cancelled because another transaction held its first item.
pub fn transaction_conflict(items: usize) -> Action {
    let reasons: Vec<Value> = (0..items)
        .map(|i| {
            if i == 0 {
                json!({"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"})
            } else {
                json!({"Code": "None"})
            }
        })
        .collect();
    dynamo_error(
        "TransactionCanceledException",
        "Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict]",
        json!({"CancellationReasons": reasons}),
    )
}

/// Counts the DynamoDB operations that pass through a proxy, by name, in order.
#[derive(Clone, Default)]
pub struct OperationLog(Arc<Mutex<Vec<String>>>);

impl OperationLog {
    pub fn names(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
    /// A hook that records each operation, then lets `then` decide.
    pub fn hook(&self, then: impl Fn(&Seen) -> Action + Send + Sync + 'static) -> Hook {
        let log = self.0.clone();
        Arc::new(move |seen| {
            log.lock().unwrap().push(seen.dynamodb_operation().to_owned());
            let action = then(seen);
            Box::pin(async move { action })
        })
    }
}
