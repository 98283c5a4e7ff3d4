//! Whether Envoy lets this filter hold headers, and how the filter finds out.
//!
//! A proxy-wasm filter holds a request's (or an answer's) headers by pausing its
//! headers callback. Envoy 1.40 keeps the body callbacks coming meanwhile only when the
//! wasm filter's config says `allow_on_headers_stop_iteration: true`; without it the
//! pause becomes `StopAllIterationAndWatermark`, which stops the body callbacks too, and
//! a filter that waits for the body to release the headers waits forever. Istio's
//! `WasmPlugin` and Envoy Gateway's `EnvoyExtensionPolicy` cannot set that flag, and the
//! plugin cannot read its own filter config, so the filter detects it (`header_hold:
//! "auto"`, the default) or is told not to try (`"off"`).
//!
//! What needs the hold: body-based routing, decided before the router picks an upstream
//! — the statement's class (`x-ferry-class`: reads to replicas, retries of safe reads)
//! and session affinity across several shims (`x-ferry-host`) — and, on the way back,
//! the sample that decides whether a Connect unary answer is worth compressing. Without
//! it every request goes on at once as class `write` (the primary, never retried), a
//! pinned session reaching a shim that does not hold it is refused by that shim
//! (nothing runs), and answers the client accepts compressed are compressed from their
//! size alone.
//!
//! Detection, per VM (one per Envoy worker): until it is known, a request that wants
//! the hold takes it and becomes a probe. A body callback while a probe's headers are
//! held proves the hold works. Proof that it does not: the stream has received body
//! bytes from the client (Envoy's `request.total_size` grew past its value at the
//! headers) and still no body callback came; the root context's timer looks at every
//! probe a few times a second, and then releases them all (their headers go on as in
//! the no-hold mode; they are told so at their next callback). A client that sends no
//! body proves nothing either way, so a slow client never makes a working hold look
//! missing. Answers hold their headers only once the hold is known to work.

/// The `header_hold` setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Setting {
    /// Find out from the first streams that hold their request headers.
    #[default]
    Auto,
    /// Never hold headers (for hosts that cannot set `allow_on_headers_stop_iteration`).
    Off,
}

impl Setting {
    /// The setting's value as written in the configuration.
    pub fn parse(value: &str) -> Option<Setting> {
        match value {
            "auto" => Some(Setting::Auto),
            "off" => Some(Setting::Off),
            _ => None,
        }
    }

    /// The value as written in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            Setting::Auto => "auto",
            Setting::Off => "off",
        }
    }
}

/// What the filter knows about the hold when a stream starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Hold {
    /// Envoy keeps body callbacks coming while headers are held.
    #[default]
    Works,
    /// Not known yet: request headers may be held (as probes), answers' may not.
    Unknown,
    /// No holding (detected, or `header_hold: "off"`).
    Missing,
}

impl Hold {
    /// Request headers may be held.
    pub fn request(self) -> bool {
        self != Hold::Missing
    }

    /// Response headers may be held.
    pub fn response(self) -> bool {
        self == Hold::Works
    }
}

/// A stream whose request headers are held while the hold is unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Probe {
    context: u32,
    /// `request.total_size` when its headers were held (headers only, no body yet).
    baseline: u64,
}

/// What the detection learnt from an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learnt {
    Nothing,
    /// The hold works (a body callback came while headers were held).
    Works,
    /// The hold does not work (body bytes arrived and no body callback came).
    Missing,
}

/// The detection state of one VM (shared by its root and its streams).
#[derive(Debug)]
pub struct Detector {
    state: Hold,
    probes: Vec<Probe>,
    /// Probes whose headers the root released; each is told at its next callback.
    released: Vec<u32>,
}

impl Default for Detector {
    /// `header_hold: "auto"`.
    fn default() -> Self {
        Detector::new(Setting::Auto)
    }
}

impl Detector {
    pub fn new(setting: Setting) -> Self {
        Detector {
            state: match setting {
                Setting::Auto => Hold::Unknown,
                Setting::Off => Hold::Missing,
            },
            probes: Vec::new(),
            released: Vec::new(),
        }
    }

    /// What a new stream may do.
    pub fn state(&self) -> Hold {
        self.state
    }

    /// Probes are waiting for a verdict (the root's timer must run).
    pub fn pending(&self) -> bool {
        !self.probes.is_empty()
    }

    /// A stream held its request headers; `baseline` is its `request.total_size` then.
    /// Returns whether it became a probe (only while the hold is unknown).
    pub fn held(&mut self, context: u32, baseline: u64) -> bool {
        if self.state != Hold::Unknown {
            return false;
        }
        self.probes.retain(|p| p.context != context);
        self.probes.push(Probe { context, baseline });
        true
    }

