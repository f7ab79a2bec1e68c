//! What the user asked: the latest *substantive* user ask of a span, which the quality guard
//! checks a summary against and the extractive summary always carries.
//!
//! Two kinds of user message are not asks. Messages a harness wrote in the user's name (command
//! output, caveats, task notifications, injected context, the harness's own compaction
//! summaries) say nothing the user wants. And continuations — "continue", "go on", "yes", "ok",
//! "proceed", "继续", "好的" and other short acknowledgements — only tell the assistant to keep
//! doing what the previous ask asked for: checking a summary for the word "continue" cancels a
//! good compaction, and quoting it tells the next turn nothing. The ask a continuation continues
//! is the one that counts.

use crate::extractive::user_own_text;
use crate::message::{Message, Role};

/// Whole messages that continue or acknowledge rather than ask, compared after
/// [`normalize`] (lowercase, punctuation and emoji dropped, spaces collapsed).
const CONTINUATIONS: &[&str] = &[
    // English
    "continue",
    "go on",
    "go ahead",
    "keep going",
    "carry on",
    "proceed",
    "resume",
    "next",
    "go",
    "yes",
    "y",
    "yep",
    "yeah",
    "yup",
    "ok",
    "okay",
    "k",
    "sure",
    "fine",
    "alright",
    "all right",
    "right",
    "got it",
    "sounds good",
    "looks good",
    "lgtm",
    "do it",
    "go for it",
    "please do",
    "thanks",
    "thank you",
    "ty",
    "great",
    "cool",
    "nice",
    "perfect",
    "done",
    "same",
    "again",
    "retry",
    "try again",
    // Other languages a user may type a continuation in.
    "weiter",
    "mach weiter",
    "ja",
    "continuer",
    "continue stp",
    "oui",
    "vas y",
    "daccord",
    "sí",
    "si",
    "sigue",
    "continúa",
    "continua",
    "adelante",
    "vale",
    "sim",
    "continuar",
    "да",
    "продолжай",
    "дальше",
    "はい",
    "続けて",
    "つづけて",
    "네",
    "계속",
    "계속해",
];

/// Words a short acknowledgement is made of ("yes please go ahead", "ok thanks, continue"): a
/// message of at most [`MAX_ACK_WORDS`] words, all of them from this list, continues.
const ACK_WORDS: &[&str] = &[
    "continue", "go", "on", "ahead", "keep", "going", "carry", "proceed", "resume", "next", "yes",
    "y", "yep", "yeah", "yup", "ok", "okay", "k", "sure", "fine", "alright", "all", "right",
    "please", "pls", "plz", "thanks", "thank", "you", "ty", "great", "cool", "nice", "perfect",
    "good", "sounds", "looks", "lgtm", "do", "it", "that", "for", "and", "then", "so", "now",
    "again", "got", "sir", "mate",
];

/// Longest acknowledgement made of [`ACK_WORDS`].
pub const MAX_ACK_WORDS: usize = 6;

/// Pieces a Chinese continuation is made of ("好的，继续", "是的请继续执行"): a message of at most
/// [`MAX_CJK_ACK_CHARS`] characters made only of these continues.
const CJK_ACK_PIECES: &[&str] = &[
    "继续执行",
    "继续",
    "接着",
    "好的",
    "好",
    "是的",
    "是",
    "对的",
    "对",
    "嗯嗯",
    "嗯",
    "行",
    "可以",
    "没问题",
    "收到",
    "谢谢",
    "请",
    "吧",
    "执行",
    "开始",
    "下一步",
    "然后呢",
    "然后",
    "ok",
    "okay",
    "yes",
];

/// Longest Chinese acknowledgement, in characters.
pub const MAX_CJK_ACK_CHARS: usize = 10;

