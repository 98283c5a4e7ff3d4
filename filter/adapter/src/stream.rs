//! The plugin and its streams, over any [`Host`]: what a host crate's root context and
//! HTTP contexts (proxy-wasm), or its filter config and filters (dynamic modules),
//! hand every callback to.

use std::cell::RefCell;
use std::rc::Rc;

use ferry_filter_core::config::Config;
use ferry_filter_core::exchange::Exchange;
use ferry_filter_core::header_hold::{Detector, Hold};

use crate::adapter;
use crate::hold;
use crate::host::{Action, Host};

/// How a host lets a filter hold headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderHold {
    /// The filter finds out (proxy-wasm: it depends on the wasm filter's
    /// `allow_on_headers_stop_iteration`, which the plugin cannot read): `hold.rs`.
    Detect,
    /// The host always keeps body callbacks coming while headers are held (a native
    /// Envoy filter's `StopIteration`): known to work, unless the configuration says
    /// `header_hold: "off"`.
    Native,
}

/// The plugin: its configuration and what its streams share. One per proxy-wasm root
/// context (one per VM, i.e. per worker) or per dynamic-module filter config.
#[derive(Debug, Default)]
pub struct Plugin {
    /// Shared by every exchange of this plugin.
    config: Rc<Config>,
    /// The metric ids of every label set seen, shared by every stream.
    metrics: Rc<RefCell<adapter::MetricIds>>,
    /// What is known of the header hold (`hold.rs`), shared by every stream.
    hold: Rc<RefCell<Detector>>,
    /// The hold is the host's (never detected).
    native_hold: bool,
}

impl Plugin {
    /// Reads the configuration (`None`, logged, if it is unreadable or invalid: the
    /// plugin must not start).
    pub fn configure<H: Host>(host: &mut H, hold: HeaderHold) -> Option<Plugin> {
        let config = adapter::configure(host)?;
        Some(Plugin {
            hold: Rc::new(RefCell::new(Detector::new(config.header_hold))),
            config: Rc::new(config),
            metrics: Rc::default(),
            native_hold: hold == HeaderHold::Native,
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// What a new stream knows of the hold.
    fn hold_state(&self) -> Hold {
        let known = self
            .hold
            .try_borrow()
            .map(|d| d.state())
            .unwrap_or_default();
        match (self.native_hold, known) {
            // "off" is Missing from the start; otherwise the host holds.
            (true, Hold::Missing) => Hold::Missing,
            (true, _) => Hold::Works,
            (false, known) => known,
        }
    }

    /// A new stream over `host`; `context` names it to the root (proxy-wasm's context
    /// id; any unique number elsewhere).
    pub fn stream<H: Host>(&self, host: H, context: u32) -> Filter<H> {
        let exchange = Exchange::new(Rc::clone(&self.config)).with_hold(self.hold_state());
        let mut filter = Filter::new(exchange, host);
        filter.metrics = Rc::clone(&self.metrics);
        filter.hold = Rc::clone(&self.hold);
        filter.context_id = context;
        filter.detect_hold = !self.native_hold;
        filter
    }

    /// The root context's timer (the hold's detection).
    pub fn on_tick<H: Host>(&self, host: &mut H) {
        hold::on_tick(host, &self.hold, self.config.session_affinity);
    }
}

/// One HTTP stream, over a host (`ProxyWasmHost` or `NativeHost` in Envoy; the tests'
/// `MockHost`).
pub struct Filter<H> {
    exchange: Exchange,
    pub(crate) host: H,
    timing: adapter::Timing,
    metrics: Rc<RefCell<adapter::MetricIds>>,
    /// The stream's metrics are recorded (once: at `on_done` or `on_log`).
    counted: bool,
    /// What is known of the header hold (the plugin's).
    hold: Rc<RefCell<Detector>>,
    /// This stream's context id (the root resumes held headers by it).
    context_id: u32,
    /// The hold is detected (proxy-wasm), not the host's own.
    detect_hold: bool,
}

impl<H: Host> Filter<H> {
    pub fn new(exchange: Exchange, host: H) -> Self {
        Filter {
            exchange,
            host,
            timing: adapter::Timing::default(),
            metrics: Rc::default(),
            counted: false,
            hold: Rc::default(),
            context_id: 0,
            detect_hold: true,
        }
    }

    pub fn host(&self) -> &H {
        &self.host
    }

    pub fn host_mut(&mut self) -> &mut H {
        &mut self.host
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

    fn before_request_body(&mut self) {
        if self.detect_hold {
            hold::before_request_body(&self.hold, self.context_id, &mut self.exchange);
        }
    }

    /// The stream is over. Envoy 1.40 never calls proxy-wasm's `on_log` for an HTTP/3
    /// stream (checked with a log line: HTTP/2 streams get it, HTTP/3 ones do not), but
    /// every stream ends here.
    pub fn on_done(&mut self) -> bool {
        self.count();
        hold::done(&self.hold, self.context_id);
        true
    }

    pub fn on_request_headers(&mut self, end_of_stream: bool) -> Action {
        let result = adapter::on_request_headers(
            &mut self.host,
            &mut self.exchange,
            end_of_stream,
            &mut self.timing,
        );
        let action = self.settle(result);
        if action == Action::Pause && self.detect_hold {
            hold::after_request_headers(
                &mut self.host,
                &self.hold,
                self.context_id,
                &self.exchange,
            );
        }
        action
    }

    pub fn on_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        self.before_request_body();
        let result =
            adapter::on_request_body(&mut self.host, &mut self.exchange, body_size, end_of_stream);
        self.settle(result)
    }

    pub fn on_request_trailers(&mut self) -> Action {
        self.before_request_body();
        let result = adapter::on_request_trailers(&mut self.host, &mut self.exchange);
        self.settle(result)
    }

    pub fn on_response_headers(&mut self, end_of_stream: bool) -> Action {
        let result = adapter::on_response_headers(
            &mut self.host,
            &mut self.exchange,
            end_of_stream,
            &self.timing,
        );
        self.settle(result)
    }

    pub fn on_response_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        let result =
            adapter::on_response_body(&mut self.host, &mut self.exchange, body_size, end_of_stream);
        self.settle(result)
    }

    pub fn on_response_trailers(&mut self) -> Action {
        let result = adapter::on_response_trailers(&mut self.host, &mut self.exchange);
        self.settle(result)
    }

    pub fn on_log(&mut self) {
        self.count();
    }
}
