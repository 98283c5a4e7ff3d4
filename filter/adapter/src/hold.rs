//! The header hold's detection in the VM (`ferry_filter_core::header_hold` has the
//! rule): streams report holding their request headers and their body callbacks; the
//! root context's timer looks at the probes and, when Envoy proves not to hold headers
//! for this filter, lets their headers go on.
//!
//! The evidence is Envoy's `request.total_size` (the stream's received bytes plus its
//! headers' size): body bytes received while no body callback came. Verified on Envoy
//! 1.40 from outside: the config without `allow_on_headers_stop_iteration` logs the
//! warning below on its first `Execute` and answers it; with the flag it logs the info.

use std::cell::RefCell;

use ferry_filter_core::exchange::Exchange;
use ferry_filter_core::header_hold::{Detector, Learnt};

use crate::adapter::int_property;
use crate::host::Host;

/// The root's timer while probes wait for a verdict (ms): the longest a probe's headers
/// stay held after its body arrived, on an Envoy that does not hold them.
pub(crate) const TICK_MS: u32 = 20;

/// `request.total_size`: received bytes plus the headers' size.
fn total_size<H: Host>(host: &mut H) -> Option<u64> {
    int_property(host, &["request", "total_size"])
}

/// After the request headers callback: a stream that held its headers while the hold
/// is unknown becomes a probe, and the root's timer starts.
pub(crate) fn after_request_headers<H: Host>(
    host: &mut H,
    detector: &RefCell<Detector>,
    context: u32,
    exchange: &Exchange,
) {
    if !exchange.request_held() {
        return;
    }
    // Without the property no growth can be seen from 0: the first tick decides.
    let baseline = total_size(host).unwrap_or(0);
    let Ok(mut detector) = detector.try_borrow_mut() else {
        return;
    };
    let first = !detector.pending();
    if detector.held(context, baseline) && first {
        if let Err(status) = host.set_tick_period(TICK_MS) {
            log::warn!("header hold: the timer did not start: {status:?}");
        }
    }
}

/// Before a request body (or trailers) callback: a stream the root released learns
/// that its headers went on; a probe's body proves the hold.
pub(crate) fn before_request_body(
    detector: &RefCell<Detector>,
    context: u32,
    exchange: &mut Exchange,
) {
    let Ok(mut detector) = detector.try_borrow_mut() else {
        return;
    };
    if detector.take_released(context) {
        exchange.release_request_headers();
    } else if exchange.request_held() && detector.body_arrived(context) == Learnt::Works {
        log::info!(
            "header hold: Envoy holds request headers for this filter \
             (allow_on_headers_stop_iteration): class routing and session affinity on"
        );
    }
}

/// The stream is over.
pub(crate) fn done(detector: &RefCell<Detector>, context: u32) {
    if let Ok(mut detector) = detector.try_borrow_mut() {
        detector.forget(context);
    }
}

