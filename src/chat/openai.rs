//! The OpenAI Chat Completions adapter: turns the history into a request for
//! the pinned model and the answer back into a [`Completion`].
//!
//! Three things matter here more than anything else:
//! - exactly one HTTP attempt per call. async-openai's ordinary constructors
//!   wrap a retry layer (429, 5xx, connect errors); installing a bare
//!   [`ReqwestService`] removes it, and the reqwest client itself is built with
//!   retries and redirects off ([`crate::http_client`]);
//! - the per-call timeout wraps the whole exchange (connect, send, body, parse)
//!   and is reported as [`CompletionError::Timeout`], the only retried error;
//! - the response is parsed leniently: compatible servers add or omit fields
//!   that the official schema (and async-openai's own types) insist on.

use std::sync::Arc;
use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::ReqwestService;
use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls, ChatCompletionRequestAssistantMessage,
    ChatCompletionRequestAssistantMessageContent, ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestToolMessage,
    ChatCompletionRequestToolMessageContent, ChatCompletionRequestUserMessage, ChatCompletionRequestUserMessageContent,
    ChatCompletionStreamOptions, ChatCompletionTool, ChatCompletionTools, CreateChatCompletionRequest, FunctionCall,
    FunctionObject,
};
use futures_util::StreamExt;
use serde::Deserialize;

use crate::chat::{ChatModel, Completion, CompletionError, Message, Offered, ToolCall, Usage};
use crate::live::Live;

/// The pinned snapshot: the agent's behaviour was tested against this one.
pub const MODEL: &str = "gpt-4o-mini-2024-07-18";

pub struct OpenAiChat {
    /// Swapped whole when the key is read again (a rotation): a call takes
    /// the client of the moment and keeps it to its end.
    client: std::sync::RwLock<Arc<Client<OpenAIConfig>>>,
    http: reqwest::Client,
    api_base: String,
    timeout: Duration,
    /// `max_completion_tokens` of every call (`OPENAI_MAX_OUTPUT_TOKENS`).
    max_output_tokens: u32,
}

impl OpenAiChat {
    /// `api_base` includes `/v1`; `http` comes from
    /// [`crate::http_client::money_path_client`]. Every value is passed
    /// explicitly: nothing is read from `OPENAI_*` variables behind the
    /// contract's back.
    pub fn new(
        http: reqwest::Client,
        api_base: &str,
        api_key: &str,
        timeout: Duration,
        max_output_tokens: u32,
    ) -> Self {
        OpenAiChat {
            client: std::sync::RwLock::new(Arc::new(client_for(&http, api_base, api_key))),
            http,
            api_base: api_base.to_owned(),
            timeout,
            max_output_tokens,
        }
    }

    /// From now on, calls carry `api_key` (the key was rotated).
    pub fn use_key(&self, api_key: &str) {
        let client = Arc::new(client_for(&self.http, &self.api_base, api_key));
        match self.client.write() {
            Ok(mut current) => *current = client,
            Err(poisoned) => *poisoned.into_inner() = client,
        }
    }

    /// One call's deadline (`OPENAI_TIMEOUT_SECS`).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn current(&self) -> Arc<Client<OpenAIConfig>> {
        match self.client.read() {
            Ok(client) => Arc::clone(&client),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }
}

/// One HTTP attempt per call: the bare service, no retry layer.
fn client_for(http: &reqwest::Client, api_base: &str, api_key: &str) -> Client<OpenAIConfig> {
    let config = OpenAIConfig::new()
        .with_api_base(api_base)
        .with_api_key(api_key)
        .with_org_id("")
        .with_project_id("");
    Client::build(http.clone(), config).with_http_service(ReqwestService::new(http.clone()))
}

impl ChatModel for OpenAiChat {
    async fn complete(&self, messages: &[Message], offered: &Offered) -> Result<Completion, CompletionError> {
        self.call_once(&build_request(messages, self.max_output_tokens, offered), self.timeout)
            .await
    }

    async fn complete_live(
        &self,
        messages: &[Message],
        offered: &Offered,
        live: &Live,
    ) -> Result<Completion, CompletionError> {
        self.stream(messages, offered, live).await
    }
}

