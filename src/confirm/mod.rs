//! The customer's yes, held in code, for every write the agent makes
//! (contracts 26 and 28): one mechanism that the change of address and the
//! return both go through, and that a third write (a cancellation, say)
//! takes as it is.
//!
//! A write's first valid call writes nothing: it becomes a [`Proposal`] (a
//! hash of exactly its arguments, never the arguments, with its time and
//! expiry, `CONFIRM_MINUTES`), kept on the conversation, one slot per
//! [`WriteKind`], and code adds its own line naming what will be written to
//! that turn's reply. Only the turn of the customer's next message, when
//! that message is an explicit yes (read by code from the customer's own
//! words, [`crate::handoff::screen::YesPhrases`]), calling again with
//! exactly the proposed arguments, writes; [`Confirmation::decide`] is that
//! rule as a pure function. A yes answers the one proposal that waits: with
//! two waiting, a bare yes writes neither and the agent asks which. Any turn
//! that does not confirm clears what waited.
//!
//! The write's `Idempotency-Key` comes from the proposal ([`write_key`]), so
//! a retry after a timeout, or the same proposal confirmed again after a
//! lost answer, writes once.

use std::time::Duration;

use sha2::{Digest, Sha256};

/// What the agent may write, each with its own slot for a proposal. A
/// write names its kind where it is defined ([`WriteKind::ADDRESS`] and
/// [`WriteKind::RETURN`] here, whose key domains must never change); the
/// set of kinds is open, so a new write is a new constant, not an edit of
/// this mechanism.
#[derive(Debug, Clone, Copy)]
pub struct WriteKind {
    name: &'static str,
    in_words: &'static str,
    key_domain: &'static [u8],
}

impl PartialEq for WriteKind {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for WriteKind {}

impl std::hash::Hash for WriteKind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl WriteKind {
    /// The delivery address of an order that has not shipped (contract 26).
    /// Its key domain is the one its keys were always made with.
    pub const ADDRESS: WriteKind = WriteKind::new("address", "a change of delivery address", b"address-change\0");
    /// A return of a delivered order's items (contract 28).
    pub const RETURN: WriteKind = WriteKind::new("return", "a return", b"return\0");

    /// `name` as the conversation's stored attributes and the logs say it
    /// (lower case and underscores: it is part of attribute names), what
    /// the customer is asked about when two proposals wait, and its keys'
    /// domain (no two kinds share one).
    pub const fn new(name: &'static str, in_words: &'static str, key_domain: &'static [u8]) -> WriteKind {
        WriteKind {
            name,
            in_words,
            key_domain,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.name
    }

    fn in_words(self) -> &'static str {
        self.in_words
    }

    fn key_domain(self) -> &'static [u8] {
        self.key_domain
    }
}

/// A write proposed in a conversation and not yet confirmed: the hash of
/// its arguments (never the arguments) and when, kept until it is
/// confirmed, replaced, cleared or expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proposal {
    pub hash: [u8; 32],
    pub at_ms: u64,
    pub until_ms: u64,
}

impl Proposal {
    /// A proposal of `hash` made at `now_ms`, waiting `within`.
    pub fn new(hash: [u8; 32], now_ms: u64, within: Duration) -> Proposal {
        Proposal {
            hash,
            at_ms: now_ms,
            until_ms: now_ms.saturating_add(within.as_millis() as u64),
        }
    }

    pub fn hex(&self) -> String {
        self.hash.iter().map(|byte| format!("{byte:02x}")).collect()
    }

    /// A proposal as stored: its hash in hex, its times.
    pub fn from_stored(hex: &str, at_ms: u64, until_ms: u64) -> Option<Proposal> {
        if hex.len() != 64 || !hex.is_ascii() {
            return None;
        }
        let mut hash = [0u8; 32];
        for (i, byte) in hash.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[i * 2..i * 2 + 2], 16).ok()?;
        }
        Some(Proposal { hash, at_ms, until_ms })
    }

    /// Still waiting for the customer's yes at `now_ms`.
    pub fn waits_at(&self, now_ms: u64) -> bool {
        now_ms < self.until_ms
    }
}

/// SHA-256 of `fields`, each length-prefixed, so that no two different
/// calls share a hash (text moved from one field to the next is another call).
pub fn hash_of<'a>(fields: impl IntoIterator<Item = &'a str>) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for field in fields {
        hasher.update((field.len() as u64).to_be_bytes());
        hasher.update(field.as_bytes());
    }
    hasher.finalize().into()
}

/// The conversation's proposals, one slot per kind.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Proposals {
    slots: Vec<(WriteKind, Proposal)>,
}

