//! The verified claims Envoy's jwt_authn forwards (`forward_payload_header`): the
//! token's payload, base64url without padding, as Envoy received it.
use base64::Engine;

/// The value of one claim: a string (or a number, as its decimal text).
pub fn claim(header: &[u8], name: &str) -> Result<String, String> {
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header.trim_ascii())
        .map_err(|_| "the verified token's claims are not base64url".to_owned())?;
    let payload: serde_json::Value = serde_json::from_slice(&json)
        .map_err(|_| "the verified token's claims are not JSON".to_owned())?;
    let Some(claims) = payload.as_object() else {
        return Err("the verified token's claims are not a JSON object".to_owned());
    };
    match claims.get(name) {
        Some(serde_json::Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(serde_json::Value::Number(n)) => Ok(n.to_string()),
        _ => Err(format!(
            "the token has no `{name}` claim naming the account to use"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> Vec<u8> {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(s)
            .into_bytes()
    }

    #[test]
    fn reads_one_claim() {
        let h = b64(r#"{"iss":"i","ferry_account":"app","n":7}"#);
        assert_eq!(claim(&h, "ferry_account").unwrap(), "app");
        assert_eq!(claim(&h, "n").unwrap(), "7");
        assert!(claim(&h, "sub").unwrap_err().contains("no `sub` claim"));
        assert!(claim(b"!!", "x").unwrap_err().contains("base64url"));
        assert!(claim(&b64("[1]"), "x")
            .unwrap_err()
            .contains("not a JSON object"));
        assert!(claim(&b64("{"), "x").unwrap_err().contains("not JSON"));
        assert!(claim(&b64(r#"{"x":""}"#), "x").is_err());
    }
}
