//! Digest and identifier-extraction speed on synthetic ~100 kB tool outputs of each kind (the
//! size a large `cat`, test run or build log reaches), built deterministically in memory.
//!
//! Run: `cargo bench -p skald-core --bench digest`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use skald_core::digest::{DigestSettings, digest};
use skald_core::identifiers::{extract_identifiers, extract_path_like};

const TARGET: usize = 100 * 1024;

fn repeat_until(target: usize, mut line: impl FnMut(usize) -> String) -> String {
    let mut out = String::with_capacity(target + 256);
    let mut i = 0;
    while out.len() < target {
        out.push_str(&line(i));
        out.push('\n');
        i += 1;
    }
    out
}

fn inputs() -> Vec<(&'static str, String)> {
    let build_log = repeat_until(TARGET, |i| match i % 7 {
        0 => format!("   Compiling crate{i} v0.{i}.0 (/home/dev/work/crates/crate{i})"),
        1 => format!("warning: unused variable `x{i}`"),
        2 => format!("  --> crates/crate{i}/src/lib.rs:{i}:9"),
        3 => "   |".to_owned(),
        4 => format!("{i} |     let x{i} = compute({i});"),
        5 => format!("error[E0425]: cannot find value `y{i}` in this scope"),
        _ => format!(
            "commit {:040x} merged into /srv/build/{i}/out.log",
            i * 7919
        ),
    });
    let pytest = repeat_until(TARGET, |i| match i % 5 {
        0 => format!(
            "tests/test_mod{i}.py::test_case_{i} PASSED [{:3}%]",
            i % 100
        ),
        1 => {
            format!("FAILED tests/test_mod{i}.py::test_other_{i} - AssertionError: assert {i} == 0")
        }
        2 => format!("E       assert {i} == 0"),
        3 => format!("src/pkg/mod{i}.py:{i}: AssertionError"),
        _ => format!("  File \"/testbed/src/pkg/mod{i}.py\", line {i}, in run"),
    });
    let source = repeat_until(TARGET, |i| match i % 6 {
        0 => format!("pub fn handler_{i}(input: &str) -> Result<u32, Error> {{"),
        1 => format!("    let value = input.parse::<u32>().map_err(Error::Parse)?; // {i}"),
        2 => "    if value > 10 { return Ok(value * 2); }".to_owned(),
        3 => "    Ok(value)".to_owned(),
        4 => "}".to_owned(),
        _ => format!("use crate::module_{i}::Thing;"),
    });
    let mut json = String::from("[");
    let mut i = 0;
    while json.len() < TARGET {
        if i > 0 {
            json.push(',');
        }
        json.push_str(&format!(
            r#"{{"id":{i},"name":"item-{i}","url":"https://api.example.com/items/{i}","tags":["a","b"],"active":{}}}"#,
            i % 2 == 0
        ));
        i += 1;
    }
    json.push(']');
    let log = repeat_until(TARGET, |i| {
        let level = ["INFO", "INFO", "WARN", "ERROR", "DEBUG"][i % 5];
        format!(
            "2024-05-01T10:{:02}:{:02}.{:03}Z {level} worker-{}: job {} done in {}ms from 10.0.{}.{}:8080",
            (i / 60) % 60,
            i % 60,
            i % 1000,
            i % 8,
            100_000 + i,
            i % 500,
            i % 256,
            i % 256
        )
    });
    let markdown = repeat_until(TARGET, |i| match i % 8 {
        0 => format!("## Section {i}"),
        1 => String::new(),
        2 => {
            format!("Some prose about [topic {i}](https://example.com/t/{i}) and more words here.")
        }
        3 => format!("- item {i} with `code_{i}`"),
        4 => "```rust".to_owned(),
        5 => format!("let x = {i};"),
        6 => "```".to_owned(),
        _ => String::new(),
    });
    let grep = repeat_until(TARGET, |i| {
        format!(
            "src/module_{}/file_{}.rs:{}:    let value = compute_{i}(input);",
            i % 40,
            i % 13,
            i
        )
    });
    let cjk = repeat_until(TARGET, |i| {
        format!("第{i}行：这是一个很长的中文输出，包含路径 /数据/文件{i} 和错误信息。")
    });
    let one_line = "x".repeat(TARGET);
    vec![
        ("build-log", build_log),
        ("pytest", pytest),
        ("rust-source", source),
        ("json-array", json),
        ("log", log),
        ("markdown", markdown),
        ("grep", grep),
        ("cjk", cjk),
        ("one-line", one_line),
    ]
}

fn benches(c: &mut Criterion) {
    let settings = DigestSettings::default();
    let inputs = inputs();
    let mut group = c.benchmark_group("digest/100k");
    for (name, text) in &inputs {
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(*name, |b| {
            b.iter(|| digest(std::hint::black_box(text), &settings))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("identifiers/100k");
    for (name, text) in inputs
        .iter()
        .filter(|(n, _)| matches!(*n, "build-log" | "log" | "cjk"))
    {
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(format!("extract/{name}"), |b| {
            b.iter(|| extract_identifiers(std::hint::black_box(text)))
        });
        group.bench_function(format!("path-like/{name}"), |b| {
            b.iter(|| extract_path_like(std::hint::black_box(text)))
        });
    }
    group.finish();
}

criterion_group!(digest_benches, benches);
criterion_main!(digest_benches);
