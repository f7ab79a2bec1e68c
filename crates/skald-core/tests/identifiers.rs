//! Properties of identifier extraction on arbitrary text: every identifier is in the text as
//! written, each appears once, limits hold, and the text always mentions what was extracted
//! from it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use skald_core::identifiers::{
    extract_identifiers, extract_identifiers_limited, extract_path_like, find_identifiers,
    find_identifiers_for_display, find_path_like, mentions_identifier, normalize_identifier,
};

fn texty() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        any::<String>(),
        "[ -~]{0,60}",
        "[0-9a-fA-F]{6,44}",
        "https?://[a-z]{1,10}\\.[a-z]{2,3}(/[ -~&&[^ ]]{0,12}){0,3}",
        "(/[a-zA-Z0-9_.-]{1,8}){1,5}",
        "[A-Za-z]:\\\\[a-z]{1,8}(\\\\[a-z.]{1,8}){0,3}",
        "[a-z]{1,8}\\.[a-z]{1,8}:[0-9]{1,6}",
        "[0-9]{5,9}",
        "[a-z]{1,8}(/[a-z_]{1,8}){0,3}\\.[a-z]{1,4}(:[0-9]{1,4}){0,2}",
        "[(\"'`<\\[{]{0,2}",
        "[)\\]\"'`,;:.!?<>]{0,2}",
    ];
    prop::collection::vec(piece, 0..24).prop_map(|pieces| pieces.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn extracted_identifiers_are_in_the_text_once(text in texty()) {
        let ids = extract_identifiers(&text);
        let mut keys: Vec<String> = ids.iter().map(|id| normalize_identifier(id).into_owned()).collect();
        keys.sort();
        keys.dedup();
        prop_assert_eq!(keys.len(), ids.len());
        for id in &ids {
            prop_assert!(text.contains(id.as_str()), "{id:?} not in {text:?}");
            prop_assert!(id.chars().count() >= 4);
            prop_assert!(mentions_identifier(&text, id));
        }
    }

    #[test]
    fn limited_extraction_is_a_prefix(text in texty(), max in 0usize..16) {
        let all = extract_identifiers(&text);
        let limited = extract_identifiers_limited(&text, max);
        prop_assert!(limited.len() <= max);
        prop_assert_eq!(&limited[..], &all[..limited.len()]);
    }

    #[test]
    fn ranges_slice_back_to_the_identifier(text in texty()) {
        for (range, id) in find_identifiers(&text).chain(find_identifiers_for_display(&text)) {
            prop_assert_eq!(text.get(range), Some(id));
            prop_assert!(id.chars().count() >= 4);
        }
        for (range, path) in find_path_like(&text) {
            prop_assert_eq!(text.get(range), Some(path));
            prop_assert!(path.contains('/') && !path.starts_with('/'));
        }
    }

    #[test]
    fn path_like_paths_are_in_the_text(text in texty()) {
        for path in extract_path_like(&text) {
            prop_assert!(text.contains(path.as_str()));
        }
    }

    #[test]
    fn hex_mentions_ignore_case(hex in "[0-9a-f]{8,40}", prefix in "[ -~]{0,20}") {
        let upper = format!("{prefix}{}", hex.to_ascii_uppercase());
        prop_assert!(mentions_identifier(&upper, &hex));
    }
}
