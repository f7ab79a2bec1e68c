//! Assembly within the budget.
//!
//! The head, the facts, the items, the identifiers and the details become [`Unit`]s that get
//! space in priority order, each within a cap, and render in display order (the display slots);
//! what is left lets cut units grow. This is where the budget is kept: the result never exceeds
//! it.

use crate::identifiers::mentions_identifier;

use super::facts::Facts;
use super::show::Shape;
use super::text::cut;

/// One unit of the summary. Units get space in priority order (the order they are pushed) and
/// render in display order; units of one group render together, joined by `, ` after the
/// group's label.
struct Unit {
    display: u8,
    group: u8,
    label: &'static str,
    text: String,
    chars: usize,
    /// All-or-nothing: an identifier cut short is a different identifier.
    whole: bool,
    /// Fewest characters worth showing; with less room the unit is left out.
    min: usize,
    /// Most characters this unit may take before every other unit had its turn.
    cap: usize,
    given: usize,
}

/// Fewest characters worth showing of a line that may be cut.
const MIN_CUT_LINE: usize = 24;

/// Below this budget the facts (status, error, exit code) go before the kind and size.
const SMALL_BUDGET: usize = 120;

// Display slots, in the order a reader sees them.
const SLOT_NOTES: u8 = 0;
const SLOT_HEAD: u8 = 1;
const SLOT_EXIT: u8 = 2;
const SLOT_STATUS: u8 = 3;
const SLOT_ERROR: u8 = 4;
const SLOT_FAILED: u8 = 5;
const SLOT_ITEMS: u8 = 6;
const SLOT_IDS: u8 = 7;
const SLOT_DETAILS: u8 = 8;
const SLOT_KEY_LINES: u8 = 9;

struct Units {
    budget: usize,
    list: Vec<Unit>,
}

impl Units {
    fn pct(&self, percent: usize) -> usize {
        self.budget * percent / 100
    }

    /// A unit that may be cut: at most `cap` characters in the first pass, at least `min`.
    fn cuttable(&mut self, display: u8, text: String, cap: usize, min: usize) {
        self.push(display, 0, "", text, cap, min, false);
    }

    /// An all-or-nothing member of a labelled group; too long (over 40% of the budget) and it is
    /// left out.
    fn member(&mut self, display: u8, label: &'static str, text: String) {
        if text.chars().count() <= self.budget * 2 / 5 {
            self.push(display, display, label, text, usize::MAX, 0, true);
        }
    }

    #[allow(clippy::too_many_arguments)] // A private constructor; the two wrappers name the uses.
    fn push(
        &mut self,
        display: u8,
        group: u8,
        label: &'static str,
        text: String,
        cap: usize,
        min: usize,
        whole: bool,
    ) {
        let chars = text.chars().count();
        if chars == 0 {
            return;
        }
        self.list.push(Unit {
            display,
            group,
            label,
            chars,
            whole,
            min: if whole { chars } else { min.min(chars) },
            cap: if whole {
                chars
            } else {
                cap.max(min).min(chars)
            },
            text,
            given: 0,
        });
    }
}

/// The kind and size a head starts with (`text, 27 lines`, `json object, 7 keys`): the least
/// of it worth showing.
fn head_min(head: &str) -> usize {
    let mut separators = head.match_indices([',', ':', ';']).map(|(i, _)| i);
    let end = separators.nth(1).unwrap_or(head.len());
    head.get(..end).map_or(0, |part| part.chars().count())
}

