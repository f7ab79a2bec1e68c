//! Fusion of several rankings of the same items into one.
//!
//! - Reciprocal rank fusion ([`reciprocal_rank_fusion`]): rankings (full-text, vectors, a date
//!   window…) merged by `Σ weight / (k + rank)`, ranks counted from 1. It needs no score
//!   calibration between rankers (Cormack et al., 2009; k = 60), but it keeps only the order:
//!   a first hit far ahead of the second counts as much as one barely ahead.
//! - Min-max score fusion ([`min_max_score_fusion`]): scored lists (BM25, cosine similarity)
//!   each mapped to [0, 1] by their own best and worst score in this query, then combined
//!   convexly, so how far ahead a hit is in one list counts.

use std::collections::HashMap;
use std::hash::Hash;

/// The `k` of reciprocal rank fusion: large enough that the first few ranks of one list do not
/// drown every other list.
pub const RRF_K: f64 = 60.0;

/// One ranking to fuse: its items best first, and how much it counts.
#[derive(Debug, Clone, Copy)]
pub struct RankedList<'a, T> {
    /// How much the list counts in the fused score.
    pub weight: f64,
    /// The items, best first.
    pub items: &'a [T],
}

impl<'a, T> RankedList<'a, T> {
    /// A list of weight 1.
    pub fn new(items: &'a [T]) -> RankedList<'a, T> {
        RankedList { weight: 1.0, items }
    }
}

/// An item of the fused ranking.
#[derive(Debug, Clone, PartialEq)]
pub struct Fused<T> {
    /// The item, as the input lists hold it.
    pub item: T,
    /// `Σ weight / (k + rank)` over the lists that hold the item.
    pub score: f64,
    /// The item's 0-based rank in each input list, in input order (`None`: not in that list).
    pub ranks: Vec<Option<usize>>,
}

/// Fuses `lists` with constant `k`. Best first; ties go to the item with the better best rank,
/// then to the one that appears first (earlier list, then earlier rank), so the order is
/// deterministic. An item listed twice in one list counts at its first rank only.
pub fn reciprocal_rank_fusion<T: Clone + Eq + Hash>(
    lists: &[RankedList<'_, T>],
    k: f64,
) -> Vec<Fused<T>> {
    let mut index: HashMap<&T, usize> = HashMap::new();
    let mut fused: Vec<(Fused<T>, usize)> = Vec::new();
    for (list_index, list) in lists.iter().enumerate() {
        for (rank, item) in list.items.iter().enumerate() {
            let slot = *index.entry(item).or_insert_with(|| {
                fused.push((
                    Fused {
                        item: item.clone(),
                        score: 0.0,
                        ranks: vec![None; lists.len()],
                    },
                    usize::MAX,
                ));
                fused.len() - 1
            });
            let Some((entry, best)) = fused.get_mut(slot) else {
                continue;
            };
            let Some(seen) = entry.ranks.get_mut(list_index) else {
                continue;
            };
            if seen.is_some() {
                continue;
            }
            *seen = Some(rank);
            entry.score += list.weight / (k + rank as f64 + 1.0);
            *best = (*best).min(rank);
        }
    }
    // Slots are in order of first appearance, so a stable sort keeps that as the last tie-break.
    fused.sort_by(|(a, best_a), (b, best_b)| b.score.total_cmp(&a.score).then(best_a.cmp(best_b)));
    fused.into_iter().map(|(entry, _)| entry).collect()
}

/// One scored list to fuse: its items with their scores (higher is better, any order), and how
/// much it counts.
#[derive(Debug, Clone, Copy)]
pub struct ScoredList<'a, T> {
    /// How much the list counts in the fused score.
    pub weight: f64,
    /// The items with their scores, in any order.
    pub items: &'a [(T, f64)],
}

/// Fuses scored lists by their min-max normalised scores: in each list an item's score becomes
/// `(score - worst) / (best - worst)` (1 for every item when all scores are equal), and its fused
/// score is `Σ weight × normalised score` over the lists that hold it; a list without the item
/// adds nothing, as if the item were that list's worst. With weights summing to 1 this is a
/// convex combination. Non-finite scores are ignored.
///
/// Best first; ties go to the item that appears first (earlier list, then earlier position).
/// [`Fused::ranks`] holds each item's 0-based rank by score in each list. An item listed twice
/// in one list counts at its best score.
pub fn min_max_score_fusion<T: Clone + Eq + Hash>(lists: &[ScoredList<'_, T>]) -> Vec<Fused<T>> {
    let mut index: HashMap<&T, usize> = HashMap::new();
    let mut fused: Vec<Fused<T>> = Vec::new();
    for (list_index, list) in lists.iter().enumerate() {
        let mut best: HashMap<&T, f64> = HashMap::new();
        let mut order: Vec<&T> = Vec::new();
        for (item, score) in list.items {
            if !score.is_finite() {
                continue;
            }
            match best.get_mut(item) {
                Some(seen) => *seen = seen.max(*score),
                None => {
                    best.insert(item, *score);
                    order.push(item);
                }
            }
        }
        let (low, high) = best
            .values()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), score| {
                (low.min(*score), high.max(*score))
            });
        let span = high - low;
        // Stable: equal scores keep the list's order.
        let mut ranked: Vec<(&T, f64)> = order
            .iter()
            .map(|item| (*item, best.get(item).copied().unwrap_or(low)))
            .collect();
        ranked.sort_by(|(_, a), (_, b)| b.total_cmp(a));
        for (rank, (item, score)) in ranked.into_iter().enumerate() {
            let slot = *index.entry(item).or_insert_with(|| {
                fused.push(Fused {
                    item: item.clone(),
                    score: 0.0,
                    ranks: vec![None; lists.len()],
                });
                fused.len() - 1
            });
            let Some(entry) = fused.get_mut(slot) else {
                continue;
            };
            if let Some(seen) = entry.ranks.get_mut(list_index) {
                *seen = Some(rank);
            }
            let normalised = if span > 0.0 {
                (score - low) / span
            } else {
                1.0
            };
            entry.score += list.weight * normalised;
        }
    }
    // Slots are in order of first appearance, so a stable sort keeps that as the tie-break.
    fused.sort_by(|a, b| b.score.total_cmp(&a.score));
    fused
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn order<'a>(fused: &[Fused<&'a str>]) -> Vec<&'a str> {
        fused.iter().map(|f| f.item).collect()
    }

    #[test]
    fn an_item_high_in_both_lists_wins() {
        let text = ["a", "b", "c"];
        let vector = ["c", "b", "d"];
        let fused =
            reciprocal_rank_fusion(&[RankedList::new(&text), RankedList::new(&vector)], RRF_K);
        // b: 1/62 + 1/62; a: 1/61; c: 1/63 + 1/61; d: 1/63.
        assert_eq!(order(&fused), ["c", "b", "a", "d"]);
        let c = &fused[0];
        assert_eq!(c.ranks, [Some(2), Some(0)]);
        assert!((c.score - (1.0 / 63.0 + 1.0 / 61.0)).abs() < 1e-12);
    }

    #[test]
    fn ties_are_broken_by_best_rank_then_first_appearance() {
        let first = ["a", "b"];
        let second = ["b", "a"];
        let fused =
            reciprocal_rank_fusion(&[RankedList::new(&first), RankedList::new(&second)], RRF_K);
        assert_eq!(order(&fused), ["a", "b"]);
    }

    #[test]
    fn weights_and_duplicates() {
        let text = ["a", "b", "a"];
        let dates = ["b"];
        let lists = [
            RankedList::new(&text[..]),
            RankedList {
                weight: 2.0,
                items: &dates[..],
            },
        ];
        let fused = reciprocal_rank_fusion(&lists, RRF_K);
        assert_eq!(order(&fused), ["b", "a"]);
        assert_eq!(fused[1].ranks, [Some(0), None]);
        assert!(reciprocal_rank_fusion::<&str>(&[], RRF_K).is_empty());
    }

    #[test]
    fn min_max_scores_are_combined_convexly() {
        let text = [("a", 10.0), ("b", 6.0), ("c", 2.0)];
        let vector = [("c", 0.8), ("b", 0.7), ("d", 0.4)];
        let fused = min_max_score_fusion(&[
            ScoredList {
                weight: 0.6,
                items: &text,
            },
            ScoredList {
                weight: 0.4,
                items: &vector,
            },
        ]);
        // a: 0.6; b: 0.6 × 0.5 + 0.4 × 0.75 = 0.6; c: 0.4; d: 0. a and b tie: a appeared first.
        assert_eq!(order(&fused), ["a", "b", "c", "d"]);
        assert!((fused[1].score - 0.6).abs() < 1e-12);
        assert_eq!(fused[1].ranks, [Some(1), Some(1)]);
        assert_eq!(fused[2].ranks, [Some(2), Some(0)]);
        assert_eq!(fused[3].ranks, [None, Some(2)]);
    }

    #[test]
    fn score_fusion_ranks_a_strong_vector_hit_above_reciprocal_rank_fusion_choice() {
        // The text ranking barely prefers "text-first" over "vector-first"; the vector ranking
        // puts "vector-first" far ahead of everything else. Rank fusion sees two lists that each
        // put one of them first and the other second, and lets the heavier text list decide;
        // score fusion sees that the vector margin is large and the text margin small.
        let text = [("text-first", 10.0), ("vector-first", 9.8), ("other", 1.0)];
        let vector = [("vector-first", 0.9), ("text-first", 0.3), ("other", 0.2)];
        let text_ids: Vec<&str> = text.iter().map(|(id, _)| *id).collect();
        let vector_ids: Vec<&str> = vector.iter().map(|(id, _)| *id).collect();
        let by_rank = reciprocal_rank_fusion(
            &[
                RankedList::new(&text_ids),
                RankedList {
                    weight: 0.5,
                    items: &vector_ids,
                },
            ],
            RRF_K,
        );
        assert_eq!(by_rank[0].item, "text-first");
        let by_score = min_max_score_fusion(&[
            ScoredList {
                weight: 0.6,
                items: &text,
            },
            ScoredList {
                weight: 0.4,
                items: &vector,
            },
        ]);
        assert_eq!(order(&by_score), ["vector-first", "text-first", "other"]);
    }

    #[test]
    fn score_fusion_edge_cases() {
        // Equal scores all normalise to 1; non-finite scores are skipped; a duplicate counts at
        // its best score; nothing in, nothing out.
        let flat = [("a", 2.0), ("b", 2.0), ("c", f64::NAN), ("a", 1.0)];
        let fused = min_max_score_fusion(&[ScoredList {
            weight: 1.0,
            items: &flat,
        }]);
        assert_eq!(order(&fused), ["a", "b"]);
        assert!(fused.iter().all(|entry| (entry.score - 1.0).abs() < 1e-12));
        assert!(min_max_score_fusion::<&str>(&[]).is_empty());
    }
}
