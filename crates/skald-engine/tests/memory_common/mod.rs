//! Fixtures shared by the memory tests: a small store of Alice's (and Bob's) memories, a
//! store whose search fails, two embedders, and an engine configuration for Alice.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::sync::Arc;

use async_trait::async_trait;
use skald_core::memory::uri::MemoryUri;
use skald_core::pipeline::policy::Policy;
use skald_engine::memory::MemoryIdentity;
use skald_engine::{AfterTurn, Clock, Engine, EngineConfig, UploadStep};
use skald_llm::LlmError;
use skald_llm::embed::Embedder;
use skald_store::ManualClock;
use skald_store::memories::{
    AddOutcome, DirEntry, LeaseState, Memory, MemoryError, MemorySettings, MemoryStats,
    MemoryStore, NewMemory, SearchHit, SearchQuery, TreeNode, UpdateOutcome,
};
use tokio_util::sync::CancellationToken;

pub const TENANT: &str = "acme";
pub const DAY_MS: i64 = 86_400_000;
/// 2023-05-01T00:00:00Z.
pub const MAY_1_2023: i64 = 1_682_899_200_000;

pub fn identity() -> MemoryIdentity {
    MemoryIdentity::new("alice", "main").unwrap()
}

/// An engine configuration running `policy` whose memory is [`identity`]'s, its now read from
/// `clock`.
pub fn alice_config(policy: &str, clock: Arc<dyn Clock>) -> EngineConfig {
    let mut config = EngineConfig::new(Policy::preset(policy).unwrap());
    let alice = identity();
    config.memory.user = alice.user().to_owned();
    config.memory.agent = alice.agent().to_owned();
    config.clock = clock;
    config
}

fn uri(text: &str) -> MemoryUri {
    MemoryUri::parse(text).unwrap()
}

pub fn empty_store() -> Arc<dyn MemoryStore> {
    skald_store::test_stores::memory_store_with(
        MemorySettings::default(),
        Arc::new(ManualClock::new(MAY_1_2023 + 30 * DAY_MS)),
    )
}

pub fn fixture_store() -> Arc<dyn MemoryStore> {
    let store = empty_store();
    let memories = [
        (
            "viking://user/alice/memories/profile/profile.md",
            "Alice Martin, SRE at Acme in Lyon. Prefers concise answers with commands she can paste.",
            None,
            0,
        ),
        (
            "viking://user/alice/memories/profile/languages.md",
            "Alice speaks French and English.",
            None,
            1,
        ),
        (
            "viking://user/alice/memories/preferences/editor.md",
            "Alice prefers dark mode in every editor.",
            None,
            2,
        ),
        (
            "viking://user/alice/memories/entities/billing-db.md",
            "The billing database runs on Postgres 15 with pgbouncer in front. Slow queries on \
             the invoices table were traced to a missing index on customer_id; the index was \
             added on 9 May 2023.",
            Some("Billing database: Postgres 15 behind pgbouncer."),
            8,
        ),
        (
            "viking://user/alice/memories/events/2023/05/08/db-migration.md",
            "On 8 May 2023 Alice migrated the billing database from Postgres 13 to 15.",
            None,
            7,
        ),
        (
            "viking://user/alice/memories/events/2023/05/12/team-lunch.md",
            "Lunch with the database team on Friday.",
            None,
            11,
        ),
        (
            "viking://agent/main/memories/cases/slow-invoices.md",
            "Slow invoice queries: add an index on invoices.customer_id; p95 fell from 2 s to \
             40 ms.",
            None,
            9,
        ),
        (
            "viking://agent/main/skills/pptx/tips/dark-theme.md",
            "User prefers dark theme templates.",
            None,
            3,
        ),
        (
            "viking://agent/main/skills/pptx/examples/q3-report.md",
            "Successfully created the Q3 financial report deck.",
            None,
            4,
        ),
        (
            "viking://agent/main/skills/pptx/issues/large-images.md",
            "Large images (>10MB) sometimes fail; compress them first.",
            None,
            5,
        ),
        (
            "viking://resources/docs/runbook.md",
            "Runbook: restart pgbouncer with systemctl restart pgbouncer, then check the billing \
             database connections.",
            None,
            6,
        ),
        (
            "viking://user/bob/memories/entities/billing.md",
            "Bob's notes on the billing database: Postgres 15 tuning for invoices queries.",
            None,
            10,
        ),
    ];
    for (text, content, l0, day) in memories {
        let mut memory = NewMemory::new(uri(text), content).created_at(MAY_1_2023 + day * DAY_MS);
        if let Some(l0) = l0 {
            memory = memory.with_l0(l0);
        }
        store.add(&tenant_named(TENANT), memory).unwrap();
    }
    store
}

