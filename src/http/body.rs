//! The request body of `POST /support/refund-chat`, checked before anything
//! else happens: bad input never costs a secret read, a model call or money.

use serde_json::Value;

use crate::conversation::{ConversationId, MAX_ID_LENGTH};
use crate::refund::message::CustomerMessage;
pub use crate::refund::message::MAX_MESSAGE_CHARS;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatRequest {
    pub user_id: String,
    pub message: CustomerMessage,
    /// The conversation this message continues; none starts a new one.
    pub conversation_id: Option<ConversationId>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// The body is missing, not JSON, or not a JSON object: HTTP 400.
    #[error("{0}")]
    Malformed(&'static str),
    /// A field is missing, of the wrong type, empty or too long: HTTP 422.
    #[error("{0}")]
    InvalidField(String),
}

impl ChatRequest {
    /// Parses the raw body. Fields other than `user_id`, `message` and
    /// `conversation_id` are ignored.
    pub fn parse(body: &[u8]) -> Result<ChatRequest, InputError> {
        ChatRequest::parse_as(body, true)
    }

    /// A visitor's body (contract 27): section 1's without `user_id`, which
    /// a visitor has none of; one given is refused rather than ignored.
    /// `user_id` comes back empty: the edge names the visitor.
    pub fn parse_visitor(body: &[u8]) -> Result<ChatRequest, InputError> {
        ChatRequest::parse_as(body, false)
    }

    fn parse_as(body: &[u8], names_a_user: bool) -> Result<ChatRequest, InputError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(InputError::Malformed("the request body is missing"));
        }
        let value: Value =
            serde_json::from_slice(body).map_err(|_| InputError::Malformed("the request body is not valid JSON"))?;
        let Value::Object(mut fields) = value else {
            return Err(InputError::Malformed("the request body must be a JSON object"));
        };
        let user_id = if names_a_user {
            text_field(&mut fields, "user_id")?
        } else if fields.contains_key("user_id") {
            return Err(InputError::InvalidField(
                "a visitor's message has no user_id: sign in, or leave it out".into(),
            ));
        } else {
            String::new()
        };
        let message = text_field(&mut fields, "message")?;
        let length = message.chars().count();
        if length > MAX_MESSAGE_CHARS {
            return Err(InputError::InvalidField(format!(
                "message must be at most {MAX_MESSAGE_CHARS} characters, got {length}"
            )));
        }
        let conversation_id = match fields.remove("conversation_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(raw)) => Some(ConversationId::parse(&raw).ok_or_else(|| {
                InputError::InvalidField(format!(
                    "conversation_id must be 1 to {MAX_ID_LENGTH} visible ASCII characters"
                ))
            })?),
            Some(_) => return Err(InputError::InvalidField("conversation_id must be a string".into())),
        };
        Ok(ChatRequest {
            user_id,
            message: CustomerMessage::new(message),
            conversation_id,
        })
    }
}

fn text_field(fields: &mut serde_json::Map<String, Value>, name: &str) -> Result<String, InputError> {
    match fields.remove(name) {
        None | Some(Value::Null) => Err(InputError::InvalidField(format!("{name} is required"))),
        Some(Value::String(text)) if text.is_empty() => {
            Err(InputError::InvalidField(format!("{name} must not be empty")))
        }
        Some(Value::String(text)) => Ok(text),
        Some(_) => Err(InputError::InvalidField(format!("{name} must be a string"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_body_ignores_other_fields() {
        let parsed = ChatRequest::parse(br#"{"user_id":"u1","message":"hi","extra":[1]}"#).unwrap();
        assert_eq!(
            parsed,
            ChatRequest {
                user_id: "u1".into(),
                message: CustomerMessage::new("hi"),
                conversation_id: None,
            }
        );
    }

    #[test]
    fn a_conversation_id_is_1_to_128_visible_ascii_characters_or_a_422() {
        let body = |id: Value| serde_json::json!({"user_id": "u1", "message": "hi", "conversation_id": id}).to_string();
        let parsed = ChatRequest::parse(body(Value::from("c_1")).as_bytes()).unwrap();
        assert_eq!(parsed.conversation_id, ConversationId::parse("c_1"));
        assert_eq!(
            ChatRequest::parse(body(Value::Null).as_bytes())
                .unwrap()
                .conversation_id,
            None
        );
        for bad in [
            Value::from(""),
            Value::from("a b"),
            Value::from("x".repeat(129)),
            Value::from(7),
        ] {
            assert!(
                matches!(ChatRequest::parse(body(bad.clone()).as_bytes()), Err(InputError::InvalidField(d)) if d.contains("conversation_id")),
                "{bad}"
            );
        }
    }

    #[test]
    fn length_counts_characters_not_bytes() {
        let at_limit = "é".repeat(MAX_MESSAGE_CHARS);
        let body = serde_json::json!({"user_id": "u1", "message": at_limit}).to_string();
        assert!(ChatRequest::parse(body.as_bytes()).is_ok());
        let over = serde_json::json!({"user_id": "u1", "message": "é".repeat(MAX_MESSAGE_CHARS + 1)}).to_string();
        assert!(matches!(ChatRequest::parse(over.as_bytes()), Err(InputError::InvalidField(d)) if d.contains("4000")));
    }

    #[test]
    fn debug_never_shows_the_message() {
        let parsed = ChatRequest::parse(br#"{"user_id":"u1","message":"my secret words"}"#).unwrap();
        assert!(!format!("{parsed:?}").contains("secret"));
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    /// JSON values of every kind, for fields.
    fn field() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            ".{0,8}".prop_map(Value::from),
            (4000usize..4003).prop_map(|n| Value::from("é".repeat(n))),
            Just(json!(["a"])),
            Just(json!({"a": 1})),
        ]
    }

    fn check(body: &[u8]) {
        match ChatRequest::parse(body) {
            Ok(request) => {
                assert!(!request.user_id.is_empty());
                assert!((1..=MAX_MESSAGE_CHARS).contains(&request.message.chars()));
            }
            Err(InputError::Malformed(_) | InputError::InvalidField(_)) => {}
        }
    }

    proptest! {
        #[test]
        fn any_bytes_are_answered_without_a_panic(body in proptest::collection::vec(any::<u8>(), 0..256)) {
            check(&body);
        }

        #[test]
        fn any_object_is_accepted_exactly_when_its_fields_obey_the_rules(
            user_id in proptest::option::of(field()),
            message in proptest::option::of(field()),
            extra in proptest::option::of(field()),
        ) {
            let mut object = serde_json::Map::new();
            if let Some(v) = &user_id { object.insert("user_id".into(), v.clone()); }
            if let Some(v) = &message { object.insert("message".into(), v.clone()); }
            if let Some(v) = &extra { object.insert("extra".into(), v.clone()); }
            let body = Value::Object(object).to_string();
            let valid_text = |v: &Option<Value>, max: usize| {
                v.as_ref().and_then(Value::as_str).is_some_and(|s| (1..=max).contains(&s.chars().count()))
            };
            let expected = valid_text(&user_id, usize::MAX) && valid_text(&message, MAX_MESSAGE_CHARS);
            let parsed = ChatRequest::parse(body.as_bytes());
            prop_assert_eq!(parsed.is_ok(), expected, "{}", body);
            if !expected {
                prop_assert!(matches!(parsed, Err(InputError::InvalidField(_))), "a 422, not a 400");
            }
        }
    }
}
