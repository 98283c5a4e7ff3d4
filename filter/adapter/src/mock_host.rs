//! A [`Host`] for native tests that answers as Envoy 1.40 answers a proxy-wasm filter,
//! phase by phase, and a [`Stream`] that delivers callbacks to a [`Filter`] over it and
//! does with the returned actions what Envoy does (forward, buffer, hold).
//!
//! The mock records every call. A call Envoy would refuse in the current phase fails
//! with the status Envoy gives (in Envoy the SDK then aborts the VM), and is recorded
//! as a [`Violation`]; tests assert there are none. Where Envoy answers without an
//! error but does not do what was meant (a read of a body that is not there sees an
//! empty one, a local reply after the response headers went out resets the stream),
//! the mock answers as Envoy does and records a violation too. The rules (Envoy's
//! `Context` in `source/extensions/common/wasm/context.cc`):
//!
//! - a header map exists only in its own headers callback, and after it while its
//!   headers are held (the callback paused and nothing continued since): request
//!   headers in request callbacks, response headers in response callbacks;
//! - response trailers exist in the response trailers callback, and in the last
//!   response body callback (end of stream), where Envoy creates them;
//! - a body exists in its body callbacks, and in its trailers callback if the last body
//!   callback paused (Envoy buffered it); never in a headers callback;
//! - a body is changed only by prepending (`0, 0`), replacing it whole (`0, n >= len`)
//!   or appending (`start >= len`);
//! - a local reply is possible until the response headers go out (while they are
//!   held, from a response body or trailers callback too);
//! - with a [`MockHost::buffer_limit`] (the stream's buffer limit: the route's
//!   `request_body_buffer_limit`, else the listener's per-connection limit), request
//!   body bytes Envoy buffers for the filter beyond it get Envoy's own `413 Payload
//!   Too Large`: what a paused body callback leaves (its chunk, or what the filter
//!   wrote into the body), and each chunk added to that buffer before the next body
//!   callback. A chunk of a callback that continues is the codec's, never counted;
//!   emptying a chunk (`set_body(0, len, [])`, which Envoy accepts) empties the buffer.
//!   The same limit on the response body Envoy buffers (a paused response body
//!   callback's chunk, what the filter writes into it, each chunk added to it) resets
//!   the stream (`response_payload_too_large`: its headers went out), the trap of
//!   envoy-wasm-notes.md;
//! - the plugin configuration exists only in `on_configure`.

use ferry_filter_core::config::Config;
use ferry_filter_core::exchange::Exchange;

use crate::adapter;
use crate::header_map::HeaderMap;
use crate::host::{Action, Body, Host, Map, MetricType, Status};
use crate::Filter;

pub(crate) type Headers = Vec<(String, String)>;

/// The callback running (Envoy's idea of the stream's phase).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No callback running: nothing exists.
    #[default]
    Idle,
    Configure,
    RequestHeaders {
        end_of_stream: bool,
    },
    RequestBody {
        end_of_stream: bool,
    },
    RequestTrailers,
    ResponseHeaders {
        end_of_stream: bool,
    },
    ResponseBody {
        end_of_stream: bool,
    },
    ResponseTrailers,
}

impl Phase {
    pub fn is_request(self) -> bool {
        matches!(
            self,
            Phase::RequestHeaders { .. } | Phase::RequestBody { .. } | Phase::RequestTrailers
        )
    }

    pub fn is_response(self) -> bool {
        matches!(
            self,
            Phase::ResponseHeaders { .. } | Phase::ResponseBody { .. } | Phase::ResponseTrailers
        )
    }
}

/// One host call, as made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    Headers {
        map: Map,
    },
    SetHeader {
        map: Map,
        name: String,
        value: String,
    },
    RemoveHeader {
        map: Map,
        name: String,
    },
    AddHeader {
        map: Map,
        name: String,
        value: String,
    },
    Body {
        body: Body,
        start: usize,
        max: usize,
    },
    SetBody {
        body: Body,
        start: usize,
        size: usize,
        bytes: Vec<u8>,
    },
    SendReply(LocalReply),
    ResetResponse,
    PluginConfiguration,
}

/// A local reply as the filter sent it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LocalReply {
    pub status: u32,
    pub headers: Headers,
    pub body: Vec<u8>,
}

impl LocalReply {
    pub fn header(&self, name: &str) -> Option<&str> {
        first(&self.headers, name)
    }
}

/// A call made where Envoy refuses it (or cannot do what it means).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Violation {
    pub phase: Phase,
    pub call: Call,
    pub rule: &'static str,
}

/// Why a call is refused, and Envoy's answer: `Some(status)` is an error (the SDK
/// aborts); `None` is Envoy's answer without an error (an empty body, a reset).
struct Refusal {
    rule: &'static str,
    status: Option<Status>,
}

fn refuse(rule: &'static str) -> Result<(), Refusal> {
    Err(Refusal {
        rule,
        status: Some(Status::BadArgument),
    })
}