impl Proposals {
    pub fn get(&self, kind: WriteKind) -> Option<Proposal> {
        self.slots.iter().find(|(k, _)| *k == kind).map(|(_, p)| *p)
    }

    pub fn set(&mut self, kind: WriteKind, proposal: Option<Proposal>) {
        self.slots.retain(|(k, _)| *k != kind);
        if let Some(proposal) = proposal {
            self.slots.push((kind, proposal));
        }
    }

    /// With `proposal` in `kind`'s slot.
    pub fn with(mut self, kind: WriteKind, proposal: Proposal) -> Proposals {
        self.set(kind, Some(proposal));
        self
    }

    /// Those still waiting at `now_ms`.
    pub fn waiting_at(&self, now_ms: u64) -> Proposals {
        Proposals {
            slots: self.slots.iter().copied().filter(|(_, p)| p.waits_at(now_ms)).collect(),
        }
    }

    pub fn any(&self) -> bool {
        !self.slots.is_empty()
    }

    fn kinds(&self) -> impl Iterator<Item = WriteKind> + '_ {
        self.slots.iter().map(|(kind, _)| *kind)
    }

    /// Applies a turn's steps: a kind the steps do not name takes their
    /// `otherwise` (a clearing turn ends every kind, known here or not).
    pub fn apply(&mut self, steps: &ProposalSteps) {
        let kinds: Vec<WriteKind> = self.kinds().chain(steps.named()).collect();
        for kind in kinds {
            match steps.get(kind) {
                ProposalStep::Keep => {}
                ProposalStep::Set(proposal) => self.set(kind, Some(proposal)),
                ProposalStep::Clear => self.set(kind, None),
            }
        }
    }
}

/// What a turn leaves of one kind's proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProposalStep {
    /// As it was.
    #[default]
    Keep,
    /// A new proposal replaces any other of its kind.
    Set(Proposal),
    /// Confirmed and written, refused for good, or not confirmed: nothing waits.
    Clear,
}

/// What a turn leaves of each kind's proposal: those it named, and for
/// every other kind `otherwise`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProposalSteps {
    steps: Vec<(WriteKind, ProposalStep)>,
    otherwise: ProposalStep,
    /// Kinds this turn proposed twice with other arguments: both cleared,
    /// and no third proposal of the kind in the turn.
    ambiguous: Vec<WriteKind>,
}

impl ProposalSteps {
    /// This turn proposed `kind` twice, differently: nothing of it waits.
    pub fn is_ambiguous(&self, kind: WriteKind) -> bool {
        self.ambiguous.contains(&kind)
    }

    fn make_ambiguous(&mut self, kind: WriteKind) {
        self.ambiguous.push(kind);
        self.set(kind, ProposalStep::Clear);
    }

    pub fn get(&self, kind: WriteKind) -> ProposalStep {
        self.steps
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(self.otherwise, |(_, step)| *step)
    }

    pub fn set(&mut self, kind: WriteKind, step: ProposalStep) {
        self.steps.retain(|(k, _)| *k != kind);
        self.steps.push((kind, step));
    }

    /// The kinds named, in the order they were first set.
    fn named(&self) -> impl Iterator<Item = WriteKind> + '_ {
        self.steps.iter().map(|(kind, _)| *kind)
    }

    /// Every step that is not `Keep`, of the kinds in `kinds` (a store
    /// writes the kinds it keeps).
    pub fn changes<'a>(&'a self, kinds: &'a [WriteKind]) -> impl Iterator<Item = (WriteKind, ProposalStep)> + 'a {
        kinds
            .iter()
            .map(|kind| (*kind, self.get(*kind)))
            .filter(|(_, step)| *step != ProposalStep::Keep)
    }

    /// Every proposal cleared: only the customer's next message may
    /// confirm, so a turn that neither writes nor proposes again ends what
    /// the conversation holds, whether or not this turn could see it.
    pub fn clearing() -> ProposalSteps {
        ProposalSteps {
            otherwise: ProposalStep::Clear,
            ..ProposalSteps::default()
        }
    }

    /// The steps with every new proposal dropped: a turn whose answer did
    /// not reach the customer (502, 504) proposed nothing.
    pub fn without_new_proposals(mut self) -> ProposalSteps {
        for (_, step) in &mut self.steps {
            if matches!(step, ProposalStep::Set(_)) {
                *step = ProposalStep::Clear;
            }
        }
        self
    }
}

/// What a turn knows of the conversation's proposals: those still waiting,
/// whether the customer's own message is an explicit yes (code reads it,
/// never the model), how long a new proposal waits, and the turn's clock.
#[derive(Debug, Clone, Default)]
pub struct Confirmation {
    pub waiting: Proposals,
    pub said_yes: bool,
    pub confirm_within: Duration,
    pub now_ms: u64,
}

