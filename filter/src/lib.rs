//! Ferry's proxy-wasm HTTP filter: serves `psdb.v1alpha1.Database` to Connect (JSON,
//! proto) and gRPC (proto, JSON) clients and talks one canonical form to the shim
//! (Connect unary, `application/proto`, uncompressed).
//!
//! This crate is the wasm adapter only: the root and HTTP contexts, which hand every
//! callback to the host-independent `ferry_filter_core::exchange::Exchange` through
//! [`adapter`] (one function per callback, generic over [`host::Host`]). The only code
//! that calls the proxy-wasm host is [`host::ProxyWasmHost`]; the tests drive the same
//! adapter over `mock_host::MockHost`, which refuses what Envoy refuses in each phase.
//! The logic lives in `ferry-filter-core`, which does not depend on proxy-wasm at all.
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
mod adapter;
mod header_map;
mod hold;
mod host;
#[cfg(test)]
mod mock_host;
#[cfg(test)]
mod tests;

use std::cell::RefCell;
use std::rc::Rc;

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType};

use ferry_filter_core::config::Config;
use ferry_filter_core::exchange::Exchange;
use ferry_filter_core::header_hold::Detector;

use host::{Host, ProxyWasmHost};

#[cfg(target_arch = "wasm32")]
proxy_wasm::main! {{
    proxy_wasm::set_log_level(proxy_wasm::types::LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root::default()) });
}}

/// The plugin: reads the configuration and creates one [`Filter`] per HTTP stream.
// Only `proxy_wasm::main!` (wasm32) creates it.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
#[derive(Default)]
struct Root {
    /// Shared by every exchange of this plugin.
    config: Rc<Config>,
    /// The metric ids of every label set seen, shared by every stream.
    metrics: Rc<RefCell<adapter::MetricIds>>,
    /// What is known of the header hold (`hold.rs`), shared by every stream.
    hold: Rc<RefCell<Detector>>,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _plugin_configuration_size: usize) -> bool {
        match adapter::configure(&mut ProxyWasmHost) {
            Some(config) => {
                self.hold = Rc::new(RefCell::new(Detector::new(config.header_hold)));
                self.config = Rc::new(config);
                true
            }
            None => false,
        }
    }

    fn create_http_context(&self, context_id: u32) -> Option<Box<dyn HttpContext>> {
        let known = self
            .hold
            .try_borrow()
            .map(|d| d.state())
            .unwrap_or_default();
        let exchange = Exchange::new(Rc::clone(&self.config)).with_hold(known);
        let mut filter = Filter::new(exchange, ProxyWasmHost);
        filter.metrics = Rc::clone(&self.metrics);
        filter.hold = Rc::clone(&self.hold);
        filter.context_id = context_id;
        Some(Box::new(filter))
    }

    fn on_tick(&mut self) {
        hold::on_tick(&mut ProxyWasmHost, &self.hold, self.config.session_affinity);
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

/// One HTTP stream, over a host ([`ProxyWasmHost`] in Envoy; the tests' `MockHost`).
struct Filter<H> {
    exchange: Exchange,
    host: H,
    timing: adapter::Timing,
    metrics: Rc<RefCell<adapter::MetricIds>>,
    /// The stream's metrics are recorded (once: at `on_done` or `on_log`).
    counted: bool,
    /// What is known of the header hold (the root's).
    hold: Rc<RefCell<Detector>>,
    /// This stream's context id (the root resumes held headers by it).
    context_id: u32,
}

impl<H: Host> Filter<H> {
    fn new(exchange: Exchange, host: H) -> Self {
        Filter {
            exchange,
            host,
            timing: adapter::Timing::default(),
            metrics: Rc::default(),
            counted: false,
            hold: Rc::default(),
            context_id: 0,
        }
    }

    /// The callback's action; after a failed host call, a best-effort internal error
    /// answer (the exchange is over either way).
    fn settle(&mut self, result: adapter::Result<Action>) -> Action {
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
        self.exchange.note_reply(&reply);
        adapter::send_reply(&mut self.host, &reply).unwrap_or_else(|e| {
            log::error!("{e}");
            Action::Continue
        })
    }
}

impl<H: Host> Filter<H> {
    /// Records the stream's metrics, once.
    fn count(&mut self) {
        if std::mem::replace(&mut self.counted, true) {
            return;
        }
        match self.metrics.try_borrow_mut() {
            Ok(mut ids) => {
                adapter::record_metrics(&mut self.host, &self.exchange, &self.timing, &mut ids)
            }
            Err(_) => log::warn!("metrics: the id cache is busy"),
        }
    }
}

impl<H: Host> Context for Filter<H> {
    /// Envoy 1.40 never calls `on_log` for an HTTP/3 stream (checked with a log line:
    /// HTTP/2 streams get it, HTTP/3 ones do not), but every stream ends here.
    fn on_done(&mut self) -> bool {
        self.count();
        hold::done(&self.hold, self.context_id);
        true
    }
}

impl<H: Host> HttpContext for Filter<H> {
    fn on_http_request_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        let result = adapter::on_request_headers(
            &mut self.host,
            &mut self.exchange,
            end_of_stream,
            &mut self.timing,
        );
        let action = self.settle(result);
        if action == Action::Pause {
            hold::after_request_headers(
                &mut self.host,
                &self.hold,
                self.context_id,
                &self.exchange,
            );
        }
        action
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        hold::before_request_body(&self.hold, self.context_id, &mut self.exchange);
        let result =
            adapter::on_request_body(&mut self.host, &mut self.exchange, body_size, end_of_stream);
        self.settle(result)
    }

    fn on_http_request_trailers(&mut self, _num_trailers: usize) -> Action {
        hold::before_request_body(&self.hold, self.context_id, &mut self.exchange);
        let result = adapter::on_request_trailers(&mut self.host, &mut self.exchange);
        self.settle(result)
    }

    fn on_http_response_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        let result = adapter::on_response_headers(
            &mut self.host,
            &mut self.exchange,
            end_of_stream,
            &self.timing,
        );
        self.settle(result)
    }

    fn on_http_response_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        let result =
            adapter::on_response_body(&mut self.host, &mut self.exchange, body_size, end_of_stream);
        self.settle(result)
    }

    fn on_http_response_trailers(&mut self, _num_trailers: usize) -> Action {
        let result = adapter::on_response_trailers(&mut self.host, &mut self.exchange);
        self.settle(result)
    }

    fn on_log(&mut self) {
        self.count();
    }
}