fn refuse_quietly(rule: &'static str) -> Result<(), Refusal> {
    Err(Refusal { rule, status: None })
}

/// How a call went wrong: an injected fault or a phase rule.
enum Refused {
    Fault(Status),
    Rule(Option<Status>),
}

/// One direction of the stream, as Envoy holds it for this filter.
#[derive(Debug, Default)]
pub(crate) struct Side {
    /// The header map the filter reads and edits.
    pub headers: Headers,
    /// The last headers callback paused and the side has not continued since: the
    /// headers are held, and their map is still the filter's.
    held: bool,
    /// The headers as they went on (upstream for the request, downstream for the
    /// response), once they did.
    pub sent_headers: Option<Headers>,
    /// The body the filter sees: everything buffered after a paused body callback,
    /// else this callback's chunk.
    pub body: Vec<u8>,
    /// The last body callback paused: Envoy buffers (`StopIterationAndBuffer`).
    buffering: bool,
    /// Body bytes that went on.
    pub sent_body: Vec<u8>,
    /// The trailer map: the upstream's, or created by the filter at the end of the body.
    pub trailers: Option<Headers>,
    /// The trailers as they went on.
    pub sent_trailers: Option<Headers>,
    /// End of stream went on.
    pub ended: bool,
}

impl Side {
    /// The headers continue (with the body, if the headers were held).
    fn send_headers(&mut self) {
        if self.sent_headers.is_none() {
            self.sent_headers = Some(self.headers.clone());
        }
        self.held = false;
    }

    fn send_body(&mut self) {
        self.send_headers();
        self.sent_body.append(&mut self.body);
        self.buffering = false;
    }

    pub fn sent_header(&self, name: &str) -> Option<&str> {
        first(self.sent_headers.as_ref()?, name)
    }

    pub fn sent_trailer(&self, name: &str) -> Option<&str> {
        first(self.sent_trailers.as_ref()?, name)
    }
}

fn first<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn owned(headers: &[(&str, &str)]) -> Headers {
    headers
        .iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), (*v).to_owned()))
        .collect()
}

/// A failure to inject: every call matching `when` fails with `status`.
type Fault = (Box<dyn Fn(&Call) -> bool>, Status);

#[derive(Default)]
pub(crate) struct MockHost {
    phase: Phase,
    pub request: Side,
    pub response: Side,
    pub configuration: Option<Vec<u8>>,
    /// Every call, with the phase it was made in.
    pub calls: Vec<(Phase, Call)>,
    pub violations: Vec<Violation>,
    /// The local reply the filter sent, if any.
    pub local_reply: Option<LocalReply>,
    /// The filter reset the stream (or Envoy did, for a reply it could not send).
    pub reset: bool,
    fault: Option<Fault>,
    /// Injected faults that fired.
    pub faults: Vec<(Phase, Call, Status)>,
    /// Stream properties (`request.protocol`...), by dotted path.
    pub properties: Vec<(String, Vec<u8>)>,
    /// The host clock (ns); each read advances it by `tick`.
    pub clock: u64,
    pub tick: u64,
    /// Metrics defined (name, kind), by id; counter values and histogram records.
    pub metrics: Vec<(String, MetricType)>,
    pub counters: Vec<(u32, i64)>,
    pub records: Vec<(u32, u64)>,
    /// The root's timer period (ms), as last set.
    pub tick_period: Option<u32>,
    /// `request.total_size` of each stream the root may enter (others are gone).
    pub streams: Vec<(u32, u64)>,
    /// The stream the root entered, if any.
    pub entered: Option<u32>,
    /// Streams whose held request headers the root resumed.
    pub resumed: Vec<u32>,
    /// Envoy's per-stream buffer limit for the request body, if modelled.
    pub buffer_limit: Option<usize>,
    /// Envoy answered 413 itself: the request body it buffered outgrew `buffer_limit`.
    pub payload_too_large: bool,
    /// Envoy reset the stream itself: the response body it buffered outgrew
    /// `buffer_limit` (`response_payload_too_large`).
    pub response_too_large: bool,
    /// The most response body bytes Envoy buffered at once (for the filter).
    pub response_buffered_peak: usize,
    /// The host cannot add response trailers (as Envoy's dynamic modules).
    pub no_trailers: bool,
}

impl MockHost {
    /// Makes every call matching `when` fail with `status` (a host failure, not a
    /// phase violation).
    pub fn fail_when(&mut self, when: impl Fn(&Call) -> bool + 'static, status: Status) {
        self.fault = Some((Box::new(when), status));
    }

    /// Runs `on_configure`'s reading with this plugin configuration.
    pub fn configure(&mut self, configuration: Option<&[u8]>) -> Option<Config> {
        self.configuration = configuration.map(<[u8]>::to_vec);
        self.phase = Phase::Configure;
        let config = adapter::configure(self);
        self.phase = Phase::Idle;
        config
    }

