//! What a turn shows while it runs, for event-stream mode (contract 20):
//! the step a tool is on, the model's words as they are read, and the
//! word that a draft was not the reply.
//!
//! The turn and the model adapter write to a [`Live`]; the edge
//! ([`crate::http::live`]) turns what arrives into server-sent events. Nothing
//! here decides anything: the turn runs exactly as in JSON mode, and a
//! listener that went away (the client dropped the stream) changes nothing
//! but who hears it. The draft is kept, so that the edge can check, before
//! `done`, that what the client was shown is the reply JSON mode would give.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::mpsc;

/// A tool's step, in code's words (never the model's, never an order id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Order,
    RefundCheck,
    HelpCentre,
    Payments,
    Handoff,
}

impl Step {
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Order => "order",
            Step::RefundCheck => "refund_check",
            Step::HelpCentre => "help_centre",
            Step::Payments => "payments",
            Step::Handoff => "handoff",
        }
    }
}

/// One thing the listener hears, in the order it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    /// The agent's first completion call is about to be made: from here on
    /// the answer is an event stream.
    Begun,
    Progress(Step),
    Delta(String),
    /// The text since the last discard is not the reply.
    Discard,
    /// The answer JSON mode would have given: always last.
    Done {
        status: u16,
        body: String,
    },
}

/// The turn's side of a live answer. [`Live::silent`] hears nothing (JSON
/// mode); its methods are then free.
pub struct Live {
    to: Option<mpsc::UnboundedSender<Heard>>,
    begun: AtomicBool,
    draft: Mutex<Draft>,
}

/// The model's text since the last discard, and what of it the client has.
#[derive(Default)]
struct Draft {
    /// The text, masked piece by piece as it settles (contract 23).
    written: crate::mask::Streamed,
    /// What the client was sent: `written`'s settled text, masked.
    sent: String,
}

impl Live {
    /// JSON mode: nobody listens.
    pub fn silent() -> Live {
        Live {
            to: None,
            begun: AtomicBool::new(false),
            draft: Mutex::default(),
        }
    }

    /// Event-stream mode: what is heard arrives on the receiver. Unbounded:
    /// a turn's events are bounded by its output tokens, and a slow client
    /// must never slow the turn (nor the money path behind it).
    pub fn listened() -> (Live, mpsc::UnboundedReceiver<Heard>) {
        let (to, from) = mpsc::unbounded_channel();
        let live = Live {
            to: Some(to),
            ..Live::silent()
        };
        (live, from)
    }

    /// Whether anyone listens: the model adapter streams only then.
    pub fn is_listened(&self) -> bool {
        self.to.is_some()
    }

    /// Whether the turn reached its first completion call.
    pub fn has_begun(&self) -> bool {
        self.begun.load(Ordering::SeqCst)
    }

    fn send(&self, heard: Heard) {
        if let Some(to) = &self.to {
            // A client that went away changes nothing for the turn.
            let _ = to.send(heard);
        }
    }

    /// Called before every completion call of the agent; heard once.
    pub fn begin(&self) {
        if !self.begun.swap(true, Ordering::SeqCst) {
            self.send(Heard::Begun);
        }
    }

    pub fn progress(&self, step: Step) {
        self.send(Heard::Progress(step));
    }

    /// A piece of the model's text, as the provider streamed it: sent at
    /// once, masked, but for a trailing run that may still grow into a card
    /// number or an IBAN (contract 23: a delta never shows what `done` masks).
    pub fn delta(&self, text: &str) {
        if text.is_empty() || !self.is_listened() {
            return;
        }
        let Ok(mut draft) = self.draft.lock() else { return };
        let settled = draft.written.push(text);
        if !settled.is_empty() {
            draft.sent.push_str(&settled);
            self.send(Heard::Delta(settled));
        }
    }

    /// The draft is not the reply (its call went on to tools, timed out or
    /// failed): heard only when the client holds some of it.
    pub fn discard(&self) {
        let held = self
            .draft
            .lock()
            .map(|mut draft| !std::mem::take(&mut *draft).sent.is_empty());
        if held.unwrap_or(false) {
            self.send(Heard::Discard);
        }
    }