/// What [`Confirmation::decide`] makes of a valid call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Write now: this proposal, confirmed by the customer's yes.
    Write(Proposal),
    /// Write nothing: this (new) proposal waits for the customer's yes.
    Propose(Proposal),
    /// A yes, and more than one proposal waits: the yes names none of
    /// them; nothing is written and the customer is asked which.
    WhichOne,
    /// The very proposal this turn made already: nothing new to show.
    Again(Proposal),
    /// A second proposal of the kind in one turn, with other arguments:
    /// both are cleared (the customer reads no two lines of one kind, and a
    /// bare yes could answer either) and the customer is asked which.
    Ambiguous,
}

impl Confirmation {
    /// The rule: a call writes only when the customer's message is a yes,
    /// the one proposal that waits is this kind's and has exactly this
    /// hash, and it has not expired. A first call, other arguments, no yes
    /// or an expired proposal: a (new) proposal.
    ///
    /// Within the turn (`steps`, what it did so far): the same proposal
    /// again is [`Decision::Again`]; one with other arguments makes the
    /// kind ambiguous for the rest of the turn, clearing both.
    pub fn decide(&self, kind: WriteKind, hash: [u8; 32], steps: &mut ProposalSteps) -> Decision {
        if steps.is_ambiguous(kind) {
            return Decision::Ambiguous;
        }
        if let ProposalStep::Set(proposed) = steps.get(kind) {
            if proposed.hash == hash {
                return Decision::Again(proposed);
            }
            steps.make_ambiguous(kind);
            return Decision::Ambiguous;
        }
        let waiting = self.waiting.waiting_at(self.now_ms);
        let this = waiting.get(kind).filter(|proposal| proposal.hash == hash);
        match this {
            Some(_) if self.said_yes && waiting.kinds().count() > 1 => Decision::WhichOne,
            Some(proposal) if self.said_yes => Decision::Write(proposal),
            _ => Decision::Propose(Proposal::new(hash, self.now_ms, self.confirm_within)),
        }
    }

    /// What the model is told when it proposed two of a kind in one turn.
    pub fn ambiguous(kind: WriteKind) -> serde_json::Value {
        serde_json::json!({
            "error": format!(
                "two different proposals of {} in one answer: neither waits for the customer's yes and nothing was \
                 written. Ask the customer which one they want; then propose that one alone",
                kind.in_words()
            )
        })
    }

    /// What the model is told when a yes names no one proposal.
    pub fn which_one(&self) -> serde_json::Value {
        let waiting: Vec<&str> = self
            .waiting
            .waiting_at(self.now_ms)
            .kinds()
            .map(WriteKind::in_words)
            .collect();
        serde_json::json!({
            "error": format!(
                "more than one change waits for the customer's yes ({}), and their yes does not say which: nothing \
                 was written. Ask the customer which one they want; then propose that one again",
                waiting.join(" and ")
            )
        })
    }
}

