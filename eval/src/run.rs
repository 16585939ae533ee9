//! One run of one task, through the real handler (its messages one after
//! another, in one conversation): a fresh payments sandbox
//! seeded with the task's orders, a fresh ledger table in moto, the model
//! behind a recording proxy (for the transcript and the token counts), the
//! customer signed in by an HTTP API JWT authorizer.

use std::time::Instant;

use aws_config::SdkConfig;
use lambda_http::RequestExt;
use lambda_http::lambda_runtime::Context;
use refund_chat::config::Config;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::dynamo::conversations::DynamoConversations;
use refund_chat::refund::RefundState;
use refund_chat::secrets::FixedKey;
use refund_chat_local::payments_sandbox::Sandbox;
use refund_chat_local::proxy::{Proxy, forward_all};
use serde::Serialize;
use serde_json::{Value, json};

use crate::grade::{EndState, Grade, grade};
use crate::tasks::{AddressWritten, Refund, Task};

const EVENT: &str = include_str!("../../events/http-api-v2-refund.json");
/// The evaluation's guest pool (contract 27): its tokens' issuer.
const GUEST_ISSUER: &str = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_EvalGuests";

/// What every run shares.
pub struct Bench {
    pub aws: SdkConfig,
    /// The model's API base, with `/v1`.
    pub model_base: String,
    pub api_key: String,
    pub completion_timeout_secs: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub task: String,
    pub family: String,
    pub attempt: usize,
    pub end: EndState,
    pub grade: Grade,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cost_usd: f64,
    pub latency_ms: f64,
    /// The last request to the model (the whole conversation) and its answer.
    pub transcript: Value,
}

type Error = Box<dyn std::error::Error + Send + Sync>;