/// Agent `main`'s usage counts of `skill` as the store keeps them (its `stats.json`): what the
/// engine reads when a `SKILL.md` read gets its appendix. No use case records a skill's uses
/// yet, so the tests put the counts there themselves.
pub fn set_skill_usage(store: &dyn MemoryStore, skill: &str, uses: u64, successes: u64) {
    let uri = uri(&format!(
        "viking://agent/main/skills/{skill}/{}",
        skald_core::memory::usage::SKILL_STATS_FILE
    ));
    let usage = skald_core::memory::usage::SkillUsage { uses, successes };
    let memory = NewMemory::new(uri.clone(), serde_json::to_string(&usage).unwrap());
    let tenant = tenant_named(TENANT);
    match store.get(&tenant, &uri) {
        Ok(_) => {
            store.update(&tenant, memory).unwrap();
        }
        Err(_) => {
            store.add(&tenant, memory).unwrap();
        }
    }
}

/// A finished turn of the host in `TENANT`'s `session` on `engine`, its context counted at
/// `tokens` of a 1,000-token window: what the two-threshold upload did.
pub async fn turn_ends_at(
    engine: &Engine,
    session: &skald_core::ids::SessionId,
    tokens: u64,
) -> UploadStep {
    let turn = AfterTurn {
        messages: None,
        pre_prompt_message_count: None,
        tool_reports: None,
        reported_input_tokens: None,
        current_token_count: Some(tokens),
        window_tokens: 1000,
        source_format: "openclaw-session",
    };
    let outcome = engine
        .after_turn(&tenant_named(TENANT), session, &turn)
        .await
        .unwrap();
    assert!(
        outcome.memory_errors.is_empty(),
        "{:?}",
        outcome.memory_errors
    );
    outcome.upload.unwrap()
}

/// The upload records of `TENANT`'s `session`, in order: `"<upload id> <status>"`.
pub fn upload_statuses(engine: &Engine, session: &skald_core::ids::SessionId) -> Vec<String> {
    engine
        .load_session(&tenant_named(TENANT), session)
        .unwrap()
        .entries()
        .iter()
        .filter_map(|entry| {
            entry
                .kind
                .custom_data(skald_engine::memory::UPLOAD_CUSTOM_TYPE)
        })
        .map(|data| {
            format!(
                "{} {}",
                data["upload_id"].as_str().unwrap(),
                data["status"].as_str().unwrap()
            )
        })
        .collect()
}

/// A store whose search always fails.
pub struct FailingSearch(pub Arc<dyn MemoryStore>);