pub(super) fn assemble(budget: usize, notes: &[String], shape: &Shape, facts: &Facts) -> String {
    let mut units = Units {
        budget,
        list: Vec::new(),
    };
    for note in notes {
        let cap = units.pct(30);
        units.cuttable(SLOT_NOTES, note.clone(), cap, 12);
    }
    let has_facts = facts.status.is_some() || facts.error_line.is_some();
    let head_first = budget >= SMALL_BUDGET || !has_facts;
    let push_head = |units: &mut Units| {
        let cap = units.pct(35);
        units.cuttable(SLOT_HEAD, shape.head.clone(), cap, head_min(&shape.head));
    };
    if head_first {
        push_head(&mut units);
    }
    if let Some(code) = &facts.exit_code {
        units.cuttable(SLOT_EXIT, format!("exit {code}"), 12, 12);
    }
    if let Some(status) = &facts.status {
        // A test tally cut short misleads (`2 failed, 1…`): it is shown whole when it can be,
        // in a small budget at the expense of the head.
        let cap = if budget < SMALL_BUDGET {
            units.pct(75)
        } else {
            units.pct(60)
        };
        let min = status.chars().count().min(cap).max(MIN_CUT_LINE);
        units.cuttable(SLOT_STATUS, status.clone(), cap, min);
    }
    if let Some(error) = &facts.error_line {
        if facts.status.as_ref() != Some(error) {
            let cap = units.pct(40).max(MIN_CUT_LINE + 16);
            units.cuttable(SLOT_ERROR, error.clone(), cap, MIN_CUT_LINE);
        }
    }
    if !head_first {
        push_head(&mut units);
    }
    for test in facts.failed_tests.iter().take(3) {
        units.member(SLOT_FAILED, "failed:", test.clone());
    }
    for item in shape.items.iter().take(shape.primary) {
        units.member(SLOT_ITEMS, shape.label, item.clone());
    }
    for id in &facts.identifiers {
        units.member(SLOT_IDS, "ids:", id.clone());
    }
    for detail in &shape.details {
        units.cuttable(SLOT_DETAILS, detail.clone(), budget, MIN_CUT_LINE);
    }
    for item in shape.items.iter().skip(shape.primary) {
        units.member(SLOT_ITEMS, shape.label, item.clone());
    }
    for line in &facts.key_lines {
        let cap = units.pct(30);
        units.cuttable(SLOT_KEY_LINES, line.clone(), cap, MIN_CUT_LINE);
    }
    allocate(budget, &mut units.list);
    render(&units.list, budget)
}

/// Gives each unit its space: a first pass within caps, in priority order, leaving out
/// identifiers and test names the summary already shows; a second pass lets cut units grow
/// into what is left.
fn allocate(budget: usize, units: &mut [Unit]) {
    let mut used = 0usize;
    let mut open_groups: Vec<u8> = Vec::new();
    let mut shown = String::new();
    for unit in units.iter_mut() {
        let skippable = matches!(unit.display, SLOT_IDS | SLOT_FAILED);
        if unit.whole && skippable && mentions_identifier(&shown, &unit.text) {
            continue;
        }
        let separator = if used == 0 { 0 } else { 2 };
        let opens_group = unit.group == 0 || !open_groups.contains(&unit.group);
        let label = if opens_group && !unit.label.is_empty() {
            unit.label.chars().count() + 1
        } else {
            0
        };
        let room = budget.saturating_sub(used + separator + label);
        let give = unit.cap.min(room);
        if give == 0 || give < unit.min {
            continue;
        }
        unit.given = give;
        used += separator + label + give;
        if unit.group != 0 && opens_group {
            open_groups.push(unit.group);
        }
        shown.push_str(&cut(&unit.text, give));
        shown.push('\n');
    }
    for unit in units.iter_mut() {
        if unit.given == 0 || unit.given >= unit.chars {
            continue;
        }
        let extra = (unit.chars - unit.given).min(budget.saturating_sub(used));
        unit.given += extra;
        used += extra;
    }
}

fn render(units: &[Unit], budget: usize) -> String {
    let mut order: Vec<(u8, usize, &Unit)> = units
        .iter()
        .enumerate()
        .filter(|(_, unit)| unit.given > 0)
        .map(|(priority, unit)| (unit.display, priority, unit))
        .collect();
    order.sort_by_key(|(display, priority, _)| (*display, *priority));
    let mut out = String::new();
    let mut previous_group = 0u8;
    for (_, _, unit) in order {
        if unit.group != 0 && unit.group == previous_group {
            out.push_str(", ");
        } else {
            if !out.is_empty() {
                out.push_str("; ");
            }
            if !unit.label.is_empty() {
                out.push_str(unit.label);
                out.push(' ');
            }
        }
        out.push_str(&cut(&unit.text, unit.given));
        previous_group = unit.group;
    }
    // The allocation already fits; this only guards the invariant.
    cut(&out, budget)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn head_minimum_is_kind_and_size() {
        assert_eq!(
            head_min("text, 27 lines, 1177 chars"),
            "text, 27 lines".len()
        );
        assert_eq!(head_min("json object, 7 keys"), "json object, 7 keys".len());
        assert_eq!(head_min("log, 8 lines: ERROR 3"), "log, 8 lines".len());
        assert_eq!(head_min("json null"), "json null".len());
    }
}
