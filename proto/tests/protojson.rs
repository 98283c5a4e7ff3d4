//! The protojson shapes real clients send and parse (see reference/psdb-api.md).
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse};
use ferry_proto::vitess::query::{Field, QueryResult, Row, Type};

#[test]
fn database_js_request_with_null_session_and_unknown_fields() {
    let req: ExecuteRequest =
        serde_json::from_str(r#"{"query":"SELECT 1","session":null,"somethingNew":{"x":1}}"#)
            .unwrap();
    assert_eq!(req.query, "SELECT 1");
    assert!(req.session.is_none());
}

#[test]
fn result_uses_camel_case_strings_for_64_bit_and_omits_defaults() {
    let resp = ExecuteResponse {
        result: Some(QueryResult {
            fields: vec![
                Field {
                    name: "a".into(),
                    r#type: Type::Int64 as i32,
                    column_length: 20,
                    ..Default::default()
                },
                Field {
                    name: "n".into(),
                    ..Default::default()
                },
            ],
            rows_affected: 3,
            insert_id: 7,
            rows: vec![Row {
                lengths: vec![1, -1],
                values: b"1".to_vec(),
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let v: serde_json::Value = serde_json::to_value(&resp).unwrap();
    let r = &v["result"];
    assert_eq!(r["rowsAffected"], "3");
    assert_eq!(r["insertId"], "7");
    assert_eq!(r["fields"][0]["type"], "INT64");
    assert_eq!(r["fields"][0]["columnLength"], 20);
    assert!(
        r["fields"][1].get("type").is_none(),
        "NULL_TYPE is a default and is omitted"
    );
    assert_eq!(r["rows"][0]["lengths"], serde_json::json!(["1", "-1"]));
    assert_eq!(r["rows"][0]["values"], "MQ==");
    assert!(v.get("error").is_none());
    assert!(v.get("timing").is_none());
}

#[test]
fn session_options_are_vitess_enums_and_round_trip() {
    use ferry_proto::vitess::query::execute_options::{TransactionIsolation, Workload};
    use ferry_proto::vitess::vtgate::Session;
    use prost::Message;
    let json = serde_json::json!({
        "autocommit": true,
        "options": {
            "includedFields": "ALL",
            "workload": "OLAP",
            "sqlSelectLimit": "10",
            "transactionIsolation": "READ_COMMITTED"
        }
    });
    let s: Session = serde_json::from_value(json.clone()).unwrap();
    let o = s.options.as_ref().unwrap();
    assert_eq!(o.workload, Workload::Olap as i32);
    assert_eq!(
        o.transaction_isolation,
        TransactionIsolation::ReadCommitted as i32
    );
    // proto bytes and back, then JSON again: nothing lost.
    let again = Session::decode(s.encode_to_vec().as_slice()).unwrap();
    assert_eq!(again, s);
    assert_eq!(serde_json::to_value(&again).unwrap(), json);
    // The enum is a varint on the wire, as the int64 it replaced: old bytes still read.
    assert_eq!(
        Workload::Olap as i32,
        2,
        "vitess ExecuteOptions.Workload numbering"
    );
}
