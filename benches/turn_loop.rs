//! The turn loop's own cost, in-process: a refund turn (2 completion calls and
//! 1 payment) against in-memory stand-ins that answer at once, and the
//! argument check on its own. No I/O, so this is the domain's CPU floor.

use criterion::{Criterion, criterion_group, criterion_main};
use refund_chat::chat::{ChatModel, Completion, CompletionError, Message, ToolCall, Usage};
use refund_chat::refund::{Receipt, RefundError, RefundGateway, RefundRequest};
use refund_chat::refund_tool;
use refund_chat::turn::Turn;

struct InstantModel;

impl ChatModel for InstantModel {
    async fn complete(&self, messages: &[Message]) -> Result<Completion, CompletionError> {
        let usage = Some(Usage {
            prompt_tokens: 200,
            completion_tokens: 20,
        });
        Ok(match messages.last() {
            Some(Message::Tool { .. }) => Completion {
                content: Some("Done.".into()),
                usage,
                ..Completion::default()
            },
            _ => Completion {
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "issue_refund".into(),
                    arguments: r#"{"order_id":"A-1001","amount_cents":1250}"#.into(),
                }],
                usage,
                ..Completion::default()
            },
        })
    }
}

struct InstantPayments;

impl RefundGateway for InstantPayments {
    async fn refund(&self, request: &RefundRequest) -> Result<Receipt, RefundError> {
        Ok(Receipt {
            refund_id: "rf_1".into(),
            status: "succeeded".into(),
            amount_cents: request.amount_cents as i64,
        })
    }
}

fn turn_loop(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    refund_tool::warm_up();
    c.bench_function("refund turn (2 completions, 1 payment), in-memory", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let mut turn = Turn::new(
                    &InstantModel,
                    &InstantPayments,
                    std::time::Duration::ZERO,
                    "u-1001",
                    "refund A-1001 12.50",
                );
                turn.run().await.unwrap()
            })
        })
    });
    c.bench_function("issue_refund argument check", |b| {
        b.iter(|| refund_tool::parse_arguments(std::hint::black_box(r#"{"order_id":"A-1001","amount_cents":1250}"#)))
    });
}

criterion_group!(benches, turn_loop);
criterion_main!(benches);
