//! What a search query asks for: its content words (stopwords dropped, lower-cased, each once)
//! for a full-text OR query, and the absolute dates it names, as time windows the store ranks
//! memories in a second time (fused with the plain ranking, never as a hard filter).
//!
//! Why these steps (measured with `skald eval locomo`, see the store's docs): an OR of content
//! words lets BM25 weigh rare words over common ones, where an AND of every word would match
//! almost nothing for a natural-language question; stopwords add nothing but time. A question
//! that names a date ("on 25 February, 2022", "in May 2023") is about what was remembered then,
//! so memories created in that window get a second ranking.

use std::sync::LazyLock;

use chrono::{Datelike, Months, NaiveDate, TimeDelta};
use regex::Regex;

use super::dedup::words;

/// At most this many terms go into a full-text query; later words are dropped.
pub const MAX_QUERY_TERMS: usize = 32;

/// How far past a named date its window reaches, in days. Memories are written on or after the
/// day they talk about ("we went camping yesterday", "last week"), never before it.
pub const DATE_WINDOW_TRAILING_DAYS: i64 = 10;

/// English function words: articles, pronouns, auxiliaries, prepositions, conjunctions and
/// question words. Content words (nouns, verbs, adjectives, names, numbers) stay.
const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "d",
    "did",
    "do",
    "does",
    "doing",
    "don",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "ll",
    "m",
    "may",
    "me",
    "might",
    "more",
    "most",
    "must",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "re",
    "s",
    "same",
    "shall",
    "she",
    "should",
    "so",
    "some",
    "such",
    "t",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "ve",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// Whether `word` (lower case) is a stopword.
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.binary_search(&word).is_ok()
}

/// A time window a query names, in milliseconds since the Unix epoch (UTC), `start` inclusive,
/// `end` exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DateWindow {
    /// The window's first millisecond.
    pub start_ms: i64,
    /// The first millisecond after the window.
    pub end_ms: i64,
}

/// A query, analysed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueryPlan {
    terms: Vec<String>,
    dates: Vec<DateWindow>,
}

impl QueryPlan {
    /// Analyses `text`: the dates it names, and its content words (the words of a date
    /// expression are not terms: memories rarely repeat the date they were written on). When
    /// every word is a stopword, the words themselves are the terms, so "who is she?" still
    /// searches for something.
    pub fn new(text: &str) -> QueryPlan {
        let (dates, rest) = extract_dates(text);
        let mut terms: Vec<String> = Vec::new();
        let mut all: Vec<String> = Vec::new();
        for word in words(&rest) {
            if !all.contains(&word) {
                all.push(word.clone());
            }
            if !is_stopword(&word) && !terms.contains(&word) {
                terms.push(word);
            }
        }
        if terms.is_empty() {
            terms = all;
        }
        terms.truncate(MAX_QUERY_TERMS);
        QueryPlan { terms, dates }
    }

    /// The content words, in query order, each once.
    pub fn terms(&self) -> &[String] {
        &self.terms
    }

    /// The time windows of the dates the query names, in query order.
    pub fn dates(&self) -> &[DateWindow] {
        &self.dates
    }

    /// Whether there is nothing to search the text for.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The SQLite FTS5 query: every term as a quoted string, joined by `OR` (`None` when there
    /// are no terms). Terms are runs of letters and digits, and quotes are doubled anyway, so
    /// no query text can become FTS5 syntax.
    pub fn fts_query(&self) -> Option<String> {
        QueryPlan::fts_query_of(&self.terms)
    }

    /// The FTS5 query of any terms, as [`QueryPlan::fts_query`] writes it.
    pub fn fts_query_of(terms: &[impl AsRef<str>]) -> Option<String> {
        if terms.is_empty() {
            return None;
        }
        let quoted: Vec<String> = terms
            .iter()
            .map(|term| format!("\"{}\"", term.as_ref().replace('"', "\"\"")))
            .collect();
        Some(quoted.join(" OR "))
    }
}

const MONTH: &str = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)";

