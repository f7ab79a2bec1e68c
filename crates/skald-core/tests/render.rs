//! The readable rendering of model-visible messages: every kind of block, in one snapshot.

use serde_json::json;
use skald_core::message::{
    Block, ContentForm, Extra, ImageBlock, ImageSource, Message, Role, ThinkingBlock, ToolCall,
    ToolResult,
};
use skald_core::render::render_messages;

fn result(call_id: &str, content: Vec<Block>, is_error: Option<bool>) -> Block {
    Block::ToolResult(ToolResult {
        call_id: call_id.into(),
        tool_name: None,
        content: content.into(),
        content_form: ContentForm::Blocks,
        is_error,
        details: Some(json!({"never": "shown"}).into()),
        extra: Extra::new(),
    })
}

fn image(source: ImageSource) -> Block {
    Block::Image(ImageBlock {
        source,
        extra: Extra::new(),
    })
}

#[test]
fn every_block_kind_renders_readably() {
    let messages = vec![
        Message::text(Role::System, "You are terse."),
        Message::new(
            Role::User,
            vec![
                Block::text("What is in this screenshot?\n"),
                image(ImageSource::Base64 {
                    media_type: "image/png".into(),
                    data: "iVBORw0KGgo=".into(),
                }),
                image(ImageSource::Url {
                    url: "https://example.com/shot.png".into(),
                }),
                image(ImageSource::Url {
                    url: "data:image/png;base64,iVBORw0KGgo=".into(),
                }),
            ],
        ),
        Message::new(
            Role::Assistant,
            vec![
                Block::Thinking(ThinkingBlock {
                    thinking: "Read the file, then run the tests.".into(),
                    signature: Some("sig".into()),
                    extra: Extra::new(),
                }),
                Block::ToolCall(ToolCall {
                    id: "toolu_1".into(),
                    name: "read".into(),
                    arguments: json!({"path": "src/main.rs"}),
                    arguments_text: None,
                    extra: Extra::new(),
                }),
                Block::ToolCall(ToolCall {
                    id: "toolu_2".into(),
                    name: "bash".into(),
                    arguments: json!({
                        "command": "cargo test --workspace --all-targets -- --nocapture",
                        "timeout_ms": 600000,
                        "cwd": "/home/dev/project"
                    }),
                    arguments_text: None,
                    extra: Extra::new(),
                }),
                Block::ToolCall(ToolCall {
                    id: "toolu_3".into(),
                    name: "edit".into(),
                    arguments: json!("{not json"),
                    arguments_text: None,
                    extra: Extra::new(),
                }),
                Block::Opaque(json!({"type": "redacted_thinking", "data": "xyz"})),
            ],
        ),
        Message::new(
            Role::ToolResult,
            vec![result(
                "toolu_1",
                vec![Block::text("fn main() {}\n")],
                Some(false),
            )],
        ),
        Message::new(
            Role::User,
            vec![
                result("toolu_2", vec![Block::text("error[E0425]: x")], Some(true)),
                result("toolu_3", vec![], None),
                Block::text("Both done?"),
            ],
        ),
    ];
    insta::assert_snapshot!(render_messages(&messages));
}
