//! `/api/games`: the games a server runs, and reloading a game module.
//!
//! | request | answer |
//! |---|---|
//! | `GET /api/games` | `{"games":[{"name","kind":"builtin"}, {"name","kind":"module","module","version","faults":{"exception","timeout","memory","output"}}]}` |
//! | `POST /api/games/{name}/reload` | loads the module's file again: 200 `{"name","version"}`; new tables get the new code, running tables finish on theirs; 400 (code 103) with the module's error, the old version still serving; 404 (code 103) for a name that is not a module |
//!
//! Modules are loaded at start-up from `[[games]]` ([`load`]); a module
//! that fails to load stops the server with its error, as any bad config.

use crate::config::GameModule;
use crate::respond::{error, json, Body};
use herald_game::GameFactory;
use herald_proto::ErrorCode;
use herald_script::{FaultCounts, LoadError, ScriptFactory};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use std::sync::Arc;

/// The game modules of a server, and the names of its built-in games.
#[derive(Default)]
pub struct Scripts {
    modules: Vec<Arc<ScriptFactory>>,
    builtin: Vec<&'static str>,
}

impl std::fmt::Debug for Scripts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self.modules.iter().map(|m| m.name()).collect();
        f.debug_struct("Scripts")
            .field("modules", &names)
            .field("builtin", &self.builtin)
            .finish()
    }
}

/// Loads every `[[games]]` module beside the binary's `builtin` games;
/// returns the registry and every factory for the engine.
pub fn load(
    modules: &[GameModule],
    builtin: Vec<Arc<dyn GameFactory>>,
) -> Result<(Scripts, Vec<Arc<dyn GameFactory>>), LoadError> {
    let mut scripts = Scripts {
        modules: Vec::new(),
        builtin: builtin.iter().map(|g| g.name()).collect(),
    };
    let mut all = builtin;
    for m in modules {
        if scripts.builtin.contains(&m.name.as_str()) {
            return Err(LoadError {
                path: m.module.display().to_string(),
                reason: format!("the game {} is built in", m.name),
            });
        }
        let f = Arc::new(ScriptFactory::load(
            &m.name,
            &m.module,
            m.limits(),
            m.shards.unwrap_or(0),
        )?);
        tracing::info!(game = %m.name, module = %m.module.display(), "game module loaded");
        scripts.modules.push(f.clone());
        all.push(f);
    }
    Ok((scripts, all))
}

impl Scripts {
    /// Each module's name and fault counts (for `/metrics`).
    pub fn faults(&self) -> impl Iterator<Item = (&'static str, &FaultCounts)> {
        self.modules.iter().map(|m| (m.name(), m.faults()))
    }

    fn module(&self, name: &str) -> Option<&Arc<ScriptFactory>> {
        self.modules.iter().find(|m| m.name() == name)
    }
}

/// Handles `/api/games` and `/api/games/{name}/reload`.
pub fn handle<B>(req: &Request<B>, scripts: &Scripts) -> Response<Body> {
    let rest = &req.uri().path()["/api/games".len()..];
    match (req.method(), rest) {
        (&Method::GET, "" | "/") => {
            let mut games: Vec<Value> = scripts
                .builtin
                .iter()
                .map(|n| json!({"name": n, "kind": "builtin"}))
                .collect();
            for m in &scripts.modules {
                let s = m.current();
                let counts = m.faults().get();
                let faults: serde_json::Map<String, Value> = FaultCounts::KINDS
                    .iter()
                    .zip(counts)
                    .map(|(k, n)| (k.to_string(), json!(n)))
                    .collect();
                games.push(json!({
                    "name": m.name(),
                    "kind": "module",
                    "module": s.path(),
                    "version": s.version(),
                    "bot": s.has_bot(),
                    "faults": faults,
                }));
            }
            json(
                StatusCode::OK,
                json!({ "games": games }).to_string().into_bytes(),
            )
        }
        (&Method::POST, rest) if rest.ends_with("/reload") => {
            let name = rest.trim_start_matches('/').trim_end_matches("/reload");
            let Some(m) = scripts.module(name) else {
                return error(
                    StatusCode::NOT_FOUND,
                    ErrorCode::BadRequest,
                    &format!("no game module named {name:?}"),
                );
            };
            match m.reload() {
                Ok(version) => json(
                    StatusCode::OK,
                    json!({"name": name, "version": version})
                        .to_string()
                        .into_bytes(),
                ),
                Err(e) => {
                    tracing::warn!(game = name, "reload refused: {e}");
                    error(
                        StatusCode::BAD_REQUEST,
                        ErrorCode::BadRequest,
                        &e.to_string(),
                    )
                }
            }
        }
        (_, "" | "/") => error(
            StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::BadRequest,
            "use GET",
        ),
        _ => error(StatusCode::NOT_FOUND, ErrorCode::BadRequest, "no such path"),
    }
}