    /// The end: the answer JSON mode would have given. What the client holds
    /// is completed to that reply when it is its beginning; otherwise (the
    /// reply was masked or replaced by code, or there is none) it is
    /// discarded and the reply sent whole. So the deltas since the last
    /// discard are always the reply of a 200.
    pub fn done(&self, status: u16, body: String) {
        let reply = (status == 200)
            .then(|| serde_json::from_str::<serde_json::Value>(&body).ok())
            .flatten()
            .and_then(|body| body.get("reply").and_then(|r| r.as_str()).map(str::to_owned));
        let sent = self.draft.lock().map(|draft| draft.sent.clone()).unwrap_or_default();
        match reply.as_deref().map(|reply| reply.strip_prefix(sent.as_str())) {
            Some(Some("")) => {}
            Some(Some(rest)) => self.send(Heard::Delta(rest.to_owned())),
            Some(None) => {
                self.discard();
                self.send(Heard::Delta(reply.unwrap_or_default()));
            }
            None => self.discard(),
        }
        self.send(Heard::Done { status, body });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heard(mut from: mpsc::UnboundedReceiver<Heard>) -> Vec<Heard> {
        let mut all = Vec::new();
        while let Ok(heard) = from.try_recv() {
            all.push(heard);
        }
        all
    }

    #[test]
    fn a_draft_that_is_the_reply_is_not_sent_twice() {
        let (live, from) = Live::listened();
        live.begin();
        live.begin();
        live.delta("Hel");
        live.delta("lo");
        live.done(200, r#"{"reply":"Hello"}"#.into());
        assert_eq!(
            heard(from),
            [
                Heard::Begun,
                Heard::Delta("Hel".into()),
                Heard::Delta("lo".into()),
                Heard::Done {
                    status: 200,
                    body: r#"{"reply":"Hello"}"#.into()
                }
            ]
        );
    }

    #[test]
    fn a_reply_code_changed_replaces_the_draft_before_done() {
        let (live, from) = Live::listened();
        live.delta("Thanks, I will check.");
        live.done(200, r#"{"reply":"A person will review this."}"#.into());
        let all = heard(from);
        assert_eq!(all[1], Heard::Discard);
        assert_eq!(all[2], Heard::Delta("A person will review this.".into()));
        assert!(matches!(all[3], Heard::Done { status: 200, .. }));
    }

    #[test]
    fn a_card_number_is_never_sent_whole_however_the_pieces_fall() {
        let (live, from) = Live::listened();
        for piece in [
            "Your card 42",
            "42 4242 ",
            "4242 42",
            "42 was charged, order ",
            "A-1001.",
        ] {
            live.delta(piece);
        }
        live.done(
            200,
            r#"{"reply":"Your card [card ending 4242] was charged, order A-1001."}"#.into(),
        );
        let all = heard(from);
        let mut shown = String::new();
        for heard in &all {
            match heard {
                Heard::Delta(text) => shown.push_str(text),
                Heard::Discard => shown.clear(),
                _ => {}
            }
            let digits: String = shown.chars().filter(char::is_ascii_digit).collect();
            assert!(!digits.contains("4242424242424242"), "{all:?}");
        }
        assert_eq!(shown, "Your card [card ending 4242] was charged, order A-1001.");
        assert!(!all.contains(&Heard::Discard), "masked as it came: {all:?}");
    }

    #[test]
    fn a_lower_case_iban_is_never_shown_before_done_masks_it() {
        let (live, from) = Live::listened();
        for piece in [
            "Pay it to mt",
            "84 malt 0110 ",
            "0001 2345 mtlc ",
            "ast0 01s",
            " please.",
        ] {
            live.delta(piece);
        }
        let all = heard(from);
        let shown: String = all
            .iter()
            .filter_map(|h| match h {
                Heard::Delta(text) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(shown, "Pay it to [IBAN ending 001S] please.", "{all:?}");
        assert!(!all.contains(&Heard::Discard), "{all:?}");
    }

    #[test]
    fn an_error_drops_the_draft_and_a_discard_without_a_draft_is_not_heard() {
        let (live, from) = Live::listened();
        live.discard();
        live.delta("Let me");
        live.done(504, r#"{"detail":"timed out"}"#.into());
        let all = heard(from);
        assert_eq!(all.len(), 3, "{all:?}");
        assert_eq!(all[1], Heard::Discard);
    }

    #[test]
    fn a_silent_listener_keeps_no_draft() {
        let live = Live::silent();
        live.delta("words");
        assert!(live.draft.lock().unwrap().written.is_empty());
    }
}