    /// The calls of one phase kind, e.g. `|p| p.is_response()`.
    pub fn calls_in(&self, phase: impl Fn(Phase) -> bool) -> Vec<&Call> {
        self.calls
            .iter()
            .filter(|(p, _)| phase(*p))
            .map(|(_, c)| c)
            .collect()
    }

    /// Records `call` and checks it against an injected fault and `rule`.
    fn enter(&mut self, call: Call, rule: Result<(), Refusal>) -> Result<(), Refused> {
        self.calls.push((self.phase, call.clone()));
        if let Some((when, status)) = &self.fault {
            if when(&call) {
                let status = *status;
                self.faults.push((self.phase, call, status));
                return Err(Refused::Fault(status));
            }
        }
        rule.map_err(|refusal| {
            self.violations.push(Violation {
                phase: self.phase,
                call,
                rule: refusal.rule,
            });
            Refused::Rule(refusal.status)
        })
    }

    /// Envoy's buffer watermark on the request body it buffers for the filter: past
    /// `buffer_limit`, its 413 (the stream goes no further through the filter).
    fn check_request_buffer(&mut self) {
        let over = self
            .buffer_limit
            .is_some_and(|limit| self.request.body.len() > limit);
        if over && self.local_reply.is_none() {
            self.payload_too_large = true;
            self.local_reply = Some(LocalReply {
                status: 413,
                headers: vec![("content-type".into(), "text/plain".into())],
                body: b"Payload Too Large".to_vec(),
            });
        }
    }

    /// The same watermark on the response body Envoy buffers for the filter: past
    /// `buffer_limit`, Envoy resets the stream (its headers went out).
    fn check_response_buffer(&mut self) {
        let buffered = self.response.body.len();
        self.response_buffered_peak = self.response_buffered_peak.max(buffered);
        let over = self.buffer_limit.is_some_and(|limit| buffered > limit);
        if over && !self.reset {
            self.response_too_large = true;
            self.reset = true;
        }
    }

    fn map_rule(&self, map: Map) -> Result<(), Refusal> {
        use Phase as P;
        match (map, self.phase) {
            (Map::RequestHeaders, P::RequestHeaders { .. }) => Ok(()),
            (Map::RequestHeaders, P::RequestBody { .. } | P::RequestTrailers) => {
                if self.request.held {
                    Ok(())
                } else {
                    refuse("request headers touched after they went upstream")
                }
            }
            (Map::RequestHeaders, p) if p.is_response() => {
                refuse("request headers touched in a response callback")
            }
            (Map::ResponseHeaders, P::ResponseHeaders { .. }) => Ok(()),
            (Map::ResponseHeaders, P::ResponseBody { .. } | P::ResponseTrailers) => {
                if self.response.held {
                    Ok(())
                } else {
                    refuse("response headers touched after they went downstream")
                }
            }
            (Map::ResponseTrailers, P::ResponseTrailers) => Ok(()),
            (Map::ResponseTrailers, P::ResponseBody { end_of_stream }) => {
                if end_of_stream {
                    Ok(())
                } else {
                    refuse("response trailers touched before the end of the body")
                }
            }
            (Map::ResponseTrailers, P::ResponseHeaders { .. }) => {
                refuse("response trailers touched in the headers callback")
            }
            (Map::ResponseHeaders | Map::ResponseTrailers, p) if p.is_request() => {
                refuse("a response map touched in a request callback")
            }
            _ => refuse("a header map touched outside an HTTP callback"),
        }
    }

    fn body_rule(&self, body: Body) -> Result<(), Refusal> {
        use Phase as P;
        match (body, self.phase) {
            (Body::Request, P::RequestBody { .. }) | (Body::Response, P::ResponseBody { .. }) => {
                Ok(())
            }
            (Body::Request, P::RequestTrailers) if self.request.buffering => Ok(()),
            (Body::Response, P::ResponseTrailers) if self.response.buffering => Ok(()),
            (_, P::RequestTrailers | P::ResponseTrailers) => {
                refuse("a body touched in a trailers callback, but none is buffered")
            }
            (_, P::RequestHeaders { .. } | P::ResponseHeaders { .. }) => {
                refuse("a body touched in a headers callback")
            }
            (Body::Request, p) if p.is_response() => {
                refuse("the request body touched in a response callback")
            }
            (Body::Response, p) if p.is_request() => {
                refuse("the response body touched in a request callback")
            }
            _ => refuse("a body touched outside an HTTP callback"),
        }
    }

    fn map_mut(&mut self, map: Map) -> &mut Headers {
        match map {
            Map::RequestHeaders => &mut self.request.headers,
            Map::ResponseHeaders => &mut self.response.headers,
            Map::ResponseTrailers => self.response.trailers.get_or_insert_with(Vec::new),
        }
    }

    fn side_mut(&mut self, body: Body) -> &mut Side {
        match body {
            Body::Request => &mut self.request,
            Body::Response => &mut self.response,
        }
    }

