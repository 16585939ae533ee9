//! The turn loop's own cost, in-process: a refund turn (2 completion calls,
//! 1 order check and 1 refund) against the in-memory stand-ins of [`refund_chat::doubles`],
//! which answer at once, the routing step and the argument check on their
//! own. No I/O, so this is the domain's CPU floor.

use criterion::{Criterion, criterion_group, criterion_main};
use refund_chat::chat::{Completion, CompletionError, Usage};
use refund_chat::doubles::{AnyOrder, RecordingRefunds, ScriptedModel, Step, shipped_help_centre};
use refund_chat::refund::message::CustomerMessage;
use refund_chat::refund::money::AmountCents;
use refund_chat::refund::tool;
use refund_chat::refund::{Attempt, Receipt, RefundOutcome, RefundScope, WriterMark};
use refund_chat::router::call::{RouterSettings, RoutingModel, route};
use refund_chat::router::{Served, decide};
use refund_chat::turn::{Ports, Turn};

/// A routing model (contract 21) that answers every call with the same
/// labels text, after writing the request as the HTTP client would.
struct FixedLabels(pub &'static str);

impl RoutingModel for FixedLabels {
    async fn classify(
        &self,
        request: &serde_json::Value,
        _timeout: std::time::Duration,
    ) -> Result<Completion, CompletionError> {
        std::hint::black_box(serde_json::to_vec(request).map_err(|e| CompletionError::Unusable(e.to_string()))?);
        Ok(Completion {
            content: Some(self.0.to_owned()),
            usage: Some(Usage {
                prompt_tokens: 260,
                completion_tokens: 20,
            }),
            ..Completion::default()
        })
    }
}

fn turn_loop(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    tool::warm_up();
    let model = ScriptedModel::by_round(vec![
        Step::tools(&[("call_1", "issue_refund", r#"{"order_id":"A-1001","amount_cents":1250}"#)]),
        Step::text("Done."),
    ]);
    let payments = RecordingRefunds::silent(RefundOutcome::Executed(Receipt {
        refund_id: "rf_1".into(),
        status: "succeeded".into(),
        amount_cents: AmountCents::new(1250),
    }));
    let message = CustomerMessage::new("refund A-1001 12.50");
    let help = shipped_help_centre();
    let context = Attempt {
        scope: RefundScope::for_request("u-1001", "req-1"),
        writer: WriterMark::fixed("req-1/bench"),
        conversation: None,
        day_owner: None,
    };
    c.bench_function("refund turn (2 completions, 1 payment), in-memory", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let mut turn = Turn::new(
                    &model,
                    Ports {
                        refunds: &payments,
                        orders: &AnyOrder,
                        help,
                    },
                    std::time::Duration::ZERO,
                    context.clone(),
                    Vec::new(),
                    &message,
                );
                turn.run().await
            })
        })
    });
    // The routing step (contract 21) besides its round trip: the request
    // built, the answer parsed into labels, the route decided.
    let router = FixedLabels(r#"{"intents":["order_status","refund"],"risk":"low","confidence":0.95}"#);
    let settings = RouterSettings {
        model: "gpt-4o-mini-2024-07-18".into(),
        timeout: std::time::Duration::from_secs(5),
        min_confidence: 0.7,
        served: Served::default(),
    };
    let earlier = ["my mug from A-1001 arrived broken", "it was the blue one"];
    c.bench_function("routing step (request, labels, route), in-memory", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let (routing, _) = route(&router, &settings, &earlier, "and where is A-1002?").await;
                decide(&routing, &settings.served, settings.min_confidence)
            })
        })
    });
    c.bench_function("issue_refund argument check", |b| {
        b.iter(|| tool::parse_arguments(std::hint::black_box(r#"{"order_id":"A-1001","amount_cents":1250}"#)))
    });
    // Contract 23 in event-stream mode: a 4,000-piece reply masked as it
    // streams, beside the same reply masked once (JSON mode).
    let pieces: Vec<String> = (0..4_000)
        .map(|i| match i % 8 {
            3 => " 4242".to_owned(),
            7 => " order A-1001, ".to_owned(),
            _ => " word".to_owned(),
        })
        .collect();
    let whole = pieces.concat();
    c.bench_function("a 4,000-delta reply masked as it streams", |b| {
        b.iter(|| {
            let mut streamed = refund_chat::mask::Streamed::default();
            pieces.iter().map(|piece| streamed.push(piece).len()).sum::<usize>()
        })
    });
    c.bench_function("the same reply masked once (JSON mode)", |b| {
        b.iter(|| refund_chat::mask::masked(std::hint::black_box(&whole)).len())
    });
}

criterion_group!(benches, turn_loop);
criterion_main!(benches);