impl OpenAiChat {
    /// One streamed call (contract 20): `"stream": true` with the usage, the
    /// text heard as each chunk is read, the tool calls' pieces put together
    /// by index. The timeout covers the whole stream. A stream that ends
    /// before any choice said how it finished broke off: a provider error,
    /// never a reply (its text may stop mid-sentence).
    async fn stream(
        &self,
        messages: &[Message],
        offered: &Offered,
        live: &Live,
    ) -> Result<Completion, CompletionError> {
        let mut request = build_request(messages, self.max_output_tokens, offered);
        request.stream = Some(true);
        request.stream_options = Some(ChatCompletionStreamOptions {
            include_usage: Some(true),
            include_obfuscation: None,
        });
        let client = self.current();
        let chat = client.chat();
        let call = async {
            let mut chunks = chat
                .create_stream_byot::<_, WireChunk>(&request)
                .await
                .map_err(classify)?;
            let mut gathered = Gathered::default();
            while let Some(chunk) = chunks.next().await {
                gathered.add(chunk.map_err(classify)?, live);
            }
            gathered.into_completion()
        };
        match tokio::time::timeout(self.timeout, call).await {
            Err(_elapsed) => Err(CompletionError::Timeout),
            Ok(result) => result,
        }
    }
}

impl OpenAiChat {
    /// One call with a request built elsewhere (the router's, contract 21),
    /// bounded by `timeout`, read as leniently as the agent's calls.
    pub async fn complete_json(
        &self,
        request: &serde_json::Value,
        timeout: Duration,
    ) -> Result<Completion, CompletionError> {
        self.call_once(request, timeout).await
    }

    /// One attempt with `request`, bounded by `timeout` (the whole exchange).
    async fn call_once<R: serde::Serialize + Sync>(
        &self,
        request: &R,
        timeout: Duration,
    ) -> Result<Completion, CompletionError> {
        let client = self.current();
        let chat = client.chat();
        let call = chat.create_byot::<_, WireCompletion>(request);
        match tokio::time::timeout(timeout, call).await {
            Err(_elapsed) => Err(CompletionError::Timeout),
            Ok(Err(error)) => Err(classify(error)),
            Ok(Ok(wire)) => wire.into_completion(),
        }
    }
}

/// The request for one completion call: the whole history, the tools
/// offered (in their order), `strict` and no parallel tool calls (both
/// defence in depth only).
pub fn build_request(messages: &[Message], max_output_tokens: u32, offered: &Offered) -> CreateChatCompletionRequest {
    let tools = offered
        .tools
        .iter()
        .map(|tool| declare(tool.name, tool.description, (tool.parameters)()))
        .collect();
    CreateChatCompletionRequest {
        model: MODEL.to_owned(),
        messages: messages.iter().map(to_wire).collect(),
        tools: Some(tools),
        parallel_tool_calls: Some(false),
        // Bounds what one call can cost (contract 13).
        max_completion_tokens: Some(max_output_tokens),
        ..CreateChatCompletionRequest::default()
    }
}

/// One tool, `strict` (defence in depth only: the code validates anyway).
fn declare(name: &str, description: &str, parameters: &serde_json::Value) -> ChatCompletionTools {
    ChatCompletionTools::Function(ChatCompletionTool {
        function: FunctionObject {
            name: name.to_owned(),
            description: Some(description.to_owned()),
            parameters: Some(parameters.clone()),
            strict: Some(true),
        },
    })
}

