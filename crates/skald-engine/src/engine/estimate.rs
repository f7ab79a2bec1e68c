//! [`Engine::would_have_saved`]: for a session skald did not serve (an imported transcript),
//! what its calls would have cost under the engine's policy — a replay of them billed as the
//! host was billed (`replay::host`, fitted to the usage the session recorded), an estimate the
//! dashboard labels as one, never a saving skald made.

use skald_core::codec::claude_code::COMPACT_BOUNDARY;
use skald_core::ids::{SessionId, Tenant};
use skald_core::message::{Message, Role};
use skald_core::pipeline::policy::Policy;
use skald_core::session::{EntryKind, Session};

use super::Engine;
use crate::replay::{ProviderCache, ReplayError, ReplaySettings, billed, host_fit, replay};

/// What a replay says a session would have cost under skald.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayEstimate {
    /// Calls with recorded usage.
    pub calls: u64,
    /// Dollars the provider billed for them (their recorded usage at the engine's prices).
    pub billed_usd: f64,
    /// Dollars the `none` policy's replay is billed as the host was: how close the replay's
    /// provider model comes to the bill on this session.
    pub none_usd: f64,
    /// Dollars the engine's policy's replay is billed as the host was.
    pub policy_usd: f64,
    /// The policy replayed.
    pub policy: String,
}

impl ReplayEstimate {
    /// What the policy would have saved against the bill, by the replay.
    pub fn saved_usd(&self) -> f64 {
        self.none_usd - self.policy_usd
    }
}

impl Engine {
    /// What the session's calls would have cost under the engine's policy, by a replay billed as
    /// the host was; `None` when no call recorded usage (there is no bill to start from). The
    /// replay runs the engine's own turn loop over throw-away in-memory stores (memory and
    /// compaction as this engine is configured); it is CPU work of up to seconds on a long
    /// session, for a caller to run off its async workers.
    pub async fn would_have_saved(
        &self,
        tenant: &Tenant,
        session: &SessionId,
    ) -> Result<Option<ReplayEstimate>, ReplayError> {
        let session = self
            .sessions()
            .load(tenant, session)
            .map_err(crate::EngineError::from)?;
        let messages = calls_as_sent(&session);
        let config = self.config();
        let mut settings = ReplaySettings {
            context_window_tokens: config.window_tokens,
            pricing: config.pricing,
            provider_cache: ProviderCache::of_answers(&messages),
            memory: config.memory.enabled,
            compaction: config.compaction.enabled,
            ..ReplaySettings::default()
        };
        let Some(bill) = billed(&messages, &settings.pricing) else {
            return Ok(None);
        };
        settings.host = host_fit(&messages, &settings);
        // Each policy its own throw-away engine: refs and memories of one must not help the other.
        let cost = |figures: crate::replay::PolicyFigures| {
            figures.host.map_or(figures.cost_usd, |host| host.cost_usd)
        };
        let none = Policy::preset("none").map_err(crate::EngineError::from)?;
        let none_usd = cost(replay(&messages, &none, &settings).await?);
        let policy_usd = cost(replay(&messages, &config.policy, &settings).await?);
        Ok(Some(ReplayEstimate {
            calls: bill.calls,
            billed_usd: bill.cost_usd,
            none_usd,
            policy_usd,
            policy: config.policy.name.clone(),
        }))
    }
}

/// The session's messages on its active path as its calls were sent: a compaction checkpoint
/// becomes a compaction boundary and its summary, so a call after it is replayed from there (as
/// the host sent it) and not with the whole history before.
fn calls_as_sent(session: &Session) -> Vec<Message> {
    let mut messages = Vec::new();
    for entry in session.path_to(None) {
        if let EntryKind::Compaction { summary, .. } = &entry.kind {
            messages.push(Message::new(
                Role::Custom(COMPACT_BOUNDARY.to_owned()),
                Vec::new(),
            ));
            messages.push(Message::text(Role::User, summary.clone()));
        } else if let Some(message) = entry.kind.as_message() {
            messages.push(message.clone());
        }
    }
    messages
}
