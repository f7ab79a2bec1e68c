//! Offloading large tool results: [`offload`] decides per result (content that is already a
//! ref, fetch output and workspace files stay), replaces the chosen ones with their placeholder
//! and hands the originals back as [`NewRef`]s; [`OffloadCache`] remembers each decision by a
//! cheap identity of the result so a request only pays for results it has not seen.

use std::collections::HashMap;

use rayon::iter::{IntoParallelIterator, ParallelIterator};
use xxhash_rust::xxh3::Xxh3;

use super::{FETCH_TOOL_NAME, OPENCLAW_FILES, OffloadReport, OffloadSettings, Offloaded};
use crate::digest::{DigestSettings, digest_blocks};
use crate::identity::hash_edges;
use crate::message::{Block, Content, Message, ToolResult};
use crate::refs::{NewRef, RefPayload, contains_ref, placeholder};

/// A tool result's placeholder, computed once per content and reused: digesting and hashing a
/// large output is the expensive part, and the answer never changes for the same content.
#[derive(Debug, Clone)]
struct CachedOffload {
    /// Shared by every request that reuses the decision: applying it is one reference count.
    replacement: Content,
    ref_id: String,
    chars_after: usize,
}

/// What the stage knows about one result, remembered across requests.
#[derive(Debug, Clone)]
enum Memo {
    /// Not eligible (under the threshold, already a ref, a fetch output, a workspace file).
    Ineligible { workspace_file: bool },
    /// Eligible; the placeholder is computed the first time the selector picks it.
    Eligible(Option<CachedOffload>),
}

/// Memo of offload decisions keyed by a cheap identity of each result (see `quick_key`), so a
/// request costs work only for results it has not seen before.
#[derive(Debug, Clone, Default)]
pub struct OffloadCache {
    entries: HashMap<u128, Memo>,
}

impl OffloadCache {
    /// How many results the cache remembers a decision for.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the cache remembers nothing yet.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The outcome of [`offload`].
#[derive(Debug, Clone, Default)]
pub struct OffloadOutcome {
    /// The messages, with the chosen results replaced by their placeholders.
    pub messages: Vec<Message>,
    /// Originals offloaded for the first time with this cache: store them before `messages` is
    /// shown to a model. Results offloaded in earlier calls keep their placeholder and are not
    /// returned again (the caller stored them then; an empty cache returns them all again).
    pub new_refs: Vec<NewRef>,
    /// What was offloaded, kept and deferred.
    pub report: OffloadReport,
}

/// Whether a result is eligible at all, whatever the selector says.
fn classify(result: &ToolResult, settings: &OffloadSettings) -> Memo {
    let not = Memo::Ineligible {
        workspace_file: false,
    };
    if result.tool_name.as_deref() == Some(FETCH_TOOL_NAME) {
        return not;
    }
    let text = text_in(result);
    // A char is at most four bytes: past four bytes per allowed char, the count is settled.
    let within = text.len() <= 4 * settings.compress_threshold
        && text.chars().count() <= settings.compress_threshold;
    if within || contains_ref(&text) {
        return not;
    }
    if settings.keep_workspace_files && is_workspace_file(&text) {
        return Memo::Ineligible {
            workspace_file: true,
        };
    }
    Memo::Eligible(None)
}

/// Total bytes of a result's text blocks: an upper bound of its chars, free to compute.
fn text_bytes(result: &ToolResult) -> usize {
    result
        .content
        .iter()
        .filter_map(Block::as_text)
        .map(|text| text.text.len() + 1)
        .sum()
}

/// The joined text of a result's text blocks.
pub fn text_of(result: &ToolResult) -> String {
    crate::message::join_text(&result.content)
}

/// [`text_of`], borrowed when the result has a single text block (the usual case): joining
/// would copy the whole output.
fn text_in(result: &ToolResult) -> std::borrow::Cow<'_, str> {
    let mut texts = result
        .content
        .iter()
        .filter_map(Block::as_text)
        .map(|text| text.text.as_str());
    match (texts.next(), texts.next()) {
        (Some(only), None) => std::borrow::Cow::Borrowed(only),
        (Some(_), Some(_)) | (None, _) => std::borrow::Cow::Owned(text_of(result)),
    }
}

