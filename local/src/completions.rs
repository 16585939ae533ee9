//! OpenAI Chat Completions response bodies, written once for every stand-in
//! that answers like OpenAI: the local model, the handler tests' mock server
//! and the benchmark's stand-in.

use serde_json::{Value, json};

/// A chat completion whose one choice is `message`, with fixed token usage
/// (120 prompt, 15 completion).
pub fn completion(message: Value) -> Value {
    let finish_reason = if message.get("tool_calls").is_some_and(|calls| !calls.is_null()) {
        "tool_calls"
    } else {
        "stop"
    };
    json!({
        "id": "chatcmpl-local",
        "object": "chat.completion",
        "created": 1_795_860_000,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 15, "total_tokens": 135}
    })
}

/// A final reply.
pub fn text(reply: &str) -> Value {
    completion(json!({"role": "assistant", "content": reply}))
}

/// An assistant message asking for tools: `(id, name, arguments text)`.
pub fn tool_calls(calls: &[(&str, &str, &str)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, arguments)| {
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
        })
        .collect();
    completion(json!({"role": "assistant", "content": null, "tool_calls": calls}))
}