fn regex(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

/// `8 May, 2023`, `8th of May 2023`.
static DAY_MONTH_YEAR: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(&format!(
        r"(?i)\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{MONTH}\.?,?\s+(\d{{4}})\b"
    ))
});
/// `May 8, 2023`, `May 8th 2023`.
static MONTH_DAY_YEAR: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(&format!(
        r"(?i)\b{MONTH}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b"
    ))
});
/// `2023-05-08`.
static ISO_DATE: LazyLock<Option<Regex>> = LazyLock::new(|| regex(r"\b(\d{4})-(\d{2})-(\d{2})\b"));
/// `May 2023`, `May, 2023`.
static MONTH_YEAR: LazyLock<Option<Regex>> =
    LazyLock::new(|| regex(&format!(r"(?i)\b{MONTH}\.?,?\s+(\d{{4}})\b")));
/// `2023` (from 1900 to 2099).
static YEAR: LazyLock<Option<Regex>> = LazyLock::new(|| regex(r"\b((?:19|20)\d\d)\b"));

fn month_number(name: &str) -> Option<u32> {
    let prefix: String = name.chars().take(3).collect::<String>().to_lowercase();
    let months = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    months
        .iter()
        .position(|month| *month == prefix)
        .and_then(|index| u32::try_from(index + 1).ok())
}

fn millis(date: NaiveDate) -> Option<i64> {
    date.and_hms_opt(0, 0, 0)
        .map(|time| time.and_utc().timestamp_millis())
}

/// The window of the days `[first, last]`, extended by [`DATE_WINDOW_TRAILING_DAYS`].
fn window(first: NaiveDate, last: NaiveDate) -> Option<DateWindow> {
    let end = last.checked_add_signed(TimeDelta::days(1 + DATE_WINDOW_TRAILING_DAYS))?;
    Some(DateWindow {
        start_ms: millis(first)?,
        end_ms: millis(end)?,
    })
}

fn day_window(year: &str, month: u32, day: &str) -> Option<DateWindow> {
    let date = NaiveDate::from_ymd_opt(year.parse().ok()?, month, day.parse().ok()?)?;
    window(date, date)
}

fn month_window(year: &str, month: u32) -> Option<DateWindow> {
    let first = NaiveDate::from_ymd_opt(year.parse().ok()?, month, 1)?;
    let last = first.checked_add_months(Months::new(1))?.pred_opt()?;
    window(first, last)
}

fn year_window(year: &str) -> Option<DateWindow> {
    let first = NaiveDate::from_ymd_opt(year.parse().ok()?, 1, 1)?;
    let last = NaiveDate::from_ymd_opt(first.year(), 12, 31)?;
    window(first, last)
}

