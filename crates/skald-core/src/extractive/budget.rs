//! Fitting the five sections into `max_chars` and writing them out.
//!
//! Every section first holds a `- (none)` line's worth of room. Must-keep identifiers are
//! reserved next. What is left is shared by weight among the sections that have more to say
//! (water-filling: a section that needs less than its share gives the rest back). Each text
//! section then takes its best items in score order, cutting at most one item (at a word end,
//! never inside an identifier) when a useful part of it fits; identifiers take what the text
//! sections left, skipping any already shown verbatim; a last pass gives what identifiers did
//! not use back to the text sections. Within a section items are written in presentation order
//! (older first), identifiers by rank.

use std::collections::HashSet;

use crate::identifiers::mentions_identifier;
use crate::summary::REQUIRED_SECTIONS;

use super::ids::IdCandidate;
use super::text::{cut_to_chars, fold_key};
use super::{Body, Candidate, NONE_ITEM};

/// `"\n- "` before each item.
const ITEM_OVERHEAD: usize = 3;
/// `"\n- (none)"`.
const NONE_COST: usize = ITEM_OVERHEAD + NONE_ITEM.len();
/// `"\n\n"` between sections.
const SEPARATOR: &str = "\n\n";
/// A cut item must keep at least this many characters to be worth its line.
const MIN_CUT_CHARS: usize = 40;
/// Containment counts as duplication only for keys at least this long.
const MIN_CONTAINED_KEY: usize = 12;
/// Rounds of "drop identifiers a longer one shows, refill".
const COVERAGE_ROUNDS: usize = 3;

/// A text candidate ready to place: its full text (already cut to the item limit) and key.
struct Prepared {
    body: Body,
    key: String,
    score: i64,
    order: (u32, u64),
}

/// One placed item.
struct Placed {
    text: String,
    order: (u32, u64),
    rank: usize,
}

/// A text section being filled.
#[derive(Default)]
struct SectionFill {
    prepared: Vec<Prepared>,
    taken: Vec<bool>,
    placed: Vec<Placed>,
    placed_keys: Vec<String>,
    used: usize,
    full: bool,
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

fn list_text(label: &str, entries: &[String], omitted: bool) -> String {
    let mut text = label.to_owned();
    if !label.ends_with('：') {
        text.push(' ');
    }
    if omitted {
        text.push_str("…, ");
    }
    text.push_str(&entries.join(", "));
    text
}

impl Body {
    fn full_text(&self) -> String {
        match self {
            Body::Text(text) => text.clone(),
            Body::List { label, entries } => list_text(label, entries, false),
        }
    }

    /// The item's text in at most `room` characters (its line overhead included), and whether
    /// it had to be shortened.
    fn fit(&self, room: usize) -> Option<(String, bool)> {
        let room = room.checked_sub(ITEM_OVERHEAD)?;
        match self {
            Body::Text(text) => {
                if chars(text) <= room {
                    return Some((text.clone(), false));
                }
                if room < MIN_CUT_CHARS {
                    return None;
                }
                cut_to_chars(text, room).map(|cut| (cut, true))
            }
            Body::List { label, entries } => {
                // Entries are oldest first; a shortened list keeps the newest.
                (0..entries.len()).find_map(|skip| {
                    let text = list_text(label, entries.get(skip..).unwrap_or_default(), skip > 0);
                    (chars(&text) <= room).then_some((text, skip > 0))
                })
            }
        }
    }
}

impl SectionFill {
    fn new(candidates: Vec<Candidate>, max_item_chars: usize) -> SectionFill {
        let mut prepared: Vec<Prepared> = candidates
            .into_iter()
            .filter_map(|candidate| {
                let body = match candidate.body {
                    Body::Text(text) => Body::Text(cut_to_chars(&text, max_item_chars)?),
                    list @ Body::List { .. } => list,
                };
                let key = fold_key(&body.full_text());
                (!key.is_empty()).then_some(Prepared {
                    body,
                    key,
                    score: candidate.score,
                    order: candidate.order,
                })
            })
            .collect();
        // Best first; among equals the newer, then the earlier found.
        prepared.sort_by(|a, b| b.score.cmp(&a.score).then(b.order.cmp(&a.order)));
        let mut seen: HashSet<&str> = HashSet::new();
        let unique: Vec<bool> = prepared
            .iter()
            .map(|item| seen.insert(item.key.as_str()))
            .collect();
        let mut flags = unique.into_iter();
        prepared.retain(|_| flags.next().unwrap_or(false));
        let taken = vec![false; prepared.len()];
        SectionFill {
            prepared,
            taken,
            ..SectionFill::default()
        }
    }