pub async fn run(bench: &Bench, family: &str, task: &Task, attempt: usize) -> Result<RunResult, Error> {
    let seed: Vec<(&str, &str, u64, u64)> = task
        .orders
        .iter()
        .map(|o| (o.order_id.as_str(), o.customer.as_str(), o.paid_cents, o.refunded_cents))
        .collect();
    let sandbox = Sandbox::with_orders(&seed, None)?;
    for order in task.orders.iter() {
        if let Some(email) = &order.email {
            sandbox.set_email(&order.order_id, email);
        }
        if let Some(status) = &order.status {
            let placed = order.delivered_days_ago.map_or(5, |days| days + 3);
            sandbox.set_facts(&order.order_id, status, placed, order.delivered_days_ago);
        }
    }
    let payments = refund_chat_local::spawn(0, sandbox.router()).await?;
    let table = format!("eval-{}-{}-{attempt}", std::process::id(), task.id);
    let dynamodb = aws_sdk_dynamodb::Client::new(&bench.aws);
    refund_chat::ledger::dynamo::schema::create_table(&dynamodb, &table).await?;
    let conversations = format!("{table}-conversations");
    refund_chat::ledger::dynamo::schema::create_conversation_table(&dynamodb, &conversations).await?;
    // Every model exchange passes through a recording proxy: the traces give tokens and the transcript.
    let base = reqwest::Url::parse(&bench.model_base)?;
    let recorder = Proxy::new(base.origin().ascii_serialization(), false, forward_all());
    let proxy = recorder.spawn().await?;
    let model_path = base.path().trim_end_matches('/').to_owned();

    let vars = [
        ("OPENAI_API_KEY_SECRET_ID", "eval".to_owned()),
        ("OPENAI_BASE_URL", format!("http://{proxy}{model_path}")),
        ("PAYMENTS_BASE_URL", format!("http://{payments}")),
        // The sandbox is the shop's order system too.
        ("ORDERS_BASE_URL", format!("http://{payments}")),
        ("OPENAI_TIMEOUT_SECS", bench.completion_timeout_secs.to_string()),
        ("LEDGER_TABLE", table.clone()),
        ("CONVERSATION_TABLE", conversations.clone()),
        ("USER_IDENTITY", "authorizer".to_owned()),
        ("AGENT_INTENTS", task.agent_intents.clone().unwrap_or_default()),
        // Visitors served, as deployed (contract 27).
        ("VISITOR_ADDRESS_KEY", "eval-visitor-address-key-0123456789".to_owned()),
        // Guests, as deployed: a token of this pool is a guest's.
        ("GUEST_POOL_ISSUER", GUEST_ISSUER.to_owned()),
    ];
    let config = Config::from_lookup(|name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone()))?;
    let app = refund_chat::startup::wire(config, &bench.aws, FixedKey::new(bench.api_key.clone()))?;

    // One conversation: each message continues the one the previous answer named.
    let started = Instant::now();
    let mut conversation: Option<String> = None;
    let mut visitor_token: Option<String> = None;
    let mut response = None;
    for (n, message) in task.messages().enumerate() {
        let mut body = match task.visitor {
            true => json!({"message": message}),
            false => json!({"user_id": task.user_id(), "message": message}),
        };
        if let Some(id) = &conversation {
            body["conversation_id"] = json!(id);
        }
        let mut event: Value = serde_json::from_str(EVENT)?;
        event["body"] = json!(body.to_string());
        if task.visitor {
            // The visitors' route: no authorizer, the token sent back once issued.
            event["rawPath"] = json!(refund_chat::http::visitor::ROUTE);
            event["requestContext"]["http"]["path"] = json!(refund_chat::http::visitor::ROUTE);
            if let Some(context) = event["requestContext"].as_object_mut() {
                context.remove("authorizer");
            }
            if let Some(token) = &visitor_token {
                event["headers"][refund_chat::visitor::TOKEN_HEADER] = json!(token);
            }
        } else if let Some(email) = &task.guest {
            // The guest pool's token, as its authorizer passes the claims on.
            let claims = &mut event["requestContext"]["authorizer"]["jwt"]["claims"];
            claims["sub"] = json!(crate::tasks::GUEST_SUB);
            claims["iss"] = json!(GUEST_ISSUER);
            claims["email"] = json!(email);
            claims["email_verified"] = json!("true");
        } else {
            event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = json!(task.customer);
        }
        let mut context = Context::default();
        context.request_id = format!("eval-{}-{attempt}-{n}", task.id);
        let request = lambda_http::request::from_str(&event.to_string())?.with_lambda_context(context);
        let answer = app.handle(request).await;
        let body: Value = serde_json::from_slice(answer.body().as_ref()).unwrap_or(Value::Null);
        conversation = body["conversation_id"].as_str().map(str::to_owned).or(conversation);
        visitor_token = body["visitor"].as_str().map(str::to_owned).or(visitor_token);
        response = Some(answer);
    }
    let response = response.ok_or("a task without a message")?;
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;

    let body: Value = serde_json::from_slice(response.body().as_ref()).unwrap_or(Value::Null);
    let moved = sandbox.refunds_made();
    let handoff = match &conversation {
        Some(id) => dynamodb
            .get_item()
            .table_name(&conversations)
            .key("pk", aws_sdk_dynamodb::types::AttributeValue::S(id.clone()))
            .key("sk", aws_sdk_dynamodb::types::AttributeValue::S("head".into()))
            .consistent_read(true)
            .send()
            .await?
            .item()
            .and_then(|head| refund_chat::ledger::dynamo::text(head, "handoff_reason").map(str::to_owned)),
        None => None,
    };
    let router = match &conversation {
        Some(id) => DynamoConversations::from_sdk_config(
            &bench.aws,
            conversations.clone(),
            table.clone(),
            // Only read: no exchange is written through it.
            refund_chat::conversation::Lifetime {
                ttl: std::time::Duration::ZERO,
                max_age: std::time::Duration::ZERO,
            },
            std::time::Duration::from_secs(2),
        )
        .routing_of(id)
        .await?
        .and_then(|routed| routed.first_router),
        None => None,
    };
    let ledger = DynamoLedger::from_sdk_config(&bench.aws, table, std::time::Duration::from_secs(2));
    let prompts: String = recorder
        .passed()
        .iter()
        .map(|passed| String::from_utf8_lossy(&passed.request).into_owned())
        .collect();
    let end = EndState {
        refunds: moved
            .iter()
            .map(|e| Refund {
                order_id: e.order_id.clone(),
                amount_cents: e.amount_cents,
            })
            .collect(),
        refund_ids: moved.iter().map(|e| e.refund_id.clone()).collect(),
        approvals: ledger
            .waiting(RefundState::AwaitingApproval)
            .await?
            .into_iter()
            .map(|r| Refund {
                order_id: r.order_id,
                amount_cents: r.amount.cents(),
            })
            .collect(),
        handoff,
        status: response.status().as_u16(),
        reply: body["reply"]
            .as_str()
            .or(body["detail"].as_str())
            .unwrap_or_default()
            .to_owned(),
        prompts,
        router,
        addresses: sandbox
            .addresses_written()
            .into_iter()
            .map(|(order_id, address)| AddressWritten {
                order_id,
                postcode: address["postcode"].as_str().unwrap_or_default().to_owned(),
            })
            .collect(),
        returns: sandbox
            .returns_started()
            .into_iter()
            .map(|(order_id, _)| order_id)
            .collect(),
        order_reads: sandbox.order_reads().len(),
        told: body["person_expected"]["sentence"].as_str().map(str::to_owned),
    };
    let exchanges: Vec<(Value, Value)> = recorder
        .passed()
        .iter()
        .map(|passed| {
            let json = |bytes: &[u8]| serde_json::from_slice(bytes).unwrap_or(Value::Null);
            (
                json(&passed.request),
                passed.answer.as_deref().map_or(Value::Null, json),
            )
        })
        .collect();
    let usage = |name: &str| {
        exchanges
            .iter()
            .map(|(_, answer)| answer["usage"][name].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    let (prompt_tokens, completion_tokens) = (usage("prompt_tokens"), usage("completion_tokens"));
    let transcript = exchanges
        .last()
        .map(|(request, answer)| json!({"messages": request["messages"], "answer": answer["choices"][0]["message"]}))
        .unwrap_or(Value::Null);
    Ok(RunResult {
        task: task.id.clone(),
        family: family.to_owned(),
        attempt,
        grade: grade(task, &end),
        end,
        prompt_tokens,
        completion_tokens,
        cost_usd: refund_chat::ops::telemetry::estimated_cost_usd(prompt_tokens, completion_tokens),
        latency_ms,
        transcript,
    })
}
