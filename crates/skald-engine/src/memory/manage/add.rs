//! Adding documents as resources: each file chunked by its structure, every chunk an entry
//! under the resource's directory with an abstract, and an `_overview` per directory.

use super::*;
use skald_core::ids::Tenant;

/// A document to add as a resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Its directory below the added root, as URI segments (empty: the root itself holds it).
    pub segments: Vec<String>,
    /// Its file name (decides Markdown or plain text).
    pub file_name: String,
    /// The document's whole text, chunked at headings (Markdown) or blank lines (anything else).
    pub text: String,
    /// How to name it in the report (a path).
    pub shown: String,
}

/// A document skipped, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Skipped {
    /// The document's path as the caller named it.
    pub path: String,
    /// Why it was left out, for people (empty, too deep for a URI, or another file maps to the same
    /// directory).
    pub reason: String,
}

/// What adding documents did.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AddReport {
    /// The URI the document(s) were added at.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub root: MemoryUri,
    /// Documents chunked and added (the skipped ones not counted).
    pub files: usize,
    /// Chunk entries planned over all documents (the `_overview` entries not counted).
    pub chunks: usize,
    /// `_overview` entries (one per directory, documents' chunk directories included).
    pub directories: usize,
    /// Entries stored new.
    pub added: usize,
    /// Entries whose content changed: new versions.
    pub updated: usize,
    /// Entries whose abstract and content were already stored as they are: nothing was written for
    /// them.
    pub unchanged: usize,
    /// New entries that duplicated an existing resource and were merged into it.
    pub merged: usize,
    /// Entries under `root` that no longer come from a document.
    pub forgotten: usize,
    /// Vectors stored (an embedder was given).
    pub embedded: usize,
    /// Documents left out, by the caller or by `add_documents`, each with its reason.
    pub skipped: Vec<Skipped>,
}

/// An entry `add` wants to exist.
#[derive(Debug, Clone)]
struct Planned {
    uri: MemoryUri,
    l0: String,
    content: String,
}

/// A document cut into chunks.
struct DocumentChunks {
    dir: MemoryUri,
    name: String,
    chunks: Vec<(Chunk, String)>,
}

/// A path segment for a file or directory name: characters the URI layout refuses become `-`,
/// leading dots go, at most [`MAX_SEGMENT_LEN`] bytes.
pub fn segment_of(name: &str) -> String {
    let allowed =
        |c: char| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '~' | '@' | '+' | '=' | ',');
    let mapped: String = name
        .chars()
        .map(|c| if allowed(c) { c } else { '-' })
        .collect();
    let mut segment = String::new();
    for c in mapped.trim_start_matches('.').chars() {
        if segment.len() + c.len_utf8() > MAX_SEGMENT_LEN {
            break;
        }
        segment.push(c);
    }
    if segment.is_empty() {
        "unnamed".to_owned()
    } else if segment == OVERVIEW_NAME {
        format!("{OVERVIEW_NAME}-file")
    } else {
        segment
    }
}

