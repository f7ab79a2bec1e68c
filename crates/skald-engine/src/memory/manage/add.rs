//! Adding documents as resources: each file chunked by its structure, every chunk an entry
//! under the resource's directory with an abstract, and an `_overview` per directory.

use super::*;
use skald_core::ids::Tenant;

/// The most chunk entries one [`Engine::add_documents`](crate::Engine::add_documents) writes (the `_overview` entries not counted):
/// 20,000 chunks hold a 32 MiB body (the server's largest) of chunks of a few thousand
/// characters, while a document of tiny repeated sections is refused before it costs minutes.
/// More is refused with [`ManageError::TooManyChunks`], before the store is touched.
pub const MAX_RESOURCE_CHUNKS: usize = 20_000;

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

/// What `plan_documents` found to do: the entries to add, update and forget under `root`,
/// and the counts of the report. Written by `write_documents`.
#[derive(Debug)]
pub struct AddPlan {
    root: MemoryUri,
    files: usize,
    chunks: usize,
    directories: usize,
    to_add: Vec<Planned>,
    to_update: Vec<Planned>,
    unchanged: usize,
    stale: Vec<MemoryUri>,
    skipped: Vec<Skipped>,
}

impl AddPlan {
    /// The texts to embed, in the order `write_documents` takes their vectors: the added
    /// entries', then the updated ones'.
    pub fn texts_to_embed(&self) -> Vec<String> {
        self.to_add
            .iter()
            .chain(&self.to_update)
            .map(|entry| entry.content.clone())
            .collect()
    }
}

/// The vectors of a plan's texts ([`AddPlan::texts_to_embed`]), none without an embedder.
pub async fn embed_plan(
    embedder: Option<&dyn Embedder>,
    plan: &AddPlan,
) -> Result<Vec<Vec<f32>>, ManageError> {
    let texts = plan.texts_to_embed();
    match embedder {
        Some(embedder) if !texts.is_empty() => embed_texts(embedder, &texts).await,
        Some(_) | None => Ok(Vec::new()),
    }
}

/// The first phase of [`Engine::add_documents`](crate::Engine::add_documents): the documents chunked and compared with the store.
/// Reads only. At most [`MAX_RESOURCE_CHUNKS`] chunks, else [`ManageError::TooManyChunks`].
/// `keep_going` is asked between documents and between the entries compared with the store; a
/// `false` stops with [`MemoryError::Cancelled`].
pub(crate) fn plan_documents(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    root: &MemoryUri,
    documents: Vec<Document>,
    max_chunk_chars: usize,
    mut skipped: Vec<Skipped>,
    keep_going: &(dyn Fn() -> bool + Sync),
) -> Result<AddPlan, ManageError> {
    let cancelled = || ManageError::Store(MemoryError::Cancelled);
    resources_parent(root)?;
    if max_chunk_chars < MIN_CHUNK_CHARS {
        return Err(invalid(
            "max_chunk_chars",
            format!("it is {max_chunk_chars}; it must be at least {MIN_CHUNK_CHARS}"),
        ));
    }
    let mut chunked: Vec<DocumentChunks> = Vec::new();
    let mut seen_dirs: HashSet<MemoryUri> = HashSet::new();
    let mut chunk_total = 0;
    for document in documents {
        if !keep_going() {
            return Err(cancelled());
        }
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
        chunk_total += chunks.len();
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

    if chunk_total > MAX_RESOURCE_CHUNKS {
        return Err(ManageError::TooManyChunks {
            chunks: chunk_total,
            limit: MAX_RESOURCE_CHUNKS,
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
        if !keep_going() {
            return Err(cancelled());
        }
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

    Ok(AddPlan {
        root: root.clone(),
        files: chunked.len(),
        chunks: chunk_count,
        directories,
        to_add,
        to_update,
        unchanged,
        stale,
        skipped,
    })
}

/// The second phase of [`Engine::add_documents`](crate::Engine::add_documents): the plan written, `vectors` (of
/// [`AddPlan::texts_to_embed`], or none) stored with the entries. `keep_going` is asked before
/// each entry of the new entries' transaction: a `false` there rolls it back and stops with
/// [`MemoryError::Cancelled`], nothing written. After the additions are committed, the updates
/// and forgets (as many at most as the chunks) are made whatever it says, so a document is
/// never left half mirrored.
pub(crate) fn write_documents(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    plan: AddPlan,
    vectors: Vec<Vec<f32>>,
    keep_going: &(dyn Fn() -> bool + Sync),
) -> Result<AddReport, ManageError> {
    let AddPlan {
        root,
        files,
        chunks,
        directories,
        to_add,
        to_update,
        unchanged,
        stale,
        skipped,
    } = plan;
    let mut vectors = vectors.into_iter();
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
    let outcomes = store.add_many_while(tenant, additions, keep_going)?;
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
        root,
        files,
        chunks,
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