impl MemoryStore for FailingSearch {
    fn add(
        &self,
        tenant: &skald_core::ids::Tenant,
        memory: NewMemory,
    ) -> Result<AddOutcome, MemoryError> {
        self.0.add(tenant, memory)
    }
    fn add_many(
        &self,
        tenant: &skald_core::ids::Tenant,
        memories: Vec<NewMemory>,
    ) -> Result<Vec<AddOutcome>, MemoryError> {
        self.0.add_many(tenant, memories)
    }
    fn update(
        &self,
        tenant: &skald_core::ids::Tenant,
        memory: NewMemory,
    ) -> Result<UpdateOutcome, MemoryError> {
        self.0.update(tenant, memory)
    }
    fn forget(
        &self,
        tenant: &skald_core::ids::Tenant,
        uri: &MemoryUri,
    ) -> Result<Memory, MemoryError> {
        self.0.forget(tenant, uri)
    }
    fn get(
        &self,
        tenant: &skald_core::ids::Tenant,
        uri: &MemoryUri,
    ) -> Result<Memory, MemoryError> {
        self.0.get(tenant, uri)
    }
    fn history(
        &self,
        tenant: &skald_core::ids::Tenant,
        uri: &MemoryUri,
    ) -> Result<Vec<Memory>, MemoryError> {
        self.0.history(tenant, uri)
    }
    fn ls(
        &self,
        tenant: &skald_core::ids::Tenant,
        dir: &MemoryUri,
    ) -> Result<Vec<DirEntry>, MemoryError> {
        self.0.ls(tenant, dir)
    }
    fn tree(
        &self,
        tenant: &skald_core::ids::Tenant,
        dir: &MemoryUri,
        max_depth: usize,
    ) -> Result<TreeNode, MemoryError> {
        self.0.tree(tenant, dir, max_depth)
    }
    fn search(
        &self,
        _: &skald_core::ids::Tenant,
        _: &SearchQuery,
    ) -> Result<Vec<SearchHit>, MemoryError> {
        Err(MemoryError::Corrupt("disk I/O error".into()))
    }
    fn set_embedding(
        &self,
        tenant: &skald_core::ids::Tenant,
        uri: &MemoryUri,
        vector: &[f32],
    ) -> Result<(), MemoryError> {
        self.0.set_embedding(tenant, uri, vector)
    }
    fn stats(&self, tenant: &skald_core::ids::Tenant) -> Result<MemoryStats, MemoryError> {
        self.0.stats(tenant)
    }
    fn claim_lease(
        &self,
        tenant: &skald_core::ids::Tenant,
        name: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<LeaseState, MemoryError> {
        self.0.claim_lease(tenant, name, holder, ttl_ms)
    }
    fn finish_lease(
        &self,
        tenant: &skald_core::ids::Tenant,
        name: &str,
        holder: &str,
        result: &str,
    ) -> Result<bool, MemoryError> {
        self.0.finish_lease(tenant, name, holder, result)
    }
    fn release_lease(
        &self,
        tenant: &skald_core::ids::Tenant,
        name: &str,
        holder: &str,
    ) -> Result<bool, MemoryError> {
        self.0.release_lease(tenant, name, holder)
    }
    fn lease(
        &self,
        tenant: &skald_core::ids::Tenant,
        name: &str,
        viewer: &str,
    ) -> Result<LeaseState, MemoryError> {
        self.0.lease(tenant, name, viewer)
    }
}

/// An embedder that is always down.
pub struct FailingEmbedder;

#[async_trait]
impl Embedder for FailingEmbedder {
    fn name(&self) -> &str {
        "down"
    }
    fn dimensions(&self) -> Option<usize> {
        None
    }
    async fn embed(&self, _: &[String], _: &CancellationToken) -> Result<Vec<Vec<f32>>, LlmError> {
        Err(LlmError::Timeout {
            message: "embedding endpoint timed out".into(),
        })
    }
}

/// A deterministic bag-of-words embedder: each word adds one to a hashed dimension.
pub struct KeywordEmbedder;

#[async_trait]
impl Embedder for KeywordEmbedder {
    fn name(&self) -> &str {
        "keywords"
    }
    fn dimensions(&self) -> Option<usize> {
        Some(32)
    }
    async fn embed(
        &self,
        texts: &[String],
        _: &CancellationToken,
    ) -> Result<Vec<Vec<f32>>, LlmError> {
        Ok(texts
            .iter()
            .map(|text| {
                let mut vector = [0.0f32; 32];
                for word in text.split_whitespace() {
                    let slot = word
                        .to_lowercase()
                        .bytes()
                        .fold(7usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
                    vector[slot % 32] += 1.0;
                }
                vector[0] += 0.01;
                let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
                vector.iter().map(|x| x / norm).collect()
            })
            .collect())
    }
}

pub async fn embed(embedder: &dyn Embedder, text: &str) -> Vec<f32> {
    embedder
        .embed(&[text.to_owned()], &CancellationToken::new())
        .await
        .unwrap()
        .remove(0)
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}