/// The abstract of a chunk: its heading, then the first sentence of its body.
pub fn chunk_abstract(chunk: &Chunk) -> String {
    let body: String = chunk
        .text
        .lines()
        .skip_while(|line| line.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let first = derive_abstract(&body);
    let text = match (&chunk.title, first.is_empty()) {
        (Some(title), false) => format!("{title} — {first}"),
        (Some(title), true) => title.clone(),
        (None, _) => derive_abstract(&chunk.text),
    };
    let text = cut_at_word(&text, MAX_ABSTRACT_CHARS);
    if text.trim().is_empty() {
        chunk.slug.clone()
    } else {
        text
    }
}

/// The `_overview` entries of every directory from `root` down, from the documents' chunks.
fn overviews(root: &MemoryUri, documents: &[DocumentChunks]) -> Result<Vec<Planned>, UriError> {
    // Each directory's children: name → URI.
    let mut children: BTreeMap<MemoryUri, BTreeMap<String, MemoryUri>> = BTreeMap::new();
    let mut abstracts: BTreeMap<MemoryUri, String> = BTreeMap::new();
    let mut planned = Vec::new();
    for document in documents {
        let mut lines = vec![format!(
            "{} — {} chunk{}:",
            document.name,
            document.chunks.len(),
            if document.chunks.len() == 1 { "" } else { "s" }
        )];
        for (chunk, l0) in &document.chunks {
            lines.push(format!("- {}: {l0}", chunk.slug));
        }
        let first = document.chunks.first().map_or("", |(_, l0)| l0.as_str());
        let l0 = cut_at_word(&format!("{}: {first}", document.name), MAX_ABSTRACT_CHARS);
        abstracts.insert(document.dir.clone(), l0.clone());
        planned.push(Planned {
            uri: document.dir.join(OVERVIEW_NAME)?,
            l0,
            content: lines.join("\n"),
        });
        let mut child = document.dir.clone();
        while child != *root {
            let Some(parent) = child.parent() else { break };
            let name = child.name().unwrap_or("").to_owned();
            children
                .entry(parent.clone())
                .or_default()
                .insert(name, child.clone());
            if !root.contains(&parent) {
                break;
            }
            child = parent;
        }
    }
    // Deepest first, so a directory's children have their abstracts.
    let mut dirs: Vec<&MemoryUri> = children.keys().collect();
    dirs.sort_by_key(|dir| std::cmp::Reverse(dir.depth()));
    for dir in dirs {
        let Some(kids) = children.get(dir) else {
            continue;
        };
        let name = dir.name().unwrap_or("resources");
        let names: Vec<String> = kids.keys().map(|kid| format!("{kid}/")).collect();
        let items = if kids.len() == 1 { "item" } else { "items" };
        let l0 = cut_at_word(
            &format!("{name}/ — {} {items}: {}", kids.len(), names.join(", ")),
            MAX_ABSTRACT_CHARS,
        );
        let mut lines = vec![format!("{name}/ — {} {items}:", kids.len())];
        for (kid, uri) in kids {
            let kid_l0 = abstracts.get(uri).map_or("", String::as_str);
            lines.push(format!("- {kid}/: {kid_l0}"));
        }
        abstracts.insert(dir.clone(), l0.clone());
        planned.push(Planned {
            uri: dir.join(OVERVIEW_NAME)?,
            l0,
            content: lines.join("\n"),
        });
    }
    Ok(planned)
}

/// Checks that `parent` is where resources may be added (at or below `viking://resources`).
pub fn resources_parent(parent: &MemoryUri) -> Result<(), ManageError> {
    if parent.category() != Some(MemoryCategory::Resources) {
        return Err(invalid(
            "uri",
            format!(
                "{parent} is not under viking://resources; documents are added as resources \
                 (for example viking://resources/my-project)"
            ),
        ));
    }
    Ok(())
}

/// Adds `documents` under `root` as resources: each is cut into chunks of at most
/// `max_chunk_chars` (Markdown at headings, anything else at blank lines), each chunk an entry
/// in the document's directory, and every directory gets an `_overview` entry. Adding again
/// mirrors the documents: an unchanged chunk writes nothing, a changed one becomes a new
/// version, and entries under `root` that no longer come from a document are forgotten. New
/// entries are written in one transaction, before any update or forget. `skipped` lists
/// documents the caller already left out; the report adds its own.
pub async fn add_documents(
    store: &dyn MemoryStore,
    embedder: Option<&dyn Embedder>,
    tenant: &Tenant,
    root: &MemoryUri,
    documents: Vec<Document>,
    max_chunk_chars: usize,
    mut skipped: Vec<Skipped>,
) -> Result<AddReport, ManageError> {
    resources_parent(root)?;
    if max_chunk_chars < MIN_CHUNK_CHARS {
        return Err(invalid(
            "max_chunk_chars",
            format!("it is {max_chunk_chars}; it must be at least {MIN_CHUNK_CHARS}"),
        ));
    }
    let mut chunked: Vec<DocumentChunks> = Vec::new();
    let mut seen_dirs: HashSet<MemoryUri> = HashSet::new();
    for document in documents {
        let mut skip = |reason: String| {
            skipped.push(Skipped {
                path: document.shown.clone(),
                reason,
            });
        };
        let dir = if document.segments.is_empty() {
            Ok(root.clone())
        } else {
            root.join(&document.segments.join("/"))
        };
        let dir = match dir {
            Ok(dir) if dir.depth() < MAX_DEPTH => dir,
            Ok(_) | Err(_) => {
                skip("its path is too deep or too long for a memory URI".to_owned());
                continue;
            }
        };
        if !seen_dirs.insert(dir.clone()) {
            skip(format!("another file already maps to {dir}"));
            continue;
        }
        let chunks = chunk_document(
            DocumentKind::of_file_name(&document.file_name),
            &document.text,
            max_chunk_chars,
        );
        if chunks.is_empty() {
            skip("empty".to_owned());
            continue;
        }
        let chunks = chunks
            .into_iter()
            .map(|chunk| {
                let l0 = chunk_abstract(&chunk);
                (chunk, l0)
            })
            .collect();
        chunked.push(DocumentChunks {
            dir,
            name: document.file_name,
            chunks,
        });
    }

    let mut planned: Vec<Planned> = Vec::new();
    for document in &chunked {
        for (chunk, l0) in &document.chunks {
            planned.push(Planned {
                uri: document.dir.join(&chunk.slug)?,
                l0: l0.clone(),
                content: chunk.text.clone(),
            });
        }
    }
    let chunk_count = planned.len();
    let overview_entries = overviews(root, &chunked)?;
    let directories = overview_entries.len();
    planned.extend(overview_entries);

    let (mut to_add, mut to_update, mut unchanged) = (Vec::new(), Vec::new(), 0);
    for entry in &planned {
        match store.get(tenant, &entry.uri) {
            Ok(live) if live.l2 == entry.content && live.l0 == entry.l0 => unchanged += 1,
            Ok(_) => to_update.push(entry.clone()),
            Err(MemoryError::NotFound { .. } | MemoryError::Forgotten { .. }) => {
                to_add.push(entry.clone());
            }
            Err(error) => return Err(error.into()),
        }
    }
    let wanted: BTreeSet<&MemoryUri> = planned.iter().map(|entry| &entry.uri).collect();
    let stale: Vec<MemoryUri> = live_entries(store, tenant, root)?
        .into_iter()
        .filter(|uri| !wanted.contains(uri))
        .collect();

    let texts: Vec<String> = to_add
        .iter()
        .chain(&to_update)
        .map(|entry| entry.content.clone())
        .collect();
    let mut vectors = match embedder {
        Some(embedder) if !texts.is_empty() => embed_texts(embedder, &texts).await?.into_iter(),
        Some(_) | None => Vec::new().into_iter(),
    };
    let embedded = vectors.len();
    let mut new_memory = |entry: &Planned| {
        let mut memory =
            NewMemory::new(entry.uri.clone(), entry.content.clone()).with_l0(entry.l0.clone());
        if let Some(vector) = vectors.next() {
            memory = memory.with_embedding(vector);
        }
        memory
    };
    let additions: Vec<NewMemory> = to_add.iter().map(&mut new_memory).collect();
    let updates: Vec<NewMemory> = to_update.iter().map(&mut new_memory).collect();
    // New entries first, in one transaction: a conflict there stops everything before any
    // update or forget.
    let outcomes = store.add_many(tenant, additions)?;
    let merged = outcomes
        .iter()
        .filter(|outcome| matches!(outcome, AddOutcome::Merged(_)))
        .count();
    for update in updates {
        store.update(tenant, update)?;
    }
    for uri in &stale {
        store.forget(tenant, uri)?;
    }
    Ok(AddReport {
        root: root.clone(),
        files: chunked.len(),
        chunks: chunk_count,
        directories,
        added: outcomes.len() - merged,
        updated: to_update.len(),
        unchanged,
        merged,
        forgotten: stale.len(),
        embedded,
        skipped,
    })
}
