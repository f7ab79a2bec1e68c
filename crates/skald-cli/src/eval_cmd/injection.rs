//! What per-turn recall would inject for each LoCoMo question, and how much of it is evidence:
//! the question goes through the engine's own recall (`Engine::recall_for_prompt`, over the
//! evaluation's store: its query, search, relevance floor, `max_results` and token budget), as
//! the prompt of a turn, and the memories it keeps are compared with the question's evidence.
//!
//! - injection precision: the share of injected memories that come from one of the question's
//!   evidence sessions (a memory that merged duplicate turns counts when any of them does), over
//!   every injected memory of the group;
//! - turn precision: the same share for the evidence turns themselves;
//! - nothing injected: questions for which recall injected no memory (skipped, or every hit
//!   below the floor).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use anyhow::{Result, bail};
use skald_core::ids::Tenant;
use skald_core::memory::recall::RecallSettings;
use skald_core::pipeline::policy::Policy;
use skald_engine::storage::MemoryStore;
use skald_engine::{Engine, EngineConfig, Stores};
use tokio_util::task::TaskTracker;

use super::locomo::TurnRef;

/// The user and agent names recall runs as: LoCoMo's memories are session archives, which
/// every identity sees.
const IDENTITY: (&str, &str) = ("locomo", "locomo");

/// What recall injected for one question, judged against its evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Injected {
    /// Memories injected.
    pub memories: usize,
    /// Of them, those from an evidence session.
    pub from_evidence_sessions: usize,
    /// Of them, those holding an evidence turn.
    pub holding_evidence_turns: usize,
}

/// Runs the engine's recall for questions, on one runtime.
pub struct Injector<'a> {
    runtime: Option<tokio::runtime::Runtime>,
    block_on_embedding: Option<&'a super::Embedding>,
    /// An engine over the evaluation's memories, recalling as [`IDENTITY`] with the settings.
    engine: Engine,
}

impl<'a> Injector<'a> {
    /// An injector over `memories` with `settings`; with `embedding`, recall also embeds each
    /// question (on the embedding's runtime), as the engine does with an embedder configured.
    pub fn new(
        memories: Arc<dyn MemoryStore>,
        settings: RecallSettings,
        embedding: Option<&'a super::Embedding>,
    ) -> Result<Self> {
        if let Err(error) = settings.validate() {
            bail!("{error}");
        }
        let runtime = match embedding {
            Some(_) => None,
            None => Some(
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?,
            ),
        };
        let mut config = EngineConfig::new(Policy::preset("skald")?);
        config.memory.enabled = true;
        config.memory.user = IDENTITY.0.to_owned();
        config.memory.agent = IDENTITY.1.to_owned();
        config.memory.recall = settings;
        config.embedder = embedding.map(super::Embedding::shared);
        let stores = Stores {
            memories,
            ..Stores::in_memory()?
        };
        Ok(Injector {
            runtime,
            block_on_embedding: embedding,
            engine: Engine::new(stores, config, TaskTracker::new())?,
        })
    }

    /// The recall settings used.
    pub fn settings(&self) -> &RecallSettings {
        &self.engine.config().memory.recall
    }

    /// What recall injects for `question` in `tenant`'s memories, judged by `evidence`;
    /// `turns_of` gives the turns each injected URI covers.
    pub fn inject(
        &self,
        tenant: &Tenant,
        question: &str,
        evidence: &HashSet<TurnRef>,
        turns_of: &HashMap<String, Vec<TurnRef>>,
    ) -> Result<Injected> {
        let future = self.engine.recall_for_prompt(tenant, question);
        let recall = match (&self.runtime, self.block_on_embedding) {
            (Some(runtime), _) => runtime.block_on(future)?,
            (None, Some(embedding)) => embedding.block_on(future)?,
            // `new` makes a runtime whenever there is no embedding.
            (None, None) => return Ok(Injected::default()),
        };
        // `None`: recall skipped the question or kept nothing.
        let Some(recall) = recall else {
            return Ok(Injected::default());
        };
        let sessions: HashSet<u32> = evidence.iter().map(|turn| turn.session).collect();
        let mut injected = Injected::default();
        for kept in &recall.report.kept {
            let turns = turns_of.get(&kept.uri).map(Vec::as_slice).unwrap_or(&[]);
            injected.memories += 1;
            if turns.iter().any(|turn| sessions.contains(&turn.session)) {
                injected.from_evidence_sessions += 1;
            }
            if turns.iter().any(|turn| evidence.contains(turn)) {
                injected.holding_evidence_turns += 1;
            }
        }
        Ok(injected)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use skald_core::memory::uri::MemoryUri;
    use skald_store::memories::{NewMemory, SqliteMemoryStore};

    use super::*;

    #[test]
    fn injected_memories_are_judged_by_their_sessions_and_turns() {
        let store = Arc::new(SqliteMemoryStore::in_memory().unwrap());
        let tenant = Tenant::parse("conv").unwrap();
        let turn = |session, turn| TurnRef { session, turn };
        let mut turns_of = HashMap::new();
        for (uri, text, at) in [
            (
                "viking://session/c-session-1/D1-3",
                "Caroline: I went to the pottery class with my kids",
                turn(1, 3),
            ),
            (
                "viking://session/c-session-2/D2-1",
                "Melanie: The pottery class was fun, the kids loved it",
                turn(2, 1),
            ),
            (
                "viking://session/c-session-2/D2-2",
                "Caroline: We should bake bread next weekend",
                turn(2, 2),
            ),
            (
                "viking://session/c-session-2/D2-3",
                "Melanie: My sister moved to Boston for a new job",
                turn(2, 3),
            ),
            (
                "viking://session/c-session-3/D3-1",
                "Caroline: I started running in the mornings before work",
                turn(3, 1),
            ),
            (
                "viking://session/c-session-3/D3-2",
                "Melanie: The garden finally has tomatoes this summer",
                turn(3, 2),
            ),
            (
                "viking://session/c-session-3/D3-3",
                "Caroline: Our dog chewed the new sofa again",
                turn(3, 3),
            ),
        ] {
            store
                .add(
                    &tenant,
                    NewMemory::new(MemoryUri::parse(uri).unwrap(), text),
                )
                .unwrap();
            turns_of.insert(uri.to_owned(), vec![at]);
        }
        let injector = Injector::new(store.clone(), RecallSettings::default(), None).unwrap();
        let evidence: HashSet<TurnRef> = [turn(1, 3)].into();
        let injected = injector
            .inject(
                &tenant,
                "Who went to the pottery class with the kids?",
                &evidence,
                &turns_of,
            )
            .unwrap();
        assert_eq!(injected.memories, 2, "{injected:?}");
        assert_eq!(injected.from_evidence_sessions, 1);
        assert_eq!(injected.holding_evidence_turns, 1);
        let nothing = injector
            .inject(&tenant, "thanks!", &evidence, &turns_of)
            .unwrap();
        assert_eq!(nothing, Injected::default());
    }
}