/// The dates `text` names, most specific patterns first, and the text with each recognised
/// expression blanked out (so a day's year is not also read as a year of its own).
fn extract_dates(text: &str) -> (Vec<DateWindow>, String) {
    let mut rest = text.to_owned();
    let mut found: Vec<(usize, DateWindow)> = Vec::new();
    let mut take = |pattern: &Option<Regex>,
                    read: &dyn Fn(&regex::Captures<'_>) -> Option<DateWindow>| {
        let Some(pattern) = pattern else {
            return;
        };
        let mut spans = Vec::new();
        for captures in pattern.captures_iter(&rest) {
            let Some(whole) = captures.get(0) else {
                continue;
            };
            if let Some(window) = read(&captures) {
                found.push((whole.start(), window));
                spans.push(whole.range());
            }
        }
        for span in spans {
            if let Some(slice) = rest.get(span.clone()) {
                let blank = " ".repeat(slice.len());
                rest.replace_range(span, &blank);
            }
        }
    };
    let text_of = |captures: &regex::Captures<'_>, group: usize| {
        captures
            .get(group)
            .map(|m| m.as_str().to_owned())
            .unwrap_or_default()
    };
    take(&DAY_MONTH_YEAR, &|c| {
        day_window(
            &text_of(c, 3),
            month_number(&text_of(c, 2))?,
            &text_of(c, 1),
        )
    });
    take(&MONTH_DAY_YEAR, &|c| {
        day_window(
            &text_of(c, 3),
            month_number(&text_of(c, 1))?,
            &text_of(c, 2),
        )
    });
    take(&ISO_DATE, &|c| {
        day_window(&text_of(c, 1), text_of(c, 2).parse().ok()?, &text_of(c, 3))
    });
    take(&MONTH_YEAR, &|c| {
        month_window(&text_of(c, 2), month_number(&text_of(c, 1))?)
    });
    take(&YEAR, &|c| year_window(&text_of(c, 1)));
    found.sort_by_key(|(start, _)| *start);
    let mut dates: Vec<DateWindow> = Vec::new();
    for (_, window) in found {
        if !dates.contains(&window) {
            dates.push(window);
        }
    }
    (dates, rest)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn day(y: i32, m: u32, d: u32) -> i64 {
        millis(NaiveDate::from_ymd_opt(y, m, d).unwrap()).unwrap()
    }

    #[test]
    fn stopwords_are_sorted_for_binary_search() {
        let mut sorted = STOPWORDS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, STOPWORDS);
        assert!(is_stopword("the") && is_stopword("what") && !is_stopword("paint"));
    }

    #[test]
    fn content_words_once_in_order() {
        let plan = QueryPlan::new("What did Caroline's friends think of Caroline's painting?");
        assert_eq!(plan.terms(), ["caroline", "friends", "think", "painting"]);
        assert_eq!(
            plan.fts_query().unwrap(),
            r#""caroline" OR "friends" OR "think" OR "painting""#
        );
        assert!(plan.dates().is_empty());
    }

    #[test]
    fn all_stopwords_fall_back_to_every_word() {
        assert_eq!(QueryPlan::new("Who is she?").terms(), ["who", "is", "she"]);
        let empty = QueryPlan::new("  ?! ");
        assert!(empty.is_empty());
        assert_eq!(empty.fts_query(), None);
    }

    #[test]
    fn query_syntax_is_never_passed_through() {
        let plan = QueryPlan::new(r#"foo" OR bar* NEAR(x) -- ; DROP TABLE memories"#);
        let query = plan.fts_query().unwrap();
        assert_eq!(
            query,
            r#""foo" OR "bar" OR "near" OR "x" OR "drop" OR "table" OR "memories""#
        );
    }

    #[test]
    fn dates_become_windows_and_leave_the_terms() {
        let plan = QueryPlan::new("What did Gina find for her store on 1 February, 2023?");
        assert_eq!(plan.terms(), ["gina", "find", "store"]);
        assert_eq!(
            plan.dates(),
            [DateWindow {
                start_ms: day(2023, 2, 1),
                end_ms: day(2023, 2, 12)
            }]
        );
        let plan = QueryPlan::new("Andrew hiked on the Monday before July 24, 2023");
        assert_eq!(plan.dates()[0].start_ms, day(2023, 7, 24));
        let plan = QueryPlan::new("workouts in December 2023 and 2022-03-05");
        assert_eq!(plan.dates().len(), 2);
        assert_eq!(plan.dates()[0].start_ms, day(2023, 12, 1));
        assert_eq!(plan.dates()[0].end_ms, day(2024, 1, 11));
        assert_eq!(plan.dates()[1].start_ms, day(2022, 3, 5));
        assert_eq!(plan.terms(), ["workouts"]);
        let plan = QueryPlan::new("beach trips in 2023");
        assert_eq!(plan.dates()[0].start_ms, day(2023, 1, 1));
        assert_eq!(plan.dates()[0].end_ms, day(2024, 1, 11));
    }

    #[test]
    fn impossible_dates_are_ignored() {
        // No such day: the month it names is still a window.
        let plan = QueryPlan::new("on 31 February, 2023 and in may");
        assert_eq!(plan.dates(), [month_window("2023", 2).unwrap()]);
        assert_eq!(plan.dates()[0].start_ms, day(2023, 2, 1));
        assert!(QueryPlan::new("I may go").dates().is_empty());
    }
}
