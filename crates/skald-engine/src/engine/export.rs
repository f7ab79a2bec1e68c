//! [`Engine::export_session`]: a session as a person takes it away — every entry of every
//! branch, its leaf and what the store keeps about it, and the original of every ref the
//! session names (in its entries, compaction summaries included, or in the view its next call
//! would get), so nothing the model was shown as a placeholder is missing from the file.

use std::collections::BTreeMap;

use skald_core::codec::openclaw::encode_session;
use skald_core::ids::{SessionId, Tenant};
use skald_core::refs::{RefId, RefPayload, ref_ids_in};
use skald_core::render::render_messages;
use skald_core::session::Session;
use skald_store::StoreError;
use skald_store::sessions::SessionInfo;

use super::{Engine, ViewOptions};
use crate::EngineError;

/// Everything [`Engine::export_session`] gathered.
#[derive(Debug, Clone)]
pub struct SessionExport {
    /// What the store keeps about the session (source, title, switches, times).
    pub info: SessionInfo,
    /// Every entry of every branch, and the leaf.
    pub session: Session,
    /// The originals the session names, by id (their order is the ids').
    pub refs: BTreeMap<String, RefPayload>,
    /// Refs the session names whose originals are gone (expired or never stored): named so the
    /// file says what it lacks.
    pub missing_refs: Vec<RefId>,
}

impl Engine {
    /// The session and the originals of every ref it names, for a file a person keeps.
    pub async fn export_session(
        &self,
        tenant: &Tenant,
        session: &SessionId,
    ) -> Result<SessionExport, EngineError> {
        let info = self.sessions().get(tenant, session)?;
        let stored = self.sessions().load(tenant, session)?;
        let mut ids = ref_ids_in(&encode_session(&stored));
        let view = self.view(tenant, session, ViewOptions::default()).await?;
        ids.extend(ref_ids_in(&render_messages(&view.view.messages)));
        let mut refs = BTreeMap::new();
        let mut missing_refs = Vec::new();
        for id in ids {
            if refs.contains_key(id.as_str()) || missing_refs.contains(&id) {
                continue;
            }
            match self.refs().get(tenant, id.as_str()) {
                Ok(payload) => {
                    refs.insert(id.as_str().to_owned(), payload);
                }
                Err(StoreError::NotFound { .. } | StoreError::Expired { .. }) => {
                    missing_refs.push(id);
                }
                Err(error) => return Err(error.into()),
            }
        }
        Ok(SessionExport {
            info,
            session: stored,
            refs,
            missing_refs,
        })
    }
}
