//! `evac playground`: serves the browser playground (`make playground` builds it into
//! `dist/playground/`) as static files on loopback. The page needs nothing else: every decision
//! and scenario runs in it.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use tower_http::services::ServeDir;

#[derive(Debug, Args)]
pub struct PlaygroundArgs {
    /// The built page (`make playground`).
    #[arg(long, default_value = "dist/playground")]
    dir: PathBuf,
    /// Where to listen; loopback by default (port 0: any free port, printed on standard output).
    #[arg(long, default_value = "127.0.0.1:8090")]
    addr: SocketAddr,
}

pub fn run(args: PlaygroundArgs) -> Result<()> {
    for file in ["index.html", "app.js", "evac_web.js", "evac_web_bg.wasm"] {
        let path = args.dir.join(file);
        anyhow::ensure!(
            path.is_file(),
            "{} is missing: build the playground first (make playground)",
            path.display()
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .with_context(|| format!("cannot listen on {}", args.addr))?;
        let url = format!("http://{}/", listener.local_addr()?);
        eprintln!("the playground is at {url} (files from {})", args.dir.display());
        super::report_listening(&[("playground", url)]);
        // ServeDir answers only inside its directory (no `..`), with the types the page needs
        // (application/wasm for WebAssembly.instantiateStreaming, text/javascript for modules).
        let app = axum::Router::new().fallback_service(ServeDir::new(&args.dir));
        axum::serve(listener, app).await.context("serving the playground")
    })
}
