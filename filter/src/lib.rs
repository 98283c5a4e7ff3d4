//! Ferry's proxy-wasm HTTP filter: serves `psdb.v1alpha1.Database` to Connect (JSON,
//! proto) and gRPC (proto, JSON) clients and talks one canonical form to the shim
//! (Connect unary, `application/proto`, uncompressed).
//!
//! This crate is the wasm host only: the root and HTTP contexts, which hand every
//! callback to `ferry_filter_adapter` (the plugin and stream logic, generic over its
//! `Host` trait, tested there over a mock host), and [`host::ProxyWasmHost`], the only
//! code that calls the proxy-wasm host (through `abi.rs`). The logic lives in
//! `ferry-filter-core`, which does not depend on any host at all. The same adapter
//! also builds as an Envoy dynamic module (`ferry-filter-native`).
//!
//! The filter must never panic (a panic traps the VM): the lints below deny every
//! panicking shortcut; `clippy.toml` allows them in `#[cfg(test)]` code only.

#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented
)]

mod abi;
mod host;

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType};

use ferry_filter_adapter::host::Action as Step;
use ferry_filter_adapter::{Filter, HeaderHold, Plugin};

use host::ProxyWasmHost;

#[cfg(target_arch = "wasm32")]
proxy_wasm::main! {{
    proxy_wasm::set_log_level(proxy_wasm::types::LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root::default()) });
}}

/// The plugin: reads the configuration and creates one [`Stream`] per HTTP stream.
// Only `proxy_wasm::main!` (wasm32) creates it.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
#[derive(Default)]
struct Root {
    plugin: Plugin,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _plugin_configuration_size: usize) -> bool {
        // proxy-wasm pauses are Envoy's StopIteration only with the wasm filter's
        // `allow_on_headers_stop_iteration`, which the plugin cannot read: detected.
        match Plugin::configure(&mut ProxyWasmHost, HeaderHold::Detect) {
            Some(plugin) => {
                self.plugin = plugin;
                true
            }
            None => false,
        }
    }

    fn create_http_context(&self, context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Stream(
            self.plugin.stream(ProxyWasmHost, context_id),
        )))
    }

    fn on_tick(&mut self) {
        self.plugin.on_tick(&mut ProxyWasmHost);
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

/// One HTTP stream: the adapter's [`Filter`] over the proxy-wasm host.
struct Stream(Filter<ProxyWasmHost>);

fn action(step: Step) -> Action {
    match step {
        Step::Continue => Action::Continue,
        Step::Pause => Action::Pause,
    }
}

impl Context for Stream {
    fn on_done(&mut self) -> bool {
        self.0.on_done()
    }
}

impl HttpContext for Stream {
    fn on_http_request_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        action(self.0.on_request_headers(end_of_stream))
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        action(self.0.on_request_body(body_size, end_of_stream))
    }

    fn on_http_request_trailers(&mut self, _num_trailers: usize) -> Action {
        action(self.0.on_request_trailers())
    }

    fn on_http_response_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        action(self.0.on_response_headers(end_of_stream))
    }

    fn on_http_response_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        action(self.0.on_response_body(body_size, end_of_stream))
    }

    fn on_http_response_trailers(&mut self, _num_trailers: usize) -> Action {
        action(self.0.on_response_trailers())
    }

    fn on_log(&mut self) {
        self.0.on_log();
    }
}