/// True when `text` starts like an OpenClaw workspace file (`# SOUL.md - Who You Are`).
pub fn is_workspace_file(text: &str) -> bool {
    let first_line = text
        .lines()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("");
    let first_line = first_line.trim_start_matches('#').trim();
    // Every name ends in `.md`: most first lines are settled by that alone, and the others are
    // split once (short ones only) rather than once per name.
    if !first_line.contains(".md") {
        return false;
    }
    OPENCLAW_FILES
        .iter()
        .any(|name| first_line.starts_with(name))
        || first_line.len() < 200
            && first_line
                .split(|c: char| c.is_whitespace() || c == '/' || c == '\\')
                .any(|word| OPENCLAW_FILES.contains(&word))
}

/// Builds the placeholder content for a result whose content was `original`: the REF_ID
/// placeholder, then every non-text block of the original (images stay visible). The original
/// moves into the ref: the result's content is replaced anyway, so copying it would be waste.
fn replace(original: Content, digest: &DigestSettings) -> (CachedOffload, NewRef) {
    let summary = digest_blocks(&original, digest).summary;
    let mut replacement = vec![Block::text(String::new())];
    replacement.extend(
        original
            .iter()
            .filter(|block| block.as_text().is_none())
            .cloned(),
    );
    let new_ref = NewRef::new(RefPayload::new(original));
    let text = placeholder(&new_ref.id, &summary);
    let chars_after = text.chars().count();
    if let Some(first) = replacement.first_mut() {
        *first = Block::text(text);
    }
    let cached = CachedOffload {
        replacement: replacement.into(),
        ref_id: new_ref.id.to_string(),
        chars_after,
    };
    (cached, new_ref)
}

/// A selected result whose placeholder is not computed yet, and where it is.
struct FirstSight {
    message_index: usize,
    block_index: usize,
    key: u128,
    call_id: String,
    chars_before: usize,
    /// The result's content, shared with the message (empty for a repeat of a pending key).
    original: Content,
}

/// The tool result at a message and block position.
fn result_at(
    messages: &mut [Message],
    message_index: usize,
    block_index: usize,
) -> Option<&mut ToolResult> {
    messages
        .get_mut(message_index)?
        .content
        .get_mut(block_index)?
        .as_tool_result_mut()
}

/// Puts a placeholder in the place of `result`'s content; the report line, with its position.
fn apply(
    result: &mut ToolResult,
    cached: CachedOffload,
    sight: FirstSight,
) -> (usize, usize, Offloaded) {
    result.content = cached.replacement;
    result.content_form = crate::message::ContentForm::Blocks;
    (
        sight.message_index,
        sight.block_index,
        Offloaded {
            message_index: sight.message_index,
            call_id: sight.call_id,
            ref_id: cached.ref_id,
            chars_before: sight.chars_before,
            chars_after: cached.chars_after,
        },
    )
}

/// A tool result the stage may offload (see [`eligible_results`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EligibleResult {
    /// The index of the message holding the result.
    pub message_index: usize,
    /// The id of the call the result answers.
    pub call_id: String,
    /// Size of the result's text in bytes (chars for ASCII).
    pub chars: usize,
}

/// The results [`offload`] would ask its selector about, in message order, without changing
/// anything: a scheduler weighs them before choosing. Decisions are remembered in `cache`
/// exactly as [`offload`] remembers them.
pub fn eligible_results(
    messages: &[Message],
    settings: &OffloadSettings,
    cache: &mut OffloadCache,
) -> Vec<EligibleResult> {
    let mut eligible = Vec::new();
    if !settings.enabled {
        return eligible;
    }
    for (message_index, message) in messages.iter().enumerate() {
        for result in message.tool_results() {
            let chars = text_bytes(result);
            if chars <= settings.compress_threshold {
                continue;
            }
            let memo = cache
                .entries
                .entry(quick_key(result, settings))
                .or_insert_with(|| classify(result, settings));
            match memo {
                Memo::Ineligible { .. } => {}
                Memo::Eligible(_) => eligible.push(EligibleResult {
                    message_index,
                    call_id: result.call_id.clone(),
                    chars,
                }),
            }
        }
    }
    eligible
}