fn to_wire(message: &Message) -> ChatCompletionRequestMessage {
    match message {
        Message::System(text) => ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
            content: ChatCompletionRequestSystemMessageContent::Text(text.clone()),
            name: None,
        }),
        Message::User(text) => ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
            content: ChatCompletionRequestUserMessageContent::Text(text.clone()),
            name: None,
        }),
        Message::Assistant { content, tool_calls } => {
            let calls = tool_calls
                .iter()
                .map(|call| {
                    ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
                        id: call.id.clone(),
                        function: FunctionCall {
                            name: call.name.clone(),
                            arguments: call.arguments.clone(),
                        },
                    })
                })
                .collect();
            #[allow(deprecated)] // `function_call` is deprecated but still a field to fill.
            ChatCompletionRequestMessage::Assistant(ChatCompletionRequestAssistantMessage {
                content: content.clone().map(ChatCompletionRequestAssistantMessageContent::Text),
                tool_calls: Some(calls),
                ..ChatCompletionRequestAssistantMessage::default()
            })
        }
        Message::Tool { tool_call_id, content } => {
            ChatCompletionRequestMessage::Tool(ChatCompletionRequestToolMessage {
                content: ChatCompletionRequestToolMessageContent::Text(content.clone()),
                tool_call_id: tool_call_id.clone(),
            })
        }
    }
}

/// Never carries a response body into the error: bodies can quote the
/// conversation, and errors reach logs.
fn classify(error: OpenAIError) -> CompletionError {
    match error {
        OpenAIError::ApiError(response) => CompletionError::Status {
            status: response.status_code.as_u16(),
        },
        OpenAIError::Reqwest(error) if error.is_timeout() => CompletionError::Timeout,
        OpenAIError::Reqwest(error) if error.is_connect() => CompletionError::NotConnected,
        OpenAIError::Reqwest(error) => CompletionError::Transport(reqwest_class(&error).to_owned()),
        OpenAIError::JSONDeserialize(error, _body) => {
            CompletionError::Unusable(format!("not a chat completion: {error}"))
        }
        OpenAIError::StreamError(_) => CompletionError::Unusable("the stream broke off".to_owned()),
        _ => CompletionError::Unusable("unexpected client error".to_owned()),
    }
}

fn reqwest_class(error: &reqwest::Error) -> &'static str {
    if error.is_body() || error.is_decode() {
        "body"
    } else if error.is_request() {
        "request"
    } else {
        "other"
    }
}

// The lenient wire format of a chat completion: only what the turn needs,
// everything else ignored, `null` and missing treated alike.

#[derive(Deserialize)]
struct WireCompletion {
    #[serde(default)]
    choices: Vec<WireChoice>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireChoice {
    message: WireMessage,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    content: Option<String>,
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    id: String,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    /// A JSON string by the API; some compatible servers send an object.
    #[serde(default)]
    arguments: serde_json::Value,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

impl WireCompletion {
    fn into_completion(self) -> Result<Completion, CompletionError> {
        let usage = self.usage.map(|u| Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
        });
        let choice = self
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| CompletionError::Unusable("a chat completion without choices".to_owned()))?;
        let tool_calls = choice
            .message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .map(|call| ToolCall {
                id: call.id,
                name: call.function.name,
                arguments: match call.function.arguments {
                    serde_json::Value::String(text) => text,
                    other => other.to_string(),
                },
            })
            .collect();
        Ok(Completion {
            content: choice.message.content,
            tool_calls,
            finish_reason: choice.finish_reason,
            usage,
        })
    }
}

// One chunk of a streamed completion, as leniently: a piece of text, pieces
// of tool calls by index, a finish reason, or (last) the usage.

