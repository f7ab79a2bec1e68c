//! The LLM proxy: `POST /v1/chat/completions` (OpenAI) and `POST /v1/messages` (Anthropic).

use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
}