    /// A body (or trailers) callback of `context` came. While its headers are held
    /// that proves the hold works.
    pub fn body_arrived(&mut self, context: u32) -> Learnt {
        let was_probe = self.forget(context);
        if was_probe && self.state == Hold::Unknown {
            self.state = Hold::Works;
            self.probes.clear();
            return Learnt::Works;
        }
        Learnt::Nothing
    }

    /// The stream ended (or no longer holds its headers). Whether it was a probe.
    pub fn forget(&mut self, context: u32) -> bool {
        self.released.retain(|&c| c != context);
        let before = self.probes.len();
        self.probes.retain(|p| p.context != context);
        self.probes.len() != before
    }

    /// The root's timer: `received(context)` is the stream's `request.total_size` now
    /// (`None`: the stream is gone). A probe that has received body bytes without a
    /// body callback proves the hold missing: every probe is then released (returned:
    /// the root resumes each; each is told by [`Detector::take_released`]).
    pub fn check(&mut self, mut received: impl FnMut(u32) -> Option<u64>) -> (Learnt, Vec<u32>) {
        if self.state != Hold::Unknown {
            return (Learnt::Nothing, Vec::new());
        }
        let mut missing = false;
        self.probes.retain(|probe| match received(probe.context) {
            None => false,
            Some(now) => {
                missing |= now > probe.baseline;
                true
            }
        });
        if !missing {
            return (Learnt::Nothing, Vec::new());
        }
        self.state = Hold::Missing;
        let released: Vec<u32> = self.probes.drain(..).map(|p| p.context).collect();
        self.released.extend(released.iter().copied());
        (Learnt::Missing, released)
    }

    /// Whether the root released this stream's held headers (told once).
    pub fn take_released(&mut self, context: u32) -> bool {
        let before = self.released.len();
        self.released.retain(|&c| c != context);
        self.released.len() != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_and_what_each_state_allows() {
        assert_eq!(Setting::parse("auto"), Some(Setting::Auto));
        assert_eq!(Setting::parse("off"), Some(Setting::Off));
        assert_eq!(Setting::parse("on"), None);
        assert_eq!(Detector::new(Setting::Auto).state(), Hold::Unknown);
        assert_eq!(Detector::new(Setting::Off).state(), Hold::Missing);
        assert!(Hold::Works.request() && Hold::Works.response());
        assert!(Hold::Unknown.request() && !Hold::Unknown.response());
        assert!(!Hold::Missing.request() && !Hold::Missing.response());
    }

    #[test]
    fn a_body_callback_while_held_proves_the_hold() {
        let mut d = Detector::new(Setting::Auto);
        assert!(d.held(7, 120));
        assert!(d.held(8, 130));
        assert!(d.pending());
        assert_eq!(d.body_arrived(7), Learnt::Works);
        assert_eq!(d.state(), Hold::Works);
        assert!(!d.pending(), "the other probe needs no verdict any more");
        // Known: no more probes, nothing more to learn.
        assert!(!d.held(9, 100));
        assert_eq!(d.body_arrived(8), Learnt::Nothing);
        assert_eq!(d.check(|_| Some(1_000)), (Learnt::Nothing, Vec::new()));
    }

    #[test]
    fn body_bytes_without_a_body_callback_prove_it_missing_and_release_every_probe() {
        let mut d = Detector::new(Setting::Auto);
        d.held(1, 100);
        d.held(2, 200);
        d.held(3, 300);
        // No body bytes yet anywhere (a slow client): no verdict, nothing released.
        assert_eq!(
            d.check(|c| Some(u64::from(c) * 100)),
            (Learnt::Nothing, vec![])
        );
        assert_eq!(d.state(), Hold::Unknown);
        // Stream 3 is gone; stream 2 received body bytes its filter never saw.
        let (learnt, released) = d.check(|c| match c {
            1 => Some(100),
            2 => Some(260),
            _ => None,
        });
        assert_eq!(learnt, Learnt::Missing);
        assert_eq!(released, vec![1, 2]);
        assert_eq!(d.state(), Hold::Missing);
        assert!(!d.pending());
        assert!(d.take_released(2));
        assert!(!d.take_released(2), "told once");
        assert!(!d.take_released(3));
        // A released stream's later body callback teaches nothing.
        assert_eq!(d.body_arrived(1), Learnt::Nothing);
        assert_eq!(d.state(), Hold::Missing);
        assert!(!d.held(4, 10));
    }

    #[test]
    fn a_finished_probe_is_forgotten() {
        let mut d = Detector::new(Setting::Auto);
        d.held(5, 10);
        assert!(d.forget(5));
        assert!(!d.pending());
        assert_eq!(d.body_arrived(5), Learnt::Nothing);
        assert_eq!(d.state(), Hold::Unknown);
    }

    #[test]
    fn off_never_probes() {
        let mut d = Detector::new(Setting::Off);
        assert!(!d.held(1, 1));
        assert_eq!(d.check(|_| Some(99)), (Learnt::Nothing, vec![]));
    }
}
