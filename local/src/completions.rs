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

/// `completion` as a stream's chunks (`"stream": true` with the usage): the
/// text in pieces of `words_per_chunk` words, each tool call's id and name in
/// one chunk and its arguments in pieces of `chars_per_chunk` characters, the
/// finish reason, then the usage chunk with no choices. Each item is one
/// event's `data`; `[DONE]` is not among them.
pub fn chunks(completion: &Value, words_per_chunk: usize, chars_per_chunk: usize) -> Vec<Value> {
    let choice = &completion["choices"][0];
    let message = &choice["message"];
    let chunk = |delta: Value, finish_reason: Value| {
        json!({
            "id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
            "model": completion["model"],
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            "usage": null
        })
    };
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), Value::Null)];
    if let Some(text) = message["content"].as_str() {
        for piece in pieces_of_words(text, words_per_chunk.max(1)) {
            chunks.push(chunk(json!({"content": piece}), Value::Null));
        }
    }
    for (index, call) in message["tool_calls"].as_array().into_iter().flatten().enumerate() {
        chunks.push(chunk(
            json!({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""}}]}),
            Value::Null,
        ));
        let arguments: Vec<char> = call["function"]["arguments"]
            .as_str()
            .unwrap_or_default()
            .chars()
            .collect();
        for piece in arguments.chunks(chars_per_chunk.max(1)) {
            let piece: String = piece.iter().collect();
            chunks.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                Value::Null,
            ));
        }
    }
    chunks.push(chunk(json!({}), choice["finish_reason"].clone()));
    chunks.push(json!({
        "id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
        "model": completion["model"], "choices": [], "usage": completion["usage"]
    }));
    chunks
}

/// `text` in pieces of `words` words, each with the space that follows it,
/// so that the pieces put together are `text` again.
fn pieces_of_words(text: &str, words: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut piece = String::new();
    let mut in_piece = 0;
    for part in text.split_inclusive(' ') {
        piece.push_str(part);
        in_piece += 1;
        if in_piece == words {
            pieces.push(std::mem::take(&mut piece));
            in_piece = 0;
        }
    }
    if !piece.is_empty() {
        pieces.push(piece);
    }
    pieces
}

/// One event of a stream, as a provider writes it.
pub fn event(data: &str) -> String {
    format!("data: {data}\n\n")
}