    /// Ends the callback: does with its action what Envoy does.
    fn finish(&mut self, action: Action) {
        let phase = std::mem::take(&mut self.phase);
        let go_on = action == Action::Continue;
        // After a local reply or a reset the stream goes no further through here.
        if self.local_reply.is_some() || self.reset {
            return;
        }
        let (side, end_of_stream) = match phase {
            Phase::RequestHeaders { end_of_stream } | Phase::RequestBody { end_of_stream } => {
                (&mut self.request, end_of_stream)
            }
            Phase::ResponseHeaders { end_of_stream } | Phase::ResponseBody { end_of_stream } => {
                (&mut self.response, end_of_stream)
            }
            Phase::RequestTrailers => (&mut self.request, true),
            Phase::ResponseTrailers => (&mut self.response, true),
            Phase::Idle | Phase::Configure => return,
        };
        match phase {
            Phase::RequestHeaders { .. } | Phase::ResponseHeaders { .. } => {
                if go_on {
                    side.send_headers();
                } else {
                    side.held = true;
                }
            }
            Phase::RequestBody { .. } | Phase::ResponseBody { .. } => {
                if go_on {
                    side.send_body();
                } else {
                    side.buffering = true;
                    // The paused callback's chunk moves into Envoy's buffer.
                    if phase.is_request() {
                        self.check_request_buffer();
                    } else {
                        self.check_response_buffer();
                    }
                    return;
                }
            }
            _ => {
                if go_on {
                    side.send_body();
                }
            }
        }
        if go_on && end_of_stream {
            side.sent_trailers = side.trailers.take();
            side.ended = true;
        }
    }
}

impl Host for MockHost {
    fn headers(&mut self, map: Map) -> Result<HeaderMap, Status> {
        let pairs = match self.enter(Call::Headers { map }, self.map_rule(map)) {
            Ok(()) => self.map_mut(map).clone(),
            Err(Refused::Fault(status) | Refused::Rule(Some(status))) => return Err(status),
            Err(Refused::Rule(None)) => Vec::new(),
        };
        let pairs: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        // As Envoy hands it over: serialized, then read back.
        crate::header_map::serialize(&pairs)
            .ok()
            .and_then(HeaderMap::parse)
            .ok_or(Status::SerializationFailure)
    }

    fn set_header(&mut self, map: Map, name: &str, value: &str) -> Result<(), Status> {
        let call = Call::SetHeader {
            map,
            name: name.to_owned(),
            value: value.to_owned(),
        };
        refused(self.enter(call, self.map_rule(map)))?;
        // Envoy's `setCopy`: the first value is replaced, any others removed.
        let name = name.to_ascii_lowercase();
        let mut seen = false;
        let headers = self.map_mut(map);
        headers.retain_mut(|(n, v)| {
            if *n != name {
                return true;
            }
            let keep = !seen;
            if keep {
                value.clone_into(v);
            }
            seen = true;
            keep
        });
        if !seen {
            headers.push((name, value.to_owned()));
        }
        Ok(())
    }

    fn remove_header(&mut self, map: Map, name: &str) -> Result<(), Status> {
        let call = Call::RemoveHeader {
            map,
            name: name.to_owned(),
        };
        refused(self.enter(call, self.map_rule(map)))?;
        let name = name.to_ascii_lowercase();
        self.map_mut(map).retain(|(n, _)| *n != name);
        Ok(())
    }

    fn add_header(&mut self, map: Map, name: &str, value: &str) -> Result<(), Status> {
        let call = Call::AddHeader {
            map,
            name: name.to_owned(),
            value: value.to_owned(),
        };
        refused(self.enter(call, self.map_rule(map)))?;
        self.map_mut(map)
            .push((name.to_ascii_lowercase(), value.to_owned()));
        Ok(())
    }

    fn body(&mut self, body: Body, start: usize, max: usize) -> Result<Option<Vec<u8>>, Status> {
        let call = Call::Body { body, start, max };
        match self.enter(call, self.body_rule(body)) {
            Ok(()) => {}
            Err(Refused::Fault(status)) => return Err(status),
            // Envoy reads a body that is not there as an empty one (no error).
            Err(Refused::Rule(_)) => return Ok(None),
        }
        let bytes = &self.side_mut(body).body;
        let end = start.saturating_add(max).min(bytes.len());
        Ok(bytes
            .get(start..end)
            .filter(|read| !read.is_empty())
            .map(<[u8]>::to_vec))
    }

