//! SQLite FTS5's full-text index, rebuilt on PostgreSQL: the same tokens and the same BM25, so
//! the PostgreSQL store ranks exactly as the SQLite one.
//!
//! - **Tokens.** A document's columns (tenant token, path words, given L0, given L1, L2) are
//!   tokenized by FTS5 itself — `porter unicode61 remove_diacritics 2`, the SQLite store's
//!   tokenizer — in an in-memory SQLite database per thread, read back through `fts5vocab`'s
//!   `instance` table. A query term is tokenized the same way (into the phrase FTS5 would make
//!   of the quoted term). No second tokenizer could agree with FTS5 on every stem and every
//!   Unicode category; this one is FTS5.
//! - **BM25.** [`bm25`] is `fts5Bm25Function` (SQLite's `fts5_aux.c`) step by step: the phrase
//!   frequencies summed weight by weight in column order, the row's token count, the
//!   index-wide average, `log((N - n + 0.5) / (n + 0.5))` clamped to 1e-6, k1 = 1.2, b = 0.75,
//!   the score negated. The same operations in the same order give the same doubles. N and the
//!   average row length are FTS5's own totals, which count every row ever indexed (a
//!   contentless-delete index does not take a removed row out of them); the n of a term counts
//!   live rows only.

use std::cell::RefCell;
use std::collections::BTreeMap;

use rusqlite::Connection;

use crate::memories::MemoryError;

/// The indexed columns, in FTS5's order: 0 tenant token, 1 path, 2 L0, 3 L1, 4 L2.
pub(super) const COLUMNS: usize = 5;

/// A document's postings: for each (term, column), the token offsets in that column.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Postings {
    pub(crate) terms: BTreeMap<(String, i16), Vec<i32>>,
    /// Tokens in the whole row (FTS5's `xColumnSize(-1)`).
    pub(crate) tokens: i64,
}

thread_local! {
    static TOKENIZER: RefCell<Option<Connection>> = const { RefCell::new(None) };
}

fn tokenizer_error(error: rusqlite::Error) -> MemoryError {
    MemoryError::backend(
        "tokenizing for the full-text index",
        crate::sqlite::backend_error(error),
    )
}

/// Runs `work` on this thread's tokenizer database, opening it on first use.
fn with_tokenizer<T>(
    work: impl FnOnce(&Connection) -> Result<T, rusqlite::Error>,
) -> Result<T, MemoryError> {
    TOKENIZER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let conn = Connection::open_in_memory().map_err(tokenizer_error)?;
            conn.execute_batch(
                "CREATE VIRTUAL TABLE doc USING fts5(tenant, path, l0, l1, l2, \
                     tokenize = 'porter unicode61 remove_diacritics 2'); \
                 CREATE VIRTUAL TABLE doc_instances USING fts5vocab(doc, instance);",
            )
            .map_err(tokenizer_error)?;
            *slot = Some(conn);
        }
        match slot.as_ref() {
            Some(conn) => work(conn).map_err(tokenizer_error),
            None => Err(MemoryError::Corrupt("the tokenizer did not open".into())),
        }
    })
}

fn column_index(name: &str) -> Option<i16> {
    match name {
        "tenant" => Some(0),
        "path" => Some(1),
        "l0" => Some(2),
        "l1" => Some(3),
        "l2" => Some(4),
        _ => None,
    }
}

/// The postings of a document with these column texts, as FTS5 indexes it.
pub(crate) fn postings(columns: [&str; COLUMNS]) -> Result<Postings, MemoryError> {
    with_tokenizer(|conn| {
        conn.execute(
            "INSERT INTO doc (rowid, tenant, path, l0, l1, l2) VALUES (1, ?1, ?2, ?3, ?4, ?5)",
            columns,
        )?;
        let mut postings = Postings::default();
        {
            let mut statement = conn.prepare_cached(
                "SELECT term, col, offset FROM doc_instances ORDER BY col, offset",
            )?;
            let mut rows = statement.query([])?;
            while let Some(row) = rows.next()? {
                let term: String = row.get(0)?;
                let col: String = row.get(1)?;
                let offset: i32 = row.get(2)?;
                let Some(col) = column_index(&col) else {
                    continue;
                };
                postings.terms.entry((term, col)).or_default().push(offset);
                postings.tokens += 1;
            }
        }
        conn.execute("DELETE FROM doc", [])?;
        Ok(postings)
    })
}

/// The tokens FTS5 makes of a quoted query term: the phrase it matches (empty: it matches
/// nothing).
pub(super) fn phrase(term: &str) -> Result<Vec<String>, MemoryError> {
    let postings = postings(["", "", "", "", term])?;
    let mut by_offset: Vec<(i32, String)> = postings
        .terms
        .into_iter()
        .flat_map(|((term, _), offsets)| offsets.into_iter().map(move |at| (at, term.clone())))
        .collect();
    by_offset.sort();
    Ok(by_offset.into_iter().map(|(_, term)| term).collect())
}