/// The root context's timer.
pub(crate) fn on_tick<H: Host>(host: &mut H, detector: &RefCell<Detector>, affinity: bool) {
    let Ok(mut detector) = detector.try_borrow_mut() else {
        return;
    };
    let (learnt, released) = detector.check(|context| {
        host.enter_stream(context).ok()?;
        Some(total_size(host).unwrap_or(0))
    });
    if learnt == Learnt::Missing {
        log::warn!(
            "header hold: Envoy does not hold request headers for this filter (its wasm \
             filter config lacks allow_on_headers_stop_iteration: true, as Istio's WasmPlugin \
             and Envoy Gateway's EnvoyExtensionPolicy do): going on without it. Requests are \
             not routed by class (no replica reads, no retried reads){}; set header_hold \
             \"off\" to skip this detection",
            if affinity {
                ", and session_affinity is off: a pinned session that reaches another shim is refused by it"
            } else {
                ""
            }
        );
    }
    for context in released {
        let resumed = host
            .enter_stream(context)
            .and_then(|()| host.resume_request());
        if let Err(status) = resumed {
            log::warn!("header hold: stream {context} could not be resumed: {status:?}");
        }
    }
    if !detector.pending() {
        if let Err(status) = host.set_tick_period(0) {
            log::warn!("header hold: the timer did not stop: {status:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use ferry_filter_core::config::Config;
    use ferry_filter_core::exchange::{RequestHead, RequestHeadersStep};
    use ferry_filter_core::header_hold::{Hold, Setting};

    use super::*;
    use crate::mock_host::MockHost;

    fn held_exchange(hold: Hold) -> Exchange {
        let mut ex = Exchange::new(Rc::new(Config::default())).with_hold(hold);
        let head = RequestHead {
            method: Some("POST".into()),
            path: Some("/psdb.v1alpha1.Database/Execute".into()),
            content_type: Some("application/json".into()),
            authorization: Some("Basic dXNlcjpwYXNz".into()),
            ..RequestHead::default()
        };
        let step = ex.on_request_headers(&head, false);
        assert!(matches!(step, RequestHeadersStep::Hold(_)), "{step:?}");
        ex
    }

    fn size(n: u64) -> Vec<u8> {
        n.to_le_bytes().to_vec()
    }

    #[test]
    fn a_body_callback_while_held_settles_it_and_stops_nothing_else() {
        let detector = RefCell::new(Detector::new(Setting::Auto));
        let mut host = MockHost::default();
        host.properties
            .push(("request.total_size".into(), size(180)));
        let mut ex = held_exchange(Hold::Unknown);
        after_request_headers(&mut host, &detector, 3, &ex);
        assert_eq!(host.tick_period, Some(TICK_MS));
        assert!(detector.borrow().pending());
        before_request_body(&detector, 3, &mut ex);
        assert_eq!(detector.borrow().state(), Hold::Works);
        assert!(ex.request_held(), "still held: its body decides its route");
        on_tick(&mut host, &detector, true);
        assert_eq!(host.tick_period, Some(0), "nothing left to watch");
        assert!(host.resumed.is_empty());
    }

    #[test]
    fn body_bytes_without_a_callback_release_every_watched_stream() {
        let detector = RefCell::new(Detector::new(Setting::Auto));
        let mut host = MockHost::default();
        host.properties
            .push(("request.total_size".into(), size(200)));
        let mut first = held_exchange(Hold::Unknown);
        let mut second = held_exchange(Hold::Unknown);
        after_request_headers(&mut host, &detector, 1, &first);
        after_request_headers(&mut host, &detector, 2, &second);
        // Nothing received yet: no verdict, the timer keeps running.
        host.streams = vec![(1, 200), (2, 200)];
        on_tick(&mut host, &detector, true);
        assert_eq!(detector.borrow().state(), Hold::Unknown);
        assert_eq!(host.tick_period, Some(TICK_MS));
        // Stream 2's body arrived in Envoy, and no callback came.
        host.streams = vec![(1, 200), (2, 260)];
        on_tick(&mut host, &detector, true);
        assert_eq!(detector.borrow().state(), Hold::Missing);
        assert_eq!(host.resumed, vec![1, 2]);
        assert_eq!(host.tick_period, Some(0));
        // Each learns at its next callback that its headers went on.
        before_request_body(&detector, 1, &mut first);
        before_request_body(&detector, 2, &mut second);
        assert!(!first.request_held() && !second.request_held());
    }

    #[test]
    fn a_stream_that_ended_is_not_watched() {
        let detector = RefCell::new(Detector::new(Setting::Auto));
        let mut host = MockHost::default();
        let ex = held_exchange(Hold::Unknown);
        after_request_headers(&mut host, &detector, 9, &ex);
        done(&detector, 9);
        assert!(!detector.borrow().pending());
        on_tick(&mut host, &detector, false);
        assert!(host.resumed.is_empty());
        assert_eq!(detector.borrow().state(), Hold::Unknown);
    }
}