    fn set_body(
        &mut self,
        body: Body,
        start: usize,
        size: usize,
        bytes: &[u8],
    ) -> Result<(), Status> {
        let call = Call::SetBody {
            body,
            start,
            size,
            bytes: bytes.to_vec(),
        };
        let len = self.side_mut(body).body.len();
        let rule = self.body_rule(body).and_then(|()| {
            if (start == 0 && (size == 0 || size >= len)) || start >= len {
                Ok(())
            } else {
                refuse("a partial body replacement (Envoy prepends, replaces all, or appends)")
            }
        });
        refused(self.enter(call, rule))?;
        let current = &mut self.side_mut(body).body;
        if start == 0 && size == 0 {
            current.splice(0..0, bytes.iter().copied());
        } else if start == 0 {
            bytes.clone_into(current);
        } else {
            current.extend_from_slice(bytes);
        }
        // Written into the body Envoy buffers (a paused callback's): watermarked.
        if body == Body::Request && self.request.buffering {
            self.check_request_buffer();
        }
        if body == Body::Response && self.response.buffering {
            self.check_response_buffer();
        }
        Ok(())
    }

    fn send_reply(
        &mut self,
        status: u32,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<(), Status> {
        let reply = LocalReply {
            status,
            headers: owned(headers),
            body: body.map(<[u8]>::to_vec).unwrap_or_default(),
        };
        let rule = match self.phase {
            _ if self.local_reply.is_some() => refuse_quietly("a second local reply"),
            Phase::RequestHeaders { .. }
            | Phase::RequestBody { .. }
            | Phase::RequestTrailers
            | Phase::ResponseHeaders { .. } => Ok(()),
            // Held headers have not gone out: Envoy replaces the answer.
            Phase::ResponseBody { .. } | Phase::ResponseTrailers if self.response.held => Ok(()),
            // Envoy accepts it, but the response has started: it resets the stream.
            Phase::ResponseBody { .. } | Phase::ResponseTrailers => {
                refuse_quietly("a local reply after the response headers went downstream")
            }
            Phase::Idle | Phase::Configure => {
                refuse_quietly("a local reply outside an HTTP callback")
            }
        };
        let late = rule.is_err();
        match self.enter(Call::SendReply(reply.clone()), rule) {
            Ok(()) => self.local_reply = Some(reply),
            Err(Refused::Fault(status) | Refused::Rule(Some(status))) => return Err(status),
            Err(Refused::Rule(None)) => self.reset |= late,
        }
        Ok(())
    }

    fn reset_response(&mut self) -> Result<(), Status> {
        let rule = if self.phase.is_request() || self.phase.is_response() {
            Ok(())
        } else {
            refuse_quietly("a reset outside an HTTP callback")
        };
        match self.enter(Call::ResetResponse, rule) {
            Ok(()) => self.reset = true,
            Err(Refused::Fault(status) | Refused::Rule(Some(status))) => return Err(status),
            Err(Refused::Rule(None)) => {}
        }
        Ok(())
    }

    fn property(&mut self, path: &[&str]) -> Result<Option<Vec<u8>>, Status> {
        let key = path.join(".");
        if let Some(context) = self.entered {
            let size = self.streams.iter().find(|(c, _)| *c == context);
            if key == "request.total_size" {
                return Ok(size.map(|(_, n)| n.to_le_bytes().to_vec()));
            }
        }
        Ok(self
            .properties
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone()))
    }

    fn now_nanos(&mut self) -> Result<u64, Status> {
        self.clock += self.tick;
        Ok(self.clock)
    }

    fn define_metric(&mut self, kind: MetricType, name: &str) -> Result<u32, Status> {
        if let Some(id) = self.metrics.iter().position(|(n, _)| n == name) {
            return Ok(id as u32);
        }
        self.metrics.push((name.to_owned(), kind));
        Ok((self.metrics.len() - 1) as u32)
    }

    fn increment_metric(&mut self, id: u32, offset: i64) -> Result<(), Status> {
        if id as usize >= self.metrics.len() {
            return Err(Status::NotFound);
        }
        self.counters.push((id, offset));
        Ok(())
    }

    fn record_metric(&mut self, id: u32, value: u64) -> Result<(), Status> {
        if id as usize >= self.metrics.len() {
            return Err(Status::NotFound);
        }
        self.records.push((id, value));
        Ok(())
    }

    fn set_tick_period(&mut self, millis: u32) -> Result<(), Status> {
        self.tick_period = Some(millis);
        Ok(())
    }

    fn enter_stream(&mut self, context: u32) -> Result<(), Status> {
        if !self.streams.iter().any(|(c, _)| *c == context) {
            return Err(Status::NotFound);
        }
        self.entered = Some(context);
        Ok(())
    }

    fn resume_request(&mut self) -> Result<(), Status> {
        match self.entered {
            Some(context) => {
                self.resumed.push(context);
                Ok(())
            }
            None => Err(Status::NotFound),
        }
    }

    fn adds_trailers(&self) -> bool {
        !self.no_trailers
    }