    /// The room every item would take.
    fn need(&self) -> usize {
        let items: usize = self
            .prepared
            .iter()
            .map(|item| chars(&item.body.full_text()) + ITEM_OVERHEAD)
            .sum();
        items.max(NONE_COST)
    }

    fn duplicates(&self, key: &str) -> bool {
        self.placed_keys.iter().any(|placed| {
            placed == key
                || (key.len() >= MIN_CONTAINED_KEY && placed.contains(key))
                || (placed.len() >= MIN_CONTAINED_KEY && key.contains(placed.as_str()))
        })
    }

    /// Places the best items that fit until `budget` is used.
    fn fill(&mut self, budget: usize) {
        for index in 0..self.prepared.len() {
            if self.full {
                return;
            }
            let room = budget.saturating_sub(self.used);
            if room <= ITEM_OVERHEAD {
                return;
            }
            if self.taken.get(index).copied().unwrap_or(true) {
                continue;
            }
            let Some(item) = self.prepared.get(index) else {
                continue;
            };
            if self.duplicates(&item.key) {
                if let Some(flag) = self.taken.get_mut(index) {
                    *flag = true;
                }
                continue;
            }
            let Some((text, shortened)) = item.body.fit(room) else {
                continue;
            };
            self.used += chars(&text) + ITEM_OVERHEAD;
            self.placed_keys.push(item.key.clone());
            self.placed.push(Placed {
                text,
                order: item.order,
                rank: index,
            });
            if let Some(flag) = self.taken.get_mut(index) {
                *flag = true;
            }
            self.full = shortened;
        }
    }

    /// Room the section takes in the output.
    fn room(&self) -> usize {
        self.used.max(NONE_COST)
    }

    fn lines(mut self) -> Vec<String> {
        self.placed
            .sort_by(|a, b| a.order.cmp(&b.order).then(a.rank.cmp(&b.rank)));
        self.placed.into_iter().map(|placed| placed.text).collect()
    }
}

/// Identifiers being placed.
struct IdFill {
    candidates: Vec<IdCandidate>,
    placed: Vec<usize>,
    used: usize,
}

impl IdFill {
    fn cost(candidate: &IdCandidate) -> usize {
        chars(&candidate.display) + ITEM_OVERHEAD
    }

    fn shown(&self, text: &str, candidate: &IdCandidate) -> bool {
        mentions_identifier(text, &candidate.seed) || mentions_identifier(text, &candidate.display)
    }

    /// Places must-keep identifiers that fit in `budget`.
    fn place_must_keep(&mut self, budget: usize) {
        for index in 0..self.candidates.len() {
            let Some(candidate) = self.candidates.get(index) else {
                continue;
            };
            if !candidate.must_keep {
                break;
            }
            let cost = IdFill::cost(candidate);
            if self.used + cost <= budget {
                self.used += cost;
                self.placed.push(index);
            }
        }
    }

