//! How one result is cut: soft trim (head + tail + a note, image blocks replaced by a marker when
//! the policy trims images) and hard clear (a placeholder), with the helpers that take a head or
//! tail across block boundaries and keep naming the refs a cut removes.

use std::borrow::Cow;

use crate::message::{Block, Message, TextBlock, ToolResult};
use crate::refs::{self, NewRef, REF_PREFIX, RefId, RefPayload};
use crate::tokens::{IMAGE_CHARS, estimate_string_chars};

use super::super::truncate::{content_chars, prefix_end, suffix_start};
use super::{Candidate, ClearedResult, PruneAction, PruneChange, PruneSettings, result_mut};

/// What a soft trim writes where an image block was, when the policy trims images (OpenClaw
/// 2026.9's text).
pub const IMAGE_REMOVED_MARKER: &str = "[image removed during context pruning]";

/// A 64-character id for measuring texts before the real one is computed.
fn dummy_id() -> RefId {
    RefId::of_bytes(b"")
}

fn trim_note(head: usize, tail: usize, total: usize, id: Option<&RefId>) -> String {
    match id {
        None => format!(
            "[Tool result trimmed: kept first {head} chars and last {tail} chars of {total} chars.]"
        ),
        Some(id) => format!(
            "[Tool result trimmed: kept first {head} chars and last {tail} chars of {total} \
             chars; full output: {REF_PREFIX}{id}] - call fetch_original_data with this ref id \
             to read it.]"
        ),
    }
}

pub(super) fn soft_trim(
    result: &mut ToolResult,
    candidate: &mut Candidate,
    settings: &PruneSettings,
    new_refs: &mut Vec<NewRef>,
) -> Option<PruneChange> {
    let trim = &settings.soft_trim;
    // With `trim_images` an image weighs 8,000 characters in the context but only its marker in
    // the trimmed text, so even a result with little text shrinks (OpenClaw 2026.9).
    let drop_images = settings.trim_images && has_image(&result.content);
    let parts = trim_parts(&result.content, drop_images);
    let separators = parts.len().saturating_sub(1);
    let raw_len = parts
        .iter()
        .map(|p| estimate_string_chars(p))
        .sum::<usize>()
        + separators;
    let images = if drop_images {
        result
            .content
            .iter()
            .filter(|block| matches!(block, Block::Image(_)))
            .count()
    } else {
        0
    };
    let short =
        raw_len <= trim.max_chars || trim.head_chars.saturating_add(trim.tail_chars) >= raw_len;
    if short && !drop_images {
        return None;
    }
    let keep = settings.keep_originals;
    let (body, plain_note, note_len) = if short {
        // Only the images go: the text stays whole, each image a marker where it was.
        let note_len = if keep {
            image_note(&dummy_id()).len()
        } else {
            0
        };
        (parts.join("\n"), (!keep).then(String::new), note_len)
    } else {
        let head = take_head(&parts, trim.head_chars);
        let tail = take_tail(&parts, trim.tail_chars);
        let body = format!("{head}\n...\n{tail}\n\n");
        // Without a ref of its own, the trimmed text must still name the refs it cuts out.
        let plain_note = (!keep).then(|| {
            trim_note(trim.head_chars, trim.tail_chars, raw_len, None)
                + &carried_suffix(&carried_refs(&parts, &[&head, &tail]))
        });
        let note_len = match &plain_note {
            Some(note) => note.len(),
            None => trim_note(trim.head_chars, trim.tail_chars, raw_len, Some(&dummy_id())).len(),
        };
        (body, plain_note, note_len)
    };
    let text_chars: usize = text_parts(&result.content)
        .iter()
        .map(|p| estimate_string_chars(p))
        .sum();
    let removed = text_chars + images * IMAGE_CHARS;
    let after = candidate.chars.saturating_sub(removed) + estimate_string_chars(&body) + note_len;
    if after >= candidate.chars {
        return None;
    }
    let original = std::mem::take(&mut result.content);
    let (content, ref_id) = match plain_note {
        None => {
            let new_ref = NewRef::new(RefPayload::new(original));
            let text = if short {
                body + &image_note(&new_ref.id)
            } else {
                body + &trim_note(trim.head_chars, trim.tail_chars, raw_len, Some(&new_ref.id))
            };
            let content = rebuild(
                new_ref.payload.blocks.iter().map(Cow::Borrowed),
                text,
                drop_images,
            );
            let id = new_ref.id.to_string();
            candidate.original_ref = Some(new_refs.len());
            new_refs.push(new_ref);
            (content, Some(id))
        }
        Some(note) => (
            rebuild(
                original.into_iter().map(Cow::Owned),
                body + &note,
                drop_images,
            ),
            None,
        ),
    };
    result.content = content.into();
    let before = candidate.chars;
    candidate.chars = content_chars(&result.content);
    let reason = if short {
        format!("soft trim: {images} image block(s) replaced by {IMAGE_REMOVED_MARKER}")
    } else {
        format!(
            "soft trim: result text of {raw_len} chars exceeds soft_trim.max_chars {}",
            trim.max_chars
        )
    };
    Some(PruneChange {
        message_index: candidate.message,
        block_index: candidate.block,
        call_id: result.call_id.clone(),
        tool_name: candidate.tool_name.clone(),
        action: PruneAction::Trimmed,
        chars_before: before,
        chars_after: candidate.chars,
        ref_id,
        reason,
    })
}