    fn plugin_configuration(&mut self) -> Result<Option<Vec<u8>>, Status> {
        let rule = if self.phase == Phase::Configure {
            Ok(())
        } else {
            refuse_quietly("the plugin configuration read outside on_configure")
        };
        match self.enter(Call::PluginConfiguration, rule) {
            Ok(()) => Ok(self.configuration.clone()),
            Err(Refused::Fault(status) | Refused::Rule(Some(status))) => Err(status),
            // Envoy: `NotFound`, which the SDK reads as no configuration.
            Err(Refused::Rule(None)) => Ok(None),
        }
    }
}

/// A refused write: its status (a quiet refusal of a write does not happen).
fn refused(entered: Result<(), Refused>) -> Result<(), Status> {
    match entered {
        Ok(()) => Ok(()),
        Err(Refused::Fault(status) | Refused::Rule(Some(status))) => Err(status),
        Err(Refused::Rule(None)) => Err(Status::BadArgument),
    }
}

/// One HTTP stream through a [`Filter`] over a [`MockHost`]: delivers the callbacks
/// Envoy delivers, and none after the stream was answered locally or reset.
pub(crate) struct Stream {
    filter: Filter<MockHost>,
}

impl Stream {
    pub fn new(exchange: Exchange) -> Self {
        Stream {
            filter: Filter::new(exchange, MockHost::default()),
        }
    }

    pub fn host(&self) -> &MockHost {
        &self.filter.host
    }

    pub fn host_mut(&mut self) -> &mut MockHost {
        &mut self.filter.host
    }

    /// Panics if `violations` is not empty, listing them.
    pub fn assert_no_violations(&self) {
        let violations = &self.host().violations;
        assert!(violations.is_empty(), "phase violations: {violations:#?}");
    }

    fn begin(&mut self, phase: Phase) {
        let host = &mut self.filter.host;
        assert!(!host.reset, "Envoy delivers nothing after a reset");
        if phase.is_request() {
            assert!(
                host.local_reply.is_none(),
                "Envoy delivers no request callbacks after a local reply"
            );
            assert!(!host.request.ended, "the request has ended");
        } else {
            assert!(!host.response.ended, "the response has ended");
        }
        host.phase = phase;
    }

    pub fn request_headers(&mut self, headers: &[(&str, &str)], end_of_stream: bool) -> Action {
        self.begin(Phase::RequestHeaders { end_of_stream });
        self.filter.host.request.headers = owned(headers);
        let action = self.filter.on_request_headers(end_of_stream);
        self.filter.host.finish(action);
        action
    }

    pub fn request_body(&mut self, chunk: &[u8], end_of_stream: bool) -> Action {
        self.begin(Phase::RequestBody { end_of_stream });
        let side = &mut self.filter.host.request;
        let buffered = side.buffering;
        if !buffered {
            side.body.clear();
        }
        side.body.extend_from_slice(chunk);
        let size = side.body.len();
        if buffered {
            // Envoy adds the chunk to what it buffers for the filter before calling it.
            self.filter.host.check_request_buffer();
            if self.filter.host.payload_too_large {
                self.filter.host.phase = Phase::Idle;
                return Action::Pause;
            }
        }
        let action = self.filter.on_request_body(size, end_of_stream);
        self.filter.host.finish(action);
        action
    }

    pub fn request_trailers(&mut self, trailers: &[(&str, &str)]) -> Action {
        self.begin(Phase::RequestTrailers);
        self.filter.host.request.trailers = Some(owned(trailers));
        let action = self.filter.on_request_trailers();
        self.filter.host.finish(action);
        action
    }

    pub fn response_headers(&mut self, headers: &[(&str, &str)], end_of_stream: bool) -> Action {
        self.begin(Phase::ResponseHeaders { end_of_stream });
        self.filter.host.response.headers = owned(headers);
        let action = self.filter.on_response_headers(end_of_stream);
        self.filter.host.finish(action);
        action
    }

    pub fn response_body(&mut self, chunk: &[u8], end_of_stream: bool) -> Action {
        self.begin(Phase::ResponseBody { end_of_stream });
        let side = &mut self.filter.host.response;
        let buffered = side.buffering;
        if !buffered {
            side.body.clear();
        }
        side.body.extend_from_slice(chunk);
        let size = side.body.len();
        if buffered {
            // Envoy adds the chunk to what it buffers for the filter before calling it.
            self.filter.host.check_response_buffer();
            if self.filter.host.response_too_large {
                self.filter.host.phase = Phase::Idle;
                return Action::Pause;
            }
        }
        let action = self.filter.on_response_body(size, end_of_stream);
        self.filter.host.finish(action);
        action
    }

    pub fn response_trailers(&mut self, trailers: &[(&str, &str)]) -> Action {
        self.begin(Phase::ResponseTrailers);
        self.filter.host.response.trailers = Some(owned(trailers));
        let action = self.filter.on_response_trailers();
        self.filter.host.finish(action);
        action
    }

    /// The stream is over: Envoy calls `on_log`.
    pub fn log(&mut self) {
        self.filter.on_log();
    }

    /// Envoy's end of the stream (`proxy_on_done`): HTTP/3 streams get this and no
    /// `on_log` (Envoy 1.40).
    pub fn done(&mut self) -> bool {
        self.filter.on_done()
    }