/// Offloads the tool results `select` chooses among those over the threshold.
///
/// `select(message_index, result)` is asked only for eligible results (over the threshold, not
/// yet a ref, not a fetch output, not a workspace file). Settings must have passed
/// [`OffloadSettings::validate`]; invalid digest settings fall back to the defaults.
pub fn offload(
    mut messages: Vec<Message>,
    settings: &OffloadSettings,
    cache: &mut OffloadCache,
    mut select: impl FnMut(usize, &ToolResult) -> bool,
) -> OffloadOutcome {
    let mut report = OffloadReport::default();
    let mut new_refs = Vec::new();
    if !settings.enabled {
        return OffloadOutcome {
            messages,
            new_refs,
            report,
        };
    }
    let digest = settings.digest_settings().unwrap_or_default();
    // Two passes: the first reads every result, decides, and notes the originals seen for the
    // first time; their digests and hashes, the expensive part of a cold pass, are then computed
    // in parallel; the second puts each placeholder where its original was. Only the second
    // writes, and only to the messages it changes: the messages are a clone of the ones the
    // engine holds, sharing their blocks until written.
    let mut applied: Vec<(usize, usize, Offloaded)> = Vec::new();
    let mut reused: Vec<(FirstSight, CachedOffload)> = Vec::new();
    let mut first_sights: Vec<FirstSight> = Vec::new();
    let mut repeats: Vec<FirstSight> = Vec::new();
    let mut pending_keys: std::collections::HashSet<u128> = std::collections::HashSet::new();
    for (message_index, message) in messages.iter().enumerate() {
        for (block_index, block) in message.content.iter().enumerate() {
            let Block::ToolResult(result) = block else {
                continue;
            };
            if text_bytes(result) <= settings.compress_threshold {
                continue;
            }
            let key = quick_key(result, settings);
            let memo = cache
                .entries
                .entry(key)
                .or_insert_with(|| classify(result, settings));
            let slot = match memo {
                Memo::Ineligible { workspace_file } => {
                    if *workspace_file {
                        report.kept_workspace_files += 1;
                    }
                    continue;
                }
                Memo::Eligible(slot) => slot,
            };
            if !select(message_index, result) {
                report.deferred += 1;
                continue;
            }
            let chars_before = text_bytes(result);
            let sight = FirstSight {
                message_index,
                block_index,
                key,
                call_id: result.call_id.clone(),
                chars_before,
                original: Content::new(),
            };
            match slot {
                Some(cached) => reused.push((sight, cached.clone())),
                None if pending_keys.contains(&key) => repeats.push(sight),
                None => {
                    // First sight: the original goes out to be stored; later requests reuse the
                    // placeholder and the caller already holds the ref.
                    pending_keys.insert(key);
                    first_sights.push(FirstSight {
                        original: result.content.clone(),
                        ..sight
                    });
                }
            }
        }
    }
    let replaced: Vec<(FirstSight, CachedOffload, NewRef)> = if first_sights.len() > 1 {
        first_sights
            .into_par_iter()
            .map(|mut sight| {
                let (cached, new_ref) = replace(std::mem::take(&mut sight.original), &digest);
                (sight, cached, new_ref)
            })
            .collect()
    } else {
        first_sights
            .into_iter()
            .map(|mut sight| {
                let (cached, new_ref) = replace(std::mem::take(&mut sight.original), &digest);
                (sight, cached, new_ref)
            })
            .collect()
    };
    for (sight, cached) in reused {
        if let Some(result) = result_at(&mut messages, sight.message_index, sight.block_index) {
            applied.push(apply(result, cached, sight));
        }
    }
    for (sight, cached, new_ref) in replaced {
        new_refs.push(new_ref);
        if let Some(Memo::Eligible(slot)) = cache.entries.get_mut(&sight.key) {
            *slot = Some(cached.clone());
        }
        if let Some(result) = result_at(&mut messages, sight.message_index, sight.block_index) {
            applied.push(apply(result, cached, sight));
        }
    }
    for sight in repeats {
        let cached = match cache.entries.get(&sight.key) {
            Some(Memo::Eligible(Some(cached))) => cached.clone(),
            Some(Memo::Eligible(None) | Memo::Ineligible { .. }) | None => continue,
        };
        if let Some(result) = result_at(&mut messages, sight.message_index, sight.block_index) {
            applied.push(apply(result, cached, sight));
        }
    }
    applied.sort_by_key(|(message_index, block_index, _)| (*message_index, *block_index));
    report.offloaded = applied
        .into_iter()
        .map(|(_, _, offloaded)| offloaded)
        .collect();
    OffloadOutcome {
        messages,
        new_refs,
        report,
    }
}

