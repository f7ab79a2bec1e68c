//! `skald mcp`: skald's tools as an MCP server over stdio (`skald_server::mcp::SkaldMcp`), on
//! the data directory's store, for a host that runs its tools itself and speaks MCP (Claude
//! Code, Cursor, any MCP client). Every call acts in one tenant (`--tenant`, else `[memory]
//! tenant`). stdout is the protocol: skald's own messages go to stderr.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use rmcp::ServiceExt;
use skald_server::mcp::SkaldMcp;

use crate::config::Config;
use crate::home::Home;
use crate::local::tenant_arg;
use crate::serve_cmd::{self, ServeArgs};

#[derive(Debug, Args)]
pub struct McpArgs {
    /// The tenant whose refs and memories the tools use (default: [memory] tenant in
    /// skald.toml, else `default`).
    #[arg(long)]
    pub tenant: Option<String>,
    /// Leave the memory tools out (only `fetch_original_data`).
    #[arg(long)]
    pub no_memory: bool,
}

pub fn run(args: &McpArgs, config: &Config, home: &Home) -> Result<ExitCode> {
    let tenant = tenant_arg(Some(
        args.tenant.as_deref().unwrap_or(&config.memory.tenant),
    ))?;
    let serve_args = ServeArgs {
        addr: None,
        window: None,
        no_memory: args.no_memory,
        database: None,
    };
    let server_config = serve_cmd::server_config(config, &serve_args)?;
    let (state, _) = serve_cmd::open_state(config, None, home, server_config)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let tasks = state.tasks.clone();
        let running = SkaldMcp::local(state, tenant)
            .serve(rmcp::transport::stdio())
            .await
            .context("the MCP handshake on stdin/stdout failed")?;
        running.waiting().await.context("the MCP server failed")?;
        // A memory written by a tool may have started background work: let it finish.
        tasks.close();
        tasks.wait().await;
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
