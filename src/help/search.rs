//! Searching the help centre (contract 17): BM25 over each passage and its
//! article's title, with the `bm25` crate's scorer (its own tokenizer left
//! out: see decisions.md) and this module's tokenizer: text read as a
//! person reads it ([`crate::handoff::screen::normalise`]: case folded,
//! accents removed), English stop words dropped, words stemmed. The index
//! is built once per container, at start.
//!
//! A passage is returned only if it shares a word (a stem) with the query,
//! checked here on the tokens themselves, not on the scorer's hashes, so a
//! question the articles do not answer gets nothing, never a near miss.

use std::collections::HashSet;

use bm25::{Document, SearchEngine, SearchEngineBuilder, Tokenizer};
use rust_stemmers::{Algorithm, Stemmer};

use super::Article;

/// Passages a search returns at most.
pub const MAX_RESULTS: usize = 3;

/// Words as the index sees them: folded, without stop words, stemmed.
struct Words {
    stemmer: Stemmer,
    stop_words: HashSet<String>,
}

impl Words {
    fn new() -> Self {
        let stop_words = stop_words::get(stop_words::LANGUAGE::English)
            .iter()
            .map(|word| crate::handoff::screen::normalise(word).trim().to_owned())
            .collect();
        Words {
            stemmer: Stemmer::create(Algorithm::English),
            stop_words,
        }
    }
}

impl Tokenizer for Words {
    fn tokenize(&self, text: &str) -> Vec<String> {
        crate::handoff::screen::normalise(text)
            .split_whitespace()
            .filter(|word| !self.stop_words.contains(*word))
            .map(|word| self.stemmer.stem(word).into_owned())
            .collect()
    }
}

/// One passage a search found.
#[derive(Debug, Clone, PartialEq)]
pub struct Found<'a> {
    pub article: &'a Article,
    pub passage: &'a str,
    pub score: f32,
}

/// The articles and their index.
pub struct HelpCentre {
    articles: Vec<Article>,
    /// (article, passage) of each document, by document id.
    passages: Vec<(usize, usize)>,
    /// Each document's words, for the "shares a word" rule.
    words: Vec<HashSet<String>>,
    engine: SearchEngine<usize, u32, Words>,
    /// The same tokenizer for queries (the engine owns its own).
    reader: Words,
}

impl HelpCentre {
    /// Indexes every passage of `articles`, with its article's title.
    pub fn new(articles: Vec<Article>) -> Self {
        let tokenizer = Words::new();
        let mut passages = Vec::new();
        let mut words = Vec::new();
        let mut documents = Vec::new();
        for (a, article) in articles.iter().enumerate() {
            for (p, passage) in article.passages.iter().enumerate() {
                let contents = format!("{}\n{passage}", article.title);
                words.push(tokenizer.tokenize(&contents).into_iter().collect());
                documents.push(Document::new(passages.len(), contents));
                passages.push((a, p));
            }
        }
        let engine =
            SearchEngineBuilder::<usize, u32, Words>::with_tokenizer_and_documents(tokenizer, documents).build();
        HelpCentre {
            articles,
            passages,
            words,
            engine,
            reader: Words::new(),
        }
    }

    pub fn articles(&self) -> &[Article] {
        &self.articles
    }

    /// The best passages for `query`, best first, at most [`MAX_RESULTS`];
    /// none that shares no word with it. Equal scores keep the articles' order.
    pub fn search(&self, query: &str) -> Vec<Found<'_>> {
        let asked: HashSet<String> = self.reader.tokenize(query).into_iter().collect();
        let mut found: Vec<(usize, f32)> = self
            .engine
            .search(query, None)
            .into_iter()
            .map(|result| (result.document.id, result.score))
            .filter(|(id, score)| *score > 0.0 && self.words.get(*id).is_some_and(|words| !words.is_disjoint(&asked)))
            .collect();
        found.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        found
            .into_iter()
            .take(MAX_RESULTS)
            .filter_map(|(id, score)| {
                let (a, p) = *self.passages.get(id)?;
                let article = self.articles.get(a)?;
                Some(Found {
                    article,
                    passage: article.passages.get(p)?,
                    score,
                })
            })
            .collect()
    }
}
