//! Ferry's proxy-wasm HTTP filter: serves `psdb.v1alpha1.Database` to Connect (JSON,
//! proto) and gRPC (proto, JSON) clients and talks one canonical form to the shim
//! (Connect unary, `application/proto`, uncompressed).
//!
//! This crate is the wasm adapter only: the root and HTTP contexts, which hand every
//! callback to the host-independent `ferry_filter_core::exchange::Exchange` through
//! [`host`], the only module that calls the proxy-wasm host. The logic lives in
//! `ferry-filter-core`, which does not depend on proxy-wasm at all.
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

mod host;

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType};

use ferry_filter_core::config::Config;
use ferry_filter_core::exchange::Exchange;

#[cfg(target_arch = "wasm32")]
proxy_wasm::main! {{
    proxy_wasm::set_log_level(proxy_wasm::types::LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root::default()) });
}}

/// The plugin: reads the configuration and creates one [`Filter`] per HTTP stream.
#[derive(Default)]
pub struct Root {
    config: Config,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _plugin_configuration_size: usize) -> bool {
        let parsed = host::plugin_configuration()
            .map_err(|e| e.to_string())
            .and_then(|raw| Config::parse(raw.as_deref()).map_err(|e| e.to_string()));
        match parsed {
            Ok(config) => {
                log::info!(
                    "{:?}, session affinity {}",
                    config.limits,
                    if config.session_affinity { "on" } else { "off" }
                );
                self.config = config;
                true
            }
            Err(e) => {
                log::error!("refusing to start: {e}");
                false
            }
        }
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Filter {
            exchange: Exchange::new(self.config.limits).with_affinity(self.config.session_affinity),
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

/// One HTTP stream.
pub struct Filter {
    exchange: Exchange,
}

impl Context for Filter {}

impl HttpContext for Filter {
    fn on_http_request_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        let result = host::request_head()
            .map(|head| self.exchange.on_request_headers(&head, end_of_stream))
            .and_then(host::apply_request_headers);
        self.settle(result)
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        let step = self.exchange.on_request_body(body_size, end_of_stream);
        let result = host::apply_request_body(step, body_size, &mut self.exchange);
        self.settle(result)
    }

    fn on_http_request_trailers(&mut self, _num_trailers: usize) -> Action {
        let step = self.exchange.on_request_trailers();
        let result = host::apply_request_body(step, host::WHOLE_BODY, &mut self.exchange);
        self.settle(result)
    }

    fn on_http_response_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        let result = host::response_head()
            .map(|head| self.exchange.on_response_headers(&head, end_of_stream))
            .and_then(host::apply_response_headers);
        self.settle(result)
    }

    fn on_http_response_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        let step = self.exchange.on_response_body(body_size, end_of_stream);
        let result = host::apply_response_body(step, body_size, &mut self.exchange);
        self.settle(result)
    }

    fn on_http_response_trailers(&mut self, _num_trailers: usize) -> Action {
        let step = self.exchange.on_response_trailers();
        let result = host::apply_response_body(step, host::WHOLE_BODY, &mut self.exchange);
        self.settle(result)
    }
}

impl Filter {
    /// The callback's action; after a failed host call, a best-effort internal error
    /// answer (the exchange is over either way).
    fn settle(&mut self, result: host::Result<Action>) -> Action {
        let error = match result {
            Ok(action) => return action,
            Err(error) => error,
        };
        log::error!("{error}");
        let Some(reply) = self
            .exchange
            .fail("the proxy failed to process this request")
        else {
            return Action::Continue;
        };
        host::send_reply(&reply).unwrap_or_else(|e| {
            log::error!("{e}");
            Action::Continue
        })
    }
}
