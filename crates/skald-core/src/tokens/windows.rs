//! The context windows of known model families, so that a call's thresholds (threshold
//! compaction, the memory upload's 50 % and 70 %, the pipeline's share of the window) follow
//! the model a request names instead of one window for every model.
//!
//! A model name is matched by family: lowercased, without a provider prefix (`anthropic/`,
//! `google/`, `openrouter/…/`), the longest family that the name starts with and that ends at a
//! word boundary (`gpt-4o-2024-08-06` is `gpt-4o`, `gpt-4.1-mini` is `gpt-4.1`, not `gpt-4`).
//! A name of no known family (a fine-tune, a local model under its own name) has no window
//! here; the caller then uses its configured default. Where a family's window depends on the
//! deployment (open models), the figure is the one their reference deployments serve; a
//! smaller window only makes compaction come earlier.
//!
//! ```
//! use skald_core::tokens::windows::known_window;
//! assert_eq!(known_window("claude-sonnet-4-5-20250929"), Some(200_000));
//! assert_eq!(known_window("openai/gpt-4o-mini"), Some(128_000));
//! assert_eq!(known_window("google/gemini-3-pro-preview"), Some(1_048_576));
//! assert_eq!(known_window("my-fine-tune"), None);
//! ```

/// Families and their windows in tokens. Longer families win over the shorter ones they
/// start with.
const KNOWN_WINDOWS: &[(&str, u64)] = &[
    // Anthropic: every Claude model since Claude 2.1 has 200k (1M for some only behind a beta
    // header the host sends itself).
    ("claude-instant", 100_000),
    ("claude-2", 100_000),
    ("claude-2.1", 200_000),
    ("claude-3", 200_000),
    ("claude-opus-4", 200_000),
    ("claude-sonnet-4", 200_000),
    ("claude-haiku-4", 200_000),
    ("claude-opus", 200_000),
    ("claude-sonnet", 200_000),
    ("claude-haiku", 200_000),
    // OpenAI.
    ("gpt-3.5-turbo", 16_385),
    ("gpt-4", 8_192),
    ("gpt-4-32k", 32_768),
    ("gpt-4-turbo", 128_000),
    ("gpt-4o", 128_000),
    ("chatgpt-4o", 128_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4.5", 128_000),
    ("gpt-5", 400_000),
    ("gpt-oss", 131_072),
    ("o1", 200_000),
    ("o1-mini", 128_000),
    ("o1-preview", 128_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("codex-mini", 200_000),
    // Google.
    ("gemini-1.5-pro", 2_097_152),
    ("gemini-1.5-flash", 1_048_576),
    ("gemini-2.0", 1_048_576),
    ("gemini-2.5", 1_048_576),
    ("gemini-3", 1_048_576),
    // Open models, as their reference deployments serve them.
    ("llama-3.1", 131_072),
    ("llama-3.2", 131_072),
    ("llama-3.3", 131_072),
    ("llama-4", 131_072),
    ("mistral-large", 131_072),
    ("mistral-small", 32_768),
    ("codestral", 262_144),
    ("qwen2.5", 32_768),
    ("qwen3", 32_768),
    ("deepseek-chat", 65_536),
    ("deepseek-reasoner", 65_536),
];

/// The window of `model`'s family, when it is a known one (see the module docs).
pub fn known_window(model: &str) -> Option<u64> {
    // Called for every proxied call: compared in place, without a lowercase copy.
    let name = model.rsplit('/').next().unwrap_or(model).trim().as_bytes();
    KNOWN_WINDOWS
        .iter()
        .filter(|(family, _)| {
            let family = family.as_bytes();
            name.get(..family.len())
                .is_some_and(|start| start.eq_ignore_ascii_case(family))
                && name
                    .get(family.len())
                    .is_none_or(|next| !next.is_ascii_alphanumeric())
        })
        .max_by_key(|(family, _)| family.len())
        .map(|&(_, tokens)| tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_family_is_matched_with_its_dates_versions_and_provider_prefixes() {
        for (model, window) in [
            ("claude-opus-4-6", 200_000),
            ("claude-haiku-4-5-20251001", 200_000),
            ("claude-3-5-sonnet-latest", 200_000),
            ("anthropic/claude-3.7-sonnet", 200_000),
            ("Claude-Sonnet-4-5", 200_000),
            ("gpt-4o-2024-08-06", 128_000),
            ("gpt-4o-mini", 128_000),
            ("gpt-4.1-mini", 1_047_576),
            ("gpt-4-0613", 8_192),
            ("gpt-4-turbo-preview", 128_000),
            ("gpt-5-codex", 400_000),
            ("o1-mini-2024-09-12", 128_000),
            ("o3-mini", 200_000),
            ("google/gemini-3-pro-preview", 1_048_576),
            ("gemini-2.5-flash", 1_048_576),
            ("openrouter/meta-llama/llama-3.3-70b-instruct", 131_072),
        ] {
            assert_eq!(known_window(model), Some(window), "{model}");
        }
    }

    #[test]
    fn a_family_must_end_at_a_word_boundary_and_unknown_names_have_none() {
        for model in [
            "gpt-test",
            "claude-test",
            "o3x",
            "gpt-4x",
            "my-fine-tune",
            "",
            "scripted-model",
        ] {
            assert_eq!(known_window(model), None, "{model}");
        }
    }
}