#[derive(Deserialize)]
struct WireChunk {
    #[serde(default)]
    choices: Vec<WireChunkChoice>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireChunkChoice {
    #[serde(default)]
    delta: WireDelta,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct WireDelta {
    content: Option<String>,
    tool_calls: Option<Vec<WireToolCallPiece>>,
}

#[derive(Deserialize)]
struct WireToolCallPiece {
    #[serde(default)]
    index: u32,
    id: Option<String>,
    function: Option<WirePiece>,
}

#[derive(Deserialize)]
struct WirePiece {
    name: Option<String>,
    arguments: Option<String>,
}

/// The chunks of one stream, put together.
#[derive(Default)]
struct Gathered {
    content: Option<String>,
    /// By index: the id, the name and the arguments as they arrived.
    tool_calls: std::collections::BTreeMap<u32, ToolCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
}

impl Gathered {
    fn add(&mut self, chunk: WireChunk, live: &Live) {
        if let Some(usage) = chunk.usage {
            self.usage = Some(Usage {
                prompt_tokens: usage.prompt_tokens,
                completion_tokens: usage.completion_tokens,
            });
        }
        // One choice is asked for; a server that sends more is read at its first.
        let Some(choice) = chunk.choices.into_iter().next() else {
            return;
        };
        if let Some(text) = choice.delta.content.filter(|text| !text.is_empty()) {
            live.delta(&text);
            self.content.get_or_insert_with(String::new).push_str(&text);
        }
        for piece in choice.delta.tool_calls.into_iter().flatten() {
            let call = self.tool_calls.entry(piece.index).or_insert_with(|| ToolCall {
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
            });
            if let Some(id) = piece.id {
                call.id.push_str(&id);
            }
            if let Some(function) = piece.function {
                call.name.push_str(function.name.as_deref().unwrap_or_default());
                call.arguments
                    .push_str(function.arguments.as_deref().unwrap_or_default());
            }
        }
        if choice.finish_reason.is_some() {
            self.finish_reason = choice.finish_reason;
        }
    }

    fn into_completion(self) -> Result<Completion, CompletionError> {
        if self.finish_reason.is_none() {
            return Err(CompletionError::Unusable(
                "the stream ended before the completion did".to_owned(),
            ));
        }
        Ok(Completion {
            content: self.content,
            tool_calls: self.tool_calls.into_values().collect(),
            finish_reason: self.finish_reason,
            usage: self.usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;
    use refund_chat_local::completions::completion as completion_json;

    async fn answering(body: serde_json::Value) -> (MockServer, OpenAiChat) {
        serving(ResponseTemplate::new(200).set_body_json(body)).await
    }

    /// A server that answers every completion call with `answer`, and the chat to it.
    async fn serving(answer: ResponseTemplate) -> (MockServer, OpenAiChat) {
        serving_within(answer, Duration::from_secs(5)).await
    }

    /// A server that answers every completion call with `answer`, and a
    /// client whose calls give up after `timeout`.
    async fn serving_within(answer: ResponseTemplate, timeout: Duration) -> (MockServer, OpenAiChat) {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(answer)
            .mount(&server)
            .await;
        let http = crate::http_client::money_path_client().unwrap();
        let chat = OpenAiChat::new(http, &format!("{}/v1", server.uri()), "sk-test", timeout, 1024);
        (server, chat)
    }

    #[tokio::test]
    async fn tool_call_arguments_sent_as_a_json_object_are_read_as_text() {
        let message = json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "issue_refund",
             "arguments": {"order_id": "A-1", "amount_cents": 1250}}}
        ]});
        let (_server, chat) = answering(completion_json(message)).await;

        let completion = chat
            .complete(&[Message::User("hi".into())], &Offered::default())
            .await
            .unwrap();

        let arguments: serde_json::Value = serde_json::from_str(&completion.tool_calls[0].arguments).unwrap();
        assert_eq!(arguments, json!({"order_id": "A-1", "amount_cents": 1250}));
        assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));
    }

    #[tokio::test]
    async fn extra_and_null_fields_are_ignored() {
        let message = json!({"role": "assistant", "content": "hi", "tool_calls": null,
                             "function_call": null, "refusal": null, "audio": {"x": 1}});
        let (_server, chat) = answering(completion_json(message)).await;

        let completion = chat
            .complete(&[Message::User("hi".into())], &Offered::default())
            .await
            .unwrap();

        assert_eq!(completion.content.as_deref(), Some("hi"));
        assert!(completion.tool_calls.is_empty());
        assert_eq!(completion.usage.map(|u| u.prompt_tokens), Some(120));
    }

    use refund_chat_local::completions::{chunks, event, text, tool_calls};

    /// A server that streams `events` (each one event's data) and `[DONE]`
    /// unless `cut` (the stream breaks off).
    async fn streaming(events: &[serde_json::Value], cut: bool) -> (MockServer, OpenAiChat) {
        let mut body: String = events.iter().map(|data| event(&data.to_string())).collect();
        if !cut {
            body.push_str(&event("[DONE]"));
        }
        serving(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")).await
    }

    fn heard(mut from: tokio::sync::mpsc::UnboundedReceiver<crate::live::Heard>) -> Vec<String> {
        let mut deltas = Vec::new();
        while let Ok(heard) = from.try_recv() {
            if let crate::live::Heard::Delta(text) = heard {
                deltas.push(text);
            }
        }
        deltas
    }

    #[tokio::test]
    async fn a_streamed_reply_is_heard_piece_by_piece_and_read_as_the_whole_one() {
        let whole = text("Your refund of 12.50 is on its way.");
        let (server, chat) = streaming(&chunks(&whole, 2, 5), false).await;
        let (live, from) = Live::listened();

        let completion = chat
            .complete_live(&[Message::User("hi".into())], &Offered::default(), &live)
            .await
            .unwrap();

        assert_eq!(
            completion.content.as_deref(),
            Some("Your refund of 12.50 is on its way.")
        );
        assert_eq!(
            completion.usage,
            Some(Usage {
                prompt_tokens: 120,
                completion_tokens: 15
            })
        );
        assert_eq!(completion.finish_reason.as_deref(), Some("stop"));
        let deltas = heard(from);
        // Heard as it came; a number (a dot may join its digits) or a word
        // that may begin an IBAN waits for what follows it (masking).
        assert_eq!(deltas, ["Your refund ", "of ", "12.50 is on ", "its way."]);
        let sent: serde_json::Value = server.received_requests().await.unwrap()[0].body_json().unwrap();
        assert_eq!(sent["stream"], true);
        assert_eq!(sent["stream_options"], json!({"include_usage": true}));
    }

    #[tokio::test]
    async fn tool_calls_are_put_together_by_index_from_their_pieces() {
        let asked = tool_calls(&[
            ("c1", "get_order", r#"{"order_id":"A-1001"}"#),
            (
                "c2",
                "issue_refund",
                r#"{"order_id":"A-1001","amount_cents":1250,"note":"caf\u00e9"}"#,
            ),
        ]);
        // One character a piece: split inside the JSON escape and the names' values.
        let (_server, chat) = streaming(&chunks(&asked, 1, 1), false).await;
        let (live, from) = Live::listened();

        let completion = chat
            .complete_live(&[Message::User("hi".into())], &Offered::default(), &live)
            .await
            .unwrap();

        let calls: Vec<_> = completion
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            calls,
            [
                ("c1", "get_order", r#"{"order_id":"A-1001"}"#),
                (
                    "c2",
                    "issue_refund",
                    r#"{"order_id":"A-1001","amount_cents":1250,"note":"caf\u00e9"}"#
                ),
            ]
        );
        assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));
        assert!(heard(from).is_empty(), "no text, nothing heard");
    }

    #[tokio::test]
    async fn a_stream_that_breaks_off_before_its_finish_is_a_provider_error() {
        let mut events = chunks(&text("I have refunded your order in full"), 1, 1);
        events.truncate(4);
        let (_server, chat) = streaming(&events, true).await;
        let (live, _from) = Live::listened();

        let result = chat
            .complete_live(&[Message::User("hi".into())], &Offered::default(), &live)
            .await;

        assert!(matches!(result, Err(CompletionError::Unusable(_))), "{result:?}");
    }

    #[tokio::test]
    async fn a_stream_without_its_usage_chunk_reports_no_usage() {
        let mut events = chunks(&text("Hello"), 1, 1);
        events.pop();
        let (_server, chat) = streaming(&events, false).await;

        let completion = chat
            .complete_live(&[Message::User("hi".into())], &Offered::default(), &Live::listened().0)
            .await
            .unwrap();

        assert_eq!(completion.content.as_deref(), Some("Hello"));
        assert_eq!(completion.usage, None);
    }

    /// A server that writes `body` a few bytes at a time, each write its own
    /// TCP segment (cut inside UTF-8 characters and JSON escapes alike).
    async fn trickling(body: String) -> OpenAiChat {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            socket.set_nodelay(true).unwrap();
            let mut request = vec![0; 64 * 1024];
            let _ = socket.read(&mut request).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            socket.write_all(head.as_bytes()).await.unwrap();
            for piece in body.as_bytes().chunks(3) {
                socket.write_all(piece).await.unwrap();
                socket.flush().await.unwrap();
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        let http = crate::http_client::money_path_client().unwrap();
        OpenAiChat::new(http, &format!("http://{address}/v1"), "k", Duration::from_secs(5), 64)
    }

    #[tokio::test]
    async fn bytes_cut_inside_a_character_or_an_escape_read_as_the_whole_text() {
        let reply = "Merci, café ✓ — remboursé";
        let mut body: String = chunks(&text(reply), 1, 1)
            .iter()
            .map(|d| event(&d.to_string()))
            .collect();
        body.push_str(&event("[DONE]"));
        let chat = trickling(body).await;
        let (live, from) = Live::listened();

        let completion = chat
            .complete_live(&[Message::User("hi".into())], &Offered::default(), &live)
            .await
            .unwrap();

        assert_eq!(completion.content.as_deref(), Some(reply));
        assert_eq!(heard(from).concat(), reply);
    }

    #[tokio::test]
    async fn the_timeout_covers_the_whole_stream() {
        let body: String = chunks(&text("slow"), 1, 1)
            .iter()
            .map(|d| event(&d.to_string()))
            .collect();
        let slow = ResponseTemplate::new(200)
            .set_body_raw(body, "text/event-stream")
            .set_delay(Duration::from_millis(400));
        let (_server, chat) = serving_within(slow, Duration::from_millis(100)).await;

        let result = chat
            .complete_live(&[Message::User("hi".into())], &Offered::default(), &Live::listened().0)
            .await;

        assert!(matches!(result, Err(CompletionError::Timeout)), "{result:?}");
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            ".{0,6}".prop_map(Value::from),
            prop_oneof![Just("choices"), Just("message"), Just("tool_calls"), Just("function")].prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec(
                    (
                        prop_oneof![
                            Just("choices".to_owned()),
                            Just("message".to_owned()),
                            Just("content".to_owned()),
                            Just("tool_calls".to_owned()),
                            Just("function".to_owned()),
                            Just("arguments".to_owned()),
                            Just("id".to_owned()),
                            Just("name".to_owned()),
                            Just("usage".to_owned()),
                            ".{0,4}".prop_map(String::from)
                        ],
                        inner
                    ),
                    0..5
                )
                .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    fn parse(value: &Value) -> Result<Completion, CompletionError> {
        serde_json::from_value::<WireCompletion>(value.clone())
            .map_err(|e| CompletionError::Unusable(e.to_string()))
            .and_then(WireCompletion::into_completion)
    }

    proptest! {
        #[test]
        fn any_json_is_parsed_or_refused_without_a_panic(value in any_json()) {
            let _ = parse(&value);
        }

        #[test]
        fn a_completion_reads_back_whatever_extra_fields_it_carries(
            content in proptest::option::of(".{0,20}"),
            calls in proptest::collection::vec(("[a-z0-9_]{1,8}", "[a-z_]{1,12}", any::<bool>()), 0..3),
            extra in any_json(),
        ) {
            let tool_calls: Vec<Value> = calls
                .iter()
                .map(|(id, name, as_object)| {
                    let arguments = if *as_object { json!({"order_id": "A-1"}) } else { json!(r#"{"order_id":"A-1"}"#) };
                    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}, "extra": extra})
                })
                .collect();
            let body = json!({
                "choices": [{"message": {"role": "assistant", "content": content, "tool_calls": tool_calls, "x": extra}}],
                "x": extra
            });
            let completion = parse(&body).unwrap();
            prop_assert_eq!(completion.content, content);
            prop_assert_eq!(completion.tool_calls.len(), calls.len());
            for (call, (id, name, _)) in completion.tool_calls.iter().zip(&calls) {
                prop_assert_eq!(&call.id, id);
                prop_assert_eq!(&call.name, name);
                prop_assert_eq!(serde_json::from_str::<Value>(&call.arguments).unwrap(), json!({"order_id": "A-1"}));
            }
        }
    }
}
