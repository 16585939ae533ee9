//! "Did this solve it?" (contract 30): the customer's own answer, once per
//! conversation, after a person closed it or decided a refund. The comment
//! is the customer's words: masked (contract 23), never logged, read by
//! the support team alone. What it is counted by is code's: the outcome
//! (`solved` or `not_solved`) and the intent the router gave the
//! conversation's first routed turn, as `refund-chat-admin routing` counts
//! a conversation.

/// The longest comment, in characters.
pub const MAX_COMMENT_CHARS: usize = 500;

/// A customer's rating, its comment masked.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Rating {
    pub solved: bool,
    /// Empty when the customer wrote none.
    pub comment: String,
}

impl Rating {
    /// A rating of `comment` (at most [`MAX_COMMENT_CHARS`], one or more
    /// lines of plain text), masked; `Err` names what is wrong.
    pub fn new(solved: bool, comment: Option<&str>) -> Result<Rating, String> {
        let comment = comment.unwrap_or_default().replace("\r\n", "\n");
        let comment = comment.trim();
        if let Some(bad) = comment
            .chars()
            .find(|&c| c != '\n' && crate::untrusted::acts_on_a_terminal(c))
        {
            return Err(format!(
                "comment holds a control character ({}): write plain text",
                crate::untrusted::visible(&bad.to_string())
            ));
        }
        let chars = comment.chars().count();
        if chars > MAX_COMMENT_CHARS {
            return Err(format!("comment is {chars} characters; at most {MAX_COMMENT_CHARS}"));
        }
        Ok(Rating {
            solved,
            comment: crate::mask::masked(comment).into_owned(),
        })
    }

    /// The metric's and the report's name of the outcome.
    pub fn outcome(&self) -> &'static str {
        if self.solved { "solved" } else { "not_solved" }
    }
}

/// The intent a rating is counted under: the first of the router's labels
/// of the conversation's first routed turn (`refund;low;0.95` is `refund`), or
/// `unrouted` when no turn was routed.
pub fn intent_of(router_labels: Option<&str>) -> String {
    router_labels
        .and_then(|labels| labels.split(';').next())
        .and_then(|intents| intents.split(',').next())
        .map(str::trim)
        .filter(|intent| !intent.is_empty())
        .unwrap_or("unrouted")
        .to_owned()
}

/// What rating a conversation found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rated {
    /// Kept, counted under `intent`.
    Rated { intent: String },
    /// Rated before: the first rating stands.
    AlreadyRated,
    /// Nobody closed it or decided a refund of it yet: nothing to rate.
    NotYet,
    /// Unknown, expired or another's: one answer for all three.
    NotFound,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_comment_is_plain_text_of_at_most_500_characters_masked() {
        let rating = Rating::new(false, Some(" my card 4242 4242 4242 4242 was charged twice ")).unwrap();
        assert_eq!(rating.comment, "my card [card ending 4242] was charged twice");
        assert_eq!(rating.outcome(), "not_solved");
        assert_eq!(Rating::new(true, None).unwrap().comment, "");
        assert!(Rating::new(true, Some(&"x".repeat(500))).is_ok());
        assert!(Rating::new(true, Some(&"x".repeat(501))).is_err());
        assert!(Rating::new(true, Some("a\u{1b}[2Jb")).is_err());
    }

    #[test]
    fn the_intent_is_the_first_routed_turns_first_label() {
        assert_eq!(intent_of(Some("refund;low;0.95")), "refund");
        assert_eq!(intent_of(Some("return,refund;low;0.9")), "return");
        assert_eq!(intent_of(Some("")), "unrouted");
        assert_eq!(intent_of(None), "unrouted");
    }
}
