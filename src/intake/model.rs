//! The model a turn is lent, its OpenAI key kept fresh through a rotation.
//!
//! The key is read on first use (never at start: bad input is answered
//! without it), read again once it has been cached for
//! `OPENAI_KEY_CACHE_SECS`, and read again at once when OpenAI answers 401.
//! A 401 means the provider refused the key before it ran anything, so the
//! same call is made once more with the fresh key, inside this one call of
//! the turn's 5 (the turn never sees the refused one); a key that is still
//! refused is the 401 the turn turns into a 502, as before. The re-read and
//! the re-send share the call's deadline: past it, the call timed out, as
//! any other (the turn's retry then carries the fresh key). A re-read that
//! fails keeps the key already held: a key that worked a moment ago is a
//! better bet than a 500.

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::chat::openai::OpenAiChat;
use crate::chat::{ChatModel, Completion, CompletionError, Message, Offered};
use crate::live::Live;
use crate::router::call::RoutingModel;
use crate::secrets::{ApiKey, ApiKeySource};

/// The key a model carries, and when it was read.
pub(super) struct KeyState {
    held: Mutex<Option<(ApiKey, Instant)>>,
    refresh_after: Duration,
}

impl KeyState {
    pub(super) fn new(refresh_after: Duration) -> Self {
        KeyState {
            held: Mutex::new(None),
            refresh_after,
        }
    }

    pub(super) fn keep(&self, key: ApiKey) {
        if let Ok(mut held) = self.held.lock() {
            *held = Some((key, Instant::now()));
        }
    }

    /// The key was read longer ago than the cache keeps it.
    pub(super) fn stale(&self) -> bool {
        self.held
            .lock()
            .map(|held| held.as_ref().is_none_or(|(_, at)| at.elapsed() >= self.refresh_after))
            .unwrap_or(true)
    }

    fn is(&self, key: &ApiKey) -> bool {
        self.held
            .lock()
            .map(|held| held.as_ref().is_some_and(|(kept, _)| kept == key))
            .unwrap_or(false)
    }

    /// Reads the key again and, if it changed, gives it to `chat`. True
    /// when `chat` now carries another key than before.
    pub(super) async fn refresh<K: ApiKeySource>(&self, source: &K, chat: &OpenAiChat) -> bool {
        match source.fetch().await {
            Ok(key) if self.is(&key) => {
                self.keep(key);
                false
            }
            Ok(key) => {
                chat.use_key(key.expose());
                self.keep(key);
                tracing::info!(event = "secret_reread", changed = true);
                true
            }
            Err(error) => {
                tracing::warn!(event = "secret_read_failed", error = %error, "the key held is kept");
                false
            }
        }
    }
}

/// The model with its key's source: what a turn calls.
pub(super) struct KeyedModel<'a, K> {
    pub(super) chat: &'a OpenAiChat,
    pub(super) source: &'a K,
    pub(super) key: &'a KeyState,
}

impl<K: ApiKeySource> KeyedModel<'_, K> {
    /// `call`, and once more if it got a 401 and the key had been rotated;
    /// the re-read and the re-send share the call's deadline (contract 2),
    /// so a rotation never stretches one call past its timeout.
    async fn rotating<F: Future<Output = Result<Completion, CompletionError>>>(
        &self,
        timeout: Duration,
        call: impl Fn() -> F,
    ) -> Result<Completion, CompletionError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let answer = call().await;
        if !matches!(answer, Err(CompletionError::Status { status: 401 })) {
            return answer;
        }
        let resent = async {
            if !self.key.refresh(self.source, self.chat).await {
                return answer;
            }
            tracing::info!(event = "completion_retried_after_401");
            call().await
        };
        tokio::time::timeout_at(deadline, resent)
            .await
            .unwrap_or(Err(CompletionError::Timeout))
    }
}

impl<K: ApiKeySource> ChatModel for KeyedModel<'_, K> {
    async fn complete(&self, messages: &[Message], offered: &Offered) -> Result<Completion, CompletionError> {
        self.rotating(self.chat.timeout(), || self.chat.complete(messages, offered))
            .await
    }

    /// A 401 comes before any text: the retry has nothing to discard.
    async fn complete_live(
        &self,
        messages: &[Message],
        offered: &Offered,
        live: &Live,
    ) -> Result<Completion, CompletionError> {
        self.rotating(self.chat.timeout(), || self.chat.complete_live(messages, offered, live))
            .await
    }
}

/// The routing call goes through the same key as the turn: after a
/// rotation, the first 401 reads the new key and routes with it.
impl<K: ApiKeySource> RoutingModel for KeyedModel<'_, K> {
    async fn classify(&self, request: &serde_json::Value, timeout: Duration) -> Result<Completion, CompletionError> {
        self.rotating(timeout, || self.chat.complete_json(request, timeout))
            .await
    }
}
