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
use std::sync::Arc;

use bm25::{Document, SearchEngine, SearchEngineBuilder, Tokenizer};
use rust_stemmers::{Algorithm, Stemmer};

use super::Article;

/// Passages a search returns at most.
pub const MAX_RESULTS: usize = 3;

/// Words as the index sees them: folded, without stop words, stemmed.
struct Words {
    stemmer: Stemmer,
    /// Shared by the engine's tokenizer and the query's: read once.
    stop_words: Arc<HashSet<String>>,
}

impl Words {
    fn new() -> Self {
        let stop_words = stop_words::get(stop_words::Language::English)
            .iter()
            .map(|word| crate::handoff::screen::normalise(word).trim().to_owned())
            .collect();
        Words::with_stop_words(Arc::new(stop_words))
    }

    fn with_stop_words(stop_words: Arc<HashSet<String>>) -> Self {
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
        let reader = Words::with_stop_words(Arc::clone(&tokenizer.stop_words));
        let mut passages = Vec::new();
        let mut words = Vec::new();
        let mut documents = Vec::new();
        let mut tokens = 0;
        for (a, article) in articles.iter().enumerate() {
            for (p, passage) in article.passages.iter().enumerate() {
                let contents = format!("{}\n{passage}", article.title);
                let tokenized = tokenizer.tokenize(&contents);
                tokens += tokenized.len();
                words.push(tokenized.into_iter().collect());
                documents.push(Document::new(passages.len(), contents));
                passages.push((a, p));
            }
        }
        // The average length from the tokens above: the builder's own fit
        // would tokenize (and stem) every passage once more.
        let avgdl = if documents.is_empty() {
            1.0
        } else {
            (tokens as f64 / documents.len() as f64) as f32
        };
        let mut engine = SearchEngineBuilder::<usize, u32, Words>::with_tokenizer_and_documents(
            tokenizer,
            Vec::<Document<usize>>::new(),
        )
        .avgdl(avgdl)
        .build();
        for document in documents {
            engine.upsert(document);
        }
        HelpCentre {
            articles,
            passages,
            words,
            engine,
            reader,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The index fits its average length itself; it must rank exactly as
    /// the crate's own fit would.
    #[test]
    fn the_index_scores_as_the_crates_own_fit_does() {
        let placeholders = crate::help::Placeholders::of_rules(30.0, 5000, 24.0, 10000);
        let articles = crate::help::built_in(&placeholders).expect("the shipped set loads");
        let centre = HelpCentre::new(articles.clone());
        let documents: Vec<Document<usize>> = centre
            .passages
            .iter()
            .enumerate()
            .map(|(id, &(a, p))| Document::new(id, format!("{}\n{}", articles[a].title, articles[a].passages[p])))
            .collect();
        let fitted =
            SearchEngineBuilder::<usize, u32, Words>::with_tokenizer_and_documents(Words::new(), documents).build();
        for query in [
            "return a damaged item",
            "how long is the refund window",
            "talk to a person",
            "parcel",
        ] {
            let mut ours: Vec<(usize, f32)> = centre
                .engine
                .search(query, None)
                .iter()
                .map(|r| (r.document.id, r.score))
                .collect();
            let mut theirs: Vec<(usize, f32)> = fitted
                .search(query, None)
                .iter()
                .map(|r| (r.document.id, r.score))
                .collect();
            ours.sort_by_key(|(id, _)| *id);
            theirs.sort_by_key(|(id, _)| *id);
            assert!(!ours.is_empty(), "{query}");
            assert_eq!(ours, theirs, "{query}");
        }
    }
}