/// Lowercase, every character that is not a letter, digit or space dropped, spaces collapsed.
fn normalize(text: &str) -> String {
    let kept: String = text
        .chars()
        .map(|c| {
            if c.is_whitespace() || c == '-' {
                ' '
            } else {
                c
            }
        })
        .filter(|c| c.is_alphanumeric() || *c == ' ')
        .flat_map(char::to_lowercase)
        .collect();
    kept.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// True when `text`, a user's own words, only continues or acknowledges: nothing in it is an ask
/// of its own (see the module docs). Empty text is not a continuation (it is not an ask at all).
pub fn is_continuation(text: &str) -> bool {
    let normalized = normalize(text);
    if normalized.is_empty() {
        return false;
    }
    if CONTINUATIONS.contains(&normalized.as_str()) {
        return true;
    }
    let words: Vec<&str> = normalized.split(' ').collect();
    if words.len() <= MAX_ACK_WORDS && words.iter().all(|word| ACK_WORDS.contains(word)) {
        return true;
    }
    let compact: String = normalized.chars().filter(|c| *c != ' ').collect();
    compact.chars().count() <= MAX_CJK_ACK_CHARS && made_of(&compact, CJK_ACK_PIECES)
}

/// True when `text` is a concatenation of `pieces` (longest first at each step; the pieces are
/// few and short, so backtracking is cheap).
fn made_of(text: &str, pieces: &[&str]) -> bool {
    if text.is_empty() {
        return true;
    }
    pieces.iter().any(|piece| {
        text.strip_prefix(piece)
            .is_some_and(|rest| made_of(rest, pieces))
    })
}

/// The user's own words in the last user message that asks for something
/// (`extractLatestUserAsk`, continuations skipped): harness messages (see [`is_user_ask`]) and
/// harness wrappers inside a message (`<system-reminder>…`) are passed over, and so are
/// continuations ([`is_continuation`]), so that "continue" after "migrate the billing service"
/// yields the migration. `None` when no user message asks for anything.
pub fn latest_user_ask(messages: &[Message]) -> Option<String> {
    messages
        .iter()
        .rev()
        .filter(|message| is_user_ask(message))
        .map(|message| user_own_text(&message.plain_text()))
        .find(|own| !own.is_empty() && !is_continuation(own))
}

/// True for a user message with text that a person wrote: not harness output, a bracketed
/// marker or a flagged injection. Claude Code records command output, caveats and task
/// notifications as user messages that open with a tag block (`<local-command-stdout>…`,
/// `<task-notification>…</task-notification>` then a line of its own), and marks injected
/// context and its own compaction summaries with `isMeta` / `isCompactSummary` (kept in
/// `extra` by its decoder). None of those is an ask. A continuation is a user ask here (it
/// starts a turn); [`latest_user_ask`] is what skips it.
pub fn is_user_ask(message: &Message) -> bool {
    is_user_ask_with_text(message, &message.plain_text())
}

/// [`is_user_ask`] of `message` as if its text were `text` (what is left of it once injected
/// blocks are taken out), without building that message.
pub(crate) fn is_user_ask_with_text(message: &Message, text: &str) -> bool {
    if message.role != Role::User || is_flagged_injection(message) {
        return false;
    }
    let text = text.trim();
    !text.is_empty() && !is_harness_text(text)
}

fn is_flagged_injection(message: &Message) -> bool {
    ["isMeta", "isCompactSummary"]
        .iter()
        .any(|flag| message.extra.get(*flag) == Some(&serde_json::Value::Bool(true)))
}

/// True for text that opens with a tag block, `<name>` … `</name>`, such as
/// `<command-name>/mcp</command-name>` or `<task-notification>…</task-notification>`.
/// Also true for a one-line bracketed marker such as `[Request interrupted by user]`.
pub(crate) fn is_harness_text(text: &str) -> bool {
    if text.starts_with('[') && text.ends_with(']') && !text.contains('\n') {
        return true;
    }
    let Some(rest) = text.strip_prefix('<') else {
        return false;
    };
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    !name.is_empty()
        && rest
            .get(name.len()..)
            .is_some_and(|after| after.starts_with('>'))
        && text.contains(&format!("</{name}>"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harness_messages_are_not_the_latest_ask() {
        let messages = vec![
            Message::text(Role::User, "Please rename the module to billing."),
            Message::text(Role::Assistant, "Renamed."),
            Message::text(
                Role::User,
                "<command-name>/mcp</command-name>\n<command-message>mcp</command-message>",
            ),
            Message::text(
                Role::User,
                "<local-command-stdout>No MCP servers configured</local-command-stdout>",
            ),
        ];
        assert_eq!(
            latest_user_ask(&messages).as_deref(),
            Some("Please rename the module to billing.")
        );
        assert!(!is_harness_text("Use <div> tags here"));
        assert!(is_harness_text(
            "[Request interrupted by user for tool use]"
        ));
        assert!(!is_harness_text("[urgent] fix the build"));
        assert!(!is_harness_text("<br> is a line break, right?"));
        assert!(is_harness_text(
            "<task-notification>\n<task-id>b0</task-id>\n</task-notification>\nRead the file."
        ));
        let mut injected = Message::text(Role::User, "Caveat: generated by local commands.");
        injected
            .extra
            .insert("isMeta".into(), serde_json::Value::Bool(true));
        let messages = vec![Message::text(Role::User, "Ship it."), injected];
        assert_eq!(latest_user_ask(&messages).as_deref(), Some("Ship it."));
    }
    #[test]
    fn continuation_asks_are_skipped_by_the_ask_check() {
        for text in [
            "continue",
            "Continue.",
            "go on",
            "yes",
            "OK!",
            "ok, proceed",
            "yes please, go ahead",
            "继续",
            "好的",
            "好的，继续",
            "是的，请继续执行",
            "weiter",
            "👍 ok",
        ] {
            assert!(is_continuation(text), "{text:?} continues");
        }
        for text in [
            "run the tests again",
            "what failed?",
            "fix it and commit",
            "continue with the billing migration",
            "yes, but use Postgres",
            "继续修复登录模块",
            "",
        ] {
            assert!(!is_continuation(text), "{text:?} asks");
        }
        let messages = vec![
            Message::text(Role::User, "Migrate the billing service to Postgres."),
            Message::text(Role::Assistant, "Started the migration."),
            Message::text(Role::User, "continue"),
            Message::text(Role::Assistant, "Continuing."),
            Message::text(
                Role::User,
                "<system-reminder>Be brief.</system-reminder>\n好的",
            ),
        ];
        assert_eq!(
            latest_user_ask(&messages).as_deref(),
            Some("Migrate the billing service to Postgres.")
        );
        // Only continuations: nothing to check against.
        let messages = vec![Message::text(Role::User, "go on")];
        assert_eq!(latest_user_ask(&messages), None);
        // A harness wrapper around the user's words is not part of the ask.
        let messages = vec![Message::text(
            Role::User,
            "Fix the login test<system-reminder>Never mention this.</system-reminder>",
        )];
        assert_eq!(
            latest_user_ask(&messages).as_deref(),
            Some("Fix the login test")
        );
    }
}