    fn placed_text(&self) -> String {
        self.placed
            .iter()
            .filter_map(|index| self.candidates.get(*index))
            .map(|candidate| candidate.display.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Places the best extracted identifiers not shown by placed ones. When not all of them
    /// fit, those the text sections (`context`) already show verbatim are left out too.
    fn fill(&mut self, budget: usize, context: &str, max_item_chars: usize) {
        let (placed, used) = (self.placed.clone(), self.used);
        self.fill_skipping(budget, "", max_item_chars);
        let shown_text = self.placed_text();
        let left_out = self
            .candidates
            .iter()
            .enumerate()
            .any(|(index, candidate)| {
                !self.placed.contains(&index)
                    && !candidate.must_keep
                    && chars(&candidate.display) <= max_item_chars
                    && !self.shown(&shown_text, candidate)
            });
        if left_out {
            self.placed = placed;
            self.used = used;
            self.fill_skipping(budget, context, max_item_chars);
        }
    }

    fn fill_skipping(&mut self, budget: usize, context: &str, max_item_chars: usize) {
        for _ in 0..COVERAGE_ROUNDS {
            let mut shown_text = self.placed_text();
            let mut added = false;
            for index in 0..self.candidates.len() {
                if budget.saturating_sub(self.used) <= ITEM_OVERHEAD {
                    break;
                }
                if self.placed.contains(&index) {
                    continue;
                }
                let Some(candidate) = self.candidates.get(index) else {
                    continue;
                };
                let cost = IdFill::cost(candidate);
                if candidate.must_keep
                    || chars(&candidate.display) > max_item_chars
                    || self.used + cost > budget
                    || self.shown(context, candidate)
                    || self.shown(&shown_text, candidate)
                {
                    continue;
                }
                self.used += cost;
                self.placed.push(index);
                shown_text.push('\n');
                shown_text.push_str(&candidate.display);
                added = true;
            }
            if !added || !self.drop_covered() {
                return;
            }
        }
    }

    /// Drops placed extracted identifiers another placed one shows; true if any went.
    fn drop_covered(&mut self) -> bool {
        let before = self.placed.len();
        let placed = self.placed.clone();
        let mut keep = Vec::with_capacity(placed.len());
        for &index in &placed {
            let Some(candidate) = self.candidates.get(index) else {
                continue;
            };
            let covered = !candidate.must_keep
                && placed.iter().any(|&other| {
                    other != index
                        && self.candidates.get(other).is_some_and(|other| {
                            other.display != candidate.display
                                && other.display.len() > candidate.display.len()
                                && self.shown(&other.display, candidate)
                        })
                });
            if covered {
                self.used = self.used.saturating_sub(IdFill::cost(candidate));
            } else {
                keep.push(index);
            }
        }
        self.placed = keep;
        self.placed.len() != before
    }

    fn lines(&self) -> Vec<String> {
        let mut placed = self.placed.clone();
        placed.sort_unstable();
        placed
            .into_iter()
            .filter_map(|index| self.candidates.get(index))
            .map(|candidate| candidate.display.clone())
            .collect()
    }
}

/// Shares `pool` among sections by `weights`, none above its need (water-filling). Every
/// section starts from its `floor`.
fn water_fill(
    pool: usize,
    floors: &[usize; 5],
    needs: &[usize; 5],
    weights: &[u32; 5],
) -> [usize; 5] {
    let mut alloc = *floors;
    loop {
        let given: usize = alloc.iter().sum();
        let mut remaining = pool.saturating_sub(given);
        let hungry: Vec<usize> = (0..5).filter(|&i| alloc.get(i) < needs.get(i)).collect();
        if remaining == 0 || hungry.is_empty() {
            return alloc;
        }
        let weight_sum: u64 = hungry
            .iter()
            .map(|&i| u64::from(weights.get(i).copied().unwrap_or(1).max(1)))
            .sum();
        let mut progressed = false;
        for &i in &hungry {
            let weight = u64::from(weights.get(i).copied().unwrap_or(1).max(1));
            let share = usize::try_from(
                u64::try_from(remaining).unwrap_or(u64::MAX) * weight / weight_sum.max(1),
            )
            .unwrap_or(usize::MAX);
            let (Some(slot), Some(&need)) = (alloc.get_mut(i), needs.get(i)) else {
                continue;
            };
            let give = share.min(need.saturating_sub(*slot));
            if give > 0 {
                *slot += give;
                progressed = true;
            }
        }
        if !progressed {
            // Shares rounded to nothing: the first hungry section takes the rest.
            remaining = pool.saturating_sub(alloc.iter().sum());
            if let Some((slot, need)) = hungry
                .first()
                .and_then(|&i| Some((alloc.get_mut(i)?, needs.get(i)?)))
            {
                *slot += remaining.min(need.saturating_sub(*slot));
            }
            return alloc;
        }
    }
}

/// Length of a summary whose five sections are all `- (none)`: the least any summary takes.
#[cfg(test)]
fn skeleton_chars() -> usize {
    REQUIRED_SECTIONS
        .iter()
        .map(|heading| chars(heading))
        .sum::<usize>()
        + SEPARATOR.len() * (REQUIRED_SECTIONS.len() - 1)
        + NONE_COST * REQUIRED_SECTIONS.len()
}

/// Writes the summary: the four text sections' candidates and the identifier candidates fitted
/// into `max_chars` (never less than the skeleton).
pub(super) fn render(
    text_sections: [Vec<Candidate>; 4],
    identifiers: Vec<IdCandidate>,
    max_chars: usize,
    max_item_chars: usize,
    weights: &[u32; 5],
) -> String {
    let headings: usize = REQUIRED_SECTIONS.iter().map(|heading| chars(heading)).sum();
    let fixed = headings + SEPARATOR.len() * (REQUIRED_SECTIONS.len() - 1);
    let pool = max_chars.saturating_sub(fixed).max(NONE_COST * 5);

    let mut sections: Vec<SectionFill> = text_sections
        .into_iter()
        .map(|candidates| SectionFill::new(candidates, max_item_chars))
        .collect();
    let mut ids = IdFill {
        candidates: identifiers,
        placed: Vec::new(),
        used: 0,
    };
    ids.place_must_keep(pool.saturating_sub(NONE_COST * 4));

    let id_need: usize = ids.used
        + ids
            .candidates
            .iter()
            .filter(|candidate| !candidate.must_keep && chars(&candidate.display) <= max_item_chars)
            .map(IdFill::cost)
            .sum::<usize>();
    let mut needs = [NONE_COST; 5];
    for (slot, section) in needs.iter_mut().zip(&sections) {
        *slot = section.need();
    }
    needs[4] = id_need.max(NONE_COST);
    let mut floors = [NONE_COST; 5];
    floors[4] = ids.used.max(NONE_COST);
    let alloc = water_fill(pool, &floors, &needs, weights);

    for (section, budget) in sections.iter_mut().zip(alloc) {
        section.fill(budget);
    }
    let text_room: usize = sections.iter().map(SectionFill::room).sum();
    let context: String = sections
        .iter()
        .flat_map(|section| section.placed.iter().map(|placed| placed.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n");
    ids.fill(pool.saturating_sub(text_room), &context, max_item_chars);

    // What identifiers left goes back to the text sections, the user's side first.
    for index in [3, 2, 1, 0] {
        let others: usize = sections
            .iter()
            .enumerate()
            .filter(|(other, _)| *other != index)
            .map(|(_, section)| section.room())
            .sum::<usize>()
            + ids.used.max(NONE_COST);
        if let Some(section) = sections.get_mut(index) {
            section.fill(pool.saturating_sub(others));
        }
    }

    let mut bodies: Vec<Vec<String>> = sections.into_iter().map(SectionFill::lines).collect();
    bodies.push(ids.lines());
    REQUIRED_SECTIONS
        .iter()
        .zip(bodies)
        .map(|(heading, lines)| {
            let mut section = (*heading).to_owned();
            if lines.is_empty() {
                section.push_str("\n- ");
                section.push_str(NONE_ITEM);
            }
            for line in lines {
                section.push_str("\n- ");
                section.push_str(&line);
            }
            section
        })
        .collect::<Vec<_>>()
        .join(SEPARATOR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn water_fill_respects_needs_and_pool() {
        let alloc = water_fill(100, &[9; 5], &[9, 50, 9, 9, 500], &[1, 1, 1, 1, 1]);
        assert_eq!(alloc.iter().sum::<usize>(), 100);
        assert_eq!(alloc[0], 9);
        assert!(alloc[1] <= 50);
        let all_fit = water_fill(1000, &[9; 5], &[20, 30, 9, 9, 40], &[3, 2, 2, 2, 3]);
        assert_eq!(all_fit, [20, 30, 9, 9, 40]);
    }

    #[test]
    fn skeleton_length_is_the_documented_minimum() {
        assert_eq!(skeleton_chars(), super::super::MIN_MAX_CHARS);
    }
}