/// A cheap identity of a result under the settings: its call id, the length of every block and
/// a hash of the head and tail of each text. Computing it costs O(1) per block, so an assemble
/// over a long session does not rescan old outputs; a host that rewrites an old result in place
/// while keeping its call id, its length and its first and last 256 bytes would see the earlier
/// decision reused — sessions are append-only, so that does not happen.
fn quick_key(result: &ToolResult, settings: &OffloadSettings) -> u128 {
    const EDGE: usize = 256;
    let mut hasher = Xxh3::new();
    hasher.update(result.call_id.as_bytes());
    hasher.update(&(settings.summary_max_chars as u64).to_le_bytes());
    hasher.update(&(settings.compress_threshold as u64).to_le_bytes());
    hasher.update(&[u8::from(settings.keep_workspace_files)]);
    for block in &result.content {
        match block {
            Block::Text(text) => {
                hasher.update(b"t");
                hash_edges(&mut hasher, &text.text, EDGE);
            }
            Block::Image(image) => {
                hasher.update(b"i");
                let len = match &image.source {
                    crate::message::ImageSource::Base64 { data, .. } => data.len(),
                    crate::message::ImageSource::Url { url } => url.len(),
                };
                hasher.update(&(len as u64).to_le_bytes());
            }
            Block::Thinking(_) | Block::ToolCall(_) | Block::ToolResult(_) | Block::Opaque(_) => {
                hasher.update(b"o");
            }
        }
    }
    hasher.digest128()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::message::{ContentForm, Extra, ImageBlock, ImageSource, Role, ToolCall};
    use crate::refs::RefId;
    use serde_json::json;

    fn call(id: &str, name: &str) -> Message {
        Message::new(
            Role::Assistant,
            vec![Block::ToolCall(ToolCall {
                id: id.into(),
                name: name.into(),
                arguments: json!({}),
                arguments_text: None,
                extra: Extra::new(),
            })],
        )
    }

    fn result(id: &str, name: &str, content: Vec<Block>) -> Message {
        Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: id.into(),
                tool_name: Some(name.into()),
                content: content.into(),
                content_form: ContentForm::Blocks,
                is_error: Some(false),
                details: Some(json!({"exitCode": 1}).into()),
                extra: Extra::new(),
            })],
        )
    }

    fn big_log(lines: usize) -> String {
        let mut text: String = (0..lines)
            .map(|i| format!("2026-01-01T00:00:{:02}Z INFO step {i} ok\n", i % 60))
            .collect();
        text.push_str("ERROR failed to open /srv/app/config.toml: permission denied\n");
        text
    }

    fn conversation(text: &str) -> Vec<Message> {
        vec![
            Message::text(Role::User, "run it"),
            call("c1", "bash"),
            result("c1", "bash", vec![Block::text(text)]),
        ]
    }

    fn result_text(messages: &[Message], index: usize) -> String {
        text_of(messages[index].tool_results().next().unwrap())
    }

    #[test]
    fn results_over_the_threshold_become_ref_placeholders() {
        let log = big_log(200);
        let mut cache = OffloadCache::default();
        let out = offload(
            conversation(&log),
            &OffloadSettings::default(),
            &mut cache,
            |_, _| true,
        );
        let text = result_text(&out.messages, 2);
        assert!(text.starts_with("[REF_ID: "), "{text}");
        assert!(text.contains("] (Summary: "), "{text}");
        assert_eq!(out.new_refs.len(), 1);
        let new_ref = &out.new_refs[0];
        assert_eq!(new_ref.id, new_ref.payload.id());
        assert_eq!(RefId::parse(&text).unwrap(), new_ref.id);
        assert_eq!(new_ref.payload.text(), log);
        assert_eq!(out.report.offloaded.len(), 1);
        assert!(out.report.chars_saved() > 5_000);
        // details are host data: untouched by the stage.
        let kept = out.messages[2].tool_results().next().unwrap();
        assert_eq!(kept.details.as_deref(), Some(&json!({"exitCode": 1})));
    }

    #[test]
    fn results_at_or_under_the_threshold_stay() {
        let text = "x".repeat(3_000);
        let mut cache = OffloadCache::default();
        let out = offload(
            conversation(&text),
            &OffloadSettings::default(),
            &mut cache,
            |_, _| true,
        );
        assert_eq!(result_text(&out.messages, 2), text);
        assert!(out.new_refs.is_empty());
        // Characters, not bytes: 2,000 CJK characters are 6,000 bytes but under the threshold.
        let cjk = "字".repeat(2_000);
        let out = offload(
            conversation(&cjk),
            &OffloadSettings::default(),
            &mut cache,
            |_, _| true,
        );
        assert_eq!(result_text(&out.messages, 2), cjk);
    }

    #[test]
    fn offloading_is_idempotent() {
        let log = big_log(200);
        let settings = OffloadSettings::default();
        let once = offload(
            conversation(&log),
            &settings,
            &mut OffloadCache::default(),
            |_, _| true,
        );
        let twice = offload(
            once.messages.clone(),
            &settings,
            &mut OffloadCache::default(),
            |_, _| true,
        );
        assert_eq!(twice.messages, once.messages);
        assert!(twice.new_refs.is_empty());
        assert!(twice.report.offloaded.is_empty());
    }

    #[test]
    fn decisions_repeat_byte_for_byte_and_refs_are_handed_out_once_per_cache() {
        let log = big_log(200);
        let settings = OffloadSettings::default();
        let mut cache = OffloadCache::default();
        let first = offload(conversation(&log), &settings, &mut cache, |_, _| true);
        let second = offload(conversation(&log), &settings, &mut cache, |_, _| true);
        assert_eq!(first.messages, second.messages);
        assert_eq!(first.new_refs.len(), 1);
        assert!(second.new_refs.is_empty(), "already handed out");
        assert_eq!(second.report.offloaded.len(), 1);
        // A fresh cache (a restarted engine) reaches the same placeholder and hands the ref out
        // again so it can be stored again.
        let fresh = offload(
            conversation(&log),
            &settings,
            &mut OffloadCache::default(),
            |_, _| true,
        );
        assert_eq!(fresh.messages, first.messages);
        assert_eq!(fresh.new_refs, first.new_refs);
    }

    #[test]
    fn many_first_sights_in_one_request_match_one_at_a_time_and_keep_message_order() {
        // Several results digested at once (in parallel) in one request, two of them in the
        // same message, one repeated with the same call id and content: the outcome must equal
        // offloading them one request at a time, in message order.
        let settings = OffloadSettings::default();
        let logs: Vec<String> = (0..5).map(|i| big_log(150 + 10 * i)).collect();
        let mut messages = vec![Message::text(Role::User, "run them")];
        for (i, log) in logs.iter().enumerate().take(3) {
            let id = format!("c{i}");
            messages.push(call(&id, "bash"));
            messages.push(result(&id, "bash", vec![Block::text(log.as_str())]));
        }
        let mut pair = result("c3", "bash", vec![Block::text(logs[3].as_str())]);
        let Block::ToolResult(mut second) = pair.content[0].clone() else {
            unreachable!()
        };
        second.call_id = "c4".into();
        second.content = vec![Block::text(logs[4].as_str())].into();
        pair.content.push(Block::ToolResult(second));
        messages.push(pair);
        messages.push(result("c0", "bash", vec![Block::text(logs[0].as_str())]));

        let mut cache = OffloadCache::default();
        let together = offload(messages.clone(), &settings, &mut cache, |_, _| true);

        let mut one_by_one = OffloadCache::default();
        let mut expected_refs = Vec::new();
        for end in 1..=messages.len() {
            let out = offload(
                messages[..end].to_vec(),
                &settings,
                &mut one_by_one,
                |_, _| true,
            );
            expected_refs.extend(out.new_refs);
            if end == messages.len() {
                assert_eq!(together.messages, out.messages);
                assert_eq!(together.report, out.report);
            }
        }
        assert_eq!(together.new_refs, expected_refs);
        assert_eq!(together.new_refs.len(), 5, "the repeat is handed out once");
        let order: Vec<(usize, &str)> = together
            .report
            .offloaded
            .iter()
            .map(|o| (o.message_index, o.call_id.as_str()))
            .collect();
        assert_eq!(
            order,
            [
                (2, "c0"),
                (4, "c1"),
                (6, "c2"),
                (7, "c3"),
                (7, "c4"),
                (8, "c0")
            ]
        );
    }

    #[test]
    fn fetch_original_data_output_is_never_offloaded() {
        let log = big_log(200);
        let messages = vec![
            Message::text(Role::User, "go"),
            call("c1", FETCH_TOOL_NAME),
            result("c1", FETCH_TOOL_NAME, vec![Block::text(log.clone())]),
        ];
        let out = offload(
            messages,
            &OffloadSettings::default(),
            &mut OffloadCache::default(),
            |_, _| true,
        );
        assert_eq!(result_text(&out.messages, 2), log);
    }

    #[test]
    fn openclaw_workspace_files_are_kept() {
        let soul = format!(
            "# SOUL.md - Who You Are\n\n{}",
            "Be kind and exact.\n".repeat(300)
        );
        let mut cache = OffloadCache::default();
        let out = offload(
            conversation(&soul),
            &OffloadSettings::default(),
            &mut cache,
            |_, _| true,
        );
        assert_eq!(result_text(&out.messages, 2), soul);
        assert_eq!(out.report.kept_workspace_files, 1);
        let settings = OffloadSettings {
            keep_workspace_files: false,
            ..OffloadSettings::default()
        };
        let out = offload(conversation(&soul), &settings, &mut cache, |_, _| true);
        assert!(result_text(&out.messages, 2).starts_with("[REF_ID: "));
        assert!(is_workspace_file("# AGENTS.md\nrules"));
        assert!(!is_workspace_file("cargo build\nerror: AGENTS.md missing"));
    }

    #[test]
    fn images_stay_beside_the_placeholder_and_in_the_stored_original() {
        let image = Block::Image(ImageBlock {
            source: ImageSource::Base64 {
                media_type: "image/png".into(),
                data: "iVBORw0KGgo=".into(),
            },
            extra: Extra::new(),
        });
        let messages = vec![
            Message::text(Role::User, "screenshot"),
            call("c1", "browser"),
            result(
                "c1",
                "browser",
                vec![Block::text(big_log(200)), image.clone()],
            ),
        ];
        let out = offload(
            messages,
            &OffloadSettings::default(),
            &mut OffloadCache::default(),
            |_, _| true,
        );
        let kept = out.messages[2].tool_results().next().unwrap();
        assert_eq!(kept.content.len(), 2);
        assert_eq!(kept.content[1], image);
        assert_eq!(out.new_refs[0].payload.blocks[1], image);
    }

    #[test]
    fn the_selector_defers_results_and_is_only_asked_about_eligible_ones() {
        let mut asked = Vec::new();
        let messages = vec![
            Message::text(Role::User, "go"),
            call("c1", "bash"),
            result("c1", "bash", vec![Block::text(big_log(200))]),
            call("c2", "bash"),
            result("c2", "bash", vec![Block::text("short")]),
        ];
        let out = offload(
            messages,
            &OffloadSettings::default(),
            &mut OffloadCache::default(),
            |i, r| {
                asked.push((i, r.call_id.clone()));
                false
            },
        );
        assert_eq!(asked, vec![(2, "c1".to_owned())]);
        assert_eq!(out.report.deferred, 1);
        assert!(out.new_refs.is_empty());
    }

    #[test]
    fn disabled_stage_changes_nothing() {
        let settings = OffloadSettings {
            enabled: false,
            ..OffloadSettings::default()
        };
        let input = conversation(&big_log(200));
        let out = offload(
            input.clone(),
            &settings,
            &mut OffloadCache::default(),
            |_, _| true,
        );
        assert_eq!(out.messages, input);
    }
}
