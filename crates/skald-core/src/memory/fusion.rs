//! Reciprocal rank fusion: several rankings of the same items (full-text, vectors, a date
//! window…) merged into one by `Σ weight / (k + rank)`, ranks counted from 1. It needs no score
//! calibration between rankers, which is why hybrid search uses it (Cormack et al., 2009; k = 60).

use std::collections::HashMap;
use std::hash::Hash;

/// The `k` of reciprocal rank fusion: large enough that the first few ranks of one list do not
/// drown every other list.
pub const RRF_K: f64 = 60.0;

/// One ranking to fuse: its items best first, and how much it counts.
#[derive(Debug, Clone, Copy)]
pub struct RankedList<'a, T> {
    pub weight: f64,
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
}