/// Where a trim that only removed images says the original went, with `keep_originals`.
fn image_note(id: &RefId) -> String {
    format!(
        "\n\n[Images removed; full output: {REF_PREFIX}{id}] - call fetch_original_data with this \
         ref id to read it.]"
    )
}

pub(super) fn has_image(blocks: &[Block]) -> bool {
    blocks.iter().any(|block| matches!(block, Block::Image(_)))
}

/// The texts a soft trim works on: the text blocks, and with `images` a marker for each image
/// block, in block order.
fn trim_parts(blocks: &[Block], images: bool) -> Vec<&str> {
    blocks
        .iter()
        .filter_map(|block| match block {
            Block::Text(text) => Some(text.text.as_str()),
            Block::Image(_) if images => Some(IMAGE_REMOVED_MARKER),
            Block::Image(_)
            | Block::Thinking(_)
            | Block::ToolCall(_)
            | Block::ToolResult(_)
            | Block::Opaque(_) => None,
        })
        .collect()
}

pub(super) fn hard_clear(
    messages: &mut [Message],
    candidate: &mut Candidate,
    settings: &PruneSettings,
    new_refs: &mut Vec<NewRef>,
    summarize: &mut dyn FnMut(&ClearedResult<'_>) -> String,
    ratio: f64,
) -> Option<PruneChange> {
    let keep = settings.keep_originals;
    let summary = if keep {
        let result = result_mut(messages, candidate)?;
        let content = match candidate.original_ref.and_then(|i| new_refs.get(i)) {
            Some(original) => original.payload.blocks.as_slice(),
            None => result.content.as_slice(),
        };
        Some(summarize(&ClearedResult {
            call_id: &result.call_id,
            tool_name: candidate.tool_name.as_deref(),
            content,
            chars: content_chars(content),
        }))
    } else {
        None
    };
    let plain = summary.is_none().then(|| {
        let texts: Vec<&str> = result_mut(messages, candidate)
            .map(|result| text_parts(&result.content))
            .unwrap_or_default();
        settings.hard_clear.placeholder.clone() + &carried_suffix(&carried_refs(&texts, &[]))
    });
    let after = match (&summary, &plain) {
        (Some(summary), _) => estimate_string_chars(&refs::placeholder(&dummy_id(), summary)),
        (None, Some(plain)) => estimate_string_chars(plain),
        (None, None) => return None,
    };
    if after >= candidate.chars {
        return None;
    }
    let result = result_mut(messages, candidate)?;
    let original = std::mem::take(&mut result.content);
    let (text, ref_id) = match summary {
        None => (plain.unwrap_or_default(), None),
        Some(summary) => {
            let id = match candidate.original_ref.and_then(|i| new_refs.get(i)) {
                // A soft trim in this prune already kept the original.
                Some(original_ref) => original_ref.id.clone(),
                None => {
                    let new_ref = NewRef::new(RefPayload::new(original));
                    let id = new_ref.id.clone();
                    new_refs.push(new_ref);
                    id
                }
            };
            (refs::placeholder(&id, &summary), Some(id.to_string()))
        }
    };
    result.content = vec![Block::text(text)].into();
    let before = candidate.chars;
    candidate.chars = content_chars(&result.content);
    Some(PruneChange {
        message_index: candidate.message,
        block_index: candidate.block,
        call_id: result.call_id.clone(),
        tool_name: candidate.tool_name.clone(),
        action: PruneAction::Cleared,
        chars_before: before,
        chars_after: candidate.chars,
        ref_id,
        reason: format!(
            "hard clear: context ratio {ratio:.3} at or above hard_clear_ratio {}",
            settings.hard_clear_ratio
        ),
    })
}

pub(super) fn text_parts(blocks: &[Block]) -> Vec<&str> {
    blocks
        .iter()
        .filter_map(Block::as_text)
        .map(|text| text.text.as_str())
        .collect()
}

/// Ref ids named in `texts` but in none of `kept`, in order of appearance, without repeats: a
/// result that already pointed at stored originals keeps pointing at them when cut.
fn carried_refs(texts: &[&str], kept: &[&str]) -> Vec<RefId> {
    let kept: Vec<RefId> = kept
        .iter()
        .flat_map(|text| refs::ref_ids_in(text))
        .collect();
    let mut carried: Vec<RefId> = Vec::new();
    for id in texts.iter().flat_map(|text| refs::ref_ids_in(text)) {
        if !kept.contains(&id) && !carried.contains(&id) {
            carried.push(id);
        }
    }
    carried
}

fn carried_suffix(ids: &[RefId]) -> String {
    if ids.is_empty() {
        return String::new();
    }
    let tokens: Vec<String> = ids.iter().map(|id| format!("{REF_PREFIX}{id}]")).collect();
    format!(" Refs in the removed part: {}", tokens.join(" "))
}

/// `blocks` with their text blocks (and with `drop_images` their image blocks) replaced by one
/// block holding `text`, where the first text block was; other blocks stay in place.
fn rebuild<'a>(
    blocks: impl Iterator<Item = Cow<'a, Block>>,
    text: String,
    drop_images: bool,
) -> Vec<Block> {
    let mut text = Some(text);
    let mut out = Vec::new();
    for block in blocks {
        if drop_images && matches!(block.as_ref(), Block::Image(_)) {
            continue;
        }
        if let Block::Text(first) = block.as_ref() {
            if let Some(text) = text.take() {
                out.push(Block::Text(TextBlock {
                    text,
                    extra: first.extra.clone(),
                }));
            }
        } else {
            out.push(block.into_owned());
        }
    }
    if let Some(text) = text {
        out.push(Block::text(text));
    }
    out
}

