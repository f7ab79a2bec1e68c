//! How the recall relevance threshold separates evidence from noise on real conversations
//! (LoCoMo, read from `../shared/data`; never copied into the project). Ignored by default:
//! `cargo test -p skald-engine --test memory_threshold_locomo -- --ignored --nocapture`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;

use serde_json::Value;
use skald_core::memory::recall::{RecallCandidate, RecallSettings, select_memories};
use skald_core::memory::uri::MemoryUri;
use skald_store::memories::{MemoryStore, NewMemory, SearchQuery};

const DATA: &str = "../../../shared/data/locomo/locomo-dev.json";

#[test]
#[ignore = "reads the LoCoMo benchmark from ../shared/data"]
fn threshold_keeps_evidence_and_drops_noise_on_locomo() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(DATA);
    let root: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let thresholds = [0.0, 0.34, 0.5, 0.67, 1.0];
    // Per threshold: evidence hits kept, noise hits kept, questions with evidence kept.
    let mut kept_evidence = [0usize; 5];
    let mut kept_noise = [0usize; 5];
    let mut answered = [0usize; 5];
    let (mut evidence_hits, mut noise_hits, mut questions) = (0usize, 0usize, 0usize);
    let store = skald_store::test_stores::memory_store();
    for (index, item) in root.as_array().unwrap().iter().enumerate() {
        let tenant = format!("conv{index}");
        let body = item["conversation"].as_object().unwrap();
        let mut memories = Vec::new();
        for number in 1.. {
            let Some(turns) = body
                .get(&format!("session_{number}"))
                .and_then(Value::as_array)
            else {
                break;
            };
            for turn in turns {
                let dia = turn["dia_id"].as_str().unwrap();
                let uri = MemoryUri::parse_entry(&format!(
                    "viking://session/s{number}/{}",
                    dia.replace(|c: char| !c.is_alphanumeric() && c != ':', "-")
                ))
                .unwrap();
                let text = format!(
                    "{}: {}",
                    turn["speaker"].as_str().unwrap(),
                    turn["text"].as_str().unwrap()
                );
                memories.push(NewMemory::new(uri, text));
            }
        }
        store.add_many(&tenant_named(&tenant), memories).unwrap();
        for qa in item["qa"].as_array().unwrap() {
            let question = qa["question"].as_str().unwrap();
            let evidence: HashSet<String> = qa["evidence"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|id| id.replace(|c: char| !c.is_alphanumeric() && c != ':', "-"))
                .collect();
            if evidence.is_empty() {
                continue;
            }
            let hits = match store.search(&tenant_named(&tenant), &SearchQuery::text(question, 10))
            {
                Ok(hits) => hits,
                Err(_) => continue,
            };
            questions += 1;
            let is_evidence =
                |uri: &str| evidence.contains(uri.rsplit('/').next().unwrap_or_default());
            let candidates: Vec<RecallCandidate> = hits
                .iter()
                .map(|hit| RecallCandidate {
                    uri: hit.memory.uri.to_string(),
                    category: "session".into(),
                    l0: hit.memory.l0.clone(),
                    l1: hit.memory.l1.clone(),
                    l2: hit.memory.l2.clone(),
                    created_at_ms: hit.memory.created_at_ms,
                    cosine: None,
                    text_relevance: hit.text_relevance,
                })
                .collect();
            evidence_hits += candidates.iter().filter(|c| is_evidence(&c.uri)).count();
            noise_hits += candidates.iter().filter(|c| !is_evidence(&c.uri)).count();
            for (slot, threshold) in thresholds.iter().enumerate() {
                let settings = RecallSettings {
                    min_term_coverage: *threshold,
                    // Coverage alone: the relative BM25 floor is measured by `skald eval
                    // locomo` (its injection precision and unrelated-conversation figures).
                    min_text_relevance: 0.0,
                    max_results: 10,
                    max_tokens: 100_000,
                    ..RecallSettings::default()
                };
                let selection = select_memories(&candidates, question, &settings);
                let kept: Vec<&str> = selection
                    .kept
                    .iter()
                    .map(|k| k.candidate.uri.as_str())
                    .collect();
                let evidence_kept = kept.iter().filter(|uri| is_evidence(uri)).count();
                kept_evidence[slot] += evidence_kept;
                kept_noise[slot] += kept.len() - evidence_kept;
                answered[slot] += usize::from(evidence_kept > 0);
            }
        }
    }
    println!(
        "{questions} questions, {evidence_hits} evidence hits, {noise_hits} noise hits in the top 10"
    );
    println!("threshold  evidence kept  noise kept  questions with evidence kept");
    for (slot, threshold) in thresholds.iter().enumerate() {
        println!(
            "{threshold:>9}  {:>13.3}  {:>10.3}  {:>28.3}",
            kept_evidence[slot] as f64 / evidence_hits as f64,
            kept_noise[slot] as f64 / noise_hits as f64,
            answered[slot] as f64 / questions as f64,
        );
    }
    let default = RecallSettings::default().min_term_coverage;
    let slot = thresholds.iter().position(|t| *t == default).unwrap();
    let evidence_share = kept_evidence[slot] as f64 / evidence_hits as f64;
    let noise_share = kept_noise[slot] as f64 / noise_hits as f64;
    // The default keeps evidence clearly more often than noise.
    assert!(
        evidence_share > noise_share + 0.1,
        "{evidence_share} vs {noise_share}"
    );
}

/// A tenant name of the tests, parsed (it is well formed).
fn tenant_named(name: &str) -> skald_core::ids::Tenant {
    skald_core::ids::Tenant::parse(name).unwrap()
}
