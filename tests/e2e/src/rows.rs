//! Decoding vitess rows (lengths + concatenated values) into cells, as clients do.
use ferry_proto::vitess::query::{QueryResult, Row};

pub fn cells(row: &Row) -> Vec<Option<Vec<u8>>> {
    let mut at = 0usize;
    row.lengths
        .iter()
        .map(|&len| {
            if len < 0 {
                return None;
            }
            let end = at + len as usize;
            let cell = row.values[at..end].to_vec();
            at = end;
            Some(cell)
        })
        .collect()
}

/// All rows as text (lossy UTF-8), NULL as None.
pub fn text_rows(result: &QueryResult) -> Vec<Vec<Option<String>>> {
    result
        .rows
        .iter()
        .map(|r| {
            cells(r)
                .into_iter()
                .map(|c| c.map(|b| String::from_utf8_lossy(&b).into_owned()))
                .collect()
        })
        .collect()
}

/// Rows decoded from protojson (base64 values, lengths as strings).
pub fn json_rows(result: &serde_json::Value) -> Vec<Vec<Option<Vec<u8>>>> {
    let Some(rows) = result["rows"].as_array() else {
        return vec![];
    };
    rows.iter()
        .map(|r| {
            let row: Row = serde_json::from_value(r.clone()).expect("row protojson");
            cells(&row)
        })
        .collect()
}