/// The first `budget` characters of `parts` joined by newlines (a newline counts as one).
pub(super) fn take_head(parts: &[&str], budget: usize) -> String {
    let mut remaining = budget;
    let mut out = String::new();
    for (index, part) in parts.iter().enumerate() {
        if remaining == 0 {
            break;
        }
        if index > 0 {
            out.push('\n');
            remaining -= 1;
            if remaining == 0 {
                break;
            }
        }
        let end = prefix_end(part, remaining);
        let taken = part.get(..end).unwrap_or_default();
        out.push_str(taken);
        if end < part.len() {
            break;
        }
        remaining -= estimate_string_chars(taken);
    }
    out
}

/// The last `budget` characters of `parts` joined by newlines (a newline counts as one).
pub(super) fn take_tail(parts: &[&str], budget: usize) -> String {
    let mut remaining = budget;
    let mut pieces: Vec<&str> = Vec::new();
    for (index, part) in parts.iter().enumerate().rev() {
        if remaining == 0 {
            break;
        }
        let start = suffix_start(part, remaining);
        let taken = part.get(start..).unwrap_or_default();
        pieces.push(taken);
        if start > 0 {
            break;
        }
        remaining -= estimate_string_chars(taken);
        if remaining > 0 && index > 0 {
            pieces.push("\n");
            remaining -= 1;
        }
    }
    pieces.iter().rev().copied().collect()
}
