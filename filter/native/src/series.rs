//! Metrics: the adapter defines one metric per label set, named
//! `ferry_requests_total;rpc=Execute;protocol=...` (proxy-wasm's way: Envoy's tag
//! extraction splits the name). A dynamic module defines labelled metrics once, at
//! configuration time (Envoy freezes definitions after `on_http_filter_config_new`),
//! and names the label values at each increment. So the module defines the counter
//! and the histogram with `ferry_filter_core::metrics::LABELS` up front, and maps each
//! name the adapter defines to (which metric, its label values).

use ferry_filter_core::metrics::{DURATION, LABELS, REQUESTS};

/// Which of the two labelled metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Requests,
    Duration,
}

/// One series: a metric and its label values, in `LABELS` order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Series {
    pub metric: Metric,
    pub values: Vec<String>,
}

/// Parses a name the adapter defines; `None` if it is not one of ours or its labels
/// are not `LABELS`, in order.
pub fn parse(name: &str) -> Option<Series> {
    let (metric, rest) = if let Some(rest) = name.strip_prefix(REQUESTS) {
        (Metric::Requests, rest)
    } else if let Some(rest) = name.strip_prefix(DURATION) {
        (Metric::Duration, rest)
    } else {
        return None;
    };
    let rest = rest.strip_prefix(';')?;
    let mut values = Vec::with_capacity(LABELS.len());
    let mut pairs = rest.split(';');
    for label in LABELS {
        let (name, value) = pairs.next()?.split_once('=')?;
        if name != label {
            return None;
        }
        values.push(value.to_string());
    }
    if pairs.next().is_some() {
        return None;
    }
    Some(Series { metric, values })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_adapters_names_become_label_values() {
        let name = format!(
            "{REQUESTS};rpc=Execute;protocol=connect;codec=json;http=h2;class=read;target=replica;code=ok"
        );
        let series = parse(&name).unwrap();
        assert_eq!(series.metric, Metric::Requests);
        assert_eq!(
            series.values,
            ["Execute", "connect", "json", "h2", "read", "replica", "ok"]
        );
        let name = format!(
            "{DURATION};rpc=Execute;protocol=grpc;codec=proto;http=h3;class=write;target=primary;code=internal"
        );
        assert_eq!(parse(&name).unwrap().metric, Metric::Duration);
    }

    #[test]
    fn other_names_are_refused() {
        assert_eq!(parse("other;rpc=x"), None);
        assert_eq!(parse(REQUESTS), None, "no labels");
        let short = format!("{REQUESTS};rpc=Execute;protocol=connect");
        assert_eq!(parse(&short), None);
        let swapped = format!(
            "{REQUESTS};protocol=connect;rpc=Execute;codec=json;http=h2;class=read;target=replica;code=ok"
        );
        assert_eq!(parse(&swapped), None);
        let long = format!(
            "{REQUESTS};rpc=Execute;protocol=connect;codec=json;http=h2;class=read;target=replica;code=ok;x=y"
        );
        assert_eq!(parse(&long), None);
    }

    #[test]
    fn the_adapters_own_labels_parse() {
        use ferry_filter_core::metrics::Labels;
        use ferry_filter_core::route_class::Class;
        let labels = Labels {
            rpc: "Execute",
            protocol: "connect",
            codec: "json",
            http: "h2",
            class: Class::Read,
            target: "replica",
            code: None,
        };
        let series = parse(&format!("{REQUESTS}{}", labels.series())).unwrap();
        assert_eq!(series.values.len(), LABELS.len());
    }
}