/// Positions as stored: comma-separated offsets.
pub(super) fn encode_positions(offsets: &[i32]) -> String {
    offsets
        .iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

pub(super) fn decode_positions(text: &str) -> Result<Vec<i32>, MemoryError> {
    text.split(',')
        .filter(|part| !part.is_empty())
        .map(|part| {
            part.parse()
                .map_err(|_| MemoryError::Corrupt(format!("stored term positions {text:?}")))
        })
        .collect()
}

/// How many times `phrase` occurs in column `col` of a document whose postings for the
/// phrase's tokens are `offsets(token, col)`.
pub(super) fn occurrences<'a>(
    phrase: &[String],
    col: i16,
    offsets: &impl Fn(&str, i16) -> Option<&'a [i32]>,
) -> usize {
    let Some((first, rest)) = phrase.split_first() else {
        return 0;
    };
    let Some(starts) = offsets(first, col) else {
        return 0;
    };
    if rest.is_empty() {
        return starts.len();
    }
    starts
        .iter()
        .filter(|start| {
            rest.iter().zip(1..).all(|(token, step)| {
                offsets(token, col).is_some_and(|at| at.binary_search(&(**start + step)).is_ok())
            })
        })
        .count()
}

/// FTS5's IDF of a phrase found in `hits` of `rows` documents.
pub(super) fn idf(rows: i64, hits: i64) -> f64 {
    let idf = (((rows - hits) as f64 + 0.5) / (hits as f64 + 0.5)).ln();
    if idf <= 0.0 { 1e-6 } else { idf }
}

/// FTS5's `bm25()` of a row: `frequencies[i]` are phrase i's occurrences per column, `idfs[i]`
/// its IDF, `tokens` the row's token count, `avgdl` the index's average. Negative, lower is
/// better, as FTS5 returns it.
pub(super) fn bm25(
    frequencies: &[[usize; COLUMNS]],
    idfs: &[f64],
    weights: &[f64; COLUMNS],
    tokens: i64,
    avgdl: f64,
) -> f64 {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let d = tokens as f64;
    let mut score = 0.0;
    for (counts, idf) in frequencies.iter().zip(idfs) {
        // FTS5 adds the column weight once per instance, instances in column order.
        let mut frequency = 0.0;
        for (count, weight) in counts.iter().zip(weights) {
            for _ in 0..*count {
                frequency += weight;
            }
        }
        score += idf * ((frequency * (K1 + 1.0)) / (frequency + K1 * (1.0 - B + B * d / avgdl)));
    }
    // FTS5 returns `-1.0 * score`: the same double.
    -score
}

/// FTS5's averages record (the `_data` row with id 1): rows ever indexed, then the token total
/// of each column, as SQLite varints. Returns (rows, tokens of every column together).
pub(crate) fn parse_averages(record: &[u8]) -> Option<(i64, i64)> {
    let mut at = 0;
    let mut next = || -> Option<u64> {
        let mut value: u64 = 0;
        for index in 0..9 {
            let byte = *record.get(at)?;
            at += 1;
            if index == 8 {
                return Some((value << 8) | u64::from(byte));
            }
            value = (value << 7) | u64::from(byte & 0x7f);
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        Some(value)
    };
    let rows = next()?;
    let mut tokens: u64 = 0;
    while let Some(column) = next() {
        tokens = tokens.saturating_add(column);
    }
    Some((i64::try_from(rows).ok()?, i64::try_from(tokens).ok()?))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn terms_are_stemmed_and_folded_as_fts5_does() {
        assert_eq!(phrase("Running").unwrap(), ["run"]);
        assert_eq!(phrase("café").unwrap(), ["cafe"]);
        let postings = postings(["tabc", "alice", "", "", "Alice ran; alice runs"]).unwrap();
        assert_eq!(postings.tokens, 6);
        assert_eq!(
            postings
                .terms
                .get(&("alic".to_owned(), 4))
                .map(Vec::as_slice),
            Some(&[0, 2][..])
        );
    }

    #[test]
    fn fts5_averages_read_as_sqlite_writes_them() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE f USING fts5(a, b, content = '', contentless_delete = 1); \
             INSERT INTO f (rowid, a, b) VALUES (1, 'one two', 'three'), (2, 'four', ''); \
             DELETE FROM f WHERE rowid = 1;",
        )
        .unwrap();
        let record: Vec<u8> = conn
            .query_row("SELECT block FROM f_data WHERE id = 1", [], |row| {
                row.get(0)
            })
            .unwrap();
        // Rows ever indexed, and their tokens: the removed row stays in both.
        assert_eq!(parse_averages(&record), Some((2, 4)));
    }

    #[test]
    fn a_phrase_counts_only_adjacent_tokens() {
        let offsets = |token: &str, _col: i16| -> Option<&'static [i32]> {
            match token {
                "a" => Some(&[0, 5, 9]),
                "b" => Some(&[1, 7]),
                _ => None,
            }
        };
        assert_eq!(occurrences(&["a".into(), "b".into()], 4, &offsets), 1);
        assert_eq!(occurrences(&["a".into()], 4, &offsets), 3);
        assert_eq!(occurrences(&[], 4, &offsets), 0);
    }
}