/// A write's `Idempotency-Key`, from its proposal: the same proposal,
/// retried after a timeout or confirmed again after a lost answer, writes
/// once; another conversation's or another proposal's is another key.
pub fn write_key(kind: WriteKind, conversation: &str, proposal: &Proposal) -> String {
    let mut hasher = Sha256::new();
    hasher.update(kind.key_domain());
    hasher.update(conversation.as_bytes());
    hasher.update(b"\0");
    hasher.update(proposal.hash);
    hasher.update(proposal.at_ms.to_be_bytes());
    hasher.finalize().iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTES_30: Duration = Duration::from_secs(30 * 60);

    fn confirmation(waiting: Proposals, said_yes: bool, now_ms: u64) -> Confirmation {
        Confirmation {
            waiting,
            said_yes,
            confirm_within: MINUTES_30,
            now_ms,
        }
    }

    #[test]
    fn only_a_yes_to_the_one_waiting_proposal_with_its_hash_writes() {
        let hash = hash_of(["A-1002", "Blue mug"]);
        let proposal = Proposal::new(hash, 1_000, MINUTES_30);
        let waiting = Proposals::default().with(WriteKind::RETURN, proposal);
        assert_eq!(
            confirmation(waiting.clone(), true, 60_000).decide(WriteKind::RETURN, hash, &mut ProposalSteps::default()),
            Decision::Write(proposal)
        );
        // No yes, another hash, another kind, expired: a new proposal.
        for (said_yes, kind, asked, now) in [
            (false, WriteKind::RETURN, hash, 60_000),
            (true, WriteKind::RETURN, hash_of(["A-1002", "Red mug"]), 60_000),
            (true, WriteKind::ADDRESS, hash, 60_000),
            (true, WriteKind::RETURN, hash, 1_000 + MINUTES_30.as_millis() as u64),
        ] {
            let decided =
                confirmation(waiting.clone(), said_yes, now).decide(kind, asked, &mut ProposalSteps::default());
            assert_eq!(decided, Decision::Propose(Proposal::new(asked, now, MINUTES_30)));
        }
    }

    #[test]
    fn with_two_waiting_a_bare_yes_writes_neither() {
        let (address, ret) = (hash_of(["a"]), hash_of(["r"]));
        let waiting = Proposals::default()
            .with(WriteKind::ADDRESS, Proposal::new(address, 1_000, MINUTES_30))
            .with(WriteKind::RETURN, Proposal::new(ret, 2_000, MINUTES_30));
        let turn = confirmation(waiting.clone(), true, 60_000);
        let mut steps = ProposalSteps::default();
        assert_eq!(turn.decide(WriteKind::ADDRESS, address, &mut steps), Decision::WhichOne);
        assert_eq!(turn.decide(WriteKind::RETURN, ret, &mut steps), Decision::WhichOne);
        let asked = turn.which_one().to_string();
        assert!(asked.contains("a change of delivery address and a return"), "{asked}");
        // One of the two expired: the yes answers the other.
        let later = confirmation(
            waiting.with(WriteKind::ADDRESS, Proposal::new(address, 0, Duration::from_millis(1))),
            true,
            60_000,
        );
        assert!(matches!(
            later.decide(WriteKind::RETURN, ret, &mut ProposalSteps::default()),
            Decision::Write(_)
        ));
    }

    #[test]
    fn a_turn_that_does_not_confirm_clears_what_waited_and_a_failed_one_proposes_nothing() {
        let proposal = Proposal::new(hash_of(["a"]), 1, MINUTES_30);
        let waiting = Proposals::default().with(WriteKind::ADDRESS, proposal);
        let steps = ProposalSteps::clearing();
        assert_eq!(steps.get(WriteKind::ADDRESS), ProposalStep::Clear);
        assert_eq!(steps.get(WriteKind::RETURN), ProposalStep::Clear);
        let mut kept = waiting;
        kept.apply(&steps);
        assert!(!kept.any());
        let mut proposing = ProposalSteps::default();
        proposing.set(WriteKind::RETURN, ProposalStep::Set(proposal));
        assert_eq!(
            proposing.without_new_proposals().get(WriteKind::RETURN),
            ProposalStep::Clear
        );
    }

    #[test]
    fn two_proposals_of_a_kind_in_one_turn_clear_both_and_the_same_one_again_adds_nothing() {
        let turn = confirmation(Proposals::default(), false, 60_000);
        let (first, second) = (hash_of(["A-1", "one"]), hash_of(["A-1", "two"]));
        let mut steps = ProposalSteps::clearing();
        let Decision::Propose(proposal) = turn.decide(WriteKind::ADDRESS, first, &mut steps) else {
            panic!("a first call proposes");
        };
        steps.set(WriteKind::ADDRESS, ProposalStep::Set(proposal));
        assert_eq!(
            turn.decide(WriteKind::ADDRESS, first, &mut steps),
            Decision::Again(proposal)
        );
        assert_eq!(turn.decide(WriteKind::ADDRESS, second, &mut steps), Decision::Ambiguous);
        assert_eq!(steps.get(WriteKind::ADDRESS), ProposalStep::Clear, "neither waits");
        assert_eq!(
            turn.decide(WriteKind::ADDRESS, first, &mut steps),
            Decision::Ambiguous,
            "not the first again either"
        );
        // The other kind is its own.
        assert!(matches!(
            turn.decide(WriteKind::RETURN, second, &mut steps),
            Decision::Propose(_)
        ));
    }

    #[test]
    fn keys_differ_by_kind_conversation_and_proposal_and_repeat_for_the_same() {
        let proposal = Proposal::new(hash_of(["a"]), 1, MINUTES_30);
        let key = write_key(WriteKind::RETURN, "c_1", &proposal);
        assert_eq!(key, write_key(WriteKind::RETURN, "c_1", &proposal));
        assert_ne!(key, write_key(WriteKind::ADDRESS, "c_1", &proposal));
        assert_ne!(key, write_key(WriteKind::RETURN, "c_2", &proposal));
        let later = Proposal::new(proposal.hash, 2, MINUTES_30);
        assert_ne!(key, write_key(WriteKind::RETURN, "c_1", &later));
        assert_eq!(
            Proposal::from_stored(&proposal.hex(), proposal.at_ms, proposal.until_ms),
            Some(proposal)
        );
    }
}