    /// Envoy sends the filter's local reply out through the filter's response
    /// callbacks: (headers action, body action if it has a body).
    pub fn local_reply_goes_out(&mut self) -> (Action, Option<Action>) {
        let reply = self
            .host_mut()
            .local_reply
            .take()
            .expect("a local reply was sent");
        let status = reply.status.to_string();
        let mut headers = vec![(":status", status.as_str())];
        headers.extend(reply.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())));
        let has_body = !reply.body.is_empty();
        let head = self.response_headers(&headers, !has_body);
        let body = has_body.then(|| self.response_body(&reply.body, true));
        self.host_mut().local_reply = Some(reply);
        (head, body)
    }
}

// ----- the rules themselves -----

mod rules {
    use super::*;

    fn host_in(phase: Phase) -> MockHost {
        MockHost {
            phase,
            ..MockHost::default()
        }
    }

    fn rules_of(host: &MockHost) -> Vec<&'static str> {
        host.violations.iter().map(|v| v.rule).collect()
    }

    #[test]
    fn response_headers_are_gone_once_they_went_downstream() {
        let mut host = host_in(Phase::ResponseHeaders {
            end_of_stream: false,
        });
        assert_eq!(host.set_header(Map::ResponseHeaders, "a", "1"), Ok(()));
        host.finish(Action::Continue);
        host.phase = Phase::ResponseBody {
            end_of_stream: true,
        };
        assert_eq!(
            host.set_header(Map::ResponseHeaders, "a", "2"),
            Err(Status::BadArgument)
        );
        assert_eq!(host.headers(Map::ResponseHeaders), Err(Status::BadArgument));
        assert_eq!(
            rules_of(&host),
            ["response headers touched after they went downstream"; 2]
        );
        assert_eq!(
            host.response.sent_headers,
            Some(vec![("a".into(), "1".into())])
        );
    }

    #[test]
    fn held_request_headers_stay_editable_until_they_continue() {
        let mut host = host_in(Phase::RequestHeaders {
            end_of_stream: false,
        });
        host.finish(Action::Pause);
        host.phase = Phase::RequestBody {
            end_of_stream: true,
        };
        assert_eq!(host.set_header(Map::RequestHeaders, "x", "1"), Ok(()));
        host.finish(Action::Continue);
        assert_eq!(host.request.sent_header("x"), Some("1"));
        host.phase = Phase::ResponseHeaders {
            end_of_stream: false,
        };
        assert_eq!(host.headers(Map::RequestHeaders), Err(Status::BadArgument));
        assert_eq!(
            rules_of(&host),
            ["request headers touched in a response callback"]
        );
    }

    #[test]
    fn request_headers_are_gone_once_they_went_upstream() {
        let mut host = host_in(Phase::RequestHeaders {
            end_of_stream: false,
        });
        host.finish(Action::Continue);
        host.phase = Phase::RequestBody {
            end_of_stream: false,
        };
        assert_eq!(
            host.remove_header(Map::RequestHeaders, "x"),
            Err(Status::BadArgument)
        );
        assert_eq!(
            rules_of(&host),
            ["request headers touched after they went upstream"]
        );
    }

    #[test]
    fn bodies_exist_only_in_body_callbacks() {
        let mut host = host_in(Phase::RequestHeaders {
            end_of_stream: false,
        });
        host.request.body = b"abc".to_vec();
        // Envoy hands out an empty buffer, and refuses to change it.
        assert_eq!(host.body(Body::Request, 0, 10), Ok(None));
        assert_eq!(
            host.set_body(Body::Request, 0, 0, b"x"),
            Err(Status::BadArgument)
        );
        host.phase = Phase::RequestBody {
            end_of_stream: false,
        };
        assert_eq!(
            host.body(Body::Response, 0, 10),
            Ok(None),
            "the response body in a request callback"
        );
        assert_eq!(host.body(Body::Request, 1, 10), Ok(Some(b"bc".to_vec())));
        // The trailers callback sees the body only if the body callback paused.
        host.finish(Action::Continue);
        host.phase = Phase::RequestTrailers;
        assert_eq!(host.body(Body::Request, 0, 10), Ok(None));
        assert_eq!(
            rules_of(&host),
            [
                "a body touched in a headers callback",
                "a body touched in a headers callback",
                "the response body touched in a request callback",
                "a body touched in a trailers callback, but none is buffered",
            ]
        );
    }

    #[test]
    fn bodies_change_only_as_envoy_changes_them() {
        let mut host = host_in(Phase::ResponseBody {
            end_of_stream: false,
        });
        host.response.body = b"body".to_vec();
        assert_eq!(host.set_body(Body::Response, 0, 0, b">"), Ok(()));
        assert_eq!(host.set_body(Body::Response, 5, 0, b"<"), Ok(()));
        assert_eq!(host.response.body, b">body<");
        assert_eq!(
            host.set_body(Body::Response, 0, 3, b"x"),
            Err(Status::BadArgument)
        );
        assert_eq!(
            host.set_body(Body::Response, 2, 1, b"x"),
            Err(Status::BadArgument)
        );
        assert_eq!(host.set_body(Body::Response, 0, 6, b"new"), Ok(()));
        assert_eq!(host.response.body, b"new");
        assert_eq!(host.violations.len(), 2);
    }

    #[test]
    fn trailers_are_added_only_at_the_end_of_the_body() {
        let mut host = host_in(Phase::ResponseHeaders {
            end_of_stream: false,
        });
        let add = |host: &mut MockHost| host.add_header(Map::ResponseTrailers, "grpc-status", "0");
        assert_eq!(add(&mut host), Err(Status::BadArgument));
        host.finish(Action::Continue);
        host.phase = Phase::ResponseBody {
            end_of_stream: false,
        };
        assert_eq!(add(&mut host), Err(Status::BadArgument));
        host.finish(Action::Pause);
        host.phase = Phase::ResponseBody {
            end_of_stream: true,
        };
        assert_eq!(add(&mut host), Ok(()));
        host.finish(Action::Continue);
        assert_eq!(host.response.sent_trailer("grpc-status"), Some("0"));
        assert_eq!(
            rules_of(&host),
            [
                "response trailers touched in the headers callback",
                "response trailers touched before the end of the body",
            ]
        );
    }

    #[test]
    fn a_local_reply_after_the_response_headers_is_a_reset() {
        let mut host = host_in(Phase::ResponseBody {
            end_of_stream: false,
        });
        assert_eq!(host.send_reply(500, &[], None), Ok(()));
        assert!(host.reset && host.local_reply.is_none());
        assert_eq!(
            rules_of(&host),
            ["a local reply after the response headers went downstream"]
        );
    }

    #[test]
    fn envoy_answers_413_for_request_bytes_it_buffers_past_its_limit() {
        let mut host = host_in(Phase::RequestBody {
            end_of_stream: false,
        });
        host.buffer_limit = Some(4);
        // A chunk that goes on is the codec's: never counted, even replaced by more.
        host.request.body = b"abcdefgh".to_vec();
        assert_eq!(host.set_body(Body::Request, 0, 8, b"0123456789"), Ok(()));
        host.finish(Action::Continue);
        assert!(!host.payload_too_large);
        // An emptied chunk is accepted (an empty replacement), and buffers nothing.
        host.phase = Phase::RequestBody {
            end_of_stream: false,
        };
        host.request.body = b"abcdefgh".to_vec();
        assert_eq!(host.set_body(Body::Request, 0, 8, b""), Ok(()));
        host.finish(Action::Pause);
        assert!(!host.payload_too_large && host.request.body.is_empty());
        // Written into the buffered body past the limit: Envoy's 413.
        host.phase = Phase::RequestBody {
            end_of_stream: true,
        };
        assert_eq!(host.set_body(Body::Request, 0, 0, b"hello"), Ok(()));
        assert!(host.payload_too_large);
        assert_eq!(host.local_reply.as_ref().map(|r| r.status), Some(413));
        assert!(host.violations.is_empty());
    }

    #[test]
    fn envoy_resets_for_response_bytes_it_buffers_past_its_limit() {
        let mut host = host_in(Phase::ResponseBody {
            end_of_stream: false,
        });
        host.buffer_limit = Some(4);
        // A chunk that goes on is never counted, even replaced by more.
        host.response.body = b"abcdefgh".to_vec();
        assert_eq!(host.set_body(Body::Response, 0, 8, b"0123456789"), Ok(()));
        host.finish(Action::Continue);
        assert!(!host.response_too_large && !host.reset);
        // An emptied chunk that pauses buffers nothing.
        host.phase = Phase::ResponseBody {
            end_of_stream: false,
        };
        host.response.body = b"abcdefgh".to_vec();
        assert_eq!(host.set_body(Body::Response, 0, 8, b""), Ok(()));
        host.finish(Action::Pause);
        assert!(!host.response_too_large);
        // Written into the buffered body past the limit: Envoy resets the stream.
        host.phase = Phase::ResponseBody {
            end_of_stream: true,
        };
        assert_eq!(host.set_body(Body::Response, 0, 0, b"hello"), Ok(()));
        assert!(host.response_too_large && host.reset);
        assert_eq!(host.response_buffered_peak, 5);
        assert!(host.violations.is_empty());
    }

    #[test]
    fn nothing_exists_between_callbacks() {
        let mut host = MockHost::default();
        assert_eq!(host.headers(Map::RequestHeaders), Err(Status::BadArgument));
        assert_eq!(host.plugin_configuration(), Ok(None));
        assert_eq!(host.violations.len(), 2);
        assert_eq!(host.calls.len(), 2, "every call is recorded");
    }
}
