//! The conversation as the agent turn sees it, and the one thing the turn needs
//! from a model.
//!
//! These types carry no provider's wire format: the turn (and its tests, which
//! pause time) work against [`ChatModel`], and the OpenAI wire format lives in
//! one adapter, [`crate::chat::openai`].

pub mod openai;

use std::future::Future;

use crate::live::Live;

/// One message of the history that is sent, in full, on every completion call.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    System(String),
    User(String),
    Assistant {
        content: Option<String>,
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

/// A tool call as the model wrote it: nothing here has been checked yet.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The raw arguments text; the model promises JSON, the code verifies it.
    pub arguments: String,
}

/// What one completion call returned.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Completion {
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
}

/// Token counts of one completion call, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// Why a completion call produced no [`Completion`].
///
/// Only [`CompletionError::Timeout`] is ever retried, so it must never be
/// confused with the others.
#[derive(Debug, thiserror::Error)]
pub enum CompletionError {
    #[error("the completion call timed out")]
    Timeout,
    #[error("the provider answered with HTTP status {status}")]
    Status { status: u16 },
    /// No connection was made: nothing was sent, nothing billed.
    #[error("the provider could not be connected to")]
    NotConnected,
    #[error("the provider could not be reached ({0})")]
    Transport(String),
    #[error("the provider's response cannot be used ({0})")]
    Unusable(String),
}

impl CompletionError {
    /// The provider's HTTP status, when it answered with one.
    pub fn status(&self) -> Option<u16> {
        match self {
            CompletionError::Status { status } => Some(*status),
            _ => None,
        }
    }
}

/// One tool as a call declares it: its name, what the model reads of it,
/// and its strict schema.
#[derive(Debug, Clone, Copy)]
pub struct Declared {
    pub name: &'static str,
    pub description: &'static str,
    pub parameters: fn() -> &'static serde_json::Value,
}

/// The tools a call declares, in order ([`crate::tools`] decides which: the
/// chat knows none by name).
#[derive(Debug, Clone, Default)]
pub struct Offered {
    pub tools: Vec<Declared>,
}

/// A chat model that takes the whole history and answers once.
///
/// An implementation makes exactly one attempt per call and enforces the
/// per-call timeout itself, reporting it as [`CompletionError::Timeout`].
pub trait ChatModel: Sync {
    fn complete(
        &self,
        messages: &[Message],
        offered: &Offered,
    ) -> impl Future<Output = Result<Completion, CompletionError>> + Send;

    /// The same call with the text streamed to `live` as it is read
    /// (contract 20's event-stream mode). A model that cannot stream
    /// answers whole, and its text is heard as one piece.
    fn complete_live(
        &self,
        messages: &[Message],
        offered: &Offered,
        live: &Live,
    ) -> impl Future<Output = Result<Completion, CompletionError>> + Send {
        async move {
            let completion = self.complete(messages, offered).await?;
            live.delta(completion.content.as_deref().unwrap_or_default());
            Ok(completion)
        }
    }
}
